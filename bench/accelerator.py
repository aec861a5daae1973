"""One prepared accelerator run: training, memory, scoring and numerics on the device at hand.

    python bench/accelerator.py                        # one GPU: within 8 minutes on an H100
    python bench/accelerator.py --parts train,nofit    # some parts only
    python bench/accelerator.py --tiny --results_dir /tmp/r   # every part on tiny models, CPU

Each part runs in a child process (bench/accelerator_roles.py) with its own
time budget, so an out-of-memory failure, a crash or a hang loses that part
alone; parts run in order of importance while the whole run's budget
(--budget_s) lasts, and a part that no longer fits in it is recorded as
skipped. Nothing is installed or downloaded. The parts:

  probe     the device, its memory, the versions
  train     training steps at the paper's shape (2048 input tokens, 4 target
            tokens, bfloat16 compute, float32 master weights, Adafactor,
            scanned layers, dropout 0.1, random init on the device) for
            mT5-large and mT5-XL, with the setting `plan --fit --devices 1`
            chooses for the device's memory (its allocator limit, which the
            child sets to --memory_fraction of the device as `plan` budgets):
            examples/s, tokens/s, model FLOPs utilisation against the
            device's bf16 peak (BF16_PEAK_TFLOPS), the spread of step times,
            and the measured peak device memory next to plan's prediction
  nofit     the setting the mT5-XL search compiled and found not to fit
            with the least memory, run under the same cap: it must fail
            with the runtime's out-of-memory error (XLA:CPU enforces no cap:
            on CPU it is reported with its planned need only)
  score     scoring at 2048 tokens: mT5-large and mT5-XL in bfloat16 and
            with int8 weights, and mT5-XXL with int8 weights under a 24 GB
            cap (XLA_PYTHON_CLIENT_MEM_FRACTION set so that only 24e9 bytes
            are usable): examples/s and peak memory
  anchor    mT5-large training at T5X's published shape (512 / 128 tokens)
            beside NVIDIA JAX-Toolbox's T5X figures (ANCHORS)
  numerics  the demo's six metrics (`python -m seahorse_metrics.demo` writes
            demo_output/metrics) scored on the device in bfloat16 and
            float32 against XLA:CPU's float32 (a child of its own, run
            alongside): Spearman and the largest |delta log P("1")|; skipped
            with a note when the checkpoints are absent

After the training parts, alongside the scoring parts, a CPU child compiles
each training setting measured with XLA:CPU (what `plan` says where no device
is), so the record gives measured / CPU-compiler ratios too (the figures
`plan --device_record` corrects the CPU compiler's by). One JSON record (schema SCHEMA; README,
"Accelerators") goes to $OUT/accelerator.json when OUT is set (or --out) and
to --results_dir (default bench/results/); a table is printed.

--tiny runs every part end to end on tiny models derived from the same
presets (widths / 32, 2+2 layers) at tiny shapes: the CPU test of this run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform as platform_lib
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, REPO)
sys.path.insert(0, BENCH)

from accelerator_report import check_record, summarize, table  # noqa: E402
from accelerator_roles import demo_checkpoints  # noqa: E402
from common import git_commit, machine_line  # noqa: E402

SCHEMA = "seahorse-metrics/accelerator-run/1"
PARTS = ("train", "nofit", "score", "anchor", "numerics")
GB = 10**9
# Dense bfloat16 tensor-core peaks (TFLOP/s) by device kind, first match of a
# lower-case substring of `device_kind` (so "h100 pcie" comes before "h100").
BF16_PEAK_TFLOPS = (
    ("h100 pcie", 756.0),
    ("h100 nvl", 835.0),
    ("h100", 989.0),
    ("h200", 989.0),
    ("a100", 312.0),
    ("l40s", 362.0),
    ("l4", 121.0),
)


@dataclasses.dataclass(frozen=True)
class Shapes:
    """The run's shapes: the paper's, or --tiny's."""

    input_length: int
    target_length: int
    batch_size: int
    steps: int
    anchor: tuple[int, int]
    score_length: int
    score_batch: int
    score_pairs: int
    numerics_rows: int
    part_budget_s: dict


