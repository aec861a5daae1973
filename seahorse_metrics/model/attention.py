"""The attention arithmetic of the T5 network: dense, and blocked for long inputs.

`network.Attention` projects queries, keys and values and calls one of two
functions here with the same inputs and the same meaning:

- `dense_attention`: the [B, H, Q, K] logits, the relative position bias and
  the mask of the whole sequence at once, then one softmax (the arithmetic
  T5X and Hugging Face write out).
- `blocked_attention`: the queries in blocks of `query_block` rows. Each
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

A cross-attention with a few queries (the scorer reads one decoder step)
has `folded_attention`: the same arithmetic without projecting the keys and
values of every input token.

At 2048 tokens the dense form spends most of its time carrying the [H, Q, K]
logits, bias, mask and weights through memory; see `bench/kernels.py`.

Array names carry their shape after an underscore (as `network`): B batch,
Q/K query/key length, H heads, V d_kv, O offsets (Q + K - 1), N query blocks,
R rows of a query block, C keys of a key block, W strip width.
"""
from __future__ import annotations

import functools
from typing import Optional, Union

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from seahorse_metrics.model.kernels import QuantizedKernel, dense, kernel_times

Array = jax.Array

# Additive bias of masked attention logits. Finite, so a row whose keys are all
# masked (an all-padding row) yields a uniform softmax instead of NaN.
MASKED_LOGIT = -1e10


@flax.struct.dataclass
class RelativeBias:
    """T5's relative position bias, kept per key-minus-query offset.

    `bias_of_offset_HxO[h, o]` is head h's bias where `key - query = o - (Q - 1)`,
    for the Q + K - 1 offsets of a [Q, K] attention; the [H, Q, K] bias is
    never needed whole.
    """

    bias_of_offset_HxO: Array
    query_length: int = flax.struct.field(pytree_node=False)
    key_length: int = flax.struct.field(pytree_node=False)
    # A distance S from which the bias no longer changes: every offset >= S has
    # the bias of S, every offset <= -S that of -S (T5's buckets stop there);
    # None where unknown. The blocked attention then adds the bias only near
    # the diagonal (`blocked_attention`).
    constant_beyond: Optional[int] = flax.struct.field(pytree_node=False, default=None)

    @classmethod
    def of_buckets(cls, rel_embedding_HxN: Array, bucket_of_offset_O: np.ndarray,
                   query_length: int, key_length: int) -> "RelativeBias":
        """The bias of a [query_length, key_length] attention whose offsets
        -(Q - 1) .. K - 1 fall in `bucket_of_offset_O` (host integers) of the
        per-head table `rel_embedding_HxN`."""
        bias_of_offset_HxO = jnp.take(rel_embedding_HxN, jnp.asarray(bucket_of_offset_O), axis=1)
        return cls(bias_of_offset_HxO.astype(jnp.float32), query_length, key_length,
                   _constant_distance(np.asarray(bucket_of_offset_O), query_length))

    def dense(self) -> Array:
        """The float32 bias [1, H, Q, K] of the whole attention."""
        query_QxK = jnp.arange(self.query_length)[:, None]
        key_QxK = jnp.arange(self.key_length)[None, :]
        offset_index_QxK = key_QxK - query_QxK + (self.query_length - 1)
        bias_HxQxK = jnp.take(self.bias_of_offset_HxO, offset_index_QxK, axis=1)
        return bias_HxQxK[None].astype(jnp.float32)

    def strip(self, query_block: int, num_query_blocks: int, padded_key_length: int) -> Array:
        """A float32 strip [H, R, W] whose window at column
        `(num_query_blocks - 1 - n) * query_block` is the bias of query block n.

        Row r of block n is query `n * R + r`; column c of its window is key c.
        The bias depends on key - query only, so one strip of width
        (N - 1) * R + K serves every block. Offsets outside the table (padded
        queries or keys, never read) are clipped to it.
        """
        width = (num_query_blocks - 1) * query_block + padded_key_length
        row_RxW = jnp.arange(query_block)[:, None]
        column_RxW = jnp.arange(width)[None, :]
        offset_index_RxW = (column_RxW - row_RxW + (self.query_length - 1)
                            - (num_query_blocks - 1) * query_block)
        return jnp.take(self.bias_of_offset_HxO, offset_index_RxW, axis=1,
                        mode="clip").astype(jnp.float32)

    def band(self, query_block: int, num_query_blocks: int, key_length: int, width: int
             ) -> "BiasBand":
        """The bias of the `width` keys around each query block, and of the keys
        beyond them (see `BiasBand`); needs `constant_beyond`."""
        # Band start minus block start runs from 0 (first block) down to `lowest`.
        lowest = key_length - width - (num_query_blocks - 1) * query_block
        base = max(0, -lowest)
        row_RxW = jnp.arange(query_block)[:, None]
        column_RxW = jnp.arange(base + width)[None, :]
        offset_index_RxW = column_RxW - base - row_RxW + (self.query_length - 1)
        strip_HxRxW = jnp.take(self.bias_of_offset_HxO, offset_index_RxW, axis=1, mode="clip")
        far_index = np.clip(np.array([-1, 1]) * self.constant_beyond + self.query_length - 1,
                            0, self.bias_of_offset_HxO.shape[1] - 1)
        before_H, after_H = (self.bias_of_offset_HxO[:, i] for i in far_index)
        return BiasBand(strip_HxRxW.astype(jnp.float32), before_H.astype(jnp.float32),
                        after_H.astype(jnp.float32), base, width, self.constant_beyond)


