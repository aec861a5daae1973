"""Exact resume: a run killed mid-way and restarted ends bit-identical to an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fixtures import train_utils

STEPS = 60
EVERY = 10


SETTINGS = {
    "TrainConfig.train_steps": STEPS,
    "TrainConfig.checkpoint_every": EVERY,
    "TrainConfig.eval_every": 25,
    "TrainConfig.keep_checkpoints": 2,
}


def _command(model_dir, sample):
    bindings = train_utils.sample_bindings(
        str(model_dir), sample["prepared"], sample["cache"], **SETTINGS
    )
    return [
        sys.executable,
        "-m",
        "seahorse_metrics.train",
        "--gin_file=gin/runs/demo.gin",
        *train_utils.bindings_as_flags(bindings),
    ]


def _finished_checkpoints(model_dir) -> list[int]:
    directory = os.path.join(model_dir, "checkpoints")
    if not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def _kill_after_first_checkpoint(command, model_dir, env, timeout=400.0) -> int:
    """Starts the run and SIGKILLs it as soon as its first checkpoint is complete."""
    process = subprocess.Popen(
        command,
        cwd=train_utils.REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + timeout
    try:
        while not _finished_checkpoints(model_dir):
            if process.poll() is not None:
                raise AssertionError(
                    f"the run ended before its first checkpoint:\n{process.stderr.read()[-4000:]}"
                )
            if time.time() > deadline:
                raise AssertionError("no checkpoint appeared in time")
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        return process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
def test_killed_run_resumes_to_bit_identical_parameters(train_sample, tmp_path):
    sample = train_sample
    env = train_utils.child_env_with_cache(sample["xla_cache"])
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    # The uninterrupted run, in a child like the others: this test process's
    # JAX may have started under other tests' settings (devices, ISA caps).
    train_utils.run_python(_command(reference, sample)[1:], env)

    assert (
        _kill_after_first_checkpoint(_command(crashed, sample), str(crashed), env)
        == -signal.SIGKILL
    )
    saved = _finished_checkpoints(str(crashed))
    assert saved and saved[-1] < STEPS, saved  # killed mid-run
    resumed = train_utils.run_python(_command(crashed, sample)[1:], env)
    assert f"Resuming from step {saved[-1]}" in resumed.stderr

    expected = train_utils.checkpoint_params(str(reference), STEPS)
    actual = train_utils.checkpoint_params(str(crashed), STEPS)
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        assert np.array_equal(value, actual[name]), name
    # The losses after the restart repeat the uninterrupted run's exactly, and
    # both runs kept the same best checkpoint.
    reference_losses = train_utils.losses_by_step(str(reference))
    crashed_losses = train_utils.losses_by_step(str(crashed))
    assert all(crashed_losses[s] == reference_losses[s] for s in range(saved[-1] + 1, STEPS + 1))
    assert (
        train_utils.read_log(str(crashed), "validation")[-1]
        == train_utils.read_log(str(reference), "validation")[-1]
    )
    assert len(_finished_checkpoints(str(crashed))) == 2  # keep_checkpoints