FULL = Shapes(
    2048,
    4,
    32,
    5,
    (512, 128),
    2048,
    8,
    64,
    256,
    {"probe": 90, "train": 180, "nofit": 90, "score": 90, "anchor": 90, "numerics": 90, "cpu": 400},
)
TINY = Shapes(
    128,
    4,
    2,
    2,
    (32, 8),
    64,
    4,
    8,
    16,
    {
        "probe": 120,
        "train": 300,
        "nofit": 120,
        "score": 120,
        "anchor": 300,
        "numerics": 120,
        "cpu": 300,
    },
)
# (preset, dtype, quantize, cap in bytes), most telling first.
SCORING = (
    ("mt5_xxl", "bfloat16", "int8", 24 * GB),
    ("mt5_large", "bfloat16", None, None),
    ("mt5_large", "bfloat16", "int8", None),
    ("mt5_xl", "bfloat16", None, None),
    ("mt5_xl", "bfloat16", "int8", None),
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tiny", action="store_true", help="Tiny models and shapes (the CPU test of the run)."
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"Comma-separated parts to run (default all: {','.join(PARTS)}).",
    )
    parser.add_argument(
        "--budget_s",
        type=float,
        default=450.0,
        help="Wall-clock budget of the whole run (default 450 s).",
    )
    parser.add_argument(
        "--memory_fraction",
        type=float,
        default=0.9,
        help="Share of the device memory training may use, as `plan --fit` budgets (default 0.9).",
    )
    parser.add_argument(
        "--metrics_dir",
        default=os.path.join(REPO, "demo_output", "metrics"),
        help="The demo's metrics, for the numerics part.",
    )
    parser.add_argument(
        "--peak_tflops",
        type=float,
        default=None,
        help="The device's dense bf16 peak, where BF16_PEAK_TFLOPS lacks it.",
    )
    parser.add_argument(
        "--out",
        default=os.environ.get("OUT"),
        help="Also write accelerator.json here (default: $OUT when set).",
    )
    parser.add_argument(
        "--results_dir",
        default=os.path.join(BENCH, "results"),
        help="Where the dated record goes (default bench/results/).",
    )
    parser.add_argument("--role", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--request", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.parts.split(",")) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {unknown}; choose from {','.join(PARTS)}")
    return args


# ------------------------------------------------------------------ children
class Clock:
    """The run's deadline, and each part's share of what is left."""

    def __init__(self, budget_s: float, minimum_s: float):
        self.start, self.budget_s, self.minimum_s = time.monotonic(), budget_s, minimum_s

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.start)

    def timeout(self, part_budget_s: float) -> Optional[float]:
        """The part's timeout, or None when too little time is left to start it."""
        timeout = min(part_budget_s, self.left() - 5.0)
        return timeout if timeout >= self.minimum_s else None


def child_env(fraction: Optional[float] = None, cpu: bool = False) -> dict:
    """The environment of a child: no preallocation (the allocator's figures
    are then what the part uses), the memory cap, or XLA:CPU only."""
    env = dict(
        os.environ,
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONUNBUFFERED="1",
    )
    if fraction is not None:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{min(fraction, 1.0):.4f}"
    if cpu:
        env["JAX_PLATFORMS"] = "cpu"
    return env


def start_child(role: str, request: dict, env: dict, log_dir: str) -> tuple[Any, str, str]:
    """Starts `role` in a child; returns (process, stdout path, stderr path)."""
    paths = [
        os.path.join(log_dir, f"{role}-{time.monotonic_ns()}.{kind}") for kind in ("out", "err")
    ]
    handles = [open(path, "w", encoding="utf-8") for path in paths]
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--role",
                role,
                "--request",
                json.dumps(request),
            ],
            env=env,
            stdout=handles[0],
            stderr=handles[1],
            cwd=REPO,
        )
    finally:
        for handle in handles:
            handle.close()
    return process, paths[0], paths[1]