@flax.struct.dataclass
class BiasBand:
    """The relative position bias of a query block of R rows starting at q0,
    held as a band of `width` keys from `start(q0)` (those within
    `constant_beyond` of some query of the block; `strip_HxRxW`'s window at
    column `start - q0 + base`) and two constants: the bias of every key
    before the band (`before_H`) and after it (`after_H`)."""

    strip_HxRxW: Array
    before_H: Array
    after_H: Array
    base: int = flax.struct.field(pytree_node=False)
    width: int = flax.struct.field(pytree_node=False)
    constant_beyond: int = flax.struct.field(pytree_node=False)

    def start(self, query_start, key_length: int):
        """The first key of the band of the queries from `query_start`."""
        return jnp.clip(query_start - self.constant_beyond, 0, key_length - self.width)

    def window(self, query_start, key_length: int) -> Array:
        """The exact bias [H, R, width] of the band's keys."""
        column = self.start(query_start, key_length) - query_start + self.base
        return jax.lax.dynamic_slice_in_dim(self.strip_HxRxW, column, self.width, axis=2)


def _constant_distance(bucket_of_offset_O: np.ndarray, query_length: int) -> int:
    """The smallest S such that offsets beyond S (and beyond -S) share the
    bucket of S (of -S)."""
    def unchanging_from(buckets: np.ndarray) -> int:
        changes = np.flatnonzero(buckets[1:] != buckets[:-1])
        return 0 if changes.size == 0 else int(changes[-1]) + 1

    after = bucket_of_offset_O[query_length - 1:]         # offsets 0, 1, ..., K - 1
    before = bucket_of_offset_O[query_length - 1::-1]     # offsets 0, -1, ..., -(Q - 1)
    return max(unchanging_from(after), unchanging_from(before))


