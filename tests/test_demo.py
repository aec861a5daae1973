"""`make demo` end to end, cut short: one question, a few steps."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from seahorse_metrics import demo, tasks

from fixtures import train_utils
from fixtures.compile_speed import as_users_compile


@pytest.fixture(autouse=True)
def _fresh_task_registry():
    """The demo registers the seqio tasks over its own prepared directory;
    leave the registry as other tests expect it."""
    yield
    tasks.unregister()


def test_demo_trains_distils_scores_calibrates_and_reports(tmp_path):
    # As `make demo` runs: its own process, XLA's default optimisation.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "seahorse_metrics.demo",
            "--output_dir",
            str(tmp_path),
            "--questions",
            "4",
            "--gin_bindings",
            "TrainConfig.train_steps = 8",
            "--gin_bindings",
            "TrainConfig.eval_every = 8",
            "--gin_bindings",
            "TrainConfig.eval_max_examples = 50",
            "--distill_bindings",
            "TrainConfig.train_steps = 4",
            "--distill_bindings",
            "DistillConfig.held_out = 50",
            "--distill_bindings",
            "DistillConfig.max_train_pairs = 64",
        ],
        cwd=train_utils.REPO_ROOT,
        env=as_users_compile(train_utils.child_env()),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout
    assert "| Q4 attribution |" in printed and "report.html" in printed
    # The multi-question metric (issue 49): its per-question table and the cost both ways.
    assert "| single metric | multi-question metric |" in printed
    assert "one multi-question metric (6 questions)" in printed
    assert (tmp_path / "metrics" / "multi_question" / "best" / "questions.json").exists()
    assert "| student | " in printed and "| q4_student | " in printed
    for path in (
        "prepared/test.jsonl",
        "metrics/q4/best/spiece.model",
        "scores/test.jsonl",
        "metrics/q4_student/best/spiece.model",
        "metrics/q4_student/distill_report.md",
        "report/report.md",
        "report/report.html",
        "report/calibration.json",
    ):
        assert (tmp_path / path).exists(), path
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    cells = {(cell["metric"], cell["benchmark"]) for cell in report["results"]}
    assert {
        ("q4", "seahorse/q4"),
        ("q4_student", "seahorse/q4"),
        ("rougeL", "seahorse/q4"),
        ("majority", "seahorse/q4"),
    } <= cells
    assert set(report["calibration"]["metrics"]) == {"q4", "q4_student"}
    assert report["calibration"]["fitted_on"]["q4_student"] == [
        f"seahorse:{tmp_path}/prepared:q4,split=validation"
    ]
    scored = [json.loads(line) for line in (tmp_path / "scores" / "test.jsonl").open()]
    assert len(scored) == 1000 and all(0.0 <= row["q4_student"] <= 1.0 for row in scored)


def test_unknown_question_is_refused_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        demo.main(["--output_dir", str(tmp_path), "--questions", "4,7"])
    assert exit_info.value.code == 2
    assert "no question [7]" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
