"""Blocked attention for long inputs: the dense attention's arithmetic, per
block of queries, without anything of size [H, Q, K] in memory.

`blocked_attention` takes the queries in blocks of `query_block` rows. Each
block's logits [B, H, query_block, K] are made, biased, masked, exponentiated
and multiplied into the values while they are still in the CPU's cache, and
nothing of size [H, Q, K] is ever written to memory: the relative position
bias comes per block from a strip [H, query_block, ~Q + K] built from the
bucket table, the mask per block from the key padding, the packing segment
ids and causality. T5's bias stops changing beyond a distance (91 tokens
for 32 buckets up to 128): where that is known (`RelativeBias.of_buckets`),
only a band of keys near each block gets its exact bias from a narrow
strip, and the keys beyond get one of two constants per head from their
index, so no bias of the block's size crosses memory either. With
`key_block`, the keys are blocked too, with a running maximum and sum per
query row (the online softmax of flash-attention; Milakov & Gimelshein
2018, Dao et al. 2022).

It gives the outputs and gradients of `attention.dense_weights` then
`attention.weighted_values` to float rounding; `bench/kernels.py` times
both.

Array names carry their shape after an underscore (as `network`): B batch,
Q/K query/key length, H heads, V d_kv, N query blocks, R rows of a query
block, M key blocks, C keys of a key block, W strip width.
"""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp

from seahorse_metrics.model.attention import MASKED_LOGIT, AttentionMask, BiasBand, RelativeBias

Array = jax.Array


def _heads_first(x_BxLxHxV: Array, length: int, dtype: jnp.dtype) -> Array:
    """[B, H, length, V] in `dtype`, zero-padded at the end of the sequence."""
    x_BxHxLxV = jnp.transpose(x_BxLxHxV, (0, 2, 1, 3)).astype(dtype)
    return jnp.pad(x_BxHxLxV, ((0, 0), (0, 0), (0, length - x_BxHxLxV.shape[2]), (0, 0)))


