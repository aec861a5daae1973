"""Distillation: the soft-label loss, a tiny student learning a teacher, the
teacher-score cache, and exact resume of a killed run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seahorse_metrics import stats
from seahorse_metrics.training import distill, soft_targets
from seahorse_metrics.training.config import BACKBONE_DIR

from fixtures import train_utils

STEPS, EVERY = 40, 20
SIZES = {"train": 160, "validation": 64, "test": 64}


def _bindings(model_dir, prepared, **overrides):
    values = {
        "MODEL_DIR": repr(str(model_dir)),
        "DATA_DIR": repr(prepared),
        "TEACHER": repr(BACKBONE_DIR),
        "INIT_CHECKPOINT": repr(BACKBONE_DIR),
        "STUDENT_LAYERS": "(1, 1)",
        "TrainConfig.model": "'tiny'",
        "TrainConfig.input_length": 64,
        "TrainConfig.batch_size": 16,
        "TrainConfig.train_steps": STEPS,
        "TrainConfig.eval_every": EVERY,
        "TrainConfig.checkpoint_every": EVERY,
        "TrainConfig.log_every": EVERY,
        "TrainConfig.eval_batch_size": 32,
        "TrainConfig.dropout_rate": 0.0,
        "TrainConfig.keep_checkpoints": 2,
        "OptimizerConfig.learning_rate": 3e-3,
        "DistillConfig.held_out": SIZES["validation"],
        "DistillConfig.teacher_max_input_length": 64,
        **overrides,
    }
    return [f"{name} = {value}" for name, value in values.items()]


@pytest.fixture(scope="module")
def prepared(train_sample, tmp_path_factory):
    """The first pairs of the prepared sample's splits."""
    full = train_sample["prepared"]
    subset = tmp_path_factory.mktemp("distill_data") / "prepared"
    subset.mkdir()
    for split, count in SIZES.items():
        with open(os.path.join(full, f"{split}.jsonl"), encoding="utf-8") as handle:
            lines = handle.readlines()[:count]
        (subset / f"{split}.jsonl").write_text("".join(lines), encoding="utf-8")
    return str(subset)


@pytest.fixture(scope="module")
def reference(prepared, tmp_path_factory):
    """An uninterrupted distillation of the sample backbone into its first layers."""
    model_dir = tmp_path_factory.mktemp("distill") / "reference"
    result = distill.distill_from_gin(["gin/runs/distill.gin"], _bindings(model_dir, prepared))
    return model_dir, result


# ------------------------------------------------------------------ the loss


def test_soft_target_loss_and_gradient_equal_a_direct_computation():
    rng = np.random.default_rng(0)
    rows, vocab = 5, 11
    logits = rng.normal(0, 2, (rows, vocab)).astype(np.float32)
    targets = rng.uniform(size=rows).astype(np.float32)
    ids = np.tile([7, 3], (rows, 1)).astype(np.int32)
    temperature = np.full(rows, 2.0, np.float32)
    weights = np.array([1, 1, 1, 1, 0], np.float32)  # the last row is padding

    def direct(z):
        scaled = z / 2.0
        log_p = scaled - np.log(np.exp(scaled).sum(-1, keepdims=True))
        ce = -(targets * log_p[:, 7] + (1 - targets) * log_p[:, 3]) * 4.0
        return (ce * weights).sum() / weights.sum()

    def loss(z):
        return soft_targets.soft_target_cross_entropy(
            z,
            jnp.asarray(targets),
            jnp.asarray(ids),
            jnp.asarray(temperature),
            jnp.asarray(weights),
        )[0]

    assert float(loss(jnp.asarray(logits))) == pytest.approx(
        direct(logits.astype(np.float64)), rel=1e-5
    )
    # d loss / d z = T / n * (softmax(z / T) - target distribution), zero on padding.
    p = np.exp(logits / 2.0) / np.exp(logits / 2.0).sum(-1, keepdims=True)
    wanted = np.zeros_like(p)
    wanted[:, 7], wanted[:, 3] = targets, 1 - targets
    expected = 2.0 / 4 * (p - wanted) * weights[:, None]
    np.testing.assert_allclose(jax.grad(loss)(jnp.asarray(logits)), expected, atol=1e-6)
    # Targets: the teacher's log-odds / T, mixed with a known human label.
    mixed = soft_targets.mixed_targets(np.array([0.9, 0.9]), np.array([0.0, np.nan]), 2.0, 0.25)
    tempered = 1 / (1 + np.exp(-np.log(9) / 2))
    np.testing.assert_allclose(mixed, [0.75 * tempered, tempered], rtol=1e-6)


