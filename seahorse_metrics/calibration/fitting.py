"""Fitting calibration maps of metric scores on a dev benchmark.

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

The maps and their file (`calibration.json`) are `calibration.maps`; how
calibrated scores are, `calibration.measures`; `score --calibration FILE`
and `Scorer.load(..., calibration=FILE)` apply them (`calibration.maps.calibrated_fields`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from seahorse_metrics import stats
from seahorse_metrics.calibration.maps import (
    CalibrationMap,
    check_method,
    check_probabilities,
    score_logits,
)

DEFAULT_METHOD = "temperature"
# log T is searched in [-_LOG_T_BOUND, _LOG_T_BOUND].
_LOG_T_BOUND = 7.0


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

    found = minimize_scalar(
        log_loss, bounds=(-_LOG_T_BOUND, _LOG_T_BOUND), method="bounded", options={"xatol": 1e-8}
    )
    return CalibrationMap("temperature", {"temperature": float(np.exp(found.x))}, len(values))


def fit_platt(labels, scores) -> CalibrationMap:
    """Platt scaling: an unpenalised logistic regression on the score's logit."""
    from sklearn.linear_model import LogisticRegression

    values = check_probabilities(scores, "Platt calibration")
    y = _binary_labels(labels, values)
    model = LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000)  # No penalty.
    model.fit(score_logits(values)[:, None], y.astype(int))
    if model.coef_[0, 0] < 0:  # A map must keep the scores' order (`calibration` refuses it).
        raise stats.UndefinedStatistic(
            "the labels fall as the scores rise (a Platt slope of "
            f"{model.coef_[0, 0]:.3g}); no map keeps their order"
        )
    return CalibrationMap(
        "platt",
        {"slope": float(model.coef_[0, 0]), "intercept": float(model.intercept_[0])},
        len(values),
    )


def fit_isotonic(labels, scores) -> CalibrationMap:
    """Isotonic regression of the label on the score (non-decreasing, in [0, 1])."""
    from sklearn.isotonic import IsotonicRegression

    values = check_probabilities(scores, "isotonic calibration")
    y = _binary_labels(labels, values)
    model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    model.fit(values, y)
    return CalibrationMap(
        "isotonic",
        {"x": model.X_thresholds_.tolist(), "y": model.y_thresholds_.tolist()},
        len(values),
    )


_FITTERS = {"temperature": fit_temperature, "platt": fit_platt, "isotonic": fit_isotonic}


def fit_calibration(method: str, labels, scores) -> CalibrationMap:
    """Fits a `method` map of `scores` to the binary `labels`.

    Raises:
      ValueError: unknown method, scores outside [0, 1], non-binary labels.
      stats.UndefinedStatistic: the labels hold one class only.
    """
    return _FITTERS[check_method(method)](labels, scores)


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
                raise ValueError(
                    f"--calibrate_on {spec}: no metric named {name!r} in this run ({list(names)})"
                )
            own.setdefault(name, []).append(rest)
        else:
            shared.append(spec)
    return {name: own.get(name, shared) for name in names if own.get(name, shared)}
