"""`make demo` end to end, cut short: one question, a few steps."""
from __future__ import annotations

import json

import pytest

from seahorse_metrics import demo, tasks


@pytest.fixture(autouse=True)
def _fresh_task_registry():
    """The demo registers the seqio tasks over its own prepared directory;
    leave the registry as other tests expect it."""
    yield
    tasks.unregister()


def test_demo_trains_scores_and_reports(tmp_path, capsys):
    status = demo.main(["--output_dir", str(tmp_path), "--questions", "2",
                        "--gin_bindings", "TrainConfig.train_steps = 8",
                        "--gin_bindings", "TrainConfig.eval_every = 8",
                        "--gin_bindings", "TrainConfig.eval_max_examples = 50"])
    assert status == 0
    printed = capsys.readouterr().out
    assert "| Q2 repetition |" in printed and "report.html" in printed
    for path in ("prepared/test.jsonl", "metrics/q2/best/spiece.model", "scores/test.jsonl",
                 "report/report.md", "report/report.html"):
        assert (tmp_path / path).exists(), path
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    cells = {(cell["metric"], cell["benchmark"]) for cell in report["results"]}
    assert {("q2", "seahorse/q2"), ("rougeL", "seahorse/q2"), ("majority", "seahorse/q2")} <= cells
    scored = [json.loads(line) for line in (tmp_path / "scores" / "test.jsonl").open()]
    assert len(scored) == 1000 and all(0.0 <= row["q2"] <= 1.0 for row in scored)


def test_unknown_question_is_refused_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        demo.main(["--output_dir", str(tmp_path), "--questions", "4,7"])
    assert exit_info.value.code == 2
    assert "no question [7]" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