def finish_child(started: tuple[Any, str, str], timeout: Optional[float]) -> dict:
    """The child's RESULT, or a status saying why there is none."""
    process, out_path, err_path = started
    begun = time.monotonic()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return {"status": "timed out", "seconds": timeout, "log_tail": _tail(err_path)}
    with open(out_path, encoding="utf-8") as handle:
        results = [line for line in handle if line.startswith("RESULT ")]
    if not results:
        tail = _tail(err_path)
        return {
            "status": "failed",
            "seconds": time.monotonic() - begun,
            "log_tail": tail,
            "error": f"exit {process.returncode}: {tail[-1] if tail else ''}",
        }
    result = json.loads(results[-1][len("RESULT ") :])
    if result.get("status") not in ("ok", "not run", "nothing fits"):
        result["log_tail"] = _tail(err_path)
    return result


def _tail(path: str, lines: int = 15) -> list[str]:
    """The last non-empty lines a child wrote to stderr (for the record)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        found = [line.rstrip()[:500] for line in handle if line.strip()]
    return found[-lines:]


class Runner:
    """Runs the parts one at a time within the clock; keeps their results."""

    def __init__(self, args: argparse.Namespace, shapes: Shapes, log_dir: str):
        self.args, self.shapes, self.log_dir = args, shapes, log_dir
        self.clock = Clock(args.budget_s, 5.0 if args.tiny else 30.0)
        self.parts: dict[str, dict] = {}

    def run(self, name: str, role: str, request: dict, env: dict, kind: str) -> dict:
        timeout = self.clock.timeout(self.shapes.part_budget_s[kind])
        if timeout is None:
            result = {"status": "skipped", "note": "the run's time budget was spent"}
        else:
            print(
                f"[{self.clock.budget_s - self.clock.left():5.0f} s] {name} "
                f"(up to {timeout:.0f} s)",
                flush=True,
            )
            result = finish_child(start_child(role, request, env, self.log_dir), timeout)
        self.parts[name] = dict(result, role=role)
        return self.parts[name]

    def background(self, role: str, request: dict, env: dict):
        return start_child(role, request, env, self.log_dir)

    def collect(self, name: str, role: str, started, kind: str) -> dict:
        """Waits for a background child, within its budget and the run's."""
        timeout = max(1.0, min(self.shapes.part_budget_s[kind], self.clock.left() - 2.0))
        self.parts[name] = dict(finish_child(started, timeout), role=role)
        return self.parts[name]


# ------------------------------------------------------------------ the parts
def train_request(
    args,
    shapes: Shapes,
    preset: str,
    input_length: int,
    target_length: int,
    cache_dir: str,
    setting: Optional[dict] = None,
    steps: Optional[int] = None,
) -> dict:
    return {
        "preset": preset,
        "tiny": args.tiny,
        "input_length": input_length,
        "target_length": target_length,
        "batch_size": shapes.batch_size,
        "steps": shapes.steps if steps is None else steps,
        "setting": setting,
        "expect_fit": setting is None,
        "cache_dir": cache_dir,
        # The trainer's options on a device; `plan`'s fast ones for --tiny on CPU.
        "compiler_options": None if args.tiny else {},
    }


def nofit_setting(train_xl: dict) -> Optional[dict]:
    """The setting the mT5-XL search compiled and found not to fit with the
    least planned memory (the one closest to the limit), or None."""
    trials = [
        t
        for t in (train_xl.get("fit") or {}).get("trials", [])
        if not t["fits"] and t["microbatches"] > 0
    ]
    if not trials:
        return None
    chosen = min(trials, key=lambda t: t["per_device_bytes"])
    return {
        "remat": chosen["remat"],
        "microbatches": chosen["microbatches"],
        "predicted_bytes": chosen["per_device_bytes"],
        "budget_bytes": train_xl["fit"]["budget_bytes"],
    }


