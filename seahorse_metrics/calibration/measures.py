"""How calibrated scores are: two expected calibration errors, Brier score, reliability.

The expected calibration error (ECE) is the count-weighted mean gap between
the mean score and the share of yes in bins of the scores; two binnings are
reported, under two names:

* `ece_equal_mass`: 10 bins holding the same number of items each (sparse
  score ranges make no noisy bins), with a bias-corrected bootstrap interval
  (`ece_estimate`): the ECE of the calibration tables, before and after a
  map (`calibration_cell`);
* `ece_equal_width`: 10 bins of equal width over [0, 1]
  (`equal_width_reliability`): the ECE in the legend of report.html's
  reliability plots of raw scores, beside their points.

report.html explains both where it shows them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.calibration.maps import CalibrationMap, check_probabilities
from seahorse_metrics.stats.kernels import check_same_length, label_vector, numeric_vector

DEFAULT_BINS = 10
# Bootstrap resamples are drawn this many items at a time.
_RESAMPLE_ELEMENTS = 1_000_000


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
    gap_BxN = np.take_along_axis(scores_BxN, order_BxN, axis=1) - np.take_along_axis(
        labels_BxN, order_BxN, axis=1
    )
    cumulative = np.concatenate([np.zeros((len(gap_BxN), 1)), np.cumsum(gap_BxN, axis=1)], axis=1)
    edges = _bin_edges(scores_BxN.shape[1], n_bins)
    per_bin = cumulative[:, edges[1:]] - cumulative[:, edges[:-1]]
    return np.abs(per_bin).sum(axis=1) / scores_BxN.shape[1]


def ece_equal_mass(labels, scores, n_bins: int = DEFAULT_BINS) -> float:
    """ECE over equal-mass bins: sum over bins of (bin share) x |mean score - share of yes|."""
    values = np.asarray(scores, dtype=np.float64)
    if not len(values):
        raise ValueError("ECE needs at least one item")
    y = np.asarray(labels, dtype=np.float64)
    return float(_ece_of_rows(y[None], values[None], n_bins)[0])


def brier_score(labels, scores) -> float:
    """Mean squared difference between score and 0/1 label."""
    return float(
        np.mean(np.square(np.asarray(scores, np.float64) - np.asarray(labels, np.float64)))
    )


def reliability(labels, scores, n_bins: int = DEFAULT_BINS) -> dict:
    """Reliability diagram data over equal-mass bins: mean score, share of
    yes and count per bin."""
    values = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    bins = equal_mass_bins(values, n_bins)
    return {
        "mean_score": [float(values[b].mean()) for b in bins],
        "positive_rate": [float(y[b].mean()) for b in bins],
        "count": [int(len(b)) for b in bins],
    }


def ece_estimate(
    labels,
    scores,
    *,
    n_bins: int = DEFAULT_BINS,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> stats.Estimate:
    """ECE with a bias-corrected percentile bootstrap interval (items
    resampled with replacement, bins recomputed on each resample; the draws
    shifted by their mean's excess over the estimate)."""
    values = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    value = ece_equal_mass(y, values, n_bins)
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


def _bias_corrected_interval(
    draws: np.ndarray, value: float, confidence: float
) -> tuple[float, float]:
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
        return {
            "metric": self.metric,
            "benchmark": self.benchmark,
            "method": self.method,
            "n": self.n,
            "ece": {k: v.to_dict() for k, v in self.ece.items()},
            "brier": dict(self.brier),
            "reliability": dict(self.reliability),
        }


def calibration_cell(
    metric: str,
    benchmark: str,
    calibration_map: CalibrationMap,
    labels,
    scores,
    *,
    n_bins: int = DEFAULT_BINS,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> CalibrationCell:
    """ECE (with interval), Brier score and reliability data before and after the map."""
    raw = check_probabilities(scores, f"metric {metric} on {benchmark}")
    versions = {"before": raw, "after": calibration_map.apply(raw)}
    y = np.asarray(labels, dtype=np.float64)
    return CalibrationCell(
        metric,
        benchmark,
        calibration_map.method,
        len(raw),
        ece={
            k: ece_estimate(
                y, v, n_bins=n_bins, n_resamples=n_resamples, confidence=confidence, seed=seed
            )
            for k, v in versions.items()
        },
        brier={k: brier_score(y, v) for k, v in versions.items()},
        reliability={k: reliability(y, v, n_bins) for k, v in versions.items()},
    )


@dataclasses.dataclass(frozen=True)
class EqualWidthReliability:
    """Reliability diagram data over equal-width bins of [0, 1], for scores
    read as probabilities (report.html's "Calibration" plots of raw scores).

    Attributes:
      bin_edges: n_bins + 1 edges over [0, 1].
      mean_score: Mean score of the items in each non-empty bin.
      positive_rate: Share of positives in each non-empty bin.
      count: Items per non-empty bin.
      ece_equal_width: The expected calibration error over these bins:
        count-weighted mean |score - rate| (not `ece_equal_mass`: a range of
        few scores makes a noisy bin here).
    """

    bin_edges: list
    mean_score: list
    positive_rate: list
    count: list
    ece_equal_width: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def equal_width_reliability(labels, scores, n_bins: int = DEFAULT_BINS) -> EqualWidthReliability:
    """Bins scores in [0, 1] into equal-width bins and compares with label rates.

    Raises:
      ValueError: Scores outside [0, 1] (they are not probabilities), NaN, or
        no items.
    """
    label_vec = label_vector(labels)
    score_vec = numeric_vector(scores, "scores")
    n = check_same_length(labels=label_vec, scores=score_vec)
    if n == 0:
        raise ValueError("calibration needs at least one item")
    if score_vec.min() < 0.0 or score_vec.max() > 1.0:
        raise ValueError("calibration needs scores in [0, 1] (probabilities)")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.searchsorted(edges, score_vec, side="right") - 1, 0, n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    score_sum = np.bincount(bins, weights=score_vec, minlength=n_bins)
    pos_sum = np.bincount(bins, weights=label_vec.astype(np.float64), minlength=n_bins)
    filled = count > 0
    mean_score = score_sum[filled] / count[filled]
    rate = pos_sum[filled] / count[filled]
    ece = float(np.sum(count[filled] * np.abs(mean_score - rate)) / n)
    return EqualWidthReliability(
        edges.tolist(), mean_score.tolist(), rate.tolist(), count[filled].tolist(), ece
    )
