"""T5X checkpoints of scanned layers, read layer by layer.

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
joins them (`[embed, heads * kv]`), as this one does, and its relative
position bias is one table per stack, where scalable_t5 gives each layer
its own. `unscanned_tensors` presents such a checkpoint with the unscanned
names and shapes (`encoder/layers_0/attention/query/kernel`): each tensor a
view of one layer of the stored array, read block by block when the
checkpoint is loaded (nothing is read here but the small bias tables), and
the bias as the stack's table when every layer holds the same one (as when
a scanned checkpoint is made from mT5's). Layers with biases of their own
(a scalable_t5 model trained so) are refused: mT5, Hugging Face's
MT5ForConditionalGeneration and CTranslate2's T5 have one table per stack.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from seahorse_metrics.checkpoints.params import CheckpointError
from seahorse_metrics.checkpoints.streaming import StoredTensor

_STACKS = ("encoder", "decoder")
_RELPOS = "relpos_bias/rel_embedding"
_LAYER_NORM_SCALE = {"encoder": "pre_attention_layer_norm/scale",
                     "decoder": "pre_self_attention_layer_norm/scale"}
# How a layer's axes (without `layers`) join into the unscanned ones.
_JOINED_HEADS = {"query": ((0,), (1, 2)), "key": ((0,), (1, 2)), "value": ((0,), (1, 2)),
                 "out": ((0, 1), (2,))}


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
        layers, or layers whose relative position biases differ.
    """
    embed = _embed_width(tensors, source)
    result = {}
    for name, tensor in tensors.items():
        stack, _, rest = name.partition("/")
        scanned_prefix = f"{stack}/"
        if stack not in _STACKS or not rest.startswith(scanned_prefix):
            result[name] = tensor
            continue
        sub = rest[len(scanned_prefix):]
        axis = _layer_axis(tensors, stack, embed, source)
        if sub == _RELPOS:
            result[f"{stack}/{_RELPOS}"] = _shared_bias(tensor, axis, source)
            continue
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


def layer_view(tensor: StoredTensor, name: str, layer: int, axis: int,
               groups: Sequence[Sequence[int]]) -> StoredTensor:
    """Layer `layer` of `tensor` (stacked on `axis`), its remaining axes
    joined as `groups` say (((0,), (1, 2)): [embed, heads, kv] -> [embed,
    heads * kv]); a box of the view reads only the rows it needs."""
    per_layer = tensor.shape[:axis] + tensor.shape[axis + 1:]
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


def _shared_bias(tensor: StoredTensor, axis: int, source: str) -> StoredTensor:
    """The stack's relative position bias: the layers' one table."""
    tables = np.moveaxis(np.asarray(tensor.read(tuple(slice(0, n) for n in tensor.shape))),
                         axis, 0)
    different = [layer for layer in range(1, len(tables))
                 if not np.array_equal(tables[layer], tables[0])]
    if different:
        raise CheckpointError(
            f"{source}: {tensor.name}: layer {different[0]} has a relative position bias of its "
            f"own (T5X's scalable_t5 learns one per layer); mT5, Hugging Face's MT5 and "
            "CTranslate2 share one table per stack, so this checkpoint cannot be read as theirs")
    return StoredTensor.in_memory(tensor.name, tensor.path, tables[0])
