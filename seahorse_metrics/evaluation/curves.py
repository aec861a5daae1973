"""Curves for plots and reports: ROC curves and reliability (calibration) bins."""
from __future__ import annotations

import dataclasses

import numpy as np

from seahorse_metrics.evaluation.stat_kernels import (UndefinedStatistic, _check_same_length,
                                                      _label_vector, _numeric_vector)


def roc_curve(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve points at every distinct score, highest threshold first.

    Returns:
      (fpr, tpr, thresholds); the first point is (0, 0) at threshold +inf, as
      `sklearn.metrics.roc_curve(..., drop_intermediate=False)` returns.

    Raises:
      UndefinedStatistic: Only one class is present.
    """
    label_vec = _label_vector(labels)
    score_vec = _numeric_vector(scores, "scores")
    n = _check_same_length(labels=label_vec, scores=score_vec)
    n_pos = int(label_vec.sum())
    if n_pos in (0, n):
        raise UndefinedStatistic(f"only one class in the labels ({n_pos} positive of {n})")
    order = np.argsort(-score_vec, kind="stable")
    sorted_scores = score_vec[order]
    last_of_tie = np.r_[sorted_scores[1:] != sorted_scores[:-1], True]
    true_pos = np.cumsum(label_vec[order])[last_of_tie]
    false_pos = (np.arange(1, n + 1) - np.cumsum(label_vec[order]))[last_of_tie]
    fpr = np.r_[0.0, false_pos / (n - n_pos)]
    tpr = np.r_[0.0, true_pos / n_pos]
    thresholds = np.r_[np.inf, sorted_scores[last_of_tie]]
    return fpr, tpr, thresholds


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Reliability diagram data for scores read as probabilities.

    Attributes:
      bin_edges: n_bins + 1 edges over [0, 1].
      mean_score: Mean score of the items in each non-empty bin.
      positive_rate: Share of positives in each non-empty bin.
      count: Items per non-empty bin.
      ece: Expected calibration error: count-weighted mean |score - rate|.
    """

    bin_edges: list
    mean_score: list
    positive_rate: list
    count: list
    ece: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def calibration(labels, scores, n_bins: int = 10) -> Calibration:
    """Bins scores in [0, 1] into equal-width bins and compares with label rates.

    Raises:
      ValueError: Scores outside [0, 1] (they are not probabilities), NaN, or
        no items.
    """
    label_vec = _label_vector(labels)
    score_vec = _numeric_vector(scores, "scores")
    n = _check_same_length(labels=label_vec, scores=score_vec)
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
    return Calibration(edges.tolist(), mean_score.tolist(), rate.tolist(),
                       count[filled].tolist(), ece)
