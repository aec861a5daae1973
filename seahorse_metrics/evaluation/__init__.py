"""Meta-evaluation of summarization metrics against human judgments.

Modules:
  stats: ROC-AUC, Pearson, Spearman, Kendall, accuracies, bootstrap intervals,
    paired bootstrap tests, system-level correlation (numpy/scipy only).
  baselines: majority class, ROUGE-L on SentencePiece pieces, summary length.
  benchmarks: SEAHORSE, mFACE, TRUE, ratings files, LLM-AggreFact and SummaC
    as report columns.
  metrics: checkpoint, baseline and precomputed-scores metrics (report rows).
  cache: on-disk scores per (metric, benchmark).
  results: the result types (`EvaluationConfig`, `MetricResult`,
    `EvaluationReport`) that `run` computes and `report` writes.
  thresholds: decision thresholds tuned on one benchmark, applied to another
    (the LLM-AggreFact protocol), and their file.
  calibration: temperature/Platt/isotonic maps fitted on a dev benchmark, ECE
    over equal-mass bins, Brier score, and their file.
  run: scoring and statistics (`evaluate`, `run_evaluation`, `tune_thresholds`,
    `fit_calibrations`).
  report: report.json, report.md and report.html (report_calibration: its
    calibration tables and figures).
  browser: report.html's per-example browser.

Only `stats` is cheap to import for a trainer's validation loop; the others
are imported by the `evaluate` command.
"""
