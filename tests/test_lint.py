"""ruff (configured in pyproject.toml) finds nothing to say about the repository.

`ruff check --fix` and `ruff format` do most of what it asks mechanically; a function or module
that formatting pushes past test_house.py's size limits is split by meaning, not squeezed.
"""

from __future__ import annotations

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ruff(*arguments: str) -> subprocess.CompletedProcess:
    """ruff over the whole checkout (pyproject.toml excludes what runs generate)."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", *arguments, "--no-cache", "."],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ruff_check_passes():
    result = ruff("check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_check_passes():
    result = ruff("format", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
