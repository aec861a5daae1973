"""Statistics: agreement with scikit-learn/scipy, bootstrap behaviour, degenerate inputs."""

import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn import metrics as sk_metrics

from seahorse_metrics import stats
from seahorse_metrics.stats import kernels, statistics

TOLERANCE = 1e-9


def _random_case(rng, trial):
    """Random data with the shapes meta-evaluation meets: ties, integers, Likert."""
    n = int(rng.integers(5, 400))
    labels = rng.integers(0, 2, n)
    if trial % 3 == 0:
        scores = rng.integers(0, 6, n).astype(float)  # many ties
    elif trial % 3 == 1:
        scores = rng.normal(size=n) + labels
    else:
        scores = rng.uniform(size=n).round(2)
    ratings = rng.integers(1, 6, n).astype(float) if trial % 2 else rng.normal(size=n) + scores
    return labels, scores, ratings


def test_point_estimates_match_sklearn_and_scipy():
    rng = np.random.default_rng(0)
    for trial in range(60):
        labels, scores, ratings = _random_case(rng, trial)
        if labels.min() == labels.max():
            continue
        assert (
            abs(stats.roc_auc(labels, scores) - sk_metrics.roc_auc_score(labels, scores))
            < TOLERANCE
        )
        assert (
            abs(stats.pearson(scores, ratings) - scipy_stats.pearsonr(scores, ratings).statistic)
            < TOLERANCE
        )
        assert (
            abs(stats.spearman(scores, ratings) - scipy_stats.spearmanr(scores, ratings).statistic)
            < TOLERANCE
        )
        assert (
            abs(
                stats.kendall_tau(scores, ratings)
                - scipy_stats.kendalltau(scores, ratings).statistic
            )
            < TOLERANCE
        )
        threshold = float(np.median(scores))
        predicted = scores >= threshold
        assert (
            abs(
                stats.accuracy(labels, scores, threshold)
                - sk_metrics.accuracy_score(labels, predicted)
            )
            < TOLERANCE
        )
        assert (
            abs(
                stats.balanced_accuracy(labels, scores, threshold)
                - sk_metrics.balanced_accuracy_score(labels, predicted)
            )
            < TOLERANCE
        )
        # Pearson against 0/1 labels (the paper's rho on SEAHORSE).
        assert (
            abs(stats.pearson(scores, labels) - scipy_stats.pearsonr(scores, labels).statistic)
            < TOLERANCE
        )


def test_roc_curve_matches_sklearn():
    rng = np.random.default_rng(1)
    for trial in range(20):
        labels, scores, _ = _random_case(rng, trial)
        if labels.min() == labels.max():
            continue
        fpr, tpr, thresholds = stats.roc_curve(labels, scores)
        sk_fpr, sk_tpr, sk_thresholds = sk_metrics.roc_curve(
            labels, scores, drop_intermediate=False
        )
        np.testing.assert_allclose(fpr, sk_fpr, atol=TOLERANCE)
        np.testing.assert_allclose(tpr, sk_tpr, atol=TOLERANCE)
        np.testing.assert_array_equal(thresholds[1:], sk_thresholds[1:])


@pytest.mark.parametrize(
    "statistic", ["roc_auc", "pearson", "spearman", "kendall", "accuracy", "balanced_accuracy"]
)
def test_resample_kernels_equal_statistic_on_materialised_resample(statistic):
    # The bootstrap evaluates statistics on count weights; each row must equal
    # the reference statistic on the resample written out item by item.
    rng = np.random.default_rng(2)
    labels, scores, ratings = _random_case(rng, 0)
    target = labels if statistic in stats.BINARY_STATISTICS else ratings
    prepared = statistics._prepare(statistic, target, scores, threshold=2.5)
    weights = next(iter(kernels.generate_weights(len(scores), 12, seed=3)))
    values = prepared.kernel(weights)
    for row, value in zip(weights.astype(int), values):
        index = np.repeat(np.arange(len(scores)), row)
        x, t = scores[index], target[index]
        reference = {
            "roc_auc": lambda: sk_metrics.roc_auc_score(t, x),
            "pearson": lambda: scipy_stats.pearsonr(x, t).statistic,
            "spearman": lambda: scipy_stats.spearmanr(x, t).statistic,
            "kendall": lambda: scipy_stats.kendalltau(x, t).statistic,
            "accuracy": lambda: sk_metrics.accuracy_score(t, x >= 2.5),
            "balanced_accuracy": lambda: sk_metrics.balanced_accuracy_score(t, x >= 2.5),
        }[statistic]()
        assert abs(value - reference) < TOLERANCE


