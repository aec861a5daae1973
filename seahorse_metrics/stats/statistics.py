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
from typing import Callable, Optional, Sequence

import numpy as np

from seahorse_metrics.stats.kernels import (
    UndefinedStatistic,
    accuracy_kernel,
    auc_kernel,
    balanced_accuracy_kernel,
    check_same_length,
    kendall_kernel,
    label_vector,
    numeric_vector,
    pearson_kernel,
    resample_weights,
    spearman_kernel,
)

# Statistics that compare scores with binary labels, and with numeric ratings.
BINARY_STATISTICS = ("roc_auc", "accuracy", "balanced_accuracy")
CORRELATION_STATISTICS = ("pearson", "spearman", "kendall")
STATISTICS = BINARY_STATISTICS + CORRELATION_STATISTICS

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
# Below this share of usable resamples an interval is not reported.
_MIN_VALID_SHARE = 0.5


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
    score_vec = numeric_vector(scores, scores_name)
    if statistic in BINARY_STATISTICS:
        labels = label_vector(target)
        n = check_same_length(labels=labels, scores=score_vec)
        n_pos = int(labels.sum())
        one_class = None
        if n_pos in (0, n):
            one_class = f"only one class in the labels ({n_pos} positive of {n})"
        if statistic == "roc_auc":
            return _Prepared(
                statistic, n, auc_kernel(labels, score_vec), one_class, "one class only"
            )
        if threshold is None:
            raise ValueError(f"{statistic} needs a decision threshold")
        if statistic == "accuracy":
            reason = "no items" if n == 0 else None
            return _Prepared(
                statistic, n, accuracy_kernel(labels, score_vec, threshold), reason, "no items"
            )
        return _Prepared(
            statistic,
            n,
            balanced_accuracy_kernel(labels, score_vec, threshold),
            one_class,
            "one class only",
        )
    ratings = numeric_vector(target, "ratings")
    n = check_same_length(ratings=ratings, scores=score_vec)
    reason = None
    if n < 3:
        reason = f"a correlation needs at least 3 items, got {n}"
    reason = (
        reason
        or _constant_reason(score_vec, f"the score of {scores_name}")
        or (_constant_reason(ratings, "the rating"))
    )
    kernels = {"pearson": pearson_kernel, "spearman": spearman_kernel, "kendall": kendall_kernel}
    return _Prepared(
        statistic, n, kernels[statistic](score_vec, ratings), reason, "constant scores or ratings"
    )


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


def _percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _left_out_note(valid: int, total: int, failure: str) -> Optional[str]:
    if valid == total:
        return None
    return f"{total - valid} of {total} resamples were undefined ({failure}) and left out"


def interval_from_draws(draws: np.ndarray, n_resamples: int, confidence: float, failure: str):
    valid = draws[np.isfinite(draws)]
    note = _left_out_note(len(valid), n_resamples, failure)
    if n_resamples == 0:
        return None, None, 0, None
    if len(valid) < _MIN_VALID_SHARE * n_resamples:
        return (
            None,
            None,
            len(valid),
            (f"no interval: only {len(valid)} of {n_resamples} resamples were defined ({failure})"),
        )
    low, high = _percentile_interval(valid, confidence)
    return low, high, len(valid), note


def validate_bootstrap_args(n_resamples: int, confidence: float) -> None:
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
    validate_bootstrap_args(n_resamples, confidence)
    prepared = _prepare(statistic, target, scores, threshold, scores_name)
    if prepared.undefined_reason:
        return Estimate(
            statistic,
            None,
            n=prepared.n,
            confidence=confidence,
            note=f"undefined: {prepared.undefined_reason}",
        )
    value = _point(prepared)
    draws = np.concatenate(
        [prepared.kernel(w) for w in resample_weights(prepared.n, n_resamples, seed)]
        or [np.zeros(0)]
    )
    low, high, used, note = interval_from_draws(
        draws, n_resamples, confidence, prepared.resample_failure
    )
    return Estimate(statistic, value, low, high, prepared.n, used, confidence, note)


