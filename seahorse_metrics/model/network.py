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

The attention layer is `attention_layer.Attention`; its arithmetic lives in
`attention` (dense, folded, cuDNN; bias and masks) and `blocked_attention`.

Array names carry their shape after an underscore (nanodo style):
B batch, L/Q/K length (query/key), D d_model, H heads, V d_kv, F d_ff,
T vocabulary, N buckets.
"""

from __future__ import annotations

import functools
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from seahorse_metrics.model import stacks
from seahorse_metrics.model.attention import (
    AttentionMask,
    RelativeBias,
    decoder_attention_masks,
    encoder_attention_mask,
)
from seahorse_metrics.model.attention_layer import Attention
from seahorse_metrics.model.config import T5Config
from seahorse_metrics.model.kernels import Kernel, dense

Array = jax.Array


def relative_position_bucket(
    relative_position: np.ndarray, *, bidirectional: bool, num_buckets: int, max_distance: int
) -> np.ndarray:
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
        scaled = (
            log_ratio
            / np.float32(np.log(max_distance / max_exact))
            * np.float32(num_buckets - max_exact)
        )
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
        scale_D = self.param(
            "scale",
            nn.with_logical_partitioning(nn.initializers.ones, ("embed",)),
            (x_BxLxD.shape[-1],),
            jnp.float32,
        )
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
                ("heads", "relpos_buckets"),
            ),
            (self.num_heads, self.num_buckets),
            jnp.float32,
        )
        # The bucket depends only on key - query, in [-(Q-1), K-1]: bucket those
        # Q+K-1 offsets on the host; the attention spreads them on device.
        offsets = np.arange(-(query_length - 1), key_length)
        bucket_of_offset = relative_position_bucket(
            offsets,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        return RelativeBias.of_buckets(
            rel_embedding_HxN, bucket_of_offset, query_length, key_length
        )


def _attention(config: T5Config, name: str) -> Attention:
    """An attention module of `config` (heads, dtype, dropout, int8, blocking)."""
    return Attention(
        config.num_heads,
        config.d_kv,
        jnp.dtype(config.dtype),
        config.dropout_rate,
        config.quantize,
        int8_products=config.int8_products,
        blocked_min_length=config.attention_blocked_min_length,
        forward_min_length=config.attention_forward_min_length,
        band_min_length=config.attention_band_min_length,
        query_block=config.attention_query_block,
        key_block=config.attention_key_block,
        name=name,
    )


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
    def __call__(
        self, x_BxLxD: Array, deterministic: bool, dropout_rng: Optional[Array] = None
    ) -> Array:
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
            hidden_BxLxF, deterministic=deterministic, rng=dropout_rng
        )
        return dense(hidden_BxLxF, w_out_FxD, self.dtype, jnp.dtype(self.int8_products))


def _feed_forward(config: T5Config) -> nn.Module:
    """The block's feed-forward module (named `mlp`) of `config.feed_forward_proj`."""
    return FeedForward(
        config.d_ff,
        jnp.dtype(config.dtype),
        config.dropout_rate,
        config.quantize,
        config.int8_products,
        gated=config.feed_forward_proj != "relu",
        name="mlp",
    )


