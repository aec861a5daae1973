"""Calibration maps of metric scores, fitted on a dev benchmark, and how
calibrated scores are.

P("1") of a fine-tuned metric ranks summaries well but is not a probability
one can read: 0.8 need not mean that 80% of such summaries are attributable.
A calibration map, fitted on a labelled development benchmark, turns a score
into one that is (`evaluate --calibrate_on SPEC`):

* `temperature`: `sigmoid(z / T)`, where `z = log P("1") / P("0")` is read
  from the score as its logit (exact for `normalize="pair"` scores, and
  within the mass of other tokens for full-vocabulary ones); one parameter
  T fitted by maximum likelihood, so the ranking is unchanged;
* `platt`: `sigmoid(a * z + b)`, a logistic regression on the logit
  (scikit-learn's `LogisticRegression`, unpenalised);
* `isotonic`: the monotone step function of scikit-learn's
  `IsotonicRegression`, linear between its knots and clipped outside them.

How calibrated scores are, per benchmark: the expected calibration error
over equal-mass bins (each bin holds the same number of items, so sparse
score ranges do not make noisy bins), with a bias-corrected bootstrap interval,
the Brier score, and the reliability diagram (mean score vs share of yes per
bin), before and after the map.

A calibration file (`calibration.json`, and the `calibration` entry of
report.json, which `read_calibration` reads too) records one map per
metric; `score --calibration FILE` and `Scorer.load(..., calibration=FILE)`
apply it::

    {"format": "seahorse-metrics-calibration/1", "method": "platt",
     "fitted_on": {"q4": ["seahorse:prepared:q4,split=validation"]},
     "metrics": {"q4": {"method": "platt", "n": 500,
                        "parameters": {"slope": 0.61, "intercept": -0.2}}}}
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.evaluation import stats

CALIBRATION_FORMAT = "seahorse-metrics-calibration/1"
METHODS = ("temperature", "platt", "isotonic")
DEFAULT_METHOD = "temperature"
DEFAULT_BINS = 10
CALIBRATED_SUFFIX = "_calibrated"
# Scores are clipped this far from 0 and 1 before taking their logit.
_LOGIT_EPS = 1e-7
# log T is searched in [-_LOG_T_BOUND, _LOG_T_BOUND].
_LOG_T_BOUND = 7.0
# Bootstrap resamples are drawn this many items at a time.
_RESAMPLE_ELEMENTS = 1_000_000


def score_logits(scores) -> np.ndarray:
    """log(p / (1 - p)) of scores in [0, 1], clipped to stay finite."""
    p = np.clip(np.asarray(scores, dtype=np.float64), _LOGIT_EPS, 1.0 - _LOGIT_EPS)
    return np.log(p) - np.log1p(-p)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # Stable for large |z|.


def _check_probabilities(scores, what: str) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"{what}: expected a 1-d array of scores, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{what}: NaN or infinite scores cannot be calibrated")
    if values.size and (values.min() < 0.0 or values.max() > 1.0):
        raise ValueError(f"{what}: scores must be probabilities in [0, 1] (got "
                         f"{values.min():.4g} to {values.max():.4g})")
    return values


@dataclasses.dataclass(frozen=True)
class CalibrationMap:
    """A fitted map from a metric's score to a calibrated probability.

    Attributes:
      method: One of `METHODS`.
      parameters: `{"temperature": T}`, `{"slope": a, "intercept": b}` or
        `{"x": knots, "y": values}` (isotonic).
      n: Items it was fitted on.
    """

    method: str
    parameters: dict
    n: int = 0

    def apply(self, scores) -> np.ndarray:
        """Calibrated probabilities of `scores` (probabilities in [0, 1]).

        Raises:
          ValueError: for NaN scores or scores outside [0, 1].
        """
        values = _check_probabilities(scores, f"{self.method} calibration")
        if self.method == "isotonic":
            return np.interp(values, self.parameters["x"], self.parameters["y"])
        z = score_logits(values)
        if self.method == "temperature":
            return _sigmoid(z / self.parameters["temperature"])
        return _sigmoid(self.parameters["slope"] * z + self.parameters["intercept"])

    def to_dict(self) -> dict:
        return {"method": self.method, "n": self.n, "parameters": dict(self.parameters)}


def _binary_labels(labels, scores: np.ndarray) -> np.ndarray:
    values = np.asarray(labels)
    if values.shape != scores.shape:
        raise ValueError(f"{values.shape} labels for {scores.shape} scores")
    if not np.isin(values, (0, 1, True, False)).all():
        raise ValueError("calibration needs binary labels (0/1)")
    labels01 = values.astype(np.float64)
    if labels01.min() == labels01.max():
        raise stats.UndefinedStatistic("the fitting items hold one class only")
    return labels01


def fit_temperature(labels, scores) -> CalibrationMap:
    """The temperature T minimising the log loss of `sigmoid(logit(score) / T)`."""
    from scipy.optimize import minimize_scalar

    values = _check_probabilities(scores, "temperature calibration")
    y = _binary_labels(labels, values)
    z = score_logits(values)

    def log_loss(log_t: float) -> float:
        scaled = z / np.exp(log_t)
        # -[y log s(x) + (1-y) log(1 - s(x))] = logaddexp(0, x) - y x.
        return float(np.mean(np.logaddexp(0.0, scaled) - y * scaled))

    found = minimize_scalar(log_loss, bounds=(-_LOG_T_BOUND, _LOG_T_BOUND), method="bounded",
                            options={"xatol": 1e-8})
    return CalibrationMap("temperature", {"temperature": float(np.exp(found.x))}, len(values))


def fit_platt(labels, scores) -> CalibrationMap:
    """Platt scaling: an unpenalised logistic regression on the score's logit."""
    from sklearn.linear_model import LogisticRegression

    values = _check_probabilities(scores, "Platt calibration")
    y = _binary_labels(labels, values)
    model = LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000)  # No penalty.
    model.fit(score_logits(values)[:, None], y.astype(int))
    return CalibrationMap("platt", {"slope": float(model.coef_[0, 0]),
                                    "intercept": float(model.intercept_[0])}, len(values))


