"""System-level correlation: metric and human means per summarization system,
correlated across systems, with a bootstrap over items stratified by system."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import numpy as np

from seahorse_metrics.stats.kernels import (
    CHUNK_ELEMENTS,
    check_same_length,
    kendall_kernel,
    numeric_vector,
    weighted_pearson,
)
from seahorse_metrics.stats.statistics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    Estimate,
    interval_from_draws,
    validate_bootstrap_args,
)

SYSTEM_METHODS = ("pearson", "spearman", "kendall")


def _system_means(values: np.ndarray, weights: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    return (w * values) @ onehot / (w @ onehot)


def _nearly_constant_rows(values: np.ndarray) -> np.ndarray:
    # Means of equal values can differ in the last bits; a correlation of that
    # rounding noise would be meaningless.
    scale = np.maximum(1.0, np.abs(values).max(axis=1))
    return np.ptp(values, axis=1) <= 1e-12 * scale


def _row_correlation(method: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Correlation per row of two [B, S] matrices (S systems), NaN if constant."""
    rows, size = x.shape
    constant = _nearly_constant_rows(x) | _nearly_constant_rows(y)
    if method == "kendall":
        # Few systems: one small kernel call per resample is cheap.
        ones = np.ones((1, size), dtype=np.int64)
        return np.array(
            [
                np.nan if constant[row] else kendall_kernel(x[row], y[row])(ones)[0]
                for row in range(rows)
            ]
        )
    if method == "spearman":
        from scipy.stats import rankdata

        x, y = rankdata(x, axis=1), rankdata(y, axis=1)
    r = weighted_pearson(x, y, np.ones((rows, size)))
    r[constant] = np.nan
    return r


def system_level_correlation(
    scores,
    ratings,
    systems: Sequence[str],
    *,
    method: str = "pearson",
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    scores_name: str = "the metric",
) -> Estimate:
    """Correlation between per-system mean score and per-system mean rating.

    The interval resamples items within each system (stratified), so every
    system keeps its size in every resample.

    Args:
      scores: Metric score per item.
      ratings: Human rating per item (0/1 labels included).
      systems: The summarization system of each item.
      method: "pearson", "spearman" or "kendall".
      n_resamples: Bootstrap resamples; 0 skips the interval.
      confidence: Nominal coverage.
      seed: Resampling seed.
      scores_name: Name for error messages.

    Returns:
      An `Estimate` named `system_<method>` whose `n` is the number of systems;
      None with a note for fewer than 3 systems or constant system means.
    """
    if method not in SYSTEM_METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {SYSTEM_METHODS}")
    validate_bootstrap_args(n_resamples, confidence)
    score_vec, rating_vec, system_index, num_systems = _system_inputs(
        scores, ratings, systems, scores_name
    )
    name = f"system_{method}"
    if num_systems < 3:
        return _undefined(
            name, num_systems, confidence, f"needs at least 3 systems, got {num_systems}"
        )
    onehot = np.eye(num_systems)[system_index]

    def correlation(weights: np.ndarray) -> np.ndarray:
        return _row_correlation(
            method,
            _system_means(score_vec, weights, onehot),
            _system_means(rating_vec, weights, onehot),
        )

    point = correlation(np.ones((1, len(score_vec)), dtype=np.int64))[0]
    if not np.isfinite(point):
        return _undefined(
            name, num_systems, confidence, "system means of scores or ratings are constant"
        )
    low, high, used, note = _stratified_interval(
        correlation, system_index, num_systems, n_resamples, confidence, seed
    )
    return Estimate(name, float(point), low, high, num_systems, used, confidence, note)


def _undefined(name: str, num_systems: int, confidence: float, reason: str) -> Estimate:
    """A system-level estimate without a value, saying why."""
    return Estimate(name, None, n=num_systems, confidence=confidence, note=f"undefined: {reason}")


def _stratified_interval(
    correlation: Callable[[np.ndarray], np.ndarray],
    system_index: np.ndarray,
    num_systems: int,
    n_resamples: int,
    confidence: float,
    seed: int,
) -> tuple:
    """`interval_from_draws` of `correlation` over resamples of the items
    within each system."""
    draws = [
        correlation(w) for w in _stratified_weights(system_index, num_systems, n_resamples, seed)
    ]
    return interval_from_draws(
        np.concatenate(draws) if draws else np.zeros(0),
        n_resamples,
        confidence,
        "constant system means",
    )


def _system_inputs(
    scores, ratings, systems: Sequence[str], scores_name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Checked score and rating vectors, each item's system index, and the number of systems."""
    score_vec = numeric_vector(scores, scores_name)
    rating_vec = numeric_vector(ratings, "ratings")
    system_list = [str(s) for s in systems]
    check_same_length(scores=score_vec, ratings=rating_vec, systems=np.asarray(system_list))
    names, system_index = np.unique(
        np.asarray(system_list, dtype=object).astype(str), return_inverse=True
    )
    return score_vec, rating_vec, system_index, len(names)


def _stratified_weights(
    system_index: np.ndarray, num_systems: int, n_resamples: int, seed: int
) -> Iterator[np.ndarray]:
    """[rows, n] count matrices of resamples drawn within each system, in chunks."""
    rng = np.random.default_rng(seed)
    n = len(system_index)
    members = [np.flatnonzero(system_index == s) for s in range(num_systems)]
    chunk = max(1, min(n_resamples, CHUNK_ELEMENTS // n))
    for begin in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - begin)
        weights = np.zeros((rows, n), dtype=np.int64)
        for items in members:
            picks = items[rng.integers(0, len(items), size=(rows, len(items)))]
            np.add.at(weights, (np.arange(rows)[:, None], picks), 1)
        yield weights
