"""The T5 encoder-decoder network (v1.1 / mT5, and v1.0) as a pure Flax module.

Architecture (Raffel et al. 2020, T5 v1.1 and mT5 variants): pre-norm blocks
with RMS norms (no bias, no mean subtraction, float32), gated-GELU feed-forward
(tanh approximation, as Hugging Face's `gelu_new` and Flax's default), one
relative position bias per stack (bidirectional in the encoder, causal in the
decoder; with `relative_bias_per_layer`, one per layer, as T5X's scalable_t5
and Hugging Face's UMT5 have it), attention without the 1/sqrt(d_kv) scaling (T5 folds it into the
query initialisation), untied float32 output head without rescaling. T5 v1.0
(`feed_forward_proj="relu"`, `tie_word_embeddings=True`, e.g. the TRUE NLI
metric) differs in two places only: a ReLU feed-forward `wo(relu(wi x))`, and
an output head that is the input embedding applied to the decoder output
scaled by d_model**-0.5.

Parameter names and shapes are those of T5X's `t5x/examples/t5/network.py`
(`token_embedder/embedding`, `encoder/layers_0/attention/query/kernel`, ...,
`mlp/wi_0`, `mlp/wi_1` or, for v1.0, `mlp/wi`, and `decoder/logits_dense/kernel`
unless tied; every kernel 2-D), so T5X checkpoints map one to one;
`seahorse_metrics.checkpoints.hf` maps the Hugging Face names onto them.

Array names carry their shape after an underscore (nanodo style):
B batch, L/Q/K length (query/key), D d_model, H heads, V d_kv, F d_ff,
T vocabulary, N buckets.
"""
from __future__ import annotations

import functools
from typing import Optional, Union

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from seahorse_metrics.model import stacks
from seahorse_metrics.model.attention import (AttentionMask, RelativeBias, blocked_attention,
                                              cudnn_attention, dense_weights, folded_attention,
                                              uses_cudnn, weighted_values)
from seahorse_metrics.model.config import T5Config
from seahorse_metrics.model.kernels import Kernel, QuantizedKernel, dense

Array = jax.Array

def relative_position_bucket(relative_position: np.ndarray, *, bidirectional: bool,
                             num_buckets: int, max_distance: int) -> np.ndarray:
    """Maps `key_position - query_position` to a relative-attention bucket.

    Distances below half the buckets (of a direction) get their own bucket;
    larger ones share logarithmically wider buckets up to `max_distance`, and
    everything beyond shares the last one. Bidirectional stacks spend half of
    the buckets on keys after the query; causal stacks treat keys after the
    query as distance 0 (they are masked anyway). The float32 arithmetic is the
    one Mesh TensorFlow, T5X and Hugging Face use, so boundaries agree.

    Args:
      relative_position: Integer array of key minus query positions.
      bidirectional: Whether keys after the query get their own buckets.
      num_buckets: Buckets in total.
      max_distance: Distance from which the last bucket is used.

    Returns:
      An int32 array of buckets in [0, num_buckets), shaped as the input.
    """
    relative_position = np.asarray(relative_position, np.int64)
    bucket = np.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket += (relative_position > 0) * num_buckets
        distance = np.abs(relative_position)
    else:
        distance = np.maximum(-relative_position, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(distance.astype(np.float32) / np.float32(max_exact))
        scaled = log_ratio / np.float32(np.log(max_distance / max_exact)) * np.float32(
            num_buckets - max_exact)
        # Distances below max_exact give log(0) = -inf here; np.where drops them.
        log_bucket = max_exact + np.where(distance < max_exact, 0, scaled).astype(np.int64)
    log_bucket = np.minimum(log_bucket, num_buckets - 1)
    bucket += np.where(distance < max_exact, distance, log_bucket)
    return bucket.astype(np.int32)


class RMSNorm(nn.Module):
    """T5's layer norm: scale by the root mean square, in float32, no bias."""

    epsilon: float
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x_BxLxD: Array) -> Array:
        scale_D = self.param("scale", nn.with_logical_partitioning(nn.initializers.ones, ("embed",)),
                             (x_BxLxD.shape[-1],), jnp.float32)
        x32_BxLxD = x_BxLxD.astype(jnp.float32)
        mean_square_BxLx1 = jnp.mean(jnp.square(x32_BxLxD), axis=-1, keepdims=True)
        normed_BxLxD = x32_BxLxD * jax.lax.rsqrt(mean_square_BxLx1 + self.epsilon)
        # The scale may be stored in bfloat16 (scoring); the product stays float32.
        return (normed_BxLxD * scale_D.astype(jnp.float32)).astype(self.dtype)


