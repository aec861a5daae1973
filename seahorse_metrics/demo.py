"""`make demo`: the whole story on the bundled synthetic sample, offline.

    python -m seahorse_metrics.demo [--output_dir demo_output]

1. prepares the sample's SEAHORSE-format release with its local articles
   (`seahorse-metrics prepare`);
2. fine-tunes one tiny metric per question with `gin/runs/demo.gin`, starting
   from the sample's backbone (a tiny mT5-shaped model pretrained without
   labels by `python -m demo_data.backbone`, shipped as a Hugging Face
   directory), as a real run fine-tunes `google/mt5-large`
   (`seahorse-metrics train`);
   then one multi-question metric for all six questions (the question a
   decoder prefix, `training.multi_question`) with the same steps per
   question, and prints its validation ROC-AUC per question next to the
   single metrics' and what scoring all six costs both ways;
3. distils the Q4 metric into a student with fewer layers (its first two encoder
   layers and its decoder) on the sample's pairs, with `gin/runs/distill_demo.gin`
   (`seahorse-metrics distill`), and prints the teacher/student table;
4. scores the validation and test splits with all metrics at once
   (`seahorse-metrics score`);
5. meta-evaluates them against the ratings, next to the majority-class and
   ROUGE-L baselines, with each metric's calibration map (temperature
   scaling) fitted on its question's validation split, and writes report.md /
   report.html / report.json and calibration.json (`seahorse-metrics evaluate
   --calibrate_on`).

Every step is the library call behind the command named after it, so the
demo's output directory looks like a real run's. Running it again resumes:
finished trainings and scorings are reused.

The sample is SYNTHETIC (see seahorse_metrics/data/sample/README.md); its
numbers show that the pipeline learns, not how good a metric is.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Optional, Sequence

from seahorse_metrics.data.records import QUESTION_NAMES, QUESTIONS
from seahorse_metrics.io.atomic import write_atomically

logger = logging.getLogger("seahorse_metrics.demo")

SAMPLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample")
DEMO_GIN = "gin/runs/demo.gin"
DISTILL_GIN = "gin/runs/distill_demo.gin"
STUDENT = "q4_student"
# What the demo's metrics must reach on the synthetic test split (ROC-AUC):
# the questions whose signal is in the summary alone, and those that need the
# article.
TARGET_AUC = {1: 0.85, 2: 0.85, 3: 0.85, 4: 0.75, 5: 0.75, 6: 0.75}
BASELINES = {"majority": "baseline:majority", "rougeL": "baseline:rougeL"}


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.time()


def prepare_sample(output_dir: str) -> str:
    from seahorse_metrics.data.articles import make_article_source
    from seahorse_metrics.data.prepare import prepare

    prepared = os.path.join(output_dir, "prepared")
    source = make_article_source(
        "local", path=os.path.join(SAMPLE_DIR, "seahorse", "articles.jsonl")
    )
    report = prepare(os.path.join(SAMPLE_DIR, "seahorse"), source, prepared)
    for split, counts in report["splits"].items():
        print(
            f"  {split}: {counts['rows_written']} rows written, "
            f"{sum(counts['rows_dropped'].values())} dropped",
            flush=True,
        )
    return prepared


def train_metrics(
    output_dir: str,
    prepared: str,
    questions: Sequence[int],
    extra_bindings: Sequence[str] = (),
    validation: Optional[dict] = None,
) -> dict[int, str]:
    """Fine-tunes one metric per question; returns question -> best checkpoint
    (and fills `validation`: question -> its best validation ROC-AUC)."""
    from seahorse_metrics.training import trainer

    best = {}
    validation = validation if validation is not None else {}
    for question in questions:
        started = time.time()
        model_dir = os.path.join(output_dir, "metrics", f"q{question}")
        bindings = [
            f"MODEL_DIR = '{model_dir}'",
            f"TASK = 'seahorse_q{question}'",
            f"DATA_DIR = '{prepared}'",
            *extra_bindings,
        ]
        result = trainer.train_from_gin([DEMO_GIN], bindings)
        if result.best_checkpoint is None:
            raise RuntimeError(f"training q{question} kept no best checkpoint ({model_dir})")
        auc = validation[question] = (result.best_metrics or {}).get("roc_auc")
        print(
            f"  q{question} {QUESTION_NAMES[question]}: best validation ROC-AUC "
            f"{auc:.3f} at step {result.best_step} ({time.time() - started:.0f} s)",
            flush=True,
        )
        best[question] = result.best_checkpoint
    return best


def train_multi_question(
    output_dir: str, prepared: str, questions: Sequence[int], extra_bindings: Sequence[str] = ()
):
    """Fine-tunes one multi-question metric for the six questions with the
    single metrics' steps per question (`len(questions)` times their steps,
    validation and checkpoint periods); returns the run's `TrainResult`."""
    from seahorse_metrics.training import config_from_gin, trainer
    from seahorse_metrics.training.multi_question import MULTI_QUESTION_TASK

    model_dir = os.path.join(output_dir, "metrics", "multi_question")
    bindings = [
        f"MODEL_DIR = '{model_dir}'",
        f"TASK = '{MULTI_QUESTION_TASK}'",
        f"DATA_DIR = '{prepared}'",
        *extra_bindings,
    ]
    single = config_from_gin([DEMO_GIN], bindings)
    scaled = [
        f"TrainConfig.{name} = {getattr(single, name) * len(questions)}"
        for name in ("train_steps", "eval_every", "checkpoint_every")
    ]
    # Room for the longest question prefix, the label and EOS.
    result = trainer.train_from_gin(
        [DEMO_GIN], bindings + scaled + ["TrainConfig.target_length = 16"]
    )
    if result.best_checkpoint is None:
        raise RuntimeError(
            f"training the multi-question metric kept no best checkpoint ({model_dir})"
        )
    return result


