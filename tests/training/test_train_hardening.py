"""Training refuses a wrong resume, survives a damaged checkpoint, logs each step once;
files honour the umask; the demo's gin file works from any directory.

Issue 19's points 2, 7 and 9 for training, on the tiny preset and the
bundled sample (tests/fixtures/train_utils.py).
"""

from __future__ import annotations

import json
import logging
import os

import pytest

from seahorse_metrics.training import config_from_gin
from seahorse_metrics.training.config import BACKBONE_DIR

from fixtures import train_utils

SETTINGS = {
    "TrainConfig.train_steps": 6,
    "TrainConfig.checkpoint_every": 4,
    "TrainConfig.eval_every": 0,
    "TrainConfig.keep_checkpoints": 2,
}


def _largest_file(directory):
    files = [os.path.join(root, name) for root, _, names in os.walk(directory) for name in names]
    return max(files, key=os.path.getsize)


def _mtimes(directory):
    return {
        name: os.stat(os.path.join(directory, name)).st_mtime_ns
        for name in ("config.gin", "train_config.json", "checkpoints")
    }


@pytest.mark.slow
def test_resume_checks_settings_and_falls_back_from_a_damaged_checkpoint(
    train_sample, tmp_path, caplog
):
    model_dir = str(tmp_path / "run")
    train_utils.train_sample_run(model_dir, train_sample, **SETTINGS)
    before = _mtimes(model_dir)

    # Point 2: another task and batch size never resume.
    with pytest.raises(ValueError) as refused:
        train_utils.train_sample_run(
            model_dir,
            train_sample,
            **SETTINGS,
            TASK="seahorse_q1",
            **{"TrainConfig.batch_size": 16},
        )
    message = str(refused.value)
    assert "task: 'seahorse_q4' -> 'seahorse_q1'" in message and "batch_size: 8 -> 16" in message
    assert "cannot resume" in message and "new MODEL_DIR" in message
    # More steps: only when the user says so.
    longer = dict(SETTINGS, **{"TrainConfig.train_steps": 8})
    with pytest.raises(
        ValueError,
        match=r"train_steps: 6 -> 8.*"
        r"--gin.TrainConfig.allow_config_change=True",
    ):
        train_utils.train_sample_run(model_dir, train_sample, **longer)
    assert _mtimes(model_dir) == before  # nothing of the run was touched

    # Point 7: the newest checkpoint is damaged; the run goes back to the one before.
    with open(_largest_file(os.path.join(model_dir, "checkpoints", "6")), "r+b") as handle:
        handle.truncate(16)
    with caplog.at_level(logging.INFO):
        result = train_utils.train_sample_run(
            model_dir, train_sample, **longer, **{"TrainConfig.allow_config_change": True}
        )
    assert "Checkpoint step 6 of" in caplog.text and "cannot be read" in caplog.text
    assert "Resuming from step 4" in caplog.text
    assert os.path.isdir(os.path.join(model_dir, "checkpoints_damaged", "6"))
    assert result.final_step == 8
    assert sorted(
        int(n) for n in os.listdir(os.path.join(model_dir, "checkpoints")) if n.isdigit()
    ) == [4, 8]
    # Point 9: steps 5 and 6 were trained twice but are logged once.
    steps = [r["step"] for r in train_utils.read_log(model_dir, "train")]
    assert steps == list(range(1, 9))
    with open(os.path.join(model_dir, "train_config.json"), encoding="utf-8") as handle:
        assert json.load(handle)["train_steps"] == 8


def test_prepared_files_and_the_data_cache_honour_the_umask(tmp_path):
    from seahorse_metrics.training import ExampleSet

    previous = os.umask(0o022)
    try:
        prepared = train_utils.prepare_sample(str(tmp_path / "prepared"))
        ExampleSet.from_examples([[3, 1]], [[4, 1]], [1]).save(str(tmp_path / "cache" / "s.npz"))
    finally:
        os.umask(previous)
    for path in [os.path.join(prepared, name) for name in os.listdir(prepared)] + [
        str(tmp_path / "cache" / "s.npz")
    ]:
        assert os.stat(path).st_mode & 0o777 == 0o644, path


def test_the_demo_gin_works_outside_the_repository(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO):
        config = config_from_gin(
            ["gin/runs/demo.gin"], ["MODEL_DIR = 'm'", "TASK = 'seahorse_q4'", "DATA_DIR = 'd'"]
        )
    assert config.init_checkpoint == BACKBONE_DIR and os.path.isabs(BACKBONE_DIR)
    assert os.path.isfile(os.path.join(config.init_checkpoint, "model.safetensors"))
    assert "not found" not in caplog.text and not [
        r for r in caplog.records if r.levelno >= logging.ERROR
    ]


def test_gin_files_are_found_by_name_from_any_directory(tmp_path, monkeypatch):
    """Issue 45 point 6: `runs/demo.gin` (the name the wheel's gin files go
    by) and `gin/runs/demo.gin` (the checkout's path) name the same file; an
    unknown name says where it looked."""
    from seahorse_metrics.training.config import GIN_ROOTS, resolve_gin_file

    monkeypatch.chdir(tmp_path)
    by_name = resolve_gin_file("runs/demo.gin")
    assert os.path.samefile(by_name, resolve_gin_file("gin/runs/demo.gin"))
    assert (
        config_from_gin(
            ["runs/demo.gin"], ["MODEL_DIR = 'm'", "TASK = 'seahorse_q4'", "DATA_DIR = 'd'"]
        ).input_length
        == 96
    )
    with pytest.raises(FileNotFoundError, match="runs/nothing.gin.*" + GIN_ROOTS[0]):
        resolve_gin_file("runs/nothing.gin")


HOLD_MODEL_DIR = """\
import sys, time
from seahorse_metrics.training.trainer import model_dir_lock
with model_dir_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


def test_a_second_run_on_a_model_dir_refuses_and_a_killed_runs_lock_is_recovered(
    train_sample, tmp_path
):
    """Issue 29 point 7: the lock train takes on MODEL_DIR. (SETTINGS: the slow
    test above compiled this run's step in this process.)"""
    import subprocess
    import sys

    from seahorse_metrics.io.locks import OutputInUseError

    model_dir = str(tmp_path / "run")
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD_MODEL_DIR, model_dir],
        env=train_utils.child_env(),
        cwd=train_utils.REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().strip() == "locked"
        with pytest.raises(OutputInUseError, match=f"another run \\(PID {first.pid} on "):
            train_utils.train_sample_run(model_dir, train_sample, **SETTINGS)
        assert not os.path.exists(model_dir)  # refused before writing anything
    finally:
        first.kill()  # SIGKILL: no cleanup runs, the lock file stays
        first.wait(timeout=60)
        first.stdout.close()
    with open(model_dir + ".lock", encoding="utf-8") as handle:
        assert f"PID {first.pid} " in handle.read()
    result = train_utils.train_sample_run(model_dir, train_sample, **SETTINGS)
    assert result.final_step == 6
    assert not os.path.exists(model_dir + ".lock")
