"""The launch/ scripts: one host, and two processes on this machine standing in
for a SLURM job and a TPU pod (jax.distributed on 127.0.0.1), which must
reproduce the one-process losses."""

from __future__ import annotations

import os
import random

import pytest

from fixtures import train_utils

STEPS = 4


@pytest.fixture(scope="module")
def setup(train_sample, tmp_path_factory):
    root = tmp_path_factory.mktemp("launch")
    return {
        **train_sample,
        "root": root,
        "bin": train_utils.write_fake_launchers(str(root / "bin")),
    }


def _train_flags(setup, model_dir):
    bindings = train_utils.sample_bindings(
        str(model_dir),
        setup["prepared"],
        setup["cache"],
        **{
            "TrainConfig.train_steps": STEPS,
            "TrainConfig.eval_every": STEPS,
            "TrainConfig.checkpoint_every": STEPS,
        },
    )
    return ["--gin_file=gin/runs/demo.gin", *train_utils.bindings_as_flags(bindings)]


def _env(setup, **extra):
    env = train_utils.child_env_with_cache(setup["xla_cache"], extra=extra)
    env["PATH"] = setup["bin"] + os.pathsep + env["PATH"]
    env["PYTHON"] = train_utils.sys.executable
    return env


@pytest.fixture(scope="module")
def reference(setup):
    """The one-process run, in this process (the same program as a child's)."""
    model_dir = setup["root"] / "reference"
    train_utils.train_sample_run(
        str(model_dir),
        setup,
        **{
            "TrainConfig.train_steps": STEPS,
            "TrainConfig.eval_every": STEPS,
            "TrainConfig.checkpoint_every": STEPS,
        },
    )
    return model_dir


def _assert_same_run(model_dir, reference_dir):
    losses, reference = (
        train_utils.losses_by_step(str(model_dir)),
        train_utils.losses_by_step(str(reference_dir)),
    )
    assert sorted(losses) == list(range(1, STEPS + 1))
    for step, loss in reference.items():
        assert losses[step] == pytest.approx(loss, rel=1e-5), step
    validation = train_utils.read_log(str(model_dir), "validation")[-1]
    assert validation["roc_auc"] == pytest.approx(
        train_utils.read_log(str(reference_dir), "validation")[-1]["roc_auc"], abs=1e-6
    )
    assert os.path.exists(os.path.join(model_dir, "best", "seahorse_config.json"))
    assert os.path.isdir(os.path.join(model_dir, "checkpoints", str(STEPS)))


@pytest.mark.slow
def test_single_host_script_trains_and_names_the_best_checkpoint(setup, reference, tmp_path):
    model_dir = tmp_path / "single"
    result = train_utils.run_script(
        ["launch/single_host.sh", *_train_flags(setup, model_dir)], _env(setup)
    )
    assert f"Best checkpoint: {model_dir / 'best'} (step {STEPS}" in result.stdout
    assert "Process 0 of 1" in result.stderr
    _assert_same_run(model_dir, reference)


@pytest.mark.slow
def test_slurm_script_with_two_processes_matches_one(setup, reference, tmp_path):
    model_dir = tmp_path / "slurm"
    env = _env(
        setup,
        SLURM_JOB_ID=str(random.randint(1, 10**6)),
        SLURM_NTASKS="2",
        SLURM_STEP_NODELIST="127.0.0.1",
        SLURM_SUBMIT_DIR=train_utils.REPO_ROOT,
    )
    result = train_utils.run_script(
        ["launch/slurm_gpu.sbatch", *_train_flags(setup, model_dir)], env
    )
    assert "Process 0 of 2" in result.stderr and "Process 1 of 2" in result.stderr
    _assert_same_run(model_dir, reference)


@pytest.mark.slow
def test_tpu_pod_script_with_two_workers_matches_one(setup, reference, tmp_path):
    model_dir = tmp_path / "tpu"
    env = _env(
        setup,
        TPU_NAME="test-pod",
        ZONE="local",
        REPO_DIR=train_utils.REPO_ROOT,
        JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{train_utils.free_port()}",
        JAX_NUM_PROCESSES="2",
    )
    result = train_utils.run_script(["launch/tpu_pod.sh", *_train_flags(setup, model_dir)], env)
    assert "Process 1 of 2" in result.stderr
    _assert_same_run(model_dir, reference)