def multi_question_table(single: dict[int, Optional[float]], multi: dict) -> str:
    """Validation ROC-AUC per question: the single metrics' against the
    multi-question metric's (`roc_auc_q<n>` of its best checkpoint)."""
    lines = [
        "| question | single metric | multi-question metric | difference |",
        "|---|---|---|---|",
    ]
    for q in QUESTIONS:
        ours, theirs = multi.get(f"roc_auc_q{q}"), single.get(q)
        cells = [f"{v:.3f}" if v is not None else "n/a" for v in (theirs, ours)]
        difference = f"{ours - theirs:+.3f}" if None not in (ours, theirs) else "n/a"
        lines.append(f"| Q{q} {QUESTION_NAMES[q]} | {cells[0]} | {cells[1]} | {difference} |")
    return "\n".join(lines)


def scoring_cost(
    prepared: str, singles: dict[str, str], multi_question: str, pairs: int = 256
) -> str:
    """Seconds to score `pairs` test pairs on every question both ways: the
    single metrics (one encoder pass each) and the multi-question metric
    (one pass for all six), each timed after a warm-up call."""
    from seahorse_metrics.io.json_files import json_object
    from seahorse_metrics.scoring.scorer import MultiScorer

    with open(os.path.join(prepared, "test.jsonl"), encoding="utf-8") as handle:
        rows = [json_object(line)[0] for _, line in zip(range(pairs), handle)]
    premises, hypotheses = [r["article"] for r in rows], [r["summary"] for r in rows]
    seconds = {}
    for name, checkpoints in (("single", singles), ("multi", {"mq": multi_question})):
        scorer = MultiScorer.load(checkpoints, max_input_length=512, batch_size=64)
        scorer.score(premises, hypotheses, show_progress=False)
        started = time.perf_counter()
        scorer.score(premises, hypotheses, show_progress=False)
        seconds[name] = time.perf_counter() - started
    return (
        f"scoring {len(rows)} test pairs: {len(singles)} single metric(s) "
        f"{seconds['single']:.2f} s, one multi-question metric (6 questions) "
        f"{seconds['multi']:.2f} s ({seconds['multi'] / seconds['single']:.2f}x)"
    )


def distill_q4(
    output_dir: str, prepared: str, teacher: str, extra_bindings: Sequence[str] = ()
) -> str:
    """Distils the Q4 metric into a smaller student; returns its best checkpoint."""
    from seahorse_metrics.training import distill

    model_dir = os.path.join(output_dir, "metrics", STUDENT)
    bindings = [
        f"MODEL_DIR = '{model_dir}'",
        f"DATA_DIR = '{prepared}'",
        f"TEACHER = '{teacher}'",
        *extra_bindings,
    ]
    result = distill.distill_from_gin([DISTILL_GIN], bindings)
    if result.train.best_checkpoint is None:
        raise RuntimeError(f"the distillation kept no best checkpoint ({model_dir})")
    print(f"  teacher scored {result.teacher_scored} pairs (the rest from its cache)\n")
    print("  " + result.table.replace("\n", "\n  "), flush=True)
    return result.train.best_checkpoint


