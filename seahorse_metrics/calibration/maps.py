"""Calibration maps, their file, and their one application to scores.

A map turns a metric's score (a probability in [0, 1]) into a calibrated
probability; `calibration.fitting` fits them on a dev benchmark,
`calibration.measures` measures how calibrated scores are. Every runner
(`score`, `score --runner ...`, `serve`, `Scorer.load(..., calibration=FILE)`)
writes `<column>_calibrated` through `calibrated_fields`. Three kinds:

* `temperature`: `sigmoid(z / T)`, where `z = log P("1") / P("0")` is read
  from the score as its logit (exact for `normalize="pair"` scores, and
  within the mass of other tokens for full-vocabulary ones);
* `platt`: `sigmoid(a * z + b)`;
* `isotonic`: a non-decreasing step function, linear between its knots
  and clipped outside them.

A calibration file (`calibration.json`, and the `calibration` entry of
report.json, which `read_calibration` reads too) records one map per
metric::

    {"format": "seahorse-metrics-calibration/1", "method": "platt",
     "fitted_on": {"q4": ["seahorse:prepared:q4,split=validation"]},
     "metrics": {"q4": {"method": "platt", "n": 500,
                        "parameters": {"slope": 0.61, "intercept": -0.2}}}}

This package sits below `scoring` and `evaluation` (numpy only), so both
read the same maps.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.io.json_files import read_json

CALIBRATION_FORMAT = "seahorse-metrics-calibration/1"
METHODS = ("temperature", "platt", "isotonic")
CALIBRATED_SUFFIX = "_calibrated"
# Scores are clipped this far from 0 and 1 before taking their logit.
_LOGIT_EPS = 1e-7


def score_logits(scores) -> np.ndarray:
    """log(p / (1 - p)) of scores in [0, 1], clipped to stay finite."""
    p = np.clip(np.asarray(scores, dtype=np.float64), _LOGIT_EPS, 1.0 - _LOGIT_EPS)
    return np.log(p) - np.log1p(-p)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # Stable for large |z|.


def check_probabilities(scores, what: str) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"{what}: expected a 1-d array of scores, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{what}: NaN or infinite scores cannot be calibrated")
    if values.size and (values.min() < 0.0 or values.max() > 1.0):
        raise ValueError(
            f"{what}: scores must be probabilities in [0, 1] (got "
            f"{values.min():.4g} to {values.max():.4g})"
        )
    return values


def refuse_unknown_metrics(
    given: Iterable[str], names: Sequence[str], source: Optional[str], what: str, hint: str
) -> None:
    """Raises ValueError naming the metrics in `given` that are not among
    `names` (this run's), the file they came from (`source`), what it holds
    for them (`what`: "calibration maps", "thresholds") and how to fix it
    (`hint`)."""
    unknown = sorted(set(given) - set(names))
    if unknown:
        where = f"{source}: " if source else ""
        raise ValueError(
            f"{where}{what} for unknown metric(s) {unknown}; the metrics of this "
            f"run are {list(names)} ({hint})"
        )


@dataclasses.dataclass(frozen=True)
class CalibrationMap:
    """A fitted map from a metric's score to a calibrated probability.

    Attributes:
      method: One of `METHODS`.
      parameters: `{"temperature": T}`, `{"slope": a, "intercept": b}` or
        `{"x": knots, "y": values}` (isotonic).
      n: Items it was fitted on.
    """

    method: str
    parameters: dict
    n: int = 0

    def apply(self, scores) -> np.ndarray:
        """Calibrated probabilities of `scores` (probabilities in [0, 1]).

        Raises:
          ValueError: for NaN scores or scores outside [0, 1].
        """
        values = check_probabilities(scores, f"{self.method} calibration")
        if self.method == "isotonic":
            return np.interp(values, self.parameters["x"], self.parameters["y"])
        z = score_logits(values)
        if self.method == "temperature":
            return sigmoid(z / self.parameters["temperature"])
        return sigmoid(self.parameters["slope"] * z + self.parameters["intercept"])

    def to_dict(self) -> dict:
        return {"method": self.method, "n": self.n, "parameters": dict(self.parameters)}


def check_method(method: str) -> str:
    """Returns `method`, or raises ValueError naming the known ones."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; choose one of {METHODS}")
    return method


