"""Compiling for an NVIDIA GPU that is not here: XLA:GPU's own memory figures.

JAX's CUDA plugin compiles for a GPU it is given a description of (XLA's
`GpuTargetConfigProto`, as text) without that GPU, its driver or the CUDA
libraries being present. `plan --compile_for h100-80g` uses it: the trainer's
step and the scorer's program are compiled by the compiler that will run them,
so the temporaries are XLA:GPU's (its fusions, its layouts, and the
rematerialisation it does itself to stay inside the device's memory) instead
of XLA:CPU's stand-ins. What no compiled program shows still comes on top on
the device: the CUDA context, library workspaces, the allocator's
fragmentation (`--memory_fraction` keeps room for them).

The plugin alone is enough, no CUDA wheels (nothing runs); kept in a folder
of its own on PYTHONPATH, it leaves the environment's other JAX programs
alone (installed, it makes every JAX process look for a GPU):

    pip install --no-deps --target DIR jax-cuda12-plugin==V jax-cuda12-pjrt==V   # V: jaxlib's

Processes that compile this way must start JAX with `JAX_PLATFORMS=cpu`
(the planning child does): the plugin then registers for compiling without
looking for a GPU.

    devices = compile_only_devices("h100-80g", 8)   # in such a process
    mesh = partitioning.make_mesh(2, devices)       # plan_memory(config, mesh, ...)
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

# The plugin packages JAX registers (`jax_plugins.*`), one per CUDA major.
_PLUGINS = ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13")
# The most GPUs one host of a topology holds (an HGX board).
_GPUS_PER_HOST = 8


@dataclasses.dataclass(frozen=True)
class GpuTarget:
    """What XLA:GPU needs to know of a GPU to compile for it (the SXM parts'
    published figures, as `nvidia-smi` and CUDA's device query report them).

    Attributes:
      description: The device kind JAX reports there ("NVIDIA H100 80GB HBM3").
      compute_capability: (major, minor).
      cores: Streaming multiprocessors.
      fpus_per_core: FP32 lanes per multiprocessor.
      shared_memory_per_core: Bytes of shared memory per multiprocessor.
      shared_memory_per_block_optin: The most shared memory a block may opt into.
      l2_cache_bytes: L2 cache.
      memory_bandwidth: Bytes/s of device memory.
      clock_ghz: Boost clock.
      memory_bytes: Device memory as the driver reports it.
    """

    description: str
    compute_capability: tuple[int, int]
    cores: int
    fpus_per_core: int
    shared_memory_per_core: int
    shared_memory_per_block_optin: int
    l2_cache_bytes: int
    memory_bandwidth: int
    clock_ghz: float
    memory_bytes: int

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


# The GPUs `plan --compile_for` knows, under `fitting.DEVICE_MEMORY`'s names.
TARGETS = {
    "a100-40g": GpuTarget(
        "NVIDIA A100-SXM4-40GB", (8, 0), 108, 64, 167936, 166912, 40 * 2**20,
        1_555_200_000_000, 1.41, 42_505_273_344,
    ),
    "a100-80g": GpuTarget(
        "NVIDIA A100-SXM4-80GB", (8, 0), 108, 64, 167936, 166912, 40 * 2**20,
        2_039_040_000_000, 1.41, 85_100_068_864,
    ),
    "h100-80g": GpuTarget(
        "NVIDIA H100 80GB HBM3", (9, 0), 132, 128, 233472, 232448, 50 * 2**20,
        3_352_320_000_000, 1.98, 84_929_347_584,
    ),
    "h200-141g": GpuTarget(
        "NVIDIA H200", (9, 0), 132, 128, 233472, 232448, 50 * 2**20,
        4_800_000_000_000, 1.98, 151_397_597_184,
    ),
}  # fmt: skip


def plugin_installed() -> bool:
    """Whether JAX's CUDA plugin (any CUDA major) is importable here."""
    try:
        return any(importlib.util.find_spec(name) is not None for name in _PLUGINS)
    except ModuleNotFoundError:  # no `jax_plugins` namespace at all
        return False


def check_target(name: str) -> GpuTarget:
    """The target `name` names, where this environment can compile for it.

    Raises:
      ValueError: naming the known targets, or the install the plugin needs.
    """
    if name not in TARGETS:
        raise ValueError(f"--compile_for {name!r}: choose one of {', '.join(sorted(TARGETS))}")
    if not plugin_installed():
        import jax

        version = jax.__version__
        raise ValueError(
            f"--compile_for {name} compiles with XLA:GPU, which needs JAX's CUDA plugin "
            f"(no GPU, driver or CUDA libraries): pip install --no-deps --target DIR "
            f"jax-cuda12-plugin=={version} jax-cuda12-pjrt=={version}, then run "
            "PYTHONPATH=DIR seahorse-metrics plan ... (docs/guides/training.md)"
        )
    return TARGETS[name]


def topology(count: int) -> str:
    """The plugin's topology string for `count` GPUs: slices x hosts x GPUs
    per host, up to `_GPUS_PER_HOST` per host.

    Raises:
      ValueError: if more than one host's worth does not fill whole hosts.
    """
    if count < 1:
        raise ValueError(f"a GPU topology needs at least one GPU, got {count}")
    if count <= _GPUS_PER_HOST:
        return f"1x1x{count}"
    if count % _GPUS_PER_HOST:
        raise ValueError(
            f"{count} GPUs do not fill hosts of {_GPUS_PER_HOST}: compile for a multiple "
            f"of {_GPUS_PER_HOST}"
        )
    return f"1x{count // _GPUS_PER_HOST}x{_GPUS_PER_HOST}"


def compile_only_devices(name: str, count: int) -> list[Any]:
    """`count` devices of the GPU `name` that programs compile for (and never
    run on), in a process whose JAX started with `JAX_PLATFORMS=cpu`.

    Raises:
      ValueError: if the target is unknown, the plugin is missing or refuses.
    """
    import jax
    from jax.experimental import topologies

    target = check_target(name)
    try:
        found = topologies.get_topology_desc(
            platform="cuda", target_config=target.target_config(), topology=topology(count)
        )
    except (NotImplementedError, jax.errors.JaxRuntimeError) as error:
        raise ValueError(
            f"JAX's CUDA plugin cannot compile for {target.description} here: {error}"
        ) from error
    return list(found.devices)