def score_splits(output_dir: str, prepared: str, checkpoints: dict[str, str]) -> str:
    """Scores the validation and test splits; returns one scores file with both."""
    from seahorse_metrics.scoring.files import score_file
    from seahorse_metrics.scoring.scorer import MultiScorer

    scorer = MultiScorer.load(checkpoints, max_input_length=512, batch_size=64)
    outputs = []
    for split in ("validation", "test"):
        output = os.path.join(output_dir, "scores", f"{split}.jsonl")
        os.makedirs(os.path.dirname(output), exist_ok=True)
        summary = score_file(scorer, os.path.join(prepared, f"{split}.jsonl"), output)
        rows = summary["rows"]
        print(
            f"  {split}: {rows['rows']} rows scored by {len(checkpoints)} metrics, "
            f"{rows['bad']} bad -> {output}",
            flush=True,
        )
        outputs.append(output)
    both = os.path.join(output_dir, "scores", "validation_and_test.jsonl")

    def write(out) -> None:
        for output in outputs:
            with open(output, encoding="utf-8") as handle:
                out.write(handle.read())

    write_atomically(both, write)
    return both


def meta_evaluate(output_dir: str, prepared: str, scores: str, names: Sequence[str]):
    """Evaluates on the test split, each metric calibrated on its question's
    validation split (`q4_student` on Q4's)."""
    from seahorse_metrics.evaluation.run import EvaluationConfig, run_evaluation

    questions = sorted({int(name[1]) for name in names})
    metrics = [f"{name}=scores:{scores}:{name}" for name in names]
    metrics += [f"{name}={spec}" for name, spec in BASELINES.items()]
    benchmark = "seahorse:{}:{},split=test".format(prepared, ",".join(f"q{q}" for q in questions))
    calibrate_on = [f"{name}=seahorse:{prepared}:q{name[1]},split=validation" for name in names]
    report_dir = os.path.join(output_dir, "report")
    report = run_evaluation(
        [benchmark],
        metrics,
        report_dir,
        EvaluationConfig(seed=0),
        vocab_path=os.path.join(SAMPLE_DIR, "spiece.model"),
        calibrate_on=calibrate_on,
        calibration_method="temperature",
    )
    return report, report_dir


def summary_table(report, questions: Sequence[int]) -> tuple[str, bool]:
    """The printed table: each question's own metric against the baselines."""
    lines = [
        "| question | metric ROC-AUC [95% CI] | ROUGE-L | majority | target | met |",
        "|---|---|---|---|---|---|",
    ]
    all_met = True
    for q in questions:
        benchmark = f"seahorse/q{q}"
        ours = report.result(f"q{q}", benchmark).statistics["roc_auc"]
        rouge = report.result("rougeL", benchmark).statistics["roc_auc"].value
        majority = report.result("majority", benchmark).statistics["roc_auc"].value
        met = (
            ours.value is not None
            and ours.value >= TARGET_AUC[q]
            and rouge is not None
            and ours.value > rouge
        )
        all_met &= met
        lines.append(
            f"| Q{q} {QUESTION_NAMES[q]} "
            f"| {ours.value:.3f} [{ours.ci_low:.3f}, {ours.ci_high:.3f}] "
            f"| {rouge:.3f} | {majority:.3f} | >= {TARGET_AUC[q]:.2f} | {'yes' if met else 'NO'} |"
        )
    return "\n".join(lines), all_met


def calibration_table(report) -> str:
    """The printed table: each metric's ECE and Brier score on its own
    question's test split, before and after its calibration map."""
    lines = [
        "| metric | ECE before | ECE after [95% CI] | Brier before | Brier after |",
        "|---|---|---|---|---|",
    ]
    for (metric, benchmark), cell in report.calibration_cells.items():
        if benchmark != f"seahorse/q{metric[1]}":
            continue
        after = cell.ece["after"]
        lines.append(
            f"| {metric} | {cell.ece['before'].value:.3f} | {after.value:.3f} "
            f"[{after.ci_low:.3f}, {after.ci_high:.3f}] | {cell.brier['before']:.3f} "
            f"| {cell.brier['after']:.3f} |"
        )
    return "\n".join(lines)


