"""What a meta-evaluation fits on dev benchmarks before it reports:
decision thresholds (`tune_thresholds`, `--tune_threshold_on`) and
calibration maps (`fit_calibrations`, `--calibrate_on`), each on the
labelled items a metric covers.
"""

from __future__ import annotations

import logging
from typing import Optional, Sequence

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.calibration import fitting as calibration_fitting
from seahorse_metrics.calibration import maps as calibration_maps
from seahorse_metrics.calibration.thresholds import ThresholdSet, read_thresholds, tune_threshold
from seahorse_metrics.evaluation.benchmarks import Benchmark, load_benchmarks
from seahorse_metrics.evaluation.cache import ScoreCache
from seahorse_metrics.evaluation.metrics import Metric, MetricNotApplicable
from seahorse_metrics.evaluation.results import EvaluationConfig
from seahorse_metrics.evaluation.score_source import ScoreSource, nan_mask

logger = logging.getLogger(__name__)


def _tuning_items(
    metric: Metric, benchmark: Benchmark, source: ScoreSource, config: EvaluationConfig
) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(labels, scores) of a tuning benchmark without NaN scores, or None when
    the metric does not cover it."""
    try:
        scores = source.scores(metric, benchmark)
    except MetricNotApplicable as reason:
        logger.info(
            "metric %s does not cover tuning benchmark %s: %s", metric.name, benchmark.name, reason
        )
        return None
    valid, _ = nan_mask(metric, benchmark, scores, config.drop_nan)
    return benchmark.labels[valid], scores[valid]


def _tune_or_warn(labels: np.ndarray, scores: np.ndarray, objective: str, what: str):
    try:
        return tune_threshold(labels, scores, objective)
    except stats.UndefinedStatistic as reason:
        logger.warning("no threshold tuned for %s: %s", what, reason)
        return None


def tune_thresholds(
    benchmarks: Sequence[Benchmark],
    metrics: Sequence[Metric],
    config: EvaluationConfig,
    *,
    cache: Optional[ScoreCache] = None,
    tuned_on: Sequence[str] = (),
) -> ThresholdSet:
    """Tunes each metric's threshold on the labelled items of `benchmarks`.

    One threshold per metric on all their items; with `threshold_scope=
    "benchmark"` also one per benchmark. A metric that covers none of them
    gets none (its cells say so).

    Raises:
      ValueError: when no benchmark has binary labels.
    """
    labelled = [b for b in benchmarks if b.has_labels]
    if not labelled:
        raise ValueError(
            f"the tuning benchmarks {[b.name for b in benchmarks]} have no binary "
            "labels; tune on a labelled split (or give a ratings threshold)"
        )
    source = ScoreSource(cache if config.use_cache else None)
    objective = config.threshold_objective
    tuned, per_benchmark = {}, {}
    for metric in metrics:
        items = {b.name: _tuning_items(metric, b, source, config) for b in labelled}
        items = {name: pair for name, pair in items.items() if pair is not None}
        if not items:
            continue
        if config.threshold_scope == "benchmark":
            per_benchmark[metric.name] = {
                name: found
                for name, (labels, scores) in items.items()
                if (found := _tune_or_warn(labels, scores, objective, f"{metric.name} on {name}"))
            }
        pooled = _tune_or_warn(
            np.concatenate([labels for labels, _ in items.values()]),
            np.concatenate([scores for _, scores in items.values()]),
            objective,
            metric.name,
        )
        if pooled is not None:
            tuned[metric.name] = pooled
    return ThresholdSet(objective, config.threshold_scope, list(tuned_on), tuned, per_benchmark)


def run_thresholds(
    tune_on: Sequence[str],
    thresholds_path: Optional[str],
    metrics: Sequence[Metric],
    config: EvaluationConfig,
    cache: ScoreCache,
) -> Optional[ThresholdSet]:
    """A run's thresholds: tuned on `tune_on`, read from `thresholds_path`, or
    None without either.

    Raises:
      ValueError: for both, or thresholds of a metric not in the run.
    """
    if tune_on and thresholds_path:
        raise ValueError("give --tune_threshold_on or --thresholds, not both")
    if thresholds_path:
        thresholds = read_thresholds(thresholds_path)
    elif tune_on:
        thresholds = tune_thresholds(
            load_benchmarks(tune_on), metrics, config, cache=cache, tuned_on=tune_on
        )
    else:
        return None
    thresholds.check_metrics([m.name for m in metrics])
    return thresholds


def fit_calibrations(
    specs: Sequence[str],
    metrics: Sequence[Metric],
    config: EvaluationConfig,
    method: str,
    *,
    cache: Optional[ScoreCache] = None,
) -> calibration_maps.CalibrationSet:
    """Fits a calibration map per probability metric on the labelled items of
    its `--calibrate_on` benchmarks (`calibration.bind_specs`).

    Metrics whose scores are not probabilities (the baselines) get none.

    Raises:
      ValueError: for an unknown method or metric name, a map asked of a
        metric whose scores are not probabilities, or specs without labels.
    """
    calibration_maps.check_method(method)
    bound = calibration_fitting.bind_specs(specs, [m.name for m in metrics])
    source = ScoreSource(cache if config.use_cache else None)
    maps, fitted_on = {}, {}
    for metric in metrics:
        if metric.name not in bound:
            continue
        if metric.threshold is None:  # Not a probability (baselines).
            if any(s.startswith(metric.name + "=") for s in specs):
                raise ValueError(
                    f"--calibrate_on {metric.name}=...: the scores of {metric.name} "
                    "are not probabilities; calibrate checkpoint or scores metrics"
                )
            continue
        labelled = [b for b in load_benchmarks(bound[metric.name]) if b.has_labels]
        if not labelled:
            raise ValueError(
                f"--calibrate_on {bound[metric.name]}: no binary labels to fit "
                f"{metric.name}'s calibration on"
            )
        items = [pair for b in labelled if (pair := _tuning_items(metric, b, source, config))]
        if not items:
            logger.warning(
                "no calibration for %s: it covers none of %s", metric.name, bound[metric.name]
            )
            continue
        labels = np.concatenate([labels for labels, _ in items])
        scores = np.concatenate([scores for _, scores in items])
        try:
            maps[metric.name] = calibration_fitting.fit_calibration(method, labels, scores)
        except stats.UndefinedStatistic as reason:
            logger.warning("no calibration for %s: %s", metric.name, reason)
            continue
        fitted_on[metric.name] = list(bound[metric.name])
    return calibration_maps.CalibrationSet(method, fitted_on, maps)