def test_pairs_files_are_read_by_glob_and_rows_without_texts_counted(tmp_path, caplog):
    (tmp_path / "part-1.jsonl").write_text(
        json.dumps({"article": "a1", "summary": "s1"})
        + "\n"
        + json.dumps({"article": "a2", "summary": ""})
        + "\n",
        encoding="utf-8",
    )
    (tmp_path / "part-2.csv").write_text("article,summary\na3,s3\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        pairs = distill.read_pair_files([str(tmp_path / "part-*")])
    assert (pairs.premises, pairs.hypotheses) == (["a1", "a3"], ["s1", "s3"])
    assert np.isnan(pairs.labels).all() and pairs.ids[1].endswith("part-2.csv:2")
    assert "1 rows without article and summary were skipped" in caplog.text
    with pytest.raises(FileNotFoundError, match="--pairs .*missing"):
        distill.read_pair_files([str(tmp_path / "missing*.jsonl")])


# ------------------------------------------------------------------ a run


def test_student_agrees_with_the_teacher_better_than_its_initialisation(reference, prepared):
    from seahorse_metrics.scoring.single import Scorer

    model_dir, result = reference
    held_out = distill.first(distill.read_split(prepared, "validation", 4), SIZES["validation"])
    teacher = distill.TeacherScores(
        BACKBONE_DIR,
        str(model_dir / "teacher"),
        distill.config_from_gin(["gin/runs/distill.gin"], _bindings(model_dir, prepared)),
    )
    teacher_scores = teacher.scores(held_out)
    assert teacher.scored == 0  # every held-out pair came from the run's cache

    def agreement(checkpoint):
        scorer = Scorer.load(
            checkpoint,
            max_input_length=64,
            normalize="pair",
            long_summaries=soft_targets.LONG_SUMMARIES,
        )
        return stats.spearman(scorer.score(held_out.premises, held_out.hypotheses), teacher_scores)

    initial = agreement(str(model_dir / distill.STUDENT_INIT_DIR))
    trained = agreement(result.train.best_checkpoint)
    assert trained > initial + 0.05, (initial, trained)
    best = json.loads((model_dir / "best" / "best.json").read_text())
    assert best["metric"] == soft_targets.AGREEMENT
    assert best["metrics"][soft_targets.AGREEMENT] == pytest.approx(trained, abs=1e-3)
    # The student is an ordinary metric directory with the layers it was cut to.
    (student,) = result.report["rows"][1:]
    assert student["layers"] == [1, 1] and result.report["rows"][0]["layers"] == [3, 1]
    assert student["flops_per_pair"] < result.report["rows"][0]["flops_per_pair"]
    assert student["spearman_with_teacher"] == pytest.approx(trained, abs=1e-3)
    assert (
        student["roc_auc"]["ci_low"] <= student["roc_auc"]["value"] <= student["roc_auc"]["ci_high"]
    )
    table = (model_dir / "distill_report.md").read_text()
    assert table == result.table and "| student | " in table and "GFLOPs per 2048-token" in table


def test_cached_teacher_scores_are_never_recomputed(reference, prepared, tmp_path):
    model_dir, result = reference
    config = distill.config_from_gin(["gin/runs/distill.gin"], _bindings(model_dir, prepared))
    pairs = distill.read_split(prepared, "train", 4)
    cache = tmp_path / "teacher"
    cache.mkdir()
    lines = (model_dir / "teacher" / "scores.jsonl").read_text().splitlines(keepends=True)
    # An interrupted write: 100 whole entries, then half a line.
    (cache / "scores.jsonl").write_text("".join(lines[:100]) + lines[100][:20])
    (cache / distill.TEACHER_RECORD).write_text(
        (model_dir / "teacher" / distill.TEACHER_RECORD).read_text()
    )
    asked = []
    teacher = distill.TeacherScores(BACKBONE_DIR, str(cache), config)
    teacher._score = lambda premises, hypotheses: (
        asked.extend(hypotheses) or np.full(len(premises), 0.5)
    )
    scores = teacher.scores(pairs)
    cached = {json.loads(line)["key"] for line in lines[:100]}
    assert len(asked) == teacher.scored == len({k for k in pairs.keys() if k not in cached})
    assert result.teacher_scored == len(lines)  # the reference run scored each pair once
    again = distill.TeacherScores(BACKBONE_DIR, str(cache), config)
    again._score = lambda *_: pytest.fail("a cached pair was scored again")
    np.testing.assert_array_equal(again.scores(pairs), scores)
    # A scores file as teacher: every pair needs a score in it.
    scores_file = tmp_path / "teacher.jsonl"
    scores_file.write_text(
        "".join(
            json.dumps({"article": p, "summary": h, "score": 0.25}) + "\n"
            for p, h in zip(pairs.premises[:5], pairs.hypotheses[:5])
        )
    )
    from_file = distill.TeacherScores(str(scores_file), str(tmp_path / "unused"), config)
    assert list(from_file.scores(distill.first(pairs, 5))) == [0.25] * 5
    with pytest.raises(ValueError, match=r"teacher\.jsonl has no 'score' for 1 of the 6 pairs"):
        from_file.scores(distill.first(pairs, 6))


def _checkpoints(model_dir) -> list[int]:
    directory = os.path.join(model_dir, "checkpoints")
    return (
        sorted(int(n) for n in os.listdir(directory) if n.isdigit())
        if os.path.isdir(directory)
        else []
    )


@pytest.mark.slow
def test_a_killed_distillation_resumes_exactly(reference, prepared, train_sample, tmp_path):
    model_dir, _ = reference
    crashed = tmp_path / "crashed"
    flags = [f"--gin.{b.replace(' = ', '=', 1)}" for b in _bindings(crashed, prepared)]
    command = [
        sys.executable,
        "-m",
        "seahorse_metrics",
        "distill",
        "--gin_file=gin/runs/distill.gin",
        *flags,
    ]
    env = train_utils.child_env_with_cache(train_sample["xla_cache"])  # shared compilations
    process = subprocess.Popen(
        command,
        cwd=train_utils.REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 300
    try:
        while not _checkpoints(crashed):
            assert process.poll() is None, process.stderr.read()[-3000:]
            assert time.time() < deadline, "no checkpoint in time"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
    assert _checkpoints(crashed)[-1] < STEPS
    resumed = train_utils.run_python(command[1:], env)
    assert f"Resuming from step {_checkpoints(crashed)[0]}" in resumed.stderr
    expected = train_utils.checkpoint_params(str(model_dir), STEPS)
    actual = train_utils.checkpoint_params(str(crashed), STEPS)
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        assert np.array_equal(value, actual[name]), name
    # A MODEL_DIR distilled with other settings is refused.
    with pytest.raises(ValueError, match="holds a distillation with other settings"):
        distill.distill_from_gin(
            ["gin/runs/distill.gin"],
            _bindings(crashed, prepared, **{"DistillConfig.temperature": 2.0}),
        )


# ------------------------------------------------------------------ resuming safely
# These need no prepared data: each run is refused before it reads any.


def _copy_teacher(path) -> str:
    import shutil

    shutil.copytree(BACKBONE_DIR, path)
    return str(path)


def _replace_teacher(path) -> None:
    """Another metric at the same path: its config differs (sizes and times may not)."""
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(dict(config, dropout_rate=0.2)))


def _few_pairs(count: int) -> distill.Pairs:
    return distill.Pairs(
        [f"article {i}" for i in range(count)],
        [f"summary {i}" for i in range(count)],
        np.full(count, np.nan),
        [f"pair:{i}" for i in range(count)],
    )


def test_a_teacher_replaced_at_the_same_path_is_refused_not_mixed(tmp_path):
    """Issue 48 point 2: the cache is tied to the teacher's content."""
    teacher = tmp_path / "teacher_checkpoint"
    _copy_teacher(teacher)
    config = distill.config_from_gin(
        ["gin/runs/distill.gin"],
        _bindings(tmp_path / "student", str(tmp_path / "prepared"), TEACHER=repr(str(teacher))),
    )
    cache = tmp_path / "student" / distill.TEACHER_DIR
    killed = distill.TeacherScores(str(teacher), str(cache), config)
    killed._score = lambda premises, hypotheses: np.full(len(premises), 0.25)
    killed.scores(_few_pairs(3))  # a run killed once the cache had rows
    again = distill.TeacherScores(str(teacher), str(cache), config)
    again._score = lambda *_: pytest.fail("a cached pair was scored again")
    np.testing.assert_array_equal(again.scores(_few_pairs(3)), [0.25] * 3)
    _replace_teacher(teacher)
    with pytest.raises(
        ValueError,
        match=r"scores\.jsonl holds scores of another teacher .*"
        r"content.*remove .*teacher to score",
    ):
        distill.TeacherScores(str(teacher), str(cache), config)
    (cache / distill.TEACHER_RECORD).unlink()  # as an earlier version left its cache
    with pytest.raises(ValueError, match=r"holds scores without a teacher\.json"):
        distill.TeacherScores(str(teacher), str(cache), config)
    # `distill` refuses the MODEL_DIR before it reads the cache.
    model_dir = tmp_path / "student"
    first = tmp_path / "first"
    _copy_teacher(first)
    config = distill.config_from_gin(
        ["gin/runs/distill.gin"],
        _bindings(model_dir, str(tmp_path / "prepared"), TEACHER=repr(str(first))),
    )
    distill.check_resume(config)
    _replace_teacher(first)
    with pytest.raises(
        ValueError,
        match=r"holds a distillation with other settings "
        r"\(DistillConfig\.teacher_content: 'sha256:",
    ):
        distill.check_resume(config)


def test_a_resume_with_another_init_checkpoint_is_refused_in_one_line(tmp_path, capsys):
    """Issue 48 point 9: killed before its first checkpoint, with its student cut."""
    from seahorse_metrics.cli import main as cli_main

    model_dir, data_dir = tmp_path / "student", str(tmp_path / "prepared")
    distill.check_resume(
        distill.config_from_gin(["gin/runs/distill.gin"], _bindings(model_dir, data_dir))
    )
    (model_dir / distill.STUDENT_INIT_DIR).mkdir()
    other = _copy_teacher(tmp_path / "other_init")

    def run(**overrides) -> tuple[int, list[str]]:
        flags = [
            f"--gin.{b.replace(' = ', '=', 1)}" for b in _bindings(model_dir, data_dir, **overrides)
        ]
        status = cli_main(["distill", "--gin_file=gin/runs/distill.gin", *flags])
        return status, [
            line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")
        ]

    status, errors = run(**{"TrainConfig.init_checkpoint": repr(other)})
    assert status == 2 and len(errors) == 1, errors
    assert (
        "holds a distillation with other settings (TrainConfig.init_checkpoint: "
        f"'{BACKBONE_DIR}' -> '{other}')" in errors[0]
    )
    # A setting a resume may change needs allow_config_change, as `train` asks.
    status, errors = run(**{"TrainConfig.train_steps": STEPS + 20})
    assert status == 2 and "TrainConfig.allow_config_change=True" in errors[0]
    # Nothing done yet in MODEL_DIR: the new settings are simply recorded.
    (model_dir / distill.STUDENT_INIT_DIR).rmdir()
    changed = distill.config_from_gin(
        ["gin/runs/distill.gin"],
        _bindings(model_dir, data_dir, **{"TrainConfig.init_checkpoint": repr(other)}),
    )
    distill.check_resume(changed)
    saved = json.loads((model_dir / distill.DISTILL_CONFIG_JSON).read_text())
    assert saved["train"]["init_checkpoint"] == other


def test_a_second_distillation_on_a_model_dir_gets_the_lock_refusal(tmp_path):
    """Issue 48 point 11: the lock `train` takes, from before anything is written."""
    from seahorse_metrics.io.locks import OutputInUseError
    from seahorse_metrics.training import trainer

    model_dir = tmp_path / "student"
    config = distill.config_from_gin(
        ["gin/runs/distill.gin"], _bindings(model_dir, str(tmp_path / "prepared"))
    )
    with trainer.model_dir_lock(str(model_dir)):
        with pytest.raises(OutputInUseError, match=f"another run \\(PID {os.getpid()} on "):
            distill.distill(config)
    assert not model_dir.exists()