@dataclasses.dataclass
class CalibrationSet:
    """One calibration map per metric.

    Attributes:
      method: The method the maps were fitted with.
      fitted_on: Metric name -> the benchmark specs its map was fitted on.
      metrics: Metric name -> `CalibrationMap`.
      source: Where they were read from (None when fitted in this run).
    """

    method: str
    fitted_on: dict
    metrics: dict
    source: Optional[str] = None

    def check_metrics(self, names: Sequence[str]) -> None:
        """Refuses maps for metrics that are not in this run.

        Raises:
          ValueError: naming the unknown metrics and the file.
        """
        refuse_unknown_metrics(
            self.metrics,
            names,
            self.source,
            "calibration maps",
            "name them NAME=SPEC, or fit maps for these metrics with `evaluate --calibrate_on`",
        )

    def to_dict(self) -> dict:
        return {
            "format": CALIBRATION_FORMAT,
            "method": self.method,
            "fitted_on": {k: list(v) for k, v in self.fitted_on.items()},
            "metrics": {name: m.to_dict() for name, m in self.metrics.items()},
        }


_PARAMETERS = {
    "temperature": ("temperature",),
    "platt": ("slope", "intercept"),
    "isotonic": ("x", "y"),
}


def _kind(value) -> str:
    """The JSON kind of a value, for messages."""
    if isinstance(value, bool):
        return "true/false"
    return {
        type(None): "null",
        str: "a string",
        list: "an array",
        dict: "an object",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _number(value, where: str, field: str) -> float:
    """A finite JSON number (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {field} must be a number, got {_kind(value)}")
    try:
        number = float(value)
    except OverflowError:  # An integer beyond float's range.
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{where}: {field} must be finite, got {value!r:.40}")
    return number


def _numbers(value, where: str, field: str) -> list[float]:
    """A non-empty JSON array of finite numbers."""
    if not isinstance(value, list) or not value:
        raise ValueError(
            f"{where}: {field} must be a non-empty array of numbers, got "
            f"{_kind(value) if value != [] else 'an empty array'}"
        )
    return [_number(item, where, f"{field}[{index}]") for index, item in enumerate(value)]


def _non_decreasing(values: list[float], where: str, field: str) -> None:
    for index in range(1, len(values)):
        if values[index] < values[index - 1]:
            raise ValueError(
                f"{where}: {field} must not decrease, but {field}[{index}]="
                f"{values[index]:.6g} < {field}[{index - 1}]={values[index - 1]:.6g}"
                " (a calibration map keeps the order of the scores)"
            )


def _map_parameters(method: str, parameters, where: str) -> dict:
    """The checked parameters of a `method` map (see `CalibrationMap`)."""
    needed = _PARAMETERS[method]
    if not isinstance(parameters, Mapping) or any(k not in parameters for k in needed):
        raise ValueError(f"{where}: {method} needs parameters {list(needed)}")
    unknown = sorted(set(parameters) - set(needed))
    if unknown:
        raise ValueError(
            f"{where}: unknown parameter(s) {unknown} of a {method} map (it has {list(needed)})"
        )
    if method == "isotonic":
        x = _numbers(parameters["x"], where, "parameters.x")
        y = _numbers(parameters["y"], where, "parameters.y")
        if len(x) != len(y):
            raise ValueError(
                f"{where}: parameters.x and parameters.y must be equally long "
                f"(got {len(x)} and {len(y)})"
            )
        _non_decreasing(x, where, "parameters.x")
        _non_decreasing(y, where, "parameters.y")
        if y[0] < 0.0 or y[-1] > 1.0:
            raise ValueError(
                f"{where}: parameters.y must be probabilities in [0, 1] (got "
                f"{y[0]:.6g} to {y[-1]:.6g})"
            )
        return {"x": x, "y": y}
    values = {k: _number(parameters[k], where, f"parameters.{k}") for k in needed}
    if method == "temperature" and values["temperature"] <= 0:
        raise ValueError(f"{where}: the temperature must be positive")
    if method == "platt" and values["slope"] < 0:
        raise ValueError(
            f"{where}: parameters.slope must be >= 0 (a negative slope reverses "
            "the order of the scores)"
        )
    return values


def _map_from_dict(entry, where: str) -> CalibrationMap:
    if not isinstance(entry, Mapping) or entry.get("method") not in METHODS:
        raise ValueError(f"{where}: expected an object with a 'method' in {METHODS}")
    n = entry.get("n", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(
            f"{where}: n (items fitted on) must be a whole number >= 0, got "
            f"{_kind(n) if not isinstance(n, int) or isinstance(n, bool) else n}"
        )
    parameters = _map_parameters(entry["method"], entry.get("parameters"), where)
    return CalibrationMap(entry["method"], parameters, n)


def _fitted_on(value, where: str) -> dict:
    """`fitted_on`: metric name -> the benchmark specs (strings) its map was fitted on."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(specs, list) and all(isinstance(spec, str) for spec in specs)
        for specs in value.values()
    ):
        raise ValueError(f"{where}: fitted_on must map each metric to an array of benchmark specs")
    return {name: list(specs) for name, specs in value.items()}


