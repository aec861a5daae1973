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
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
from typing import Iterator, Optional, Sequence

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.calibration import fitting as calibration_fitting
from seahorse_metrics.calibration import maps as calibration_maps
from seahorse_metrics.calibration import measures as calibration_measures
from seahorse_metrics.evaluation.benchmarks import Benchmark, load_benchmarks, subset_of
from seahorse_metrics.evaluation.cache import ScoreCache
from seahorse_metrics.evaluation.metrics import (Metric, MetricNotAligned, MetricNotApplicable,
                                                 build_metrics)
from seahorse_metrics.evaluation.report import write_report
from seahorse_metrics.evaluation.results import (TUNED_STATISTIC, Comparison, EvaluationConfig,
                                                 EvaluationReport, MetricResult)
from seahorse_metrics.calibration.thresholds import ThresholdSet, read_thresholds, tune_threshold

logger = logging.getLogger(__name__)

# Statistics computed per breakdown group (the paper's two measures).
BREAKDOWN_STATISTICS = ("roc_auc", "pearson")
_UNKNOWN_GROUP = "(unknown)"


def _pair_key(premise: str, hypothesis: str, question: Optional[str] = None) -> bytes:
    texts = [premise, hypothesis] + ([] if question is None else [question])
    return hashlib.sha1(b"\x00".join(t.encode("utf-8") for t in texts)).digest()


class ScoreSource:
    """Gets a metric's scores for a benchmark: cache, then in-run memo, then scoring.

    Within a run, a content-only metric scores each distinct (premise,
    hypothesis) pair once, so SEAHORSE's six questions or mFACE's language
    subsets, which share pairs, cost one scoring pass.

    Args:
      cache: The on-disk cache, or None.
    """

    def __init__(self, cache: Optional[ScoreCache]):
        self.cache = cache
        self._memo: dict = {}
        self._fingerprints: dict = {}
        self.counts: dict = {}
        self.provenance: dict = {}  # Metric name -> what produced its scores.

    def _fingerprint(self, metric: Metric) -> str:
        if metric.name not in self._fingerprints:
            self._fingerprints[metric.name] = metric.fingerprint()
        return self._fingerprints[metric.name]

    def _count(self, metric: Metric, what: str) -> None:
        per_metric = self.counts.setdefault(metric.name, {"cached": 0, "scored": 0})
        per_metric[what] += 1

    def scores(self, metric: Metric, benchmark: Benchmark) -> np.ndarray:
        """Scores in item order.

        Raises:
          MetricNotApplicable: The metric has no scores for this benchmark.
          ValueError: The metric returned the wrong number of scores.
        """
        use_cache = self.cache is not None and metric.cacheable
        fingerprint = self._fingerprint(metric) if use_cache or metric.content_only else None
        if use_cache:
            cached = self.cache.load_entry(fingerprint, benchmark)
            if cached is not None:
                self._count(metric, "cached")
                self.provenance.setdefault(metric.name, cached[1])
                return cached[0]
        if metric.content_only:
            scores = self._score_by_content(metric, fingerprint, benchmark)
        else:
            scores = np.asarray(metric.score_benchmark(benchmark), dtype=np.float64)
        if scores.shape != (len(benchmark),):
            raise ValueError(f"metric {metric.name} returned {scores.shape} scores for "
                             f"{len(benchmark)} items of {benchmark.name}")
        self._count(metric, "scored")
        provenance = metric.provenance()
        if provenance.get("signature") is not None or metric.name not in self.provenance:
            self.provenance[metric.name] = provenance
        if use_cache:
            self.cache.save(fingerprint, metric.spec.text, benchmark, scores, provenance)
        return scores

    def _score_by_content(self, metric: Metric, fingerprint: str,
                          benchmark: Benchmark) -> np.ndarray:
        memo = self._memo.setdefault(fingerprint, {})
        keys = [_pair_key(i.premise, i.hypothesis, i.question) for i in benchmark.items]
        todo = {}
        for key, item in zip(keys, benchmark.items):
            if key not in memo and key not in todo:
                todo[key] = item
        if todo:
            logger.info("scoring %d pairs of %s with %s", len(todo), benchmark.name, metric.name)
            new = np.asarray(metric.score_pairs([i.premise for i in todo.values()],
                                                [i.hypothesis for i in todo.values()],
                                                [i.question for i in todo.values()]),
                             dtype=np.float64)
            if new.shape != (len(todo),):
                raise ValueError(f"metric {metric.name} returned {new.shape} scores for "
                                 f"{len(todo)} pairs")
            memo.update(zip(todo, new.tolist()))
        return np.array([memo[key] for key in keys], dtype=np.float64)


