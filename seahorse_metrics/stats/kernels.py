"""The weighted kernels behind `seahorse_metrics.stats`, and their input checks.

Each kernel maps bootstrap weights W [B, n] (how often each item occurs in
resample b) to the statistic's value per resample [B] (NaN where undefined);
the point estimate is W = ones([1, n]); `resample_weights` draws them.
`stats` prepares inputs and builds intervals with them.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Iterator

import numpy as np

# Group sums over at most this many distinct values use a matrix product.
_FEW_GROUPS = 16
# Elements of one chunk of the [B, n] weight matrix: bounds memory to tens of
# MB whatever the benchmark size.
CHUNK_ELEMENTS = 1_000_000
# Resample weights of at most this many elements are kept for reuse: every
# statistic and metric on a benchmark of the same size sees the same resamples.
_CACHED_WEIGHT_ELEMENTS = 4_000_000


class UndefinedStatistic(ValueError):
    """The statistic has no value on these inputs (one class, constant values).

    Attributes:
      reason: Human-readable explanation, suitable for a report note.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------------------
# Input checks.


def numeric_vector(values, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    bad = int(np.count_nonzero(~np.isfinite(array)))
    if bad:
        raise ValueError(
            f"{what}: {bad} of {array.size} values are NaN or infinite; "
            "remove or fix those items before computing statistics"
        )
    return array


def label_vector(values, what: str = "labels") -> np.ndarray:
    array = np.asarray(values)
    if array.dtype == bool:
        return array if array.ndim == 1 else numeric_vector(array, what).astype(bool)
    numeric = numeric_vector(array, what)
    if not np.all((numeric == 0) | (numeric == 1)):
        raise ValueError(f"{what} must be binary (bool or 0/1); got other values")
    return numeric.astype(bool)


def check_same_length(**arrays: np.ndarray) -> int:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"inputs differ in length: {lengths}")
    return next(iter(lengths.values()))


# ---------------------------------------------------------------------------
# Weighted kernels: each maps weights W [B, n] to values [B] (NaN = undefined
# on that resample). A point estimate is W = ones([1, n]).


