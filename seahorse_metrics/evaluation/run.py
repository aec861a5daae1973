"""Meta-evaluation: score benchmarks with metrics, compute statistics, report.

`run_evaluation` is what `seahorse-metrics evaluate` calls: it reads the
benchmarks, builds the metrics, gets every metric's scores (from the cache
when possible), computes the statistics with bootstrap intervals, breakdowns
and paired tests, and writes `report.json`, `report.md` and `report.html`.
`evaluate` does the same on benchmarks and metrics already in memory.

Which statistics a (metric, benchmark) cell gets:
- benchmarks with binary labels: ROC-AUC; accuracy and balanced accuracy at
  the metric's threshold when it has one;
- every benchmark: Pearson between score and rating (the 0/1 label on
  binary sets, as the paper's rho; the raw rating on mFACE and continuous
  sets); Spearman and Kendall tau-b when ratings are continuous;
- benchmarks with 3 or more summarization systems: the system-level Pearson
  (mean score per system vs mean rating per system);
- with thresholds tuned on another benchmark (`--tune_threshold_on`, or read
  with `--thresholds`): balanced accuracy at the metric's tuned threshold, and
  per family of 2 or more benchmarks its mean (LLM-AggreFact's average);
- with calibration maps fitted on a dev benchmark (`--calibrate_on`): ECE
  (equal-mass bins, with its interval), Brier score and reliability data of
  each probability metric before and after its map (`calibration.py`).

The scores come through `score_source.ScoreSource`; thresholds and
calibration maps are fitted by `tuning`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from typing import Iterator, Optional, Sequence

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.calibration import fitting as calibration_fitting
from seahorse_metrics.calibration import maps as calibration_maps
from seahorse_metrics.calibration import measures as calibration_measures
from seahorse_metrics.calibration.thresholds import ThresholdSet
from seahorse_metrics.evaluation.benchmarks import Benchmark, load_benchmarks, subset_of
from seahorse_metrics.evaluation.cache import ScoreCache
from seahorse_metrics.evaluation.metrics import (
    Metric,
    MetricNotAligned,
    MetricNotApplicable,
    build_metrics,
)
from seahorse_metrics.evaluation.report import write_report
from seahorse_metrics.evaluation.results import (
    TUNED_STATISTIC,
    Comparison,
    EvaluationConfig,
    EvaluationReport,
    MetricResult,
)
from seahorse_metrics.evaluation.score_source import ScoreSource, nan_mask
from seahorse_metrics.evaluation.tuning import fit_calibrations, run_thresholds

logger = logging.getLogger(__name__)

# Statistics computed per breakdown group (the paper's two measures).
BREAKDOWN_STATISTICS = ("roc_auc", "pearson")
_UNKNOWN_GROUP = "(unknown)"


def _cell_statistics(
    benchmark: Benchmark,
    index: np.ndarray,
    scores: np.ndarray,
    threshold: Optional[float],
    config: EvaluationConfig,
    scores_name: str,
    names: Sequence[str],
) -> dict:
    common = dict(
        n_resamples=config.n_resamples,
        confidence=config.confidence,
        seed=config.seed,
        scores_name=scores_name,
    )
    labels = benchmark.labels[index] if benchmark.has_labels else None
    ratings = benchmark.ratings[index]
    out = {}
    for name in names:
        if name in stats.BINARY_STATISTICS:
            if labels is None or (name != "roc_auc" and threshold is None):
                continue
            out[name] = stats.estimate(name, labels, scores, threshold=threshold, **common)
        else:
            out[name] = stats.estimate(name, ratings, scores, **common)
    return out


def _statistic_names(benchmark: Benchmark) -> tuple[str, ...]:
    names = ("roc_auc", "pearson")
    if benchmark.continuous:
        names += ("spearman", "kendall")
    return names + ("accuracy", "balanced_accuracy")


def _group_indices(benchmark: Benchmark, field: str, index: np.ndarray) -> dict:
    if field == "subset":
        values = [subset_of(benchmark.items[i]) for i in index]
    else:
        values = [getattr(benchmark.items[i], field) for i in index]
    if all(v is None for v in values):
        return {}
    groups: dict = {}
    for position, value in enumerate(values):
        groups.setdefault(_UNKNOWN_GROUP if value is None else str(value), []).append(position)
    if len(groups) < 2:
        return {}
    return {group: np.array(members) for group, members in sorted(groups.items())}


def _tuned_statistic(
    result: MetricResult,
    metric: Metric,
    benchmark: Benchmark,
    index: np.ndarray,
    used: np.ndarray,
    thresholds: Optional[ThresholdSet],
    config: EvaluationConfig,
) -> None:
    """Balanced accuracy at the metric's tuned threshold, into `result`."""
    if thresholds is None or not benchmark.has_labels:
        return
    threshold, note = thresholds.threshold(metric.name, benchmark.name)
    if threshold is None:
        result.note = "; ".join(filter(None, [result.note, note]))
        return
    estimate = stats.estimate(
        "balanced_accuracy",
        benchmark.labels[index],
        used,
        threshold=threshold,
        n_resamples=config.n_resamples,
        confidence=config.confidence,
        seed=config.seed,
        scores_name=metric.name,
    )
    if note:
        estimate = dataclasses.replace(
            estimate, note="; ".join(filter(None, [estimate.note, note]))
        )
    result.statistics[TUNED_STATISTIC] = dataclasses.replace(estimate, statistic=TUNED_STATISTIC)
    result.tuned_threshold = threshold


