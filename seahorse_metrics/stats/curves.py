"""The ROC curve of scores against binary labels, for plots and threshold tuning."""

from __future__ import annotations

import numpy as np

from seahorse_metrics.stats.kernels import (
    UndefinedStatistic,
    check_same_length,
    label_vector,
    numeric_vector,
)


def roc_curve(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve points at every distinct score, highest threshold first.

    Returns:
      (fpr, tpr, thresholds); the first point is (0, 0) at threshold +inf, as
      `sklearn.metrics.roc_curve(..., drop_intermediate=False)` returns.

    Raises:
      UndefinedStatistic: Only one class is present.
    """
    label_vec = label_vector(labels)
    score_vec = numeric_vector(scores, "scores")
    n = check_same_length(labels=label_vec, scores=score_vec)
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
