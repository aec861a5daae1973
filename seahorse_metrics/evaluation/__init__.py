"""Meta-evaluation of summarization metrics against human judgments.

Modules:
  baselines: majority class, ROUGE-L on SentencePiece pieces, summary length.
  benchmarks: SEAHORSE, mFACE, TRUE, ratings files, LLM-AggreFact and SummaC
    as report columns.
  metrics: checkpoint, baseline and precomputed-scores metrics (report rows).
  score_files: the scores files a precomputed-scores metric reads.
  cache: on-disk scores per (metric, benchmark).
  results: the result types (`EvaluationConfig`, `MetricResult`,
    `EvaluationReport`) that `run` computes and `report` writes.
  run: scoring and statistics (`evaluate`, `run_evaluation`).
  score_source: a metric's scores for a benchmark, from the cache, the run's
    memo or the metric (`ScoreSource`).
  tuning: thresholds and calibration maps fitted on dev benchmarks
    (`tune_thresholds`, `fit_calibrations`).
  report: report.json, report.md and report.html (report_calibration: its
    calibration tables and figures).
  browser: report.html's per-example browser.

The statistics are `seahorse_metrics.stats` (numpy/scipy only, cheap to
import for a trainer's validation loop); calibration maps, their fitting,
ECE and decision thresholds are `seahorse_metrics.calibration`. These
modules are imported by the `evaluate` command.
"""