def _dropout(config: T5Config, x: Array, deterministic: bool, rng: Optional[Array] = None) -> Array:
    # T5X drops whole features for all positions of a sequence (broadcast over length).
    return nn.Dropout(config.dropout_rate, broadcast_dims=(-2,))(
        x, deterministic=deterministic, rng=rng
    )


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
        config.num_heads,
        config.relative_attention_num_buckets,
        config.relative_attention_max_distance,
        bidirectional=bidirectional,
        name="relpos_bias",
    )(length, length)


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
    def __call__(
        self,
        x_BxLxD: Array,
        position_bias_1xHxLxL: Optional[RelativeBias],
        mask_bias_Bx1xLxL: AttentionMask,
        layer_rng: Optional[Array],
        deterministic: bool,
    ) -> Array:
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        rng = stacks.site_keys(layer_rng, 4)
        if cfg.relative_bias_per_layer:
            position_bias_1xHxLxL = _self_attention_bias(cfg, x_BxLxD.shape[1], bidirectional=True)
        h_BxLxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_attention_layer_norm")(x_BxLxD)
        h_BxLxD = _attention(cfg, "attention")(
            h_BxLxD, None, position_bias_1xHxLxL, mask_bias_Bx1xLxL, deterministic, rng[0]
        )
        x_BxLxD = _constrain_embed(x_BxLxD + _dropout(cfg, h_BxLxD, deterministic, rng[1]))
        h_BxLxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_mlp_layer_norm")(x_BxLxD)
        h_BxLxD = _feed_forward(cfg)(h_BxLxD, deterministic, rng[2])
        return _constrain_embed(x_BxLxD + _dropout(cfg, h_BxLxD, deterministic, rng[3]))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention and feed-forward (dropout as
    in `EncoderLayer`)."""

    config: T5Config

    @nn.compact
    def __call__(
        self,
        y_BxQxD: Array,
        encoded_BxKxD: Array,
        position_bias_1xHxQxQ: Optional[RelativeBias],
        self_mask_bias_Bx1xQxQ: AttentionMask,
        cross_mask_bias_Bx1xQxK: AttentionMask,
        layer_rng: Optional[Array],
        deterministic: bool,
    ) -> Array:
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        rng = stacks.site_keys(layer_rng, 6)
        if cfg.relative_bias_per_layer:
            position_bias_1xHxQxQ = _self_attention_bias(cfg, y_BxQxD.shape[1], bidirectional=False)
        h_BxQxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_self_attention_layer_norm")(
            y_BxQxD
        )
        h_BxQxD = _attention(cfg, "self_attention")(
            h_BxQxD, None, position_bias_1xHxQxQ, self_mask_bias_Bx1xQxQ, deterministic, rng[0]
        )
        y_BxQxD = _constrain_embed(y_BxQxD + _dropout(cfg, h_BxQxD, deterministic, rng[1]))
        h_BxQxD = RMSNorm(cfg.layer_norm_epsilon, dtype, name="pre_cross_attention_layer_norm")(
            y_BxQxD
        )
        h_BxQxD = _attention(cfg, "encoder_decoder_attention")(
            h_BxQxD, encoded_BxKxD, None, cross_mask_bias_Bx1xQxK, deterministic, rng[2]
        )
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
        x_BxLxD = stacks.run_layers(
            cfg,
            EncoderLayer,
            cfg.num_encoder_layers,
            x_BxLxD,
            (position_bias_1xHxLxL, mask_bias_Bx1xLxL),
            _layers_rng(self, cfg, deterministic),
            deterministic,
            deterministic_argnum=5,
        )
        x_BxLxD = RMSNorm(cfg.layer_norm_epsilon, jnp.dtype(cfg.dtype), name="encoder_norm")(
            x_BxLxD
        )
        return _dropout(cfg, x_BxLxD, deterministic)


class Decoder(nn.Module):
    """The decoder stack and the float32 output head (untied, or the input
    embedding `embedding_TxD` when `config.tie_word_embeddings`)."""

    config: T5Config

    @nn.compact
    def __call__(
        self,
        y_BxQxD: Array,
        encoded_BxKxD: Array,
        self_mask_bias_Bx1xQxQ: Array,
        cross_mask_bias_Bx1xQxK: Array,
        deterministic: bool,
        embedding_TxD: Optional[Array] = None,
        read_positions_BxR: Optional[Array] = None,
    ) -> Array:
        cfg = self.config
        length = y_BxQxD.shape[1]
        position_bias_1xHxQxQ = _stack_bias(cfg, length, bidirectional=False)
        y_BxQxD = _dropout(cfg, y_BxQxD, deterministic)
        y_BxQxD = stacks.run_layers(
            cfg,
            DecoderLayer,
            cfg.num_decoder_layers,
            y_BxQxD,
            (encoded_BxKxD, position_bias_1xHxQxQ, self_mask_bias_Bx1xQxQ, cross_mask_bias_Bx1xQxK),
            _layers_rng(self, cfg, deterministic),
            deterministic,
            deterministic_argnum=7,
        )
        y_BxQxD = RMSNorm(cfg.layer_norm_epsilon, jnp.dtype(cfg.dtype), name="decoder_norm")(
            y_BxQxD
        )
        y_BxQxD = _dropout(cfg, y_BxQxD, deterministic)
        if read_positions_BxR is not None:
            # Only the read positions go through the [d_model, vocab] head.
            y_BxQxD = jnp.take_along_axis(y_BxQxD, read_positions_BxR[..., None], axis=1)
        # Logits in float32 for a stable softmax, whatever the compute dtype.
        if cfg.tie_word_embeddings:
            # T5 v1.0: the embedding is the head, after rescaling by d_model**-0.5.
            scaled_BxQxD = y_BxQxD.astype(jnp.float32) * np.float32(cfg.d_model**-0.5)
            logits_BxQxT = jnp.einsum(
                "bqd,td->bqt", scaled_BxQxD, embedding_TxD.astype(jnp.float32)
            )
        else:
            w_logits_DxT = Kernel(
                (cfg.d_model, cfg.vocab_size),
                ("embed", "vocab"),
                nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal"),
                name="logits_dense",
            )()
            # The operands meet in the wider of the two dtypes (float32 master
            # weights: T5X's float32 head); a bfloat16 head multiplies the
            # bfloat16 activations as they are, with float32 accumulation, which
            # is exact for the products and spares a float32 copy of the
            # [d_model, vocab] kernel.
            operand_dtype = jnp.promote_types(y_BxQxD.dtype, w_logits_DxT.dtype)
            logits_BxQxT = jnp.dot(
                y_BxQxD.astype(operand_dtype),
                w_logits_DxT.astype(operand_dtype),
                preferred_element_type=jnp.float32,
            )
        return nn.with_logical_constraint(logits_BxQxT, ("batch", "length", "vocab"))


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
            (cfg.vocab_size, cfg.d_model),
            ("vocab", "embed"),
            nn.initializers.normal(stddev=1.0),
            param_name="embedding",
        )
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)

    def _embed(self, tokens_BxL: Array) -> Array:
        # A gather, not a one-hot matmul: at mT5's 250k vocabulary the one-hot
        # product would cost more than the rest of the network.
        embedding_TxD = self.token_embedder()
        embedded_BxLxD = jnp.take(embedding_TxD, tokens_BxL.astype(jnp.int32), axis=0)
        return _constrain_embed(embedded_BxLxD.astype(jnp.dtype(self.config.dtype)))

    def encode(
        self,
        encoder_input_tokens: Array,
        encoder_segment_ids: Optional[Array] = None,
        encoder_positions: Optional[Array] = None,
        deterministic: bool = True,
    ) -> Array:
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
        mask_bias = encoder_attention_mask(
            self.config.pad_id, encoder_input_tokens, encoder_segment_ids
        )
        return self.encoder(self._embed(encoder_input_tokens), mask_bias, deterministic)

    def decode(
        self,
        encoded: Array,
        encoder_input_tokens: Array,
        decoder_input_tokens: Array,
        encoder_segment_ids: Optional[Array] = None,
        decoder_segment_ids: Optional[Array] = None,
        decoder_positions: Optional[Array] = None,
        deterministic: bool = True,
        decoder_read_positions: Optional[Array] = None,
    ) -> Array:
        """Runs the decoder with teacher forcing over `decoder_input_tokens`.

        Args:
          encoded: Encoder outputs [B, K, d_model].
          encoder_input_tokens: int [B, K], for the cross-attention padding mask.
          decoder_input_tokens: int [B, Q], starting with `config.decoder_start_id`
            (each packed segment too). Q = 1 gives the first step only.
          encoder_segment_ids: int [B, K] segment ids when packed, else None.
          decoder_segment_ids: int [B, Q] segment ids when packed, else None;
            given alone, each decoder segment reads the whole encoder input.
          decoder_positions: int [B, Q]; accepted as in `encode` (not needed).
          deterministic: Disables dropout.
          decoder_read_positions: int [B, R] positions whose logits are
            wanted, or None for all.

        Returns:
          float32 logits [B, Q, vocab_size] (with `decoder_read_positions`,
          [B, R, vocab_size]).
        """
        del decoder_positions  # See `encode`.
        self_mask_bias, cross_mask_bias = decoder_attention_masks(
            self.config.pad_id, encoder_input_tokens, encoder_segment_ids, decoder_segment_ids
        )
        tied_head = self.token_embedder() if self.config.tie_word_embeddings else None
        return self.decoder(
            self._embed(decoder_input_tokens),
            encoded,
            self_mask_bias,
            cross_mask_bias,
            deterministic,
            tied_head,
            decoder_read_positions,
        )

    def __call__(
        self,
        encoder_input_tokens: Array,
        decoder_input_tokens: Array,
        encoder_segment_ids: Optional[Array] = None,
        decoder_segment_ids: Optional[Array] = None,
        encoder_positions: Optional[Array] = None,
        decoder_positions: Optional[Array] = None,
        deterministic: bool = True,
        decoder_read_positions: Optional[Array] = None,
    ) -> Array:
        """Encodes and decodes; returns float32 logits [B, Q, vocab_size]
        (or [B, R, vocab_size] at `decoder_read_positions`, see `decode`)."""
        encoded = self.encode(
            encoder_input_tokens,
            encoder_segment_ids,
            encoder_positions,
            deterministic=deterministic,
        )
        return self.decode(
            encoded,
            encoder_input_tokens,
            decoder_input_tokens,
            encoder_segment_ids,
            decoder_segment_ids,
            decoder_positions,
            deterministic=deterministic,
            decoder_read_positions=decoder_read_positions,
        )
