"""T5X checkpoints of scanned layers, read layer by layer and written as T5X writes them.

T5X's `scalable_t5` network (t5x/examples/scalable_t5/network.py, as its
mt5/*.gin files bind it: `scan_layers = True`) runs each stack's layers under
`scan_with_axes`, in a module named as the stack, its parameters stacked on
a `layers` axis at `param_scan_axis` (1 by default):

    encoder/encoder/attention/query/kernel           [embed, layers, heads, kv]
    encoder/encoder/attention/out/kernel             [heads, layers, kv, embed]
    encoder/encoder/mlp/wi_0/kernel                  [embed, layers, mlp]
    encoder/encoder/pre_attention_layer_norm/scale   [embed, layers]
    encoder/encoder/relpos_bias/rel_embedding        [heads, layers, buckets]
    encoder/encoder_norm/scale                       [embed]
    decoder/decoder/{self_attention, encoder_decoder_attention, ...}

Its attention kernels keep heads and kv apart; T5X's unscanned network
joins them (`[embed, heads * kv]`), as this one does. `unscanned_tensors`
presents such a checkpoint with the unscanned names and shapes
(`encoder/layers_0/attention/query/kernel`): each tensor a view of one layer
of the stored array, read block by block when the checkpoint is loaded
(nothing is read here but the small bias tables). scalable_t5 gives each
layer a relative position bias table of its own: when every layer of both
stacks holds the same one (a scanned checkpoint made from mT5's), it is the
stack's table (`encoder/relpos_bias/rel_embedding`, mT5's network);
otherwise (a model scalable_t5 initialised or trained) each layer keeps its
own (`encoder/layers_0/relpos_bias/rel_embedding`), which the network runs
with `T5Config.relative_bias_per_layer`.

`scanned_arrays` and `scanned_axes` are the way back, for export: a
`relative_bias_per_layer` network's parameters in this layout, and their
logical axes (which T5X's Adafactor factors by).
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.checkpoints.params import CheckpointError, flatten
from seahorse_metrics.checkpoints.streaming import StoredTensor
from seahorse_metrics.model.config import T5Config

_STACKS = ("encoder", "decoder")
_RELPOS = "relpos_bias/rel_embedding"
_LAYER_NORM_SCALE = {
    "encoder": "pre_attention_layer_norm/scale",
    "decoder": "pre_self_attention_layer_norm/scale",
}
# How a layer's axes (without `layers`) join into the unscanned ones.
_JOINED_HEADS = {
    "query": ((0,), (1, 2)),
    "key": ((0,), (1, 2)),
    "value": ((0,), (1, 2)),
    "out": ((0, 1), (2,)),
}
# T5X's `param_scan_axis` default, where it writes the `layers` axis.
SCAN_AXIS = 1
_LAYER_PARAM = re.compile(r"^(encoder|decoder)/layers_(\d+)/(.+)$")


def is_scanned(tensors: Mapping[str, StoredTensor]) -> bool:
    """Whether `tensors` (T5X names) are a scanned scalable_t5 tree."""
    return any(name.startswith(f"{stack}/{stack}/") for name in tensors for stack in _STACKS)


def unscanned_tensors(tensors: Mapping[str, StoredTensor], source: str) -> dict[str, StoredTensor]:
    """A scanned checkpoint's tensors under T5X's unscanned names and shapes.

    Args:
      tensors: {T5X name: StoredTensor} of a scanned scalable_t5 tree.
      source: The checkpoint, for messages.

    Returns:
      {"encoder/layers_0/attention/query/kernel": a view of layer 0, ...}.

    Raises:
      CheckpointError: naming the tensor, for a shape that is no stack of
        layers.
    """
    embed = _embed_width(tensors, source)
    tables = {
        stack: _bias_tables(tensors[name], _layer_axis(tensors, stack, embed, source), source)
        for stack in _STACKS
        for name in [f"{stack}/{stack}/{_RELPOS}"]
        if name in tensors
    }
    per_layer = any(
        not np.array_equal(table, stacked[0])
        for stacked in tables.values()
        for table in stacked[1:]
    )
    result = {}
    for name, tensor in tensors.items():
        stack, _, rest = name.partition("/")
        scanned_prefix = f"{stack}/"
        if stack not in _STACKS or not rest.startswith(scanned_prefix):
            result[name] = tensor
            continue
        sub = rest[len(scanned_prefix) :]
        if sub == _RELPOS:
            result.update(_bias_tensors(tensor, stack, tables[stack], per_layer))
            continue
        axis = _layer_axis(tensors, stack, embed, source)
        if tensor.shape and axis >= len(tensor.shape):
            raise CheckpointError(f"{source}: {name}{list(tensor.shape)} has no layers axis {axis}")
        groups = _groups(sub, len(tensor.shape) - 1)
        for layer in range(tensor.shape[axis]):
            view = f"{stack}/layers_{layer}/{sub}"
            result[view] = layer_view(tensor, view, layer, axis, groups)
    return result


def _embed_width(tensors: Mapping[str, StoredTensor], source: str) -> int:
    embedding = tensors.get("token_embedder/embedding")
    if embedding is None or len(embedding.shape) != 2:
        raise CheckpointError(f"{source}: missing parameter token_embedder/embedding")
    return embedding.shape[1]


def _layer_axis(tensors: Mapping[str, StoredTensor], stack: str, embed: int, source: str) -> int:
    """T5X's `param_scan_axis`, read from a layer norm's scale: [embed, layers]
    (the default, 1) or [layers, embed] (0)."""
    name = f"{stack}/{stack}/{_LAYER_NORM_SCALE[stack]}"
    if name not in tensors or len(tensors[name].shape) != 2:
        raise CheckpointError(f"{source}: a scanned {stack} without a [embed, layers] {name}")
    shape = tensors[name].shape
    return 0 if shape[1] == embed and shape[0] != embed else 1


def _groups(sub: str, rank: int) -> tuple[tuple[int, ...], ...]:
    module = sub.split("/")[-2] if sub.endswith("/kernel") else ""
    if module in _JOINED_HEADS and rank == 3:
        return _JOINED_HEADS[module]
    return tuple((axis,) for axis in range(rank))


def layer_view(
    tensor: StoredTensor, name: str, layer: int, axis: int, groups: Sequence[Sequence[int]]
) -> StoredTensor:
    """Layer `layer` of `tensor` (stacked on `axis`), its remaining axes
    joined as `groups` say (((0,), (1, 2)): [embed, heads, kv] -> [embed,
    heads * kv]); a box of the view reads only the rows it needs."""
    per_layer = tensor.shape[:axis] + tensor.shape[axis + 1 :]
    shape = tuple(math.prod(per_layer[i] for i in group) for group in groups)

    def read(index):
        stored, cut, joined = [], [], []
        for box, group in zip(index, groups):
            inner = math.prod(per_layer[i] for i in group[1:])
            first, last = box.start // inner, -(-box.stop // inner)
            stored.append(slice(first, last))
            stored.extend(slice(0, per_layer[i]) for i in group[1:])
            cut.append(slice(box.start - first * inner, box.stop - first * inner))
            joined.append((last - first) * inner)
        stored.insert(axis, slice(layer, layer + 1))
        block = np.squeeze(tensor.read(tuple(stored)), axis)
        return block.reshape(joined)[tuple(cut)]

    return StoredTensor(name, tensor.path, shape, tensor.dtype, read)


def _bias_tables(tensor: StoredTensor, axis: int, source: str) -> np.ndarray:
    """A stack's relative position bias tables, [layers, heads, buckets]."""
    if len(tensor.shape) != 3:
        raise CheckpointError(
            f"{source}: {tensor.name}{list(tensor.shape)} is not the "
            "[heads, layers, buckets] tables of scanned layers"
        )
    return np.moveaxis(np.asarray(tensor.read(tuple(slice(0, n) for n in tensor.shape))), axis, 0)


