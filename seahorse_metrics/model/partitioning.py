"""Device mesh and logical-axis sharding rules (T5X's standard rules).

Parameters and activations carry logical axis names (`embed`, `mlp`, `heads`,
`vocab`, `batch`, ...); one rules table maps them onto the two mesh axes
`data` (batch parallelism) and `model` (tensor parallelism). The trainer and
the scorer both use these helpers::

    mesh = make_mesh(model_parallel=2)            # or mesh_from_spec("data=4,model=2")
    param_shardings = logical_to_sharding(model.param_logical_axes(), mesh)
    with sharding_context(mesh):
        ...  # activation constraints in the network take effect here

These are the only mesh helpers: the trainer, the scorer and `plan` use them.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Iterator, Optional, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"
MODEL_AXIS = "model"
HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"

# T5X `standard_logical_axis_rules()` with model parallelism over heads, mlp,
# vocab and the joined heads x kv axis.
LOGICAL_AXIS_RULES: tuple[tuple[str, Optional[str]], ...] = (
    ("batch", DATA_AXIS),
    ("vocab", MODEL_AXIS),
    ("mlp", MODEL_AXIS),
    ("heads", MODEL_AXIS),
    ("joined_kv", MODEL_AXIS),
    ("embed", None),
    ("kv", None),
    ("length", None),
    ("relpos_buckets", None),
    ("layers", None),
    ("stack", None),
)


def make_mesh(model_parallel: int = 1, devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """Builds a ('data', 'model') mesh over `devices` (default: all devices).

    Args:
      model_parallel: Devices per model replica (size of the 'model' axis).
      devices: Devices to use; the 'data' axis gets len(devices) // model_parallel.

    Raises:
      ValueError: if the device count is not a multiple of `model_parallel`.
    """
    devices = list(jax.devices() if devices is None else devices)
    if model_parallel < 1 or len(devices) % model_parallel:
        raise ValueError(
            f"model_parallel={model_parallel} must be >= 1 and divide the {len(devices)} devices "
            "(the size of the 'model' axis: TrainConfig.model_parallel, or --mesh model=M)"
        )
    shape = (len(devices) // model_parallel, model_parallel)
    try:
        device_grid = mesh_utils.create_device_mesh(shape, devices)
    except (AssertionError, NotImplementedError, ValueError):
        # Physical topologies the helper does not know (e.g. some CPU/GPU
        # layouts): fall back to the given device order.
        device_grid = np.asarray(devices, dtype=object).reshape(shape)
    return Mesh(device_grid, (DATA_AXIS, MODEL_AXIS))


def parse_mesh_spec(spec: str) -> dict[str, int]:
    """Reads `data=D,model=M` (either part may be left out) as {"data": D, "model": M}.

    Raises:
      ValueError: naming the part that is not `data=N` or `model=N` with N >= 1.
    """
    sizes: dict[str, int] = {}
    for part in (p.strip() for p in str(spec).split(",")):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in (DATA_AXIS, MODEL_AXIS) or name in sizes:
            raise ValueError(
                f"mesh {spec!r}: {part!r} is not data=N or model=N (each at most "
                "once), e.g. --mesh data=2,model=4"
            )
        try:
            sizes[name] = int(value)
        except ValueError:
            sizes[name] = 0
        if sizes[name] < 1:
            raise ValueError(
                f"mesh {spec!r}: {name} must be a positive integer, got {value.strip()!r}"
            )
    return sizes


def mesh_from_spec(spec: Optional[str], devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """A ('data', 'model') mesh from `data=D,model=M`.

    Without `data`, every device is used (`data` = devices // model); without
    `model`, it is 1. The mesh takes the first data x model devices.

    Args:
      spec: e.g. "data=2,model=4", "model=8"; None or "" gives all devices on `data`.
      devices: Devices to use (default: all devices).

    Raises:
      ValueError: if the spec is malformed or asks for more devices than there are.
    """
    devices = list(jax.devices() if devices is None else devices)
    sizes = parse_mesh_spec(spec) if spec else {}
    model = sizes.get(MODEL_AXIS, 1)
    data = sizes.get(DATA_AXIS, max(1, len(devices) // model))
    if data * model > len(devices):
        raise ValueError(
            f"mesh {spec!r} needs {data} x {model} = {data * model} devices, but "
            f"{len(devices)} are available ({devices[0].platform})"
        )
    return make_mesh(model_parallel=model, devices=devices[: data * model])


@contextlib.contextmanager
def sharding_context(mesh: Mesh) -> Iterator[None]:
    """The mesh and logical axis rules under which the network's activation
    sharding constraints apply (training, scoring and `plan` alike)."""
    with jax.set_mesh(mesh), nn.logical_axis_rules(list(LOGICAL_AXIS_RULES)):
        yield


def logical_to_sharding(
    logical_specs_tree: Any,
    mesh: Mesh,
    rules: Sequence[tuple[str, Optional[str]]] = LOGICAL_AXIS_RULES,
) -> Any:
    """Maps a pytree of logical `PartitionSpec`s to `NamedSharding`s on `mesh`."""
    return nn.logical_to_mesh_sharding(logical_specs_tree, mesh, list(rules))


def data_sharding(mesh: Mesh) -> NamedSharding:
    """Sharding of batch arrays: the leading (batch) axis split over 'data'."""
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def split_host_cpu(count: int) -> None:
    """Has XLA:CPU present this machine's CPU as `count` devices.

    A batch split over them (the scorer's default mesh puts every local
    device on `data`) then runs as `count` programs side by side, as
    CTranslate2's batches do on one core each (mT5-small float32 scoring
    ran 1.0-1.1x faster with 2 on a 2-core CPU). Each device holds its own
    copy of the parameters. Where JAX runs on an accelerator, nothing
    changes. Call it before anything starts JAX's backends: XLA reads the
    count once.

    Raises:
      ValueError: if count < 1, XLA_FLAGS already asks for another count,
        or JAX's backends have started.
    """
    from jax._src import xla_bridge

    if count < 1:
        raise ValueError(f"--cpu_devices must be at least 1, got {count}")
    flags = os.environ.get("XLA_FLAGS", "")
    asked = re.search(re.escape(HOST_DEVICES_FLAG) + r"=(\d+)", flags)
    if asked and int(asked.group(1)) != count:
        raise ValueError(
            f"--cpu_devices {count}, but XLA_FLAGS already has {asked.group(0)}: give one of them"
        )
    if asked or count == 1:
        return
    if xla_bridge.backends_are_initialized():
        raise ValueError(
            "--cpu_devices must be set before JAX starts its backends (here they "
            f"had started): set XLA_FLAGS={HOST_DEVICES_FLAG}={count} instead"
        )
    os.environ["XLA_FLAGS"] = with_host_devices(flags, count)


def with_host_devices(flags: str, count: int) -> str:
    """`flags` (an XLA_FLAGS value) with XLA:CPU asked for `count` devices."""
    return f"{flags} {HOST_DEVICES_FLAG}={int(count)}".strip()
