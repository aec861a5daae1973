"""What the command line logs (issue 48 point 15): our own progress and warnings by
default; other libraries' INFO lines (Orbax through absl, JAX's backend probing) and the
native libraries' chatter only with -v or --log_level."""

import logging
import os
import subprocess
import sys

import pytest

from seahorse_metrics.cli import logs

from fixtures import paths

REPO_ROOT = paths.REPO


@pytest.fixture
def restored_logging(monkeypatch):
    """The root logger's handlers and the levels `logs.configure` sets, put back after."""
    for name in logs.NATIVE_LOG_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    own = {name: logging.getLogger(name).level for name in logs.OWN_LOGGERS}
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    for name, own_level in own.items():
        logging.getLogger(name).setLevel(own_level)


def test_quiet_by_default_and_everything_with_verbose_or_a_level(restored_logging, monkeypatch):
    # As logging.basicConfig: a program that set up its own logging (here pytest) keeps it.
    root_level = logging.getLogger().level
    logs.configure(None, verbose=0)
    assert logging.getLogger().level == root_level and "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    logs.configure(None, verbose=0, force=True)
    assert not logging.getLogger("absl").isEnabledFor(logging.INFO)
    assert not logging.getLogger("jax._src.xla_bridge").isEnabledFor(logging.INFO)
    assert logging.getLogger("seahorse_metrics.scoring.files").isEnabledFor(logging.INFO)
    assert logging.getLogger("absl").isEnabledFor(logging.WARNING)
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"  # XLA's and TensorFlow's C++ INFO/WARNING
    assert os.environ["TPU_STDERR_LOG_LEVEL"] == "2"  # libtpu's

    for name in logs.NATIVE_LOG_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    logs.configure(None, verbose=1, force=True)
    assert logging.getLogger("absl").isEnabledFor(logging.INFO)
    assert not logging.getLogger("absl").isEnabledFor(logging.DEBUG)
    assert not any(name in os.environ for name in logs.NATIVE_LOG_SETTINGS)

    logs.configure("WARNING", verbose=0, force=True)
    assert not logging.getLogger("seahorse_metrics.scoring.files").isEnabledFor(logging.INFO)
    logs.configure("DEBUG", verbose=0, force=True)
    assert logging.getLogger("absl").isEnabledFor(logging.DEBUG)


def test_a_user_s_native_log_settings_are_kept(restored_logging, monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    logs.configure(None, verbose=0, force=True)
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_uvicorn_s_own_lines_are_not_named_error():
    """uvicorn logs "Uvicorn running on ..." under `uvicorn.error`: a grep for
    errors found every line the service wrote."""
    formatter = logging.Formatter(logs.FORMAT)
    for level, name in (
        (logging.INFO, "uvicorn"),
        (logging.WARNING, "uvicorn"),
        (logging.ERROR, "uvicorn.error"),
    ):
        record = logging.LogRecord(
            "uvicorn.error", level, __file__, 1, "Uvicorn running", None, None
        )
        assert logs.UvicornNames().filter(record)
        assert f" {name}: Uvicorn running" in formatter.format(record)


def _score(tmp_path, checkpoint, before=(), after=()):
    (tmp_path / "in.jsonl").write_text(
        '{"article": "a fox jumps over the dog.", "summary": "a fox jumps."}\n'
    )
    environ = {
        key: value for key, value in os.environ.items() if key not in logs.NATIVE_LOG_SETTINGS
    }
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "seahorse_metrics",
            *before,
            "score",
            "--checkpoint",
            checkpoint,
            "--input",
            str(tmp_path / "in.jsonl"),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--buckets",
            "64",
            "--no_progress",
            "--overwrite",
            *after,
        ],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr
    return process.stderr.splitlines()


def test_a_plain_score_run_prints_only_our_own_lines(tmp_path, tiny_hf_dir):
    from seahorse_metrics.checkpoints import load_checkpoint
    from seahorse_metrics.checkpoints.orbax_io import save_checkpoint

    config, params = load_checkpoint(tiny_hf_dir)
    checkpoint = str(tmp_path / "ours")
    save_checkpoint(checkpoint, config, params, step=1)  # read through Orbax, which logs via absl
    os.symlink(os.path.join(tiny_hf_dir, "spiece.model"), os.path.join(checkpoint, "spiece.model"))
    lines = _score(tmp_path, checkpoint)
    assert lines and all(" seahorse_metrics." in line for line in lines), lines
    assert any("wrote" in line for line in lines)
    # -v (here after the subcommand) brings the other libraries' lines back.
    verbose = _score(tmp_path, checkpoint, after=["-v"])
    assert any(" absl: " in line for line in verbose), verbose
    assert _score(tmp_path, checkpoint, before=["--log_level", "warning"]) == []
