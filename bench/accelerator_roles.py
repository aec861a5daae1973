"""The child processes of bench/accelerator.py: each measures one part in a
process of its own, so that its device-memory high-water mark is its own and
an out-of-memory failure or a hang loses that part alone.

Every role takes a JSON request and returns a JSON-able dict with a `status`
("ok", "out of memory", "nothing fits", "not run", "failed"); the parent
reads the last `RESULT {...}` line a child prints.

Random weights never pass through the host as a whole model: training
initialises its state with the trainer's own jitted initialiser straight into
the state's shardings (`CompiledStep.init_state`), and scoring draws each
parameter on the device, largest first, in the dtype the scorer would load
it in (int8 kernels quantized there with `quantize_kernel`'s formula).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
import traceback
from typing import Any, Optional

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, REPO)
sys.path.insert(0, BENCH)

SAMPLE_VOCAB = os.path.join(REPO, "seahorse_metrics", "data", "sample", "spiece.model")
# Tiny models derived from a real preset keep room for the sample's 6000 pieces.
TINY_VOCAB = 6016
OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM")


def model_config(preset: str, tiny: bool, **overrides: Any):
    """The preset's `T5Config`; with `tiny`, derived from it (widths / 32,
    heads / 4 of 8 dimensions, 2+2 layers, a 6016-row vocabulary)."""
    from seahorse_metrics.model.config import get_config

    if not tiny:
        return get_config(preset, **overrides)
    real = get_config(preset)
    return get_config(
        preset,
        d_model=real.d_model // 32,
        d_ff=real.d_ff // 32,
        num_heads=real.num_heads // 4,
        d_kv=8,
        num_encoder_layers=2,
        num_decoder_layers=2,
        vocab_size=TINY_VOCAB,
        **overrides,
    )


def is_out_of_memory(error: BaseException) -> bool:
    """Whether an exception is the runtime refusing an allocation."""
    return any(marker in str(error) for marker in OOM_MARKERS)


def device_memory() -> dict[str, Optional[int]]:
    """The first device's allocator figures (None where the backend keeps
    none, as XLA:CPU): peak and current bytes in use, and its limit."""
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    return {
        "peak_bytes": stats.get("peak_bytes_in_use"),
        "in_use_bytes": stats.get("bytes_in_use"),
        "bytes_limit": stats.get("bytes_limit"),
    }


def spread(times: list[float]) -> dict[str, float]:
    """Median, min, max of step times and (max - min) / median."""
    median = statistics.median(times)
    return {
        "median_s": median,
        "min_s": min(times),
        "max_s": max(times),
        "spread": (max(times) - min(times)) / median if median > 0 else 0.0,
    }


# ------------------------------------------------------------------- probe
def run_probe(request: dict) -> dict:
    """The device, its memory and the versions that produced the figures."""
    import importlib.metadata
    import platform

    import jax

    device = jax.devices()[0]
    versions = {"python": platform.python_version()}
    for package in ("jax", "jaxlib", "flax", "optax", "numpy", "orbax-checkpoint"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "status": "ok",
        "platform": device.platform,
        "kind": device.device_kind,
        "count": jax.device_count(),
        "platform_version": getattr(device.client, "platform_version", None),
        "memory": device_memory(),
        "versions": versions,
    }


# -------------------------------------------------------------------- train
def fit_setting(config, request: dict, mesh) -> tuple[Optional[dict], dict]:
    """`plan --fit --devices 1` for the request (no alternatives searched):
    (the chosen setting or None, what the search found)."""
    from seahorse_metrics.planning import fitting, programs

    # The allocator's limit (the parent sets it to `plan`'s share of the device).
    budget = request.get("budget_bytes") or device_memory()["bytes_limit"]
    if budget is None:  # XLA:CPU has none: halfway between 1 and 2 microbatches' need
        needs = [
            programs.plan_train_step(
                config,
                mesh,
                request["input_length"],
                request["batch_size"],
                request["target_length"],
                microbatches=k,
            ).per_device_bytes
            for k in (1, 2)
        ]
        budget = sum(needs) // 2
    fit = fitting.search_fit(
        config,
        1,
        budget,
        request["input_length"],
        request["batch_size"],
        request["target_length"],
        alternatives=False,
    )
    found = {
        "budget_bytes": budget,
        "source": fit.source,
        "trials": [dict(vars(trial)) for trial in fit.trials],
    }
    if fit.best is None:
        return None, found
    return {"remat": fit.best.remat, "microbatches": fit.best.microbatches}, found


def timed_steps(executable, plan, config, request: dict) -> dict:
    """Initialises the state on the device (the trainer's jitted initialiser,
    straight into its shardings), runs the compiled step once and `steps`
    timed times; returns times and rates."""
    import jax
    from train import random_batch, step_flops

    from seahorse_metrics.model.partitioning import sharding_context
    from seahorse_metrics.training import sharding

    rows, length, target = request["batch_size"], request["input_length"], request["target_length"]
    start = time.perf_counter()
    state = plan.init_state(seed=0)
    jax.block_until_ready(state)
    init_s = time.perf_counter() - start
    batch = sharding.global_batch(
        random_batch(rows, length, config.vocab_size, seed=length, target_length=target),
        plan.batch_sharding,
    )
    times = []
    with sharding_context(plan.mesh):
        for _ in range(1 + request["steps"]):
            start = time.perf_counter()
            state, metrics = executable(state, batch)
            jax.block_until_ready(metrics)
            times.append(time.perf_counter() - start)
    flops = step_flops(config, rows, length, target)
    timing = spread(times[1:])
    return dict(
        timing,
        init_s=init_s,
        first_step_s=times[0],
        step_s=times[1:],
        loss=float(metrics["loss"]),
        model_flops_per_step=flops,
        examples_per_s=rows / timing["median_s"],
        tokens_per_s=rows * (length + target) / timing["median_s"],
        achieved_flops=flops / timing["median_s"],
    )


def run_train(request: dict) -> dict:
    """Training steps of one preset at one shape: the setting `plan --fit`
    chooses (request["setting"] None) or a given one (the "does not fit" part,
    run under the same memory cap, where it must fail as planned)."""
    import jax

    from seahorse_metrics import compilation_cache
    from seahorse_metrics.model.partitioning import make_mesh
    from seahorse_metrics.planning import memory, programs

    compilation_cache.enable(request.get("cache_dir"))
    config = model_config(request["preset"], request["tiny"], dtype="bfloat16", scan_layers=True)
    mesh = make_mesh(1)
    result: dict[str, Any] = {
        name: request[name]
        for name in ("preset", "input_length", "target_length", "batch_size", "expect_fit")
    }
    result["platform"] = jax.devices()[0].platform
    if request.get("setting"):
        setting, result["fit"] = request["setting"], None
    else:
        setting, result["fit"] = fit_setting(config, request, mesh)
    if setting is None:
        return dict(result, status="nothing fits")
    run_config = config.replace(remat=setting["remat"])
    # The steps run the very program whose memory analysis is the plan, with
    # the trainer's compiler options on a device (None: `plan`'s fast ones,
    # for --tiny on CPU, where full optimisation takes most of a minute).
    executable, planned, plan = programs.compile_train_step(
        run_config,
        mesh,
        request["input_length"],
        request["batch_size"],
        request["target_length"],
        compiler_options=request.get("compiler_options"),
        microbatches=setting["microbatches"],
    )
    result.update(
        setting=setting,
        planned_bytes=planned.per_device_bytes,
        planned_temp_bytes=planned.temp_bytes,
        plan_source=memory.figure_source(result["platform"]),
        plan_compile_s=planned.compile_seconds,
    )
    if request.get("expect_fit") is False and result["platform"] == "cpu":
        # XLA:CPU enforces no memory cap: the step would run, so the planned
        # need against the cap is all there is to report.
        return dict(result, status="not run", note="XLA:CPU enforces no memory cap")
    try:
        result.update(timed_steps(executable, plan, run_config, request))
    except Exception as error:  # noqa: BLE001 - the OOM is the expected outcome
        if not is_out_of_memory(error):
            raise
        return dict(
            result,
            status="out of memory",
            error=str(error).splitlines()[0][:500],
            memory=device_memory(),
        )
    return dict(result, status="ok", memory=device_memory())


def run_cpu_plan(request: dict) -> dict:
    """XLA:CPU's figure (what `plan` says without the device) of each
    training setting measured, for the measured / CPU-compiler ratio."""
    from seahorse_metrics import compilation_cache
    from seahorse_metrics.model.partitioning import make_mesh
    from seahorse_metrics.planning import programs

    compilation_cache.enable(request.get("cache_dir"))
    figures = []
    for item in request["settings"]:
        config = model_config(
            item["preset"], request["tiny"], dtype="bfloat16", scan_layers=True, remat=item["remat"]
        )
        step = programs.plan_train_step(
            config,
            make_mesh(1),
            item["input_length"],
            item["batch_size"],
            item["target_length"],
            microbatches=item["microbatches"],
        )
        figures.append(
            dict(
                item,
                cpu_planned_bytes=step.per_device_bytes,
                cpu_planned_temp_bytes=step.temp_bytes,
            )
        )
    return {"status": "ok", "settings": figures}


# ------------------------------------------------------------------ scoring
@functools.lru_cache(maxsize=None)
def _drawer(shape: tuple, dtype: str, sharding: Any, quantized_sharding: Any = None):
    """A jitted draw of one parameter on its devices: normal(0, std) in
    `dtype` (ones for std < 0), or with `quantized_sharding` int8 values and
    float32 scales by `quantize_kernel`."""
    import jax
    import jax.numpy as jnp

    from seahorse_metrics.model.quantize import quantize_kernel

    def draw(key, std):
        values = jax.random.normal(key, shape, jnp.float32) * std
        if quantized_sharding is not None:
            return quantize_kernel(values, xp=jnp)
        return jnp.where(std < 0, jnp.ones(shape, jnp.float32), values).astype(dtype)

    out = sharding if quantized_sharding is None else (sharding, quantized_sharding)
    return jax.jit(draw, out_shardings=out)


def random_device_params(model, mesh, seed: int = 0) -> dict:
    """T5-style random parameters of `model` drawn on `mesh`, one at a time,
    largest first (the transient float32 draw of a parameter is freed before
    the next): every parameter in `model.config.dtype`, or, quantized, as
    `Scorer.load(..., quantize="int8")` holds them (int8 kernels and float32
    scales, the rest in float32)."""
    import jax
    from flax import traverse_util
    from score import init_std

    from seahorse_metrics.model.partitioning import logical_to_sharding
    from seahorse_metrics.model.quantize import SCALE_SUFFIX

    abstract = traverse_util.flatten_dict(model.abstract_params(), sep="/")
    shardings = traverse_util.flatten_dict(
        logical_to_sharding(model.param_logical_axes(), mesh), sep="/"
    )
    names = sorted(
        (n for n in abstract if not n.endswith(SCALE_SUFFIX)),
        key=lambda n: (-abstract[n].size * abstract[n].dtype.itemsize, n),
    )
    root = jax.random.PRNGKey(seed)
    params = {}
    for index, name in enumerate(names):
        leaf = abstract[name]
        std = init_std(name, leaf.shape, model.config)
        key, std = jax.random.fold_in(root, index), -1.0 if std is None else std
        if str(leaf.dtype) == "int8":
            params[name], params[name + SCALE_SUFFIX] = _drawer(
                tuple(leaf.shape), "int8", shardings[name], shardings[name + SCALE_SUFFIX]
            )(key, std)
        else:
            dtype = str(leaf.dtype) if model.config.quantize else model.config.dtype
            params[name] = _drawer(tuple(leaf.shape), dtype, shardings[name])(key, std)
        jax.block_until_ready(params[name])
    return traverse_util.unflatten_dict(params, sep="/")


def run_score(request: dict) -> dict:
    """Scoring at one preset, dtype and quantization: examples/s and peak
    memory, under the memory cap the parent set (XLA_PYTHON_CLIENT_MEM_FRACTION)."""
    import jax
    from real_size import make_pairs

    from seahorse_metrics import compilation_cache
    from seahorse_metrics.engines.jax_engine import default_mesh
    from seahorse_metrics.model.model import EncoderDecoderModel
    from seahorse_metrics.scoring.single import Scorer

    compilation_cache.enable(request.get("cache_dir"))
    config = model_config(
        request["preset"], request["tiny"], dtype=request["dtype"], quantize=request["quantize"]
    )
    model, mesh, length = EncoderDecoderModel(config), default_mesh(), request["input_length"]
    start = time.perf_counter()
    params = random_device_params(model, mesh)
    init_s = time.perf_counter() - start
    weights = device_memory()["in_use_bytes"]
    rows = request["batch_size"]
    scorer = Scorer(
        model,
        params,
        SAMPLE_VOCAB,
        max_input_length=length,
        batch_size=rows,
        bucket_lengths=(length,),
        max_batch_tokens=rows * length,
        mesh=mesh,
    )
    premises, hypotheses = make_pairs(request["pairs"], length)
    start = time.perf_counter()
    scorer.score(premises[:rows], hypotheses[:rows], show_progress=False)  # compiles
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    scores = scorer.score(premises, hypotheses, show_progress=False)
    seconds = time.perf_counter() - start
    return {
        "status": "ok",
        "platform": jax.devices()[0].platform,
        "init_s": init_s,
        "first_batch_s": first_s,
        "score_s": seconds,
        "examples_per_s": len(premises) / seconds,
        "weights_in_use_bytes": weights,
        "finite_scores": bool((scores >= 0).all() and (scores <= 1).all()),
        "memory": device_memory(),
    }


# ----------------------------------------------------------------- numerics
def demo_checkpoints(metrics_dir: str) -> dict[str, str]:
    """q1..q6 -> the demo's best checkpoint of each (those present)."""
    found = {}
    for question in range(1, 7):
        best = os.path.join(metrics_dir, f"q{question}", "best")
        if os.path.isdir(best):
            found[f"q{question}"] = best
    return found


