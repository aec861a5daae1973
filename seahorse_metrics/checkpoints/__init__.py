"""Model checkpoints: ours (Orbax), Hugging Face directories and T5X.

    config, params = load_checkpoint(path)          # any supported format, host numpy
    config, params = load_checkpoint(path, dtype="bfloat16", mesh=mesh)  # sharded device arrays
    save_checkpoint(out_dir, config, params)         # ours: Orbax + seahorse_config.json
    export_hf(hf_dir, config, params, vocab_path)    # MT5ForConditionalGeneration dir

Every loader validates the parameter names and shapes against the network
and fails with a `CheckpointError` naming the parameter; nothing is ever
left randomly initialised. Loading goes tensor by tensor into the requested
dtype and placement (`checkpoints.streaming`): the host never holds a second
copy of the model.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from seahorse_metrics.checkpoints.hf import checked_hf_config, export_hf, is_hf_dir, load_hf
from seahorse_metrics.checkpoints.orbax_io import (
    checked_config,
    find_checkpoint_dir,
    is_ours,
    load_ours,
    save_checkpoint,
)
from seahorse_metrics.checkpoints.params import CheckpointError
from seahorse_metrics.checkpoints.streaming import Convert
from seahorse_metrics.checkpoints.t5x import (
    config_from_shapes,
    find_step_dir,
    is_t5x,
    load_t5x,
    stored_t5x_tensors,
)
from seahorse_metrics.model.config import T5Config

FORMATS = ("ours", "hf", "t5x")


def detect_format(path: str) -> str:
    """Returns "ours", "hf" or "t5x" for a checkpoint directory.

    Raises:
      FileNotFoundError: if `path` does not exist or is none of the formats.
    """
    if not os.path.isdir(path):
        raise FileNotFoundError(f"checkpoint directory {path} does not exist")
    if is_ours(path):
        return "ours"
    if is_hf_dir(path):
        return "hf"
    if is_t5x(path):
        return "t5x"
    raise FileNotFoundError(
        f"{path} is not a checkpoint: expected seahorse_config.json + params/ (ours), "
        "config.json + model.safetensors / pytorch_model.bin / flax_model.msgpack (Hugging Face), "
        "or a T5X checkpoint: the 'checkpoint' msgpack file or Orbax's state/ (directly or "
        "in checkpoint_<step>/)"
    )


def load_checkpoint(
    path: str, dtype: Optional[str] = None, mesh: Any = None, convert: Optional[Convert] = None
) -> tuple[T5Config, dict]:
    """Loads any supported checkpoint, tensor by tensor.

    Args:
      path: A checkpoint directory (ours, Hugging Face, T5X model or step dir).
      dtype: Parameter dtype to return ("float32" by default, or "bfloat16").
      mesh: A ('data', 'model') `jax.sharding.Mesh`: each parameter is placed
        on it by its logical axes as it is read (the trainer's and scorer's
        rules). None returns host numpy arrays.
      convert: Called with (flat name, array) as each parameter is read;
        what it returns ({flat name: array}) replaces it before the next is
        read (`model.quantize.kernel_converter`: int8 kernels without the
        float32 model in memory). See `streaming.materialise`.

    Returns:
      (config, params) with params a nested dict shaped as
      `EncoderDecoderModel(config).abstract_params()`: numpy arrays, or
      jax Arrays sharded over `mesh`.

    Raises:
      FileNotFoundError: if the checkpoint, or a file it names, is missing.
      CheckpointError: if it does not fit the network or cannot be read
        (the message names the file or parameter).
    """
    loaders = {"ours": load_ours, "hf": load_hf, "t5x": load_t5x}
    return loaders[detect_format(path)](path, dtype=dtype, mesh=mesh, convert=convert)


def checkpoint_config(path: str) -> T5Config:
    """The network config of any supported checkpoint, without reading its weights.

    Raises:
      FileNotFoundError: if the checkpoint is missing.
      CheckpointError: if its config (or, for T5X, its parameter shapes) is unusable.
    """
    fmt = detect_format(path)
    # A config file's layer counts are checked against the tensors there: a
    # network is built from what this returns.
    if fmt == "ours":
        return checked_config(find_checkpoint_dir(path))
    if fmt == "hf":
        return checked_hf_config(path)
    step_dir = find_step_dir(path)
    return config_from_shapes(stored_t5x_tensors(step_dir), step_dir)


__all__ = [
    "CheckpointError",
    "FORMATS",
    "checkpoint_config",
    "detect_format",
    "export_hf",
    "load_checkpoint",
    "save_checkpoint",
]
