"""Pairs/s of `seahorse-metrics serve` under 1, 8 and 32 concurrent clients, against scoring
in process.

    python bench/serve.py            # mT5-small shape, 256 tokens, the sample's test split
    python bench/serve.py --quick    # the tiny model, fewer rows: a smoke run of about a minute

The rows are the bundled sample's test split, prepared (1000 pairs; `--rows`
takes the first N). In-process: `MultiScorer.score` of all of them in this
process (the best of `--rounds`), the figure the server is held to. Served:
a `seahorse-metrics serve` subprocess on a free loopback port with the same
checkpoint (random weights of `--preset` with the sample's vocabulary, our
format) and settings, every batch shape compiled before it reports ready
(a persistent JAX compilation cache is shared with this process). For each
number of clients (threads, each on its own keep-alive connection) and each
request size (single pairs, and batches of 16), the clients send all the
rows once, as fast as answers come back. Printed per run: pairs/s, its
ratio to in-process, p50/p99 request latency, and the windows the server
formed (mean pairs and requests per merged window, read from its
`/metrics`). Ends with `ratio at 32 clients: N.NN` for single pairs and for
batches of 16 (goal >= 0.8). Figures from a busy machine are not quiet
figures: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import add_results_argument, machine_line, make_record, write_record  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="mt5_small", help="Model shape (default mt5_small).")
    parser.add_argument("--max_input_length", type=int, default=256)
    parser.add_argument(
        "--rows",
        type=int,
        default=1000,
        help="Pairs of the test split sent per run (default all 1000).",
    )
    parser.add_argument("--clients", default="1,8,32", help="Concurrent clients (default 1,8,32).")
    parser.add_argument("--request_sizes", default="1,16", help="Pairs per request (default 1,16).")
    parser.add_argument(
        "--rounds", type=int, default=2, help="In-process timings; the best counts (default 2)."
    )
    parser.add_argument(
        "--serve_args",
        default="",
        help="More `serve` options, e.g. '--max_batch_pairs 128 --max_wait_ms 2'.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="The tiny model and 256 rows: a smoke run (not the figure to report).",
    )
    parser.add_argument(
        "--work_dir",
        default=None,
        help="Keep the files here (default: a temporary folder, removed).",
    )
    add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.preset, args.rows, args.rounds = "tiny", 256, 1
    return args


def read_pairs(folder: str, rows: int) -> list[dict]:
    """The first `rows` pairs of the sample's prepared test split."""
    from beam import write_input  # bench/beam.py

    path, _ = write_input(folder, 1)
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle][:rows]
    return [{"article": r["article"], "summary": r["summary"]} for r in records]


def in_process_rate(checkpoint: str, pairs: list[dict], args) -> float:
    """Pairs/s of `MultiScorer.score` over all the pairs (best of `args.rounds`,
    after an untimed warm-up call)."""
    from seahorse_metrics import MultiScorer

    scorer = MultiScorer.load({"score": checkpoint}, max_input_length=args.max_input_length)
    scorer.precompile()
    premises, hypotheses = [p["article"] for p in pairs], [p["summary"] for p in pairs]
    scorer.score(premises[:64], hypotheses[:64], show_progress=False)  # warm-up, untimed
    best = float("inf")
    for _ in range(args.rounds):
        start = time.perf_counter()
        scorer.score(premises, hypotheses, show_progress=False)
        best = min(best, time.perf_counter() - start)
    return len(pairs) / best