def run_training(runner: Runner, parts: set, cache_dir: str) -> None:
    args, shapes = runner.args, runner.shapes
    if "train" not in parts and "nofit" not in parts:
        return
    env = child_env(args.memory_fraction)
    presets = ("mt5_large", "mt5_xl") if "train" in parts else ("mt5_xl",)
    for preset in presets:
        runner.run(
            f"train_{preset}",
            "train",
            train_request(
                args, shapes, preset, shapes.input_length, shapes.target_length, cache_dir
            ),
            env,
            "train",
        )
    if "nofit" not in parts:
        return
    setting = nofit_setting(runner.parts["train_mt5_xl"])
    if setting is None:
        runner.parts["does_not_fit"] = {
            "status": "not run",
            "role": "train",
            "note": "the mT5-XL search compiled no setting that does not fit",
        }
        return
    result = runner.run(
        "does_not_fit",
        "train",
        train_request(
            args,
            shapes,
            "mt5_xl",
            shapes.input_length,
            shapes.target_length,
            cache_dir,
            setting={k: setting[k] for k in ("remat", "microbatches")},
            steps=1,
        ),
        env,
        "nofit",
    )
    result.update(predicted_bytes=setting["predicted_bytes"], cap_bytes=setting["budget_bytes"])


def score_fraction(cap: Optional[int], device: dict) -> Optional[float]:
    """The memory fraction leaving `cap` bytes usable on the device (None: no cap)."""
    total = device.get("memory_bytes")
    if cap is None or not total:
        return None
    return cap / total


