"""`seahorse-metrics plan`: per-device memory of training and scoring on a mesh,
before renting one."""

from __future__ import annotations

import argparse
import logging

from seahorse_metrics.cli.flags import mesh_spec

logger = logging.getLogger(__name__)

_EPILOG = """\
The trainer's step and the scorer's program are compiled from shapes alone (no
weights), and the per-device bytes of parameters, optimizer state, batch and
XLA's temporaries are read from the compiled programs. Without data x model
devices here, they are compiled on as many simulated CPU devices: parameters,
optimizer state and batch are exact, temporaries are the CPU compiler's.

--fit searches remat x microbatches x mesh shapes over --devices N for the
cheapest training setting that fits --device_memory (or --device), prints
every combination it compiled and the gin bindings to pass to `train`.

--compile_for DEVICE compiles with that GPU's or TPU's own compiler without
one here (JAX's CUDA plugin or libtpu, on PYTHONPATH: see the training guide),
so temporaries are that compiler's; --fit then fits that device's memory
unless told otherwise.

Every report says what its per-device figures are: "device" (compiled for the
accelerators present), "GPU compiler for ..., compiled without the device"
(or TPU) or "CPU-compiler estimate"; --device_record FILE (a JSON record of
bench/accelerator.py from the target device) corrects the CPU compiler's
figures by the ratio measured there.

examples:
  seahorse-metrics plan --model mt5_xxl --mesh data=2,model=8 --input_length 2048 \\
      --batch_size 16 --dtype bfloat16 --scan_layers --remat full
  seahorse-metrics plan --fit --device h100-80g --devices 8 --model mt5_xxl \\
      --input_length 2048 --batch_size 128 --dtype bfloat16 --scan_layers
  seahorse-metrics plan --fit --compile_for h100-80g --devices 1 --model mt5_xl \\
      --input_length 2048 --batch_size 32 --dtype bfloat16
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="Per-device memory of a training and scoring run on a device mesh, or the "
        "cheapest training setting that fits a device (--fit).",
        description="Compiles the train step and the scoring step of a model size from shapes "
        "alone and prints what each device holds.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(parser)
    _add_train_setting_options(parser)
    _add_fit_options(parser)
    parser.set_defaults(func=run)


def _add_run_options(parser) -> None:
    """The run planned: model, mesh, shapes, dtype, optimizer, compiler."""
    from seahorse_metrics.planning import compile_only

    parser.add_argument(
        "--model",
        required=True,
        help="Model preset: tiny, mt5_small, mt5_base, mt5_large, mt5_xl, mt5_xxl.",
    )
    parser.add_argument(
        "--mesh",
        type=mesh_spec,
        metavar="data=D,model=M",
        help="The mesh (a missing axis is 1). Required without --fit.",
    )
    parser.add_argument(
        "--input_length", type=int, default=2048, help="Input tokens (default 2048)."
    )
    parser.add_argument(
        "--target_length", type=int, default=4, help="Training target tokens (default 4)."
    )
    parser.add_argument(
        "--batch_size", type=int, required=True, help="Training rows per step (a multiple of data)."
    )
    parser.add_argument(
        "--score_batch_size",
        type=int,
        default=None,
        help="Scoring rows per batch (default: --batch_size).",
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="Compute dtype (training keeps float32 master weights; scoring "
        "keeps the weights in this dtype). Default float32.",
    )
    parser.add_argument(
        "--optimizer",
        choices=("adafactor", "adamw"),
        default="adafactor",
        help="The trainer's optimizer (default adafactor, as T5X).",
    )
    parser.add_argument(
        "--compile_for",
        choices=sorted(compile_only.TARGETS),
        default=None,
        metavar="DEVICE",
        help="Compile with this GPU's or TPU's own compiler, without one here (needs "
        f"JAX's CUDA plugin or libtpu): {', '.join(sorted(compile_only.TARGETS))}.",
    )


def _add_train_setting_options(parser) -> None:
    """The training settings --fit searches; without it, the run's."""
    from seahorse_metrics.model.config import REMAT_POLICIES

    parser.add_argument(
        "--remat",
        choices=REMAT_POLICIES,
        default="none",
        help="TrainConfig.remat of the run (default none; --fit searches it).",
    )
    parser.add_argument(
        "--microbatches",
        type=int,
        default=1,
        help="TrainConfig.microbatches of the run (default 1; --fit searches it).",
    )
    parser.add_argument(
        "--scan_layers",
        action="store_true",
        default=None,
        help="TrainConfig.scan_layers: compile one scanned layer per stack "
        "(seconds instead of minutes for mT5-XXL). The default of --fit.",
    )
    parser.add_argument(
        "--no_scan_layers",
        dest="scan_layers",
        action="store_false",
        help="With --fit: search unrolled layers (each setting compiles every "
        "layer; up to an hour per setting for mT5-XXL on a small host).",
    )


def _add_fit_options(parser) -> None:
    """--fit and what it fits: the device's memory, its share, the device count."""
    from seahorse_metrics.planning.fitting import DEVICE_MEMORY

    parser.add_argument(
        "--fit",
        action="store_true",
        help="Search remat x microbatches x mesh for the cheapest fit.",
    )
    parser.add_argument(
        "--device_memory",
        default=None,
        metavar="SIZE",
        help="Memory per device for --fit, e.g. 80GiB, 16GB.",
    )
    parser.add_argument(
        "--device",
        choices=sorted(DEVICE_MEMORY),
        default=None,
        help="An accelerator naming the memory per device for --fit.",
    )
    parser.add_argument(
        "--memory_fraction",
        type=float,
        default=0.9,
        help="Share of the device memory a fit may use (default 0.9: the rest "
        "is the runtime's, fragmentation's and the estimate's margin).",
    )
    parser.add_argument(
        "--device_record",
        default=None,
        metavar="FILE",
        help="A device run of bench/accelerator.py (bench/results/*.json): "
        "scale CPU-compiler figures by the measured peak / CPU-compiler "
        "ratio of its training settings (an estimate).",
    )
    parser.add_argument(
        "--devices",
        type=int,
        default=None,
        help="Devices of the run for --fit (default: the --mesh size, else 1).",
    )