def evaluate_cell(
    metric: Metric,
    benchmark: Benchmark,
    scores: np.ndarray,
    config: EvaluationConfig,
    thresholds: Optional[ThresholdSet] = None,
) -> MetricResult:
    """Statistics, calibration and breakdowns of one metric on one benchmark."""
    valid, note = nan_mask(metric, benchmark, scores, config.drop_nan)
    index = np.flatnonzero(valid)
    result = MetricResult(metric.name, benchmark.name, len(index), note=note, valid=valid)
    if not len(index):
        return result
    used = scores[index]
    result.statistics = _cell_statistics(
        benchmark, index, used, metric.threshold, config, metric.name, _statistic_names(benchmark)
    )
    systems = [benchmark.items[i].system for i in index]
    if all(systems) and len(set(systems)) >= 3:
        result.statistics["system_pearson"] = stats.system_level_correlation(
            used,
            benchmark.ratings[index],
            systems,
            n_resamples=config.n_resamples,
            confidence=config.confidence,
            seed=config.seed,
            scores_name=metric.name,
        )
    _tuned_statistic(result, metric, benchmark, index, used, thresholds, config)
    if (
        benchmark.has_labels
        and metric.threshold is not None
        and used.min() >= 0.0
        and used.max() <= 1.0
    ):
        result.calibration = calibration_measures.equal_width_reliability(
            benchmark.labels[index], used
        )
    for field in config.breakdowns:
        groups = _group_indices(benchmark, field, index)
        result.breakdowns[field] = {
            group: _cell_statistics(
                benchmark,
                index[members],
                used[members],
                None,
                config,
                metric.name,
                BREAKDOWN_STATISTICS,
            )
            for group, members in groups.items()
        }
    return result


def _compare(
    metric_a: MetricResult,
    metric_b: MetricResult,
    benchmark: Benchmark,
    scores_a: np.ndarray,
    scores_b: np.ndarray,
    config: EvaluationConfig,
) -> Comparison:
    both = np.flatnonzero(metric_a.valid & metric_b.valid)
    names = [
        n
        for n in _statistic_names(benchmark)
        if n in metric_a.statistics
        and n in metric_b.statistics
        and n not in ("accuracy", "balanced_accuracy")
    ]
    tests = {}
    for name in names:
        target = benchmark.labels[both] if name == "roc_auc" else benchmark.ratings[both]
        tests[name] = stats.paired_bootstrap_test(
            name,
            target,
            scores_a[both],
            scores_b[both],
            n_resamples=max(config.n_resamples, 1),
            confidence=config.confidence,
            seed=config.seed,
        )
    return Comparison(metric_a.metric, metric_b.metric, benchmark.name, tests)


def _macro_averages(
    benchmarks: Sequence[Benchmark],
    metrics: Sequence[Metric],
    results: dict,
    scores: dict,
    config: EvaluationConfig,
) -> dict:
    """(metric, family) -> mean tuned balanced accuracy over the family's benchmarks."""
    families: dict = {}
    for benchmark in benchmarks:
        families.setdefault(benchmark.family, []).append(benchmark)
    macro = {}
    for metric in metrics:
        for family, members in families.items():
            cells = [results[(metric.name, b.name)] for b in members]
            if len(members) < 2 or not all(TUNED_STATISTIC in c.statistics for c in cells):
                continue
            parts = [
                (b.labels[c.valid], scores[(metric.name, b.name)][c.valid], c.tuned_threshold)
                for b, c in zip(members, cells)
            ]
            macro[(metric.name, family)] = dataclasses.replace(
                stats.macro_average(
                    "balanced_accuracy",
                    parts,
                    n_resamples=config.n_resamples,
                    confidence=config.confidence,
                    seed=config.seed,
                    scores_name=metric.name,
                ),
                statistic=TUNED_STATISTIC,
            )
    return macro