class RelativePositionBias(nn.Module):
    """Per-head attention bias from bucketed relative positions (one per
    stack, or one per layer with `T5Config.relative_bias_per_layer`)."""

    num_heads: int
    num_buckets: int
    max_distance: int
    bidirectional: bool

    @nn.compact
    def __call__(self, query_length: int, key_length: int) -> RelativeBias:
        """Returns the bias of a [query_length, key_length] attention, per
        key-minus-query offset (`RelativeBias.dense()` is the [1, H, Q, K] bias).

        Positions are 0..length-1. Packed segments need nothing else: within a
        segment, key minus query position is the same as in the unpacked
        sequence, and attention across segments is masked.
        """
        rel_embedding_HxN = self.param(
            "rel_embedding",
            nn.with_logical_partitioning(
                nn.initializers.variance_scaling(1.0, "fan_avg", "uniform"),
                ("heads", "relpos_buckets")),
            (self.num_heads, self.num_buckets), jnp.float32)
        # The bucket depends only on key - query, in [-(Q-1), K-1]: bucket those
        # Q+K-1 offsets on the host; the attention spreads them on device.
        offsets = np.arange(-(query_length - 1), key_length)
        bucket_of_offset = relative_position_bucket(
            offsets, bidirectional=self.bidirectional, num_buckets=self.num_buckets,
            max_distance=self.max_distance)
        return RelativeBias.of_buckets(rel_embedding_HxN, bucket_of_offset, query_length,
                                       key_length)