def _bias_tensors(
    tensor: StoredTensor, stack: str, tables: np.ndarray, per_layer: bool
) -> dict[str, StoredTensor]:
    """The stack's one table (all layers hold it), or each layer's own."""
    if not per_layer:
        return {f"{stack}/{_RELPOS}": StoredTensor.in_memory(tensor.name, tensor.path, tables[0])}
    names = [f"{stack}/layers_{layer}/{_RELPOS}" for layer in range(len(tables))]
    return {
        name: StoredTensor.in_memory(name, tensor.path, table) for name, table in zip(names, tables)
    }


# ------------------------------------------------------------------ export
def _scanned_name(name: str) -> Optional[tuple[str, int]]:
    """(`<stack>/<stack>/<sub>`, layer) of a per-layer parameter name, else None."""
    match = _LAYER_PARAM.match(name)
    if match is None:
        return None
    stack, layer, sub = match.groups()
    return f"{stack}/{stack}/{sub}", int(layer)


def _unscanned_axes(config: T5Config) -> dict[str, tuple[str, ...]]:
    from seahorse_metrics.model.model import EncoderDecoderModel

    logical = EncoderDecoderModel(config.replace(scan_layers=False)).param_logical_axes()
    return {name: tuple(spec) for name, spec in flatten(logical).items()}


def scanned_axes(config: T5Config) -> dict[str, tuple[str, ...]]:
    """The logical axes of `config`'s parameters in scalable_t5's scanned
    layout: `joined_kv` split into `heads, kv`, and `layers` at `SCAN_AXIS`
    ({"encoder/encoder/attention/query/kernel": ("embed", "layers", "heads",
    "kv"), ..., "token_embedder/embedding": ("vocab", "embed")})."""
    result = {}
    for name, axes in _unscanned_axes(config).items():
        scanned = _scanned_name(name)
        if scanned is None:
            result[name] = axes
            continue
        split = [
            part for axis in axes for part in (("heads", "kv") if axis == "joined_kv" else (axis,))
        ]
        split.insert(SCAN_AXIS, "layers")
        result[scanned[0]] = tuple(split)
    return result


def scanned_arrays(config: T5Config, flat: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A `relative_bias_per_layer` network's parameters ({"encoder/layers_0/...":
    array}, as `check_params` accepts them) as T5X's scalable_t5 stores them
    with `scan_layers`: each stack's layers stacked at `SCAN_AXIS`, the
    attention kernels' heads and kv apart (names and axes as `scanned_axes`).

    Raises:
      ValueError: for a network with one relative position bias per stack
        (scalable_t5 has a table in every layer).
    """
    if not config.relative_bias_per_layer:
        raise ValueError(
            "T5X's scalable_t5 layout holds a relative position bias in every "
            "layer; this network has one per stack"
        )
    unscanned = _unscanned_axes(config)
    layers: dict[str, dict[int, np.ndarray]] = {}
    result = {}
    for name, array in flat.items():
        array, scanned = np.asarray(array), _scanned_name(name)
        if scanned is None:
            result[name] = array
            continue
        shape = [
            n
            for size, axis in zip(array.shape, unscanned[name])
            for n in ((config.num_heads, config.d_kv) if axis == "joined_kv" else (size,))
        ]
        layers.setdefault(scanned[0], {})[scanned[1]] = array.reshape(shape)
    for name, by_layer in layers.items():
        result[name] = np.stack([by_layer[layer] for layer in range(len(by_layer))], axis=SCAN_AXIS)
    return result
