"""The train step: a pure function, jitted once per (model, optimizer, mesh).

`train_step` is bound to the model and optimizer with `functools.partial`
and jitted with the state's shardings in and out, the batch split over
`data`, and the incoming state donated (its buffers are reused for the new
state). `compile_plan` caches the result per hashable configuration, so
several runs in one process (the demo trains six metrics) share compiled
steps whose shapes match.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Iterator, Optional

import flax.linen as nn
import jax
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from seahorse_metrics.model import EncoderDecoderModel, T5Config
from seahorse_metrics.model import partitioning
from seahorse_metrics.training import optimizers
from seahorse_metrics.training import soft_targets
from seahorse_metrics.training import state as state_lib
from seahorse_metrics.training.state import TrainState


def train_step(
    state: TrainState,
    batch: dict[str, jax.Array],
    *,
    model: EncoderDecoderModel,
    optimizer: optax.GradientTransformation,
    z_loss: float,
    loss_normalizing_factor: Optional[float],
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One optimizer update on `batch`.

    Dropout at step s uses `fold_in(state.rng, s)`, so the update depends
    only on (state, batch) and a resumed run repeats it exactly.

    Returns:
      (new state, metrics): loss, cross_entropy, z_loss, accuracy,
      num_tokens, grad_norm; scalars.
    """
    dropout_rng = jax.random.fold_in(state.rng, state.step) if model.config.dropout_rate > 0 else None

    def loss_fn(params):
        if soft_targets.SOFT_TARGETS in batch:  # Distillation: the teacher's distribution.
            return soft_targets.distillation_loss(model, params, batch, dropout_rng)
        return model.loss(params, batch, dropout_rng, z_loss, loss_normalizing_factor)

    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
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


@dataclasses.dataclass(frozen=True)
class StepPlan:
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
def compile_plan(
    model_config: T5Config,
    optimizer_config: optimizers.OptimizerConfig,
    train_steps: int,
    z_loss: float,
    loss_normalizing_factor: Optional[float],
    mesh: Mesh,
) -> StepPlan:
    """Builds (and caches) the model, optimizer, shardings and jitted step."""
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
    )
    step_fn = jax.jit(
        step,
        in_shardings=(shardings, batch_sharding),
        out_shardings=(shardings, replicated),
        donate_argnums=0,
    )
    return StepPlan(
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


@contextlib.contextmanager
def sharding_context(mesh: Mesh) -> Iterator[None]:
    """Context under which the network's activation sharding constraints apply."""
    with jax.set_mesh(mesh), nn.logical_axis_rules(list(partitioning.LOGICAL_AXIS_RULES)):
        yield