class Attention(nn.Module):
    """Multi-head dot-product attention with T5X's 2-D projection kernels.

    Queries at least `blocked_min_length` long are attended in blocks of
    `query_block` (and `key_block` keys, if set) by
    `attention.blocked_attention`; shorter ones at once by
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
    def __call__(self, inputs_q_BxQxD: Array, inputs_kv_BxKxD: Optional[Array],
                 position: Optional[RelativeBias], mask: AttentionMask,
                 deterministic: bool, dropout_rng: Optional[Array] = None) -> Array:
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
        # T5 scales the query initialisation instead of the logits.
        query_init = lambda *args: projection_init(*args) / np.sqrt(self.head_dim)  # noqa: E731
        kernel = functools.partial(Kernel, quantize=self.quantize)
        w_query_DxI = kernel((embed, inner), ("embed", "joined_kv"), query_init, name="query")()
        w_key_DxI = kernel((embed, inner), ("embed", "joined_kv"), projection_init, name="key")()
        w_value_DxI = kernel((embed, inner), ("embed", "joined_kv"), projection_init, name="value")()
        w_out_IxD = kernel((inner, embed), ("joined_kv", "embed"), projection_init, name="out")()

        batch, query_length = inputs_q_BxQxD.shape[:2]
        cross = inputs_kv_BxKxD is not None
        inputs_kv_BxKxD = inputs_kv_BxKxD if cross else inputs_q_BxQxD

        # Separate products (not one fused qkv kernel) keep each kernel's
        # 'joined_kv' sharding intact under model parallelism.
        def project(x_BxLxD: Array, w_DxI: Union[Array, QuantizedKernel]) -> Array:
            y_BxLxI = dense(x_BxLxD, w_DxI, self.dtype, self._products_dtype())
            y_BxLxHxV = y_BxLxI.reshape(y_BxLxI.shape[:2] + (self.num_heads, self.head_dim))
            return nn.with_logical_constraint(y_BxLxHxV, ("batch", "length", "heads", "kv"))

        if self.folds(cross, position, query_length, inputs_kv_BxKxD.shape[1], deterministic):
            context_BxQxHxV = folded_attention(
                project(inputs_q_BxQxD, w_query_DxI), inputs_kv_BxKxD, w_key_DxI, w_value_DxI,
                mask, self.dtype, self.dtype, self._products_dtype())
        else:
            context_BxQxHxV = self._attend(project(inputs_q_BxQxD, w_query_DxI),
                                           project(inputs_kv_BxKxD, w_key_DxI),
                                           project(inputs_kv_BxKxD, w_value_DxI),
                                           position, mask, deterministic, dropout_rng)
        context_BxQxI = context_BxQxHxV.reshape(batch, query_length, inner)
        context_BxQxI = nn.with_logical_constraint(context_BxQxI, ("batch", "length", "joined_kv"))
        return dense(context_BxQxI, w_out_IxD, self.dtype, self._products_dtype())

    def _attend(self, query_BxQxHxV: Array, key_BxKxHxV: Array, value_BxKxHxV: Array,
                position: Optional[RelativeBias], mask: AttentionMask,
                deterministic: bool, dropout_rng: Optional[Array]) -> Array:
        """softmax(q k + bias + mask) v, [B, Q, H, V] in the compute dtype."""
        if uses_cudnn(jax.default_backend(), self._products_dtype(), self.head_dim,
                      deterministic or self.dropout_rate == 0):
            return cudnn_attention(query_BxQxHxV, key_BxKxHxV, value_BxKxHxV, position, mask,
                                   self._products_dtype(), self.dtype)
        # As T5X: one dropout mask per key, shared by all queries.
        dropout = nn.Dropout(self.dropout_rate, broadcast_dims=(-2,))
        query_block = self.query_block_for(query_BxQxHxV.shape[1], deterministic)
        if query_block is None:
            weights_BxHxQxK = dense_weights(query_BxQxHxV, key_BxKxHxV, position, mask,
                                            self._products_dtype())
            weights_BxHxQxK = dropout(weights_BxHxQxK, deterministic=deterministic,
                                      rng=dropout_rng)
            return weighted_values(weights_BxHxQxK, value_BxKxHxV, self._products_dtype(),
                                   self.dtype, accumulate_float32=self.quantize is not None)
        value_scale_BxHx1xK = None
        if not deterministic and self.dropout_rate > 0:
            # The same random bits as the dense path's mask of [B, H, 1, K].
            batch, key_length = key_BxKxHxV.shape[:2]
            value_scale_BxHx1xK = dropout(jnp.ones((batch, self.num_heads, 1, key_length),
                                                   jnp.float32), deterministic=False, rng=dropout_rng)
        if position is not None and not self.bands(key_BxKxHxV.shape[1], deterministic):
            position = position.replace(constant_beyond=None)  # the bias from the strip
        return blocked_attention(query_BxQxHxV, key_BxKxHxV, value_BxKxHxV, position, mask,
                                 query_block=query_block, key_block=self.key_block,
                                 products_dtype=self._products_dtype(), output_dtype=self.dtype,
                                 value_scale_BxHx1xK=value_scale_BxHx1xK)

    def folds(self, cross: bool, position: Optional[RelativeBias], query_length: int,
              key_length: int, deterministic: bool) -> bool:
        """Whether `attention.folded_attention` runs: cross-attention without
        bias or dropout, where the queries times the heads are fewer than the
        keys (the fold's products cost Q * H where projecting costs K)."""
        return (cross and position is None and deterministic
                and query_length * self.num_heads < key_length)

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
        return query_length if deterministic and query_length <= 2 * self.query_block else (
            self.query_block)

    def bands(self, key_length: int, deterministic: bool) -> bool:
        """Whether the blocked attention may add the bias in a band (see
        `attention.blocked_attention`): always in training (a train step of 2
        x 2048 tokens took 0.90x the strip's time, the bias table's gradient
        included), from `band_min_length` keys in passes without dropout
        (on CPUs the strip's forward was 1.3-1.4x faster at 640-1024 tokens,
        the band's 1.07-1.4x from 1536)."""
        return not deterministic or (self.band_min_length is not None
                                     and key_length >= self.band_min_length)

    # Quantized, the kernels' and the two attention products take
    # `int8_products` inputs (float32 accumulation; the softmax stays
    # float32): bfloat16 was 7-15% faster on CPUs with AVX512-BF16, and the
    # int8 kernels' error dominates anyway.
    def _products_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.int8_products) if self.quantize else self.dtype


