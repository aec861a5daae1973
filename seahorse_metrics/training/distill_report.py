"""The table a distillation ends with: teacher against student.

Both models are read as the student learnt: P("1") over {"0", "1"}
(`normalize="pair"`). Per model: parameters, FLOPs per 2048-token pair
(`pair_flops`), examples/s of scoring here (the test split; the teacher,
whose test scores are cached, on its first 256 pairs; after one warm-up
batch compiled the shapes), Spearman with the teacher's scores on the
held-out pairs, and ROC-AUC / Pearson against the human labels of the test
split with bootstrap intervals. Written to MODEL_DIR/distill_report.md and
.json.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Optional

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.io.atomic import write_text_atomically
from seahorse_metrics.training import soft_targets

FLOPS_INPUT_LENGTH = 2048
_RESAMPLES = 1000
_TEACHER_TIMING_PAIRS = 256


def pair_flops(config, input_length: int = FLOPS_INPUT_LENGTH) -> int:
    """Matmul FLOPs (2 per multiply-add) of scoring one pair: the encoder over
    `input_length` tokens and one decoder step with its logits.

    Per encoder layer and token: the four attention projections, the
    attention scores and their weighted sum over `input_length` keys, and the
    gated feed-forward's three matrices. The decoder step adds its own
    self-attention (one position), cross-attention (keys and values of every
    encoder position) and feed-forward, then the output logits.
    """
    d, inner, d_ff = config.d_model, config.num_heads * config.d_kv, config.d_ff
    ff = (3 if config.feed_forward_proj == "gated-gelu" else 2) * d * d_ff
    encoder_token = 4 * d * inner + 2 * input_length * inner + ff
    decoder_step = (
        4 * d * inner
        + 2 * inner  # self-attention over one position
        + 2 * d * inner
        + 2 * input_length * d * inner  # cross q/o, k/v
        + 2 * input_length * inner
        + ff
    )
    macs = (
        config.num_encoder_layers * input_length * encoder_token
        + config.num_decoder_layers * decoder_step
        + d * config.vocab_size
    )
    return int(2 * macs)


def _parameters(params) -> int:
    import jax

    return int(sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params)))


def _timed_scores(scorer, pairs, limit: Optional[int] = None) -> tuple[np.ndarray, float]:
    """Scores of the first `limit` pairs (all when None) and examples/s (the
    shapes compiled by a first, untimed pass)."""
    premises, hypotheses = pairs.premises[:limit], pairs.hypotheses[:limit]
    scorer.score(
        premises[: scorer.batch_size], hypotheses[: scorer.batch_size], show_progress=False
    )
    started = time.perf_counter()
    scores = scorer.score(premises, hypotheses, show_progress=False)
    return np.asarray(scores, np.float64), len(premises) / max(time.perf_counter() - started, 1e-9)


def _human_agreement(test, scores: np.ndarray) -> dict:
    known = ~np.isnan(test.labels)
    labels, used = test.labels[known], scores[known]
    return {
        name: stats.estimate(name, labels, used, n_resamples=_RESAMPLES).to_dict()
        for name in ("roc_auc", "pearson")
    }


def _row(
    name: str,
    path: Optional[str],
    scorer,
    held_out_scores,
    teacher_held_out,
    test,
    test_scores,
    speed,
) -> dict:
    row: dict[str, Any] = {"model": name, "checkpoint": path}
    if scorer is not None:
        config = scorer.model.config
        row.update(
            parameters=_parameters(scorer.params),
            flops_per_pair=pair_flops(config),
            layers=[config.num_encoder_layers, config.num_decoder_layers],
            examples_per_second=round(speed, 2),
        )
    row["spearman_with_teacher"] = float(stats.spearman(held_out_scores, teacher_held_out))
    row.update(_human_agreement(test, test_scores))
    return row


def compare(config, teacher, student_dir: str, held_out, test) -> dict:
    """Teacher and student on the held-out and test pairs.

    Args:
      config: The `DistillConfig`.
      teacher: The run's `distill.TeacherScores` (its cached scores are used;
        a checkpoint teacher is loaded once more to time it).
      student_dir: The student's checkpoint (MODEL_DIR/best).
      held_out: The held-out `distill.Pairs` (Spearman with the teacher).
      test: The test split's `distill.Pairs` (ROC-AUC, Pearson, speed).
    """
    from seahorse_metrics.scoring.single import Scorer

    teacher_held_out, teacher_test = teacher.scores(held_out), teacher.scores(test)
    length = config.train.input_length
    student = Scorer.load(
        student_dir,
        max_input_length=length,
        batch_size=64,
        normalize="pair",
        long_summaries=soft_targets.LONG_SUMMARIES,
    )
    student_held_out = student.score(held_out.premises, held_out.hypotheses, show_progress=False)
    student_test, student_speed = _timed_scores(student, test)
    teacher_scorer, teacher_speed = _timed_teacher(config, teacher, test)
    rows = [
        _row(
            "teacher",
            config.teacher,
            teacher_scorer,
            teacher_held_out,
            teacher_held_out,
            test,
            teacher_test,
            teacher_speed,
        ),
        _row(
            "student",
            student_dir,
            student,
            student_held_out,
            teacher_held_out,
            test,
            student_test,
            student_speed,
        ),
    ]
    return {
        "question": config.question,
        "held_out_pairs": len(held_out),
        "test_pairs": int(np.sum(~np.isnan(test.labels))),
        "rows": rows,
    }


def _timed_teacher(config, teacher, test) -> tuple[Any, float]:
    """A checkpoint teacher loaded once more and its pairs per second on part
    of the test split (its test scores are the cached ones); (None, 0.0) for
    a teacher given as a file of scores."""
    from seahorse_metrics.scoring.single import Scorer

    if teacher.is_file:
        return None, 0.0
    teacher_scorer = Scorer.load(
        config.teacher,
        batch_size=64,
        normalize="pair",
        max_input_length=config.teacher_max_input_length,
        long_summaries=soft_targets.LONG_SUMMARIES,
    )
    _, teacher_speed = _timed_scores(teacher_scorer, test, _TEACHER_TIMING_PAIRS)
    return teacher_scorer, teacher_speed


def _ci(estimate: dict) -> str:
    if estimate["value"] is None:
        return "–"
    if estimate["ci_low"] is None:
        return f"{estimate['value']:.3f}"
    return f"{estimate['value']:.3f} [{estimate['ci_low']:.3f}, {estimate['ci_high']:.3f}]"


def markdown(report: dict) -> str:
    """The comparison as a Markdown table."""
    lines = [
        f"| model | parameters | layers (enc/dec) | GFLOPs per {FLOPS_INPUT_LENGTH}-token "
        "pair | examples/s here | Spearman with teacher (held-out) | ROC-AUC (test) | "
        "Pearson (test) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        sized = "parameters" in row
        lines.append(
            f"| {row['model']} | {row['parameters']:,} | " if sized else f"| {row['model']} | – | "
        )
        lines[-1] += (
            f"{row['layers'][0]}/{row['layers'][1]} | {row['flops_per_pair'] / 1e9:.2f} "
            f"| {row['examples_per_second']:.1f} | "
            if sized
            else "– | – | – | "
        )
        lines[-1] += (
            f"{row['spearman_with_teacher']:.3f} | {_ci(row['roc_auc'])} | {_ci(row['pearson'])} |"
        )
    return "\n".join(lines) + (
        f"\n\nQ{report['question']}; Spearman on {report['held_out_pairs']} held-out validation "
        f"pairs; ROC-AUC and Pearson on {report['test_pairs']} labelled test pairs with 95% "
        "bootstrap intervals; examples/s measured on this machine.\n"
    )


def write(model_dir: str, report: dict, table: str) -> None:
    """MODEL_DIR/distill_report.json and .md, atomically."""
    for name, text in (
        ("distill_report.json", json.dumps(report, indent=1) + "\n"),
        ("distill_report.md", table),
    ):
        write_text_atomically(os.path.join(model_dir, name), text)