class TieGroups:
    """Items grouped by equal value, groups in increasing value order."""

    def __init__(self, values: np.ndarray):
        self.order = np.argsort(values, kind="stable")
        sorted_values = values[self.order]
        new_group = np.empty(len(values), dtype=bool)
        new_group[:1] = True
        new_group[1:] = sorted_values[1:] != sorted_values[:-1]
        self.starts = np.flatnonzero(new_group)
        group_of_sorted = np.cumsum(new_group) - 1
        self.group_of_item = np.empty(len(values), dtype=np.int64)
        self.group_of_item[self.order] = group_of_sorted
        self.num_groups = len(self.starts)
        self._one_hot = None
        if self.num_groups <= _FEW_GROUPS:
            self._one_hot = np.zeros((len(values), self.num_groups))
            self._one_hot[np.arange(len(values)), self.group_of_item] = 1.0

    def group_weights(self, weights: np.ndarray) -> np.ndarray:
        """Total weight of each group, [B, G]."""
        if self.num_groups == weights.shape[1]:
            return weights[:, self.order]  # no ties
        if self._one_hot is not None:
            # Few groups (labels, Likert ratings): one matrix product.
            return weights @ self._one_hot
        return np.add.reduceat(weights[:, self.order], self.starts, axis=1)

    def is_constant(self, weights: np.ndarray) -> np.ndarray:
        """Whether all the weight of a row sits on one value, [B]."""
        total = weights.sum(axis=1)
        if self.num_groups == weights.shape[1]:
            return weights.max(axis=1) == total
        return self.group_weights(weights).max(axis=1) == total

    def average_ranks(self, weights: np.ndarray) -> np.ndarray:
        """Average (tie-aware, 1-based) rank of every item within each resample, [B, n]."""
        group_w = self.group_weights(weights).astype(np.float64)
        below = np.cumsum(group_w, axis=1) - group_w
        group_rank = below + (group_w + 1.0) / 2.0
        return group_rank[:, self.group_of_item]

    def tied_pairs(self, weights: np.ndarray) -> np.ndarray:
        """Number of pairs of (resampled) items with equal value, [B]."""
        c = self.group_weights(weights).astype(np.int64)
        return (c * (c - 1) // 2).sum(axis=1)


def weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson r per row; x and y are [n] or [B, n]."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum(axis=1)
    mean_x = (w * x).sum(axis=1) / total
    mean_y = (w * y).sum(axis=1) / total
    dx = x - mean_x[:, None]
    dy = y - mean_y[:, None]
    sxx = (w * dx * dx).sum(axis=1)
    syy = (w * dy * dy).sum(axis=1)
    sxy = (w * dx * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = sxy / np.sqrt(sxx * syy)
    return np.clip(r, -1.0, 1.0)


def auc_kernel(labels: np.ndarray, scores: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """AUC = P(score+ > score-) + P(score+ == score-)/2, i.e. sklearn's trapezoid."""
    groups = TieGroups(scores)
    positive = labels.astype(np.float64)
    negative = 1.0 - positive

    def kernel(weights: np.ndarray) -> np.ndarray:
        w = np.asarray(weights, dtype=np.float64)
        pos = groups.group_weights(w * positive)
        neg = groups.group_weights(w * negative)
        neg_below = np.cumsum(neg, axis=1) - neg
        wins = (pos * (neg_below + 0.5 * neg)).sum(axis=1)
        n_pos, n_neg = pos.sum(axis=1), neg.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            auc = wins / (n_pos * n_neg)
        auc[(n_pos == 0) | (n_neg == 0)] = np.nan
        return auc

    return kernel


def pearson_kernel(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    x_groups, y_groups = TieGroups(x), TieGroups(y)

    def kernel(weights: np.ndarray) -> np.ndarray:
        r = weighted_pearson(x, y, weights)
        r[x_groups.is_constant(weights) | y_groups.is_constant(weights)] = np.nan
        return r

    return kernel


def spearman_kernel(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    x_groups, y_groups = TieGroups(x), TieGroups(y)

    def kernel(weights: np.ndarray) -> np.ndarray:
        r = weighted_pearson(
            x_groups.average_ranks(weights), y_groups.average_ranks(weights), weights
        )
        r[x_groups.is_constant(weights) | y_groups.is_constant(weights)] = np.nan
        return r

    return kernel


def count_inversions(sequences: np.ndarray) -> np.ndarray:
    """Pairs i < j with seq[i] > seq[j] in every row of a [B, n] int array.

    Radix-style, most significant bit first: at each bit, rows are kept
    stably partitioned by the bits above it, and every 1-bit element that
    precedes a 0-bit element within the same prefix group is one inversion
    decided at that bit. O(n log(max)) array operations per row, no Python
    loop over items.
    """
    num_rows, n = sequences.shape
    total = np.zeros(num_rows, dtype=np.int64)
    if n < 2:
        return total
    values = sequences.astype(np.int64)
    positions = np.arange(n)
    for bit in range(int(values.max()).bit_length() - 1, -1, -1):
        prefix = values >> (bit + 1)
        bits = (values >> bit) & 1
        starts_group = np.ones((num_rows, n), dtype=bool)
        starts_group[:, 1:] = prefix[:, 1:] != prefix[:, :-1]
        ends_group = np.ones((num_rows, n), dtype=bool)
        ends_group[:, :-1] = starts_group[:, 1:]
        start = np.maximum.accumulate(np.where(starts_group, positions, 0), axis=1)
        end = np.minimum.accumulate(np.where(ends_group, positions, n - 1)[:, ::-1], axis=1)[
            :, ::-1
        ]
        ones_through = np.cumsum(bits, axis=1)
        ones_before_pos = ones_through - bits
        ones_before_start = np.take_along_axis(ones_before_pos, start, axis=1)
        ones_before = ones_before_pos - ones_before_start
        is_zero = bits == 0
        total += np.where(is_zero, ones_before, 0).sum(axis=1)
        ones_in_group = np.take_along_axis(ones_through, end, axis=1) - ones_before_start
        zeros_in_group = (end - start + 1) - ones_in_group
        zeros_before = (positions - start) - ones_before
        new_pos = start + np.where(is_zero, zeros_before, zeros_in_group + ones_before)
        partitioned = np.empty_like(values)
        np.put_along_axis(partitioned, new_pos, values, axis=1)
        values = partitioned
    return total


def kendall_kernel(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Kendall tau-b as scipy computes it (discordant pairs, x/y/joint ties)."""
    x_groups, y_groups = TieGroups(x), TieGroups(y)
    joint = x_groups.group_of_item * y_groups.num_groups + y_groups.group_of_item
    joint_groups = TieGroups(joint.astype(np.float64))
    by_x_then_y = np.lexsort((y, x))
    y_rank = y_groups.group_of_item

    def kernel(weights: np.ndarray) -> np.ndarray:
        counts = weights.astype(np.int64)
        rows = counts.shape[0]
        per_row = counts.sum(axis=1)
        if not np.all(per_row == per_row[0]):
            raise ValueError("Kendall weights must have equal row sums")
        # Each resample as a sequence sorted by (x, y): items repeated by
        # their weight, in the precomputed order; pairs tied in x are in
        # increasing y, so they are never counted as inversions.
        repeated = np.repeat(np.tile(by_x_then_y, rows), counts[:, by_x_then_y].ravel())
        sequences = y_rank[repeated].reshape(rows, int(per_row[0]))
        discordant = count_inversions(sequences)
        pairs = per_row * (per_row - 1) // 2
        x_ties = x_groups.tied_pairs(counts)
        y_ties = y_groups.tied_pairs(counts)
        joint_ties = joint_groups.tied_pairs(counts)
        con_minus_dis = pairs - x_ties - y_ties + joint_ties - 2 * discordant
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = (
                con_minus_dis
                / np.sqrt((pairs - x_ties).astype(np.float64))
                / np.sqrt((pairs - y_ties).astype(np.float64))
            )
        tau[(pairs - x_ties == 0) | (pairs - y_ties == 0)] = np.nan
        return np.clip(tau, -1.0, 1.0)

    return kernel


def accuracy_kernel(labels: np.ndarray, scores: np.ndarray, threshold: float):
    correct = ((scores >= threshold) == labels).astype(np.float64)

    def kernel(weights: np.ndarray) -> np.ndarray:
        w = np.asarray(weights, dtype=np.float64)
        return (w * correct).sum(axis=1) / w.sum(axis=1)

    return kernel


def balanced_accuracy_kernel(labels: np.ndarray, scores: np.ndarray, threshold: float):
    predicted = scores >= threshold
    true_pos = (predicted & labels).astype(np.float64)
    true_neg = (~predicted & ~labels).astype(np.float64)
    positive = labels.astype(np.float64)

    def kernel(weights: np.ndarray) -> np.ndarray:
        w = np.asarray(weights, dtype=np.float64)
        n_pos = (w * positive).sum(axis=1)
        n_neg = w.sum(axis=1) - n_pos
        with np.errstate(invalid="ignore", divide="ignore"):
            recall_pos = (w * true_pos).sum(axis=1) / n_pos
            recall_neg = (w * true_neg).sum(axis=1) / n_neg
        result = (recall_pos + recall_neg) / 2.0
        result[(n_pos == 0) | (n_neg == 0)] = np.nan
        return result

    return kernel


# ---------------------------------------------------------------------------
# Bootstrap weights.


def generate_weights(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, CHUNK_ELEMENTS // max(n, 1)))
    done = 0
    while done < n_resamples:
        rows = min(chunk, n_resamples - done)
        picks = rng.integers(0, n, size=(rows, n))
        flat = (picks + np.arange(rows)[:, None] * n).ravel()
        weights = np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)
        weights.flags.writeable = False
        yield weights
        done += rows


@functools.lru_cache(maxsize=2)
def stored_weights(n: int, n_resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    return tuple(generate_weights(n, n_resamples, seed))


def resample_weights(n: int, n_resamples: int, seed: int) -> Iterable[np.ndarray]:
    """[b, n] count matrices (as floats) of resamples with replacement, in chunks.

    Deterministic in (n, n_resamples, seed); small sets are kept and reused.
    """
    if n * n_resamples <= _CACHED_WEIGHT_ELEMENTS:
        return stored_weights(n, n_resamples, seed)
    return generate_weights(n, n_resamples, seed)