def _attention(config: T5Config, name: str) -> Attention:
    """An attention module of `config` (heads, dtype, dropout, int8, blocking)."""
    return Attention(config.num_heads, config.d_kv, jnp.dtype(config.dtype), config.dropout_rate,
                     config.quantize, int8_products=config.int8_products,
                     blocked_min_length=config.attention_blocked_min_length,
                     forward_min_length=config.attention_forward_min_length,
                     band_min_length=config.attention_band_min_length,
                     query_block=config.attention_query_block,
                     key_block=config.attention_key_block, name=name)


class FeedForward(nn.Module):
    """T5's feed-forward block: v1.1 / mT5 `wo(gelu(wi_0 x) * wi_1 x)` (gated),
    or v1.0 `wo(relu(wi x))`."""

    d_ff: int
    dtype: jnp.dtype
    dropout_rate: float
    quantize: Optional[str] = None
    int8_products: str = "bfloat16"
    gated: bool = True

    @nn.compact
    def __call__(self, x_BxLxD: Array, deterministic: bool,
                 dropout_rng: Optional[Array] = None) -> Array:
        embed = x_BxLxD.shape[-1]
        init = nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal")
        kernel = functools.partial(Kernel, quantize=self.quantize)

        def project_in(name: str) -> Array:
            w_DxF = kernel((embed, self.d_ff), ("embed", "mlp"), init, name=name)()
            return dense(x_BxLxD, w_DxF, self.dtype, jnp.dtype(self.int8_products))

        if self.gated:
            hidden_BxLxF = nn.gelu(project_in("wi_0"), approximate=True) * project_in("wi_1")
        else:
            hidden_BxLxF = nn.relu(project_in("wi"))
        w_out_FxD = kernel((self.d_ff, embed), ("mlp", "embed"), init, name="wo")()
        hidden_BxLxF = nn.with_logical_constraint(hidden_BxLxF, ("batch", "length", "mlp"))
        hidden_BxLxF = nn.Dropout(self.dropout_rate, broadcast_dims=(-2,))(
            hidden_BxLxF, deterministic=deterministic, rng=dropout_rng)
        return dense(hidden_BxLxF, w_out_FxD, self.dtype, jnp.dtype(self.int8_products))


def _feed_forward(config: T5Config) -> nn.Module:
    """The block's feed-forward module (named `mlp`) of `config.feed_forward_proj`."""
    return FeedForward(config.d_ff, jnp.dtype(config.dtype), config.dropout_rate, config.quantize,
                       config.int8_products, gated=config.feed_forward_proj != "relu", name="mlp")


def _dropout(config: T5Config, x: Array, deterministic: bool,
             rng: Optional[Array] = None) -> Array:
    # T5X drops whole features for all positions of a sequence (broadcast over length).
    return nn.Dropout(config.dropout_rate, broadcast_dims=(-2,))(x, deterministic=deterministic,
                                                                 rng=rng)


def _layers_rng(stack: nn.Module, config: T5Config, deterministic: bool) -> Optional[Array]:
    """The key a stack's layers draw their dropout from, or None without dropout."""
    if deterministic or config.dropout_rate == 0:
        return None
    return stack.make_rng("dropout")


def _constrain_embed(x_BxLxD: Array) -> Array:
    return nn.with_logical_constraint(x_BxLxD, ("batch", "length", "embed"))


def _self_attention_bias(config: T5Config, length: int, bidirectional: bool) -> RelativeBias:
    """The relative position bias of a [length, length] self-attention, from
    the table `relpos_bias` of the module calling it (a stack's, or with
    `relative_bias_per_layer` a layer's)."""
    return RelativePositionBias(
        config.num_heads, config.relative_attention_num_buckets,
        config.relative_attention_max_distance, bidirectional=bidirectional,
        name="relpos_bias")(length, length)


