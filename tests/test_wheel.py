"""The built wheel: installed outside the checkout, it carries the gin files and tasks.

Issue 45 point 6: `train --gin_file=runs/demo.gin` works after a plain
(non-editable) install, from a directory that is not the checkout.
"""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from fixtures import train_utils
from fixtures.compile_speed import as_users_compile

REPO_ROOT = train_utils.REPO_ROOT
# What the wheel is built from (a copy, so the checkout gets no build/ folder).
SOURCES = ("setup.py", "README.md", "seahorse_metrics", "gin", "tasks")


def _build_wheel(folder: str) -> str:
    source = os.path.join(folder, "source")
    os.makedirs(source)
    for name in SOURCES:
        path = os.path.join(REPO_ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, os.path.join(source, name),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, source)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", source, "-w", os.path.join(folder, "dist")],
                   check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = glob.glob(os.path.join(folder, "dist", "*.whl"))
    return wheel


def _fresh_env(folder: str, wheel: str) -> str:
    """A virtualenv with the wheel installed; the dependencies are this
    interpreter's (a path entry, so no editable install of the checkout)."""
    env = os.path.join(folder, "env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True, timeout=120)
    python = os.path.join(env, "bin", "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                    "--no-index", "-q", wheel], check=True, capture_output=True, text=True,
                   timeout=300)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(site, "dependencies.pth"), "w", encoding="utf-8") as handle:
        handle.write(sysconfig.get_path("purelib") + "\n")
    return env


@pytest.mark.slow
def test_the_installed_wheel_trains_from_runs_demo_gin_in_another_directory(train_sample,
                                                                            tmp_path):
    env = _fresh_env(str(tmp_path), _build_wheel(str(tmp_path)))
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    environ = as_users_compile(train_utils.child_env())
    environ.pop("PYTHONPATH")  # The installed package, not the checkout.
    where = subprocess.run([os.path.join(env, "bin", "python"), "-c",
                            "import seahorse_metrics, seahorse_metrics.tasks as t; "
                            "print(seahorse_metrics.__file__); print(t.__file__)"],
                           cwd=workdir, env=environ, check=True, capture_output=True, text=True)
    assert all(line.startswith(env) for line in where.stdout.split()), where.stdout
    model_dir = tmp_path / "model"
    bindings = train_utils.sample_bindings(
        str(model_dir), train_sample["prepared"], train_sample["cache"],
        **{"TrainConfig.train_steps": 2, "TrainConfig.eval_every": 2,
           "TrainConfig.checkpoint_every": 2, "TrainConfig.eval_max_examples": 16})
    result = subprocess.run(
        [os.path.join(env, "bin", "seahorse-metrics"), "train", "--gin_file=runs/demo.gin",
         *train_utils.bindings_as_flags(bindings)],
        cwd=workdir, env=environ, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-4000:]
    assert os.path.isdir(model_dir / "checkpoints" / "2")
    assert [r["step"] for r in train_utils.read_log(str(model_dir))][-1] == 2
