"""Decision thresholds tuned on one benchmark split and applied to another.

This is the LLM-AggreFact leaderboard's protocol: a metric's threshold is
chosen on the development split (the cut that maximises balanced accuracy
there) and balanced accuracy is reported on the test split at that
threshold. `score >= threshold` predicts yes (the positive class is the
human label yes / consistent).

Objectives (`--threshold_objective`):

* `balanced_accuracy`: mean of the two classes' recalls (the default);
* `f1`: F1 of the yes class;
* `precision@R`: precision of the yes class among the cuts whose recall is
  at least R (e.g. `precision@0.9`).

The chosen threshold lies halfway between the lowest score predicted yes and
the next lower score on the tuning items, so it makes exactly the tuning
predictions that maximise the objective and does not sit on a tuning score.

A thresholds file (`thresholds.json`, and the `thresholds` entry of
report.json, which `read_thresholds` reads too) records, per metric, the
threshold tuned on all tuning items and, with `scope="benchmark"`, one per
tuning benchmark (applied to the test benchmark of the same name, as for the
per-dataset columns of LLM-AggreFact)::

    {"format": "seahorse-metrics-thresholds/1", "objective": "balanced_accuracy",
     "scope": "metric", "tuned_on": ["aggrefact:llm_aggrefact:split=dev"],
     "metrics": {"q4": {"threshold": 0.41, "value": 0.78, "n": 30420,
                        "benchmarks": {}}}}
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.calibration.maps import refuse_unknown_metrics
from seahorse_metrics.io.json_files import read_json

THRESHOLDS_FORMAT = "seahorse-metrics-thresholds/1"
OBJECTIVES = ("balanced_accuracy", "f1", "precision@R")
SCOPES = ("metric", "benchmark")
_PRECISION_PREFIX = "precision@"


def check_probability_threshold(value, what: str) -> float:
    """`value` as a threshold on probabilities (P("1")): a number in [0, 1].

    Args:
      value: The threshold as given (a string, `nan` or 1.5 are refused: a
        threshold above 1 would mark every row no, below 0 every row yes).
      what: What it is, for the message (e.g. "--threshold").

    Returns:
      It as a float.

    Raises:
      ValueError: naming `what`, for anything but a number in [0, 1].
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ValueError(
            f"{what} must be a number in [0, 1], got {value!r} ({type(value).__name__})"
        )
    if not 0.0 <= float(value) <= 1.0:  # NaN fails too
        raise ValueError(
            f"{what} must be a number in [0, 1] (scores are probabilities; a "
            f"score at or above it counts as yes), got {value!r}"
        )
    return float(value)


@dataclasses.dataclass(frozen=True)
class TunedThreshold:
    """A threshold and how it did on the items it was tuned on.

    Attributes:
      threshold: `score >= threshold` predicts yes.
      value: The objective at that threshold on the tuning items (None when
        a thresholds file does not say).
      n: Tuning items (0 when a thresholds file does not say).
    """

    threshold: float
    value: Optional[float]
    n: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def check_objective(objective: str) -> Optional[float]:
    """R of a `precision@R` objective, None for the others.

    Raises:
      ValueError: for an unknown objective or an R outside (0, 1].
    """
    if objective in ("balanced_accuracy", "f1"):
        return None
    if objective.startswith(_PRECISION_PREFIX):
        try:
            recall = float(objective[len(_PRECISION_PREFIX) :])
        except ValueError:
            recall = None
        if recall is not None and 0.0 < recall <= 1.0:
            return recall
    raise ValueError(
        f"unknown threshold objective {objective!r}; choose balanced_accuracy, f1 "
        "or precision@R with R in (0, 1], e.g. precision@0.9"
    )


