"""The score command keeps its compiled programs on disk: a second run on the
same shapes compiles nothing; --no_compilation_cache reads and writes nothing."""

import json
import os
import subprocess
import sys

from seahorse_metrics import compilation_cache

# Counts JAX's own persistent-cache events around one `score` command.
SCRIPT = r"""
import collections, json, sys
import jax
from seahorse_metrics.cli import main as cli_main
events = collections.Counter()
jax.monitoring.register_event_listener(lambda name, **_: events.update([name]))
status = cli_main(sys.argv[1:])
print("EVENTS " + json.dumps({"status": status, **events}))
"""


def _score(tmp_path, checkpoint, output, *flags):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop(compilation_cache.ENV_VAR, None)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")  # the default directory, if one were used
    args = [
        "score",
        "--checkpoint",
        checkpoint,
        "--input",
        str(tmp_path / "in.jsonl"),
        "--output",
        str(tmp_path / output),
        "--buckets",
        "64",
        "--max_input_length",
        "64",
        "--batch_size",
        "4",
        "--no_progress",
        *flags,
    ]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [text for text in done.stdout.splitlines() if text.startswith("EVENTS ")][-1]
    return json.loads(line[len("EVENTS ") :])


def _entries(directory):
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def test_second_score_run_reads_every_program_from_the_cache(tmp_path, tiny_hf_dir):
    rows = [
        {"article": f"the council met on day {i} and spoke", "summary": "they met"}
        for i in range(6)
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache = str(tmp_path / "cache")
    hit, miss = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"

    first = _score(tmp_path, tiny_hf_dir, "first.jsonl", "--compilation_cache", cache)
    written = _entries(cache)
    assert first[miss] > 0 and written
    second = _score(tmp_path, tiny_hf_dir, "second.jsonl", "--compilation_cache", cache)
    assert second.get(miss, 0) == 0 and second[hit] == first[miss]
    assert _entries(cache) == written
    assert (tmp_path / "first.jsonl").read_text() == (tmp_path / "second.jsonl").read_text()

    off = _score(
        tmp_path, tiny_hf_dir, "off.jsonl", "--compilation_cache", cache, "--no_compilation_cache"
    )
    assert off.get(hit, 0) == 0 and off.get(miss, 0) == 0 and _entries(cache) == written
    # No compiled program went to the default directory (other caches may live beside it).
    assert not os.path.exists(tmp_path / "xdg" / "seahorse-metrics" / "jax")


def test_directory_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(compilation_cache.ENV_VAR, raising=False)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    assert compilation_cache.resolve_directory() == str(
        tmp_path / "xdg" / "seahorse-metrics" / "jax"
    )
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/jax/own")
    assert compilation_cache.resolve_directory() == "/jax/own"
    monkeypatch.setenv(compilation_cache.ENV_VAR, "/ours")
    assert compilation_cache.resolve_directory() == "/ours"
    assert compilation_cache.resolve_directory("/flag") == "/flag"
    monkeypatch.setenv(compilation_cache.ENV_VAR, "off")
    assert compilation_cache.resolve_directory() is None
