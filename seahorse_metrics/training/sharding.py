"""Placement of the train state and batches on a `data` x `model` device mesh.

Parameters follow the model's logical axis names through the one rules table
in `seahorse_metrics.model.partitioning`; optimizer statistics follow the
parameter they describe (Adafactor's factored row/column statistics drop the
reduced dimension's mesh axis); scalars are replicated. Batches are split on
their leading (batch) axis over `data`.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from seahorse_metrics.model import partitioning


def param_shardings(model, mesh: Mesh):
    """NamedShardings of the model parameters from their logical axis names."""
    return partitioning.logical_to_sharding(
        model.param_logical_axes(), mesh, partitioning.LOGICAL_AXIS_RULES
    )


def _spec_entries(sharding: NamedSharding, ndim: int) -> tuple:
    entries = tuple(sharding.spec)
    return entries + (None,) * (ndim - len(entries))


def _statistic_sharding(leaf, param, sharding: NamedSharding, mesh: Mesh) -> NamedSharding:
    """Sharding of one optimizer statistic kept for `param`."""
    if tuple(leaf.shape) == tuple(param.shape):
        return sharding
    entries = _spec_entries(sharding, len(param.shape))
    if len(leaf.shape) == len(param.shape) - 1:
        # A factored statistic: the parameter's shape with one dimension reduced.
        for axis in range(len(param.shape)):
            if tuple(param.shape[:axis] + param.shape[axis + 1 :]) == tuple(leaf.shape):
                return NamedSharding(mesh, PartitionSpec(*(entries[:axis] + entries[axis + 1 :])))
    return NamedSharding(mesh, PartitionSpec())


def optimizer_state_shardings(abstract_opt_state, abstract_params, shardings, mesh: Mesh):
    """Shardings for an optimizer state, derived from the parameters' shardings.

    Every subtree of the optimizer state that has the parameters' tree
    structure (Adam's moments, Adafactor's statistics) is sharded like the
    parameters; every other leaf (counters) is replicated.

    Args:
      abstract_opt_state: `jax.eval_shape` of the optimizer's `init`.
      abstract_params: Shape/dtype tree of the parameters.
      shardings: NamedSharding tree of the parameters.
      mesh: The device mesh.

    Returns:
      A NamedSharding tree with the optimizer state's structure.
    """
    params_def = jax.tree_util.tree_structure(abstract_params)
    replicated = NamedSharding(mesh, PartitionSpec())

    def like_params(node) -> bool:
        return (
            not isinstance(node, jax.ShapeDtypeStruct)
            and jax.tree_util.tree_structure(node) == params_def
        )

    def place(node):
        if like_params(node):
            return jax.tree.map(
                lambda leaf, param, sharding: _statistic_sharding(leaf, param, sharding, mesh),
                node,
                abstract_params,
                shardings,
            )
        return replicated

    return jax.tree.map(place, abstract_opt_state, is_leaf=like_params)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Sharding of batch arrays: leading axis over `data`, the rest replicated."""
    return partitioning.data_sharding(mesh)


def global_batch(batch: Mapping[str, np.ndarray], sharding: NamedSharding) -> dict[str, Any]:
    """Places a host batch (identical on every process) as global arrays.

    Every process holds the whole global batch in host memory (token ids are
    small) and hands each of its devices the slice that device owns, so the
    batch, and hence the loss, does not depend on the number of processes.

    Args:
      batch: Feature name -> numpy array with the global batch as leading axis.
      sharding: Sharding of the leading axis (see `batch_sharding`).

    Returns:
      Feature name -> jax.Array.
    """
    return {
        name: jax.make_array_from_callback(array.shape, sharding, lambda index, a=array: a[index])
        for name, array in batch.items()
    }


def check_batch_size(batch_size: int, mesh: Mesh) -> None:
    """Raises ValueError unless the global batch splits evenly over `data`."""
    data_parallel = mesh.shape["data"]
    if batch_size % data_parallel:
        raise ValueError(
            f"batch_size={batch_size} is not divisible by the {data_parallel} "
            f"data-parallel replicas of the mesh {dict(mesh.shape)}; choose a "
            "multiple of the device count divided by model_parallel."
        )
