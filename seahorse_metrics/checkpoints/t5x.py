"""T5X checkpoints, read without T5X or TensorFlow.

T5X writes one directory per step, `<model_dir>/checkpoint_<step>/`, holding a
msgpack file named `checkpoint`: `{"version": 3, "optimizer": {"target":
params, "state": optimizer state}}` (version 0, a plain Flax checkpoint, has
`target` at the top). Each parameter leaf is either the array itself (inline)
or a reference to a TensorStore zarr array stored next to the msgpack: a
TensorStore spec dict whose relative `kvstore.path` is the parameter path
joined by dots (`target.encoder.layers_0.attention.query.kernel`), or, in
Orbax-era T5X, the string `PLACEHOLDER://<that name>`. Only `target` is read;
optimizer state is skipped.

T5X's `train.py` saves with Orbax by default (`use_orbax=True`): a step
directory then holds `state/`, an Orbax PyTree (OCDBT) of the same state dict
(`target`, `state/step`, `state/param_states`), and no msgpack file; that
layout is read by `checkpoints.t5x_orbax`. The layout is detected from the
files, so a model directory may hold steps of both. Scanned layers (T5X's
scalable_t5, the `layers` axis stacked) are read layer by layer by
`checkpoints.t5x_scanned`.

The parameter tree is the network's (`token_embedder`, `encoder`, `decoder`);
the config is derived from the parameter shapes (heads from the relative
bias table; T5 v1.0 from `mlp/wi` and the missing `decoder/logits_dense`),
with the mT5 defaults for what shapes do not tell.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Mapping, Optional

import numpy as np

from seahorse_metrics.checkpoints import zarr_chunks
from seahorse_metrics.checkpoints.params import (
    CheckpointError,
    check_params,
    numpy_dtype,
    unflatten,
)
from seahorse_metrics.checkpoints.streaming import (
    Convert,
    ParamSource,
    StoredTensor,
    materialise,
    param_shardings,
)
from seahorse_metrics.checkpoints.t5x_orbax import is_orbax_step_dir, stored_orbax_tensors
from seahorse_metrics.checkpoints.t5x_scanned import is_scanned, unscanned_tensors
from seahorse_metrics.model.config import T5Config
from seahorse_metrics.option_names import option

logger = logging.getLogger(__name__)

MSGPACK_FILE = "checkpoint"
_STEP_DIR = re.compile(r"^checkpoint_(\d+)$")
_PLACEHOLDER = "PLACEHOLDER://"
_LAYER = re.compile(r"^layers_(\d+)$")


def _is_msgpack_checkpoint(path: str) -> bool:
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as handle:
        head = handle.read(32)
    # A TensorFlow checkpoint index is also called "checkpoint"; it is text.
    return bool(head) and not head.startswith(b"model_checkpoint_path")


def _is_step_dir(path: str) -> bool:
    """A T5X step directory in either layout: the msgpack `checkpoint` file or Orbax's `state/`."""
    return _is_msgpack_checkpoint(os.path.join(path, MSGPACK_FILE)) or is_orbax_step_dir(path)


def list_steps(directory: str) -> list[int]:
    """Steps with a complete `checkpoint_<step>/` (msgpack or Orbax layout)
    under `directory`, ascending."""
    if not os.path.isdir(directory):
        return []
    steps = []
    for name in os.listdir(directory):
        match = _STEP_DIR.match(name)
        if match and _is_step_dir(os.path.join(directory, name)):
            steps.append(int(match.group(1)))
    return sorted(steps)


def find_step_dir(path: str) -> Optional[str]:
    """Returns the step directory `path` designates (itself, or its latest
    `checkpoint_<step>`), or None if it is not a T5X checkpoint."""
    if _is_step_dir(path):
        return path
    steps = list_steps(path)
    return os.path.join(path, f"checkpoint_{steps[-1]}") if steps else None


def is_t5x(path: str) -> bool:
    """Whether `path` is a T5X step directory or a model directory with steps."""
    return os.path.isdir(path) and find_step_dir(path) is not None