def _stack_bias(config: T5Config, length: int, bidirectional: bool) -> Optional[RelativeBias]:
    """The stack's shared bias, or None where each layer computes its own."""
    if config.relative_bias_per_layer:
        return None
    return _self_attention_bias(config, length, bidirectional)


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward, each pre-normed and residual.

    Dropout draws from `layer_rng` (one key per layer, see
    `stacks.run_layers`), so an unrolled and a scanned stack drop the same
    units.
    """

    config: T5Config

    @nn.compact
    def __call__(self, x_BxLxD: Array, position_bias_1xHxLxL: Optional[RelativeBias],
                 mask_bias_Bx1xLxL: AttentionMask, layer_rng: Optional[Array],
                 deterministic: bool) -> Array:
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        rng = stacks.site_keys(layer_rng, 4)
        if cfg.relative_bias_per_layer:
            position_bias_1xHxLxL = _self_attention_bias(cfg, x_BxLxD.shape[1], bidirectional=True)
        h_BxLxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_attention_layer_norm")(x_BxLxD)
        h_BxLxD = _attention(cfg, "attention")(
            h_BxLxD, None, position_bias_1xHxLxL, mask_bias_Bx1xLxL, deterministic, rng[0])
        x_BxLxD = _constrain_embed(x_BxLxD + _dropout(cfg, h_BxLxD, deterministic, rng[1]))
        h_BxLxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_mlp_layer_norm")(x_BxLxD)
        h_BxLxD = _feed_forward(cfg)(h_BxLxD, deterministic, rng[2])
        return _constrain_embed(x_BxLxD + _dropout(cfg, h_BxLxD, deterministic, rng[3]))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention and feed-forward (dropout as
    in `EncoderLayer`)."""

    config: T5Config

    @nn.compact
    def __call__(self, y_BxQxD: Array, encoded_BxKxD: Array,
                 position_bias_1xHxQxQ: Optional[RelativeBias],
                 self_mask_bias_Bx1xQxQ: AttentionMask, cross_mask_bias_Bx1xQxK: AttentionMask,
                 layer_rng: Optional[Array], deterministic: bool) -> Array:
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        rng = stacks.site_keys(layer_rng, 6)
        if cfg.relative_bias_per_layer:
            position_bias_1xHxQxQ = _self_attention_bias(cfg, y_BxQxD.shape[1], bidirectional=False)
        h_BxQxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_self_attention_layer_norm")(y_BxQxD)
        h_BxQxD = _attention(cfg, "self_attention")(
            h_BxQxD, None, position_bias_1xHxQxQ, self_mask_bias_Bx1xQxQ, deterministic, rng[0])
        y_BxQxD = _constrain_embed(y_BxQxD + _dropout(cfg, h_BxQxD, deterministic, rng[1]))
        h_BxQxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_cross_attention_layer_norm")(y_BxQxD)
        h_BxQxD = _attention(cfg, "encoder_decoder_attention")(
            h_BxQxD, encoded_BxKxD, None, cross_mask_bias_Bx1xQxK, deterministic, rng[2])
        y_BxQxD = _constrain_embed(y_BxQxD + _dropout(cfg, h_BxQxD, deterministic, rng[3]))
        h_BxQxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_mlp_layer_norm")(y_BxQxD)
        h_BxQxD = _feed_forward(cfg)(h_BxQxD, deterministic, rng[4])
        return _constrain_embed(y_BxQxD + _dropout(cfg, h_BxQxD, deterministic, rng[5]))


class Encoder(nn.Module):
    """The encoder stack over embedded inputs (its layers unrolled or scanned,
    see `seahorse_metrics.model.stacks`)."""

    config: T5Config

    @nn.compact
    def __call__(self, x_BxLxD: Array, mask_bias_Bx1xLxL: Array, deterministic: bool) -> Array:
        cfg = self.config
        length = x_BxLxD.shape[1]
        position_bias_1xHxLxL = _stack_bias(cfg, length, bidirectional=True)
        x_BxLxD = _dropout(cfg, x_BxLxD, deterministic)
        x_BxLxD = stacks.run_layers(cfg, EncoderLayer, cfg.num_encoder_layers, x_BxLxD,
                                    (position_bias_1xHxLxL, mask_bias_Bx1xLxL),
                                    _layers_rng(self, cfg, deterministic), deterministic,
                                    deterministic_argnum=5)
        x_BxLxD = RMSNorm(cfg.layer_norm_epsilon, jnp.dtype(cfg.dtype), name="encoder_norm")(x_BxLxD)
        return _dropout(cfg, x_BxLxD, deterministic)


