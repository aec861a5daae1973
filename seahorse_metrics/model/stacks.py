"""How a stack's identical layers run: one by one or scanned, rematerialised or not.

`run_layers` applies `config.num_*_layers` copies of a layer module
(`EncoderLayer`, `DecoderLayer`) to a residual stream:

- unrolled (`scan_layers=False`): `layers_0`, `layers_1`, ... each with its
  own parameters, as Hugging Face and T5X name them;
- scanned (`scan_layers=True`, T5X's `scan_layers`): one layer under
  `nn.scan`, its parameters stacked on a leading `layers` axis
  (`layers/attention/query/kernel` of shape [num_layers, ...]; the logical
  axis rules leave that axis unsharded); the compiler sees one layer, not
  all of them.

Either way `config.remat` wraps each layer in `nn.remat` (T5X's 'minimal'
and 'full' policies), with the `deterministic` flag static, and layer i
draws its dropout from the i-th key split off the stack's key (not from its
module path, which differs between the two forms), so unrolled and scanned
stacks drop the same units.

Checkpoint files stay per layer whatever the network runs: `stack_layers`
and `unstack_layers` convert a parameter tree between the two layouts, one
parameter at a time (no second copy of the model).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from seahorse_metrics.model.config import T5Config

Array = jax.Array

SCANNED_NAME = "layers"
_LAYER_NAME = re.compile(r"^layers_(\d+)$")
_STACKS = ("encoder", "decoder")

# T5X's names for what the backward pass keeps: 'minimal' keeps the products
# without a batch dimension, 'full' only the layer's input.
_REMAT_POLICIES: dict[str, Optional[Callable[..., bool]]] = {
    "minimal": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "full": jax.checkpoint_policies.nothing_saveable,
}


def layer_class(layer: type, config: T5Config, deterministic_argnum: int) -> type:
    """`layer` as it runs under `config.remat`: itself, or `nn.remat` of it.

    Args:
      layer: The layer module class.
      config: The network config (its `remat`).
      deterministic_argnum: Position of the `deterministic` flag in
        `layer.__call__`, counting `self` as 0 (it is static under remat).
    """
    if config.remat == "none":
        return layer
    return nn.remat(
        layer,
        policy=_REMAT_POLICIES[config.remat],
        prevent_cse=not config.scan_layers,
        static_argnums=(deterministic_argnum,),
    )


def site_keys(layer_rng: Optional[Array], sites: int) -> list[Optional[Array]]:
    """One dropout key per dropout site of a layer (all None without dropout)."""
    if layer_rng is None:
        return [None] * sites
    return [jax.random.fold_in(layer_rng, site) for site in range(sites)]


def run_layers(
    config: T5Config,
    layer: type,
    num_layers: int,
    x: Array,
    broadcast: Sequence[Any],
    dropout_rng: Optional[Array],
    deterministic: bool,
    deterministic_argnum: int,
) -> Array:
    """Applies `num_layers` layers of class `layer` in sequence to `x`.

    Call from the `nn.compact` method of the stack (`Encoder`, `Decoder`):
    the layers become its submodules. Each layer is called as
    `layer(config)(x, *broadcast, layer_rng, deterministic)`.

    Args:
      config: The network config (`scan_layers`, `remat`).
      layer: The layer module class.
      num_layers: Layers in the stack.
      x: The residual stream entering the first layer.
      broadcast: Arguments every layer receives unchanged (position bias,
        masks, encoder outputs).
      dropout_rng: The stack's dropout key (None without dropout); layer i
        gets `jax.random.split(dropout_rng, num_layers)[i]`.
      deterministic: Disables dropout.
      deterministic_argnum: Position of `deterministic` in `layer.__call__`
        (`self` is 0).

    Returns:
      The residual stream after the last layer.
    """
    layer = layer_class(layer, config, deterministic_argnum)
    layer_rngs = None if dropout_rng is None else jax.random.split(dropout_rng, num_layers)
    if not config.scan_layers:
        for index in range(num_layers):
            layer_rng = None if layer_rngs is None else layer_rngs[index]
            x = layer(config, name=f"layers_{index}")(x, *broadcast, layer_rng, deterministic)
        return x
    if num_layers == 0:
        return x

    def body(
        module: nn.Module, carry: Array, layer_rng: Optional[Array], *shared: Any
    ) -> tuple[Array, None]:
        return module(carry, *shared, layer_rng, deterministic), None

    # Each layer draws its own initialisation keys, and gets its row of layer_rngs.
    scanned = nn.scan(
        body,
        variable_axes={"params": 0},
        split_rngs={"params": True},
        in_axes=(0 if layer_rngs is not None else nn.broadcast,) + (nn.broadcast,) * len(broadcast),
        length=num_layers,
        metadata_params={nn.PARTITION_NAME: SCANNED_NAME},
    )
    x, _ = scanned(layer(config, name=SCANNED_NAME), x, layer_rngs, *broadcast)
    return x


def _layer_trees(stack: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    indices = sorted(int(m.group(1)) for m in map(_LAYER_NAME.match, stack) if m)
    if indices != list(range(len(indices))):
        raise ValueError(f"layers {indices} are not numbered 0..{len(indices) - 1}")
    return [stack[f"layers_{index}"] for index in indices]


def _stack_leaves(leaves: Sequence[Any], sharding: Any, release: bool) -> Any:
    if all(isinstance(leaf, np.ndarray) for leaf in leaves):
        return np.stack(leaves)
    stacked = jax.jit(lambda *xs: jnp.stack(xs), out_shardings=sharding)(*leaves)
    if release:
        for leaf in leaves:
            if isinstance(leaf, jax.Array):
                leaf.delete()
    return stacked


def stack_layers(
    params: Mapping[str, Any], shardings: Optional[Mapping[str, Any]] = None, release: bool = False
) -> dict:
    """Per-layer parameters (`encoder/layers_0/...`) stacked for a scanned
    network (`encoder/layers/...` with a leading layers axis).

    Parameter by parameter: the per-layer arrays of one parameter are
    stacked, then (with `release`) the per-layer device arrays are deleted,
    so the model is never held twice. Numpy arrays stay on the host; device
    arrays are stacked on their devices.

    Args:
      params: A parameter tree of an unrolled network (as checkpoints hold it).
      shardings: Optional tree of the scanned network's shardings (as
        `params` after stacking) for device arrays; None lets XLA choose.
      release: Delete each per-layer device array once it is stacked
        (`params` is unusable afterwards).

    Returns:
      The scanned network's parameter tree.
    """
    result = dict(params)
    for name in _STACKS:
        if name not in params:
            continue
        stack = dict(params[name])
        layers = _layer_trees(stack)
        for key in [k for k in stack if _LAYER_NAME.match(k)]:
            del stack[key]
        if layers:
            target = None if shardings is None else shardings[name][SCANNED_NAME]
            structure = jax.tree.structure(layers[0])
            columns = zip(*(jax.tree.leaves(layer) for layer in layers))
            targets = (
                jax.tree.leaves(target) if target is not None else [None] * structure.num_leaves
            )
            stack[SCANNED_NAME] = jax.tree.unflatten(
                structure, [_stack_leaves(c, t, release) for c, t in zip(columns, targets)]
            )
        result[name] = stack
    return result


def _unstack_leaf(stacked: Any, count: int) -> list[Any]:
    if isinstance(stacked, np.ndarray):
        return list(stacked)
    return [stacked[index] for index in range(count)]


def unstack_layers(params: Mapping[str, Any]) -> dict:
    """A scanned network's parameters (`encoder/layers/...`, stacked) per
    layer (`encoder/layers_0/...`), as checkpoint files hold them.

    The inverse of `stack_layers`: each layer's arrays are exact slices.
    Device arrays are sliced on their devices (the per-layer copy is the
    caller's to release).
    """
    result = dict(params)
    for name in _STACKS:
        if name not in params or SCANNED_NAME not in params[name]:
            continue
        stack = dict(params[name])
        stacked = stack.pop(SCANNED_NAME)
        leaves, structure = jax.tree.flatten(stacked)
        count = int(np.shape(leaves[0])[0]) if leaves else 0
        per_leaf = [_unstack_leaf(leaf, count) for leaf in leaves]
        for index in range(count):
            stack[f"layers_{index}"] = jax.tree.unflatten(structure, [p[index] for p in per_leaf])
        result[name] = stack
    return result