def _read_msgpack_target(step_dir: str) -> Mapping[str, Any]:
    from flax import serialization

    path = os.path.join(step_dir, MSGPACK_FILE)
    with open(path, "rb") as handle:
        try:
            contents = serialization.msgpack_restore(handle.read())
        except Exception as error:  # msgpack raises several unrelated types
            raise CheckpointError(f"{path}: not a T5X msgpack checkpoint ({error})") from error
    if not isinstance(contents, dict):
        raise CheckpointError(f"{path}: expected a dict at the top of the msgpack")
    version = contents.get("version", 0)
    state = contents.get("optimizer", contents) if version else contents
    target = state.get("target") if isinstance(state, dict) else None
    if not isinstance(target, dict):
        raise CheckpointError(f"{path}: no 'target' parameters (T5X version {version})")
    # A Flax variables dict wraps the parameters in 'params'.
    if set(target) == {"params"}:
        target = target["params"]
    return target


def _is_tensorstore_spec(value: Any) -> bool:
    return isinstance(value, dict) and "driver" in value and ("kvstore" in value or "path" in value)


def _is_subtree(value: Any) -> bool:
    return isinstance(value, dict) and not _is_tensorstore_spec(value)


def _flatten_target(target: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in target.items():
        name = f"{prefix}{key}"
        if _is_subtree(value):
            flat.update(_flatten_target(value, name + "/"))
        else:
            flat[name] = value
    return flat


def _relative_array_path(spec: Mapping[str, Any], name: str) -> str:
    kvstore = spec.get("kvstore")
    if isinstance(kvstore, dict) and "path" in kvstore:  # tensorstore >= 0.1.14
        return kvstore["path"]
    if "path" in spec:
        return spec["path"]
    raise CheckpointError(f"parameter {name}: TensorStore spec without a path: {spec}")


def _open_zarr(
    step_dir: str, relative_path: str, name: str, expected_shape: Optional[tuple[int, ...]]
) -> StoredTensor:
    import tensorstore as ts

    if relative_path.startswith("gs://") or os.path.isabs(relative_path):
        raise CheckpointError(
            f"parameter {name}: array path {relative_path!r} is not relative to the checkpoint; "
            "copy the checkpoint locally (T5X writes relative paths)"
        )
    array_dir = os.path.join(step_dir, relative_path)
    if not os.path.isdir(array_dir):
        raise FileNotFoundError(f"parameter {name}: array directory {array_dir} is missing")
    _check_zarr_dir(array_dir, name)
    spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": array_dir}}
    try:
        store = ts.open(spec, open=True, read=True).result()
    except Exception as error:  # tensorstore raises ValueError/RuntimeError subtypes
        raise CheckpointError(
            f"parameter {name}: cannot open zarr array {array_dir}: {error}"
        ) from error
    if expected_shape is not None and tuple(store.shape) != tuple(expected_shape):
        raise CheckpointError(
            f"parameter {name}: zarr array {array_dir} has shape {tuple(store.shape)}, the "
            f"msgpack says {tuple(expected_shape)}"
        )
    return StoredTensor(
        name,
        array_dir,
        tuple(store.shape),
        np.dtype(store.dtype.numpy_dtype),
        lambda index: store[index].read().result(),
    )


def _check_zarr_dir(array_dir: str, name: str) -> None:
    """Every chunk of the zarr array in `array_dir` is there, and its files
    hold bytes enough for the shape `.zarray` claims (`zarr_chunks`)."""
    import json

    metadata_path = os.path.join(array_dir, ".zarray")
    try:
        with open(metadata_path, encoding="utf-8") as handle:
            metadata = json.load(handle)
        itemsize = numpy_dtype(metadata["dtype"]).itemsize
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"parameter {name}: {metadata_path} is missing or unreadable "
            f"({error}); copy the checkpoint again"
        ) from error
    chunk_sizes = {}
    for root, _, files in os.walk(array_dir):
        for file_name in files:
            key = os.path.relpath(os.path.join(root, file_name), array_dir).replace(os.sep, "/")
            if not key.startswith("."):
                chunk_sizes[key] = os.path.getsize(os.path.join(root, file_name))
    zarr_chunks.check_chunks(name, array_dir, metadata, chunk_sizes)
    zarr_chunks.check_claimed_bytes(
        name,
        array_dir,
        zarr_chunks.claimed_bytes(metadata, itemsize),
        sum(chunk_sizes.values()),
        zarr_chunks.compressor_of(metadata),
    )


