"""The attention arithmetic of the T5 network: dense, folded and through cuDNN,
with the relative position bias and the mask that every form shares.

`attention_layer.Attention` projects queries, keys and values and calls one
of two forms with the same inputs and the same meaning:

- dense, `dense_weights` then `weighted_values` (here): the [B, H, Q, K]
  logits, the relative position bias and the mask of the whole sequence at
  once, then one softmax (the arithmetic T5X and Hugging Face write out).
- blocked, for long inputs (`blocked_attention.blocked_attention`): the
  queries in blocks, nothing of size [H, Q, K] in memory; the bias comes per
  block from `RelativeBias.strip` or `RelativeBias.band`, the mask from
  `AttentionMask.allowed`.

A cross-attention with a few queries (the scorer reads one decoder step)
has `folded_attention`: the same arithmetic without projecting the keys and
values of every input token. On GPUs, 16-bit attention without dropout runs
in cuDNN's fused kernel (`uses_cudnn`, `cudnn_attention`).

At 2048 tokens the dense form spends most of its time carrying the [H, Q, K]
logits, bias, mask and weights through memory; see `bench/kernels.py`.

Array names carry their shape after an underscore (as `network`): B batch,
Q/K query/key length, H heads, V d_kv, O offsets (Q + K - 1), R rows of a
query block, W strip width.
"""

