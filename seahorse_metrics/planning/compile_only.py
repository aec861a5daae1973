"""Compiling for an accelerator that is not here: its own compiler's memory figures.

JAX compiles for devices it is only told of ("compile-only devices"): for an
NVIDIA GPU through its CUDA plugin, given a description of the GPU (XLA's
`GpuTargetConfigProto`, as text), without the GPU, its driver or the CUDA
libraries; for a TPU slice through libtpu, given the slice's topology, without
a TPU. `plan --compile_for h100-80g` (or `tpu-v5e`, ...) uses them: the
trainer's step and the scorer's program are compiled by the compiler that will
run them, so the temporaries are that compiler's (its fusions, its layouts,
and the rematerialisation it does itself to stay inside the device's memory)
instead of XLA:CPU's stand-ins. What no compiled program shows still comes on
top on the device: the runtime's own reserve (a GPU's CUDA context, library
workspaces, the allocator's fragmentation), which `--memory_fraction` keeps
room for.

The compiler alone is enough (nothing runs). Kept in a folder of its own on
PYTHONPATH, it leaves the environment's other JAX programs alone (installed,
it makes every JAX process look for its device); V is jaxlib's version, L the
libtpu that `jax[tpu]==V` pins:

    pip install --no-deps --target DIR jax-cuda12-plugin==V jax-cuda12-pjrt==V
    pip install --no-deps --target DIR libtpu==L

Processes that compile this way start JAX with `JAX_PLATFORMS=cpu` (the
planning child does), so that the plugin registers for compiling without
looking for a device.

    devices = compile_only_devices("h100-80g", 8)   # in such a process
    mesh = partitioning.make_mesh(2, devices)       # plan_memory(config, mesh, ...)
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from typing import Any, Union

# The CUDA plugin packages JAX registers (`jax_plugins.*`), one per CUDA major.
_CUDA_PLUGINS = ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13")
# The most GPUs one host of a GPU topology holds (an HGX board).
_GPUS_PER_HOST = 8


@dataclasses.dataclass(frozen=True)
class GpuTarget:
    """What XLA:GPU needs to know of a GPU to compile for it (the SXM parts'
    published figures, as `nvidia-smi` and CUDA's device query report them).

    Attributes:
      description: The device kind JAX reports there ("NVIDIA H100 80GB HBM3").
      memory_bandwidth: Bytes/s of device memory.
      memory_bytes: Device memory as the driver reports it.
      compute_capability: (major, minor).
      cores: Streaming multiprocessors.
      fpus_per_core: FP32 lanes per multiprocessor.
      shared_memory_per_core: Bytes of shared memory per multiprocessor.
      shared_memory_per_block_optin: The most shared memory a block may opt into.
      l2_cache_bytes: L2 cache.
      clock_ghz: Boost clock.
    """

    description: str
    memory_bandwidth: int
    memory_bytes: int
    compute_capability: tuple[int, int]
    cores: int
    fpus_per_core: int
    shared_memory_per_core: int
    shared_memory_per_block_optin: int
    l2_cache_bytes: int
    clock_ghz: float

    platform = "gpu"

    def target_config(self) -> str:
        """The GPU as a `stream_executor.GpuTargetConfigProto` in text format."""
        major, minor = self.compute_capability
        info = {
            "threads_per_block_limit": 1024,
            "threads_per_warp": 32,
            "shared_memory_per_block": 48 * 1024,
            "shared_memory_per_core": self.shared_memory_per_core,
            "threads_per_core_limit": 2048,
            "core_count": self.cores,
            "fpus_per_core": self.fpus_per_core,
            "block_dim_limit_x": 2**31 - 1,
            "block_dim_limit_y": 65535,
            "block_dim_limit_z": 65535,
            "memory_bandwidth": self.memory_bandwidth,
            "l2_cache_size": self.l2_cache_bytes,
            "clock_rate_ghz": self.clock_ghz,
            "device_memory_size": self.memory_bytes,
            "shared_memory_per_block_optin": self.shared_memory_per_block_optin,
            "registers_per_core_limit": 65536,
            "registers_per_block_limit": 65536,
        }
        lines = ["gpu_device_info {"]
        lines += [f"  {key}: {value}" for key, value in info.items()]
        lines += [f"  cuda_compute_capability {{ major: {major} minor: {minor} }}", "}"]
        lines += [
            'platform_name: "CUDA"',
            # The cuDNN and CUDA runtime the compiled program may assume.
            "dnn_version_info { major: 9 minor: 8 }",
            "runtime_version { major: 12 minor: 8 }",
            f'device_description_str: "{self.description}"',
        ]
        return "\n".join(lines) + "\n"

    def topology(self, count: int) -> tuple[str, dict]:
        """The CUDA plugin's topology of `count` GPUs (slices x hosts x GPUs
        per host, up to `_GPUS_PER_HOST` per host) and its other arguments.

        Raises:
          ValueError: if more than one host's worth does not fill whole hosts.
        """
        if count <= _GPUS_PER_HOST:
            shape = f"1x1x{count}"
        elif count % _GPUS_PER_HOST:
            raise ValueError(
                f"{count} GPUs do not fill hosts of {_GPUS_PER_HOST}: compile for a "
                f"multiple of {_GPUS_PER_HOST}"
            )
        else:
            shape = f"1x{count // _GPUS_PER_HOST}x{_GPUS_PER_HOST}"
        return shape, {"target_config": self.target_config()}


@dataclasses.dataclass(frozen=True)
class TpuTarget:
    """A TPU generation as libtpu names its slices.

    Attributes:
      description: The device kind JAX reports there ("TPU v4").
      prefix: The generation in libtpu's topology names ("v4" in "v4:2x2x1").
      torus: Whether slices are 3-D tori (v4, v5p: one device per chip, the
        "megacore" configuration) or 2-D meshes (v5e).
    """

    description: str
    prefix: str
    torus: bool

    platform = "tpu"

    def topology(self, count: int) -> tuple[str, dict]:
        """libtpu's topology of a slice of `count` chips and its other
        arguments: the shapes Cloud TPU offers, growing the last of the
        shorter sides (2x2x1, 2x2x2, 2x2x4, 2x4x4, 4x4x4, ...; 1x1, 1x2, 2x2,
        2x4, 4x4, ...), with wraparound links from a whole 4x4x4 cube, or
        along a 2-D side of 16, on.

        Raises:
          ValueError: if no slice has `count` chips.
        """
        sizes = [2, 2, 1] if self.torus else [1, 1]
        while math.prod(sizes) < count:
            shorter = [i for i, size in enumerate(sizes) if size < max(sizes)]
            sizes[shorter[-1] if shorter else -1] *= 2
        if math.prod(sizes) != count:
            smallest = "4, 8, 16" if self.torus else "1, 2, 4"
            raise ValueError(
                f"{self.description} slices have {smallest}, ... chips (powers of two), not {count}"
            )
        if self.torus:
            wrap = (count >= 64,) * 3
        else:
            wrap = (sizes[0] >= 16, sizes[1] >= 16, False)
        return f"{self.prefix}:{'x'.join(map(str, sizes))}", {
            "chip_config_name": "megacore" if self.torus else "default",
            "chips_per_host_bounds": (min(2, sizes[0]), min(2, sizes[1]), 1),
            "num_slices": 1,
            "wrap": wrap,
        }


Target = Union[GpuTarget, TpuTarget]

# What the GPUs of one architecture share (SXM parts): compute capability,
# multiprocessors, FP32 lanes, shared memory per multiprocessor and per block,
# L2 cache, boost clock.
_AMPERE = dict(
    compute_capability=(8, 0),
    cores=108,
    fpus_per_core=64,
    shared_memory_per_core=167936,
    shared_memory_per_block_optin=166912,
    l2_cache_bytes=40 * 2**20,
    clock_ghz=1.41,
)
_HOPPER = dict(
    compute_capability=(9, 0),
    cores=132,
    fpus_per_core=128,
    shared_memory_per_core=233472,
    shared_memory_per_block_optin=232448,
    l2_cache_bytes=50 * 2**20,
    clock_ghz=1.98,
)

# The accelerators `plan --compile_for` knows, under `fitting.DEVICE_MEMORY`'s names:
# (device kind, memory bandwidth in bytes/s, memory in bytes as the driver reports it).
TARGETS: dict[str, Target] = {
    "a100-40g": GpuTarget("NVIDIA A100-SXM4-40GB", 1_555_200_000_000, 42_505_273_344, **_AMPERE),
    "a100-80g": GpuTarget("NVIDIA A100-SXM4-80GB", 2_039_040_000_000, 85_100_068_864, **_AMPERE),
    "h100-80g": GpuTarget("NVIDIA H100 80GB HBM3", 3_352_320_000_000, 84_929_347_584, **_HOPPER),
    "h200-141g": GpuTarget("NVIDIA H200", 4_800_000_000_000, 151_397_597_184, **_HOPPER),
    "tpu-v4": TpuTarget("TPU v4", "v4", torus=True),
    "tpu-v5e": TpuTarget("TPU v5 lite", "v5e", torus=False),
    "tpu-v5p": TpuTarget("TPU v5", "v5", torus=True),
}


def compiler_installed(target: Target) -> bool:
    """Whether the compiler `target` needs (JAX's CUDA plugin, libtpu) is importable."""
    names = _CUDA_PLUGINS if target.platform == "gpu" else ("libtpu",)
    try:
        return any(importlib.util.find_spec(name) is not None for name in names)
    except ModuleNotFoundError:  # no `jax_plugins` namespace at all
        return False


def check_target(name: str) -> Target:
    """The target `name` names, where this environment can compile for it.

    Raises:
      ValueError: naming the known targets, or the install the compiler needs.
    """
    if name not in TARGETS:
        raise ValueError(f"--compile_for {name!r}: choose one of {', '.join(sorted(TARGETS))}")
    target = TARGETS[name]
    if not compiler_installed(target):
        raise ValueError(
            f"--compile_for {name} compiles with XLA:{target.platform.upper()}, which needs "
            f"{_install_line(target)}, then run PYTHONPATH=DIR seahorse-metrics plan ... "
            "(no device needed: docs/guides/training.md)"
        )
    return target


def _install_line(target: Target) -> str:
    """The pip command that brings `target`'s compiler into a folder DIR."""
    import jax

    version = jax.__version__
    if target.platform == "gpu":
        packages = f"jax-cuda12-plugin=={version} jax-cuda12-pjrt=={version}"
        return f"JAX's CUDA plugin: pip install --no-deps --target DIR {packages}"
    from importlib import metadata

    pins = [
        requirement.split(";")[0].strip()
        for requirement in metadata.requires("jax") or []
        if requirement.startswith("libtpu") and 'extra == "tpu"' in requirement
    ]
    return f"libtpu: pip install --no-deps --target DIR {pins[0] if pins else 'libtpu'}"


def compile_only_devices(name: str, count: int) -> list[Any]:
    """`count` devices of the accelerator `name` that programs compile for
    (and never run on), in a process whose JAX started with `JAX_PLATFORMS=cpu`.

    Raises:
      ValueError: if the target is unknown, its compiler is missing or refuses,
        or it has no topology of `count` devices.
    """
    import jax
    from jax.experimental import topologies

    target = check_target(name)
    if count < 1:
        raise ValueError(f"a topology needs at least one device, got {count}")
    shape, arguments = target.topology(count)
    platform = "cuda" if target.platform == "gpu" else "tpu"
    try:
        if platform == "cuda":
            found = topologies.get_topology_desc(platform=platform, topology=shape, **arguments)
        else:
            found = topologies.get_topology_desc(shape, platform, **arguments)
    except (NotImplementedError, jax.errors.JaxRuntimeError) as error:
        raise ValueError(f"JAX cannot compile for {target.description} here: {error}") from error
    return list(found.devices)