def _score_all(
    source: ScoreSource,
    metrics: Sequence[Metric],
    benchmarks: Sequence[Benchmark],
    config: EvaluationConfig,
) -> tuple[dict, dict]:
    """Scores metric by metric (one checkpoint in memory at a time); returns
    the "not covered" results and the scores, by (metric, benchmark).

    Raises:
      ValueError: for a scores file that cannot be aligned with a benchmark
        (unless `config.allow_partial_coverage`), or with any benchmark.
    """
    results, all_scores = {}, {}
    for metric in metrics:
        unaligned = []
        for benchmark in benchmarks:
            key = (metric.name, benchmark.name)
            try:
                all_scores[key] = source.scores(metric, benchmark)
            except MetricNotApplicable as reason:
                if isinstance(reason, MetricNotAligned):
                    if not config.allow_partial_coverage:
                        raise ValueError(
                            f"metric {metric.name} cannot be aligned with {benchmark.name}: "
                            f"{reason}; give it scores for every benchmark, or pass "
                            "--allow_partial_coverage to report it as not covered"
                        ) from None
                    unaligned.append(f"{benchmark.name}: {reason}")
                logger.info("metric %s does not cover %s: %s", metric.name, benchmark.name, reason)
                results[key] = MetricResult(
                    metric.name, benchmark.name, 0, note=f"not covered: {reason}"
                )
        if unaligned and len(unaligned) == len(benchmarks):
            raise ValueError(
                f"metric {metric.name} covers none of the benchmarks "
                f"({'; '.join(unaligned)}); check its file and ids"
            )
    return results, all_scores


def evaluate(
    benchmarks: Sequence[Benchmark],
    metrics: Sequence[Metric],
    config: EvaluationConfig = EvaluationConfig(),
    *,
    cache: Optional[ScoreCache] = None,
    compare: Sequence[tuple[str, str]] = (),
    thresholds: Optional[ThresholdSet] = None,
    calibration: Optional[calibration_maps.CalibrationSet] = None,
) -> EvaluationReport:
    """Scores every benchmark with every metric and computes the statistics.

    Args:
      benchmarks: Report columns.
      metrics: Report rows.
      config: Statistics options.
      cache: Score cache (None = always score).
      compare: Pairs of metric names to test against each other.
      thresholds: Tuned thresholds to report balanced accuracy at.
      calibration: Calibration maps to report ECE and Brier score before
        and after.

    Returns:
      The `EvaluationReport` (write it with `report.write_report`).

    Raises:
      ValueError: Unknown metric names in `compare`, NaN scores without
        `drop_nan`, a metric returning the wrong number of scores, or a
        scores file that cannot be aligned with a benchmark (without
        `allow_partial_coverage`).
    """
    _check_compare(compare, [m.name for m in metrics])
    source = ScoreSource(cache if config.use_cache else None)
    results, all_scores = _score_all(source, metrics, benchmarks, config)
    # Statistics benchmark by benchmark (every metric reuses its resamples).
    for benchmark in benchmarks:
        for metric in metrics:
            key = (metric.name, benchmark.name)
            if key in all_scores:
                results[key] = evaluate_cell(metric, benchmark, all_scores[key], config, thresholds)
    results = {(m.name, b.name): results[(m.name, b.name)] for m in metrics for b in benchmarks}
    comparisons = _comparisons(compare, benchmarks, results, all_scores, config)
    return EvaluationReport(
        config,
        list(benchmarks),
        list(metrics),
        results,
        comparisons,
        all_scores,
        source.counts,
        thresholds,
        _macro_averages(benchmarks, metrics, results, all_scores, config),
        calibration,
        _calibration_cells(benchmarks, results, all_scores, calibration, config),
        {m.name: source.provenance.get(m.name) or m.provenance() for m in metrics},
    )


def _check_compare(compare: Sequence[tuple[str, str]], names: Sequence[str]) -> None:
    """Refuses a `--compare` pair that is not two different metrics of the run."""
    for pair in compare:
        unknown = [n for n in pair if n not in names]
        if unknown or len(pair) != 2 or pair[0] == pair[1]:
            raise ValueError(
                f"--compare {list(pair)}: needs two different metric names from {names}"
            )