def _mesh_sizes(args) -> tuple[int, int]:
    from seahorse_metrics.model.partitioning import parse_mesh_spec

    if args.mesh is None:
        if not args.fit:
            raise ValueError("plan needs --mesh data=D,model=M (or --fit --devices N)")
        return int(args.devices or 1), 1
    sizes = parse_mesh_spec(args.mesh)
    return sizes.get("data", 1), sizes.get("model", 1)


def run(args) -> int:
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.planning import compile_only, memory
    from seahorse_metrics.training.optimizers import OptimizerConfig

    data, model = _mesh_sizes(args)
    # --fit compiles many settings: scanned unless told otherwise.
    scan_layers = args.fit if args.scan_layers is None else args.scan_layers
    config = get_config(args.model, dtype=args.dtype, remat=args.remat, scan_layers=scan_layers)
    memory.check_request(
        config, data, model, args.input_length, args.batch_size, args.target_length
    )
    if args.score_batch_size is not None:
        memory.check_request(config, data, model, args.input_length, args.score_batch_size, 1)
    optimizer = OptimizerConfig(name=args.optimizer)
    correction = memory.read_device_correction(args.device_record) if args.device_record else None
    if args.compile_for:
        compile_only.check_target(args.compile_for).topology(data * model)  # a device count it has
        if correction is not None:
            raise ValueError(
                "--device_record corrects the CPU compiler's figures; --compile_for "
                "gives the device compiler's: pass one of them"
            )
    if args.fit:
        return _fit(args, config, data * model, optimizer, correction)
    if args.microbatches < 1 or (args.batch_size // data) % args.microbatches:
        raise ValueError(
            f"--microbatches {args.microbatches} must divide the "
            f"{args.batch_size // data} rows per data-parallel device"
        )
    request = dict(
        input_length=args.input_length,
        batch_size=args.batch_size,
        target_length=args.target_length,
        score_batch_size=args.score_batch_size,
        optimizer=optimizer,
        model_name=args.model,
        microbatches=args.microbatches,
    )
    import jax

    if args.compile_for:
        plan = memory.plan_in_subprocess(
            config, data, model, compile_for=args.compile_for, **request
        )
    elif jax.device_count() >= data * model:
        from seahorse_metrics.model.partitioning import mesh_from_spec

        plan = memory.plan_memory(config, mesh_from_spec(f"data={data},model={model}"), **request)
    else:
        logger.info(
            "%d devices here; compiling on %d simulated CPU devices",
            jax.device_count(),
            data * model,
        )
        plan = memory.plan_in_subprocess(config, data, model, **request)
    print(plan.report(correction))
    return 0


def _fit(args, config, devices: int, optimizer, correction) -> int:
    from seahorse_metrics.planning import fitting, memory

    if args.device_memory is not None and args.device is not None:
        raise ValueError("plan --fit takes one of --device_memory SIZE and --device NAME")
    device = args.device or (args.compile_for if args.device_memory is None else None)
    if device is None and args.device_memory is None:
        raise ValueError(
            "plan --fit needs the memory to fit: --device NAME, --device_memory SIZE "
            "or --compile_for DEVICE"
        )
    device_bytes = (
        fitting.DEVICE_MEMORY[device] if device else fitting.parse_memory(args.device_memory)
    )
    if not 0 < args.memory_fraction <= 1:
        raise ValueError(f"--memory_fraction must be in (0, 1], got {args.memory_fraction}")
    device_bytes = int(device_bytes * args.memory_fraction)
    print(
        f"{args.model}, {args.input_length} tokens, batch {args.batch_size}, {args.dtype}"
        f"{', scanned layers' if config.scan_layers else ''}, on {devices} device(s) of "
        f"{memory.format_bytes(device_bytes)} usable ({args.memory_fraction:g} of "
        f"{device or args.device_memory}; train step, per device):",
        flush=True,
    )
    _say_what_the_search_costs(config, devices, args.batch_size)
    result = fitting.search_fit(
        config,
        devices,
        device_bytes,
        args.input_length,
        args.batch_size,
        args.target_length,
        optimizer,
        on_trial=lambda trial: print(trial.line(), flush=True),
        correction=correction,
        compile_for=args.compile_for,
    )
    print("\n".join(result.report().splitlines()[len(result.trials) :]))
    return 0 if result.best is not None else 1


def _say_what_the_search_costs(config, devices: int, batch_size: int) -> None:
    from seahorse_metrics.planning.fitting import max_compilations

    bound = max_compilations(config, devices, batch_size)
    if config.scan_layers:
        logger.info(
            "searching with scanned layers (one compiled layer per stack; "
            "--no_scan_layers searches unrolled ones): up to %d compilations",
            bound,
        )
    else:
        logger.info(
            "searching unrolled layers: each of up to %d compilations compiles the train "
            "step's %d+%d layers one by one (minutes each for mT5-XXL on a small host); "
            "--scan_layers compiles one layer per stack, and the setting it finds is "
            "one for a scanned run",
            bound,
            config.num_encoder_layers,
            config.num_decoder_layers,
        )
