"""Helpers shared by the benchmarks: the machine's float32 matmul peak, timing,
and which CPU the figures come from."""

from __future__ import annotations

import os
import sys
import time
from typing import Callable


def best_time(function: Callable[[], object], repeats: int = 5) -> float:
    """The fastest of `repeats` calls of `function`, in seconds (one warm-up
    call first). The minimum is the least disturbed by other processes."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def measure_matmul_peak(size: int = 2048, repeats: int = 5) -> dict[str, float]:
    """Float32 FLOP/s of a large square matmul in JAX and in PyTorch.

    What this machine's BLAS/XLA reach on dense float32 products: the
    yardstick for a model's achieved FLOP/s, measured in the same process.

    Args:
      size: Side of the square matrices (2 * size^3 FLOPs per product).
      repeats: Timed products per framework; the best counts.

    Returns:
      {"jax": FLOP/s, "torch": FLOP/s, "peak": the larger}; a framework
      that is not installed is left out.
    """
    import numpy as np

    flops = 2.0 * size**3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    result = {}
    try:
        import jax

        a_jax, b_jax = jax.device_put(a), jax.device_put(b)
        product = jax.jit(lambda x, y: x @ y)
        result["jax"] = flops / best_time(
            lambda: product(a_jax, b_jax).block_until_ready(), repeats
        )
    except ImportError:
        pass
    try:
        import torch

        a_torch, b_torch = torch.from_numpy(a), torch.from_numpy(b)
        with torch.inference_mode():
            result["torch"] = flops / best_time(lambda: a_torch @ b_torch, repeats)
    except ImportError:
        pass
    if result:
        result["peak"] = max(result.values())
    return result


# The vector extensions that decide the kernels' speed on x86 CPUs.
_FLAGS = ("avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_int8")


def machine_line() -> str:
    """One line naming this machine's CPU: model name, family and model
    numbers (the same name can hide CPU generations whose float32 peaks
    differ 2x), usable cores and the vector extensions the kernels use.
    Every benchmark prints it, so figures of different hosts are not compared."""
    info = cpu_info()
    if info["cpu"] is None:
        return f"cpu: {info['cores']} cores (no /proc/cpuinfo)"
    flags = [flag for flag in _FLAGS if flag in info["flags"]]
    return (
        f"cpu: {info['cpu']} (family {info['family']}, model {info['model']}), "
        f"{info['cores']} usable cores, " + (" ".join(flags) or "none of " + " ".join(_FLAGS))
    )


def add_isa_argument(parser) -> None:
    """--isa: measure as an AVX2-only host computes (see `seahorse_metrics.engines.isa`)."""
    parser.add_argument(
        "--isa",
        default="host",
        choices=("host", "AVX2", "AVX"),
        help="Cap both engines at this instruction set (CT2_FORCE_CPU_ISA, "
        "extended to oneDNN/MKL, and --xla_cpu_max_isa): the run "
        "restarts itself so capped. XLA's library dots (YNNPACK) keep the "
        "CPU's own, so JAX's speed stays this host's; its choices and "
        "CTranslate2's GEMMs follow the cap.",
    )


def apply_isa(args) -> None:
    """Restarts this process capped at `args.isa` unless it already is."""
    from seahorse_metrics.engines import isa

    if args.isa == "host" or os.environ.get(isa.CT2_CAP_VAR) == args.isa:
        return
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, isa.capped_environment(args.isa))


def isa_line() -> str:
    """What each engine's kernels run on in this process."""
    from seahorse_metrics.engines import isa

    return isa.describe_line()


# --------------------------------------------------------------- records
# Every benchmark writes one JSON record of its run under bench/results/ (the
# schema is documented in bench/results/README.md); bench/render_results.py
# renders the documentation's benchmark pages from them.
RECORD_SCHEMA = "seahorse-metrics/bench/1"
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
RECORD_FIELDS = (
    "schema",
    "bench",
    "title",
    "date",
    "command",
    "commit",
    "source",
    "host",
    "versions",
    "unit",
    "primary",
    "variants",
    "ratios",
)
# The packages whose versions decide the figures; read from their metadata,
# so recording them imports nothing.
VERSIONED = (
    "seahorse-metrics",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "numpy",
    "torch",
    "transformers",
    "ctranslate2",
    "apache-beam",
    "starlette",
    "uvicorn",
)
# The x86 instruction-set extensions that decide the kernels' speed.
ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_bf16",
    "amx_int8",
)