def _objective_values(
    objective: str, true_pos: np.ndarray, false_pos: np.ndarray, n_pos: int, n_neg: int
) -> np.ndarray:
    """The objective at every cut, from the counts of predicted-yes items."""
    recall = true_pos / n_pos
    if objective == "balanced_accuracy":
        return (recall + 1.0 - false_pos / n_neg) / 2.0
    if objective == "f1":
        return 2.0 * true_pos / (2.0 * true_pos + false_pos + (n_pos - true_pos))
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = true_pos / (true_pos + false_pos)
    return np.where(recall >= check_objective(objective) - 1e-12, precision, -np.inf)


def tune_threshold(labels, scores, objective: str = "balanced_accuracy") -> TunedThreshold:
    """The threshold that maximises `objective` on these items.

    Every distinct score is a candidate cut (`score >= cut` predicts yes);
    among equal objective values the highest cut wins. The threshold
    returned is halfway between the winning cut and the next lower score.

    Args:
      labels: Binary human labels (True = yes).
      scores: Metric scores, one per item.
      objective: One of `OBJECTIVES` (see the module docstring).

    Raises:
      stats.UndefinedStatistic: when the labels hold one class only.
      ValueError: for NaN scores, non-binary labels or an unknown objective.
    """
    check_objective(objective)
    label_vec = np.asarray(labels, dtype=bool)
    fpr, tpr, cuts = stats.roc_curve(label_vec, scores)
    n_pos = int(label_vec.sum())
    n_neg = len(label_vec) - n_pos
    # Index 0 is the cut +inf (nothing predicted yes): never a usable threshold.
    values = _objective_values(objective, tpr[1:] * n_pos, fpr[1:] * n_neg, n_pos, n_neg)
    best = int(np.argmax(values))
    cut = float(cuts[1 + best])
    lower = float(cuts[2 + best]) if best + 2 < len(cuts) else None
    threshold = cut
    if lower is not None and lower < (lower + cut) / 2.0 <= cut:
        threshold = (lower + cut) / 2.0
    return TunedThreshold(threshold, float(values[best]), len(label_vec))


@dataclasses.dataclass
class ThresholdSet:
    """Thresholds per metric (and per benchmark with `scope="benchmark"`).

    Attributes:
      objective: What the thresholds maximise.
      scope: `metric` (one threshold per metric, tuned on all tuning items)
        or `benchmark` (also one per tuning benchmark, used for the test
        benchmark of the same name).
      tuned_on: The benchmark specs they were tuned on.
      metrics: Metric name -> threshold tuned on all tuning items.
      per_benchmark: Metric name -> benchmark name -> threshold.
      source: Where they were read from (None when tuned in this run).
    """

    objective: str
    scope: str
    tuned_on: list
    metrics: dict
    per_benchmark: dict = dataclasses.field(default_factory=dict)
    source: Optional[str] = None

    def threshold(self, metric: str, benchmark: str) -> tuple[Optional[float], Optional[str]]:
        """The threshold for a metric on a benchmark, and a note when it is
        not the one the scope asks for (None, note when the metric has none)."""
        if metric not in self.metrics:
            return None, f"no threshold was tuned for {metric}"
        if self.scope == "benchmark":
            tuned = self.per_benchmark.get(metric, {}).get(benchmark)
            if tuned is not None:
                return tuned.threshold, None
            return self.metrics[metric].threshold, (
                f"no tuning benchmark named {benchmark}: the threshold tuned on all tuning "
                "items is used"
            )
        return self.metrics[metric].threshold, None

    def check_metrics(self, names: Sequence[str]) -> None:
        """Refuses thresholds for metrics that are not in this run.

        Raises:
          ValueError: naming the unknown metrics and the file.
        """
        refuse_unknown_metrics(
            self.metrics, names, self.source, "thresholds", "name them with NAME=SPEC"
        )

    def to_dict(self) -> dict:
        return {
            "format": THRESHOLDS_FORMAT,
            "objective": self.objective,
            "scope": self.scope,
            "tuned_on": list(self.tuned_on),
            "metrics": {
                name: dict(
                    tuned.to_dict(),
                    benchmarks={
                        benchmark: t.to_dict()
                        for benchmark, t in self.per_benchmark.get(name, {}).items()
                    },
                )
                for name, tuned in self.metrics.items()
            },
        }


