"""`make demo`: the whole story on the bundled synthetic sample, offline.

    python -m seahorse_metrics.demo [--output_dir demo_output]

1. prepares the sample's SEAHORSE-format release with its local articles
   (`seahorse-metrics prepare`);
2. fine-tunes one tiny metric per question with `gin/runs/demo.gin`, starting
   from the sample's backbone (a tiny mT5-shaped model pretrained without
   labels by `python -m demo_data.backbone`, shipped as a Hugging Face
   directory), as a real run fine-tunes `google/mt5-large`
   (`seahorse-metrics train`);
3. scores the test split with all six metrics at once
   (`seahorse-metrics score`);
4. meta-evaluates them against the ratings, next to the majority-class and
   ROUGE-L baselines, and writes report.md / report.html / report.json
   (`seahorse-metrics evaluate`).

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

logger = logging.getLogger("seahorse_metrics.demo")

SAMPLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample")
DEMO_GIN = "gin/runs/demo.gin"
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
        "local", path=os.path.join(SAMPLE_DIR, "seahorse", "articles.jsonl"))
    report = prepare(os.path.join(SAMPLE_DIR, "seahorse"), source, prepared)
    for split, counts in report["splits"].items():
        print(f"  {split}: {counts['rows_written']} rows written, "
              f"{sum(counts['rows_dropped'].values())} dropped", flush=True)
    return prepared


def train_metrics(output_dir: str, prepared: str, questions: Sequence[int],
                  extra_bindings: Sequence[str] = ()) -> dict[int, str]:
    """Fine-tunes one metric per question; returns question -> best checkpoint."""
    from seahorse_metrics.training import trainer

    best = {}
    for question in questions:
        started = time.time()
        model_dir = os.path.join(output_dir, "metrics", f"q{question}")
        bindings = [f"MODEL_DIR = '{model_dir}'", f"TASK = 'seahorse_q{question}'",
                    f"DATA_DIR = '{prepared}'", *extra_bindings]
        result = trainer.train_from_gin([DEMO_GIN], bindings)
        if result.best_checkpoint is None:
            raise RuntimeError(f"training q{question} kept no best checkpoint ({model_dir})")
        auc = (result.best_metrics or {}).get("roc_auc")
        print(f"  q{question} {QUESTION_NAMES[question]}: best validation ROC-AUC "
              f"{auc:.3f} at step {result.best_step} ({time.time() - started:.0f} s)", flush=True)
        best[question] = result.best_checkpoint
    return best


def score_test_split(output_dir: str, prepared: str, checkpoints: dict[int, str]) -> str:
    from seahorse_metrics.scoring.scorer import MultiScorer
    from seahorse_metrics.scoring.files import score_file

    scorer = MultiScorer.load({f"q{q}": path for q, path in checkpoints.items()},
                              max_input_length=512, batch_size=64)
    output = os.path.join(output_dir, "scores", "test.jsonl")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    summary = score_file(scorer, os.path.join(prepared, "test.jsonl"), output)
    rows = summary["rows"]
    print(f"  {rows['rows']} rows scored by {len(checkpoints)} metrics, {rows['bad']} bad "
          f"-> {output}", flush=True)
    return output


def meta_evaluate(output_dir: str, prepared: str, scores: str,
                  questions: Sequence[int]):
    from seahorse_metrics.evaluation.run import EvaluationConfig, run_evaluation

    metrics = [f"q{q}=scores:{scores}:q{q}" for q in questions]
    metrics += [f"{name}={spec}" for name, spec in BASELINES.items()]
    benchmark = "seahorse:{}:{},split=test".format(prepared, ",".join(f"q{q}" for q in questions))
    report_dir = os.path.join(output_dir, "report")
    report = run_evaluation([benchmark], metrics, report_dir, EvaluationConfig(seed=0),
                            vocab_path=os.path.join(SAMPLE_DIR, "spiece.model"))
    return report, report_dir


def summary_table(report, questions: Sequence[int]) -> tuple[str, bool]:
    """The printed table: each question's own metric against the baselines."""
    lines = ["| question | metric ROC-AUC [95% CI] | ROUGE-L | majority | target | met |",
             "|---|---|---|---|---|---|"]
    all_met = True
    for q in questions:
        benchmark = f"seahorse/q{q}"
        ours = report.result(f"q{q}", benchmark).statistics["roc_auc"]
        rouge = report.result("rougeL", benchmark).statistics["roc_auc"].value
        majority = report.result("majority", benchmark).statistics["roc_auc"].value
        met = (ours.value is not None and ours.value >= TARGET_AUC[q]
               and rouge is not None and ours.value > rouge)
        all_met &= met
        lines.append(
            f"| Q{q} {QUESTION_NAMES[q]} | {ours.value:.3f} [{ours.ci_low:.3f}, {ours.ci_high:.3f}] "
            f"| {rouge:.3f} | {majority:.3f} | >= {TARGET_AUC[q]:.2f} | {'yes' if met else 'NO'} |")
    return "\n".join(lines), all_met


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m seahorse_metrics.demo",
        description="Train, score and meta-evaluate six tiny metrics on the bundled "
                    "synthetic sample (what `make demo` runs).")
    parser.add_argument("--output_dir", default="demo_output",
                        help="Where everything goes (default: demo_output/).")
    parser.add_argument("--questions", default=",".join(map(str, QUESTIONS)),
                        help="Questions to train, e.g. 1,4 (default: all six).")
    parser.add_argument("--gin_bindings", dest="bindings", action="append", default=[],
                        metavar="BINDING",
                        help="Extra gin binding for every training, e.g. "
                             "\"TrainConfig.train_steps = 50\" (repeatable).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    questions = [int(q) for q in args.questions.split(",") if q.strip()]
    unknown = sorted(set(questions) - set(QUESTIONS))
    if unknown:
        parser.error(f"--questions: no question {unknown}; choose from {list(QUESTIONS)}")
    output_dir = os.path.abspath(args.output_dir)
    started = time.time()

    t = _step("1/4 prepare the sample (synthetic SEAHORSE-format release + articles)")
    prepared = prepare_sample(output_dir)
    print(f"  -> {prepared} ({time.time() - t:.0f} s)")

    t = _step(f"2/4 fine-tune a tiny metric per question ({DEMO_GIN})")
    checkpoints = train_metrics(output_dir, prepared, questions, args.bindings)
    print(f"  ({time.time() - t:.0f} s)")

    t = _step("3/4 score the test split with all metrics at once")
    scores = score_test_split(output_dir, prepared, checkpoints)
    print(f"  ({time.time() - t:.0f} s)")

    t = _step("4/4 meta-evaluate against the ratings and the baselines")
    report, report_dir = meta_evaluate(output_dir, prepared, scores, questions)
    print(f"  ({time.time() - t:.0f} s)")

    table, all_met = summary_table(report, questions)
    print("\nROC-AUC on the synthetic test split (each question's own metric):\n")
    print(table)
    print(f"\nReport: {os.path.join(report_dir, 'report.html')} "
          f"(also report.md, report.json)")
    print(f"Demo finished in {time.time() - started:.0f} s.")
    if not all_met:
        print("Some metrics missed the demo's target (the `met` column): the tiny model "
              "learnt less than intended on this machine.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