def _cell_statistics(benchmark: Benchmark, index: np.ndarray, scores: np.ndarray,
                     threshold: Optional[float], config: EvaluationConfig,
                     scores_name: str, names: Sequence[str]) -> dict:
    common = dict(n_resamples=config.n_resamples, confidence=config.confidence,
                  seed=config.seed, scores_name=scores_name)
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


def _nan_mask(metric: Metric, benchmark: Benchmark, scores: np.ndarray,
              drop_nan: bool) -> tuple[np.ndarray, Optional[str]]:
    valid = np.isfinite(scores)
    bad = int((~valid).sum())
    if not bad:
        return valid, None
    if not drop_nan:
        raise ValueError(
            f"metric {metric.name}: {bad} of {len(scores)} scores on {benchmark.name} are NaN "
            "or infinite; fix the metric or pass --drop_nan to leave those items out"
        )
    if bad == len(scores):
        return valid, f"all {bad} scores are NaN or infinite"
    return valid, f"{bad} of {len(scores)} items left out: NaN or infinite scores"


def _tuned_statistic(result: MetricResult, metric: Metric, benchmark: Benchmark,
                     index: np.ndarray, used: np.ndarray, thresholds: Optional[ThresholdSet],
                     config: EvaluationConfig) -> None:
    """Balanced accuracy at the metric's tuned threshold, into `result`."""
    if thresholds is None or not benchmark.has_labels:
        return
    threshold, note = thresholds.threshold(metric.name, benchmark.name)
    if threshold is None:
        result.note = "; ".join(filter(None, [result.note, note]))
        return
    estimate = stats.estimate("balanced_accuracy", benchmark.labels[index], used,
                              threshold=threshold, n_resamples=config.n_resamples,
                              confidence=config.confidence, seed=config.seed,
                              scores_name=metric.name)
    if note:
        estimate = dataclasses.replace(estimate, note="; ".join(filter(None, [estimate.note, note])))
    result.statistics[TUNED_STATISTIC] = dataclasses.replace(estimate, statistic=TUNED_STATISTIC)
    result.tuned_threshold = threshold


def evaluate_cell(metric: Metric, benchmark: Benchmark, scores: np.ndarray,
                  config: EvaluationConfig,
                  thresholds: Optional[ThresholdSet] = None) -> MetricResult:
    """Statistics, calibration and breakdowns of one metric on one benchmark."""
    valid, note = _nan_mask(metric, benchmark, scores, config.drop_nan)
    index = np.flatnonzero(valid)
    result = MetricResult(metric.name, benchmark.name, len(index), note=note, valid=valid)
    if not len(index):
        return result
    used = scores[index]
    result.statistics = _cell_statistics(benchmark, index, used, metric.threshold, config,
                                         metric.name, _statistic_names(benchmark))
    systems = [benchmark.items[i].system for i in index]
    if all(systems) and len(set(systems)) >= 3:
        result.statistics["system_pearson"] = stats.system_level_correlation(
            used, benchmark.ratings[index], systems, n_resamples=config.n_resamples,
            confidence=config.confidence, seed=config.seed, scores_name=metric.name)
    _tuned_statistic(result, metric, benchmark, index, used, thresholds, config)
    if (benchmark.has_labels and metric.threshold is not None
            and used.min() >= 0.0 and used.max() <= 1.0):
        result.calibration = calibration_measures.equal_width_reliability(benchmark.labels[index], used)
    for field in config.breakdowns:
        groups = _group_indices(benchmark, field, index)
        result.breakdowns[field] = {
            group: _cell_statistics(benchmark, index[members], used[members], None, config,
                                    metric.name, BREAKDOWN_STATISTICS)
            for group, members in groups.items()
        }
    return result


def _compare(metric_a: MetricResult, metric_b: MetricResult, benchmark: Benchmark,
             scores_a: np.ndarray, scores_b: np.ndarray, config: EvaluationConfig) -> Comparison:
    both = np.flatnonzero(metric_a.valid & metric_b.valid)
    names = [n for n in _statistic_names(benchmark) if n in metric_a.statistics
             and n in metric_b.statistics and n not in ("accuracy", "balanced_accuracy")]
    tests = {}
    for name in names:
        target = benchmark.labels[both] if name == "roc_auc" else benchmark.ratings[both]
        tests[name] = stats.paired_bootstrap_test(
            name, target, scores_a[both], scores_b[both], n_resamples=max(config.n_resamples, 1),
            confidence=config.confidence, seed=config.seed)
    return Comparison(metric_a.metric, metric_b.metric, benchmark.name, tests)


