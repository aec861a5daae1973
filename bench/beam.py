"""Rows/s of `score --runner DirectRunner` (2 worker processes) against `score` in one process.

    python bench/beam.py            # mT5-small shape, 256 tokens, the sample's test split
    python bench/beam.py --quick    # the tiny model: a smoke run of about a minute

Both paths run the real command line, as subprocesses, on the same single
JSONL file (the bundled sample's test split, prepared, repeated `--repeat`
times: 1000 rows each) with the same settings and random weights (our
checkpoint format, the sample's 6000-piece vocabulary, float32). An untimed
precompile first fills a persistent JAX compilation cache that every process
shares, so each timing is a user's run with its programs compiled once:
start-up, model load, reading, scoring and writing; the pipeline (Beam's
Python direct runner, `--direct_num_workers=2
--direct_running_mode=multi_processing`) also merges its shards into one
file. Prints rows/s of each and checks that both wrote the same float32
scores, row for row, then ends with `ratio: N.NN` (pipeline over in-process;
the target is >= 0.75).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_results_argument, machine_line, make_record, write_record  # noqa: E402

SAMPLE_DIR = os.path.join(REPO, "seahorse_metrics", "data", "sample")
VOCAB_SIZE = 6016  # The sample vocabulary's 6000 pieces, rounded up to a multiple of 64.


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="mt5_small", help="Model shape (default mt5_small).")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Copies of the 1000-row test split in the input (default 1; --quick 2).",
    )
    parser.add_argument("--max_input_length", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2, help="Beam worker processes.")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="Runs of each path, alternating; the best counts (default 1).",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="The tiny model, the test split twice: a smoke run of about a "
        "minute (start-up dominates: not the figure to report).",
    )
    parser.add_argument(
        "--work_dir",
        default=None,
        help="Keep the files here (default: a temporary folder, removed).",
    )
    add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.preset, args.repeat = "tiny", 2
    return args


def write_input(folder: str, repeat: int) -> tuple[str, int]:
    """The sample's test split, prepared, `repeat` times in one JSONL file."""
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare

    sample = os.path.join(SAMPLE_DIR, "seahorse")
    prepared = os.path.join(folder, "prepared")
    prepare(sample, LocalArticleSource(os.path.join(sample, "articles.jsonl")), prepared)
    with open(os.path.join(prepared, "test.jsonl"), encoding="utf-8") as handle:
        lines = handle.readlines()
    path = os.path.join(folder, "input.jsonl")
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(lines * repeat)
    return path, len(lines) * repeat


def write_checkpoint(folder: str, preset: str) -> str:
    """Random weights of `preset` (with the sample vocabulary) in our format."""
    from score import random_params  # bench/score.py

    from seahorse_metrics.checkpoints import save_checkpoint
    from seahorse_metrics.model.config import get_config

    config = get_config(preset, vocab_size=VOCAB_SIZE, dropout_rate=0.0)
    path = os.path.join(folder, f"{preset}_checkpoint")
    save_checkpoint(path, config, random_params(config, seed=0))
    shutil.copy(os.path.join(SAMPLE_DIR, "spiece.model"), path)
    return path


def shape_args(args) -> list[str]:
    return ["--max_input_length", str(args.max_input_length), "--no_progress"]


def run(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return seconds


def precompile(checkpoint: str, args, env: dict) -> float:
    code = (
        "import sys; from seahorse_metrics import MultiScorer; "
        "MultiScorer.load({'score': sys.argv[1]}, max_input_length=int(sys.argv[2]))"
        ".precompile()"
    )
    return run([sys.executable, "-c", code, checkpoint, str(args.max_input_length)], env)


def scores(path: str) -> list[float]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line)["score"] for line in handle]


def main(argv=None) -> int:
    args = parse_args(argv)
    print(machine_line(), flush=True)
    folder = args.work_dir or tempfile.mkdtemp(prefix="bench_beam_")
    os.makedirs(folder, exist_ok=True)
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        USE_TF="0",
        TF_CPP_MIN_LOG_LEVEL="3",
        JAX_COMPILATION_CACHE_DIR=os.path.join(folder, "jax_cache"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )
    try:
        source, rows = write_input(folder, args.repeat)
        checkpoint = write_checkpoint(folder, args.preset)
        compile_seconds = precompile(checkpoint, args, env)
        cli = [
            sys.executable,
            "-m",
            "seahorse_metrics",
            "--log_level",
            "WARNING",
            "score",
            "--checkpoint",
            checkpoint,
            "--input",
            source,
            "--overwrite",
        ] + shape_args(args)
        commands = {
            "in_process": cli + ["--output", os.path.join(folder, "in_process.jsonl")],
            "pipeline": cli
            + [
                "--output",
                os.path.join(folder, "pipeline.jsonl"),
                "--merge",
                "--runner",
                "DirectRunner",
                f"--direct_num_workers={args.workers}",
                "--direct_running_mode=multi_processing",
            ],
        }
        best = {}
        for round_index in range(args.rounds):
            order = list(commands) if round_index % 2 == 0 else list(commands)[::-1]
            for name in order:
                seconds = run(commands[name], env)
                best[name] = min(best.get(name, seconds), seconds)
        same = scores(os.path.join(folder, "in_process.jsonl")) == scores(
            os.path.join(folder, "pipeline.jsonl")
        )
    finally:
        if args.work_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"machine: {os.cpu_count()} CPUs; model {args.preset} (vocab {VOCAB_SIZE}, float32), "
        f"{rows} rows of the sample's test split x{args.repeat}, {args.max_input_length} "
        f"tokens; batch shapes precompiled into a shared cache in {compile_seconds:.0f} s"
    )
    for name, seconds in best.items():
        print(f"{name:<11} {seconds:8.1f} s {rows / seconds:9.2f} rows/s")
    print(f"same scores row for row: {'yes' if same else 'NO'}")
    ratio = best["in_process"] / best["pipeline"]
    print(f"pipeline ({args.workers} workers) over in-process: {ratio:.2f} (target >= 0.75)")
    variants = {
        name: {"rows_per_s": rows / seconds, "seconds": seconds} for name, seconds in best.items()
    }
    write_record(
        make_record(
            "beam",
            f"Scoring {rows} rows ({args.preset} shape, {args.max_input_length} tokens): "
            f"`score --runner DirectRunner` on {args.workers} workers against one process",
            unit="rows/s",
            primary="rows_per_s",
            variants=variants,
            ratios={f"pipeline ({args.workers} workers) / in process": ratio},
            args=vars(args),
            details={"same_scores": same, "precompile_s": compile_seconds},
        ),
        args.results_dir,
        tag="quick" if args.quick else "",
    )
    print(f"ratio: {ratio:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
