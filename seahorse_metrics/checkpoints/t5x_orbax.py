"""T5X checkpoints in the Orbax layout T5X's `train.py` writes by default
(`use_orbax=True`, T5X's `OrbaxCheckpointManagerInterface`)::

    <model_dir>/checkpoint_<step>/_CHECKPOINT_METADATA   Orbax's CheckpointManager
    <model_dir>/checkpoint_<step>/state/                 an Orbax PyTree (OCDBT) of
        _METADATA                                        T5X's state dict: `target` (the
        manifest.ocdbt, d/, ocdbt.process_N/             parameters), `state/step`,
                                                         `state/param_states` (Adafactor)
    <model_dir>/checkpoint_<step>/dataset/               the data iterator (optional)

Only `target` is read. `_METADATA` lists the tree; each array is a zarr
array (v2, or v3 when `use_zarr3`) whose keys in the OCDBT database (or, when
`use_ocdbt` is false, whose directory under `state/`) are the tree path
joined by dots (`target.encoder.layers_0.attention.query.kernel`). Arrays are
opened, not read: `load_t5x` reads them block by block onto the mesh as it
reads the msgpack layout. Before that, every chunk of every array must be
stored and the data files must hold bytes enough for the shapes claimed
(`zarr_chunks`): a checkpoint cut short is an error naming the array and the
chunk, never zeros.
"""

from __future__ import annotations

import ast
import json
import os
from typing import Any, Mapping

import numpy as np

from seahorse_metrics.checkpoints import zarr_chunks
from seahorse_metrics.checkpoints.params import CheckpointError, numpy_dtype, reading
from seahorse_metrics.checkpoints.streaming import StoredTensor

STATE_DIR = "state"
METADATA_FILE = "_METADATA"
_TARGET = "target"


def is_orbax_step_dir(path: str) -> bool:
    """Whether `path` is a T5X step directory in the Orbax layout."""
    return os.path.isfile(os.path.join(path, STATE_DIR, METADATA_FILE))


def _tree_paths(metadata_path: str) -> tuple[dict[str, tuple[str, ...]], Mapping[str, Any]]:
    """{"target.a.b": ("target", "a", "b")} for every leaf `_METADATA` lists; the file's dict."""
    with reading(metadata_path, "Orbax metadata"):
        with open(metadata_path, encoding="utf-8") as handle:
            metadata = json.load(handle)
        tree = metadata["tree_metadata"]
        paths = {}
        for key, entry in tree.items():
            if isinstance(entry, dict) and "key_metadata" in entry:
                keys = tuple(str(part["key"]) for part in entry["key_metadata"])
            else:  # Orbax writes the tuple's repr as the key
                keys = tuple(str(part) for part in ast.literal_eval(key))
            paths[".".join(keys)] = keys
    return paths, metadata


class _ArrayStore:
    """The key-value store the arrays of one `state/` directory live in."""

    def __init__(self, state_dir: str, use_ocdbt: bool):
        import tensorstore as ts

        self.state_dir = state_dir
        self.use_ocdbt = use_ocdbt
        base = {"driver": "file", "path": state_dir + os.sep}
        self.spec = {"driver": "ocdbt", "base": base} if use_ocdbt else base
        with reading(state_dir, "Orbax parameter database (manifest.ocdbt and the d/ data files)"):
            self.kvstore = ts.KvStore.open(self.spec).result()
            self.keys = {key.decode() for key in self.kvstore.list().result()}
        # {array: its chunk keys}; metadata files (.zarray, .zattrs, zarr.json) left out.
        self._chunks: dict[str, set[str]] = {}
        for key in self.keys:
            array, _, rest = key.partition("/")
            if rest and not rest.split("/")[-1].startswith((".z", "zarr.json")):
                self._chunks.setdefault(array, set()).add(rest)

    def chunk_keys(self, array: str) -> set[str]:
        return self._chunks.get(array, set())

    def metadata(self, array: str, name: str) -> dict[str, Any]:
        for file_name in (".zarray", "zarr.json"):
            if f"{array}/{file_name}" in self.keys:
                with reading(self.state_dir, f"array {array}"):
                    value = self.kvstore.read(f"{array}/{file_name}").result().value
                    return json.loads(value)
        raise CheckpointError(
            f"parameter {name}: {self.state_dir} holds no array {array} (no "
            ".zarray); the checkpoint is incomplete: copy it again"
        )

    def stored_bytes(self) -> int:
        """Bytes of every data file under `state/`."""
        return sum(
            os.path.getsize(os.path.join(root, name))
            for root, _, names in os.walk(self.state_dir)
            for name in names
        )

    def open(self, array: str, zarr3: bool):
        import tensorstore as ts

        kvstore = dict(self.spec)
        if self.use_ocdbt:
            kvstore["path"] = array + "/"
        else:
            kvstore = {"driver": "file", "path": os.path.join(self.state_dir, array) + os.sep}
        return ts.open(
            {"driver": "zarr3" if zarr3 else "zarr", "kvstore": kvstore}, open=True, read=True
        ).result()