def point_estimate(
    statistic: str,
    target,
    scores,
    *,
    threshold: Optional[float] = None,
    scores_name: str = "the metric",
) -> Estimate:
    """`estimate` without an interval: value, or None with the reason."""
    return estimate(
        statistic, target, scores, threshold=threshold, n_resamples=0, scores_name=scores_name
    )


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
    validate_bootstrap_args(n_resamples, confidence)
    if n_resamples == 0:
        raise ValueError("a paired bootstrap test needs n_resamples > 0")
    prep_a, prep_b = _prepare_pair(statistic, target, scores_a, scores_b, threshold)
    reasons = [
        f"{side}: {p.undefined_reason}"
        for side, p in (("A", prep_a), ("B", prep_b))
        if p.undefined_reason
    ]
    value_a = None if prep_a.undefined_reason else _point(prep_a)
    value_b = None if prep_b.undefined_reason else _point(prep_b)
    if reasons:
        return _undefined_test(statistic, value_a, value_b, prep_a.n, reasons)
    delta = value_a - value_b
    diffs = _paired_differences(prep_a, prep_b, n_resamples, seed)
    low, high, used, note = interval_from_draws(
        diffs, n_resamples, confidence, prep_a.resample_failure
    )
    p_value = None if low is None else _shifted_p_value(diffs, delta)
    return PairedTest(statistic, value_a, value_b, delta, low, high, p_value, prep_a.n, used, note)


def _undefined_test(
    statistic: str,
    value_a: Optional[float],
    value_b: Optional[float],
    n: int,
    reasons: list[str],
) -> PairedTest:
    """A paired test without a difference or p-value: the statistic is
    undefined on one side (or both), for `reasons`."""
    return PairedTest(
        statistic,
        value_a,
        value_b,
        None,
        None,
        None,
        None,
        n,
        0,
        note="undefined: " + "; ".join(reasons),
    )


def _prepare_pair(
    statistic: str, target, scores_a, scores_b, threshold: Optional[float]
) -> tuple[_Prepared, _Prepared]:
    """Both metrics' prepared statistic, after checking they score the same items."""
    prep_a = _prepare(statistic, target, scores_a, threshold, "metric A")
    prep_b = _prepare(statistic, target, scores_b, threshold, "metric B")
    check_same_length(scores_a=np.asarray(scores_a), scores_b=np.asarray(scores_b))
    return prep_a, prep_b


def _paired_differences(
    prep_a: _Prepared, prep_b: _Prepared, n_resamples: int, seed: int
) -> np.ndarray:
    """statistic(A) - statistic(B) on each shared resample (NaN where undefined)."""
    return np.concatenate(
        [prep_a.kernel(w) - prep_b.kernel(w) for w in resample_weights(prep_a.n, n_resamples, seed)]
    )


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
    validate_bootstrap_args(n_resamples, confidence)
    if not parts:
        raise ValueError("a macro average needs at least one item set")
    prepared = [
        _prepare(statistic, target, scores, threshold, scores_name)
        for target, scores, threshold in parts
    ]
    n = sum(p.n for p in prepared)
    undefined = [(i, p.undefined_reason) for i, p in enumerate(prepared) if p.undefined_reason]
    if undefined:
        return Estimate(
            statistic,
            None,
            n=n,
            confidence=confidence,
            note=f"undefined: set {undefined[0][0] + 1}: {undefined[0][1]}",
        )
    value = float(np.mean([_point(p) for p in prepared]))
    draws = np.zeros(n_resamples)
    for index, part in enumerate(prepared):
        part_seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
        draws += np.concatenate(
            [part.kernel(w) for w in resample_weights(part.n, n_resamples, part_seed)]
            or [np.zeros(0)]
        )
    low, high, used, note = interval_from_draws(
        draws / len(prepared), n_resamples, confidence, prepared[0].resample_failure
    )
    return Estimate(statistic, value, low, high, n, used, confidence, note)