def fit_isotonic(labels, scores) -> CalibrationMap:
    """Isotonic regression of the label on the score (non-decreasing, in [0, 1])."""
    from sklearn.isotonic import IsotonicRegression

    values = _check_probabilities(scores, "isotonic calibration")
    y = _binary_labels(labels, values)
    model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    model.fit(values, y)
    return CalibrationMap("isotonic", {"x": model.X_thresholds_.tolist(),
                                       "y": model.y_thresholds_.tolist()}, len(values))


_FITTERS = {"temperature": fit_temperature, "platt": fit_platt, "isotonic": fit_isotonic}


def check_method(method: str) -> str:
    """Returns `method`, or raises ValueError naming the known ones."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; choose one of {METHODS}")
    return method


def fit_calibration(method: str, labels, scores) -> CalibrationMap:
    """Fits a `method` map of `scores` to the binary `labels`.

    Raises:
      ValueError: unknown method, scores outside [0, 1], non-binary labels.
      stats.UndefinedStatistic: the labels hold one class only.
    """
    return _FITTERS[check_method(method)](labels, scores)


# ---------------------------------------------------------------------------
# How calibrated scores are.


def equal_mass_bins(scores: np.ndarray, n_bins: int = DEFAULT_BINS) -> list[np.ndarray]:
    """Item indices of up to `n_bins` bins of (nearly) equal size, by score."""
    order = np.argsort(scores, kind="stable")
    return [part for part in np.array_split(order, min(n_bins, len(order))) if len(part)]


def _bin_edges(n: int, n_bins: int) -> np.ndarray:
    """Start and end positions of `equal_mass_bins` over n sorted items."""
    k = min(n_bins, n)
    sizes = np.full(k, n // k) + (np.arange(k) < n % k)
    return np.r_[0, np.cumsum(sizes)]


def _ece_of_rows(labels_BxN: np.ndarray, scores_BxN: np.ndarray, n_bins: int) -> np.ndarray:
    """ECE of each row (one set of items per row), bins by score within a row."""
    order_BxN = np.argsort(scores_BxN, axis=1, kind="stable")
    gap_BxN = (np.take_along_axis(scores_BxN, order_BxN, axis=1)
               - np.take_along_axis(labels_BxN, order_BxN, axis=1))
    cumulative = np.concatenate([np.zeros((len(gap_BxN), 1)), np.cumsum(gap_BxN, axis=1)], axis=1)
    edges = _bin_edges(scores_BxN.shape[1], n_bins)
    per_bin = cumulative[:, edges[1:]] - cumulative[:, edges[:-1]]
    return np.abs(per_bin).sum(axis=1) / scores_BxN.shape[1]


def expected_calibration_error(labels, scores, n_bins: int = DEFAULT_BINS) -> float:
    """ECE over equal-mass bins: sum over bins of (bin share) x |mean score - share of yes|."""
    values = np.asarray(scores, dtype=np.float64)
    if not len(values):
        raise ValueError("ECE needs at least one item")
    y = np.asarray(labels, dtype=np.float64)
    return float(_ece_of_rows(y[None], values[None], n_bins)[0])


def brier_score(labels, scores) -> float:
    """Mean squared difference between score and 0/1 label."""
    return float(np.mean(np.square(np.asarray(scores, np.float64)
                                   - np.asarray(labels, np.float64))))


def reliability(labels, scores, n_bins: int = DEFAULT_BINS) -> dict:
    """Reliability diagram data over equal-mass bins: mean score, share of
    yes and count per bin."""
    values = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    bins = equal_mass_bins(values, n_bins)
    return {"mean_score": [float(values[b].mean()) for b in bins],
            "positive_rate": [float(y[b].mean()) for b in bins],
            "count": [int(len(b)) for b in bins]}


def ece_estimate(labels, scores, *, n_bins: int = DEFAULT_BINS,
                 n_resamples: int = stats.DEFAULT_RESAMPLES,
                 confidence: float = stats.DEFAULT_CONFIDENCE, seed: int = 0) -> stats.Estimate:
    """ECE with a bias-corrected percentile bootstrap interval (items
    resampled with replacement, bins recomputed on each resample; the draws
    shifted by their mean's excess over the estimate)."""
    values = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    value = expected_calibration_error(y, values, n_bins)
    if n_resamples == 0:
        return stats.Estimate("ece", value, n=len(values), confidence=confidence)
    rng = np.random.default_rng(seed)
    rows = max(1, min(n_resamples, _RESAMPLE_ELEMENTS // len(values)))
    draws = []
    for start in range(0, n_resamples, rows):
        picks = rng.integers(0, len(values), (min(rows, n_resamples - start), len(values)))
        draws.append(_ece_of_rows(y[picks], values[picks], n_bins))
    draws = np.concatenate(draws)
    low, high = _bias_corrected_interval(draws, value, confidence)
    return stats.Estimate("ece", value, low, high, len(values), n_resamples, confidence)


def _bias_corrected_interval(draws: np.ndarray, value: float,
                             confidence: float) -> tuple[float, float]:
    """The percentile interval of the draws, shifted by the bootstrap bias.

    A resample repeats items, which adds noise that an absolute error only
    ever increases: ECE's draws sit above the estimate (for well calibrated
    scores, all of them), so the plain percentile interval, and Efron's BC
    with it, can miss the estimate. The draws are shifted by their bias
    (mean draw - estimate) first; the low end is clipped at 0.
    """
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws - (draws.mean() - value), [alpha, 1.0 - alpha])
    return max(float(low), 0.0), float(high)


@dataclasses.dataclass
class CalibrationCell:
    """A metric's calibration on one benchmark, before and after its map.

    Attributes:
      metric, benchmark: Names.
      method: The map's method.
      n: Labelled items used.
      ece: "before" / "after" -> ECE estimate (equal-mass bins).
      brier: "before" / "after" -> Brier score.
      reliability: "before" / "after" -> `reliability()` data.
    """

    metric: str
    benchmark: str
    method: str
    n: int
    ece: dict
    brier: dict
    reliability: dict

    def to_dict(self) -> dict:
        return {"metric": self.metric, "benchmark": self.benchmark, "method": self.method,
                "n": self.n, "ece": {k: v.to_dict() for k, v in self.ece.items()},
                "brier": dict(self.brier), "reliability": dict(self.reliability)}


def calibration_cell(metric: str, benchmark: str, calibration_map: CalibrationMap, labels,
                     scores, *, n_bins: int = DEFAULT_BINS,
                     n_resamples: int = stats.DEFAULT_RESAMPLES,
                     confidence: float = stats.DEFAULT_CONFIDENCE,
                     seed: int = 0) -> CalibrationCell:
    """ECE (with interval), Brier score and reliability data before and after the map."""
    raw = _check_probabilities(scores, f"metric {metric} on {benchmark}")
    versions = {"before": raw, "after": calibration_map.apply(raw)}
    y = np.asarray(labels, dtype=np.float64)
    return CalibrationCell(
        metric, benchmark, calibration_map.method, len(raw),
        ece={k: ece_estimate(y, v, n_bins=n_bins, n_resamples=n_resamples,
                             confidence=confidence, seed=seed) for k, v in versions.items()},
        brier={k: brier_score(y, v) for k, v in versions.items()},
        reliability={k: reliability(y, v, n_bins) for k, v in versions.items()})


# ---------------------------------------------------------------------------
# Calibration files.


@dataclasses.dataclass
class CalibrationSet:
    """One calibration map per metric.

    Attributes:
      method: The method the maps were fitted with.
      fitted_on: Metric name -> the benchmark specs its map was fitted on.
      metrics: Metric name -> `CalibrationMap`.
      source: Where they were read from (None when fitted in this run).
    """

    method: str
    fitted_on: dict
    metrics: dict
    source: Optional[str] = None

    def check_metrics(self, names: Sequence[str]) -> None:
        """Refuses maps for metrics that are not in this run.

        Raises:
          ValueError: naming the unknown metrics and the file.
        """
        unknown = sorted(set(self.metrics) - set(names))
        if unknown:
            where = f"{self.source}: " if self.source else ""
            raise ValueError(f"{where}calibration maps for unknown metric(s) {unknown}; the "
                             f"metrics of this run are {list(names)} (name them NAME=SPEC, or "
                             "fit maps for these metrics with `evaluate --calibrate_on`)")

    def to_dict(self) -> dict:
        return {"format": CALIBRATION_FORMAT, "method": self.method,
                "fitted_on": {k: list(v) for k, v in self.fitted_on.items()},
                "metrics": {name: m.to_dict() for name, m in self.metrics.items()}}


def _map_from_dict(entry, where: str) -> CalibrationMap:
    if not isinstance(entry, Mapping) or entry.get("method") not in METHODS:
        raise ValueError(f"{where}: expected an object with a 'method' in {METHODS}")
    parameters = entry.get("parameters")
    needed = {"temperature": ("temperature",), "platt": ("slope", "intercept"),
              "isotonic": ("x", "y")}[entry["method"]]
    if not isinstance(parameters, Mapping) or any(k not in parameters for k in needed):
        raise ValueError(f"{where}: {entry['method']} needs parameters {list(needed)}")
    try:
        values = {k: np.asarray(parameters[k], dtype=np.float64) for k in needed}
    except (TypeError, ValueError):
        raise ValueError(f"{where}: parameters {list(needed)} must be numbers") from None
    if not all(np.all(np.isfinite(v)) for v in values.values()):
        raise ValueError(f"{where}: parameters must be finite")
    if entry["method"] == "temperature" and not values["temperature"] > 0:
        raise ValueError(f"{where}: the temperature must be positive")
    if entry["method"] == "isotonic" and (
            values["x"].ndim != 1 or values["x"].shape != values["y"].shape
            or not len(values["x"]) or np.any(np.diff(values["x"]) < 0)):
        raise ValueError(f"{where}: isotonic x and y must be equally long lists, x sorted")
    parameters = {k: (v.tolist() if v.ndim else float(v)) for k, v in values.items()}
    return CalibrationMap(entry["method"], parameters, int(entry.get("n", 0)))


def calibration_from_dict(data: Mapping, source: Optional[str] = None) -> CalibrationSet:
    """A `CalibrationSet` from `CalibrationSet.to_dict()` output (or a
    report.json holding one under `calibration`).

    Raises:
      ValueError: for another format or a malformed entry (naming `source`).
    """
    where = source or "calibration"
    if (isinstance(data, Mapping) and data.get("format") != CALIBRATION_FORMAT
            and isinstance(data.get("calibration"), Mapping)):
        data = data["calibration"]  # A report.json.
    if not isinstance(data, Mapping) or data.get("format") != CALIBRATION_FORMAT:
        raise ValueError(f"{where}: not a calibration file (format {CALIBRATION_FORMAT!r}) nor "
                         "a report.json with calibration maps; write one with "
                         "`evaluate --calibrate_on SPEC`")
    metrics = {name: _map_from_dict(entry, f"{where}: metric {name!r}")
               for name, entry in dict(data.get("metrics") or {}).items()}
    if not metrics:
        raise ValueError(f"{where}: holds no calibration maps")
    return CalibrationSet(str(data.get("method", "")), dict(data.get("fitted_on") or {}),
                          metrics, source)


def read_calibration(path: str) -> CalibrationSet:
    """Reads a calibration file or a report.json with calibration maps.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not JSON, or not calibration maps.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"calibration file {path} not found")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error.msg} at line {error.lineno})") from None
    return calibration_from_dict(data, path)


def maps_for(path: str, names: Sequence[str]) -> dict[str, CalibrationMap]:
    """Metric name -> map from a calibration file, for the metrics scored here.

    Every metric scored needs a map, and the file may name no other metric.

    Raises:
      ValueError: a map for a metric not scored here, or a metric without one.
      FileNotFoundError: no such file.
    """
    calibration = read_calibration(path)
    calibration.check_metrics(names)
    missing = [name for name in names if name not in calibration.metrics]
    if missing:
        raise ValueError(f"{path}: no calibration map for {missing} (it has "
                         f"{sorted(calibration.metrics)}); name the checkpoints as the "
                         "evaluated metrics (NAME=DIR)")
    return {name: calibration.metrics[name] for name in names}


def bind_specs(specs: Sequence[str], names: Sequence[str]) -> dict[str, list[str]]:
    """Metric name -> the `--calibrate_on` benchmark specs to fit its map on.

    A spec `NAME=SPEC` is for metric NAME only; a plain `SPEC` (benchmark
    specs start with `KIND:`) is for every metric without a spec of its own.

    Raises:
      ValueError: for a NAME that is not a metric of the run.
    """
    shared, own = [], {}
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if sep and ":" not in name:
            if name not in names:
                raise ValueError(f"--calibrate_on {spec}: no metric named {name!r} in this run "
                                 f"({list(names)})")
            own.setdefault(name, []).append(rest)
        else:
            shared.append(spec)
    return {name: own.get(name, shared) for name in names if own.get(name, shared)}
