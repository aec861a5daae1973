"""Optimizers and learning-rate schedules for fine-tuning.

The default reproduces T5X's fine-tuning recipe (t5x/configs/runs/finetune.gin
with the T5.1.1/mT5 model gins): Adafactor with decay rate 0.8, factored
second moments, no momentum, update clipping at 1.0 and updates scaled by the
parameter's RMS, at a constant learning rate of 1e-3. AdamW and warmup plus
cosine/linear decay are options for users who prefer them.

Adafactor's per-tensor quantities (update clipping, parameter scale) are
taken per layer for the stacked parameters of scanned layers
(`encoder/layers/...`, leading layers axis), so a scanned run updates each
layer exactly as an unrolled run updates `layers_i`. Its factored moments
are per layer already: they reduce the two largest axes, never the layers
axis (fewer than 128 layers).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import optax

from seahorse_metrics.model.stacks import SCANNED_NAME

OPTIMIZERS = ("adafactor", "adamw")
SCHEDULES = ("constant", "cosine", "linear", "rsqrt")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """How parameters are updated.

    Attributes:
      name: "adafactor" (T5X default) or "adamw".
      learning_rate: Peak learning rate (the constant rate for "constant").
      schedule: "constant", "cosine" (decay to `end_learning_rate` at
        `decay_steps`), "linear" (idem, linearly) or "rsqrt" (T5 pre-training:
        lr / sqrt(max(step, warmup_steps)) scaled to reach `learning_rate`
        at the end of warmup).
      warmup_steps: Linear warmup from 0 before the schedule starts; T5X's
        constant fine-tuning schedule ignores warmup, and so do we for
        "constant" when this is 0.
      decay_steps: Length of the decay after warmup; None means the run's
        `train_steps` minus warmup.
      end_learning_rate: Learning rate reached at the end of the decay.
      decay_rate: Adafactor's second-moment decay exponent.
      clipping_threshold: Adafactor's update clipping (RMS), None disables it.
      multiply_by_parameter_scale: Adafactor's relative step size.
      momentum: Adafactor's first moment (None: no momentum, as in T5X).
      b1, b2, eps: AdamW moments and epsilon.
      weight_decay: Decoupled weight decay (AdamW; Adafactor when > 0).
      gradient_clip_norm: Clip the global gradient norm before the update
        (None: no clipping; Adafactor already clips its updates).
    """

    name: str = "adafactor"
    learning_rate: float = 1e-3
    schedule: str = "constant"
    warmup_steps: int = 0
    decay_steps: Optional[int] = None
    end_learning_rate: float = 0.0
    decay_rate: float = 0.8
    clipping_threshold: Optional[float] = 1.0
    multiply_by_parameter_scale: bool = True
    momentum: Optional[float] = None
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    gradient_clip_norm: Optional[float] = None

    def __post_init__(self):
        if self.name not in OPTIMIZERS:
            raise ValueError(f"OptimizerConfig.name={self.name!r} is not one of {OPTIMIZERS}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"OptimizerConfig.schedule={self.schedule!r} is not one of {SCHEDULES}."
            )
        if self.warmup_steps < 0:
            raise ValueError("OptimizerConfig.warmup_steps must be >= 0.")
        if self.schedule == "rsqrt" and self.warmup_steps <= 0:
            raise ValueError(
                "OptimizerConfig.schedule='rsqrt' needs warmup_steps > 0 (the "
                "step at which the rate peaks)."
            )


def make_schedule(config: OptimizerConfig, train_steps: int) -> optax.Schedule:
    """The learning rate as a function of the step.

    Args:
      config: The optimizer configuration.
      train_steps: Total steps of the run; bounds the decay when
        `config.decay_steps` is None.

    Returns:
      An optax schedule (step -> learning rate).
    """
    peak, warmup = config.learning_rate, config.warmup_steps
    if config.schedule == "rsqrt":
        # lr * sqrt(warmup / max(step, warmup)): constant `peak` until warmup.
        return lambda step: peak * jnp.sqrt(warmup / jnp.maximum(step, warmup))
    decay = config.decay_steps or max(train_steps - warmup, 1)
    if config.schedule == "constant":
        main = optax.constant_schedule(peak)
    elif config.schedule == "cosine":
        main = optax.cosine_decay_schedule(
            peak, decay, alpha=config.end_learning_rate / peak if peak else 0.0
        )
    else:
        main = optax.linear_schedule(peak, config.end_learning_rate, decay)
    if warmup == 0:
        return main
    return optax.join_schedules([optax.linear_schedule(0.0, peak, warmup), main], [warmup])


def schedule_horizon(config: OptimizerConfig, train_steps: int) -> int:
    """The `train_steps` the schedule depends on: 0 when it does not (so runs of
    different lengths share one compiled step)."""
    if config.schedule in ("cosine", "linear") and config.decay_steps is None:
        return train_steps
    return 0


def _is_stacked(path) -> bool:
    return any(getattr(entry, "key", None) == SCANNED_NAME for entry in path)


def _layer_mean_square(x: jax.Array, stacked: bool) -> jax.Array:
    """mean(x**2) of the whole tensor, or per layer ([L, 1, ...]) if stacked."""
    if not stacked:
        return jnp.mean(jnp.square(x))
    return jnp.mean(jnp.square(x), axis=tuple(range(1, x.ndim)), keepdims=True)


def clip_by_layer_rms(threshold: float) -> optax.GradientTransformation:
    """optax's `clip_by_block_rms`, with each layer of a stacked parameter a block."""

    def update(updates, state, params=None):
        del params

        def clip(path, u):
            rms = jnp.sqrt(_layer_mean_square(u, _is_stacked(path)))
            return u / jnp.maximum(1.0, rms / threshold)

        return jax.tree_util.tree_map_with_path(clip, updates), state

    return optax.GradientTransformation(optax.init_empty_state, update)


