"""ruff (configured in pyproject.toml) finds nothing to say about the files already clean.

The tree is made clean file by file, not in one sweep: `CLEAN_PATHS` lists what is clean now,
and a file joins it once `ruff check` and `ruff format --check` pass on it.
"""

from __future__ import annotations

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAN_PATHS = (
    "bench/render_results.py",
    "docs/hooks.py",
    "tests/test_bench_results.py",
    "tests/test_docs.py",
    "tests/test_lint.py",
    "tests/test_readme.py",
    "tests/test_wheel.py",
)


def ruff(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *arguments, "--no-cache", *CLEAN_PATHS],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )


def test_clean_paths_exist():
    missing = [path for path in CLEAN_PATHS if not os.path.exists(os.path.join(REPO_ROOT, path))]
    assert not missing, f"CLEAN_PATHS names files that are gone: {missing}"


def test_ruff_check_passes():
    result = ruff("check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_check_passes():
    result = ruff("format", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
