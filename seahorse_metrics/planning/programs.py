"""The programs a memory plan compiles from shapes alone, and what each
needs per device.

`compile_train_step` lowers and compiles the trainer's own train step (its
optimizer state, float32 master weights, the model's compute dtype) and
`plan_scoring_step` the scorer's first-step program (weights in the compute
dtype) from `jax.ShapeDtypeStruct`s: no weight is allocated. Each gives a
`StepMemory`: how the compiled program splits every argument and XLA's
per-device figures (`memory_analysis()`). `memory.plan_memory` puts the two
in a `MemoryPlan`; `fitting` compiles many train steps to find one that fits.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Mapping, Optional

# Token ids read by the planned scorer; any two ids compile the same program.
_PLAN_TOKEN_IDS = (1, 2)
# LLVM's optimisation level changes the machine code only, not the buffers:
# mT5-XXL's (1+1 layers) temporaries are byte for byte the same, and it
# compiles a quarter faster.
FAST_COMPILE = {"xla_backend_optimization_level": 0}
_TRAIN_FEATURES = (
    "encoder_input_tokens",
    "decoder_input_tokens",
    "decoder_target_tokens",
    "decoder_loss_weights",
)


@dataclasses.dataclass(frozen=True)
class ArgumentBytes:
    """One group of a program's arguments: `total` bytes unsplit, and what
    the most loaded device holds (`per_device`)."""

    total: int
    per_device: int


@dataclasses.dataclass(frozen=True)
class StepMemory:
    """What one compiled program needs per device.

    Attributes:
      name: "train step" or "scoring step".
      arguments: Group ("parameters", "optimizer state", "batch") -> bytes.
      temp_bytes: XLA's temporaries per device (activations, gradients, workspace).
      output_bytes: Outputs per device not aliased to (donated) inputs.
      largest_whole: (name, bytes) of the biggest parameter no device splits.
      compile_seconds: Time to lower and compile.
    """

    name: str
    arguments: dict[str, ArgumentBytes]
    temp_bytes: int
    output_bytes: int
    largest_whole: tuple[str, int]
    compile_seconds: float

    @property
    def per_device_bytes(self) -> int:
        """Arguments + temporaries + fresh outputs on the most loaded device."""
        return (
            sum(a.per_device for a in self.arguments.values()) + self.temp_bytes + self.output_bytes
        )


def _leaf_bytes(abstract: Any, sharding: Any) -> tuple[int, int]:
    itemsize = abstract.dtype.itemsize
    return (
        math.prod(abstract.shape) * itemsize,
        math.prod(sharding.shard_shape(abstract.shape)) * itemsize,
    )


def _group_bytes(abstract_tree: Any, sharding_tree: Any) -> ArgumentBytes:
    import jax

    sizes = [
        _leaf_bytes(a, s)
        for a, s in zip(jax.tree.leaves(abstract_tree), jax.tree.leaves(sharding_tree))
    ]
    return ArgumentBytes(sum(t for t, _ in sizes), sum(d for _, d in sizes))


def _largest_whole(abstract_params: Any, shardings: Any) -> tuple[str, int]:
    import jax

    whole = [
        (jax.tree_util.keystr(path, simple=True, separator="/"), _leaf_bytes(a, s)[0])
        for (path, a), s in zip(
            jax.tree_util.tree_leaves_with_path(abstract_params), jax.tree.leaves(shardings)
        )
        if tuple(s.shard_shape(a.shape)) == tuple(a.shape)
    ]
    return max(whole, key=lambda item: item[1]) if whole else ("none", 0)


def _compiled_shardings(compiled_tree: Any, given_tree: Any) -> Any:
    """The compiled program's input shardings; an argument the program does
    not read (None there, e.g. Adafactor's unused factored slots) keeps the
    sharding it was placed with."""
    import jax

    return jax.tree.map(
        lambda compiled, given: given if compiled is None else compiled,
        compiled_tree,
        given_tree,
        is_leaf=lambda node: node is None,
    )


def _step_memory(
    name: str,
    compiled: Any,
    groups: Mapping[str, tuple[Any, Any]],
    abstract_params: Any,
    param_shardings: Any,
    seconds: float,
) -> StepMemory:
    stats = compiled.memory_analysis()
    return StepMemory(
        name=name,
        arguments={
            group: _group_bytes(abstract, shardings)
            for group, (abstract, shardings) in groups.items()
        },
        temp_bytes=int(stats.temp_size_in_bytes),
        output_bytes=max(0, int(stats.output_size_in_bytes) - int(stats.alias_size_in_bytes)),
        largest_whole=_largest_whole(abstract_params, param_shardings),
        compile_seconds=seconds,
    )


def compile_train_step(
    model_config: Any,
    mesh: Any,
    input_length: int,
    batch_size: int,
    target_length: int = 4,
    optimizer: Any = None,
    compiler_options: Optional[Mapping[str, Any]] = None,
    microbatches: int = 1,
) -> tuple[Any, StepMemory, Any]:
    """`plan_train_step`, also returning the compiled program and the
    trainer's `CompiledStep`: (executable `(state, batch) -> (state,
    metrics)`, its memory, the `CompiledStep` whose `init_state` makes the
    state it takes). Running the executable runs the very program the
    figures describe (bench/accelerator.py measures it so)."""
    from seahorse_metrics.model import partitioning
    from seahorse_metrics.training import optimizers
    from seahorse_metrics.training import sharding as sharding_lib
    from seahorse_metrics.training import step as step_lib

    sharding_lib.check_batch_size(batch_size, mesh)
    step_lib.check_microbatches(microbatches, batch_size, mesh)
    plan = step_lib.compiled_step(
        model_config,
        optimizer or optimizers.OptimizerConfig(),
        1000,
        1e-4,
        None,
        mesh,
        microbatches,
    )
    batch = _abstract_batch(plan.batch_sharding, batch_size, input_length, target_length)
    start = time.perf_counter()
    options = FAST_COMPILE if compiler_options is None else dict(compiler_options)
    with partitioning.sharding_context(mesh):
        compiled = plan.step_fn.lower(plan.abstract_state, batch).compile(
            compiler_options=options or None
        )
    seconds = time.perf_counter() - start
    (state_shardings, batch_shardings), _ = compiled.input_shardings
    state_shardings = _compiled_shardings(state_shardings, plan.state_shardings)
    abstract = plan.abstract_state
    groups = {
        "parameters (float32)": (abstract.params, state_shardings.params),
        "optimizer state": (abstract.opt_state, state_shardings.opt_state),
        "batch": (batch, batch_shardings),
    }
    memory = _step_memory(
        _train_step_name(model_config, batch_size, microbatches),
        compiled,
        groups,
        abstract.params,
        state_shardings.params,
        seconds,
    )
    return compiled, memory, plan


def _abstract_batch(
    batch_sharding: Any, batch_size: int, input_length: int, target_length: int
) -> dict[str, Any]:
    """The train step's batch as `jax.ShapeDtypeStruct`s: `input_length`
    encoder tokens and `target_length` of every other feature per row."""
    import jax
    import jax.numpy as jnp

    lengths = {"encoder_input_tokens": input_length}
    return {
        name: jax.ShapeDtypeStruct(
            (batch_size, lengths.get(name, target_length)), jnp.int32, sharding=batch_sharding
        )
        for name in _TRAIN_FEATURES
    }


def _train_step_name(model_config: Any, batch_size: int, microbatches: int) -> str:
    """How a plan names a train step: its batch, compute dtype and settings."""
    scanned = ", scanned layers" if model_config.scan_layers else ""
    settings = (
        f"remat {model_config.remat}, {microbatches} microbatch"
        f"{'es' if microbatches > 1 else ''}{scanned}"
    )
    return f"train step: batch {batch_size}, compute {model_config.dtype}, {settings}"


def plan_train_step(
    model_config: Any,
    mesh: Any,
    input_length: int,
    batch_size: int,
    target_length: int = 4,
    optimizer: Any = None,
    compiler_options: Optional[Mapping[str, Any]] = None,
    microbatches: int = 1,
) -> StepMemory:
    """Compiles the trainer's step from shapes (with `model_config.remat`,
    `scan_layers` and `microbatches` as the trainer would run them); returns
    its per-device memory. With the default optimizer and compiler options,
    a program planned before in this process is not compiled again (a fit
    search and its budget ask for the same ones)."""
    key = None
    if optimizer is None and compiler_options is None:
        key = (model_config, mesh, input_length, batch_size, target_length, microbatches)
        if key in _PLANNED_STEPS:
            return _PLANNED_STEPS[key]
    step = compile_train_step(
        model_config,
        mesh,
        input_length,
        batch_size,
        target_length,
        optimizer,
        compiler_options,
        microbatches,
    )[1]
    if key is not None:
        _PLANNED_STEPS[key] = step
    return step


# (config, mesh, shapes, microbatches) -> `StepMemory`, for `plan_train_step`.
_PLANNED_STEPS: dict = {}


def plan_scoring_step(
    model_config: Any,
    mesh: Any,
    input_length: int,
    batch_size: int,
    compiler_options: Optional[Mapping[str, Any]] = None,
) -> StepMemory:
    """Compiles the scorer's first-step program from shapes, weights in the
    compute dtype (as `Scorer.load(..., dtype=...)` keeps them)."""
    import jax

    from seahorse_metrics.model.first_step import compile_first_step
    from seahorse_metrics.model.model import EncoderDecoderModel

    if batch_size % mesh.shape["data"]:
        raise ValueError(
            f"scoring batch {batch_size} must be a multiple of the "
            f"{mesh.shape['data']} data-parallel devices"
        )
    model = EncoderDecoderModel(model_config)
    abstract_params = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, model_config.dtype), model.abstract_params()
    )
    start = time.perf_counter()
    compiled = compile_first_step(
        model,
        _PLAN_TOKEN_IDS,
        mesh,
        abstract_params,
        batch_size,
        input_length,
        FAST_COMPILE if compiler_options is None else compiler_options,
    )
    seconds = time.perf_counter() - start
    param_shardings, token_sharding = compiled.input_shardings[0]
    tokens = jax.ShapeDtypeStruct((batch_size, input_length), "int32")
    groups = {
        f"parameters ({model_config.dtype})": (abstract_params, param_shardings),
        "batch": (tokens, token_sharding),
    }
    return _step_memory(
        f"scoring step: batch {batch_size}, weights {model_config.dtype}",
        compiled,
        groups,
        abstract_params,
        param_shardings,
        seconds,
    )