def start_server(checkpoint: str, args, env: dict, log_path: str):
    """The `serve` subprocess on a free loopback port, once ready: (process, port)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(log_path, "wb")
    command = [
        sys.executable,
        "-m",
        "seahorse_metrics",
        "--log_level",
        "WARNING",
        "serve",
        "--checkpoint",
        f"score={checkpoint}",
        "--port",
        str(port),
        "--max_input_length",
        str(args.max_input_length),
        "--max_request_pairs",
        "256",
        *args.serve_args.split(),
    ]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"serve exited:\n{open(log_path).read()[-3000:]}")
        try:
            if _get(port, "/healthz")[0] == 200:
                return process, port
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError("serve did not get ready")


def _get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def _window_counts(port: int) -> dict[str, float]:
    text = _get(port, "/metrics")[1]
    values = {}
    for name in (
        "seahorse_window_pairs_sum",
        "seahorse_window_pairs_count",
        "seahorse_window_requests_sum",
        "seahorse_model_batches_total",
    ):
        match = re.search(rf"^{name} (\S+)$", text, re.M)
        values[name] = float(match.group(1)) if match else 0.0
    return values


def run_clients(port: int, pairs: list[dict], clients: int, size: int) -> dict:
    """Sends every pair once, `size` per request, from `clients` threads."""
    requests = [pairs[start : start + size] for start in range(0, len(pairs), size)]
    cursor = iter(range(len(requests)))
    latencies: list[float] = []

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for index in cursor:  # next() on a shared iterator is atomic under the GIL
            body = json.dumps({"pairs": requests[index]})
            start = time.perf_counter()
            connection.request("POST", "/v1/score", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            latencies.append(time.perf_counter() - start)
            if response.status != 200 or len(answer["results"]) != len(requests[index]):
                raise RuntimeError(f"request {index}: HTTP {response.status}: {answer}")
        connection.close()

    before = _window_counts(port)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    seconds = time.perf_counter() - start
    after = _window_counts(port)
    delta = {name: after[name] - before[name] for name in after}
    windows = max(delta["seahorse_window_pairs_count"], 1.0)
    latencies.sort()
    return {
        "pairs_per_second": len(pairs) / seconds,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "pairs_per_window": delta["seahorse_window_pairs_sum"] / windows,
        "requests_per_window": delta["seahorse_window_requests_sum"] / windows,
        "model_batches": int(delta["seahorse_model_batches_total"]),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    from beam import write_checkpoint  # bench/beam.py

    print(machine_line(), flush=True)
    folder = args.work_dir or tempfile.mkdtemp(prefix="bench_serve_")
    os.makedirs(folder, exist_ok=True)
    cache = os.path.join(folder, "jax_cache")
    os.environ.update(
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=cache,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        SEAHORSE_METRICS_COMPILATION_CACHE=cache,
    )
    process = None
    try:
        pairs = read_pairs(folder, args.rows)
        checkpoint = write_checkpoint(folder, args.preset)
        baseline = in_process_rate(checkpoint, pairs, args)
        process, port = start_server(
            checkpoint, args, dict(os.environ), os.path.join(folder, "serve.log")
        )
        results = {}
        for size in [int(s) for s in args.request_sizes.split(",")]:
            for clients in [int(c) for c in args.clients.split(",")]:
                results[clients, size] = run_clients(port, pairs, clients, size)
    finally:
        if process is not None:
            process.terminate()
            process.wait(60)
        if args.work_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    report(args, len(pairs), baseline, results)
    write_record(
        serve_record(args, len(pairs), baseline, results),
        args.results_dir,
        tag="quick" if args.quick else "",
    )
    return 0


def serve_record(args, rows: int, baseline: float, results: dict) -> dict:
    """This run as a benchmark record (bench/results/README.md)."""
    variants = {"in process (MultiScorer.score)": {"pairs_per_s": baseline}}
    for (clients, size), r in results.items():
        variants[f"{clients} clients, {size} pairs/request"] = {
            "pairs_per_s": r["pairs_per_second"],
            "vs_in_process": r["pairs_per_second"] / baseline,
            "p50_ms": r["p50_ms"],
            "p99_ms": r["p99_ms"],
            "pairs_per_window": r["pairs_per_window"],
            "requests_per_window": r["requests_per_window"],
            "model_batches": r["model_batches"],
        }
    ratios = {
        f"served / in process, 32 clients, {size} pairs/request": results[32, size][
            "pairs_per_second"
        ]
        / baseline
        for size in sorted({size for _, size in results})
        if (32, size) in results
    }
    return make_record(
        "serve",
        f"`seahorse-metrics serve` under concurrent clients ({args.preset} shape, "
        f"{args.max_input_length} tokens, {rows} pairs) against in-process scoring",
        unit="pairs/s",
        primary="pairs_per_s",
        variants=variants,
        ratios=ratios,
        args=vars(args),
        conditions=f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
    )


def report(args, rows: int, baseline: float, results: dict) -> None:
    load = os.getloadavg()[0]
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load:.1f}"
        f"{' (busy: NOT quiet figures)' if load > 0.5 * (os.cpu_count() or 1) else ''}; "
        f"model {args.preset} (float32), {rows} pairs of the sample's test split, "
        f"{args.max_input_length} tokens"
    )
    print(f"in-process MultiScorer.score: {baseline:.1f} pairs/s")
    print(
        "| clients | pairs/request | pairs/s | vs in-process | p50 ms | p99 ms | "
        "pairs/window | requests/window | model batches |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (clients, size), r in results.items():
        print(
            f"| {clients} | {size} | {r['pairs_per_second']:.1f} | "
            f"{r['pairs_per_second'] / baseline:.2f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
            f"{r['pairs_per_window']:.1f} | {r['requests_per_window']:.1f} | "
            f"{r['model_batches']} |"
        )
    for size in sorted({size for _, size in results}):
        if (32, size) in results:
            print(
                f"ratio at 32 clients, {size} pair(s) per request: "
                f"{results[32, size]['pairs_per_second'] / baseline:.2f} (goal >= 0.8)"
            )


if __name__ == "__main__":
    sys.exit(main())