def checked_arrays(
    directory: str, prefix: tuple[str, ...] = ()
) -> tuple["_ArrayStore", bool, dict[str, tuple[tuple[str, ...], dict[str, Any], np.dtype]]]:
    """The arrays of an Orbax PyTree directory whose tree path starts with
    `prefix`, once every chunk of each is known to be stored and the data
    files hold bytes enough for the shapes claimed (`zarr_chunks`).

    Returns:
      (the store, whether arrays are zarr v3, {array key: (tree path,
      zarr metadata, dtype)}).

    Raises:
      CheckpointError: naming the array, for a missing array or chunk, or
        shapes the stored bytes cannot hold.
    """
    paths, metadata = _tree_paths(os.path.join(directory, METADATA_FILE))
    arrays = {
        array: keys
        for array, keys in paths.items()
        if keys[: len(prefix)] == prefix and _is_array(metadata, keys)
    }
    store = _ArrayStore(directory, bool(metadata.get("use_ocdbt", True)))
    stores_fill = bool(metadata.get("store_array_data_equal_to_fill_value", False))
    checked, claimed, compressors = {}, 0, set()
    for array, keys in sorted(arrays.items()):
        name = "/".join(keys)
        array_metadata = store.metadata(array, name)
        zarr_chunks.check_chunks(
            name, f"{directory} ({array})", array_metadata, store.chunk_keys(array), stores_fill
        )
        dtype = _array_dtype(array_metadata, name)
        claimed += zarr_chunks.claimed_bytes(array_metadata, dtype.itemsize)
        compressors.add(zarr_chunks.compressor_of(array_metadata))
        checked[array] = (keys, array_metadata, dtype)
    if checked:
        # One cap for the database: OCDBT packs many arrays' chunks into one file.
        widest = max(compressors, key=lambda codec: zarr_chunks.max_expansion(codec) or np.inf)
        zarr_chunks.check_claimed_bytes(
            "/".join(prefix) or "parameters", directory, claimed, store.stored_bytes(), widest
        )
    return store, bool(metadata.get("use_zarr3", False)), checked


def _is_array(metadata: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    """Whether `_METADATA` records the leaf as an array (not a string or an empty node)."""
    tree = metadata.get("tree_metadata", {})
    entry = tree.get(str(keys)) or next(
        (
            value
            for value in tree.values()
            if isinstance(value, dict)
            and tuple(str(part.get("key")) for part in value.get("key_metadata", [])) == keys
        ),
        {},
    )
    value_type = (entry.get("value_metadata") or {}).get("value_type", "jax.Array")
    return value_type in ("jax.Array", "np.ndarray", "scalar")


def stored_orbax_tensors(step_dir: str) -> dict[str, StoredTensor]:
    """The `target` parameters of a T5X Orbax step directory as
    {"encoder/layers_0/...": StoredTensor}, checked chunk by chunk, not read.

    Raises:
      CheckpointError: naming the array, for a missing array or chunk, or a
        shape the stored bytes cannot hold.
    """
    state_dir = os.path.abspath(os.path.join(step_dir, STATE_DIR))
    store, zarr3, arrays = checked_arrays(state_dir, (_TARGET,))
    if not arrays:
        raise CheckpointError(f"{state_dir}: no '{_TARGET}' parameters in {METADATA_FILE}")
    tensors = {}
    for array, (keys, array_metadata, dtype) in arrays.items():
        # A Flax variables dict wraps the parameters in 'params'.
        name = "/".join(keys[2:] if keys[1] == "params" else keys[1:])
        tensors[name] = _stored(store, array, zarr3, name, dtype, array_metadata)
    return tensors


def _array_dtype(metadata: Mapping[str, Any], name: str) -> np.dtype:
    dtype = metadata.get("dtype") or metadata.get("data_type")
    try:
        return numpy_dtype(dtype)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"parameter {name}: unreadable dtype {dtype!r}") from error


def _stored(
    store: _ArrayStore,
    array: str,
    zarr3: bool,
    name: str,
    dtype: np.dtype,
    metadata: Mapping[str, Any],
) -> StoredTensor:
    shape, _, _, _ = zarr_chunks.chunk_grid(metadata)
    opened: list = []

    def read(index):
        if not opened:  # opened on the first read: a checkpoint has many arrays
            opened.append(store.open(array, zarr3))
        return opened[0][index].read().result()

    return StoredTensor(name, f"{store.state_dir} ({array})", tuple(shape), dtype, read)