def _stored_tensor(step_dir: str, name: str, leaf: Any) -> StoredTensor:
    if isinstance(leaf, (np.ndarray, np.generic, int, float)):
        return StoredTensor.in_memory(name, os.path.join(step_dir, MSGPACK_FILE), leaf)
    if _is_tensorstore_spec(leaf):
        shape = leaf.get("metadata", {}).get("shape")
        return _open_zarr(
            step_dir,
            _relative_array_path(leaf, name),
            name,
            tuple(shape) if shape is not None else None,
        )
    if isinstance(leaf, str) and leaf.startswith(_PLACEHOLDER):
        return _open_zarr(step_dir, leaf[len(_PLACEHOLDER) :], name, None)
    raise CheckpointError(f"parameter {name}: unsupported leaf of type {type(leaf).__name__}")


def stored_t5x_tensors(step_dir: str) -> dict[str, StoredTensor]:
    """The `target` parameters of a T5X step directory (msgpack or Orbax
    layout, told apart by their files) as {"a/b/c": StoredTensor}: inline
    arrays, and TensorStore arrays opened (not read). Scanned layers
    (scalable_t5) are given per layer, under the unscanned names
    (`t5x_scanned`)."""
    if not _is_msgpack_checkpoint(os.path.join(step_dir, MSGPACK_FILE)) and is_orbax_step_dir(
        step_dir
    ):
        tensors = stored_orbax_tensors(step_dir)
    else:
        flat_target = _flatten_target(_read_msgpack_target(step_dir))
        tensors = {name: _stored_tensor(step_dir, name, leaf) for name, leaf in flat_target.items()}
    return unscanned_tensors(tensors, step_dir) if is_scanned(tensors) else tensors


def config_from_shapes(flat: Mapping[str, Any], source: str) -> T5Config:
    """Derives the network config from T5X parameter shapes (of arrays or
    `StoredTensor`s).

    The feed-forward is gated-GELU (`mlp/wi_0`, `mlp/wi_1`: T5 v1.1 / mT5) or
    ReLU (`mlp/wi`: T5 v1.0, T5X's `t5_1_0`); without `decoder/logits_dense`
    the head is tied to the embedding (T5X's `logits_via_embedding`); a
    relative position bias in each layer (`encoder/layers_0/relpos_bias`,
    T5X's scalable_t5) makes a `relative_bias_per_layer` network.

    Raises:
      CheckpointError: if the tree is not a T5 encoder-decoder (e.g. an
        encoder-only model).
    """

    def shape_of(name: str) -> tuple[int, ...]:
        if name not in flat:
            raise CheckpointError(f"{source}: missing parameter {name}")
        return tuple(flat[name].shape)

    if not any(name.startswith("decoder/") for name in flat):
        raise CheckpointError(
            f"{source}: no decoder/ parameters: an encoder-only model; a SEAHORSE or NLI metric "
            'needs the decoder to read P("1")'
        )
    vocab_size, d_model = shape_of("token_embedder/embedding")
    per_layer_bias = "encoder/layers_0/relpos_bias/rel_embedding" in flat
    num_heads, num_buckets = shape_of(
        "encoder/layers_0/relpos_bias/rel_embedding"
        if per_layer_bias
        else "encoder/relpos_bias/rel_embedding"
    )
    inner = shape_of("encoder/layers_0/attention/query/kernel")[1]
    feed_forward = "relu" if "encoder/layers_0/mlp/wi/kernel" in flat else "gated-gelu"
    d_ff = shape_of(
        "encoder/layers_0/mlp/" + ("wi" if feed_forward == "relu" else "wi_0") + "/kernel"
    )[1]
    if inner % num_heads:
        raise CheckpointError(
            f"{source}: attention width {inner} is not a multiple of the {num_heads} heads"
        )
    return T5Config(
        vocab_size=vocab_size,
        d_model=d_model,
        d_kv=inner // num_heads,
        d_ff=d_ff,
        num_heads=num_heads,
        num_encoder_layers=_count_layers(flat, "encoder", source),
        num_decoder_layers=_count_layers(flat, "decoder", source),
        relative_attention_num_buckets=num_buckets,
        feed_forward_proj=feed_forward,
        tie_word_embeddings="decoder/logits_dense/kernel" not in flat,
        relative_bias_per_layer=per_layer_bias,
    )