def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m seahorse_metrics.demo",
        description="Train, distil, score, calibrate and meta-evaluate six tiny metrics on the "
        "bundled synthetic sample (what `make demo` runs).",
    )
    parser.add_argument(
        "--output_dir", default="demo_output", help="Where everything goes (default: demo_output/)."
    )
    parser.add_argument(
        "--questions",
        default=",".join(map(str, QUESTIONS)),
        help="Questions to train, e.g. 1,4 (default: all six; the Q4 metric "
        "is distilled when it is trained).",
    )
    parser.add_argument(
        "--gin_bindings",
        dest="bindings",
        action="append",
        default=[],
        metavar="BINDING",
        help="Extra gin binding for every training, e.g. "
        '"TrainConfig.train_steps = 50" (repeatable).',
    )
    parser.add_argument(
        "--distill_bindings",
        action="append",
        default=[],
        metavar="BINDING",
        help="Extra gin binding for the distillation (repeatable).",
    )
    args = parser.parse_args(argv)
    args.questions = [int(q) for q in args.questions.split(",") if q.strip()]
    unknown = sorted(set(args.questions) - set(QUESTIONS))
    if unknown:
        parser.error(f"--questions: no question {unknown}; choose from {list(QUESTIONS)}")
    return args


def _run(args: argparse.Namespace, output_dir: str):
    """The demo's steps; returns the evaluation report and its directory."""
    t = _step("1/5 prepare the sample (synthetic SEAHORSE-format release + articles)")
    prepared = prepare_sample(output_dir)
    print(f"  -> {prepared} ({time.time() - t:.0f} s)")

    t = _step(
        f"2/5 fine-tune a tiny metric per question ({DEMO_GIN}), then one multi-question metric"
    )
    validation = {}
    trained = train_metrics(output_dir, prepared, args.questions, args.bindings, validation)
    checkpoints = {f"q{q}": path for q, path in trained.items()}
    multi = train_multi_question(output_dir, prepared, args.questions, args.bindings)
    print(
        "\n  Validation ROC-AUC, single metrics and the multi-question metric "
        "(the same steps per question):\n"
    )
    print("  " + multi_question_table(validation, multi.best_metrics).replace("\n", "\n  "))
    print("  " + scoring_cost(prepared, checkpoints, multi.best_checkpoint), flush=True)
    print(f"  ({time.time() - t:.0f} s)")

    if 4 in trained:
        t = _step(f"3/5 distil the Q4 metric into a student with fewer layers ({DISTILL_GIN})")
        checkpoints[STUDENT] = distill_q4(output_dir, prepared, trained[4], args.distill_bindings)
        print(f"  ({time.time() - t:.0f} s)")

    t = _step("4/5 score the validation and test splits with all metrics at once")
    scores = score_splits(output_dir, prepared, checkpoints)
    print(f"  ({time.time() - t:.0f} s)")

    t = _step(
        "5/5 meta-evaluate against the ratings and the baselines, each metric "
        "calibrated on the validation split"
    )
    report, report_dir = meta_evaluate(output_dir, prepared, scores, list(checkpoints))
    print(f"  ({time.time() - t:.0f} s)")
    return report, report_dir


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    started = time.time()
    report, report_dir = _run(args, os.path.abspath(args.output_dir))
    table, all_met = summary_table(report, args.questions)
    print("\nROC-AUC on the synthetic test split (each question's own metric):\n")
    print(table)
    print(
        "\nCalibration on the test split, maps fitted on the validation split "
        "(temperature scaling):\n"
    )
    print(calibration_table(report))
    print(
        f"\nReport: {os.path.join(report_dir, 'report.html')} "
        f"(also report.md, report.json, calibration.json)"
    )
    print(f"Demo finished in {time.time() - started:.0f} s.")
    if not all_met:
        print(
            "Some metrics missed the demo's target (the `met` column): the tiny model "
            "learnt less than intended on this machine.",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