def test_count_inversions_matches_brute_force():
    rng = np.random.default_rng(4)
    sequences = rng.integers(0, 7, size=(5, 40))
    counted = kernels.count_inversions(sequences)
    for row, count in zip(sequences, counted):
        brute = sum(int(row[i] > row[j]) for i in range(len(row)) for j in range(i + 1, len(row)))
        assert count == brute


def test_estimate_interval_is_seeded_and_contains_the_value():
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 300)
    scores = labels + rng.normal(size=300)
    first = stats.estimate("roc_auc", labels, scores, n_resamples=300, seed=7)
    again = stats.estimate("roc_auc", labels, scores, n_resamples=300, seed=7)
    other = stats.estimate("roc_auc", labels, scores, n_resamples=300, seed=8)
    assert first == again
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)
    assert first.ci_low < first.value < first.ci_high
    assert first.n == 300 and first.n_resamples == 300 and first.note is None
    assert first.value == stats.roc_auc(labels, scores)


def test_bootstrap_intervals_cover_the_true_value_at_about_the_nominal_rate():
    # Scores ~ N(mu * label, 1): the population AUC is Phi(mu / sqrt(2)).
    # Bivariate normal with correlation rho: the population Pearson is rho.
    from scipy.stats import norm

    rng = np.random.default_rng(6)
    mu, rho, n, simulations = 1.0, 0.5, 200, 200
    true_auc = norm.cdf(mu / np.sqrt(2))
    auc_hits = pearson_hits = 0
    for simulation in range(simulations):
        labels = rng.integers(0, 2, n)
        scores = rng.normal(size=n) + mu * labels
        auc = stats.estimate("roc_auc", labels, scores, n_resamples=400, seed=simulation)
        auc_hits += auc.ci_low <= true_auc <= auc.ci_high
        x = rng.normal(size=n)
        y = rho * x + np.sqrt(1 - rho**2) * rng.normal(size=n)
        r = stats.estimate("pearson", y, x, n_resamples=400, seed=simulation)
        pearson_hits += r.ci_low <= rho <= r.ci_high
    # Nominal 0.95; with 200 simulations the binomial sd is ~0.015.
    assert 0.89 <= auc_hits / simulations <= 0.99
    assert 0.89 <= pearson_hits / simulations <= 0.99


def test_paired_test_has_about_nominal_false_positive_rate_under_the_null():
    # Two metrics with the same population AUC and Pearson: independent noise
    # of equal size around the same signal.
    rng = np.random.default_rng(7)
    n, simulations = 200, 300
    rejections = {"roc_auc": 0, "pearson": 0}
    for simulation in range(simulations):
        labels = rng.integers(0, 2, n)
        metric_a = labels + rng.normal(size=n) * 1.5
        metric_b = labels + rng.normal(size=n) * 1.5
        for statistic in rejections:
            test = stats.paired_bootstrap_test(
                statistic, labels, metric_a, metric_b, n_resamples=300, seed=simulation
            )
            rejections[statistic] += test.significant(0.05)
    for statistic, count in rejections.items():
        assert 0.015 <= count / simulations <= 0.095, (statistic, count)


def test_paired_test_detects_a_real_difference():
    rng = np.random.default_rng(8)
    labels = rng.integers(0, 2, 400)
    good = labels + rng.normal(size=400) * 0.7
    poor = labels + rng.normal(size=400) * 3.0
    test = stats.paired_bootstrap_test("roc_auc", labels, good, poor, n_resamples=500)
    assert test.delta == pytest.approx(stats.roc_auc(labels, good) - stats.roc_auc(labels, poor))
    assert test.p_value < 0.01 and test.significant()
    assert test.ci_low > 0
    same = stats.paired_bootstrap_test("roc_auc", labels, good, good, n_resamples=100)
    assert same.delta == 0 and same.p_value == 1.0


def test_one_class_is_undefined_with_a_reason_not_nan():
    labels = np.ones(20, dtype=bool)
    scores = np.linspace(0, 1, 20)
    with pytest.raises(stats.UndefinedStatistic, match="only one class"):
        stats.roc_auc(labels, scores)
    result = stats.estimate("roc_auc", labels, scores, n_resamples=50)
    assert result.value is None and result.ci_low is None
    assert "only one class in the labels (20 positive of 20)" in result.note
    with pytest.raises(stats.UndefinedStatistic):
        stats.balanced_accuracy(labels, scores)
    assert stats.accuracy(labels, scores, 0.5) == 0.5
    with pytest.raises(stats.UndefinedStatistic):
        stats.roc_curve(labels, scores)


