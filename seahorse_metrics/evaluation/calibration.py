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

The maps and their file (`calibration.json`) live in
`seahorse_metrics.calibration`, below `scoring` and `evaluation`, and are
re-exported here; `score --calibration FILE` and `Scorer.load(...,
calibration=FILE)` apply them.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from seahorse_metrics.calibration import (  # noqa: F401 (the maps and their file, re-exported)
    CALIBRATED_SUFFIX, CALIBRATION_FORMAT, METHODS, CalibrationMap, CalibrationSet,
    calibration_from_dict, check_method, check_probabilities, maps_for, read_calibration,
    read_calibration_map, score_logits, sigmoid)
from seahorse_metrics.evaluation import stats

DEFAULT_METHOD = "temperature"
DEFAULT_BINS = 10
# log T is searched in [-_LOG_T_BOUND, _LOG_T_BOUND].
_LOG_T_BOUND = 7.0
# Bootstrap resamples are drawn this many items at a time.
_RESAMPLE_ELEMENTS = 1_000_000


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

    values = check_probabilities(scores, "temperature calibration")
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

    values = check_probabilities(scores, "Platt calibration")
    y = _binary_labels(labels, values)
    model = LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000)  # No penalty.
    model.fit(score_logits(values)[:, None], y.astype(int))
    if model.coef_[0, 0] < 0:  # A map must keep the scores' order (`calibration` refuses it).
        raise stats.UndefinedStatistic("the labels fall as the scores rise (a Platt slope of "
                                       f"{model.coef_[0, 0]:.3g}); no map keeps their order")
    return CalibrationMap("platt", {"slope": float(model.coef_[0, 0]),
                                    "intercept": float(model.intercept_[0])}, len(values))


def fit_isotonic(labels, scores) -> CalibrationMap:
    """Isotonic regression of the label on the score (non-decreasing, in [0, 1])."""
    from sklearn.isotonic import IsotonicRegression

    values = check_probabilities(scores, "isotonic calibration")
    y = _binary_labels(labels, values)
    model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    model.fit(values, y)
    return CalibrationMap("isotonic", {"x": model.X_thresholds_.tolist(),
                                       "y": model.y_thresholds_.tolist()}, len(values))


_FITTERS = {"temperature": fit_temperature, "platt": fit_platt, "isotonic": fit_isotonic}


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
    raw = check_probabilities(scores, f"metric {metric} on {benchmark}")
    versions = {"before": raw, "after": calibration_map.apply(raw)}
    y = np.asarray(labels, dtype=np.float64)
    return CalibrationCell(
        metric, benchmark, calibration_map.method, len(raw),
        ece={k: ece_estimate(y, v, n_bins=n_bins, n_resamples=n_resamples,
                             confidence=confidence, seed=seed) for k, v in versions.items()},
        brier={k: brier_score(y, v) for k, v in versions.items()},
        reliability={k: reliability(y, v, n_bins) for k, v in versions.items()})


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