def _macro_averages(benchmarks: Sequence[Benchmark], metrics: Sequence[Metric], results: dict,
                    scores: dict, config: EvaluationConfig) -> dict:
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
            parts = [(b.labels[c.valid], scores[(metric.name, b.name)][c.valid], c.tuned_threshold)
                     for b, c in zip(members, cells)]
            macro[(metric.name, family)] = dataclasses.replace(stats.macro_average(
                "balanced_accuracy", parts, n_resamples=config.n_resamples,
                confidence=config.confidence, seed=config.seed, scores_name=metric.name),
                statistic=TUNED_STATISTIC)
    return macro


def _score_all(source: ScoreSource, metrics: Sequence[Metric], benchmarks: Sequence[Benchmark],
               config: EvaluationConfig) -> tuple[dict, dict]:
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
                            "--allow_partial_coverage to report it as not covered") from None
                    unaligned.append(f"{benchmark.name}: {reason}")
                logger.info("metric %s does not cover %s: %s", metric.name, benchmark.name, reason)
                results[key] = MetricResult(metric.name, benchmark.name, 0,
                                            note=f"not covered: {reason}")
        if unaligned and len(unaligned) == len(benchmarks):
            raise ValueError(f"metric {metric.name} covers none of the benchmarks "
                             f"({'; '.join(unaligned)}); check its file and ids")
    return results, all_scores


def evaluate(benchmarks: Sequence[Benchmark], metrics: Sequence[Metric],
             config: EvaluationConfig = EvaluationConfig(), *,
             cache: Optional[ScoreCache] = None,
             compare: Sequence[tuple[str, str]] = (),
             thresholds: Optional[ThresholdSet] = None,
             calibration: Optional[calibration_maps.CalibrationSet] = None) -> EvaluationReport:
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
    names = [m.name for m in metrics]
    for pair in compare:
        unknown = [n for n in pair if n not in names]
        if unknown or len(pair) != 2 or pair[0] == pair[1]:
            raise ValueError(f"--compare {list(pair)}: needs two different metric names "
                             f"from {names}")
    source = ScoreSource(cache if config.use_cache else None)
    results, all_scores = _score_all(source, metrics, benchmarks, config)
    # Statistics benchmark by benchmark (every metric reuses its resamples).
    for benchmark in benchmarks:
        for metric in metrics:
            key = (metric.name, benchmark.name)
            if key in all_scores:
                results[key] = evaluate_cell(metric, benchmark, all_scores[key], config,
                                             thresholds)
    results = {(m.name, b.name): results[(m.name, b.name)] for m in metrics for b in benchmarks}
    comparisons = []
    for name_a, name_b in compare:
        for benchmark in benchmarks:
            a, b = results[(name_a, benchmark.name)], results[(name_b, benchmark.name)]
            if a.applicable and b.applicable:
                comparisons.append(_compare(a, b, benchmark, all_scores[(name_a, benchmark.name)],
                                            all_scores[(name_b, benchmark.name)], config))
    return EvaluationReport(config, list(benchmarks), list(metrics), results, comparisons,
                            all_scores, source.counts, thresholds,
                            _macro_averages(benchmarks, metrics, results, all_scores, config),
                            calibration, _calibration_cells(benchmarks, results, all_scores,
                                                            calibration, config),
                            {m.name: source.provenance.get(m.name) or m.provenance()
                             for m in metrics})


