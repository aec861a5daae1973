"""`seahorse-metrics evaluate`: meta-evaluate metrics against human ratings."""

from __future__ import annotations

import argparse
import logging

logger = logging.getLogger(__name__)

_EPILOG = """\
benchmarks (repeatable), KIND:PATH[:OPTIONS]:
  seahorse:DIR[:q4[,q1,...]][,split=test]   prepared dir (or a split .jsonl); all 6 questions
                                            by default, test split by default
  mface:FILE[:q1,q4,q6][,threshold=T]       mFACE sheet -> mface-5lang/qN and mface-all/qN
  true:DIR_OR_CSV                           TRUE-style CSV(s) -> true/<file stem>
  ratings:FILE[:rating=F,premise=F,hypothesis=F,id=F,question=F,threshold=T]
  aggrefact:FILE_OR_DIR[:split=dev|test]    LLM-AggreFact -> aggrefact/<dataset> (+ their mean)
  summac:FILE[:cut=val|test]                SummaC rows -> summac/<dataset> (+ their mean)
  (mface, true, ratings, aggrefact and summac also take encoding=E for a file that is not UTF-8)

metrics (repeatable), [NAME=]SPEC:
  checkpoint:DIR_OR_HUB_ID[,long_inputs=chunk][,per_sentence=min|mean|share@T][,normalize=pair]
  | baseline:majority | baseline:rougeL[:fmeasure|precision|recall]
  | baseline:length | scores:FILE[:COLUMN]

thresholds (the LLM-AggreFact protocol): --tune_threshold_on SPEC tunes each
metric's threshold on SPEC (e.g. the dev split) and reports balanced accuracy
at it on the benchmarks; OUTPUT/thresholds.json keeps them for --thresholds.

calibration: --calibrate_on [NAME=]SPEC fits a map of each probability metric's
score on SPEC's labels (NAME=SPEC: for metric NAME only) with --calibration
temperature|platt|isotonic; the report gives ECE (equal-mass bins), Brier score
and reliability diagrams before and after on every benchmark, and
OUTPUT/calibration.json keeps the maps for `score --calibration`.

example:
  seahorse-metrics evaluate --benchmark seahorse:data/prepared:q4 \\
      --benchmark mface:mface.csv:q4 --benchmark true:true_csvs/ \\
      --metric q4=checkpoint:runs/q4 --metric baseline:rougeL \\
      --compare q4 ROUGE-L --output report/
  seahorse-metrics evaluate --benchmark aggrefact:llm_aggrefact \
      --tune_threshold_on aggrefact:llm_aggrefact:split=dev --metric q4=checkpoint:runs/q4 \
      --output aggrefact_report/
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="Meta-evaluate metrics (ROC-AUC, Pearson, ...) on human-rated benchmarks.",
        description=(
            "Scores benchmarks with metrics and writes report.json, report.md and "
            "report.html (tables like the SEAHORSE paper's, bootstrap intervals, "
            "ROC and calibration plots, breakdowns). Scores are cached in OUTPUT/cache "
            "per (metric, benchmark), so adding a metric does not rescore the others."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_arguments(parser)
    _add_statistics_arguments(parser)
    _add_scoring_arguments(parser)
    _add_threshold_arguments(parser)
    _add_calibration_arguments(parser)
    parser.set_defaults(func=run)


def _add_input_arguments(parser) -> None:
    parser.add_argument(
        "--benchmark",
        action="append",
        required=True,
        metavar="SPEC",
        help="Benchmark spec (repeatable), see below.",
    )
    parser.add_argument(
        "--metric",
        action="append",
        required=True,
        metavar="SPEC",
        help="Metric spec (repeatable), see below.",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="Directory for the report files and the score cache.",
    )


def _add_statistics_arguments(parser) -> None:
    parser.add_argument(
        "--compare",
        nargs=2,
        action="append",
        default=[],
        metavar=("METRIC_A", "METRIC_B"),
        help="Paired bootstrap test of two metrics (by name) on every "
        "benchmark; significant differences are marked (repeatable).",
    )
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="Bootstrap resamples (default 1000; 0 = no intervals).",
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="Interval coverage (default 0.95)."
    )
    parser.add_argument(
        "--alpha", type=float, default=0.05, help="Significance level of --compare (default 0.05)."
    )
    parser.add_argument("--seed", type=int, default=0, help="Resampling seed (default 0).")


def _add_scoring_arguments(parser) -> None:
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        help="Accuracy threshold for checkpoint and scores-file metrics "
        "(score >= threshold means yes; default 0.5).",
    )
    parser.add_argument(
        "--drop_nan",
        action="store_true",
        help="Leave out items a metric scored NaN (counted in the report) "
        "instead of stopping with an error.",
    )
    parser.add_argument(
        "--allow_partial_coverage",
        action="store_true",
        help="Report a scores file without scores for some benchmarks as not "
        "covered there, instead of stopping with an error.",
    )
    parser.add_argument(
        "--no_cache", action="store_true", help="Neither read nor write OUTPUT/cache."
    )
    parser.add_argument(
        "--vocab",
        default=None,
        help="SentencePiece model for checkpoints and the ROUGE-L/length "
        "baselines (default: the checkpoint's / the bundled one).",
    )
    parser.add_argument(
        "--batch_size",
        type=int,
        default=32,
        help="Scoring batch size for checkpoint metrics (default 32).",
    )


def _add_calibration_arguments(parser) -> None:
    from seahorse_metrics.calibration.fitting import DEFAULT_METHOD
    from seahorse_metrics.calibration.maps import METHODS

    parser.add_argument(
        "--calibrate_on",
        action="append",
        default=[],
        metavar="[NAME=]SPEC",
        help="Benchmark spec (repeatable) to fit each probability metric's "
        "calibration map on (NAME=SPEC: only for metric NAME); ECE and "
        "Brier score before/after are reported on every benchmark.",
    )
    parser.add_argument(
        "--calibration",
        choices=METHODS,
        default=DEFAULT_METHOD,
        help="Calibration map: temperature scaling of log P(1)/P(0) (default), "
        "platt (logistic regression on it) or isotonic.",
    )


def _add_threshold_arguments(parser) -> None:
    parser.add_argument(
        "--tune_threshold_on",
        action="append",
        default=[],
        metavar="SPEC",
        help="Benchmark spec (repeatable) to tune each metric's threshold on; "
        "balanced accuracy at it is reported on every benchmark.",
    )
    parser.add_argument(
        "--thresholds",
        default=None,
        metavar="FILE",
        help="Reuse tuned thresholds: a thresholds.json or report.json.",
    )
    parser.add_argument(
        "--threshold_objective",
        default="balanced_accuracy",
        metavar="balanced_accuracy|f1|precision@R",
        help="What the tuned threshold maximises (default balanced_accuracy).",
    )
    parser.add_argument(
        "--threshold_scope",
        choices=("metric", "benchmark"),
        default="metric",
        help="One threshold per metric (default), or one per tuning benchmark "
        "for the benchmark of the same name (per-dataset thresholds).",
    )
    parser.add_argument(
        "--browser_rows",
        type=int,
        default=1000,
        metavar="N",
        help="Items per benchmark in report.html's example browser; larger "
        "benchmarks show a stratified sample (default 1000; 0 = none).",
    )


def run(args: argparse.Namespace) -> int:
    from seahorse_metrics.evaluation.report_tables import headline_text
    from seahorse_metrics.evaluation.run import EvaluationConfig, run_evaluation

    if args.bootstrap == 0 and args.compare:
        raise ValueError("--compare needs bootstrap resamples: drop --bootstrap 0")
    config = EvaluationConfig(
        n_resamples=args.bootstrap,
        confidence=args.confidence,
        seed=args.seed,
        threshold=args.threshold,
        drop_nan=args.drop_nan,
        use_cache=not args.no_cache,
        alpha=args.alpha,
        threshold_objective=args.threshold_objective,
        threshold_scope=args.threshold_scope,
        browser_rows=args.browser_rows,
        allow_partial_coverage=args.allow_partial_coverage,
    )
    report = run_evaluation(
        args.benchmark,
        args.metric,
        args.output,
        config,
        compare=[tuple(pair) for pair in args.compare],
        vocab_path=args.vocab,
        batch_size=args.batch_size,
        tune_on=args.tune_threshold_on,
        thresholds_path=args.thresholds,
        calibrate_on=args.calibrate_on,
        calibration_method=args.calibration,
    )
    for name, counts in report.scoring.items():
        logger.info(
            "%s: %d benchmark(s) scored, %d from cache", name, counts["scored"], counts["cached"]
        )
    print(headline_text(report))
    print(f"wrote {args.output}/report.md, report.json, report.html")
    return 0
