"""The built wheel: installed outside the checkout, the README's Quick start works with it.

Issue 45 point 6: `train --gin_file=runs/demo.gin` works after a plain (non-editable) install,
from a directory that is not the checkout. Issue 46: the same for the lowest and the highest
Python the package claims (`PYTHONS`), with the base dependencies only (no torch): the README's
Quick start blocks that prepare the sample, train a metric and score with it run from an empty
directory against the installed wheel.

One wheel is built per module. Each Python gets the wheel's base dependencies installed once, at
the versions this environment runs (a constraints file), into a cache outside the checkout
(`$SEAHORSE_METRICS_TEST_CACHE`, default `~/.cache/seahorse-metrics-tests`) that every later run
reuses (the first run on a machine downloads them: network, a few minutes); each test's fresh
virtualenv sees them through a path entry. An entry is about 3.4 GB, and another environment's
versions make another entry, so an entry of the same Python unused for `STALE_AFTER_S` is
removed when a new one is made: the cache holds about one entry per Python.
"""

import glob
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from fixtures import paths, train_utils
from test_readme import README, blocks

REPO_ROOT = train_utils.REPO_ROOT
# What the wheel is built from (a copy, so the checkout gets no build/ folder).
SOURCES = ("setup.py", "pyproject.toml", "README.md", "seahorse_metrics", "gin", "tasks")
# The lowest and the highest Python setup.py's python_requires admits, as pyenv installs them.
PYTHONS = {"3.11": "3.11.*", "3.13": "3.13.*"}
CACHE = paths.TEST_CACHE
# An entry (or a cut-short install) untouched this long is no other run's in use.
STALE_AFTER_S = 3600

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    folder = str(tmp_path_factory.mktemp("wheel"))
    source = os.path.join(folder, "source")
    os.makedirs(source)
    for name in SOURCES:
        path = os.path.join(REPO_ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(
                path,
                os.path.join(source, name),
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        else:
            shutil.copy(path, source)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            source,
            "-w",
            os.path.join(folder, "dist"),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (built,) = glob.glob(os.path.join(folder, "dist", "*.whl"))
    return built


def find_python(version: str) -> str:
    """This interpreter when it is `version`, else pyenv's or the PATH's `python<version>`."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys._base_executable  # the interpreter itself, not this virtualenv's link to it
    pattern = os.path.expanduser(f"~/.pyenv/versions/{PYTHONS[version]}/bin/python")
    found = sorted(glob.glob(pattern)) or [shutil.which(f"python{version}")]
    assert found[-1], (
        f"the wheel test needs Python {version}: install it (pyenv install "
        f"{version}) or put python{version} on the PATH"
    )
    return found[-1]


def base_requirements(wheel_path: str) -> list[str]:
    """The wheel's Requires-Dist lines that no extra guards: what `pip install` installs."""
    with zipfile.ZipFile(wheel_path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode("utf-8")
    lines = re.findall(r"^Requires-Dist: (.+)$", metadata, re.M)
    return sorted(line for line in lines if "extra ==" not in line)


def this_environments_versions() -> list[str]:
    """`name==version` of every distribution here: the versions the suite tests."""
    pins = {
        dist.metadata["Name"].lower(): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"]
    }
    pins.pop("seahorse-metrics", None)
    return sorted(f"{name}=={version}" for name, version in pins.items())


def cached_dependencies(python: str, requirements: list[str]) -> str:
    """site-packages holding `requirements` for `python`, installed once per (Python,
    requirements, this environment's versions) and reused."""
    constraints = this_environments_versions()
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    key = hashlib.sha256("\n".join([version, *requirements, *constraints]).encode()).hexdigest()
    env = os.path.join(CACHE, f"deps-py{version}-{key[:16]}")
    if not os.path.isdir(env):
        remove_stale_entries(f"deps-py{version}-")
        staging = env + f".partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        subprocess.run([python, "-m", "venv", staging], check=True, timeout=300)
        with open(os.path.join(staging, "constraints.txt"), "w", encoding="utf-8") as handle:
            handle.write("\n".join(constraints) + "\n")
        done = subprocess.run(
            [
                os.path.join(staging, "bin", "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--prefer-binary",
                "-c",
                os.path.join(staging, "constraints.txt"),
                *requirements,
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, f"installing the base dependencies failed:\n{done.stderr}"
        os.rename(staging, env)  # a cut-short install is never taken for a cache entry
    os.utime(env)  # in use: not stale for another run that prunes
    return site_packages(os.path.join(env, "bin", "python"))


def remove_stale_entries(prefix: str) -> list[str]:
    """Removes the cache's entries (and cut-short installs) named `prefix`... that no run
    has used for `STALE_AFTER_S`; returns their names."""
    if not os.path.isdir(CACHE):
        return []
    stale = [
        name
        for name in sorted(os.listdir(CACHE))
        if name.startswith(prefix)
        and time.time() - os.path.getmtime(os.path.join(CACHE, name)) > STALE_AFTER_S
    ]
    for name in stale:
        shutil.rmtree(os.path.join(CACHE, name), ignore_errors=True)
    return stale


def site_packages(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def fresh_env(folder: str, python: str, wheel_path: str, dependencies: str) -> str:
    """A new virtualenv of `python` with the wheel installed and `dependencies` (a
    site-packages) on its path, so no editable install of the checkout is seen."""
    env = os.path.join(folder, "env")
    subprocess.run([python, "-m", "venv", "--without-pip", env], check=True, timeout=120)
    env_python = os.path.join(env, "bin", "python")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            env_python,
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            wheel_path,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    with open(
        os.path.join(site_packages(env_python), "dependencies.pth"), "w", encoding="utf-8"
    ) as handle:
        handle.write(dependencies + "\n")
    return env


def installed_environment(env: str) -> dict[str, str]:
    """The users' environment for commands of the installed package: its bin/ first, nothing
    of the checkout on PYTHONPATH; XLA compiles at the suite's fast level (what is tested here
    is the package, not the compiler: the demo runs at the users')."""
    environ = train_utils.child_env()
    environ.pop("PYTHONPATH")
    environ["PATH"] = os.path.join(env, "bin") + os.pathsep + environ["PATH"]
    environ["VIRTUAL_ENV"] = env
    return environ


def assert_runs_from_the_wheel(env: str, workdir, environ: dict) -> None:
    where = subprocess.run(
        [
            os.path.join(env, "bin", "python"),
            "-c",
            "import seahorse_metrics, seahorse_metrics.tasks as t; "
            "print(seahorse_metrics.__file__); print(t.__file__)",
        ],
        cwd=workdir,
        env=environ,
        check=True,
        capture_output=True,
        text=True,
    )
    assert all(line.startswith(env) for line in where.stdout.split()), where.stdout


def quick_start_script() -> str:
    """The README's Quick start up to scoring from the command line: its first two `run`
    blocks (the bundled sample prepared, a metric trained on it, the test split scored)."""
    run_blocks = [body for mark, language, body, _ in blocks(README) if mark == "run"]
    assert "seahorse-metrics train" in run_blocks[0] and "seahorse-metrics score" in run_blocks[1]
    return "set -euo pipefail\n" + run_blocks[0] + run_blocks[1]


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_the_readme_quick_start_runs_on_the_installed_wheel(wheel, version, tmp_path):
    """Also issue 45 point 6: its `train --gin_file=runs/demo.gin` finds the shipped gin file."""
    python = find_python(version)
    dependencies = cached_dependencies(python, base_requirements(wheel))
    env = fresh_env(str(tmp_path), python, wheel, dependencies)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    environ = installed_environment(env)
    assert_runs_from_the_wheel(env, workdir, environ)
    no_torch = subprocess.run(
        [os.path.join(env, "bin", "python"), "-c", "import torch"],
        cwd=workdir,
        env=environ,
        capture_output=True,
        text=True,
    )
    assert no_torch.returncode != 0, "torch is not a base dependency"
    result = subprocess.run(
        ["bash", "-c", quick_start_script()],
        cwd=workdir,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    with open(workdir / "scores" / "test.jsonl", encoding="utf-8") as handle:
        rows = handle.read().splitlines()
    assert len(rows) == 1000 and '"q4_score": ' in rows[0]
    assert os.path.isfile(workdir / "runs" / "q4" / "best" / "spiece.model")


def test_a_new_entry_removes_the_same_pythons_stale_entries(tmp_path, monkeypatch):
    """Entries of other Pythons and entries used lately stay."""
    monkeypatch.setattr(sys.modules[__name__], "CACHE", str(tmp_path))
    old = time.time() - STALE_AFTER_S - 60
    for name in ("deps-py3.11.7-aaaa", "deps-py3.11.7-bbbb.partial-12", "deps-py3.13.0-cccc"):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (old, old))
    (tmp_path / "deps-py3.11.7-dddd").mkdir()
    assert remove_stale_entries("deps-py3.11.7-") == [
        "deps-py3.11.7-aaaa",
        "deps-py3.11.7-bbbb.partial-12",
    ]
    assert sorted(os.listdir(tmp_path)) == ["deps-py3.11.7-dddd", "deps-py3.13.0-cccc"]
