"""This project's checkpoints: an Orbax PyTree of the parameters plus the config.

Layout of one checkpoint directory::

    <dir>/seahorse_config.json   T5Config.to_dict(), written last (marks it complete)
    <dir>/params/                Orbax PyTree checkpoint of the float32 parameters

`save_checkpoint(..., step=N)` writes that into `<dir>/checkpoint_N/`, and
loading a directory that holds such step directories picks the latest one.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, Mapping, Optional

import numpy as np

from seahorse_metrics.checkpoints.params import (
    CheckpointError,
    check_config_values,
    check_layer_claims,
    check_params,
    flatten,
    numpy_dtype,
    reading,
    unflatten,
)
from seahorse_metrics.checkpoints.readers import read_json_object
from seahorse_metrics.checkpoints.streaming import (
    Convert,
    converted,
    param_shardings,
    release,
    trim_heap,
)
from seahorse_metrics.checkpoints.t5x_orbax import checked_arrays
from seahorse_metrics.io.atomic import write_json_atomically
from seahorse_metrics.io.json_files import read_json_or_none
from seahorse_metrics.model.config import T5Config

logger = logging.getLogger(__name__)

CONFIG_FILE = "seahorse_config.json"
PARAMS_DIR = "params"
ORBAX_METADATA_FILE = "_METADATA"
_STEP_DIR = re.compile(r"^checkpoint_(\d+)$")
TRIM_MIN_BYTES = 1 << 20
TRIM_PARTS = 64


def find_checkpoint_dir(path: str) -> Optional[str]:
    """Returns `path` if it is one of our checkpoints, else its latest
    `checkpoint_<step>` that is, else None."""
    if os.path.isfile(os.path.join(path, CONFIG_FILE)):
        return path
    if not os.path.isdir(path):
        return None
    steps = sorted(
        int(m.group(1))
        for name in os.listdir(path)
        for m in [_STEP_DIR.match(name)]
        if m and os.path.isfile(os.path.join(path, name, CONFIG_FILE))
    )
    return os.path.join(path, f"checkpoint_{steps[-1]}") if steps else None


def is_ours(path: str) -> bool:
    """Whether `path` is (or holds step directories of) our checkpoint format."""
    return find_checkpoint_dir(path) is not None


def save_checkpoint(
    directory: str, config: T5Config, params: Mapping[str, Any], step: Optional[int] = None
) -> str:
    """Saves `params` and `config`; returns the checkpoint directory written.

    Args:
      directory: Where to write; with `step`, into `directory/checkpoint_<step>`.
      config: The network config, saved as `seahorse_config.json`.
      params: The parameter pytree (numpy or jax arrays, possibly sharded).
      step: Optional training step naming a step subdirectory.

    Raises:
      CheckpointError: if `params` do not fit `config`.
      FileExistsError: if the checkpoint directory already holds a checkpoint.
    """
    import jax
    import orbax.checkpoint as ocp

    check_params(config, flatten(params), "params to save")
    target = os.path.abspath(
        directory if step is None else os.path.join(directory, f"checkpoint_{int(step)}")
    )
    if os.path.exists(os.path.join(target, CONFIG_FILE)) or os.path.exists(
        os.path.join(target, PARAMS_DIR)
    ):
        raise FileExistsError(
            f"{target} already holds a checkpoint; choose another directory or step"
        )
    os.makedirs(target, exist_ok=True)
    checkpointer = ocp.PyTreeCheckpointer()
    checkpointer.save(os.path.join(target, PARAMS_DIR), params)
    # Every process takes part in the (collective) Orbax save; one writes the
    # config, or two hosts would race on the same temporary file.
    if jax.process_index() == 0:
        write_json_atomically(os.path.join(target, CONFIG_FILE), config.to_dict(), sort_keys=True)
    logger.info("Saved checkpoint to %s", target)
    return target


def load_config(checkpoint_dir: str) -> T5Config:
    """Reads `seahorse_config.json` of a checkpoint directory."""
    path = os.path.join(checkpoint_dir, CONFIG_FILE)
    values = read_json_object(path)
    check_config_values(values, path)
    try:
        return T5Config.from_dict(values)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: not a valid T5Config ({error})") from error


def checked_config(checkpoint_dir: str) -> T5Config:
    """`load_config`, with its layer counts checked against the tensors the
    parameter metadata lists (nothing is built from an unchecked claim)."""
    import orbax.checkpoint as ocp

    config = load_config(checkpoint_dir)
    params_dir = os.path.abspath(os.path.join(checkpoint_dir, PARAMS_DIR))
    with _reading_params(params_dir):
        tree = ocp.PyTreeCheckpointer().metadata(params_dir).item_metadata.tree
    check_layer_claims(config, flatten(tree), os.path.join(checkpoint_dir, CONFIG_FILE))
    return config


def _reading_params(params_dir: str):
    """`reading` of the Orbax parameters, naming `_METADATA` when that is the
    damaged file (Orbax then returns no metadata) and the OCDBT database
    (`manifest.ocdbt` and the `d/` data files) otherwise."""
    metadata_file = os.path.join(params_dir, ORBAX_METADATA_FILE)
    if read_json_or_none(metadata_file) is None:
        return reading(metadata_file)
    return reading(params_dir, "parameter database (manifest.ocdbt and the d/ data files)")


def load_ours(
    path: str, dtype: Optional[str] = None, mesh: Any = None, convert: Optional[Convert] = None
) -> tuple[T5Config, dict]:
    """Loads our checkpoint (or the latest step under `path`).

    Orbax restores each array straight into the requested dtype and, with a
    mesh, into its sharding (each device reads its own box); names and
    shapes are checked from the checkpoint's metadata first.

    Args:
      path: A checkpoint directory, or a run directory with checkpoint_<step>/.
      dtype: Parameter dtype ("float32" by default, or "bfloat16").
      mesh: A ('data', 'model') mesh to place the parameters on by their
        logical axes; None returns host numpy arrays.
      convert: See `streaming.materialise`: the parameters are then restored
        one at a time, each converted before the next is read.

    Returns:
      (config, nested params).
    """
    import orbax.checkpoint as ocp

    checkpoint_dir = find_checkpoint_dir(path)
    if checkpoint_dir is None:
        raise FileNotFoundError(f"{path}: no {CONFIG_FILE} (nor checkpoint_<step>/ holding one)")
    config = load_config(checkpoint_dir)
    # Orbax resolves relative paths against its own notion of the working
    # directory and then finds no metadata; hand it an absolute path.
    params_dir = os.path.abspath(os.path.join(checkpoint_dir, PARAMS_DIR))
    if not os.path.isdir(params_dir):
        raise FileNotFoundError(
            f"{checkpoint_dir}: the Orbax parameter directory {PARAMS_DIR}/ is missing"
        )
    checkpointer = ocp.PyTreeCheckpointer()
    with _reading_params(params_dir):
        stored = flatten(checkpointer.metadata(params_dir).item_metadata.tree)
        # The config's claims against the tensors there, before a network is traced from them.
        check_layer_claims(config, stored, os.path.join(checkpoint_dir, CONFIG_FILE))
        check_params(config, stored, checkpoint_dir)
        # Orbax would read a missing chunk as zeros: every chunk must be there.
        checked_arrays(params_dir)
        target = numpy_dtype("float32" if dtype is None else dtype)
        restore_args = _restore_args(config, stored, target, mesh)
        start = time.perf_counter()
        if convert is None:
            params = checkpointer.restore(
                params_dir, args=ocp.args.PyTreeRestore(restore_args=unflatten(restore_args))
            )
        else:
            params = unflatten(
                _restore_converted(checkpointer, params_dir, stored, restore_args, convert)
            )
    logger.info(
        "loaded %s as %s in %.1f s", checkpoint_dir, target.name, time.perf_counter() - start
    )
    return config, params


def _restore_args(
    config: T5Config, stored: Mapping[str, Any], target: np.dtype, mesh: Any
) -> dict[str, Any]:
    """{flat name: Orbax restore args}: host numpy arrays, or arrays sharded on `mesh`."""
    import orbax.checkpoint as ocp

    if mesh is None:
        return {name: ocp.RestoreArgs(restore_type=np.ndarray, dtype=target) for name in stored}
    return {
        name: ocp.ArrayRestoreArgs(sharding=sharding, dtype=target)
        for name, sharding in param_shardings(config, mesh).items()
    }


def _restore_converted(
    checkpointer: Any,
    params_dir: str,
    stored: Mapping[str, Any],
    restore_args: Mapping[str, Any],
    convert: Convert,
) -> dict[str, Any]:
    """The flat parameters restored one at a time, each converted before the
    next is read (about 10 ms a call here; a layer at a time held 1.5x as
    much memory above the converted parameters).

    The heap is trimmed (`trim_heap`) each time another `trim_every_bytes`
    of the checkpoint has been read: the read buffers are freed in Orbax's
    threads' arenas, which the next read need not reuse."""
    import orbax.checkpoint as ocp

    budget = trim_every_bytes(stored)
    placed: dict[str, Any] = {}
    unreturned = 0
    try:
        for name in sorted(stored):
            part = checkpointer.restore(
                params_dir,
                args=ocp.args.PyTreeRestore(
                    item=unflatten({name: stored[name]}),
                    restore_args=unflatten({name: restore_args[name]}),
                    partial_restore=True,
                ),
            )
            array = flatten(part)[name]
            unreturned += array.nbytes
            placed.update(converted(name, array, convert))
            del part, array
            if unreturned >= budget:
                trim_heap()
                unreturned = 0
    except BaseException:  # nothing half-loaded stays on the devices
        release(placed.values())
        raise
    return placed


def trim_every_bytes(stored: Mapping[str, Any]) -> int:
    """Bytes read between two heap trims of `_restore_converted`: a 64th of
    the float32 checkpoint, at least 1 MB. mT5-large's int8 load took
    35-39 s at a peak of 4.03 GB so, against 44-45 s trimming after every
    tensor and 37-40 s at 4.11-4.14 GB never trimming."""
    total = sum(int(np.prod(leaf.shape)) * 4 for leaf in stored.values())
    return max(TRIM_MIN_BYTES, total // TRIM_PARTS)