@flax.struct.dataclass
class AttentionMask:
    """Which keys each query may attend to, kept as its factors.

    A key is allowed if it is a real token (where `key_is_token_BxK` is
    given), of the query's packed segment (where segment ids are given), and
    not after the query (where `causal`).
    """

    key_is_token_BxK: Optional[Array] = None
    query_segment_BxQ: Optional[Array] = None
    key_segment_BxK: Optional[Array] = None
    causal: bool = flax.struct.field(pytree_node=False, default=False)

    def allowed(self, query_start, query_count: int, key_length: int,
                key_start=0) -> Optional[Array]:
        """Boolean [B or 1, 1, query_count or 1, key_length] of the queries
        from `query_start` and keys from `key_start`, or None if all are allowed.

        Segment ids and key padding must already cover the requested
        queries and keys (`padded`).
        """
        factors = []
        if self.key_is_token_BxK is not None:
            key_is_token_BxC = jax.lax.dynamic_slice_in_dim(self.key_is_token_BxK, key_start,
                                                            key_length, axis=1)
            factors.append(key_is_token_BxC[:, None, None, :])
        if self.query_segment_BxQ is not None:
            query_segment_BxR = jax.lax.dynamic_slice_in_dim(self.query_segment_BxQ, query_start,
                                                             query_count, axis=1)
            key_segment_BxC = jax.lax.dynamic_slice_in_dim(self.key_segment_BxK, key_start,
                                                           key_length, axis=1)
            factors.append(query_segment_BxR[:, None, :, None] == key_segment_BxC[:, None, None, :])
        if self.causal:
            query_R = query_start + jnp.arange(query_count)
            key_C = key_start + jnp.arange(key_length)
            factors.append((query_R[:, None] >= key_C[None, :])[None, None])
        if not factors:
            return None
        allowed = factors[0]
        for factor in factors[1:]:
            allowed = allowed & factor
        return allowed

    def dense(self, query_length: int, key_length: int) -> Array:
        """The float32 additive mask [B or 1, 1, Q or 1, K] (0 or `MASKED_LOGIT`)."""
        allowed = self.allowed(0, query_length, key_length)
        if allowed is None:
            allowed = jnp.ones((1, 1, 1, key_length), bool)
        return jnp.where(allowed, 0.0, MASKED_LOGIT).astype(jnp.float32)

    def padded(self, query_length: int, key_length: int) -> "AttentionMask":
        """The mask of queries and keys padded at the end to the given
        lengths; padded keys are never allowed."""
        def pad(ids_BxL: Optional[Array], length: int, value) -> Optional[Array]:
            if ids_BxL is None or ids_BxL.shape[1] == length:
                return ids_BxL
            return jnp.pad(ids_BxL, ((0, 0), (0, length - ids_BxL.shape[1])),
                           constant_values=value)

        key_is_token_BxK = self.key_is_token_BxK
        if key_is_token_BxK is None and self.key_segment_BxK is None and not self.causal:
            key_is_token_BxK = jnp.ones((1, key_length), bool)
        elif key_is_token_BxK is not None:
            key_is_token_BxK = pad(key_is_token_BxK, key_length, False)
        return AttentionMask(key_is_token_BxK, pad(self.query_segment_BxQ, query_length, 0),
                             pad(self.key_segment_BxK, key_length, -1), self.causal)


def encoder_attention_mask(pad_id: int, encoder_input_tokens_BxL: Array,
                           encoder_segment_ids_BxL: Optional[Array] = None) -> AttentionMask:
    """Encoder self-attention mask: keys must be real tokens (of the query's
    segment when packed). `.dense(L, L)` is the additive [B, 1, 1 or L, L] mask."""
    key_is_token_BxL = encoder_input_tokens_BxL != pad_id
    return AttentionMask(key_is_token_BxL, encoder_segment_ids_BxL, encoder_segment_ids_BxL)


def decoder_attention_masks(pad_id: int, encoder_input_tokens_BxK: Array,
                            encoder_segment_ids_BxK: Optional[Array] = None,
                            decoder_segment_ids_BxQ: Optional[Array] = None
                            ) -> tuple[AttentionMask, AttentionMask]:
    """Masks of decoder self-attention (causal, within a segment) and
    cross-attention (real encoder tokens, of the same segment when packed).

    Decoder padding needs no mask: it comes last, and causality keeps real
    positions from seeing it. Decoder segments without encoder segments are
    several decoder sequences against one whole encoder input each (the
    questions of a multi-question metric): they see only their own segment in
    self-attention and every real encoder token in cross-attention.
    """
    key_is_token_BxK = encoder_input_tokens_BxK != pad_id
    if encoder_segment_ids_BxK is not None and decoder_segment_ids_BxQ is None:
        raise ValueError("Packed batches need both encoder_segment_ids and decoder_segment_ids.")
    self_mask = AttentionMask(None, decoder_segment_ids_BxQ, decoder_segment_ids_BxQ, causal=True)
    if encoder_segment_ids_BxK is None:
        return self_mask, AttentionMask(key_is_token_BxK)
    return self_mask, AttentionMask(key_is_token_BxK, decoder_segment_ids_BxQ,
                                    encoder_segment_ids_BxK)


