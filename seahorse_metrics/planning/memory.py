"""Per-device memory of training and scoring on a mesh, read from programs
compiled from shapes alone.

    plan = plan_memory(get_config("mt5_xxl", dtype="bfloat16"),
                       mesh_from_spec("data=2,model=8"), input_length=2048, batch_size=16)
    print(plan.report())

The trainer's own train step (its optimizer state, float32 master weights,
the model's compute dtype) and the scorer's own first-step program (weights
in the compute dtype) are lowered and compiled ahead of time (`programs`) from
`jax.ShapeDtypeStruct`s, `jax.eval_shape` of the initialiser: no weight is
allocated, so a plan for mT5-XXL runs on a laptop. From the compiled programs
come how every argument is split (`input_shardings`: a parameter the rules
leave whole shows up) and XLA's per-device figures (`memory_analysis()`:
arguments, outputs, temporaries). Parameters, optimizer state and batch are
exact; temporaries (activations, gradients, workspace) are those of the
backend that compiled, so on CPU devices standing in for accelerators they
are a guide, not a promise. `plan_in_subprocess` compiles on as many
simulated CPU devices as the mesh needs, or, given `compile_for`, for that
many accelerators of a kind that is not here, with their own compiler
(`compile_only`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
from typing import Any, Mapping, Optional, Sequence

from seahorse_metrics.planning import child, programs

logger = logging.getLogger(__name__)

# What a plan's per-device figures are: the compiled program's own memory
# analysis for the accelerator it will run on, or XLA:CPU's accounting of the
# same program standing in for an accelerator's (see `figure_source`).
DEVICE = "device"
CPU_ESTIMATE = "CPU-compiler estimate"


def figure_source(platform: str, compiled_for: Optional[str] = None) -> str:
    """`DEVICE` for a program compiled for an accelerator present (gpu, tpu,
    ...), `CPU_ESTIMATE` for one compiled by XLA:CPU (exact for parameters,
    optimizer state and batch, the CPU compiler's own for the temporaries),
    and the `platform`'s compiler's figure where `compiled_for` names an
    accelerator of it that is not here (`compile_only`)."""
    if compiled_for:
        return f"{platform.upper()} compiler for {compiled_for}, compiled without the device"
    return CPU_ESTIMATE if platform == "cpu" else DEVICE


@dataclasses.dataclass(frozen=True)
class DeviceCorrection:
    """The CPU compiler's per-device figure carried over to a device, from
    what an accelerator run measured there (`read_device_correction`).

    An estimate: one device's ratio of measured peak memory to the CPU
    compiler's figure, the median over the training settings measured;
    shapes far from those can differ.

    Attributes:
      device: The device kind the record measured ("NVIDIA H100 80GB HBM3").
      factor: Measured peak / CPU-compiler figure (median over settings).
      settings: How many settings the factor comes from.
      record: The record's path.
    """

    device: str
    factor: float
    settings: int
    record: str

    def apply(self, size: int) -> int:
        """`size` bytes of the CPU compiler as the device's estimate."""
        return int(math.ceil(size * self.factor))

    def label(self) -> str:
        """How `plan` names a corrected figure."""
        return (
            f"{CPU_ESTIMATE}, corrected by x{self.factor:.3f} for {self.device} (measured "
            f"peak / CPU-compiler figure of {self.settings} training setting"
            f"{'s' if self.settings != 1 else ''} in {self.record})"
        )


def read_device_correction(path: str) -> DeviceCorrection:
    """The correction an accelerator record gives (bench/accelerator.py's
    JSON: README, "Accelerators"): its training parts' `peak_over_cpu_plan`.

    Raises:
      FileNotFoundError: if the record is missing.
      ValueError: naming the record, if it is no device run or measured no
        training setting against the CPU compiler's figure.
    """
    import statistics

    from seahorse_metrics.io.json_files import read_json

    record = read_json(path, "accelerator record")
    mode = record.get("mode") if isinstance(record, dict) else None
    if mode != "device":
        raise ValueError(
            f"{path}: not a device run of bench/accelerator.py (mode {mode!r}); a "
            "correction needs a device's measurements"
        )
    ratios = [
        part["peak_over_cpu_plan"]
        for part in (record.get("parts") or {}).values()
        if isinstance(part, dict)
        and part.get("role") == "train"
        and part.get("status") == "ok"
        and part.get("peak_over_cpu_plan")
    ]
    if not ratios:
        raise ValueError(
            f"{path}: no training setting with a measured peak and a CPU-compiler "
            "figure (parts.*.peak_over_cpu_plan); rerun its train part"
        )
    return DeviceCorrection(
        str((record.get("device") or {}).get("kind")),
        float(statistics.median(ratios)),
        len(ratios),
        path,
    )


# Simulated devices a plan may ask for: beyond the largest pods (a TPU v5p pod
# has 8,960 chips), and far below what makes XLA refuse its own flags.
MAX_DEVICES = 65536
# A per-device lower bound above this is no plan for any device that exists.
MAX_PER_DEVICE_BYTES = 2**40


def check_request(
    model_config: Any,
    data: int,
    model: int,
    input_length: int,
    batch_size: int,
    target_length: int = 4,
) -> None:
    """Refuses, before anything is allocated or compiled, a request no device
    could hold or the compiler would choke on.

    Checks the sizes are positive, the mesh has at most `MAX_DEVICES`
    devices, the batch splits over `data`, and a lower bound of the train
    step's memory per device (one layer's float32 attention logits
    [rows, heads/model, length, length] and the rows' embedded inputs) is
    at most `MAX_PER_DEVICE_BYTES`.

    Raises:
      ValueError: naming the setting and what would be needed.
    """
    for name, value in (
        ("input_length", input_length),
        ("target_length", target_length),
        ("batch_size", batch_size),
        ("data", data),
        ("model", model),
    ):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"--{name} must be a positive integer, got {value!r}")
    if data * model > MAX_DEVICES:
        raise ValueError(
            f"the mesh data={data} x model={model} has {data * model:,} devices; plans "
            f"go up to {MAX_DEVICES:,} (a TPU v5p pod has 8,960 chips)"
        )
    if batch_size % data:
        raise ValueError(f"--batch_size {batch_size} must be a multiple of data={data}")
    rows = batch_size // data
    length = max(input_length, target_length)
    heads = max(1, model_config.num_heads // model)
    lower_bound = rows * heads * length * length * 4 + rows * length * model_config.d_model * 2
    if lower_bound > MAX_PER_DEVICE_BYTES:
        raise ValueError(
            f"--input_length {input_length} with --batch_size {batch_size} on data={data} x "
            f"model={model} needs at least {lower_bound / 2**40:,.0f} TiB per device for one "
            f"layer's attention alone; no device holds more than "
            f"{MAX_PER_DEVICE_BYTES / 2**40:.0f} TiB: shorten the inputs or the batch"
        )


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """The memory plan of a model on a mesh (see `plan_memory`).

    `compiled_for` is the accelerator (its device kind) the programs were
    compiled for without one being here; None where they were compiled for
    the mesh's own devices."""

    model: str
    parameter_count: int
    mesh: dict[str, int]
    platform: str
    input_length: int
    steps: list[programs.StepMemory]
    compiled_for: Optional[str] = None

    @property
    def source(self) -> str:
        """What the figures are (see `figure_source`)."""
        return figure_source(self.platform, self.compiled_for)

    def report(self, correction: Optional[DeviceCorrection] = None) -> str:
        """A few readable lines: per-device bytes of each program (and, for a
        CPU-compiler estimate with a `correction`, its total carried over)."""
        devices = math.prod(self.mesh.values())
        kind = self.compiled_for or self.platform
        lines = [
            f"{self.model}: {self.parameter_count / 1e9:.2f} B parameters on a "
            f"data={self.mesh['data']} x model={self.mesh['model']} mesh ({devices} x "
            f"{kind}), inputs of {self.input_length} tokens",
            f"per-device figures: {self.source}",
        ]
        for step in self.steps:
            lines.append(f"{step.name} (compiled in {step.compile_seconds:.0f} s):")
            for group, size in step.arguments.items():
                lines.append(
                    f"  {group:<26} {format_bytes(size.per_device):>10} per device "
                    f"({format_bytes(size.total)} in all)"
                )
            lines.append(
                f"  {'activations, temporaries':<26} {format_bytes(step.temp_bytes):>10} per device"
            )
            lines.append(f"  {'outputs':<26} {format_bytes(step.output_bytes):>10} per device")
            lines.append(f"  {'total':<26} {format_bytes(step.per_device_bytes):>10} per device")
            if correction is not None and self.source == CPU_ESTIMATE:
                lines.append(
                    f"  {'total, corrected':<26} "
                    f"{format_bytes(correction.apply(step.per_device_bytes)):>10} "
                    f"per device ({correction.device})"
                )
            name, size = step.largest_whole
            lines.append(f"  largest parameter left whole: {name} ({format_bytes(size)})")
        if self.platform == "cpu":
            lines.append(
                "Temporaries are the CPU compiler's; an accelerator's fusion and layouts "
                "differ. Parameters, optimizer state and batch are exact."
            )
            if correction is not None:
                lines.append(f"corrected totals: {correction.label()}")
        if self.compiled_for:
            lines.append(
                f"Compiled by XLA:{self.platform.upper()} for this device, with none here: "
                "the figures it gives on the device; the runtime's own reserve comes on top."
            )
        return "\n".join(lines)


def format_bytes(size: int) -> str:
    """Bytes as GiB (MiB below 16 MiB)."""
    return f"{size / 2**30:.2f} GiB" if size >= 2**24 else f"{size / 2**20:.2f} MiB"


def plan_memory(
    model_config: Any,
    mesh: Any,
    input_length: int,
    batch_size: int,
    target_length: int = 4,
    score_batch_size: Optional[int] = None,
    optimizer: Any = None,
    model_name: Optional[str] = None,
    compiler_options: Optional[Mapping[str, Any]] = None,
    microbatches: int = 1,
    compiled_for: Optional[str] = None,
) -> MemoryPlan:
    """Plans the train step and the scoring step of `model_config` on `mesh`.

    Args:
      model_config: The network (`get_config("mt5_xxl", dtype="bfloat16")`).
      mesh: A ('data', 'model') mesh over existing (possibly simulated) devices.
      input_length: Encoder tokens per row.
      batch_size: Training rows per step (a multiple of the `data` size).
      target_length: Decoder tokens per training row.
      score_batch_size: Scoring rows per batch (default `batch_size`).
      optimizer: An `OptimizerConfig` (default: the trainer's Adafactor).
      model_name: How the report names the model.
      compiler_options: XLA options for both compilations (default `programs.FAST_COMPILE`).
      microbatches: Microbatches per training step (`TrainConfig.microbatches`).
      compiled_for: The device kind `mesh`'s devices are compile-only devices
        of (`compile_only.compile_only_devices`), for the report.

    Raises:
      ValueError: if a batch does not split over the `data` axis.
    """
    model_name = model_name or _model_name(model_config)
    _log_train_compile(model_name, model_config, mesh, input_length, batch_size, microbatches)
    train = programs.plan_train_step(
        model_config,
        mesh,
        input_length,
        batch_size,
        target_length,
        optimizer,
        compiler_options,
        microbatches,
    )
    score_rows = score_batch_size or batch_size
    _log_scoring_compile(model_name, model_config, mesh, input_length, score_rows)
    scoring = programs.plan_scoring_step(
        model_config, mesh, input_length, score_rows, compiler_options
    )
    return MemoryPlan(
        model=model_name,
        parameter_count=_parameter_count(model_config),
        mesh={name: int(size) for name, size in mesh.shape.items()},
        platform=mesh.devices.flat[0].platform,
        input_length=input_length,
        steps=[train, scoring],
        compiled_for=compiled_for,
    )


def _model_name(model_config: Any) -> str:
    """How a plan names a model given no name: its width and depth."""
    return (
        f"d_model={model_config.d_model} x "
        f"{model_config.num_encoder_layers}+"
        f"{model_config.num_decoder_layers} layers"
    )


def _parameter_count(model_config: Any) -> int:
    import jax

    from seahorse_metrics.model.model import EncoderDecoderModel

    abstract = EncoderDecoderModel(model_config).abstract_params()
    return sum(math.prod(a.shape) for a in jax.tree.leaves(abstract))


def _where(mesh: Any, input_length: int) -> str:
    return (
        f"inputs of {input_length} tokens, on a data={mesh.shape['data']} "
        f"x model={mesh.shape['model']} mesh"
    )


# Each compilation takes from seconds to many minutes (an unrolled mT5-XXL): the
# log says which one runs.
def _log_train_compile(
    model_name: str, cfg: Any, mesh: Any, input_length: int, batch_size: int, microbatches: int
) -> None:
    logger.info(
        "compiling the train step of %s: batch %d, compute %s, remat %s, %d microbatch%s, "
        "%d+%d layers %s, %s",
        model_name,
        batch_size,
        cfg.dtype,
        cfg.remat,
        microbatches,
        "es" if microbatches > 1 else "",
        cfg.num_encoder_layers,
        cfg.num_decoder_layers,
        "scanned" if cfg.scan_layers else "unrolled",
        _where(mesh, input_length),
    )


def _log_scoring_compile(
    model_name: str, cfg: Any, mesh: Any, input_length: int, batch_size: int
) -> None:
    logger.info(
        "compiling the scoring step of %s: batch %d, weights %s, %s",
        model_name,
        batch_size,
        cfg.dtype,
        _where(mesh, input_length),
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The planning child of `plan_in_subprocess`: argv[0] is its request (JSON);
    prints the plan as one `PLAN {...}` line."""
    from seahorse_metrics.model.config import T5Config
    from seahorse_metrics.model.partitioning import make_mesh
    from seahorse_metrics.planning import compile_only
    from seahorse_metrics.training.optimizers import OptimizerConfig

    child.forward_logs_to_stdout()
    request = json.loads((sys.argv[1:] if argv is None else argv)[0])
    config = T5Config.from_dict(request.pop("model_config"))
    devices, target = request.pop("devices"), request.pop("compile_for")
    mesh = make_mesh(
        request.pop("model_parallel"),
        compile_only.compile_only_devices(target, devices) if target else None,
    )
    optimizer = request.pop("optimizer")
    plan = plan_memory(
        config,
        mesh,
        optimizer=optimizer and OptimizerConfig(**optimizer),
        compiled_for=target and compile_only.TARGETS[target].description,
        **request,
    )
    print("PLAN " + json.dumps(dataclasses.asdict(plan)))
    return 0


def plan_in_subprocess(
    model_config: Any,
    data: int,
    model: int,
    input_length: int,
    batch_size: int,
    target_length: int = 4,
    score_batch_size: Optional[int] = None,
    optimizer: Any = None,
    model_name: Optional[str] = None,
    compiler_options: Optional[Mapping[str, Any]] = None,
    timeout: Optional[float] = None,
    microbatches: int = 1,
    compile_for: Optional[str] = None,
) -> MemoryPlan:
    """`plan_memory` on `data` x `model` simulated CPU devices, in a child
    process (JAX fixes its device count when it starts); or, with
    `compile_for` (a `compile_only.TARGETS` name), compiled by that
    accelerator's own compiler for that many of them.

    Raises:
      ValueError: with the child's last error line, if planning fails.
    """
    request = {
        "model_config": model_config.to_dict(),
        "devices": int(data) * int(model),
        "compile_for": compile_for,
        "model_parallel": int(model),
        "input_length": int(input_length),
        "batch_size": int(batch_size),
        "target_length": int(target_length),
        "score_batch_size": score_batch_size,
        "optimizer": dataclasses.asdict(optimizer) if optimizer is not None else None,
        "model_name": model_name,
        "microbatches": int(microbatches),
        "compiler_options": None if compiler_options is None else dict(compiler_options),
    }
    lines = [
        line
        for line in child.child_output(
            __name__, request, 1 if compile_for else int(data) * int(model), timeout
        )
        if line.startswith("PLAN ")
    ]
    if not lines:
        raise ValueError("planning failed: the planning process printed no plan")
    values = json.loads(lines[-1][len("PLAN ") :])
    steps = [
        programs.StepMemory(
            **dict(
                step,
                arguments={k: programs.ArgumentBytes(**v) for k, v in step["arguments"].items()},
                largest_whole=tuple(step["largest_whole"]),
            )
        )
        for step in values.pop("steps")
    ]
    return MemoryPlan(steps=steps, **values)