def demo_pairs(metrics_dir: str, rows: int) -> tuple[list[str], list[str]]:
    """The demo's prepared validation pairs (beside its metrics), else the sample's."""
    prepared = os.path.join(
        os.path.dirname(os.path.abspath(metrics_dir)), "prepared", "validation.jsonl"
    )
    if os.path.isfile(prepared):
        with open(prepared, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        records = [r for r in records if r.get("article") and r.get("summary")][:rows]
        return [r["article"] for r in records], [r["summary"] for r in records]
    from real_size import make_pairs

    return make_pairs(rows, 256)


def run_numerics(request: dict) -> dict:
    """log P("1") of every demo metric on each pair, per dtype, here."""
    import jax
    import numpy as np

    from seahorse_metrics import compilation_cache
    from seahorse_metrics.scoring.scorer import MultiScorer

    compilation_cache.enable(request.get("cache_dir"))
    checkpoints = demo_checkpoints(request["metrics_dir"])
    premises, hypotheses = demo_pairs(request["metrics_dir"], request["rows"])
    log_p = {}
    for dtype in request["dtypes"]:
        scorer = MultiScorer.load(checkpoints, dtype=dtype, max_input_length=512, batch_size=64)
        scores = scorer.score(premises, hypotheses, show_progress=False)
        log_p[dtype] = {
            name: np.log(np.maximum(np.asarray(values, np.float64), 1e-300)).tolist()
            for name, values in scores.items()
        }
    return {
        "status": "ok",
        "platform": jax.devices()[0].platform,
        "rows": len(premises),
        "log_p": log_p,
    }


ROLES = {
    "probe": run_probe,
    "train": run_train,
    "cpu_plan": run_cpu_plan,
    "score": run_score,
    "numerics": run_numerics,
}


def main(role: str, request: dict) -> int:
    """Runs `role`; prints `RESULT {json}` (a failure too, as its status)."""
    started = time.perf_counter()
    try:
        result = ROLES[role](request)
    except Exception as error:  # noqa: BLE001 - reported to the parent, which goes on
        traceback.print_exc()  # the parent keeps the end of it in the record
        lines = str(error).strip().splitlines() or [""]
        result = {
            "status": "out of memory" if is_out_of_memory(error) else "failed",
            "error": f"{type(error).__name__}: {lines[0][:1000]}",
        }
    result["seconds"] = time.perf_counter() - started
    print("RESULT " + json.dumps(result), flush=True)
    return 0