def calibration_from_dict(data: Mapping, source: Optional[str] = None) -> CalibrationSet:
    """A `CalibrationSet` from `CalibrationSet.to_dict()` output (or a
    report.json holding one under `calibration`).

    Every map is checked: each field of its type, parameters finite, the map
    non-decreasing (an isotonic map's knots, a Platt slope >= 0, a positive
    temperature) and an isotonic map's values probabilities.

    Raises:
      ValueError: for another format or a malformed entry, in one line naming
        `source`, the metric and the field.
    """
    where = source or "calibration"
    if (
        isinstance(data, Mapping)
        and data.get("format") != CALIBRATION_FORMAT
        and isinstance(data.get("calibration"), Mapping)
    ):
        data = data["calibration"]  # A report.json.
    if not isinstance(data, Mapping) or data.get("format") != CALIBRATION_FORMAT:
        raise ValueError(
            f"{where}: not a calibration file (format {CALIBRATION_FORMAT!r}) nor "
            "a report.json with calibration maps; write one with "
            "`evaluate --calibrate_on SPEC`"
        )
    entries = data.get("metrics")
    if entries is not None and not isinstance(entries, Mapping):
        raise ValueError(
            f"{where}: metrics must be an object of metric name -> map, got {_kind(entries)}"
        )
    metrics = {
        name: _map_from_dict(entry, f"{where}: metric {name!r}")
        for name, entry in (entries or {}).items()
    }
    if not metrics:
        raise ValueError(f"{where}: holds no calibration maps")
    method = data.get("method", "")
    if not isinstance(method, str):
        raise ValueError(f"{where}: method must be a string, got {_kind(method)}")
    return CalibrationSet(method, _fitted_on(data.get("fitted_on"), where), metrics, source)


def read_calibration(path: str) -> CalibrationSet:
    """Reads a calibration file or a report.json with calibration maps.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not JSON, or not calibration maps.
    """
    return calibration_from_dict(read_json(path, "calibration file"), path)


def read_calibration_map(path: str, metric: Optional[str] = None) -> CalibrationMap:
    """The map of `metric` in a calibration file (the only one when None).

    Raises:
      ValueError: no map for `metric`, or several and no `metric` named.
      FileNotFoundError: no such file.
    """
    calibration = read_calibration(path)
    if metric is None and len(calibration.metrics) == 1:
        return next(iter(calibration.metrics.values()))
    if metric is None:
        raise ValueError(
            f"{path} holds calibration maps for {sorted(calibration.metrics)}; "
            "name the one to use (calibration_metric=)"
        )
    if metric not in calibration.metrics:
        raise ValueError(
            f"{path}: no calibration map for {metric!r} (it has {sorted(calibration.metrics)})"
        )
    return calibration.metrics[metric]


def maps_for(path: str, names: Sequence[str]) -> dict[str, CalibrationMap]:
    """Metric name -> map from a calibration file, for the metrics scored here.

    Every metric scored needs a map, and the file may name no other metric.

    Raises:
      ValueError: a map for a metric not scored here, or a metric without one.
      FileNotFoundError: no such file.
    """
    calibration = read_calibration(path)
    calibration.check_metrics(names)
    missing = [name for name in names if name not in calibration.metrics]
    if missing:
        raise ValueError(
            f"{path}: no calibration map for {missing} (it has "
            f"{sorted(calibration.metrics)}); name the checkpoints as the "
            "evaluated metrics (NAME=DIR)"
        )
    return {name: calibration.metrics[name] for name in names}


def calibrated_value(calibration_map: CalibrationMap, score: float) -> float:
    """The calibrated probability of one score (clipped into [0, 1] first, as
    float32 rounding may leave a probability a hair outside)."""
    return float(calibration_map.apply([min(max(float(score), 0.0), 1.0)])[0])


def calibrated_fields(
    scores: Mapping[str, float], maps: Mapping[str, CalibrationMap]
) -> dict[str, float]:
    """`<column>_calibrated` -> calibrated probability for each score column
    with a map: what every runner adds beside the raw score."""
    return {
        column + CALIBRATED_SUFFIX: calibrated_value(calibration_map, scores[column])
        for column, calibration_map in maps.items()
    }
