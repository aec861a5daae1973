"""The model object around the network: loss, scoring, first-token probabilities.

As T5X's `models.EncoderDecoderModel` around `network.Transformer`: the
trainer and the scorer both go through this object, so there is one forward
path. Methods take plain (unboxed) parameter pytrees and T5X batch features:

  encoder_input_tokens, decoder_input_tokens, decoder_target_tokens,
  decoder_loss_weights (optional), and for packed batches encoder_segment_ids,
  decoder_segment_ids, encoder_positions, decoder_positions; scoring may add
  decoder_read_positions (the positions whose logits are wanted).

The array-valued methods are jit-compiled; the compiled functions are shared
by every model object with an equal config.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from seahorse_metrics.model import first_step
from seahorse_metrics.model.config import T5Config
from seahorse_metrics.model.network import Transformer

Array = jax.Array
Params = Any
Batch = Mapping[str, Array]

_PACKING_FEATURES = (
    "encoder_segment_ids",
    "decoder_segment_ids",
    "encoder_positions",
    "decoder_positions",
    "decoder_read_positions",
)


class EncoderDecoderModel:
    """A `Transformer` with its loss, scoring and first-token probabilities.

    Attributes:
      config: The network's `T5Config`.
      module: The Flax `Transformer`.
    """

    def __init__(self, config: T5Config):
        self.config = config
        self.module = Transformer(config)

    # Equal configs share jit caches: `self` is a static argument of the jitted methods.
    def __hash__(self) -> int:
        return hash((type(self), self.config))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.config == self.config

    def __repr__(self) -> str:
        return f"EncoderDecoderModel({self.config!r})"

    # ----------------------------------------------------------------- params
    def _init_boxed(self, rng: Array, input_length: int, target_length: int):
        encoder_tokens = jnp.ones((1, input_length), jnp.int32)
        decoder_tokens = jnp.ones((1, target_length), jnp.int32)
        return self.module.init(rng, encoder_tokens, decoder_tokens)["params"]

    def init_params(self, rng: Array, input_length: int = 16, target_length: int = 4) -> Params:
        """Returns freshly initialised float32 parameters (a plain nested dict).

        Parameter shapes do not depend on the lengths, which only size the
        dummy batch used for initialisation.
        """
        init = jax.jit(self._init_boxed, static_argnums=(1, 2))
        return nn.meta.unbox(init(rng, input_length, target_length))

    def abstract_params(self) -> Params:
        """Returns the parameters' `jax.ShapeDtypeStruct`s without allocating them."""
        return jax.tree.map(lambda shape: shape, self._traced_shapes()[1])

    def param_logical_axes(self) -> Params:
        """Returns a pytree of `PartitionSpec`s of logical axis names, shaped as
        the parameters (e.g. `PartitionSpec('embed', 'joined_kv')`)."""
        return nn.get_partition_spec(self._traced_shapes()[0])

    def _traced_shapes(self) -> tuple[Params, Params]:
        """(the parameters' shapes in their Flax boxes, which name their logical axes; the
        unboxed shapes), as the initialiser traces them under the current mesh and axis rules
        (unboxing applies the rules' sharding constraints)."""
        context = (jax.sharding.get_abstract_mesh(), tuple(nn.get_logical_axis_rules()))
        return _trace_shapes(self, context)

    # ---------------------------------------------------------------- forward
    def _logits(self, params: Params, batch: Batch, dropout_rng: Optional[Array]) -> Array:
        packing = {name: batch[name] for name in _PACKING_FEATURES if name in batch}
        rngs = {} if dropout_rng is None else {"dropout": dropout_rng}
        return self.module.apply(
            {"params": params},
            batch["encoder_input_tokens"],
            batch["decoder_input_tokens"],
            deterministic=dropout_rng is None,
            rngs=rngs,
            **packing,
        )

    @functools.partial(jax.jit, static_argnums=0)
    def logits(self, params: Params, batch: Batch) -> Array:
        """Returns teacher-forced float32 logits [B, T, vocab_size] (no dropout)."""
        return self._logits(params, batch, None)

    @functools.partial(jax.jit, static_argnums=0)
    def encode(self, params: Params, encoder_input_tokens: Array) -> Array:
        """Returns encoder outputs [B, L, d_model] (no dropout)."""
        return self.module.apply({"params": params}, encoder_input_tokens, method="encode")

    def _weights(self, batch: Batch) -> Array:
        if "decoder_loss_weights" in batch:
            return batch["decoder_loss_weights"].astype(jnp.float32)
        return (batch["decoder_target_tokens"] != self.config.pad_id).astype(jnp.float32)

    @functools.partial(jax.jit, static_argnums=0)
    def loss(
        self,
        params: Params,
        batch: Batch,
        dropout_rng: Optional[Array] = None,
        z_loss: float = 1e-4,
        loss_normalizing_factor: Optional[float] = None,
    ) -> tuple[Array, dict[str, Array]]:
        """Token cross-entropy plus T5's z-loss, normalised per target token.

        Args:
          params: Parameters.
          batch: T5X features (see the module docstring); packed or not.
          dropout_rng: PRNG key enabling dropout; None runs deterministically.
          z_loss: Weight of the auxiliary `log(Z)^2` loss that keeps the
            softmax normaliser near 1 (T5X's default 1e-4).
          loss_normalizing_factor: Divide the summed loss by this constant
            instead of by the number of weighted target tokens.

        Returns:
          `(loss, aux)`: the scalar loss to differentiate, and a dict with
          'cross_entropy' and 'z_loss' (the two normalised parts), 'num_tokens'
          (weighted target tokens), 'accuracy' (argmax hits per token),
          'example_loss' [B] (summed token cross-entropy per row) and
          'token_loss' [B, T] (weighted token cross-entropy, so packed rows can
          be split per segment).
        """
        logits_BxTxV = self._logits(params, batch, dropout_rng)
        targets_BxT = batch["decoder_target_tokens"]
        weights_BxT = self._weights(batch)
        log_z_BxT = jax.nn.logsumexp(logits_BxTxV, axis=-1)
        target_logit_BxT = jnp.take_along_axis(logits_BxTxV, targets_BxT[..., None], axis=-1)[
            ..., 0
        ]
        token_loss_BxT = (log_z_BxT - target_logit_BxT) * weights_BxT
        token_z_loss_BxT = z_loss * jnp.square(log_z_BxT) * weights_BxT
        num_tokens = jnp.sum(weights_BxT)
        normalizer = (
            jnp.maximum(num_tokens, 1.0)
            if loss_normalizing_factor is None
            else jnp.asarray(loss_normalizing_factor, jnp.float32)
        )
        cross_entropy = jnp.sum(token_loss_BxT) / normalizer
        total_z_loss = jnp.sum(token_z_loss_BxT) / normalizer
        hits_BxT = (jnp.argmax(logits_BxTxV, axis=-1) == targets_BxT) * weights_BxT
        aux = {
            "cross_entropy": cross_entropy,
            "z_loss": total_z_loss,
            "num_tokens": num_tokens,
            "accuracy": jnp.sum(hits_BxT) / jnp.maximum(num_tokens, 1.0),
            "example_loss": jnp.sum(token_loss_BxT, axis=-1),
            "token_loss": token_loss_BxT,
        }
        return cross_entropy + total_z_loss, aux

    @functools.partial(jax.jit, static_argnums=0)
    def score_batch(self, params: Params, batch: Batch) -> Array:
        """Returns each row's target log-likelihood [B] (T5X's score mode).

        The sum over target positions of log p(target), weighted by
        `decoder_loss_weights` (or target != pad).
        """
        logits_BxTxV = self._logits(params, batch, None)
        log_probs_BxTxV = jax.nn.log_softmax(logits_BxTxV, axis=-1)
        target_log_prob_BxT = jnp.take_along_axis(
            log_probs_BxTxV, batch["decoder_target_tokens"][..., None], axis=-1
        )[..., 0]
        return jnp.sum(target_log_prob_BxT * self._weights(batch), axis=-1)

    def first_token_probs(
        self, params: Params, encoder_input_tokens: Array, token_ids: Sequence[int]
    ) -> Array:
        """Probabilities of `token_ids` at the first decoder step.

        One encoder pass, then the decoder for the single start position
        (`config.decoder_start_id`); the softmax runs over the full vocabulary.
        The scorer's own program (`model.first_step`), run eagerly.

        Args:
          params: Parameters.
          encoder_input_tokens: int [B, L], padded with `config.pad_id`.
          token_ids: Vocabulary ids to read, e.g. those of "1" and "0".

        Returns:
          float32 [B, len(token_ids)].

        Raises:
          ValueError: for ids outside the vocabulary.
        """
        token_ids = first_step.check_token_ids(token_ids, self.config.vocab_size)
        return self._first_token_probs(params, encoder_input_tokens, token_ids)

    @functools.partial(jax.jit, static_argnums=(0, 3))
    def _first_token_probs(
        self, params: Params, encoder_input_tokens: Array, token_ids: tuple[int, ...]
    ) -> Array:
        return jnp.exp(first_step.log_probs(self, token_ids, params, encoder_input_tokens))


@functools.lru_cache(maxsize=32)
def _trace_shapes(model: EncoderDecoderModel, context: tuple) -> tuple[Params, Params]:
    """`EncoderDecoderModel._traced_shapes`, traced once per (config, mesh and axis rules):
    tracing the initialiser takes most of a second for the tiny preset and seconds for the
    large unrolled ones, and loading, planning and training ask for the shapes many times.
    Callers get new trees, never these."""
    del context  # the cache key: the trace reads it from JAX and Flax

    def boxed_and_unboxed(rng):
        boxed = model._init_boxed(rng, 1, 1)
        return boxed, nn.meta.unbox(boxed)

    return jax.eval_shape(boxed_and_unboxed, jax.random.PRNGKey(0))
