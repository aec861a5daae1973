"""The network's attention layer: the query, key, value and output
projections, and the choice among the forms of `attention` and
`blocked_attention` (dense, blocked, folded, cuDNN) for each call.

Array names carry their shape after an underscore (as `network`): B batch,
L/Q/K length (query/key), D d_model, H heads, V d_kv, I heads x d_kv.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional, Union

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from seahorse_metrics.model.attention import (
    AttentionMask,
    RelativeBias,
    cudnn_attention,
    dense_weights,
    folded_attention,
    uses_cudnn,
    weighted_values,
)
from seahorse_metrics.model.blocked_attention import blocked_attention
from seahorse_metrics.model.kernels import Kernel, QuantizedKernel, dense

Array = jax.Array


class Attention(nn.Module):
    """Multi-head dot-product attention with T5X's 2-D projection kernels.

    Queries at least `blocked_min_length` long are attended in blocks of
    `query_block` (and `key_block` keys, if set) by
    `blocked_attention.blocked_attention`; shorter ones at once by
    `attention.dense_weights`. Both give the same outputs and gradients to
    float rounding; the blocked form never holds [H, Q, K] arrays. On GPUs,
    16-bit attention without dropout goes to cuDNN's fused kernel instead
    (`attention.uses_cudnn`; bench/gpu_attention.py). The scorer's first decoder
    step folds its cross-attention's keys and values into the queries (`folds`).
    """

    num_heads: int
    head_dim: int
    dtype: jnp.dtype
    dropout_rate: float
    quantize: Optional[str] = None
    int8_products: str = "bfloat16"
    blocked_min_length: Optional[int] = None
    forward_min_length: Optional[int] = None
    band_min_length: Optional[int] = None
    query_block: int = 256
    key_block: Optional[int] = None

    @nn.compact
    def __call__(
        self,
        inputs_q_BxQxD: Array,
        inputs_kv_BxKxD: Optional[Array],
        position: Optional[RelativeBias],
        mask: AttentionMask,
        deterministic: bool,
        dropout_rng: Optional[Array] = None,
    ) -> Array:
        """Attends from `inputs_q` to `inputs_kv` (self-attention if None).

        Args:
          inputs_q_BxQxD: Queries' inputs.
          inputs_kv_BxKxD: Keys' and values' inputs, or None for self-attention.
          position: The relative position bias, or None.
          mask: Which keys each query may attend to.
          deterministic: Disables dropout.
          dropout_rng: The dropout key (None: drawn from the 'dropout' rngs).

        Returns:
          The attention output [B, Q, D] in the compute dtype.
        """
        embed = inputs_q_BxQxD.shape[-1]
        inner = self.num_heads * self.head_dim
        projection_init = nn.initializers.variance_scaling(1.0, "fan_in", "normal")
        query_init = _divided(projection_init, np.sqrt(self.head_dim))
        kernel = functools.partial(Kernel, quantize=self.quantize)
        w_query_DxI = kernel((embed, inner), ("embed", "joined_kv"), query_init, name="query")()
        w_key_DxI = kernel((embed, inner), ("embed", "joined_kv"), projection_init, name="key")()
        w_value_DxI = kernel(
            (embed, inner), ("embed", "joined_kv"), projection_init, name="value"
        )()
        w_out_IxD = kernel((inner, embed), ("joined_kv", "embed"), projection_init, name="out")()

        batch, query_length = inputs_q_BxQxD.shape[:2]
        cross = inputs_kv_BxKxD is not None
        context_BxQxHxV = self._context(
            self._heads(inputs_q_BxQxD, w_query_DxI),
            inputs_kv_BxKxD if cross else inputs_q_BxQxD,
            cross,
            w_key_DxI,
            w_value_DxI,
            position,
            mask,
            deterministic,
            dropout_rng,
        )
        context_BxQxI = context_BxQxHxV.reshape(batch, query_length, inner)
        context_BxQxI = nn.with_logical_constraint(context_BxQxI, ("batch", "length", "joined_kv"))
        return dense(context_BxQxI, w_out_IxD, self.dtype, self._products_dtype())

    # Separate products (not one fused qkv kernel) keep each kernel's
    # 'joined_kv' sharding intact under model parallelism.
    def _heads(self, x_BxLxD: Array, w_DxI: Union[Array, QuantizedKernel]) -> Array:
        """`x_BxLxD` projected by `w_DxI` and split into heads, [B, L, H, V]."""
        y_BxLxI = dense(x_BxLxD, w_DxI, self.dtype, self._products_dtype())
        y_BxLxHxV = y_BxLxI.reshape(y_BxLxI.shape[:2] + (self.num_heads, self.head_dim))
        return nn.with_logical_constraint(y_BxLxHxV, ("batch", "length", "heads", "kv"))

    def _context(
        self,
        query_BxQxHxV: Array,
        inputs_kv_BxKxD: Array,
        cross: bool,
        w_key_DxI: Union[Array, QuantizedKernel],
        w_value_DxI: Union[Array, QuantizedKernel],
        position: Optional[RelativeBias],
        mask: AttentionMask,
        deterministic: bool,
        dropout_rng: Optional[Array],
    ) -> Array:
        """The attention's context [B, Q, H, V]: folded where `folds` says so,
        else attended over the projected keys and values (`_attend`)."""
        query_length, key_length = query_BxQxHxV.shape[1], inputs_kv_BxKxD.shape[1]
        if self.folds(cross, position, query_length, key_length, deterministic):
            return folded_attention(
                query_BxQxHxV,
                inputs_kv_BxKxD,
                w_key_DxI,
                w_value_DxI,
                mask,
                self.dtype,
                self.dtype,
                self._products_dtype(),
            )
        return self._attend(
            query_BxQxHxV,
            self._heads(inputs_kv_BxKxD, w_key_DxI),
            self._heads(inputs_kv_BxKxD, w_value_DxI),
            position,
            mask,
            deterministic,
            dropout_rng,
        )

    def _attend(
        self,
        query_BxQxHxV: Array,
        key_BxKxHxV: Array,
        value_BxKxHxV: Array,
        position: Optional[RelativeBias],
        mask: AttentionMask,
        deterministic: bool,
        dropout_rng: Optional[Array],
    ) -> Array:
        """softmax(q k + bias + mask) v, [B, Q, H, V] in the compute dtype: in
        cuDNN's kernel where `uses_cudnn`, else dense or in blocks
        (`query_block_for`)."""
        if uses_cudnn(
            jax.default_backend(),
            self._products_dtype(),
            self.head_dim,
            deterministic or self.dropout_rate == 0,
        ):
            return cudnn_attention(
                query_BxQxHxV,
                key_BxKxHxV,
                value_BxKxHxV,
                position,
                mask,
                self._products_dtype(),
                self.dtype,
            )
        # As T5X: one dropout mask per key, shared by all queries.
        dropout = nn.Dropout(self.dropout_rate, broadcast_dims=(-2,))
        query_block = self.query_block_for(query_BxQxHxV.shape[1], deterministic)
        if query_block is None:
            weights_BxHxQxK = dense_weights(
                query_BxQxHxV, key_BxKxHxV, position, mask, self._products_dtype()
            )
            weights_BxHxQxK = dropout(weights_BxHxQxK, deterministic=deterministic, rng=dropout_rng)
            return weighted_values(
                weights_BxHxQxK,
                value_BxKxHxV,
                self._products_dtype(),
                self.dtype,
                accumulate_float32=self.quantize is not None,
            )
        return self._attend_blocked(
            query_BxQxHxV,
            key_BxKxHxV,
            value_BxKxHxV,
            position,
            mask,
            deterministic,
            dropout_rng,
            dropout,
            query_block,
        )

    def _attend_blocked(
        self,
        query_BxQxHxV: Array,
        key_BxKxHxV: Array,
        value_BxKxHxV: Array,
        position: Optional[RelativeBias],
        mask: AttentionMask,
        deterministic: bool,
        dropout_rng: Optional[Array],
        dropout: nn.Dropout,
        query_block: int,
    ) -> Array:
        """`_attend` in blocks of `query_block` queries (`blocked_attention`),
        the dropout folded into the values, the bias in a band where `bands`."""
        value_scale_BxHx1xK = None
        if not deterministic and self.dropout_rate > 0:
            # The same random bits as the dense path's mask of [B, H, 1, K].
            batch, key_length = key_BxKxHxV.shape[:2]
            value_scale_BxHx1xK = dropout(
                jnp.ones((batch, self.num_heads, 1, key_length), jnp.float32),
                deterministic=False,
                rng=dropout_rng,
            )
        if position is not None and not self.bands(key_BxKxHxV.shape[1], deterministic):
            position = position.replace(constant_beyond=None)  # the bias from the strip
        return blocked_attention(
            query_BxQxHxV,
            key_BxKxHxV,
            value_BxKxHxV,
            position,
            mask,
            query_block=query_block,
            key_block=self.key_block,
            products_dtype=self._products_dtype(),
            output_dtype=self.dtype,
            value_scale_BxHx1xK=value_scale_BxHx1xK,
        )

    def folds(
        self,
        cross: bool,
        position: Optional[RelativeBias],
        query_length: int,
        key_length: int,
        deterministic: bool,
    ) -> bool:
        """Whether `attention.folded_attention` runs: cross-attention without
        bias or dropout, where the queries times the heads are fewer than the
        keys (the fold's products cost Q * H where projecting costs K)."""
        return (
            cross
            and position is None
            and deterministic
            and query_length * self.num_heads < key_length
        )

    def query_block_for(self, query_length: int, deterministic: bool) -> Optional[int]:
        """Queries per block at this length, or None: all at once (dense).

        Training blocks from `blocked_min_length`, in blocks of `query_block`.
        A pass without dropout (scoring) blocks from `forward_min_length` and
        attends up to twice `query_block` queries as one block: on CPUs that
        forward ran 1.2-6x faster than the dense one at the scorer's batches
        of 64-256 tokens, while its backward (the block recomputed) was slower.
        """
        threshold = self.forward_min_length if deterministic else self.blocked_min_length
        if threshold is None or query_length < threshold:
            return None
        return (
            query_length
            if deterministic and query_length <= 2 * self.query_block
            else (self.query_block)
        )

    def bands(self, key_length: int, deterministic: bool) -> bool:
        """Whether the blocked attention may add the bias in a band (see
        `blocked_attention.blocked_attention`): always in training (a train step of 2
        x 2048 tokens took 0.90x the strip's time, the bias table's gradient
        included), from `band_min_length` keys in passes without dropout
        (on CPUs the strip's forward was 1.3-1.4x faster at 640-1024 tokens,
        the band's 1.07-1.4x from 1536)."""
        return not deterministic or (
            self.band_min_length is not None and key_length >= self.band_min_length
        )

    # Quantized, the kernels' and the two attention products take
    # `int8_products` inputs (float32 accumulation; the softmax stays
    # float32): bfloat16 was 7-15% faster on CPUs with AVX512-BF16, and the
    # int8 kernels' error dominates anyway.
    def _products_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.int8_products) if self.quantize else self.dtype


def _divided(init: Callable[..., Array], divisor: float) -> Callable[..., Array]:
    """`init` divided by `divisor`: T5 divides the query initialisation by
    sqrt(d_kv) instead of scaling the logits."""

    def divided_init(*args) -> Array:
        return init(*args) / divisor

    return divided_init
