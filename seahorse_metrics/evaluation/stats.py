"""Statistics for meta-evaluating a metric against human judgments.

Point estimates (ROC-AUC, Pearson, Spearman, Kendall tau-b, accuracy and
balanced accuracy at a threshold), percentile bootstrap confidence intervals,
a paired bootstrap test between two metrics scored on the same items, and a
system-level correlation.

Every statistic has one implementation that works on a matrix of bootstrap
*weights*: row b of `W` (shape `[B, n]`) says how many times each item occurs
in resample b. The point estimate is the same function evaluated with a single
row of ones, so the bootstrap and the point estimate cannot drift apart, and
all resamples of a chunk are computed with a few array operations.

Degenerate inputs never produce a silent NaN:
- the plain functions (`roc_auc`, `pearson`, ...) raise `UndefinedStatistic`
  with the reason (one class only, constant values, too few items);
- `estimate` and `paired_bootstrap_test` return a result whose `value` is None
  and whose `note` gives the reason;
- NaN or infinite inputs raise `ValueError` naming what held them and how many.

Bootstrap intervals are percentile intervals over `n_resamples` resamples of
the items drawn with `numpy.random.default_rng(seed)`. A resample on which the
statistic is undefined (for example one class only) is left out and counted in
the note; if fewer than half the resamples are usable the interval is None.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterable, Iterator, Optional, Sequence

import numpy as np

# Statistics that compare scores with binary labels, and with numeric ratings.
BINARY_STATISTICS = ("roc_auc", "accuracy", "balanced_accuracy")
CORRELATION_STATISTICS = ("pearson", "spearman", "kendall")
STATISTICS = BINARY_STATISTICS + CORRELATION_STATISTICS

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
# Elements of one chunk of the [B, n] weight matrix: bounds memory to tens of
# MB whatever the benchmark size.
_CHUNK_ELEMENTS = 1_000_000
# Group sums over at most this many distinct values use a matrix product.
_FEW_GROUPS = 16
# Resample weights of at most this many elements are kept for reuse: every
# statistic and metric on a benchmark of the same size sees the same resamples.
_CACHED_WEIGHT_ELEMENTS = 4_000_000
# Below this share of usable resamples an interval is not reported.
_MIN_VALID_SHARE = 0.5


class UndefinedStatistic(ValueError):
    """The statistic has no value on these inputs (one class, constant values).

    Attributes:
      reason: Human-readable explanation, suitable for a report note.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap confidence interval.

    Attributes:
      statistic: Name, one of `STATISTICS` or `system_<method>`.
      value: The point estimate, or None when undefined (see `note`).
      ci_low: Lower end of the percentile interval, or None.
      ci_high: Upper end of the percentile interval, or None.
      n: Number of items the estimate is computed on.
      n_resamples: Number of bootstrap resamples the interval is based on
        (the usable ones); 0 when no interval was computed.
      confidence: Nominal coverage of the interval.
      note: Why the value or interval is missing, or what was left out.
    """

    statistic: str
    value: Optional[float]
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: int = 0
    n_resamples: int = 0
    confidence: float = DEFAULT_CONFIDENCE
    note: Optional[str] = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PairedTest:
    """Paired bootstrap test of `statistic(A) - statistic(B)` on the same items.

    Attributes:
      statistic: The statistic compared.
      value_a: Point estimate for metric A (None if undefined).
      value_b: Point estimate for metric B (None if undefined).
      delta: `value_a - value_b`, or None.
      ci_low: Lower end of the percentile interval of the difference.
      ci_high: Upper end of the percentile interval of the difference.
      p_value: Two-sided p-value of "no difference", or None.
      n: Number of items.
      n_resamples: Usable resamples.
      note: Why something is missing, or what was left out.
    """

    statistic: str
    value_a: Optional[float]
    value_b: Optional[float]
    delta: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    p_value: Optional[float]
    n: int
    n_resamples: int
    note: Optional[str] = None

    def significant(self, alpha: float = 0.05) -> bool:
        """True when the p-value is defined and below `alpha`."""
        return self.p_value is not None and self.p_value < alpha

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------
# Input checks.


def _numeric_vector(values, what: str) -> np.ndarray:
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


def _label_vector(values, what: str = "labels") -> np.ndarray:
    array = np.asarray(values)
    if array.dtype == bool:
        return array if array.ndim == 1 else _numeric_vector(array, what).astype(bool)
    numeric = _numeric_vector(array, what)
    if not np.all((numeric == 0) | (numeric == 1)):
        raise ValueError(f"{what} must be binary (bool or 0/1); got other values")
    return numeric.astype(bool)


def _check_same_length(**arrays: np.ndarray) -> int:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"inputs differ in length: {lengths}")
    return next(iter(lengths.values()))


# ---------------------------------------------------------------------------
# Weighted kernels: each maps weights W [B, n] to values [B] (NaN = undefined
# on that resample). A point estimate is W = ones([1, n]).


class _TieGroups:
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


def _weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
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


def _auc_kernel(labels: np.ndarray, scores: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """AUC = P(score+ > score-) + P(score+ == score-)/2, i.e. sklearn's trapezoid."""
    groups = _TieGroups(scores)
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