class Decoder(nn.Module):
    """The decoder stack and the float32 output head (untied, or the input
    embedding `embedding_TxD` when `config.tie_word_embeddings`)."""

    config: T5Config

    @nn.compact
    def __call__(self, y_BxQxD: Array, encoded_BxKxD: Array, self_mask_bias_Bx1xQxQ: Array,
                 cross_mask_bias_Bx1xQxK: Array, deterministic: bool,
                 embedding_TxD: Optional[Array] = None) -> Array:
        cfg = self.config
        length = y_BxQxD.shape[1]
        position_bias_1xHxQxQ = _stack_bias(cfg, length, bidirectional=False)
        y_BxQxD = _dropout(cfg, y_BxQxD, deterministic)
        y_BxQxD = stacks.run_layers(cfg, DecoderLayer, cfg.num_decoder_layers, y_BxQxD,
                                    (encoded_BxKxD, position_bias_1xHxQxQ, self_mask_bias_Bx1xQxQ,
                                     cross_mask_bias_Bx1xQxK),
                                    _layers_rng(self, cfg, deterministic), deterministic,
                                    deterministic_argnum=7)
        y_BxQxD = RMSNorm(cfg.layer_norm_epsilon, jnp.dtype(cfg.dtype), name="decoder_norm")(y_BxQxD)
        y_BxQxD = _dropout(cfg, y_BxQxD, deterministic)
        # Logits in float32 for a stable softmax, whatever the compute dtype.
        if cfg.tie_word_embeddings:
            # T5 v1.0: the embedding is the head, after rescaling by d_model**-0.5.
            scaled_BxQxD = y_BxQxD.astype(jnp.float32) * np.float32(cfg.d_model ** -0.5)
            logits_BxQxT = jnp.einsum("bqd,td->bqt", scaled_BxQxD,
                                      embedding_TxD.astype(jnp.float32))
        else:
            w_logits_DxT = Kernel(
                (cfg.d_model, cfg.vocab_size), ("embed", "vocab"),
                nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal"),
                name="logits_dense")()
            # The operands meet in the wider of the two dtypes (float32 master
            # weights: T5X's float32 head); a bfloat16 head multiplies the
            # bfloat16 activations as they are, with float32 accumulation, which
            # is exact for the products and spares a float32 copy of the
            # [d_model, vocab] kernel.
            operand_dtype = jnp.promote_types(y_BxQxD.dtype, w_logits_DxT.dtype)
            logits_BxQxT = jnp.dot(y_BxQxD.astype(operand_dtype),
                                   w_logits_DxT.astype(operand_dtype),
                                   preferred_element_type=jnp.float32)
        return nn.with_logical_constraint(logits_BxQxT, ("batch", "length", "vocab"))


def encoder_attention_mask(config: T5Config, encoder_input_tokens_BxL: Array,
                      encoder_segment_ids_BxL: Optional[Array] = None) -> AttentionMask:
    """Encoder self-attention mask: keys must be real tokens (of the query's
    segment when packed). `.dense(L, L)` is the additive [B, 1, 1 or L, L] mask."""
    key_is_token_BxL = encoder_input_tokens_BxL != config.pad_id
    return AttentionMask(key_is_token_BxL, encoder_segment_ids_BxL, encoder_segment_ids_BxL)


def decoder_attention_masks(config: T5Config, encoder_input_tokens_BxK: Array, decoder_length: int,
                        encoder_segment_ids_BxK: Optional[Array] = None,
                        decoder_segment_ids_BxQ: Optional[Array] = None
                        ) -> tuple[AttentionMask, AttentionMask]:
    """Masks of decoder self-attention (causal, within a segment) and
    cross-attention (real encoder tokens, of the same segment when packed).

    Decoder padding needs no mask: it comes last, and causality keeps real
    positions from seeing it.
    """
    del decoder_length  # The masks take the lengths of their attention.
    key_is_token_BxK = encoder_input_tokens_BxK != config.pad_id
    if (encoder_segment_ids_BxK is None) != (decoder_segment_ids_BxQ is None):
        raise ValueError("Packed batches need both encoder_segment_ids and decoder_segment_ids.")
    return (AttentionMask(None, decoder_segment_ids_BxQ, decoder_segment_ids_BxQ, causal=True),
            AttentionMask(key_is_token_BxK, decoder_segment_ids_BxQ, encoder_segment_ids_BxK))