def cpu_info() -> dict:
    """This machine's CPU: model name, family and model numbers, usable cores, ISA flags."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break  # the first processor is enough
    except OSError:
        pass
    flags = set(fields.get("flags", "").split())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": fields.get("model name"),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "cores": cores,
        "flags": [flag for flag in ISA_FLAGS if flag in flags],
    }


def package_versions() -> dict:
    """Python's and each installed VERSIONED package's version (None: not installed)."""
    import platform
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    """The checkout's commit, or None outside a git checkout."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=os.path.dirname(RESULTS_DIR),
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def make_record(
    bench: str, title: str, *, unit: str, primary: str, variants: dict, ratios: dict, **extra
) -> dict:
    """A benchmark record of this run on this host (see bench/results/README.md).

    Args:
      bench: The script's name (`score`, `real_size`, ...).
      title: What was measured, in a line.
      unit: The unit of `primary`.
      primary: The figure of each variant that tables sort by and plots show.
      variants: {variant: {figure: number, string, [low, high] or None}}.
      ratios: {"ours / theirs": ratio}: the comparisons the script reports.
      **extra: Further top-level fields (`args`, `details`, `device`, `conditions`).
    """
    import datetime

    record = {
        "schema": RECORD_SCHEMA,
        "bench": bench,
        "title": title,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["python"] + [os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "commit": git_commit(),
        "source": "measured",
        "host": cpu_info(),
        "versions": package_versions(),
        "unit": unit,
        "primary": primary,
        "variants": variants,
        "ratios": ratios,
    }
    record.update(extra)
    check_bench_record(record)
    return record


def check_bench_record(record: dict) -> None:
    """Raises ValueError naming the first thing a record lacks or gets wrong."""
    missing = [field for field in RECORD_FIELDS if field not in record]
    if missing:
        raise ValueError(f"benchmark record {record.get('bench')!r} lacks {missing}")
    if record["schema"] != RECORD_SCHEMA:
        raise ValueError(f"benchmark record: schema {record['schema']!r}, not {RECORD_SCHEMA!r}")
    if not isinstance(record["variants"], dict) or not record["variants"]:
        raise ValueError(f"benchmark record {record['bench']!r}: no variants")
    for name, figures in record["variants"].items():
        if not isinstance(figures, dict):
            raise ValueError(
                f"benchmark record {record['bench']!r}: variant {name!r} "
                "is not an object of figures"
            )
        for figure, value in figures.items():
            if not _is_figure(value):
                raise ValueError(
                    f"benchmark record {record['bench']!r}: variants.{name}.{figure}"
                    f" is {value!r}, not a number, string, [low, high] or null"
                )
    for name, value in record["ratios"].items():
        if value is not None and not isinstance(value, (int, float)):
            raise ValueError(f"benchmark record {record['bench']!r}: ratio {name!r} is {value!r}")


def _is_figure(value) -> bool:
    if value is None or isinstance(value, (int, float, str)):
        return True
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, (int, float)) for v in value)
    )


def add_results_argument(parser) -> None:
    """--results_dir: where the run's record goes ('' writes none)."""
    parser.add_argument(
        "--results_dir",
        default=RESULTS_DIR,
        help="Write this run's JSON record here (default bench/results/; '' writes none).",
    )


def write_record(record: dict, results_dir: str, tag: str = "") -> str | None:
    """Writes `record` as `<bench>[-<tag>]-<cpu>-<UTC date>.json` in `results_dir`
    (a second run the same day gets `-2`, ...); returns its path (None: no directory)."""
    import re

    from seahorse_metrics.io.atomic import write_json_atomically

    if not results_dir:
        return None
    check_bench_record(record)
    host = record.get("device", {}).get("kind") or record["host"].get("cpu") or "unknown"
    parts = [record["bench"].replace("_", "-"), tag, host]
    stem = "-".join(re.sub(r"[^a-z0-9]+", "-", part.lower()).strip("-") for part in parts if part)
    stem = f"{stem}-{record['date'][:10]}"
    path, number = os.path.join(results_dir, stem + ".json"), 1
    while os.path.exists(path):
        number += 1
        path = os.path.join(results_dir, f"{stem}-{number}.json")
    write_json_atomically(path, record)
    print(f"record: {path}", flush=True)
    return path
