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

    flops = 2.0 * size ** 3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    result = {}
    try:
        import jax

        a_jax, b_jax = jax.device_put(a), jax.device_put(b)
        product = jax.jit(lambda x, y: x @ y)
        result["jax"] = flops / best_time(lambda: product(a_jax, b_jax).block_until_ready(),
                                          repeats)
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
    fields = {}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break  # the first processor is enough
    except OSError:
        return f"cpu: {os.cpu_count()} cores (no /proc/cpuinfo)"
    flags = set(fields.get("flags", "").split())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"cpu: {fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}), {cores} usable cores, "
            + (" ".join(f for f in _FLAGS if f in flags) or "none of " + " ".join(_FLAGS)))


def add_isa_argument(parser) -> None:
    """--isa: measure as an AVX2-only host computes (see `seahorse_metrics.engines.isa`)."""
    parser.add_argument("--isa", default="host", choices=("host", "AVX2", "AVX"),
                        help="Cap both engines at this instruction set (CT2_FORCE_CPU_ISA, "
                             "extended to oneDNN/MKL, and --xla_cpu_max_isa): the run "
                             "restarts itself so capped. XLA's library dots (YNNPACK) keep the "
                             "CPU's own, so JAX's speed stays this host's; its choices and "
                             "CTranslate2's GEMMs follow the cap.")


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