class Transformer(nn.Module):
    """T5 encoder-decoder, v1.1 / mT5 or v1.0 (T5X `network.Transformer` layout).

    `encode` and `decode` can be applied separately (`module.apply(...,
    method="encode")`) so scoring runs the encoder once and the decoder for a
    single position.
    """

    config: T5Config

    def setup(self):
        cfg = self.config
        self.token_embedder = Kernel(
            (cfg.vocab_size, cfg.d_model), ("vocab", "embed"), nn.initializers.normal(stddev=1.0),
            param_name="embedding")
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)

    def _embed(self, tokens_BxL: Array) -> Array:
        # A gather, not a one-hot matmul: at mT5's 250k vocabulary the one-hot
        # product would cost more than the rest of the network.
        embedding_TxD = self.token_embedder()
        embedded_BxLxD = jnp.take(embedding_TxD, tokens_BxL.astype(jnp.int32), axis=0)
        return _constrain_embed(embedded_BxLxD.astype(jnp.dtype(self.config.dtype)))

    def encode(self, encoder_input_tokens: Array, encoder_segment_ids: Optional[Array] = None,
               encoder_positions: Optional[Array] = None, deterministic: bool = True) -> Array:
        """Runs the encoder.

        Args:
          encoder_input_tokens: int [B, L], `config.pad_id` for padding.
          encoder_segment_ids: int [B, L] packed-segment ids (0 = padding), or None.
          encoder_positions: int [B, L] position within each packed segment.
            Accepted for T5X's packed features; the relative bias uses
            0..L-1, which gives the same key-query offsets inside a segment.
          deterministic: Disables dropout (needs a 'dropout' rng otherwise).

        Returns:
          Encoder outputs [B, L, d_model] in the compute dtype.
        """
        del encoder_positions  # Offsets within a segment do not depend on it.
        mask_bias = encoder_attention_mask(self.config, encoder_input_tokens, encoder_segment_ids)
        return self.encoder(self._embed(encoder_input_tokens), mask_bias, deterministic)

    def decode(self, encoded: Array, encoder_input_tokens: Array, decoder_input_tokens: Array,
               encoder_segment_ids: Optional[Array] = None,
               decoder_segment_ids: Optional[Array] = None,
               decoder_positions: Optional[Array] = None, deterministic: bool = True) -> Array:
        """Runs the decoder with teacher forcing over `decoder_input_tokens`.

        Args:
          encoded: Encoder outputs [B, K, d_model].
          encoder_input_tokens: int [B, K], for the cross-attention padding mask.
          decoder_input_tokens: int [B, Q], starting with `config.decoder_start_id`
            (each packed segment too). Q = 1 gives the first step only.
          encoder_segment_ids: int [B, K] segment ids when packed, else None.
          decoder_segment_ids: int [B, Q] segment ids when packed, else None.
          decoder_positions: int [B, Q]; accepted as in `encode` (not needed).
          deterministic: Disables dropout.

        Returns:
          float32 logits [B, Q, vocab_size].
        """
        del decoder_positions  # See `encode`.
        self_mask_bias, cross_mask_bias = decoder_attention_masks(
            self.config, encoder_input_tokens, decoder_input_tokens.shape[1],
            encoder_segment_ids, decoder_segment_ids)
        tied_head = self.token_embedder() if self.config.tie_word_embeddings else None
        return self.decoder(self._embed(decoder_input_tokens), encoded, self_mask_bias,
                            cross_mask_bias, deterministic, tied_head)

    def __call__(self, encoder_input_tokens: Array, decoder_input_tokens: Array,
                 encoder_segment_ids: Optional[Array] = None,
                 decoder_segment_ids: Optional[Array] = None,
                 encoder_positions: Optional[Array] = None,
                 decoder_positions: Optional[Array] = None,
                 deterministic: bool = True) -> Array:
        """Encodes and decodes; returns float32 logits [B, Q, vocab_size]."""
        encoded = self.encode(encoder_input_tokens, encoder_segment_ids, encoder_positions,
                              deterministic=deterministic)
        return self.decode(encoded, encoder_input_tokens, decoder_input_tokens,
                           encoder_segment_ids, decoder_segment_ids, decoder_positions,
                           deterministic=deterministic)
