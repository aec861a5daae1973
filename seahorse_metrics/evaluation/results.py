"""The result types of a meta-evaluation, shared by the runner and the report.

`run` computes an `EvaluationReport` (its `MetricResult` cells and paired
`Comparison`s under an `EvaluationConfig`); `report` writes it. Both import
these types from here, so the arrows run one way: run -> report -> results.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.calibration import maps as calibration_maps
from seahorse_metrics.calibration import measures as calibration_measures
from seahorse_metrics.calibration import thresholds as thresholds_lib
from seahorse_metrics.option_names import option

# Item fields a result can be broken down by.
BREAKDOWNS = ("lang", "source", "system", "subset")
# Balanced accuracy at a threshold tuned on another benchmark (thresholds.py).
TUNED_STATISTIC = "tuned_balanced_accuracy"
# Rows of a benchmark's table in report.html, at most.
DEFAULT_BROWSER_ROWS = 1000


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """Options of a meta-evaluation run.

    Attributes:
      n_resamples: Bootstrap resamples per interval and paired test.
      confidence: Interval coverage.
      seed: Resampling seed; every metric sees the same resamples of a benchmark.
      threshold: Accuracy threshold of checkpoint and scores-file metrics.
      drop_nan: Leave out items a metric scored NaN/inf (counted in the
        report) instead of failing.
      breakdowns: Item fields to break results down by (`BREAKDOWNS`).
      use_cache: Read and write the score cache.
      alpha: Significance level of the paired tests.
      threshold_objective: What tuned thresholds maximise (`thresholds.OBJECTIVES`).
      threshold_scope: `metric` (one tuned threshold per metric) or
        `benchmark` (one per tuning benchmark, applied to the benchmark of
        the same name).
      browser_rows: Items per benchmark in report.html's table (a sample
        when there are more; 0 = no table).
      allow_partial_coverage: Report a scores-file metric that has no scores
        for a benchmark as "not covered" instead of failing (it must still
        cover at least one benchmark).
    """

    n_resamples: int = stats.DEFAULT_RESAMPLES
    confidence: float = stats.DEFAULT_CONFIDENCE
    seed: int = 0
    threshold: float = 0.5
    drop_nan: bool = False
    breakdowns: tuple[str, ...] = BREAKDOWNS
    use_cache: bool = True
    alpha: float = 0.05
    threshold_objective: str = "balanced_accuracy"
    threshold_scope: str = "metric"
    browser_rows: int = DEFAULT_BROWSER_ROWS
    allow_partial_coverage: bool = False

    def __post_init__(self):
        thresholds_lib.check_objective(self.threshold_objective)
        thresholds_lib.check_probability_threshold(
            self.threshold, option("threshold", "--threshold")
        )
        if self.threshold_scope not in thresholds_lib.SCOPES:
            raise ValueError(
                f"{option('threshold_scope', '--threshold_scope')} must be one of "
                f"{thresholds_lib.SCOPES}, got "
                f"{self.threshold_scope!r}"
            )
        if self.browser_rows < 0:
            raise ValueError(
                f"{option('browser_rows', '--browser_rows')} must be >= 0, got {self.browser_rows}"
            )
        unknown = sorted(set(self.breakdowns) - set(BREAKDOWNS))
        if unknown:
            raise ValueError(f"unknown breakdowns {unknown}; choose from {BREAKDOWNS}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.n_resamples < 0:
            raise ValueError(f"n_resamples must be >= 0, got {self.n_resamples}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")


@dataclasses.dataclass
class MetricResult:
    """Everything computed for one metric on one benchmark.

    Attributes:
      metric: Metric name.
      benchmark: Benchmark name.
      n: Items the statistics use (after NaN drops).
      statistics: Statistic name -> estimate, in report order.
      note: Why the cell is empty (metric not applicable) or what was dropped.
      calibration: Reliability data when the scores are probabilities.
      breakdowns: Field -> group -> statistic -> estimate.
      valid: Mask over the benchmark's items that were used.
      tuned_threshold: The tuned threshold applied here, if any.
    """

    metric: str
    benchmark: str
    n: int
    statistics: dict = dataclasses.field(default_factory=dict)
    note: Optional[str] = None
    calibration: Optional[calibration_measures.EqualWidthReliability] = None
    breakdowns: dict = dataclasses.field(default_factory=dict)
    valid: Optional[np.ndarray] = None
    tuned_threshold: Optional[float] = None

    @property
    def applicable(self) -> bool:
        return bool(self.statistics)

    def to_dict(self) -> dict:
        return {
            "metric": self.metric,
            "benchmark": self.benchmark,
            "n": self.n,
            "note": self.note,
            "tuned_threshold": self.tuned_threshold,
            "statistics": {k: v.to_dict() for k, v in self.statistics.items()},
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "breakdowns": {
                field: {
                    group: {k: v.to_dict() for k, v in by_stat.items()}
                    for group, by_stat in groups.items()
                }
                for field, groups in self.breakdowns.items()
            },
        }


@dataclasses.dataclass
class Comparison:
    """Paired tests of metric A against metric B on one benchmark."""

    metric_a: str
    metric_b: str
    benchmark: str
    tests: dict  # statistic -> stats.PairedTest

    def to_dict(self) -> dict:
        return {
            "metric_a": self.metric_a,
            "metric_b": self.metric_b,
            "benchmark": self.benchmark,
            "tests": {k: v.to_dict() for k, v in self.tests.items()},
        }


@dataclasses.dataclass
class EvaluationReport:
    """The outcome of a run, as the report writers read it.

    Attributes:
      config: The run's options.
      benchmarks: Benchmarks in column order.
      metrics: Metrics in row order.
      results: (metric name, benchmark name) -> MetricResult.
      comparisons: Paired tests requested with `compare`.
      scores: (metric name, benchmark name) -> scores in item order.
      scoring: Per metric, how many benchmarks came from the cache or were scored.
      thresholds: The tuned (or read) thresholds, if any.
      macro: (metric name, family) -> Estimate of the mean tuned balanced
        accuracy over the family's benchmarks (families of 2 or more).
      calibration: The calibration maps fitted (`--calibrate_on`), if any.
      calibration_cells: (metric name, benchmark name) -> CalibrationCell
        (ECE, Brier score, reliability before and after the metric's map).
      provenance: Metric name -> what produced its scores: {"signature"}
        (`scoring.signature`; None where unknown), and "int8_check".
    """

    config: EvaluationConfig
    benchmarks: list
    metrics: list
    results: dict
    comparisons: list
    scores: dict
    scoring: dict
    thresholds: Optional[thresholds_lib.ThresholdSet] = None
    macro: dict = dataclasses.field(default_factory=dict)
    calibration: Optional[calibration_maps.CalibrationSet] = None
    calibration_cells: dict = dataclasses.field(default_factory=dict)
    provenance: dict = dataclasses.field(default_factory=dict)

    def result(self, metric: str, benchmark: str) -> MetricResult:
        return self.results[(metric, benchmark)]