def scale_by_param_layer_rms(min_scale: float = 1e-3) -> optax.GradientTransformation:
    """optax's `scale_by_param_block_rms` (Adafactor's relative step), per
    layer of a stacked parameter."""

    def update(updates, state, params):
        def scale(path, u, p):
            rms = jnp.sqrt(_layer_mean_square(p, _is_stacked(path)))
            return u * jnp.maximum(rms, min_scale)

        return jax.tree_util.tree_map_with_path(scale, updates, params), state

    return optax.GradientTransformation(optax.init_empty_state, update)


def adafactor(config: OptimizerConfig, schedule: optax.Schedule) -> optax.GradientTransformation:
    """`optax.adafactor` with T5X's settings from `config`, per layer for
    stacked parameters (same transformations, same state)."""
    chain = [optax.scale_by_factored_rms(factored=True, decay_rate=config.decay_rate)]
    if config.clipping_threshold is not None:
        chain.append(clip_by_layer_rms(config.clipping_threshold))
    chain.append(optax.scale_by_learning_rate(schedule, flip_sign=False))
    if config.multiply_by_parameter_scale:
        chain.append(scale_by_param_layer_rms())
    if config.momentum is not None:
        chain.append(optax.ema(config.momentum, debias=False, accumulator_dtype=jnp.float32))
    if config.weight_decay:
        chain.append(optax.add_decayed_weights(config.weight_decay))
    chain.append(optax.scale(-1))
    return optax.chain(*chain)


def make_optimizer(config: OptimizerConfig, train_steps: int) -> optax.GradientTransformation:
    """Builds the optax transformation described by `config`.

    Args:
      config: The optimizer configuration.
      train_steps: Total steps of the run (for decay schedules).

    Returns:
      An optax gradient transformation whose `update` needs the params.
    """
    schedule = make_schedule(config, train_steps)
    if config.name == "adafactor":
        optimizer = adafactor(config, schedule)
    else:
        optimizer = optax.adamw(
            learning_rate=schedule,
            b1=config.b1,
            b2=config.b2,
            eps=config.eps,
            weight_decay=config.weight_decay,
        )
    if config.gradient_clip_norm is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(config.gradient_clip_norm), optimizer)
    return optimizer
