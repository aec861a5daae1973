"""Statistics of scores against human judgments (numpy and scipy only).

    from seahorse_metrics import stats
    stats.roc_auc([True, False], [0.9, 0.2])       # 1.0
    stats.estimate("pearson", ratings, scores)      # with a bootstrap interval

* `statistics`: point estimates (ROC-AUC, Pearson, Spearman, Kendall tau-b,
  accuracy and balanced accuracy at a threshold), bootstrap intervals
  (`estimate`), the paired bootstrap test, macro averages.
* `system`: system-level correlation.
* `curves`: the ROC curve.
* `kernels`: every statistic as one function of bootstrap weights, and the
  checks of the input vectors.

Cheap to import (a trainer's validation loop uses it); evaluation,
calibration and training all sit on it.
"""

from seahorse_metrics.stats.curves import roc_curve
from seahorse_metrics.stats.kernels import UndefinedStatistic
from seahorse_metrics.stats.statistics import (
    BINARY_STATISTICS,
    CORRELATION_STATISTICS,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    STATISTICS,
    Estimate,
    PairedTest,
    accuracy,
    balanced_accuracy,
    estimate,
    kendall_tau,
    macro_average,
    paired_bootstrap_test,
    pearson,
    point_estimate,
    roc_auc,
    spearman,
)
from seahorse_metrics.stats.system import SYSTEM_METHODS, system_level_correlation

__all__ = [
    "BINARY_STATISTICS",
    "CORRELATION_STATISTICS",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "STATISTICS",
    "SYSTEM_METHODS",
    "Estimate",
    "PairedTest",
    "UndefinedStatistic",
    "accuracy",
    "balanced_accuracy",
    "estimate",
    "kendall_tau",
    "macro_average",
    "paired_bootstrap_test",
    "pearson",
    "point_estimate",
    "roc_auc",
    "roc_curve",
    "spearman",
    "system_level_correlation",
]
