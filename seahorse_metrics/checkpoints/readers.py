"""Weight files described as `StoredTensor`s, whose data is read on demand.

  - safetensors (one file or shards): the header through `safe_open`; each
    block is read through a fresh `safe_open`, so the pages it maps leave the
    process with it;
  - PyTorch pickles: `torch.load(weights_only=True, mmap=True)` (no code runs
    from the pickle, and tensors stay on disk until read); one file is mapped
    at a time;
  - Flax msgpack: read whole (msgpack has no random access).

A sharded checkpoint's index (`*.index.json`) is checked against the shards
before anything is read: a missing or unreadable shard, or a tensor the index
places in a shard that does not hold it, is an error naming the file.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Optional

import numpy as np

from seahorse_metrics.checkpoints.params import CheckpointError, flatten, numpy_dtype, reading
from seahorse_metrics.checkpoints.streaming import Index, StoredTensor
from seahorse_metrics.io.json_files import read_json

logger = logging.getLogger(__name__)

StoredTensors = dict[str, StoredTensor]

_SAFETENSORS_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}


def read_json_object(path: str) -> dict[str, Any]:
    """Reads a checkpoint's JSON object (a config, an index).

    Raises:
      FileNotFoundError: if `path` is missing.
      CheckpointError: if it is not a JSON object.
    """
    try:
        value = read_json(path, "checkpoint file")
    except ValueError as error:
        raise CheckpointError(str(error)) from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


# --------------------------------------------------------------- safetensors
def safetensors_tensors(path: str) -> StoredTensors:
    """The tensors of one `.safetensors` file (its header only is read).

    Raises:
      FileNotFoundError: if the file is missing.
      CheckpointError: if it is cut short or not a safetensors file.
    """
    from safetensors import safe_open

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing")
    # A cut-short or foreign file: safetensors raises its own SafetensorError.
    with reading(path, "safetensors file"):
        with safe_open(path, framework="np") as handle:
            entries = {
                key: (tuple(handle.get_slice(key).get_shape()), handle.get_slice(key).get_dtype())
                for key in handle.keys()
            }

    def reader(name: str) -> Callable[[Index], np.ndarray]:
        def read(index: Index) -> np.ndarray:
            with safe_open(path, framework="np") as handle:
                return handle.get_slice(name)[index]

        return read

    tensors = {}
    for name, (shape, code) in entries.items():
        if code not in _SAFETENSORS_DTYPES:
            raise CheckpointError(f"{path}: tensor {name} has dtype {code}, which cannot be read")
        tensors[name] = StoredTensor(
            name, path, shape, numpy_dtype(_SAFETENSORS_DTYPES[code]), reader(name)
        )
    return tensors


# -------------------------------------------------------------------- torch
class TorchFiles:
    """PyTorch weight files, memory-mapped one at a time."""

    def __init__(self):
        self._path: Optional[str] = None
        self._state: Optional[dict] = None

    def state(self, path: str) -> dict:
        """The state dict of `path` (mapping it, and unmapping the previous file)."""
        if path != self._path:
            self._path, self._state = None, None
            self._state, self._path = _torch_load(path), path
        return self._state

    def tensors(self, path: str) -> StoredTensors:
        """The tensors of `path`; no tensor data is read."""
        import torch

        tensors = {}
        for name, tensor in self.state(path).items():
            if not isinstance(tensor, torch.Tensor):
                raise CheckpointError(
                    f"{path}: entry {name} is a {type(tensor).__name__}, not a tensor"
                )
            dtype = str(tensor.dtype).replace("torch.", "")
            if dtype not in _SAFETENSORS_DTYPES.values():
                raise CheckpointError(
                    f"{path}: tensor {name} has dtype {dtype}, which cannot be read"
                )
            tensors[name] = StoredTensor(
                name, path, tuple(tensor.shape), numpy_dtype(dtype), self._reader(path, name)
            )
        return tensors

    def _reader(self, path: str, name: str) -> Callable[[Index], np.ndarray]:
        def read(index: Index) -> np.ndarray:
            import torch

            block = self.state(path)[name][index]
            if block.dtype == torch.bfloat16:  # numpy has no bfloat16: reinterpret the bits
                return block.contiguous().view(torch.int16).numpy().view(numpy_dtype("bfloat16"))
            return block.numpy()

        return read


def _torch_load(path: str) -> dict:
    try:
        import torch
    except ImportError as error:
        raise CheckpointError(
            f"{path} is a PyTorch pickle; install torch to read it, or convert the "
            "directory to model.safetensors"
        ) from error
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing")
    try:
        # weights_only: never run code from a pickle; mmap: leave tensors on disk until read.
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as error:
        if "mmap can only be used" not in str(error):
            raise CheckpointError(
                f"{path}: not a readable PyTorch weight file ({error}); if it "
                f"is damaged or incomplete, copy it again"
            ) from error
    except Exception as error:  # pickle, zip and weights_only errors
        raise CheckpointError(
            f"{path}: not a readable PyTorch weight file ({error}); if it is "
            "damaged or incomplete, copy it again"
        ) from error
    logger.info(
        "%s predates torch's zip format and cannot be memory-mapped; reading it whole", path
    )
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointError(f"{path}: not a readable PyTorch weight file ({error})") from error


# --------------------------------------------------------------- flax msgpack
def flax_msgpack_tensors(path: str) -> StoredTensors:
    """Tensors of HF's Flax layout under HF-torch names (`encoder/block/0/layer/0/
    SelfAttention/q/kernel` [in, out] -> `encoder.block.0.layer.0.SelfAttention.q.weight`
    [out, in], as a transposed view). The file is read whole."""
    from flax import serialization

    with open(path, "rb") as handle:
        try:
            tree = serialization.msgpack_restore(handle.read())
        except Exception as error:  # msgpack raises several unrelated types
            raise CheckpointError(f"{path}: not a Flax msgpack file ({error})") from error
    tensors = {}
    for name, value in flatten(tree).items():
        parts = name.split("/")
        value = np.asarray(value)
        if parts[-1] == "kernel":
            parts[-1], value = "weight", value.T
        elif parts[-1] == "embedding":
            parts[-1] = "weight"
        torch_name = ".".join(parts)
        tensors[torch_name] = StoredTensor.in_memory(torch_name, path, value)
    return tensors


# ------------------------------------------------------------------- shards
def sharded_tensors(
    index_path: str, shard_tensors: Callable[[str], StoredTensors]
) -> StoredTensors:
    """The tensors of every shard an index (`model.safetensors.index.json`,
    `pytorch_model.bin.index.json`) names, checked against its weight map.

    Raises:
      FileNotFoundError: naming a shard the index lists that is missing.
      CheckpointError: naming the index and shard, if the index places a
        tensor in a shard that does not hold it, or two shards hold one name.
    """
    weight_map = read_json_object(index_path).get("weight_map")
    if (
        not isinstance(weight_map, dict)
        or not weight_map
        or not all(isinstance(v, str) for v in weight_map.values())
    ):
        raise CheckpointError(f"{index_path}: no 'weight_map' of tensor name -> shard file")
    directory = os.path.dirname(index_path)
    files = sorted(set(weight_map.values()))
    for name in files:
        if not os.path.isfile(os.path.join(directory, name)):
            raise FileNotFoundError(f"{index_path} names the shard {name}, which is missing")
    tensors: StoredTensors = {}
    for name in files:
        for tensor_name, tensor in shard_tensors(os.path.join(directory, name)).items():
            if tensor_name in tensors:
                raise CheckpointError(
                    f"{index_path}: tensor {tensor_name} is in both "
                    f"{os.path.basename(tensors[tensor_name].path)} and {name}"
                )
            tensors[tensor_name] = tensor
    for tensor_name, name in weight_map.items():
        if tensor_name not in tensors or tensors[tensor_name].path != os.path.join(directory, name):
            raise CheckpointError(
                f"{index_path} places tensor {tensor_name} in {name}, which "
                "does not hold it; the index and the shards do not match"
            )
    return tensors