def _count_layers(flat: Mapping[str, np.ndarray], stack: str, source: str) -> int:
    indices = {
        int(m.group(1))
        for name in flat
        if name.startswith(stack + "/")
        for m in [_LAYER.match(name.split("/")[1])]
        if m
    }
    if indices != set(range(len(indices))):
        raise CheckpointError(f"{source}: {stack} layers {sorted(indices)} are not contiguous")
    return len(indices)


def load_t5x(
    path: str, dtype: Optional[str] = None, mesh: Any = None, convert: Optional[Convert] = None
) -> tuple[T5Config, dict]:
    """Loads a T5X checkpoint (model dir -> latest step, or a step dir) tensor
    by tensor; each TensorStore array is read in blocks (only the box a device
    owns, with a mesh).

    Args:
      path: A T5X model directory or step directory.
      dtype, mesh, convert: As `checkpoints.hf.load_hf`.

    Returns:
      (config, nested params).
    """
    step_dir = find_step_dir(path)
    if step_dir is None:
        raise FileNotFoundError(
            f"{path}: no T5X checkpoint (neither a '{MSGPACK_FILE}' msgpack file, nor Orbax's "
            "state/, nor checkpoint_<step>/ directories holding one)"
        )
    logger.info("Reading T5X checkpoint %s", step_dir)
    tensors = stored_t5x_tensors(step_dir)
    config = config_from_shapes(tensors, step_dir)
    check_params(config, tensors, step_dir)
    sources = {name: ParamSource(tensor) for name, tensor in tensors.items()}
    shardings = None if mesh is None else param_shardings(config, mesh)
    return config, unflatten(materialise(sources, dtype, step_dir, shardings, convert))


# --------------------------------------------------------- optimizer state
# T5X's Adafactor (`t5x/adafactor.py`, as `t5x/examples/t5/mt5/base.gin` binds
# it: factored, no momentum) factors the second moment of a matrix whose
# second-largest dimension is at least `min_dim_size_to_factor`.
ADAFACTOR_MIN_DIM_SIZE_TO_FACTOR = 128
# Adafactor keeps these four slots per parameter; an unused one holds zeros((1,)).
ADAFACTOR_SLOTS = ("v_row", "v_col", "v", "m")
# T5X's `adafactor.standard_logical_factor_rules()` (the mT5 gin files' rules)
# for the logical axes of T5 parameters: row and column axes are factored (a
# parameter with both; T5X's `set_param_axes` leaves one without either
# unfactored), `layers` (scanned layers) is a batch axis each layer keeps apart.
_FACTOR_RULES = {
    "vocab": "column",
    "embed": "row",
    "mlp": "column",
    "heads": "column",
    "kv": "column",
    "joined_kv": "column",
    "relpos_buckets": "none",
    "layers": "batch",
}


def _factored_dims(
    shape: tuple[int, ...], axes: Optional[tuple[str, ...]]
) -> Optional[tuple[tuple[int, ...], ...]]:
    """(row dims, column dims) T5X's Adafactor factors a parameter over, or
    None (not factored). By its logical axes' rules where T5X uses them
    (parameters of rank above 2, or with a batch axis); else by T5X's
    heuristic: the two largest dimensions, ordered as `np.argsort` orders
    them (so square matrices factor the same way), if the smaller is at
    least `ADAFACTOR_MIN_DIM_SIZE_TO_FACTOR`."""
    rules = None if axes is None else [_FACTOR_RULES[axis] for axis in axes]
    if rules is not None and (len(shape) > 2 or "batch" in rules):
        rows = tuple(i for i, rule in enumerate(rules) if rule == "row")
        columns = tuple(i for i, rule in enumerate(rules) if rule == "column")
        return (rows, columns) if rows and columns else None
    sorted_dims = np.argsort(shape)
    if len(shape) < 2 or shape[sorted_dims[-2]] < ADAFACTOR_MIN_DIM_SIZE_TO_FACTOR:
        return None
    return (int(sorted_dims[-2]),), (int(sorted_dims[-1]),)


