"""The train step: a pure function, jitted once per (model, optimizer, mesh).

`train_step` is bound to the model and optimizer with `functools.partial`
and jitted with the state's shardings in and out, the batch split over
`data`, and the incoming state donated (its buffers are reused for the new
state). `compiled_step` caches the result per hashable configuration, so
several runs in one process (the demo trains six metrics) share compiled
steps whose shapes match.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from seahorse_metrics.model import EncoderDecoderModel, T5Config, partitioning
from seahorse_metrics.training import optimizers, soft_targets
from seahorse_metrics.training import state as state_lib
from seahorse_metrics.training.state import TrainState


def _loss_and_grads(
    model: EncoderDecoderModel,
    params,
    batch,
    dropout_rng,
    z_loss: float,
    loss_normalizing_factor: Optional[float],
):
    """((loss, aux), grads) of the whole batch in one pass."""

    def loss_fn(p):
        if soft_targets.SOFT_TARGETS in batch:  # Distillation: the teacher's distribution.
            return soft_targets.distillation_loss(model, p, batch, dropout_rng)
        return model.loss(p, batch, dropout_rng, z_loss, loss_normalizing_factor)

    return jax.value_and_grad(loss_fn, has_aux=True)(params)


def split_microbatches(batch: dict[str, jax.Array], microbatches: int) -> dict[str, jax.Array]:
    """[B, ...] -> [k, B/k, ...] with microbatch i holding rows i, i+k, i+2k, ...

    Strided rather than contiguous, so each microbatch takes rows from every
    data-parallel device (each device's block of B/data rows holds B/data/k
    rows of every microbatch) and no batch row moves between devices.
    """

    def split(x):
        rows = x.shape[0] // microbatches
        return jnp.swapaxes(x.reshape((rows, microbatches) + x.shape[1:]), 0, 1)

    return {name: split(value) for name, value in batch.items()}


def _accumulated_loss_and_grads(
    model: EncoderDecoderModel,
    params,
    batch,
    dropout_rng,
    z_loss: float,
    loss_normalizing_factor: Optional[float],
    microbatches: int,
):
    """`_loss_and_grads` of the whole batch, from `microbatches` passes.

    A `lax.scan` over the microbatches sums the unnormalised token loss,
    z-loss, token counts, hits and gradients (a normaliser of 1 gives sums);
    dividing by the whole batch's normaliser afterwards gives the
    whole-batch loss and gradient. Microbatch i draws dropout from
    `fold_in(dropout_rng, i)`.
    """
    if soft_targets.SOFT_TARGETS in batch:
        raise ValueError(
            "distillation batches (soft targets) are not split into microbatches; "
            "train the student with microbatches=1"
        )
    split = split_microbatches(batch, microbatches)

    def body(carry, inputs):
        index, micro = inputs
        key = None if dropout_rng is None else jax.random.fold_in(dropout_rng, index)
        (_, aux), grads = _loss_and_grads(model, params, micro, key, z_loss, 1.0)
        hits = aux["accuracy"] * jnp.maximum(aux["num_tokens"], 1.0)
        sums = (aux["cross_entropy"], aux["z_loss"], aux["num_tokens"], hits)
        carry_grads, carry_sums = carry
        return (
            jax.tree.map(jnp.add, carry_grads, grads),
            tuple(a + b for a, b in zip(carry_sums, sums)),
        ), None

    zeros = (
        jax.tree.map(jnp.zeros_like, params),
        tuple(jnp.zeros((), jnp.float32) for _ in range(4)),
    )
    (grads, (cross_entropy, z_sum, num_tokens, hits)), _ = jax.lax.scan(
        body, zeros, (jnp.arange(microbatches), split)
    )
    normalizer = (
        jnp.maximum(num_tokens, 1.0)
        if loss_normalizing_factor is None
        else jnp.asarray(loss_normalizing_factor, jnp.float32)
    )
    aux = {
        "cross_entropy": cross_entropy / normalizer,
        "z_loss": z_sum / normalizer,
        "num_tokens": num_tokens,
        "accuracy": hits / jnp.maximum(num_tokens, 1.0),
    }
    grads = jax.tree.map(lambda g: g / normalizer, grads)
    return (aux["cross_entropy"] + aux["z_loss"], aux), grads


def train_step(
    state: TrainState,
    batch: dict[str, jax.Array],
    *,
    model: EncoderDecoderModel,
    optimizer: optax.GradientTransformation,
    z_loss: float,
    loss_normalizing_factor: Optional[float],
    microbatches: int = 1,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One optimizer update on `batch`.

    Dropout at step s uses `fold_in(state.rng, s)` (microbatch i of k > 1:
    `fold_in(fold_in(state.rng, s), i)`), so the update depends only on
    (state, batch) and a resumed run repeats it exactly. With
    `microbatches` = k > 1 the batch is split into k microbatches whose
    gradients are summed inside the step (T5X's `num_microbatches`): the
    loss and the update are those of the whole batch, with activations for
    B/k rows at a time.

    Returns:
      (new state, metrics): loss, cross_entropy, z_loss, accuracy,
      num_tokens, grad_norm; scalars.
    """
    dropout_rng = (
        jax.random.fold_in(state.rng, state.step) if model.config.dropout_rate > 0 else None
    )
    if microbatches == 1:
        (loss, aux), grads = _loss_and_grads(
            model, state.params, batch, dropout_rng, z_loss, loss_normalizing_factor
        )
    else:
        (loss, aux), grads = _accumulated_loss_and_grads(
            model, state.params, batch, dropout_rng, z_loss, loss_normalizing_factor, microbatches
        )
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {
        "loss": loss,
        "cross_entropy": aux["cross_entropy"],
        "z_loss": aux["z_loss"],
        "accuracy": aux["accuracy"],
        "num_tokens": aux["num_tokens"],
        "grad_norm": optax.global_norm(grads),
    }
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics


def check_microbatches(microbatches: int, batch_size: int, mesh: Mesh) -> None:
    """Raises ValueError unless `microbatches` splits every device's rows evenly."""
    rows_per_device = batch_size // mesh.shape["data"]
    if microbatches < 1 or rows_per_device % microbatches:
        raise ValueError(
            f"microbatches={microbatches} must be >= 1 and divide the {rows_per_device} rows "
            f"each of the {mesh.shape['data']} data-parallel devices gets of batch_size="
            f"{batch_size}"
        )


@dataclasses.dataclass(frozen=True)
class CompiledStep:
    """Everything compiled for one (model, optimizer, mesh).

    Attributes:
      model: The model object.
      optimizer: The optax transformation.
      abstract_state: Shapes and shardings of the state (restore target).
      state_shardings: NamedShardings of the state.
      batch_sharding: Sharding of batch arrays.
      step_fn: The jitted train step `(state, batch) -> (state, metrics)`.
      schedule: Learning rate by step, for logging.
      init_from_scratch: Jitted `(init_key, dropout_key) -> state`.
      init_from_params: Jitted `(params, dropout_key) -> state`.
      mesh: The device mesh.
    """

    model: EncoderDecoderModel
    optimizer: optax.GradientTransformation
    abstract_state: TrainState
    state_shardings: TrainState
    batch_sharding: NamedSharding
    step_fn: Any
    schedule: Any
    init_from_scratch: Any
    init_from_params: Any
    mesh: Mesh

    def init_state(self, seed: int, host_params: Optional[Any] = None) -> TrainState:
        """A fresh state in its shardings: new parameters, or `host_params`.

        Args:
          seed: Seeds the parameter init and the dropout key.
          host_params: Pretrained parameters (as `load_checkpoint` returns
            them: numpy arrays, or arrays already placed in these shardings,
            which are used without a copy), or None.

        Raises:
          ValueError: If `host_params` does not fit the model.
        """
        init_key, dropout_key = state_lib.seed_keys(seed)
        if host_params is None:
            return self.init_from_scratch(init_key, dropout_key)
        state_lib.check_param_shapes(host_params, self.abstract_state.params)
        params = state_lib.place_params(host_params, self.state_shardings.params)
        return self.init_from_params(params, dropout_key)


@functools.lru_cache(maxsize=8)
def compiled_step(
    model_config: T5Config,
    optimizer_config: optimizers.OptimizerConfig,
    train_steps: int,
    z_loss: float,
    loss_normalizing_factor: Optional[float],
    mesh: Mesh,
    microbatches: int = 1,
) -> CompiledStep:
    """Builds (and caches) the model, optimizer, shardings and jitted step
    (the step sums `microbatches` microbatches' gradients per update)."""
    model = EncoderDecoderModel(model_config)
    optimizer = optimizers.make_optimizer(optimizer_config, train_steps)
    abstract, shardings = state_lib.plan_state(model, optimizer, mesh)
    from_scratch, from_params = state_lib.initializers(model, optimizer, shardings)
    batch_sharding = partitioning.data_sharding(mesh)
    replicated = NamedSharding(mesh, PartitionSpec())
    step = functools.partial(
        train_step,
        model=model,
        optimizer=optimizer,
        z_loss=z_loss,
        loss_normalizing_factor=loss_normalizing_factor,
        microbatches=microbatches,
    )
    step_fn = jax.jit(
        step,
        in_shardings=(shardings, batch_sharding),
        out_shardings=(shardings, replicated),
        donate_argnums=0,
    )
    return CompiledStep(
        model=model,
        optimizer=optimizer,
        abstract_state=abstract,
        state_shardings=shardings,
        batch_sharding=batch_sharding,
        step_fn=step_fn,
        schedule=optimizers.make_schedule(optimizer_config, train_steps),
        init_from_scratch=from_scratch,
        init_from_params=from_params,
        mesh=mesh,
    )
