"""The CPU compiler's memory plan against XLA:GPU's, for the same programs.

    python bench/plan_compilers.py                       # mT5-large and XL on an H100
    python bench/plan_compilers.py --compile_for h200-141g --presets mt5_xl
    python bench/plan_compilers.py --quick               # tiny, two settings

`plan` without a GPU compiles with XLA:CPU standing in for the accelerator
(parameters, optimizer state and batch exact, temporaries the CPU
compiler's), or, with JAX's CUDA plugin, with XLA:GPU for a GPU that is not
here (`plan --compile_for`). This script compiles every training setting the
GPU compiler's `plan --fit --devices 1` search tries at the accelerator run's
shape (2048 input tokens, 4 target tokens, batch 32, bfloat16, scanned
layers), and the scoring step (8 rows), with both compilers in one process,
and prints each per-device figure side by side with their ratio: how far the
CPU compiler's accounting is from the GPU compiler's. Neither is a measured
peak; bench/accelerator.py measures those on a device.

Needs JAX's CUDA plugin (no GPU): pip install "jax[cuda12-local]==<jax's version>",
or put a folder holding it on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

# Compile-only GPU devices need JAX started without looking for a GPU.
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common  # noqa: E402  (bench/common.py)

GiB = 2**30


def parse_args(argv=None) -> argparse.Namespace:
    from seahorse_metrics.planning import compile_only

    gpus = sorted(name for name, t in compile_only.TARGETS.items() if t.platform == "gpu")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile_for", default="h100-80g", choices=gpus)
    parser.add_argument("--presets", nargs="+", default=["mt5_large", "mt5_xl"])
    parser.add_argument("--input_length", type=int, default=2048)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--score_batch", type=int, default=8)
    parser.add_argument("--memory_fraction", type=float, default=0.9)
    parser.add_argument("--quick", action="store_true", help="tiny, 128 tokens, batch 2")
    common.add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.presets, args.input_length, args.batch_size, args.score_batch = ["tiny"], 128, 2, 2
    return args


def compare_preset(args, preset: str, gpu_mesh, cpu_mesh) -> dict:
    """{variant: figures} for the GPU search's training settings and the scoring step."""
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.planning import fitting, programs

    config = get_config(preset, dtype="bfloat16", scan_layers=True)
    budget = int(fitting.DEVICE_MEMORY[args.compile_for] * args.memory_fraction)
    shapes = (args.input_length, args.batch_size, 4)
    variants = {}
    trials = fitting.iterate_search(config, 1, budget, *shapes, make_mesh=lambda model: gpu_mesh)
    for trial in trials:
        if trial.microbatches == 0:  # not compiled: the parameters alone do not fit
            continue
        setting = config.replace(remat=trial.remat)
        gpu = programs.plan_train_step(setting, gpu_mesh, *shapes, microbatches=trial.microbatches)
        cpu = programs.plan_train_step(setting, cpu_mesh, *shapes, microbatches=trial.microbatches)
        name = f"{preset} train, remat={trial.remat}, {trial.microbatches} microbatches"
        variants[name] = figures(gpu, cpu, budget, "train")
        print_line(name, variants[name])
    gpu = programs.plan_scoring_step(config, gpu_mesh, args.input_length, args.score_batch)
    cpu = programs.plan_scoring_step(config, cpu_mesh, args.input_length, args.score_batch)
    name = f"{preset} scoring, {args.score_batch} rows"
    variants[name] = figures(gpu, cpu, budget, "score")
    print_line(name, variants[name])
    return variants


def figures(gpu, cpu, budget: int, step: str) -> dict:
    return {
        "step": step,
        "gpu_compiler_gib": round(gpu.per_device_bytes / GiB, 3),
        "cpu_compiler_gib": round(cpu.per_device_bytes / GiB, 3),
        "cpu_over_gpu": round(cpu.per_device_bytes / gpu.per_device_bytes, 4),
        "gpu_temporaries_gib": round(gpu.temp_bytes / GiB, 3),
        "cpu_temporaries_gib": round(cpu.temp_bytes / GiB, 3),
        "fits_by_gpu": "fits" if gpu.per_device_bytes <= budget else "no",
        "fits_by_cpu": "fits" if cpu.per_device_bytes <= budget else "no",
    }


def print_line(name: str, values: dict) -> None:
    print(
        f"{name:<52} GPU {values['gpu_compiler_gib']:8.2f} GiB ({values['fits_by_gpu']:>4})  "
        f"CPU {values['cpu_compiler_gib']:8.2f} GiB ({values['fits_by_cpu']:>4})  "
        f"CPU/GPU {values['cpu_over_gpu']:.3f}",
        flush=True,
    )


def main(argv=None) -> int:
    import jax

    from seahorse_metrics.model.partitioning import make_mesh
    from seahorse_metrics.planning import compile_only

    args = parse_args(argv)
    target = compile_only.TARGETS[args.compile_for]
    gpu_mesh = make_mesh(1, compile_only.compile_only_devices(args.compile_for, 1))
    cpu_mesh = make_mesh(1, jax.devices("cpu")[:1])
    print(common.machine_line())
    print(
        f"{target.description}: {args.input_length} tokens, batch {args.batch_size}, "
        f"bfloat16, scanned layers, 1 device, budget {args.memory_fraction:g} of "
        f"{args.compile_for}",
        flush=True,
    )
    variants = {}
    for preset in args.presets:
        variants.update(compare_preset(args, preset, gpu_mesh, cpu_mesh))
    train = [v["cpu_over_gpu"] for v in variants.values() if v["step"] == "train"]
    score = [v["cpu_over_gpu"] for v in variants.values() if v["step"] == "score"]
    ratios = {
        "CPU / GPU compiler, training (median)": statistics.median(train),
        "CPU / GPU compiler, training (least)": min(train),
        "CPU / GPU compiler, training (most)": max(train),
        "CPU / GPU compiler, scoring (median)": statistics.median(score),
    }
    for name, value in ratios.items():
        print(f"{name}: {value:.3f}")
    record = common.make_record(
        "plan_compilers",
        f"Per-device memory of the same programs by XLA:CPU and by XLA:GPU for "
        f"{target.description} (compiled without it): {', '.join(args.presets)}, "
        f"{args.input_length} tokens, batch {args.batch_size}, bfloat16, scanned layers",
        unit="GiB per device",
        primary="gpu_compiler_gib",
        variants=variants,
        ratios=ratios,
        device={"kind": target.description, "compiled_without_it": True},
        conditions="compiled only: no program ran; figures are each compiler's memory analysis",
    )
    common.write_record(record, args.results_dir, tag=args.compile_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