def test_constant_scores_make_correlations_undefined():
    ratings = np.arange(10.0)
    for statistic in ("pearson", "spearman", "kendall"):
        result = stats.estimate(
            statistic, ratings, np.full(10, 0.3), n_resamples=20, scores_name="majority"
        )
        assert result.value is None
        assert "the score of majority is constant (0.3 for all 10 items)" in result.note
    result = stats.estimate("pearson", np.full(10, 2.0), ratings, n_resamples=20)
    assert "the rating is constant" in result.note
    with pytest.raises(stats.UndefinedStatistic, match="at least 3"):
        stats.pearson([1.0, 2.0], [2.0, 1.0])
    # A constant metric still has an AUC of one half, as scikit-learn says.
    labels = np.arange(10) % 2
    assert stats.roc_auc(labels, np.full(10, 0.3)) == 0.5


def test_nan_inputs_raise_naming_what_and_how_many():
    scores = np.array([0.1, np.nan, 0.3, np.inf, 0.5])
    with pytest.raises(ValueError, match="my-metric: 2 of 5 values are NaN or infinite"):
        stats.estimate("pearson", np.arange(5.0), scores, scores_name="my-metric")
    with pytest.raises(ValueError, match="ratings: 1 of 3"):
        stats.pearson([1.0, 2.0, 3.0], [1.0, np.nan, 2.0])


def test_bad_shapes_and_labels_are_refused():
    with pytest.raises(ValueError, match="differ in length"):
        stats.roc_auc([0, 1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="binary"):
        stats.roc_auc([0, 2, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="unknown statistic"):
        stats.estimate("f1", [0, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="threshold"):
        stats.estimate("accuracy", [0, 1], [0.1, 0.2])


def test_degenerate_resamples_are_left_out_and_counted():
    # One positive among 12: about (11/12)^12 = 35% of resamples miss it.
    labels = np.zeros(12, dtype=bool)
    labels[0] = True
    scores = np.linspace(0.0, 1.0, 12)
    result = stats.estimate("roc_auc", labels, scores, n_resamples=400, seed=1)
    assert result.value is not None and result.ci_low is not None
    assert 0 < 400 - result.n_resamples < 200
    assert f"{400 - result.n_resamples} of 400 resamples were undefined" in result.note
    # When most resamples are undefined there is no interval, and the note says why.
    draws = np.r_[np.full(60, np.nan), np.linspace(0.4, 0.6, 40)]
    low, high, used, note = statistics.interval_from_draws(draws, 100, 0.95, "one class only")
    assert low is None and high is None and used == 40
    assert note == "no interval: only 40 of 100 resamples were defined (one class only)"


def test_system_level_correlation():
    rng = np.random.default_rng(9)
    systems = np.repeat(["a", "b", "c", "d", "e"], 30)
    quality = {"a": 0.1, "b": 0.4, "c": 0.5, "d": 0.7, "e": 0.9}
    ratings = np.array([quality[s] for s in systems]) + rng.normal(0, 0.2, len(systems))
    scores = ratings + rng.normal(0, 0.3, len(systems))
    result = stats.system_level_correlation(scores, ratings, systems, n_resamples=200)
    mean_scores = [scores[systems == s].mean() for s in "abcde"]
    mean_ratings = [ratings[systems == s].mean() for s in "abcde"]
    assert result.statistic == "system_pearson" and result.n == 5
    assert abs(result.value - scipy_stats.pearsonr(mean_scores, mean_ratings).statistic) < 1e-9
    assert result.ci_low <= result.value <= result.ci_high
    kendall = stats.system_level_correlation(
        scores, ratings, systems, method="kendall", n_resamples=50
    )
    assert abs(kendall.value - scipy_stats.kendalltau(mean_scores, mean_ratings).statistic) < 1e-9
    two = stats.system_level_correlation(scores[:60], ratings[:60], systems[:60])
    assert two.value is None and "at least 3 systems, got 2" in two.note
    constant = stats.system_level_correlation(np.full(150, 0.1), ratings, systems, n_resamples=20)
    assert constant.value is None and "constant" in constant.note