def _blocks(x_BxLxHxV: Array, length: int, block: int, dtype: jnp.dtype) -> Array:
    """[length / block, B, H, block, V] in `dtype`: the sequence zero-padded to
    `length` and cut into blocks, block-major."""
    x_BxHxLxV = _heads_first(x_BxLxHxV, length, dtype)
    batch, heads, length, depth = x_BxHxLxV.shape
    return jnp.moveaxis(x_BxHxLxV.reshape(batch, heads, length // block, block, depth), 2, 0)


def blocked_attention(
    query_BxQxHxV: Array,
    key_BxKxHxV: Array,
    value_BxKxHxV: Array,
    position: Optional[RelativeBias],
    mask: AttentionMask,
    *,
    query_block: int,
    key_block: Optional[int],
    products_dtype: jnp.dtype,
    output_dtype: jnp.dtype,
    value_scale_BxHx1xK: Optional[Array] = None,
) -> Array:
    """`dense_weights` then `weighted_values`, computed per block of queries.

    Args:
      query_BxQxHxV: Queries.
      key_BxKxHxV: Keys.
      value_BxKxHxV: Values.
      position: The relative position bias, or None.
      mask: Which keys each query may see.
      query_block: Queries per block (the last block is padded).
      key_block: Keys per block with the online softmax, or None for all
        keys of a query block at once.
      products_dtype: Dtype of both products' inputs (float32 accumulation).
      output_dtype: Dtype of the result.
      value_scale_BxHx1xK: Attention dropout as a factor per key (0 or
        1 / keep probability), folded into the values, or None.

    Returns:
      The attention output [B, Q, H, V] in `output_dtype`.
    """
    query_length, key_length = query_BxQxHxV.shape[1], key_BxKxHxV.shape[1]
    query_block, key_block = _block_sizes(query_length, key_length, query_block, key_block)
    num_query_blocks = -(-query_length // query_block)
    padded_query = num_query_blocks * query_block
    padded_key = -(-key_length // key_block) * key_block
    if value_scale_BxHx1xK is not None:
        value_BxKxHxV = value_BxKxHxV * jnp.transpose(value_scale_BxHx1xK, (0, 3, 1, 2))
    query_NxBxHxRxV = _blocks(query_BxQxHxV, padded_query, query_block, products_dtype)
    key_MxBxHxCxV = _blocks(key_BxKxHxV, padded_key, key_block, products_dtype)
    value_MxBxHxCxV = _blocks(value_BxKxHxV, padded_key, key_block, products_dtype)
    one_query_block = _query_block_attention(
        position,
        mask.padded(padded_query, padded_key),
        query_block,
        num_query_blocks,
        key_block,
        key_MxBxHxCxV,
        value_MxBxHxCxV,
        products_dtype,
    )
    # Rematerialised per block: the backward pass keeps a query block, not its logits.
    context_NxBxHxRxV = jax.lax.map(
        jax.checkpoint(one_query_block, prevent_cse=False),
        (jnp.arange(num_query_blocks), query_NxBxHxRxV),
    )
    return _unblocked(context_NxBxHxRxV, query_length).astype(output_dtype)


def _unblocked(context_NxBxHxRxV: Array, query_length: int) -> Array:
    """[B, Q, H, V]: the blocks' outputs back in sequence order, the padding cut."""
    num_query_blocks, batch, heads, query_block, head_dim = context_NxBxHxRxV.shape
    context_BxQxHxV = jnp.transpose(context_NxBxHxRxV, (1, 0, 3, 2, 4)).reshape(
        batch, num_query_blocks * query_block, heads, head_dim
    )
    return context_BxQxHxV[:, :query_length]


def _block_sizes(
    query_length: int, key_length: int, query_block: int, key_block: Optional[int]
) -> tuple[int, int]:
    """Queries and keys per block: at most the lengths; all keys (one key block)
    without `key_block`."""
    query_block = min(query_block, query_length)
    key_block = key_length if key_block is None else min(key_block, key_length)
    return query_block, key_block


def _query_block_attention(
    position: Optional[RelativeBias],
    mask: AttentionMask,
    query_block: int,
    num_query_blocks: int,
    key_block: int,
    key_MxBxHxCxV: Array,
    value_MxBxHxCxV: Array,
    products_dtype: jnp.dtype,
):
    """The function of (block index, queries [B, H, R, V]) giving that query
    block's float32 attention output [B, H, R, V]: with the bias in a band
    where `_band_width` allows it, else with the bias from the strip."""
    key_length = key_MxBxHxCxV.shape[0] * key_block
    width = _band_width(position, query_block, key_block, key_length)
    if width is not None:
        band = position.band(query_block, num_query_blocks, key_length, width)

        def banded(inputs) -> Array:
            block, query_BxHxRxV = inputs
            return _banded_query_block(
                block * query_block,
                query_BxHxRxV,
                key_MxBxHxCxV[0],
                value_MxBxHxCxV[0],
                band,
                mask,
                products_dtype,
            )

        return banded

    strip_HxRxW = (
        None if position is None else position.strip(query_block, num_query_blocks, key_length)
    )

    def from_strip(inputs) -> Array:
        block, query_BxHxRxV = inputs
        logits_of = functools.partial(
            _block_logits, strip_HxRxW, mask, num_query_blocks, block, query_BxHxRxV
        )
        return _softmax_times_values(
            logits_of, query_block, key_MxBxHxCxV, value_MxBxHxCxV, products_dtype
        )

    return from_strip


def _band_width(
    position: Optional[RelativeBias], query_block: int, key_block: Optional[int], key_length: int
) -> Optional[int]:
    """Keys per band where the bias is added only near the diagonal (its
    distance is known, all keys of a query block are in one block, and the
    band is at most half of the keys), else None."""
    if position is None or position.constant_beyond is None or key_block != key_length:
        return None
    width = query_block + 2 * position.constant_beyond
    return width if 2 * width <= key_length else None


def _banded_query_block(
    query_start,
    query_BxHxRxV: Array,
    key_BxHxKxV: Array,
    value_BxHxKxV: Array,
    band: BiasBand,
    mask: AttentionMask,
    products_dtype: jnp.dtype,
) -> Array:
    """softmax(logits + bias + mask) @ values of one query block, float32
    [B, H, R, V], without a bias of size [H, R, K] in memory.

    Outside the band every key's bias is one of two constants per head, which
    the pass that exponentiates the logits adds from the key's index; the band's
    logits are taken out, given their exact bias from the strip and
    exponentiated apart, and their values weighed by a second, narrow product.
    """
    rows, key_length = query_BxHxRxV.shape[2], key_BxHxKxV.shape[2]
    logits_BxHxRxK = jnp.einsum(
        "bhrv,bhkv->bhrk", query_BxHxRxV, key_BxHxKxV, preferred_element_type=jnp.float32
    )
    mask_BxHxRxK = _additive_mask(mask, query_start, rows, key_length)
    start = band.start(query_start, key_length)
    key_K = jnp.arange(key_length)
    far_bias_1xHx1xK = jnp.where(key_K < start, band.before_H[:, None], band.after_H[:, None])[
        None, :, None, :
    ]
    in_band_K = (key_K >= start) & (key_K < start + band.width)
    # -inf, not MASKED_LOGIT: a row with every key masked keeps each key once.
    far_BxHxRxK = jnp.where(in_band_K, -jnp.inf, logits_BxHxRxK + far_bias_1xHx1xK + mask_BxHxRxK)
    near_BxHxRxW = (
        jax.lax.dynamic_slice_in_dim(logits_BxHxRxK, start, band.width, axis=3)
        + band.window(query_start, key_length)[None]
        + jax.lax.dynamic_slice_in_dim(mask_BxHxRxK, start, band.width, axis=3)
    )
    row_max_BxHxRx1 = jnp.maximum(
        jnp.max(far_BxHxRxK, axis=-1, keepdims=True), jnp.max(near_BxHxRxW, axis=-1, keepdims=True)
    )
    far_weights = jnp.exp(far_BxHxRxK - row_max_BxHxRx1)
    near_weights = jnp.exp(near_BxHxRxW - row_max_BxHxRx1)
    near_value_BxHxWxV = jax.lax.dynamic_slice_in_dim(value_BxHxKxV, start, band.width, axis=2)
    context_BxHxRxV = jnp.einsum(
        "bhrk,bhkv->bhrv",
        far_weights.astype(products_dtype),
        value_BxHxKxV,
        preferred_element_type=jnp.float32,
    ) + jnp.einsum(
        "bhrw,bhwv->bhrv",
        near_weights.astype(products_dtype),
        near_value_BxHxWxV,
        preferred_element_type=jnp.float32,
    )
    total_BxHxRx1 = jnp.sum(far_weights, axis=-1, keepdims=True) + jnp.sum(
        near_weights, axis=-1, keepdims=True
    )
    return context_BxHxRxV / total_BxHxRx1


def _additive_mask(mask: AttentionMask, query_start, rows: int, key_length: int) -> Array:
    """Float32 [B, H, R, K] (broadcastable) 0 where a query of the block at
    `query_start` may see a key, MASKED_LOGIT where not."""
    allowed = mask.allowed(query_start, rows, key_length)
    if allowed is None:
        return jnp.zeros((1, 1, 1, key_length), jnp.float32)
    return jnp.where(allowed, 0.0, MASKED_LOGIT)


def _block_logits(
    strip_HxRxW: Optional[Array],
    mask: AttentionMask,
    num_query_blocks: int,
    block,
    query_BxHxRxV: Array,
    key_start,
    key_BxHxCxV: Array,
) -> Array:
    """Float32 logits [B, H, R, C] of query block `block` against the keys
    from `key_start`, plus their position bias (from the strip) and mask."""
    query_block, key_block = query_BxHxRxV.shape[2], key_BxHxCxV.shape[2]
    logits_BxHxRxC = jnp.einsum(
        "bhrv,bhcv->bhrc", query_BxHxRxV, key_BxHxCxV, preferred_element_type=jnp.float32
    )
    if strip_HxRxW is not None:
        window_start = (num_query_blocks - 1 - block) * query_block + key_start
        window_HxRxC = jax.lax.dynamic_slice_in_dim(strip_HxRxW, window_start, key_block, axis=2)
        logits_BxHxRxC = logits_BxHxRxC + window_HxRxC[None]
    allowed = mask.allowed(block * query_block, query_block, key_block, key_start)
    if allowed is not None:
        logits_BxHxRxC = logits_BxHxRxC + jnp.where(allowed, 0.0, MASKED_LOGIT)
    return logits_BxHxRxC


def _softmax_times_values(
    logits_of, rows: int, key_MxBxHxCxV: Array, value_MxBxHxCxV: Array, products_dtype: jnp.dtype
) -> Array:
    """softmax(logits) @ values for one block of `rows` queries, float32 [B, H, R, V].

    `logits_of(key_start, key_BxHxCxV)` gives the block's logits against one
    key block. With one key block, the softmax is direct; with several, the
    running maximum and sum of each row rescale what was accumulated so far
    (flash-attention's recurrence). Either way the division by the sum comes
    last, on [B, H, R, V] instead of the weights.
    """
    num_key_blocks, batch, heads, key_block, head_dim = value_MxBxHxCxV.shape

    def accumulate(logits_BxHxRxC, value_BxHxCxV, running_max_BxHxRx1):
        new_max_BxHxRx1 = jnp.maximum(
            running_max_BxHxRx1, jnp.max(logits_BxHxRxC, axis=-1, keepdims=True)
        )
        weights_BxHxRxC = jnp.exp(logits_BxHxRxC - new_max_BxHxRx1)
        context_BxHxRxV = jnp.einsum(
            "bhrc,bhcv->bhrv",
            weights_BxHxRxC.astype(products_dtype),
            value_BxHxCxV,
            preferred_element_type=jnp.float32,
        )
        return new_max_BxHxRx1, jnp.sum(weights_BxHxRxC, axis=-1, keepdims=True), context_BxHxRxV

    if num_key_blocks == 1:
        _, total_BxHxRx1, context_BxHxRxV = accumulate(
            logits_of(0, key_MxBxHxCxV[0]), value_MxBxHxCxV[0], -jnp.inf
        )
        return context_BxHxRxV / total_BxHxRx1

    def step(carry, inputs):
        running_max_BxHxRx1, total_BxHxRx1, context_BxHxRxV = carry
        block, key_BxHxCxV, value_BxHxCxV = inputs
        new_max_BxHxRx1, block_total_BxHxRx1, block_context_BxHxRxV = accumulate(
            logits_of(block * key_block, key_BxHxCxV), value_BxHxCxV, running_max_BxHxRx1
        )
        rescale_BxHxRx1 = jnp.exp(running_max_BxHxRx1 - new_max_BxHxRx1)
        return (
            new_max_BxHxRx1,
            total_BxHxRx1 * rescale_BxHxRx1 + block_total_BxHxRx1,
            context_BxHxRxV * rescale_BxHxRx1 + block_context_BxHxRxV,
        ), None

    start = (
        jnp.full((batch, heads, rows, 1), -jnp.inf, jnp.float32),
        jnp.zeros((batch, heads, rows, 1), jnp.float32),
        jnp.zeros((batch, heads, rows, head_dim), jnp.float32),
    )
    (_, total_BxHxRx1, context_BxHxRxV), _ = jax.lax.scan(
        step, start, (jnp.arange(num_key_blocks), key_MxBxHxCxV, value_MxBxHxCxV)
    )
    return context_BxHxRxV / total_BxHxRx1