def _tuned(entry, where: str) -> TunedThreshold:
    threshold = entry.get("threshold") if isinstance(entry, Mapping) else None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ValueError(
            f"{where}: expected an object with a numeric 'threshold', got {threshold!r}"
        )
    threshold = float(threshold)
    if not np.isfinite(threshold):
        raise ValueError(f"{where}: the threshold {threshold} is not finite")
    value = entry.get("value")
    return TunedThreshold(
        threshold, None if value is None else float(value), int(entry.get("n", 0))
    )


def thresholds_from_dict(data: Mapping, source: Optional[str] = None) -> ThresholdSet:
    """A `ThresholdSet` from `ThresholdSet.to_dict()` output (or a report.json
    holding one under `thresholds`).

    Raises:
      ValueError: for another format or a malformed entry (naming `source`).
    """
    where = source or "thresholds"
    if (
        isinstance(data, Mapping)
        and data.get("format") != THRESHOLDS_FORMAT
        and isinstance(data.get("thresholds"), Mapping)
    ):
        data = data["thresholds"]  # A report.json.
    if not isinstance(data, Mapping) or data.get("format") != THRESHOLDS_FORMAT:
        raise ValueError(
            f"{where}: not a thresholds file (format {THRESHOLDS_FORMAT!r}) nor a "
            "report.json with tuned thresholds; write one with "
            "`evaluate --tune_threshold_on SPEC`"
        )
    metrics, per_benchmark = {}, {}
    for name, entry in dict(data.get("metrics") or {}).items():
        metrics[name] = _tuned(entry, f"{where}: metric {name!r}")
        per_benchmark[name] = {
            benchmark: _tuned(value, f"{where}: metric {name!r}, benchmark {benchmark!r}")
            for benchmark, value in dict(entry.get("benchmarks") or {}).items()
        }
    scope = data.get("scope", "metric")
    if scope not in SCOPES:
        raise ValueError(f"{where}: unknown scope {scope!r}; expected one of {SCOPES}")
    return ThresholdSet(
        str(data.get("objective", "balanced_accuracy")),
        scope,
        list(data.get("tuned_on") or []),
        metrics,
        per_benchmark,
        source,
    )


def read_thresholds(path: str) -> ThresholdSet:
    """Reads a thresholds file or a report.json with tuned thresholds.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not JSON, or not thresholds.
    """
    return thresholds_from_dict(read_json(path, "thresholds file"), path)


def read_decision_thresholds(value: Optional[str], names: Sequence[str]) -> dict[str, float]:
    """Metric name -> threshold from a `--threshold` value: a number for
    every metric, or a thresholds file (or report.json) by metric name.

    A file may hold more metrics than are scored here (those are not used);
    every metric scored needs a threshold in it.

    Raises:
      ValueError: for a threshold that is no number in [0, 1] (NaN, 1.5), or a
        file without a threshold for a metric scored here.
      FileNotFoundError: for a path that does not exist.
    """
    if value is None:
        return {}
    try:
        number = float(value)
    except ValueError:
        number = None
    if number is not None:
        number = check_probability_threshold(number, "--threshold")
        return {name: number for name in names}
    thresholds = read_thresholds(value)
    missing = [name for name in names if name not in thresholds.metrics]
    if missing:
        raise ValueError(
            f"{value}: no threshold for {missing} (it has {sorted(thresholds.metrics)});"
            " name the checkpoints as the evaluated metrics (NAME=DIR)"
        )
    return {
        name: check_probability_threshold(
            thresholds.metrics[name].threshold, f"{value}: the threshold of {name!r}"
        )
        for name in names
    }