def _tuning_items(metric: Metric, benchmark: Benchmark, source: ScoreSource,
                  config: EvaluationConfig) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(labels, scores) of a tuning benchmark without NaN scores, or None when
    the metric does not cover it."""
    try:
        scores = source.scores(metric, benchmark)
    except MetricNotApplicable as reason:
        logger.info("metric %s does not cover tuning benchmark %s: %s", metric.name,
                    benchmark.name, reason)
        return None
    valid, _ = _nan_mask(metric, benchmark, scores, config.drop_nan)
    return benchmark.labels[valid], scores[valid]


def _tune_or_warn(labels: np.ndarray, scores: np.ndarray, objective: str, what: str):
    try:
        return tune_threshold(labels, scores, objective)
    except stats.UndefinedStatistic as reason:
        logger.warning("no threshold tuned for %s: %s", what, reason)
        return None


def tune_thresholds(benchmarks: Sequence[Benchmark], metrics: Sequence[Metric],
                    config: EvaluationConfig, *, cache: Optional[ScoreCache] = None,
                    tuned_on: Sequence[str] = ()) -> ThresholdSet:
    """Tunes each metric's threshold on the labelled items of `benchmarks`.

    One threshold per metric on all their items; with `threshold_scope=
    "benchmark"` also one per benchmark. A metric that covers none of them
    gets none (its cells say so).

    Raises:
      ValueError: when no benchmark has binary labels.
    """
    labelled = [b for b in benchmarks if b.has_labels]
    if not labelled:
        raise ValueError(f"the tuning benchmarks {[b.name for b in benchmarks]} have no binary "
                         "labels; tune on a labelled split (or give a ratings threshold)")
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
                name: found for name, (labels, scores) in items.items()
                if (found := _tune_or_warn(labels, scores, objective, f"{metric.name} on {name}"))}
        pooled = _tune_or_warn(np.concatenate([labels for labels, _ in items.values()]),
                               np.concatenate([scores for _, scores in items.values()]),
                               objective, metric.name)
        if pooled is not None:
            tuned[metric.name] = pooled
    return ThresholdSet(objective, config.threshold_scope, list(tuned_on), tuned, per_benchmark)


def _thresholds(tune_on: Sequence[str], thresholds_path: Optional[str], metrics: Sequence[Metric],
                config: EvaluationConfig, cache: ScoreCache) -> Optional[ThresholdSet]:
    if tune_on and thresholds_path:
        raise ValueError("give --tune_threshold_on or --thresholds, not both")
    if thresholds_path:
        thresholds = read_thresholds(thresholds_path)
    elif tune_on:
        thresholds = tune_thresholds(load_benchmarks(tune_on), metrics, config, cache=cache,
                                     tuned_on=tune_on)
    else:
        return None
    thresholds.check_metrics([m.name for m in metrics])
    return thresholds


def _calibration_cells(benchmarks: Sequence[Benchmark], results: dict, scores: dict,
                       calibration: Optional[calibration_maps.CalibrationSet],
                       config: EvaluationConfig) -> dict:
    """(metric, benchmark) -> CalibrationCell, for every labelled benchmark a
    metric with a calibration map covers."""
    cells = {}
    for (name, benchmark_name), result in results.items():
        benchmark = next(b for b in benchmarks if b.name == benchmark_name)
        if calibration is None or name not in calibration.metrics or not (
                benchmark.has_labels and result.applicable):
            continue
        used = scores[(name, benchmark_name)][result.valid]
        cells[(name, benchmark_name)] = calibration_measures.calibration_cell(
            name, benchmark_name, calibration.metrics[name], benchmark.labels[result.valid],
            used, n_resamples=config.n_resamples, confidence=config.confidence,
            seed=config.seed)
    return cells


def fit_calibrations(specs: Sequence[str], metrics: Sequence[Metric], config: EvaluationConfig,
                     method: str, *, cache: Optional[ScoreCache] = None
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
                raise ValueError(f"--calibrate_on {metric.name}=...: the scores of {metric.name} "
                                 "are not probabilities; calibrate checkpoint or scores metrics")
            continue
        labelled = [b for b in load_benchmarks(bound[metric.name]) if b.has_labels]
        if not labelled:
            raise ValueError(f"--calibrate_on {bound[metric.name]}: no binary labels to fit "
                             f"{metric.name}'s calibration on")
        items = [pair for b in labelled if (pair := _tuning_items(metric, b, source, config))]
        if not items:
            logger.warning("no calibration for %s: it covers none of %s", metric.name,
                           bound[metric.name])
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


def run_evaluation(benchmark_specs: Sequence[str], metric_specs: Sequence[str],
                   output_dir: str, config: EvaluationConfig = EvaluationConfig(), *,
                   compare: Sequence[tuple[str, str]] = (), vocab_path: Optional[str] = None,
                   batch_size: int = 32, tune_on: Sequence[str] = (),
                   thresholds_path: Optional[str] = None, calibrate_on: Sequence[str] = (),
                   calibration_method: str = calibration_fitting.DEFAULT_METHOD) -> EvaluationReport:
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
    metrics = build_metrics(metric_specs, threshold=config.threshold, vocab_path=vocab_path,
                            batch_size=batch_size)
    # The directory is made by the first file written into it (a cache entry
    # or the report); a failed run removes the empty folders it made.
    with _removing_empty_folders(output_dir):
        cache = ScoreCache(os.path.join(output_dir, "cache"))
        # Tuning splits have the benchmarks' names (seahorse/q4 of validation and
        # of test): their scores are cached apart.
        tuning_cache = ScoreCache(os.path.join(output_dir, "cache", "tuning"))
        thresholds = _thresholds(tune_on, thresholds_path, metrics, config, tuning_cache)
        calibration = (fit_calibrations(calibrate_on, metrics, config, calibration_method,
                                        cache=tuning_cache) if calibrate_on else None)
        report = evaluate(benchmarks, metrics, config, cache=cache, compare=compare,
                          thresholds=thresholds, calibration=calibration)
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