from __future__ import annotations

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
    def of_buckets(
        cls,
        rel_embedding_HxN: Array,
        bucket_of_offset_O: np.ndarray,
        query_length: int,
        key_length: int,
    ) -> "RelativeBias":
        """The bias of a [query_length, key_length] attention whose offsets
        -(Q - 1) .. K - 1 fall in `bucket_of_offset_O` (host integers) of the
        per-head table `rel_embedding_HxN`."""
        bias_of_offset_HxO = jnp.take(rel_embedding_HxN, jnp.asarray(bucket_of_offset_O), axis=1)
        return cls(
            bias_of_offset_HxO.astype(jnp.float32),
            query_length,
            key_length,
            _constant_distance(np.asarray(bucket_of_offset_O), query_length),
        )

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
        offset_index_RxW = (
            column_RxW - row_RxW + (self.query_length - 1) - (num_query_blocks - 1) * query_block
        )
        return jnp.take(self.bias_of_offset_HxO, offset_index_RxW, axis=1, mode="clip").astype(
            jnp.float32
        )

    def band(
        self, query_block: int, num_query_blocks: int, key_length: int, width: int
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
        far_index = np.clip(
            np.array([-1, 1]) * self.constant_beyond + self.query_length - 1,
            0,
            self.bias_of_offset_HxO.shape[1] - 1,
        )
        before_H, after_H = (self.bias_of_offset_HxO[:, i] for i in far_index)
        return BiasBand(
            strip_HxRxW.astype(jnp.float32),
            before_H.astype(jnp.float32),
            after_H.astype(jnp.float32),
            base,
            width,
            self.constant_beyond,
        )


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

    after = bucket_of_offset_O[query_length - 1 :]  # offsets 0, 1, ..., K - 1
    before = bucket_of_offset_O[query_length - 1 :: -1]  # offsets 0, -1, ..., -(Q - 1)
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

    def allowed(
        self, query_start, query_count: int, key_length: int, key_start=0
    ) -> Optional[Array]:
        """Boolean [B or 1, 1, query_count or 1, key_length] of the queries
        from `query_start` and keys from `key_start`, or None if all are allowed.

        Segment ids and key padding must already cover the requested
        queries and keys (`padded`).
        """
        factors = []
        if self.key_is_token_BxK is not None:
            key_is_token_BxC = jax.lax.dynamic_slice_in_dim(
                self.key_is_token_BxK, key_start, key_length, axis=1
            )
            factors.append(key_is_token_BxC[:, None, None, :])
        if self.query_segment_BxQ is not None:
            query_segment_BxR = jax.lax.dynamic_slice_in_dim(
                self.query_segment_BxQ, query_start, query_count, axis=1
            )
            key_segment_BxC = jax.lax.dynamic_slice_in_dim(
                self.key_segment_BxK, key_start, key_length, axis=1
            )
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
            return jnp.pad(ids_BxL, ((0, 0), (0, length - ids_BxL.shape[1])), constant_values=value)

        key_is_token_BxK = self.key_is_token_BxK
        if key_is_token_BxK is None and self.key_segment_BxK is None and not self.causal:
            key_is_token_BxK = jnp.ones((1, key_length), bool)
        elif key_is_token_BxK is not None:
            key_is_token_BxK = pad(key_is_token_BxK, key_length, False)
        return AttentionMask(
            key_is_token_BxK,
            pad(self.query_segment_BxQ, query_length, 0),
            pad(self.key_segment_BxK, key_length, -1),
            self.causal,
        )


def encoder_attention_mask(
    pad_id: int, encoder_input_tokens_BxL: Array, encoder_segment_ids_BxL: Optional[Array] = None
) -> AttentionMask:
    """Encoder self-attention mask: keys must be real tokens (of the query's
    segment when packed). `.dense(L, L)` is the additive [B, 1, 1 or L, L] mask."""
    key_is_token_BxL = encoder_input_tokens_BxL != pad_id
    return AttentionMask(key_is_token_BxL, encoder_segment_ids_BxL, encoder_segment_ids_BxL)


def decoder_attention_masks(
    pad_id: int,
    encoder_input_tokens_BxK: Array,
    encoder_segment_ids_BxK: Optional[Array] = None,
    decoder_segment_ids_BxQ: Optional[Array] = None,
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
    return self_mask, AttentionMask(
        key_is_token_BxK, decoder_segment_ids_BxQ, encoder_segment_ids_BxK
    )


def dense_weights(
    query_BxQxHxV: Array,
    key_BxKxHxV: Array,
    position: Optional[RelativeBias],
    mask: AttentionMask,
    products_dtype: jnp.dtype,
) -> Array:
    """Float32 attention weights [B, H, Q, K] of the whole attention at once
    (logits without scaling, as T5; plus bias and mask; softmax)."""
    # Heads first before the product, not inside the einsum: on XLA:CPU at
    # 64-512 tokens the forward ran 1.0-3.4x faster, with the backward 1.03-1.35x.
    query_BxHxQxV, key_BxHxKxV = (
        jnp.transpose(x, (0, 2, 1, 3)).astype(products_dtype) for x in (query_BxQxHxV, key_BxKxHxV)
    )
    logits_BxHxQxK = jnp.einsum(
        "bhqv,bhkv->bhqk", query_BxHxQxV, key_BxHxKxV, preferred_element_type=jnp.float32
    )
    if position is not None:
        logits_BxHxQxK = logits_BxHxQxK + position.dense()
    logits_BxHxQxK = logits_BxHxQxK + mask.dense(query_BxQxHxV.shape[1], key_BxKxHxV.shape[1])
    return jax.nn.softmax(logits_BxHxQxK, axis=-1)


def weighted_values(
    weights_BxHxQxK: Array,
    value_BxKxHxV: Array,
    products_dtype: jnp.dtype,
    output_dtype: jnp.dtype,
    accumulate_float32: bool,
) -> Array:
    """The values averaged by the weights, [B, Q, H, V] in `output_dtype`."""
    value_BxHxKxV = jnp.transpose(value_BxKxHxV, (0, 2, 1, 3)).astype(products_dtype)
    context_BxHxQxV = jnp.einsum(
        "bhqk,bhkv->bhqv",
        weights_BxHxQxK.astype(products_dtype),
        value_BxHxKxV,
        preferred_element_type=jnp.float32 if accumulate_float32 else None,
    )
    return jnp.transpose(context_BxHxQxV, (0, 2, 1, 3)).astype(output_dtype)


def folded_attention(
    query_BxQxHxV: Array,
    inputs_BxKxD: Array,
    w_key_DxI: Union[Array, QuantizedKernel],
    w_value_DxI: Union[Array, QuantizedKernel],
    mask: AttentionMask,
    products_dtype: jnp.dtype,
    output_dtype: jnp.dtype,
    int8_products: jnp.dtype = jnp.bfloat16,
) -> Array:
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
    spread_IxN = jnp.einsum(
        "bqhv,gh->gvbqh", query_BxQxHxV.astype(products_dtype), eye_HxH
    ).reshape(heads * head_dim, rows)
    carried_DxBxQxH = kernel_times(w_key_DxI, spread_IxN, products_dtype, int8_products).reshape(
        depth, batch, queries, heads
    )
    logits_BxHxQxK = jnp.einsum("dbqh,bkd->bhqk", carried_DxBxQxH, inputs_BxKxD)
    logits_BxHxQxK = logits_BxHxQxK.astype(jnp.float32) + mask.dense(queries, inputs_BxKxD.shape[1])
    weights_BxHxQxK = jax.nn.softmax(logits_BxHxQxK, axis=-1).astype(products_dtype)
    mixed_NxD = jnp.einsum("bhqk,bkd->bqhd", weights_BxHxQxK, inputs_BxKxD).reshape(rows, depth)
    # Row (b, q, h) against every head's columns; head h's are the context.
    every_BxQxHxGxV = dense(mixed_NxD, w_value_DxI, products_dtype, int8_products).reshape(
        batch, queries, heads, heads, head_dim
    )
    context_BxQxVxH = jnp.diagonal(every_BxQxHxGxV, axis1=2, axis2=3)
    return jnp.swapaxes(context_BxQxVxH, 2, 3).astype(output_dtype)


def uses_cudnn(
    platform: str, products_dtype: jnp.dtype, head_dim: int, deterministic: bool
) -> bool:
    """Whether an attention runs in cuDNN's fused kernel
    (`jax.nn.dot_product_attention(..., implementation="cudnn")`).

    cuDNN's kernel takes T5's additive bias, but only in 16-bit products,
    with heads of at most 128 (a multiple of 8) and without dropout (the
    jax.nn interface has none): so on GPUs, bfloat16 or int8 scoring and
    evaluation use it. On an H100 it ran one attention at 2048 tokens 2.0-2.9x
    faster than XLA's forms, with the gradient 2.1-2.3x (bench/gpu_attention.py); on
    CPU, the tests run the same call with XLA's implementation.
    """
    return (
        platform == "gpu"
        and jnp.dtype(products_dtype) in (jnp.bfloat16, jnp.float16)
        and head_dim <= 128
        and head_dim % 8 == 0
        and deterministic
    )


def cudnn_attention(
    query_BxQxHxV: Array,
    key_BxKxHxV: Array,
    value_BxKxHxV: Array,
    position: Optional[RelativeBias],
    mask: AttentionMask,
    products_dtype: jnp.dtype,
    output_dtype: jnp.dtype,
    implementation: str = "cudnn",
) -> Array:
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
        query_BxQxHxV.astype(products_dtype),
        key_BxKxHxV.astype(products_dtype),
        value_BxKxHxV.astype(products_dtype),
        bias=None if position is None else position.dense().astype(products_dtype),
        mask=allowed,
        scale=1.0,
        is_causal=mask.causal and allowed is None,
        key_value_seq_lengths=key_lengths_B,
        implementation=implementation,
    )
    return context_BxQxHxV.astype(output_dtype)