def dense_weights(query_BxQxHxV: Array, key_BxKxHxV: Array, position: Optional[RelativeBias],
                  mask: AttentionMask, products_dtype: jnp.dtype) -> Array:
    """Float32 attention weights [B, H, Q, K] of the whole attention at once
    (logits without scaling, as T5; plus bias and mask; softmax)."""
    # Heads first before the product, not inside the einsum: on XLA:CPU at
    # 64-512 tokens the forward ran 1.0-3.4x faster, with the backward 1.03-1.35x.
    query_BxHxQxV, key_BxHxKxV = (jnp.transpose(x, (0, 2, 1, 3)).astype(products_dtype)
                                  for x in (query_BxQxHxV, key_BxKxHxV))
    logits_BxHxQxK = jnp.einsum("bhqv,bhkv->bhqk", query_BxHxQxV, key_BxHxKxV,
                                preferred_element_type=jnp.float32)
    if position is not None:
        logits_BxHxQxK = logits_BxHxQxK + position.dense()
    logits_BxHxQxK = logits_BxHxQxK + mask.dense(query_BxQxHxV.shape[1], key_BxKxHxV.shape[1])
    return jax.nn.softmax(logits_BxHxQxK, axis=-1)


def weighted_values(weights_BxHxQxK: Array, value_BxKxHxV: Array, products_dtype: jnp.dtype,
                    output_dtype: jnp.dtype, accumulate_float32: bool) -> Array:
    """The values averaged by the weights, [B, Q, H, V] in `output_dtype`."""
    value_BxHxKxV = jnp.transpose(value_BxKxHxV, (0, 2, 1, 3)).astype(products_dtype)
    context_BxHxQxV = jnp.einsum("bhqk,bhkv->bhqv", weights_BxHxQxK.astype(products_dtype),
                                 value_BxHxKxV,
                                 preferred_element_type=jnp.float32 if accumulate_float32 else None)
    return jnp.transpose(context_BxHxQxV, (0, 2, 1, 3)).astype(output_dtype)


def folded_attention(query_BxQxHxV: Array, inputs_BxKxD: Array,
                     w_key_DxI: Union[Array, QuantizedKernel],
                     w_value_DxI: Union[Array, QuantizedKernel], mask: AttentionMask,
                     products_dtype: jnp.dtype, output_dtype: jnp.dtype,
                     int8_products: jnp.dtype = jnp.bfloat16) -> Array:
    """Attention without a bias whose keys and values are projections of
    `inputs` (cross-attention), for a few queries: [B, Q, H, V].

    q . (x W_k) = (W_k q) . x and sum_k a_k (x_k W_v) = (sum_k a_k x_k) W_v,
    so the queries are carried to the inputs' width once and the inputs are
    never projected. Each query row is spread over all heads' columns, zero
    outside its own head, so both products use the kernels as they are
    stored: a kernel read per head as [H, D, V] is a transposed copy of it,
    which XLA makes for every layer at the start of the step (3.2 GB at
    mT5-XXL). That costs H times the folded products: 2 * Q * H * D * I
    multiply-adds against the projections' 2 * K * D * I, less while
    Q * H < K (the scorer's first decoder step has Q = 1). The same
    arithmetic in another order: equal to `dense_weights` and
    `weighted_values` on the projections to float rounding; int8 kernels
    multiply in `int8_products` as in `dense`.
    """
    batch, queries, heads, head_dim = query_BxQxHxV.shape
    depth = inputs_BxKxD.shape[-1]
    rows = batch * queries * heads
    inputs_BxKxD = inputs_BxKxD.astype(products_dtype)
    eye_HxH = jnp.eye(heads, dtype=products_dtype)
    # Column (b, q, h) holds q[b, q, h] in rows of head h: [H * V, B * Q * H].
    spread_IxN = jnp.einsum("bqhv,gh->gvbqh", query_BxQxHxV.astype(products_dtype),
                            eye_HxH).reshape(heads * head_dim, rows)
    carried_DxBxQxH = kernel_times(w_key_DxI, spread_IxN, products_dtype,
                                   int8_products).reshape(depth, batch, queries, heads)
    logits_BxHxQxK = jnp.einsum("dbqh,bkd->bhqk", carried_DxBxQxH, inputs_BxKxD)
    logits_BxHxQxK = (logits_BxHxQxK.astype(jnp.float32)
                      + mask.dense(queries, inputs_BxKxD.shape[1]))
    weights_BxHxQxK = jax.nn.softmax(logits_BxHxQxK, axis=-1).astype(products_dtype)
    mixed_NxD = jnp.einsum("bhqk,bkd->bqhd", weights_BxHxQxK, inputs_BxKxD).reshape(rows, depth)
    # Row (b, q, h) against every head's columns; head h's are the context.
    every_BxQxHxGxV = dense(mixed_NxD, w_value_DxI, products_dtype, int8_products).reshape(
        batch, queries, heads, heads, head_dim)
    context_BxQxVxH = jnp.diagonal(every_BxQxHxGxV, axis1=2, axis2=3)
    return jnp.swapaxes(context_BxQxVxH, 2, 3).astype(output_dtype)