def _comparisons(
    compare: Sequence[tuple[str, str]],
    benchmarks: Sequence[Benchmark],
    results: dict,
    all_scores: dict,
    config: EvaluationConfig,
) -> list[Comparison]:
    """The paired test of each `compare` pair on every benchmark both cover."""
    comparisons = []
    for name_a, name_b in compare:
        for benchmark in benchmarks:
            a, b = results[(name_a, benchmark.name)], results[(name_b, benchmark.name)]
            if a.applicable and b.applicable:
                comparisons.append(
                    _compare(
                        a,
                        b,
                        benchmark,
                        all_scores[(name_a, benchmark.name)],
                        all_scores[(name_b, benchmark.name)],
                        config,
                    )
                )
    return comparisons


def _calibration_cells(
    benchmarks: Sequence[Benchmark],
    results: dict,
    scores: dict,
    calibration: Optional[calibration_maps.CalibrationSet],
    config: EvaluationConfig,
) -> dict:
    """(metric, benchmark) -> CalibrationCell, for every labelled benchmark a
    metric with a calibration map covers."""
    cells = {}
    for (name, benchmark_name), result in results.items():
        benchmark = next(b for b in benchmarks if b.name == benchmark_name)
        if (
            calibration is None
            or name not in calibration.metrics
            or not (benchmark.has_labels and result.applicable)
        ):
            continue
        used = scores[(name, benchmark_name)][result.valid]
        cells[(name, benchmark_name)] = calibration_measures.calibration_cell(
            name,
            benchmark_name,
            calibration.metrics[name],
            benchmark.labels[result.valid],
            used,
            n_resamples=config.n_resamples,
            confidence=config.confidence,
            seed=config.seed,
        )
    return cells


def run_evaluation(
    benchmark_specs: Sequence[str],
    metric_specs: Sequence[str],
    output_dir: str,
    config: EvaluationConfig = EvaluationConfig(),
    *,
    compare: Sequence[tuple[str, str]] = (),
    vocab_path: Optional[str] = None,
    batch_size: int = 32,
    tune_on: Sequence[str] = (),
    thresholds_path: Optional[str] = None,
    calibrate_on: Sequence[str] = (),
    calibration_method: str = calibration_fitting.DEFAULT_METHOD,
) -> EvaluationReport:
    """Reads specs, evaluates, and writes the report files into `output_dir`.

    The score cache lives in `<output_dir>/cache`. With `tune_on` (benchmark
    specs, e.g. a dev split) each metric's threshold is tuned there and
    written to `<output_dir>/thresholds.json`; `thresholds_path` reads such a
    file (or a report.json) instead. With `calibrate_on` (benchmark specs,
    `NAME=SPEC` for one metric) each probability metric gets a
    `calibration_method` map fitted there, written to
    `<output_dir>/calibration.json` and reported before/after.

    Returns:
      The report that was written.

    Raises:
      ValueError: bad specs, both `tune_on` and `thresholds_path`, or
        thresholds for a metric that is not in the run.
    """
    benchmarks = load_benchmarks(benchmark_specs)
    metrics = build_metrics(
        metric_specs, threshold=config.threshold, vocab_path=vocab_path, batch_size=batch_size
    )
    # The directory is made by the first file written into it (a cache entry
    # or the report); a failed run removes the empty folders it made.
    with _removing_empty_folders(output_dir):
        cache = ScoreCache(os.path.join(output_dir, "cache"))
        # Tuning splits have the benchmarks' names (seahorse/q4 of validation and
        # of test): their scores are cached apart.
        tuning_cache = ScoreCache(os.path.join(output_dir, "cache", "tuning"))
        thresholds = run_thresholds(tune_on, thresholds_path, metrics, config, tuning_cache)
        calibration = (
            fit_calibrations(calibrate_on, metrics, config, calibration_method, cache=tuning_cache)
            if calibrate_on
            else None
        )
        report = evaluate(
            benchmarks,
            metrics,
            config,
            cache=cache,
            compare=compare,
            thresholds=thresholds,
            calibration=calibration,
        )
        write_report(report, output_dir)
    return report


@contextlib.contextmanager
def _removing_empty_folders(output_dir: str) -> Iterator[None]:
    """On an error, removes the folders under `output_dir` (and `output_dir`
    itself, unless it was there before) that hold no file: a failed run
    leaves no empty output behind, and keeps the cache entries it wrote."""
    existed = os.path.isdir(output_dir)
    try:
        yield
    except BaseException:
        if os.path.isdir(output_dir):
            for folder, _, _ in sorted(os.walk(output_dir), key=lambda w: -len(w[0])):
                if (folder != output_dir or not existed) and not os.listdir(folder):
                    os.rmdir(folder)
        raise
