"""The train state and its sharded initialisation.

The state is initialised directly into its shardings: `jax.eval_shape` gives
the shapes, the shardings follow from the logical axis names, and a jitted
init with those `out_shardings` materialises each shard only on the devices
that own it (no full copy on one device).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from seahorse_metrics.training import sharding as sharding_lib


@flax.struct.dataclass
class TrainState:
    """Everything a train step reads and writes.

    Attributes:
      step: Number of optimizer updates applied (int32 scalar).
      params: Model parameters, float32.
      opt_state: Optimizer state (optax).
      rng: Base PRNG key (uint32[2]); step `s` draws dropout from
        `fold_in(rng, s)`, so a resumed run draws the same masks.
    """

    step: jax.Array
    params: Any
    opt_state: Any
    rng: jax.Array


def _new_state(params, optimizer: optax.GradientTransformation, rng) -> TrainState:
    params = jax.tree.map(lambda p: p.astype(jnp.float32), params)
    return TrainState(
        step=jnp.zeros((), jnp.int32), params=params, opt_state=optimizer.init(params), rng=rng
    )


def state_shardings(abstract_state: TrainState, param_shardings, mesh: Mesh) -> TrainState:
    """A TrainState-shaped tree of NamedShardings for `abstract_state`."""
    replicated = NamedSharding(mesh, PartitionSpec())
    return TrainState(
        step=replicated,
        params=param_shardings,
        opt_state=sharding_lib.optimizer_state_shardings(
            abstract_state.opt_state, abstract_state.params, param_shardings, mesh
        ),
        rng=replicated,
    )


def place_params(host_params, shardings):
    """Puts float32 parameters, identical on every process, onto the mesh:
    host (numpy) arrays are cut into their shards; arrays the loader already
    placed in those shardings are kept as they are."""

    def put(array, sharding):
        if (
            isinstance(array, jax.Array)
            and array.dtype == jnp.float32
            and array.sharding == sharding
        ):
            return array
        array = np.asarray(array, dtype=np.float32)
        return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])

    return jax.tree.map(put, host_params, shardings)


def _scratch_init(model, optimizer):
    def init(init_key, dropout_key):
        # Parameter shapes do not depend on the lengths of the dummy batch.
        params = model.init_params(init_key, 1, 1)
        return _new_state(params, optimizer, dropout_key)

    return init


def seed_keys(seed: int) -> tuple[jax.Array, jax.Array]:
    """(parameter-init key, dropout key) of a seed."""
    init_key, dropout_key = jax.random.split(jax.random.PRNGKey(seed))
    return init_key, dropout_key


def plan_state(
    model, optimizer: optax.GradientTransformation, mesh: Mesh
) -> tuple[TrainState, TrainState]:
    """Shapes and shardings of the train state, without allocating it.

    Args:
      model: An `EncoderDecoderModel`.
      optimizer: The optax transformation.
      mesh: The device mesh.

    Returns:
      (abstract, shardings): a TrainState of `jax.ShapeDtypeStruct`s carrying
      their shardings (the restore target of a checkpoint) and a TrainState
      of the NamedShardings alone.
    """
    shapes = jax.eval_shape(_scratch_init(model, optimizer), *seed_keys(0))
    shardings = state_shardings(shapes, sharding_lib.param_shardings(model, mesh), mesh)
    abstract = jax.tree.map(
        lambda shape, sharding: jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=sharding),
        shapes,
        shardings,
    )
    return abstract, shardings


def initializers(model, optimizer: optax.GradientTransformation, shardings: TrainState):
    """Jitted state constructors that write straight into `shardings`.

    Returns:
      (from_scratch, from_params): `from_scratch(init_key, dropout_key)`
      initialises the parameters; `from_params(params, dropout_key)` starts
      from given (placed) parameters, whose buffers it donates.
    """
    from_scratch = jax.jit(_scratch_init(model, optimizer), out_shardings=shardings)
    from_params = jax.jit(
        lambda params, key: _new_state(params, optimizer, key),
        out_shardings=shardings,
        donate_argnums=0,
    )
    return from_scratch, from_params


def check_param_shapes(host_params, abstract_params) -> None:
    """Raises ValueError naming the parameters that do not match the model."""
    expected = {
        jax.tree_util.keystr(k): v.shape
        for k, v in jax.tree_util.tree_leaves_with_path(abstract_params)
    }
    found = {
        jax.tree_util.keystr(k): np.shape(v)
        for k, v in jax.tree_util.tree_leaves_with_path(host_params)
    }
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    wrong = sorted(k for k in set(expected) & set(found) if tuple(expected[k]) != tuple(found[k]))
    if missing or extra or wrong:
        raise ValueError(
            "The initial checkpoint does not match the model: "
            f"missing {missing[:5]}, unexpected {extra[:5]}, "
            f"wrong shapes {[(k, found[k], expected[k]) for k in wrong[:5]]}. "
            "Train with the architecture stored in the checkpoint."
        )