def _heads_first(x_BxLxHxV: Array, length: int, dtype: jnp.dtype) -> Array:
    """[B, H, length, V] in `dtype`, zero-padded at the end of the sequence."""
    x_BxHxLxV = jnp.transpose(x_BxLxHxV, (0, 2, 1, 3)).astype(dtype)
    return jnp.pad(x_BxHxLxV, ((0, 0), (0, 0), (0, length - x_BxHxLxV.shape[2]), (0, 0)))


def _blocks(x_BxHxLxV: Array, block: int) -> Array:
    """[L / block, B, H, block, V]: the sequence cut into blocks, block-major."""
    batch, heads, length, depth = x_BxHxLxV.shape
    return jnp.moveaxis(x_BxHxLxV.reshape(batch, heads, length // block, block, depth), 2, 0)


def blocked_attention(query_BxQxHxV: Array, key_BxKxHxV: Array, value_BxKxHxV: Array,
                      position: Optional[RelativeBias], mask: AttentionMask, *,
                      query_block: int, key_block: Optional[int], products_dtype: jnp.dtype,
                      output_dtype: jnp.dtype, value_scale_BxHx1xK: Optional[Array] = None
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
    batch, query_length, heads, head_dim = query_BxQxHxV.shape
    key_length = key_BxKxHxV.shape[1]
    query_block = min(query_block, query_length)
    key_block = key_length if key_block is None else min(key_block, key_length)
    num_query_blocks = -(-query_length // query_block)
    padded_query = num_query_blocks * query_block
    padded_key = -(-key_length // key_block) * key_block
    if value_scale_BxHx1xK is not None:
        value_BxKxHxV = value_BxKxHxV * jnp.transpose(value_scale_BxHx1xK, (0, 3, 1, 2))
    query_NxBxHxRxV = _blocks(_heads_first(query_BxQxHxV, padded_query, products_dtype),
                              query_block)
    key_MxBxHxCxV = _blocks(_heads_first(key_BxKxHxV, padded_key, products_dtype), key_block)
    value_MxBxHxCxV = _blocks(_heads_first(value_BxKxHxV, padded_key, products_dtype), key_block)
    one_query_block = _query_block_attention(
        position, mask.padded(padded_query, padded_key), query_block, num_query_blocks,
        key_block, key_MxBxHxCxV, value_MxBxHxCxV, products_dtype)
    # Rematerialised per block: the backward pass keeps a query block, not its logits.
    context_NxBxHxRxV = jax.lax.map(jax.checkpoint(one_query_block, prevent_cse=False),
                                    (jnp.arange(num_query_blocks), query_NxBxHxRxV))
    context_BxQxHxV = jnp.transpose(context_NxBxHxRxV, (1, 0, 3, 2, 4)).reshape(
        batch, padded_query, heads, head_dim)
    return context_BxQxHxV[:, :query_length].astype(output_dtype)


def _query_block_attention(position: Optional[RelativeBias], mask: AttentionMask,
                           query_block: int, num_query_blocks: int, key_block: int,
                           key_MxBxHxCxV: Array, value_MxBxHxCxV: Array,
                           products_dtype: jnp.dtype):
    """The function of (block index, queries [B, H, R, V]) giving that query
    block's float32 attention output [B, H, R, V]: with the bias in a band
    where `_band_width` allows it, else with the bias from the strip."""
    key_length = key_MxBxHxCxV.shape[0] * key_block
    width = _band_width(position, query_block, key_block, key_length)
    if width is not None:
        band = position.band(query_block, num_query_blocks, key_length, width)

        def banded(inputs) -> Array:
            block, query_BxHxRxV = inputs
            return _banded_query_block(block * query_block, query_BxHxRxV, key_MxBxHxCxV[0],
                                       value_MxBxHxCxV[0], band, mask, products_dtype)
        return banded

    strip_HxRxW = (None if position is None
                   else position.strip(query_block, num_query_blocks, key_length))

    def from_strip(inputs) -> Array:
        block, query_BxHxRxV = inputs
        logits_of = functools.partial(_block_logits, strip_HxRxW, mask, num_query_blocks, block,
                                      query_BxHxRxV)
        return _softmax_times_values(logits_of, query_block, key_MxBxHxCxV, value_MxBxHxCxV,
                                     products_dtype)
    return from_strip


def _band_width(position: Optional[RelativeBias], query_block: int, key_block: Optional[int],
                key_length: int) -> Optional[int]:
    """Keys per band where the bias is added only near the diagonal (its
    distance is known, all keys of a query block are in one block, and the
    band is at most half of the keys), else None."""
    if position is None or position.constant_beyond is None or key_block != key_length:
        return None
    width = query_block + 2 * position.constant_beyond
    return width if 2 * width <= key_length else None


def _banded_query_block(query_start, query_BxHxRxV: Array, key_BxHxKxV: Array,
                        value_BxHxKxV: Array, band: BiasBand, mask: AttentionMask,
                        products_dtype: jnp.dtype) -> Array:
    """softmax(logits + bias + mask) @ values of one query block, float32
    [B, H, R, V], without a bias of size [H, R, K] in memory.

    Outside the band every key's bias is one of two constants per head, which
    the pass that exponentiates the logits adds from the key's index; the band's
    logits are taken out, given their exact bias from the strip and
    exponentiated apart, and their values weighed by a second, narrow product.
    """
    rows, key_length = query_BxHxRxV.shape[2], key_BxHxKxV.shape[2]
    logits_BxHxRxK = jnp.einsum("bhrv,bhkv->bhrk", query_BxHxRxV, key_BxHxKxV,
                                preferred_element_type=jnp.float32)
    allowed = mask.allowed(query_start, rows, key_length)
    mask_BxHxRxK = (jnp.zeros((1, 1, 1, key_length), jnp.float32) if allowed is None
                    else jnp.where(allowed, 0.0, MASKED_LOGIT))
    start = band.start(query_start, key_length)
    key_K = jnp.arange(key_length)
    far_bias_1xHx1xK = jnp.where(key_K < start, band.before_H[:, None],
                                 band.after_H[:, None])[None, :, None, :]
    in_band_K = (key_K >= start) & (key_K < start + band.width)
    # -inf, not MASKED_LOGIT: a row with every key masked keeps each key once.
    far_BxHxRxK = jnp.where(in_band_K, -jnp.inf,
                            logits_BxHxRxK + far_bias_1xHx1xK + mask_BxHxRxK)
    near_BxHxRxW = (jax.lax.dynamic_slice_in_dim(logits_BxHxRxK, start, band.width, axis=3)
                    + band.window(query_start, key_length)[None]
                    + jax.lax.dynamic_slice_in_dim(mask_BxHxRxK, start, band.width, axis=3))
    row_max_BxHxRx1 = jnp.maximum(jnp.max(far_BxHxRxK, axis=-1, keepdims=True),
                                  jnp.max(near_BxHxRxW, axis=-1, keepdims=True))
    far_weights = jnp.exp(far_BxHxRxK - row_max_BxHxRx1)
    near_weights = jnp.exp(near_BxHxRxW - row_max_BxHxRx1)
    near_value_BxHxWxV = jax.lax.dynamic_slice_in_dim(value_BxHxKxV, start, band.width, axis=2)
    context_BxHxRxV = (
        jnp.einsum("bhrk,bhkv->bhrv", far_weights.astype(products_dtype), value_BxHxKxV,
                   preferred_element_type=jnp.float32)
        + jnp.einsum("bhrw,bhwv->bhrv", near_weights.astype(products_dtype), near_value_BxHxWxV,
                     preferred_element_type=jnp.float32))
    total_BxHxRx1 = (jnp.sum(far_weights, axis=-1, keepdims=True)
                     + jnp.sum(near_weights, axis=-1, keepdims=True))
    return context_BxHxRxV / total_BxHxRx1


def _block_logits(strip_HxRxW: Optional[Array], mask: AttentionMask, num_query_blocks: int,
                  block, query_BxHxRxV: Array, key_start, key_BxHxCxV: Array) -> Array:
    """Float32 logits [B, H, R, C] of query block `block` against the keys
    from `key_start`, plus their position bias (from the strip) and mask."""
    query_block, key_block = query_BxHxRxV.shape[2], key_BxHxCxV.shape[2]
    logits_BxHxRxC = jnp.einsum("bhrv,bhcv->bhrc", query_BxHxRxV, key_BxHxCxV,
                                preferred_element_type=jnp.float32)
    if strip_HxRxW is not None:
        window_start = (num_query_blocks - 1 - block) * query_block + key_start
        window_HxRxC = jax.lax.dynamic_slice_in_dim(strip_HxRxW, window_start, key_block, axis=2)
        logits_BxHxRxC = logits_BxHxRxC + window_HxRxC[None]
    allowed = mask.allowed(block * query_block, query_block, key_block, key_start)
    if allowed is not None:
        logits_BxHxRxC = logits_BxHxRxC + jnp.where(allowed, 0.0, MASKED_LOGIT)
    return logits_BxHxRxC


def _softmax_times_values(logits_of, rows: int, key_MxBxHxCxV: Array, value_MxBxHxCxV: Array,
                          products_dtype: jnp.dtype) -> Array:
    """softmax(logits) @ values for one block of `rows` queries, float32 [B, H, R, V].

    `logits_of(key_start, key_BxHxCxV)` gives the block's logits against one
    key block. With one key block, the softmax is direct; with several, the
    running maximum and sum of each row rescale what was accumulated so far
    (flash-attention's recurrence). Either way the division by the sum comes
    last, on [B, H, R, V] instead of the weights.
    """
    num_key_blocks, batch, heads, key_block, head_dim = value_MxBxHxCxV.shape

    def accumulate(logits_BxHxRxC, value_BxHxCxV, running_max_BxHxRx1):
        new_max_BxHxRx1 = jnp.maximum(running_max_BxHxRx1,
                                      jnp.max(logits_BxHxRxC, axis=-1, keepdims=True))
        weights_BxHxRxC = jnp.exp(logits_BxHxRxC - new_max_BxHxRx1)
        context_BxHxRxV = jnp.einsum("bhrc,bhcv->bhrv", weights_BxHxRxC.astype(products_dtype),
                                     value_BxHxCxV, preferred_element_type=jnp.float32)
        return new_max_BxHxRx1, jnp.sum(weights_BxHxRxC, axis=-1, keepdims=True), context_BxHxRxV

    if num_key_blocks == 1:
        _, total_BxHxRx1, context_BxHxRxV = accumulate(
            logits_of(0, key_MxBxHxCxV[0]), value_MxBxHxCxV[0], -jnp.inf)
        return context_BxHxRxV / total_BxHxRx1

    def step(carry, inputs):
        running_max_BxHxRx1, total_BxHxRx1, context_BxHxRxV = carry
        block, key_BxHxCxV, value_BxHxCxV = inputs
        new_max_BxHxRx1, block_total_BxHxRx1, block_context_BxHxRxV = accumulate(
            logits_of(block * key_block, key_BxHxCxV), value_BxHxCxV, running_max_BxHxRx1)
        rescale_BxHxRx1 = jnp.exp(running_max_BxHxRx1 - new_max_BxHxRx1)
        return (new_max_BxHxRx1, total_BxHxRx1 * rescale_BxHxRx1 + block_total_BxHxRx1,
                context_BxHxRxV * rescale_BxHxRx1 + block_context_BxHxRxV), None

    start = (jnp.full((batch, heads, rows, 1), -jnp.inf, jnp.float32),
             jnp.zeros((batch, heads, rows, 1), jnp.float32),
             jnp.zeros((batch, heads, rows, head_dim), jnp.float32))
    (_, total_BxHxRx1, context_BxHxRxV), _ = jax.lax.scan(
        step, start, (jnp.arange(num_key_blocks), key_MxBxHxCxV, value_MxBxHxCxV))
    return context_BxHxRxV / total_BxHxRx1


def uses_cudnn(platform: str, products_dtype: jnp.dtype, head_dim: int,
               deterministic: bool) -> bool:
    """Whether an attention runs in cuDNN's fused kernel
    (`jax.nn.dot_product_attention(..., implementation="cudnn")`).

    cuDNN's kernel takes T5's additive bias, but only in 16-bit products,
    with heads of at most 128 (a multiple of 8) and without dropout (the
    jax.nn interface has none): so on GPUs, bfloat16 or int8 scoring and
    evaluation use it. On an H100 it ran one attention at 2048 tokens 2.0-2.9x
    faster than XLA's forms, with the gradient 2.1-2.3x (bench/gpu_attention.py); on
    CPU, the tests run the same call with XLA's implementation.
    """
    return (platform == "gpu" and jnp.dtype(products_dtype) in (jnp.bfloat16, jnp.float16)
            and head_dim <= 128 and head_dim % 8 == 0 and deterministic)


def cudnn_attention(query_BxQxHxV: Array, key_BxKxHxV: Array, value_BxKxHxV: Array,
                    position: Optional[RelativeBias], mask: AttentionMask,
                    products_dtype: jnp.dtype, output_dtype: jnp.dtype,
                    implementation: str = "cudnn") -> Array:
    """The attention through cuDNN's fused kernel; see `uses_cudnn`.

    The bias is the [1, H, Q, K] relative position bias (cuDNN reads it, XLA
    does not keep the logits). Without packing, the key padding goes in as
    each row's number of keys and causality as cuDNN's own causal mask, so
    nothing of size [B, H, Q, K] is made; that takes rows padded at the end,
    as every batch of this project is. Packed segments go in as a boolean
    mask, which JAX folds into a [B, H, Q, K] bias. `implementation="xla"`
    runs the same call on any platform (the tests' CPU check of it).
    """
    query_length, key_length = query_BxQxHxV.shape[1], key_BxKxHxV.shape[1]
    key_lengths_B, allowed = None, None
    if mask.query_segment_BxQ is not None:
        allowed = mask.allowed(0, query_length, key_length)
    elif mask.key_is_token_BxK is not None:
        # At least one key: a row of padding only attends to its first key, not
        # to none (which would divide by zero).
        key_lengths_B = jnp.maximum(jnp.sum(mask.key_is_token_BxK, axis=1, dtype=jnp.int32), 1)
    context_BxQxHxV = jax.nn.dot_product_attention(
        query_BxQxHxV.astype(products_dtype), key_BxKxHxV.astype(products_dtype),
        value_BxKxHxV.astype(products_dtype),
        bias=None if position is None else position.dense().astype(products_dtype),
        mask=allowed, scale=1.0, is_causal=mask.causal and allowed is None,
        key_value_seq_lengths=key_lengths_B, implementation=implementation)
    return context_BxQxHxV.astype(output_dtype)