def adafactor_initial_state(
    shape: tuple[int, ...],
    factored: bool = True,
    momentum: bool = False,
    axes: Optional[tuple[str, ...]] = None,
) -> dict[str, np.ndarray]:
    """The state T5X's Adafactor starts a parameter of `shape` from (all zeros).

    A factored second moment keeps `v_row` (the shape without the column
    dimensions) and `v_col` (without the row dimensions); otherwise `v` has
    the parameter's shape (see `_factored_dims` for which are which). `m` is
    the momentum (`beta1`), which mT5's gin files do not set.

    Args:
      shape: The parameter's shape.
      factored: Adafactor's `factored`.
      momentum: Whether `beta1` is set.
      axes: The parameter's logical axes, which T5X factors scanned
        parameters by (None: T5X's heuristic for every shape).
    """
    state = {slot: np.zeros((1,), np.float32) for slot in ADAFACTOR_SLOTS}
    dims = _factored_dims(tuple(shape), axes) if factored else None
    if dims is not None:
        rows, columns = dims
        state["v_row"] = np.zeros(np.delete(shape, columns), np.float32)
        state["v_col"] = np.zeros(np.delete(shape, rows), np.float32)
    else:
        state["v"] = np.zeros(shape, np.float32)
    if momentum:
        state["m"] = np.zeros(shape, np.float32)
    return state


def initial_optimizer_state(
    param_shapes: Mapping[str, tuple[int, ...]],
    step: int,
    param_axes: Optional[Mapping[str, tuple[str, ...]]] = None,
) -> dict:
    """The `state` half of a T5X checkpoint that T5X's default (strict) restore
    accepts for an Adafactor model: `{"step": step, "param_states": {...}}`,
    each parameter's Adafactor slots as T5X initialises them.

    Args:
      param_shapes: {"encoder/layers_0/...": shape} of the network's parameters.
      step: The step the checkpoint records.
      param_axes: {name: logical axes}, for scanned layers (see
        `adafactor_initial_state`); None for the unscanned network.
    """
    param_states: dict[str, Any] = {}
    for name, shape in param_shapes.items():
        node = param_states
        *parents, leaf = name.split("/")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = adafactor_initial_state(
            tuple(shape), axes=None if param_axes is None else param_axes[name]
        )
    return {"step": np.int32(step), "param_states": param_states}


# ---------------------------------------------------------------- vocabulary
# T5X writes the run's gin config into MODEL_DIR; the model gin's VOCABULARY
# (`@seqio.SentencePieceVocabulary()`) is bound through this parameter.
T5X_CONFIG_FILE = "config.gin"
_SENTENCEPIECE_BINDING = re.compile(
    r"SentencePieceVocabulary\.sentencepiece_model_file\s*=\s*(['\"])(.+?)\1"
)


def run_vocabulary(path: str) -> tuple[Optional[str], Optional[str]]:
    """The SentencePiece model a T5X run names, looked up where T5X users keep
    it: the `sentencepiece_model_file` of the model's `VOCABULARY` in the run's
    `config.gin` (in the step directory's model directory, or `path` itself).

    Args:
      path: A T5X step directory or model directory.

    Returns:
      (the vocabulary file, None) when `config.gin` names a local file that
      exists; (None, why not) when it names another (e.g. a `gs://` path, or
      a file that is not here); (None, None) when there is no such binding.
    """
    path = os.path.abspath(path)
    for model_dir in (path, os.path.dirname(path)):
        config_path = os.path.join(model_dir, T5X_CONFIG_FILE)
        if not os.path.isfile(config_path):
            continue
        with open(config_path, encoding="utf-8", errors="replace") as handle:
            # gin continues long bindings on the next line with a backslash.
            text = re.sub(r"\\\s*\n\s*", "", handle.read())
        match = _SENTENCEPIECE_BINDING.search(text)
        if match is None:
            continue
        named = match.group(2)
        for candidate in (named, os.path.join(model_dir, named)):
            if "://" not in candidate and os.path.isfile(candidate):
                return candidate, None
        return None, f"{config_path} names the vocabulary {named}, which is not a file here"
    return None, None


def missing_vocabulary_message(path: str) -> str:
    """What to do when no vocabulary is found for the checkpoint `path`."""
    _, why_not = run_vocabulary(path)
    looked = (
        f"no spiece.model in {path} or the directory above it, and no T5X "
        f"{T5X_CONFIG_FILE} there naming the model's VOCABULARY"
    )
    vocab = option(
        "vocab=PATH (Scorer.load, or checkpoint:DIR,vocab=PATH in an evaluate metric spec)",
        "--vocab PATH",
    )
    return f"{why_not or looked}; pass the SentencePiece model: {vocab}"
