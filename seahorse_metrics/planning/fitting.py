"""`plan --fit`: the cheapest training setting whose step fits a device.

Searches rematerialisation (`none`, `minimal`, `full`) x microbatches (the
divisors of the rows each data-parallel device gets) x mesh shape (`data` x
`model` = the device count, `model` dividing the heads, feed-forward width
and vocabulary) for a model, input length and batch, compiling the trainer's
own step from shapes (`programs.plan_train_step`) for each combination it
tries. Cheapest means least recomputation first, then fewest microbatches,
then the smallest `model` axis (least communication). Memory falls as remat
grows and as microbatches grow from two on, so for each remat and mesh the
fewest microbatches that fit are found by bisection; one microbatch keeps
no gradient accumulator, so it can fit where two do not (small batches,
large models) and is tried on its own as well. A mesh whose float32
parameters, optimizer state and gradients alone exceed the budget is
skipped without compiling. After the cheapest fit, the more recomputing
remat settings are searched for fits with fewer microbatches (the report
lists them as alternatives: on an accelerator, few rows per microbatch can
cost more time than recomputation does).

    result = search_fit(get_config("mt5_xl", dtype="bfloat16", scan_layers=True),
                        devices=1, device_bytes=80 * 2**30, input_length=2048, batch_size=128)
    print(result.report())
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import logging
import math
import re
import sys
from typing import Any, Callable, Iterator, Optional, Sequence

from seahorse_metrics.model.config import REMAT_POLICIES
from seahorse_metrics.planning import child, compile_only, memory, programs

logger = logging.getLogger(__name__)

GiB = 2**30
# Nominal memory per device of the accelerators `--device` names.
DEVICE_MEMORY = {
    "a100-40g": 40 * GiB,
    "a100-80g": 80 * GiB,
    "h100-80g": 80 * GiB,
    "h200-141g": 141 * GiB,
    "tpu-v4": 32 * GiB,
    "tpu-v5e": 16 * GiB,
    "tpu-v5p": 95 * GiB,
}
_UNITS = {
    "": 1,
    "b": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": GiB,
    "tib": 2**40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def parse_memory(text: str) -> int:
    """Bytes of '80GiB', '16 GB', '512MiB' or a plain byte count.

    Raises:
      ValueError: naming the text, if it is no positive size.
    """
    cleaned = str(text).strip().lower().replace(" ", "")
    number = cleaned.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = cleaned[len(number) :]
    try:
        value = float(number) * _UNITS[unit]
    except (KeyError, ValueError):
        value = float("nan")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"device memory {text!r} is not a size such as 80GiB, 16GB or 512MiB")
    return int(value)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One combination compiled (or skipped) by the search."""

    remat: str
    microbatches: int
    data: int
    model: int
    per_device_bytes: int
    fits: bool
    note: str = ""

    def line(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        note = f" ({self.note})" if self.note else ""
        return (
            f"remat={self.remat:<7} microbatches={self.microbatches:<4} "
            f"data={self.data} x model={self.model}: "
            f"{memory.format_bytes(self.per_device_bytes):>10} per device, {verdict}{note}"
        )


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Every trial and the cheapest one that fits (None: nothing fits)."""

    trials: list[Trial]
    best: Optional[Trial]
    device_bytes: int
    scan_layers: bool
    dtype: str
    source: str = memory.CPU_ESTIMATE

    def bindings(self) -> list[str]:
        """The chosen setting as `train` flags."""
        if self.best is None:
            return []
        return [
            f"--gin.TrainConfig.remat='{self.best.remat}'",
            f"--gin.TrainConfig.microbatches={self.best.microbatches}",
            f"--gin.TrainConfig.model_parallel={self.best.model}",
            f"--gin.TrainConfig.scan_layers={self.scan_layers}",
            f"--gin.TrainConfig.dtype='{self.dtype}'",
        ]

    def alternatives(self) -> list[Trial]:
        """Per remat setting recomputing more than the best, its fit with the
        fewest microbatches, where that is fewer than the best's."""
        if self.best is None:
            return []
        found = []
        for remat in REMAT_POLICIES[REMAT_POLICIES.index(self.best.remat) + 1 :]:
            fewer = [
                t
                for t in self.trials
                if t.fits and t.remat == remat and t.microbatches < self.best.microbatches
            ]
            if fewer:
                found.append(cheapest(fewer))
        return found

    def report(self) -> str:
        lines = [trial.line() for trial in self.trials]
        lines.append(f"per-device figures: {self.source}")
        budget = f"{memory.format_bytes(self.device_bytes)} per device"
        if self.best is None:
            lines.append(
                f"nothing fits in {budget}: more devices, a smaller batch or shorter "
                "inputs are needed"
            )
        else:
            best = self.best
            lines.append(
                f"cheapest fit in {budget}: remat={best.remat}, microbatches="
                f"{best.microbatches}, data={best.data} x model={best.model}"
            )
            lines.append("train with: " + " ".join(self.bindings()))
            for other in self.alternatives():
                lines.append(
                    f"fewer microbatches with more recomputation: remat={other.remat}, "
                    f"microbatches={other.microbatches}, data={other.data} x "
                    f"model={other.model} ({memory.format_bytes(other.per_device_bytes)}"
                    " per device)"
                )
        return "\n".join(lines)


def mesh_shapes(config: Any, devices: int, batch_size: int) -> list[tuple[int, int]]:
    """(data, model) pairs using all `devices`: `model` divides the heads, the
    feed-forward width and the vocabulary, `data` divides the batch;
    smallest `model` first."""
    shapes = []
    for model in range(1, devices + 1):
        if devices % model:
            continue
        data = devices // model
        if batch_size % data or any(
            size % model for size in (config.num_heads, config.d_ff, config.vocab_size)
        ):
            continue
        shapes.append((data, model))
    return shapes


def _divisors(value: int) -> list[int]:
    return [k for k in range(1, value + 1) if value % k == 0]


def _fixed_bytes(config: Any, data: int, model: int) -> int:
    """Per-device float32 parameters, twice (the gradients), a lower bound of
    any train step on this mesh (the optimizer's factored state is small)."""
    import jax

    from seahorse_metrics.model.model import EncoderDecoderModel

    total = sum(
        math.prod(a.shape) for a in jax.tree.leaves(EncoderDecoderModel(config).abstract_params())
    )
    return 2 * 4 * total // model


def _first_fit(fits: Callable[[int], bool], candidates: list[int]) -> Optional[int]:
    """The smallest candidate microbatch count for which `fits` holds,
    assuming it is monotone from two microbatches on; one microbatch (no
    gradient accumulator) is tried as well where the most do not fit."""
    if not candidates:
        return None
    if not fits(candidates[-1]):
        single = len(candidates) > 1 and candidates[0] == 1 and fits(1)
        return 1 if single else None
    low, high = 0, len(candidates) - 1  # candidates[high] fits
    if high == 0 or fits(candidates[0]):
        return candidates[0]
    while high - low > 1:  # candidates[low] does not fit
        middle = (low + high) // 2
        if fits(candidates[middle]):
            high = middle
        else:
            low = middle
    return candidates[high]


def _compilation_bound(candidates: int) -> int:
    """The most compilations `_first_fit` makes over `candidates` values."""
    if candidates < 2:
        return candidates
    return 2 + math.ceil(math.log2(candidates - 1))


def max_compilations(config: Any, devices: int, batch_size: int) -> int:
    """How many train steps the search compiles at most (every remat setting
    and mesh shape bisected; a mesh left out, or a bisection cut short by an
    earlier fit, compiles fewer)."""
    return len(REMAT_POLICIES) * sum(
        _compilation_bound(len(_divisors(batch_size // data)))
        for data, _ in mesh_shapes(config, devices, batch_size)
    )


def iterate_search(
    config: Any,
    devices: int,
    device_bytes: int,
    input_length: int,
    batch_size: int,
    target_length: int = 4,
    optimizer: Any = None,
    make_mesh: Optional[Callable[[int], Any]] = None,
    alternatives: bool = True,
    correction: float = 1.0,
) -> Iterator[Trial]:
    """Yields each trial in the order tried; the caller picks the cheapest fit.

    Args:
      config: The network, with `scan_layers` and `dtype` as the run has them
        (`remat` is searched).
      devices: Devices of the run (the mesh uses all of them).
      device_bytes: Memory per device.
      input_length, batch_size, target_length: The run's shapes.
      optimizer: An `OptimizerConfig` (default Adafactor).
      make_mesh: model_parallel -> mesh over the devices (default
        `partitioning.make_mesh`); there must be `devices` devices.
      alternatives: After the remat setting of the first fit, go on to the
        more recomputing ones for fits with fewer microbatches (False stops
        there: the cheapest fit is the same, found with fewer compilations).
      correction: Multiplies each compiled figure before it is compared
        (`memory.DeviceCorrection.factor`; 1: the figure as compiled).
    """
    from seahorse_metrics.model.partitioning import make_mesh as default_make_mesh

    compile_trial = functools.partial(
        _compile_trial,
        config,
        make_mesh or default_make_mesh,
        (input_length, batch_size, target_length, optimizer),
        device_bytes,
        correction,
        itertools.count(1),
        max_compilations(config, devices, batch_size),
    )
    best_microbatches: Optional[int] = None
    for remat in REMAT_POLICIES:
        for data, model in mesh_shapes(config, devices, batch_size):
            fixed = _fixed_bytes(config, data, model)
            if fixed > device_bytes:
                yield _not_compiled(remat, data, model, fixed)
                continue
            candidates = [
                k
                for k in _divisors(batch_size // data)
                if best_microbatches is None or k < best_microbatches
            ]
            trials, found = _mesh_trials(compile_trial, remat, data, model, candidates)
            yield from trials
            if found is not None:
                best_microbatches = found
        if best_microbatches is not None and not alternatives:
            return


def _not_compiled(remat: str, data: int, model: int, fixed: int) -> Trial:
    """The trial of a mesh whose float32 parameters and gradients alone do
    not fit: nothing is compiled for it."""
    return Trial(
        remat,
        0,
        data,
        model,
        fixed,
        False,
        "float32 parameters and gradients alone; not compiled",
    )


def _mesh_trials(
    compile_trial: Callable[[str, int, int, int], Trial],
    remat: str,
    data: int,
    model: int,
    candidates: list[int],
) -> tuple[list[Trial], Optional[int]]:
    """The trials `_first_fit` compiles over `candidates` microbatches on one
    mesh, in the order compiled, and the fewest microbatches that fit (or None)."""
    trials: dict[int, Trial] = {}

    def fits(microbatches: int) -> bool:
        trials[microbatches] = compile_trial(remat, microbatches, data, model)
        return trials[microbatches].fits

    found = _first_fit(fits, candidates)
    return list(trials.values()), found


def _compile_trial(
    config: Any,
    make_mesh: Callable[[int], Any],
    shapes: tuple,
    device_bytes: int,
    correction: float,
    compiled: Iterator[int],
    bound: int,
    remat: str,
    microbatches: int,
    data: int,
    model: int,
) -> Trial:
    """Compiles one train step of the search (`shapes`: input_length,
    batch_size, target_length, optimizer) and says whether it fits, its
    figure multiplied by `correction`; logs it as the next of `bound`."""
    logger.info(
        "compiling the train step %d of at most %d: remat=%s, microbatches=%d, "
        "data=%d x model=%d, %s",
        next(compiled),
        bound,
        remat,
        microbatches,
        data,
        model,
        "scanned layers" if config.scan_layers else "unrolled layers",
    )
    try:
        step = programs.plan_train_step(
            config.replace(remat=remat), make_mesh(model), *shapes, microbatches=microbatches
        )
    except Exception as error:  # noqa: BLE001  (only the compiler's out-of-memory is a verdict)
        refusal = compiler_out_of_memory(error)
        if refusal is None:
            raise
        need, note = refusal
        return Trial(remat, microbatches, data, model, need, False, note)
    need = int(math.ceil(step.per_device_bytes * correction))
    return Trial(remat, microbatches, data, model, need, need <= device_bytes)


# XLA:TPU refuses at compile time a program whose temporaries exceed the chip's memory:
# "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm ... the total memory required
# for HLO temporaries (48.88G) exceeds available HBM (30.75G)" (libtpu 0.0.42).
_OUT_OF_MEMORY = re.compile(
    r"RESOURCE_EXHAUSTED.*?required for HLO temporaries \(([\d.]+)([KMGT]?)\).*?"
    r"available HBM \(([\d.]+)([KMGT]?)\)",
    re.S,
)


def compiler_out_of_memory(error: Exception) -> Optional[tuple[int, str]]:
    """(bytes, note) where `error` is the compiler refusing a program for want
    of device memory: its temporaries, a lower bound of what the step needs;
    None for any other error."""
    found = _OUT_OF_MEMORY.search(str(error))
    if found is None:
        return None
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    needed = float(found.group(1)) * units[found.group(2)]
    available = float(found.group(3)) * units[found.group(4)]
    note = (
        f"the compiler refused it: {memory.format_bytes(int(needed))} of temporaries alone, "
        f"{memory.format_bytes(int(available))} of device memory"
    )
    return int(needed), note


def cheapest(trials: list[Trial]) -> Optional[Trial]:
    """Least recomputation, then fewest microbatches, then the smallest model axis."""
    fitting = [t for t in trials if t.fits]
    if not fitting:
        return None
    return min(fitting, key=lambda t: (REMAT_POLICIES.index(t.remat), t.microbatches, t.model))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The search child of `search_fit`: argv[0] is its request (JSON);
    prints each trial as a `TRIAL {...}` line as it is done."""
    from seahorse_metrics.model.config import T5Config
    from seahorse_metrics.model.partitioning import make_mesh
    from seahorse_metrics.training.optimizers import OptimizerConfig

    child.forward_logs_to_stdout()
    request = json.loads((sys.argv[1:] if argv is None else argv)[0])
    config = T5Config.from_dict(request.pop("model_config"))
    optimizer = request.pop("optimizer")
    target = request.pop("compile_for", None)
    devices = target and compile_only.compile_only_devices(target, request["devices"])
    for trial in iterate_search(
        config,
        optimizer=optimizer and OptimizerConfig(**optimizer),
        make_mesh=devices and (lambda model: make_mesh(model, devices)),
        **request,
    ):
        print("TRIAL " + json.dumps(dataclasses.asdict(trial)), flush=True)
    return 0


def search_fit(
    config: Any,
    devices: int,
    device_bytes: int,
    input_length: int,
    batch_size: int,
    target_length: int = 4,
    optimizer: Any = None,
    on_trial: Optional[Callable[[Trial], None]] = None,
    alternatives: bool = True,
    correction: Optional[memory.DeviceCorrection] = None,
    compile_for: Optional[str] = None,
) -> FitResult:
    """Runs the search, in this process when it has `devices` devices (compiled
    for them: `FitResult.source` is `memory.DEVICE` on an accelerator), else
    on as many simulated CPU devices in a child process (a CPU-compiler
    estimate), or, with `compile_for`, in a child compiling with that
    accelerator's own compiler (`compile_only`).

    Args:
      on_trial: Called with each trial as it is done (e.g. to print it).
      alternatives: See `iterate_search`.
      correction: Carries CPU-compiler figures over to a device (ignored
        where the search compiles with an accelerator's own compiler).
      compile_for: A `compile_only.TARGETS` name.

    Raises:
      ValueError: with the child's last error line, if planning fails.
    """
    import jax

    shapes = dict(
        input_length=int(input_length),
        batch_size=int(batch_size),
        target_length=int(target_length),
        devices=int(devices),
        device_bytes=int(device_bytes),
        alternatives=bool(alternatives),
    )
    here = not compile_for and jax.device_count() == devices
    platform = jax.devices()[0].platform if here else "cpu"
    # A correction carries XLA:CPU's figures over; an accelerator compiler's need none.
    applied = correction if platform == "cpu" and not compile_for else None
    shapes["correction"] = applied.factor if applied else 1.0
    trials = []
    for trial in _trials(config, optimizer, shapes, here, compile_for):
        trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
    if compile_for:
        target = compile_only.TARGETS[compile_for]
        source = memory.figure_source(target.platform, target.description)
    else:
        source = applied.label() if applied else memory.figure_source(platform)
    return FitResult(
        trials, cheapest(trials), int(device_bytes), config.scan_layers, config.dtype, source
    )


def _trials(
    config: Any, optimizer: Any, shapes: dict, here: bool, compile_for: Optional[str]
) -> Iterator[Trial]:
    """The search's trials as they are done: in this process (`here`, on its
    devices), else in a child process on simulated CPU devices or compiling
    for `compile_for`'s accelerators."""
    if here:
        yield from iterate_search(config, optimizer=optimizer, **shapes)
        return
    request = dict(
        shapes,
        model_config=config.to_dict(),
        optimizer=dataclasses.asdict(optimizer) if optimizer is not None else None,
        compile_for=compile_for,
    )
    for line in child.child_output(__name__, request, 1 if compile_for else shapes["devices"]):
        if line.startswith("TRIAL "):
            yield Trial(**json.loads(line[len("TRIAL ") :]))