def run_scoring(runner: Runner, device: dict, cache_dir: str) -> None:
    shapes = runner.shapes
    for preset, dtype, quantize, cap in SCORING:
        pairs = max(shapes.score_batch, shapes.score_pairs // (4 if preset == "mt5_xxl" else 1))
        request = {
            "preset": preset,
            "tiny": runner.args.tiny,
            "dtype": dtype,
            "quantize": quantize,
            "input_length": shapes.score_length,
            "batch_size": shapes.score_batch // (2 if preset == "mt5_xxl" else 1),
            "pairs": pairs,
            "cache_dir": cache_dir,
        }
        name = f"score_{preset}_{quantize or dtype}" + (f"_cap{cap // GB}GB" if cap else "")
        result = runner.run(name, "score", request, child_env(score_fraction(cap, device)), "score")
        result.update(
            cap_bytes=cap,
            dtype=dtype,
            quantize=quantize,
            preset=preset,
            cap_enforced=bool(cap) and score_fraction(cap, device) is not None,
        )


def start_cpu_plan(runner: Runner, cache_dir: str, names: tuple[str, ...]):
    """XLA:CPU's figures of the settings of the training parts `names` (in the background)."""
    settings = []
    for name in names:
        part = runner.parts.get(name, {})
        if part.get("role") == "train" and part.get("setting"):
            settings.append(
                dict(
                    part["setting"],
                    part=name,
                    preset=part["preset"],
                    input_length=part["input_length"],
                    target_length=part["target_length"],
                    batch_size=part["batch_size"],
                )
            )
    if not settings:
        return None
    return runner.background(
        "cpu_plan",
        {"tiny": runner.args.tiny, "settings": settings, "cache_dir": cache_dir},
        child_env(cpu=True),
    )


def numerics_request(args, shapes: Shapes, dtypes: list[str], cache_dir: str) -> dict:
    return {
        "metrics_dir": args.metrics_dir,
        "rows": shapes.numerics_rows,
        "dtypes": dtypes,
        "cache_dir": cache_dir,
    }


def describe_device(probe: dict, args: argparse.Namespace) -> dict:
    """The device section of the record, with its bf16 peak (FLOP/s)."""
    kind = str(probe.get("kind", ""))
    peak, source = None, None
    if args.peak_tflops:
        peak, source = args.peak_tflops * 1e12, "--peak_tflops"
    else:
        for name, tflops in BF16_PEAK_TFLOPS:
            if name in kind.lower():
                peak, source = tflops * 1e12, f"BF16_PEAK_TFLOPS[{name!r}] (dense, nominal)"
                break
    memory = probe.get("memory") or {}
    return {
        "platform": probe.get("platform"),
        "kind": kind,
        "count": probe.get("count"),
        "platform_version": probe.get("platform_version"),
        "memory_bytes": memory.get("bytes_limit"),
        "bf16_peak_flops": peak,
        "peak_source": source,
    }


def run_all(args: argparse.Namespace, shapes: Shapes, work: str) -> tuple[Runner, dict]:
    """Every part, in order of importance; returns the runner and the device."""
    parts = set(args.parts.split(","))
    runner = Runner(args, shapes, work)
    cache_dir = os.path.join(work, "jax_cache")
    probe = runner.run("probe", "probe", {}, child_env(1.0), "probe")
    device = describe_device(probe, args)
    run_training(runner, parts, cache_dir)
    # CPU-only children run alongside the scoring parts, not the timed training steps.
    reference, have_metrics = None, bool(demo_checkpoints(args.metrics_dir))
    if "numerics" in parts and have_metrics:  # XLA:CPU's float32
        reference = runner.background(
            "numerics", numerics_request(args, shapes, ["float32"], cache_dir), child_env(cpu=True)
        )
    cpu_plans = {"cpu_plan_training": start_cpu_plan(runner, cache_dir, tuple(runner.parts))}
    if "score" in parts:
        run_scoring(runner, device, cache_dir)
    if "anchor" in parts:
        length, target = shapes.anchor
        name = f"anchor_mt5_large_{length}_{target}"
        runner.run(
            name,
            "train",
            train_request(args, shapes, "mt5_large", length, target, cache_dir),
            child_env(args.memory_fraction),
            "train",
        )
        cpu_plans["cpu_plan_anchor"] = start_cpu_plan(runner, cache_dir, (name,))
    if "numerics" in parts:
        if have_metrics:
            runner.run(
                "numerics",
                "numerics",
                numerics_request(args, shapes, ["float32", "bfloat16"], cache_dir),
                child_env(),
                "numerics",
            )
            runner.collect("numerics_cpu_reference", "numerics", reference, "numerics")
        else:
            runner.parts["numerics"] = {
                "status": "skipped",
                "role": "numerics",
                "note": f"no demo checkpoints in {args.metrics_dir}: run `python -m "
                "seahorse_metrics.demo` first (and carry demo_output/ to the device)",
            }
    for name, started in cpu_plans.items():
        if started is not None:
            runner.collect(name, "cpu_plan", started, "cpu")
    return runner, device


def write_record(record: dict, args: argparse.Namespace) -> list[str]:
    """Writes the record under --out and --results_dir; returns the paths."""
    from seahorse_metrics.io.atomic import write_json_atomically

    slug = re.sub(r"[^a-z0-9]+", "-", str(record["device"].get("kind") or "unknown").lower()).strip(
        "-"
    )
    stamp = record["date"].replace(":", "").replace("-", "")[:15]
    paths = [os.path.join(args.results_dir, f"accelerator-{record['mode']}-{slug}-{stamp}.json")]
    if args.out:
        paths.append(os.path.join(args.out, "accelerator.json"))
    for path in paths:
        write_json_atomically(path, record)
    return paths


def parent(args: argparse.Namespace) -> int:
    shapes = TINY if args.tiny else FULL
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(machine_line(), flush=True)
    with tempfile.TemporaryDirectory(prefix="accelerator-") as work:
        runner, device = run_all(args, shapes, work)
    record = {
        "schema": SCHEMA,
        "date": date,
        "mode": "tiny" if args.tiny else "device",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "commit": git_commit(),
        "budget_s": args.budget_s,
        "host": {"hostname": platform_lib.node(), "cpu": machine_line()},
        "device": device,
        "versions": runner.parts["probe"].get("versions"),
        "shapes": dataclasses.asdict(shapes),
        "memory_fraction": args.memory_fraction,
        "parts": runner.parts,
    }
    record.update(summarize(record))
    record["wall_s"] = time.monotonic() - started
    check_record(record)
    print("\n".join(table(record)))
    for path in write_record(record, args):
        print(f"record: {path}")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.role is None:
        return parent(args)
    from accelerator_roles import main as role_main

    return role_main(args.role, json.loads(args.request))


if __name__ == "__main__":
    sys.exit(main())