def _pearson_kernel(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    x_groups, y_groups = _TieGroups(x), _TieGroups(y)

    def kernel(weights: np.ndarray) -> np.ndarray:
        r = _weighted_pearson(x, y, weights)
        r[x_groups.is_constant(weights) | y_groups.is_constant(weights)] = np.nan
        return r

    return kernel


def _spearman_kernel(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    x_groups, y_groups = _TieGroups(x), _TieGroups(y)

    def kernel(weights: np.ndarray) -> np.ndarray:
        r = _weighted_pearson(
            x_groups.average_ranks(weights), y_groups.average_ranks(weights), weights
        )
        r[x_groups.is_constant(weights) | y_groups.is_constant(weights)] = np.nan
        return r

    return kernel


def _count_inversions(sequences: np.ndarray) -> np.ndarray:
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


def _kendall_kernel(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Kendall tau-b as scipy computes it (discordant pairs, x/y/joint ties)."""
    x_groups, y_groups = _TieGroups(x), _TieGroups(y)
    joint = x_groups.group_of_item * y_groups.num_groups + y_groups.group_of_item
    joint_groups = _TieGroups(joint.astype(np.float64))
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
        discordant = _count_inversions(sequences)
        pairs = per_row * (per_row - 1) // 2
        x_ties = x_groups.tied_pairs(counts)
        y_ties = y_groups.tied_pairs(counts)
        joint_ties = joint_groups.tied_pairs(counts)
        con_minus_dis = pairs - x_ties - y_ties + joint_ties - 2 * discordant
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = con_minus_dis / np.sqrt((pairs - x_ties).astype(np.float64)) / np.sqrt(
                (pairs - y_ties).astype(np.float64)
            )
        tau[(pairs - x_ties == 0) | (pairs - y_ties == 0)] = np.nan
        return np.clip(tau, -1.0, 1.0)

    return kernel


def _accuracy_kernel(labels: np.ndarray, scores: np.ndarray, threshold: float):
    correct = ((scores >= threshold) == labels).astype(np.float64)

    def kernel(weights: np.ndarray) -> np.ndarray:
        w = np.asarray(weights, dtype=np.float64)
        return (w * correct).sum(axis=1) / w.sum(axis=1)

    return kernel


def _balanced_accuracy_kernel(labels: np.ndarray, scores: np.ndarray, threshold: float):
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
# Preparing a statistic: validate inputs, explain degeneracy, build the kernel.


@dataclasses.dataclass(frozen=True)
class _Prepared:
    name: str
    n: int
    kernel: Callable[[np.ndarray], np.ndarray]
    undefined_reason: Optional[str]
    resample_failure: str  # what an undefined resample means, for notes


def _constant_reason(values: np.ndarray, what: str) -> Optional[str]:
    if len(values) and np.all(values == values[0]):
        return f"{what} is constant ({values[0]:g} for all {len(values)} items)"
    return None


def _prepare(
    statistic: str,
    target,
    scores,
    threshold: Optional[float] = None,
    scores_name: str = "the metric",
) -> _Prepared:
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    score_vec = _numeric_vector(scores, scores_name)
    if statistic in BINARY_STATISTICS:
        labels = _label_vector(target)
        n = _check_same_length(labels=labels, scores=score_vec)
        n_pos = int(labels.sum())
        one_class = None
        if n_pos in (0, n):
            one_class = f"only one class in the labels ({n_pos} positive of {n})"
        if statistic == "roc_auc":
            return _Prepared(statistic, n, _auc_kernel(labels, score_vec), one_class,
                             "one class only")
        if threshold is None:
            raise ValueError(f"{statistic} needs a decision threshold")
        if statistic == "accuracy":
            reason = "no items" if n == 0 else None
            return _Prepared(statistic, n, _accuracy_kernel(labels, score_vec, threshold),
                             reason, "no items")
        return _Prepared(statistic, n,
                         _balanced_accuracy_kernel(labels, score_vec, threshold),
                         one_class, "one class only")
    ratings = _numeric_vector(target, "ratings")
    n = _check_same_length(ratings=ratings, scores=score_vec)
    reason = None
    if n < 3:
        reason = f"a correlation needs at least 3 items, got {n}"
    reason = reason or _constant_reason(score_vec, f"the score of {scores_name}") or (
        _constant_reason(ratings, "the rating"))
    kernels = {"pearson": _pearson_kernel, "spearman": _spearman_kernel,
               "kendall": _kendall_kernel}
    return _Prepared(statistic, n, kernels[statistic](score_vec, ratings), reason,
                     "constant scores or ratings")


def _point(prepared: _Prepared) -> float:
    if prepared.undefined_reason:
        raise UndefinedStatistic(prepared.undefined_reason)
    return float(prepared.kernel(np.ones((1, prepared.n)))[0])


# ---------------------------------------------------------------------------
# Plain point estimates.


def roc_auc(labels, scores) -> float:
    """Area under the ROC curve, identical to `sklearn.metrics.roc_auc_score`.

    Ties between a positive and a negative score count one half.

    Args:
      labels: Binary labels (bool or 0/1), 1 = positive.
      scores: Metric scores, higher = more likely positive.

    Raises:
      UndefinedStatistic: Only one class is present.
      ValueError: NaN/infinite scores, non-binary labels, or length mismatch.
    """
    return _point(_prepare("roc_auc", labels, scores))


def pearson(scores, ratings) -> float:
    """Pearson correlation, identical to `scipy.stats.pearsonr(...).statistic`.

    Raises:
      UndefinedStatistic: Fewer than 3 items, or constant scores or ratings.
      ValueError: NaN/infinite values or length mismatch.
    """
    return _point(_prepare("pearson", ratings, scores))


def spearman(scores, ratings) -> float:
    """Spearman rank correlation (average ranks for ties), as `scipy.stats.spearmanr`.

    Raises:
      UndefinedStatistic: Fewer than 3 items, or constant scores or ratings.
    """
    return _point(_prepare("spearman", ratings, scores))


def kendall_tau(scores, ratings) -> float:
    """Kendall tau-b, as `scipy.stats.kendalltau(...).statistic`.

    Raises:
      UndefinedStatistic: Fewer than 3 items, or constant scores or ratings.
    """
    return _point(_prepare("kendall", ratings, scores))


def accuracy(labels, scores, threshold: float = 0.5) -> float:
    """Share of items where `score >= threshold` agrees with the label."""
    return _point(_prepare("accuracy", labels, scores, threshold))


def balanced_accuracy(labels, scores, threshold: float = 0.5) -> float:
    """Mean of the recalls of both classes at `score >= threshold`.

    Raises:
      UndefinedStatistic: Only one class is present (sklearn would warn and
        average the one recall; we refuse instead).
    """
    return _point(_prepare("balanced_accuracy", labels, scores, threshold))


# ---------------------------------------------------------------------------
# Bootstrap.


def _generate_weights(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _CHUNK_ELEMENTS // max(n, 1)))
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
def _stored_weights(n: int, n_resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    return tuple(_generate_weights(n, n_resamples, seed))


def _resample_weights(n: int, n_resamples: int, seed: int) -> Iterable[np.ndarray]:
    """[b, n] count matrices (as floats) of resamples with replacement, in chunks.

    Deterministic in (n, n_resamples, seed); small sets are kept and reused.
    """
    if n * n_resamples <= _CACHED_WEIGHT_ELEMENTS:
        return _stored_weights(n, n_resamples, seed)
    return _generate_weights(n, n_resamples, seed)


def _percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _left_out_note(valid: int, total: int, failure: str) -> Optional[str]:
    if valid == total:
        return None
    return f"{total - valid} of {total} resamples were undefined ({failure}) and left out"


def _interval_from_draws(
    draws: np.ndarray, n_resamples: int, confidence: float, failure: str
):
    valid = draws[np.isfinite(draws)]
    note = _left_out_note(len(valid), n_resamples, failure)
    if n_resamples == 0:
        return None, None, 0, None
    if len(valid) < _MIN_VALID_SHARE * n_resamples:
        return None, None, len(valid), (
            f"no interval: only {len(valid)} of {n_resamples} resamples were defined "
            f"({failure})"
        )
    low, high = _percentile_interval(valid, confidence)
    return low, high, len(valid), note


def _validate_bootstrap_args(n_resamples: int, confidence: float) -> None:
    if n_resamples < 0:
        raise ValueError(f"n_resamples must be >= 0, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def estimate(
    statistic: str,
    target,
    scores,
    *,
    threshold: Optional[float] = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    scores_name: str = "the metric",
) -> Estimate:
    """Point estimate and percentile bootstrap interval of one statistic.

    Args:
      statistic: One of `STATISTICS`.
      target: Binary labels for `roc_auc`/`accuracy`/`balanced_accuracy`,
        numeric ratings (0/1 labels included) for the correlations.
      scores: Metric scores, one per item.
      threshold: Decision threshold for the accuracies (`score >= threshold`
        predicts positive); required by them, ignored otherwise.
      n_resamples: Bootstrap resamples; 0 skips the interval.
      confidence: Nominal coverage of the interval.
      seed: Seed of the `numpy.random.Generator` that draws the resamples;
        the same seed gives the same resamples for every metric.
      scores_name: Name used in error messages (e.g. the metric's name).

    Returns:
      An `Estimate`; `value` is None with a `note` when undefined.

    Raises:
      ValueError: NaN/infinite values, non-binary labels, length mismatch or
        an unknown statistic.
    """
    _validate_bootstrap_args(n_resamples, confidence)
    prepared = _prepare(statistic, target, scores, threshold, scores_name)
    if prepared.undefined_reason:
        return Estimate(statistic, None, n=prepared.n, confidence=confidence,
                        note=f"undefined: {prepared.undefined_reason}")
    value = _point(prepared)
    draws = np.concatenate(
        [prepared.kernel(w) for w in _resample_weights(prepared.n, n_resamples, seed)]
        or [np.zeros(0)]
    )
    low, high, used, note = _interval_from_draws(
        draws, n_resamples, confidence, prepared.resample_failure
    )
    return Estimate(statistic, value, low, high, prepared.n, used, confidence, note)


def point_estimate(statistic: str, target, scores, *, threshold: Optional[float] = None,
                   scores_name: str = "the metric") -> Estimate:
    """`estimate` without an interval: value, or None with the reason."""
    return estimate(statistic, target, scores, threshold=threshold, n_resamples=0,
                    scores_name=scores_name)


def paired_bootstrap_test(
    statistic: str,
    target,
    scores_a,
    scores_b,
    *,
    threshold: Optional[float] = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> PairedTest:
    """Tests whether two metrics differ on `statistic` over the same items.

    Both metrics are evaluated on the same resamples. With d* the resampled
    differences and d the observed difference, the two-sided p-value is
    `(1 + #{|d* - d| >= |d|}) / (1 + usable resamples)`: the bootstrap
    distribution, shifted to the null of no difference, is compared with the
    observed difference (Efron and Tibshirani 1993, sec. 16.4).

    Args:
      statistic: One of `STATISTICS`.
      target: Labels or ratings shared by both metrics.
      scores_a: Scores of metric A.
      scores_b: Scores of metric B, same items in the same order.
      threshold: Decision threshold for the accuracies.
      n_resamples: Bootstrap resamples (must be > 0).
      confidence: Coverage of the interval of the difference.
      seed: Seed of the resampling generator.

    Returns:
      A `PairedTest`; p_value is None with a note when either side is undefined.
    """
    _validate_bootstrap_args(n_resamples, confidence)
    if n_resamples == 0:
        raise ValueError("a paired bootstrap test needs n_resamples > 0")
    prep_a, prep_b = _prepare_pair(statistic, target, scores_a, scores_b, threshold)
    reasons = [f"{side}: {p.undefined_reason}" for side, p in (("A", prep_a), ("B", prep_b))
               if p.undefined_reason]
    value_a = None if prep_a.undefined_reason else _point(prep_a)
    value_b = None if prep_b.undefined_reason else _point(prep_b)
    if reasons:
        return PairedTest(statistic, value_a, value_b, None, None, None, None, prep_a.n, 0,
                          note="undefined: " + "; ".join(reasons))
    delta = value_a - value_b
    diffs = _paired_differences(prep_a, prep_b, n_resamples, seed)
    low, high, used, note = _interval_from_draws(
        diffs, n_resamples, confidence, prep_a.resample_failure
    )
    p_value = None if low is None else _shifted_p_value(diffs, delta)
    return PairedTest(statistic, value_a, value_b, delta, low, high, p_value, prep_a.n, used,
                      note)


def _prepare_pair(statistic: str, target, scores_a, scores_b,
                  threshold: Optional[float]) -> tuple[_Prepared, _Prepared]:
    """Both metrics' prepared statistic, after checking they score the same items."""
    prep_a = _prepare(statistic, target, scores_a, threshold, "metric A")
    prep_b = _prepare(statistic, target, scores_b, threshold, "metric B")
    _check_same_length(scores_a=np.asarray(scores_a), scores_b=np.asarray(scores_b))
    return prep_a, prep_b


def _paired_differences(prep_a: _Prepared, prep_b: _Prepared, n_resamples: int,
                        seed: int) -> np.ndarray:
    """statistic(A) - statistic(B) on each shared resample (NaN where undefined)."""
    return np.concatenate([
        prep_a.kernel(w) - prep_b.kernel(w)
        for w in _resample_weights(prep_a.n, n_resamples, seed)
    ])


def _shifted_p_value(diffs: np.ndarray, delta: float) -> float:
    """Two-sided p-value of no difference from the null-shifted bootstrap differences."""
    valid = diffs[np.isfinite(diffs)]
    extreme = np.count_nonzero(np.abs(valid - delta) >= abs(delta) - 1e-12)
    return min(float((1 + extreme) / (1 + len(valid))), 1.0)


def macro_average(
    statistic: str,
    parts: Sequence[tuple],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    scores_name: str = "the metric",
) -> Estimate:
    """The mean of a statistic over several item sets, with a stratified interval.

    As LLM-AggreFact averages balanced accuracy over its datasets: each set
    is resampled on its own (with its own generator, derived from `seed`),
    and the interval is over the mean of the sets' resampled values.

    Args:
      statistic: One of `STATISTICS`.
      parts: `(target, scores, threshold)` per item set (threshold None for
        statistics that need none).
      n_resamples: Bootstrap resamples; 0 skips the interval.
      confidence: Nominal coverage.
      seed: Resampling seed.
      scores_name: Name for error messages.

    Returns:
      An `Estimate` whose `n` counts the items of all sets; None with a note
      when the statistic is undefined on a set.
    """
    _validate_bootstrap_args(n_resamples, confidence)
    if not parts:
        raise ValueError("a macro average needs at least one item set")
    prepared = [_prepare(statistic, target, scores, threshold, scores_name)
                for target, scores, threshold in parts]
    n = sum(p.n for p in prepared)
    undefined = [(i, p.undefined_reason) for i, p in enumerate(prepared) if p.undefined_reason]
    if undefined:
        return Estimate(statistic, None, n=n, confidence=confidence,
                        note=f"undefined: set {undefined[0][0] + 1}: {undefined[0][1]}")
    value = float(np.mean([_point(p) for p in prepared]))
    draws = np.zeros(n_resamples)
    for index, part in enumerate(prepared):
        part_seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
        draws += np.concatenate([part.kernel(w) for w in _resample_weights(
            part.n, n_resamples, part_seed)] or [np.zeros(0)])
    low, high, used, note = _interval_from_draws(
        draws / len(prepared), n_resamples, confidence, prepared[0].resample_failure)
    return Estimate(statistic, value, low, high, n, used, confidence, note)


# ---------------------------------------------------------------------------
# System level.

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
        return np.array([
            np.nan if constant[row] else _kendall_kernel(x[row], y[row])(ones)[0]
            for row in range(rows)
        ])
    if method == "spearman":
        from scipy.stats import rankdata

        x, y = rankdata(x, axis=1), rankdata(y, axis=1)
    r = _weighted_pearson(x, y, np.ones((rows, size)))
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
    _validate_bootstrap_args(n_resamples, confidence)
    score_vec, rating_vec, system_index, num_systems = _system_inputs(
        scores, ratings, systems, scores_name)
    name = f"system_{method}"
    if num_systems < 3:
        return Estimate(name, None, n=num_systems, confidence=confidence,
                        note=f"undefined: needs at least 3 systems, got {num_systems}")
    onehot = np.eye(num_systems)[system_index]

    def correlation(weights: np.ndarray) -> np.ndarray:
        return _row_correlation(method, _system_means(score_vec, weights, onehot),
                                _system_means(rating_vec, weights, onehot))

    point = correlation(np.ones((1, len(score_vec)), dtype=np.int64))[0]
    if not np.isfinite(point):
        return Estimate(name, None, n=num_systems, confidence=confidence,
                        note="undefined: system means of scores or ratings are constant")
    draws = [correlation(w) for w in _stratified_weights(system_index, num_systems,
                                                         n_resamples, seed)]
    low, high, used, note = _interval_from_draws(
        np.concatenate(draws) if draws else np.zeros(0), n_resamples, confidence,
        "constant system means")
    return Estimate(name, float(point), low, high, num_systems, used, confidence, note)


def _system_inputs(scores, ratings, systems: Sequence[str],
                   scores_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Checked score and rating vectors, each item's system index, and the number of systems."""
    score_vec = _numeric_vector(scores, scores_name)
    rating_vec = _numeric_vector(ratings, "ratings")
    system_list = [str(s) for s in systems]
    _check_same_length(scores=score_vec, ratings=rating_vec, systems=np.asarray(system_list))
    names, system_index = np.unique(np.asarray(system_list, dtype=object).astype(str),
                                    return_inverse=True)
    return score_vec, rating_vec, system_index, len(names)


def _stratified_weights(system_index: np.ndarray, num_systems: int, n_resamples: int,
                        seed: int) -> Iterator[np.ndarray]:
    """[rows, n] count matrices of resamples drawn within each system, in chunks."""
    rng = np.random.default_rng(seed)
    n = len(system_index)
    members = [np.flatnonzero(system_index == s) for s in range(num_systems)]
    chunk = max(1, min(n_resamples, _CHUNK_ELEMENTS // n))
    for begin in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - begin)
        weights = np.zeros((rows, n), dtype=np.int64)
        for items in members:
            picks = items[rng.integers(0, len(items), size=(rows, len(items)))]
            np.add.at(weights, (np.arange(rows)[:, None], picks), 1)
        yield weights


# ---------------------------------------------------------------------------
# Curves for plots.


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
