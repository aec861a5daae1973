"""Calibration maps (temperature, Platt, isotonic) fitted on a dev benchmark,
ECE over equal-mass bins, `evaluate --calibrate_on` and `score --calibration`."""

import argparse
import csv
import json

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss

from seahorse_metrics import stats
from seahorse_metrics.calibration import fitting, measures
from seahorse_metrics.calibration import maps as cal_maps

# Labels drawn from sigmoid(z); the metric reports sigmoid(2.5 z): overconfident
# by a temperature of 2.5.
TRUE_TEMPERATURE = 2.5


def _miscalibrated(n: int, seed: int):
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 2.0, n)
    labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-z))
    return labels, 1.0 / (1.0 + np.exp(-TRUE_TEMPERATURE * z))


def _log_loss(y, p):
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


def test_maps_equal_direct_fits_and_scikit_learn_and_undo_the_miscalibration():
    labels, scores = _miscalibrated(4000, 0)
    held_labels, held_scores = _miscalibrated(4000, 1)
    y, z = labels.astype(float), cal_maps.score_logits(scores)
    # Temperature: the log-loss minimiser, found here by a fine grid search.
    temperature = fitting.fit_calibration("temperature", labels, scores)
    grid = np.linspace(1.5, 3.5, 2001)
    best = grid[np.argmin([_log_loss(y, 1 / (1 + np.exp(-z / t))) for t in grid])]
    assert temperature.parameters["temperature"] == pytest.approx(best, abs=2e-3)
    assert temperature.parameters["temperature"] == pytest.approx(TRUE_TEMPERATURE, rel=0.1)
    # Platt: the unpenalised logistic regression on the logit, by direct minimisation.
    platt = fitting.fit_calibration("platt", labels, scores)
    direct = minimize(
        lambda ab: _log_loss(y, 1 / (1 + np.exp(-(ab[0] * z + ab[1])))),
        x0=[1.0, 0.0],
        method="Nelder-Mead",
        options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 4000},
    ).x
    np.testing.assert_allclose(
        [platt.parameters["slope"], platt.parameters["intercept"]], direct, atol=1e-4
    )
    # Isotonic: scikit-learn's predictions on new scores, after a JSON round trip.
    isotonic = fitting.fit_calibration("isotonic", labels, scores)
    reference = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(scores, y)
    loaded = cal_maps.calibration_from_dict(
        json.loads(json.dumps(cal_maps.CalibrationSet("isotonic", {}, {"m": isotonic}).to_dict()))
    ).metrics["m"]
    np.testing.assert_allclose(
        loaded.apply(held_scores), reference.predict(held_scores), atol=1e-12
    )
    before = measures.ece_equal_mass(held_labels, held_scores)
    for fitted in (temperature, platt, isotonic):
        after = measures.ece_equal_mass(held_labels, fitted.apply(held_scores))
        assert after < before / 2, fitted.method
    # Temperature and Platt keep the ranking.
    assert stats.roc_auc(held_labels, platt.apply(held_scores)) == pytest.approx(
        stats.roc_auc(held_labels, held_scores)
    )


def _direct_ece(labels, scores, n_bins):
    order = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    size, extra = divmod(len(scores), n_bins)
    total, start = 0.0, 0
    for b in range(n_bins):
        members = order[start : start + size + (b < extra)]
        start += len(members)
        total += abs(sum(scores[i] for i in members) - sum(labels[i] for i in members))
    return total / len(scores)


def test_ece_brier_and_reliability_against_direct_computations():
    labels, scores = _miscalibrated(1003, 2)
    for n_bins in (1, 7, 10):
        assert measures.ece_equal_mass(labels, scores, n_bins) == pytest.approx(
            _direct_ece(labels.astype(float).tolist(), scores.tolist(), n_bins), abs=1e-12
        )
    assert measures.ece_equal_mass([1, 0, 1, 0], [0.7] * 4, 1) == pytest.approx(0.2)
    assert measures.brier_score(labels, scores) == pytest.approx(brier_score_loss(labels, scores))
    points = measures.reliability(labels, scores, 10)
    assert sum(points["count"]) == 1003 and max(points["count"]) - min(points["count"]) <= 1
    assert points["mean_score"] == sorted(points["mean_score"])
    estimate = measures.ece_estimate(labels, scores, n_resamples=200, seed=0)
    assert estimate.ci_low < estimate.value < estimate.ci_high and estimate.n_resamples == 200
    assert measures.ece_estimate(labels, scores, n_resamples=200, seed=0) == estimate
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        fitting.fit_calibration("platt", [0, 1], [0.5, 1.5])
    with pytest.raises(stats.UndefinedStatistic, match="one class"):
        fitting.fit_calibration("isotonic", [1, 1], [0.2, 0.3])
    with pytest.raises(ValueError, match="unknown calibration method"):
        fitting.fit_calibration("beta", labels, scores)


def test_equal_width_reliability_bins_and_its_ece():
    labels = np.array([0, 0, 1, 1, 1, 0])
    scores = np.array([0.05, 0.15, 0.15, 0.95, 0.85, 0.95])
    calibration = measures.equal_width_reliability(labels, scores, n_bins=10)
    assert calibration.count == [1, 2, 1, 2]
    np.testing.assert_allclose(calibration.mean_score, [0.05, 0.15, 0.85, 0.95])
    np.testing.assert_allclose(calibration.positive_rate, [0.0, 0.5, 1.0, 0.5])
    expected = (1 * 0.05 + 2 * 0.35 + 1 * 0.15 + 2 * 0.45) / 6
    assert calibration.ece_equal_width == pytest.approx(expected)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        measures.equal_width_reliability(labels, scores * 2)


def test_calibration_files_and_specs_are_checked(tmp_path):
    path = tmp_path / "calibration.json"
    good = cal_maps.CalibrationSet(
        "platt",
        {"q4": ["x"]},
        {"q4": cal_maps.CalibrationMap("platt", {"slope": 0.5, "intercept": 0.1}, 10)},
    )
    path.write_text(json.dumps(good.to_dict()))
    assert cal_maps.read_calibration(str(path)).metrics == good.metrics
    with pytest.raises(
        ValueError,
        match=r"calibration\.json: calibration maps for unknown "
        r"metric\(s\) \['q4'\]",
    ):
        cal_maps.maps_for(str(path), ["score"])
    path.write_text(
        json.dumps(
            {
                "format": cal_maps.CALIBRATION_FORMAT,
                "metrics": {"q4": {"method": "temperature", "parameters": {"temperature": -1}}},
            }
        )
    )
    with pytest.raises(ValueError, match="metric 'q4': the temperature must be positive"):
        cal_maps.read_calibration(str(path))
    path.write_text("{}")
    with pytest.raises(ValueError, match="not a calibration file"):
        cal_maps.read_calibration(str(path))
    bound = fitting.bind_specs(["seahorse:d:q4,split=validation", "q1=seahorse:d:q1"], ["q1", "q4"])
    assert bound == {"q1": ["seahorse:d:q1"], "q4": ["seahorse:d:q4,split=validation"]}
    with pytest.raises(ValueError, match="no metric named 'q9'"):
        fitting.bind_specs(["q9=seahorse:d"], ["q1"])


def _platt(**overrides):
    entry = {"method": "platt", "n": 10, "parameters": {"slope": 0.5, "intercept": 0.1}}
    entry.update(overrides)
    return entry


def _isotonic(x, y):
    return {"method": "isotonic", "n": 10, "parameters": {"x": x, "y": y}}


@pytest.mark.parametrize(
    "entry, words",
    [
        (
            _isotonic([0.1, 0.5, 0.9], [0.8, 0.5, 0.1]),
            r"parameters\.y must not decrease, "
            r"but parameters\.y\[1\]=0\.5 < parameters\.y\[0\]=0\.8",
        ),
        (
            _isotonic([0.1, 0.9], [-5, 5]),
            r"parameters\.y must be probabilities in \[0, 1\] \(got -5",
        ),
        (_isotonic([0.1, 0.9], [0.1, "0.9"]), r"parameters\.y\[1\] must be a number, got a string"),
        (_isotonic([0.1, 0.9], [0.1]), "must be equally long"),
        (_platt(n=[1]), r"n \(items fitted on\) must be a whole number >= 0, got an array"),
        (_platt(n=-3), "must be a whole number >= 0, got -3"),
        (
            _platt(parameters={"slope": [1, -1], "intercept": 0}),
            r"parameters\.slope must be a number, got an array",
        ),
        (_platt(parameters={"slope": -0.5, "intercept": 0}), r"parameters\.slope must be >= 0"),
        (_platt(parameters={"slope": True, "intercept": 0}), "must be a number, got true/false"),
        (_platt(parameters={"slope": 1, "intercept": 10**400}), "intercept must be finite"),
        (
            _platt(parameters={"slope": 1, "intercept": 0, "bias": 2}),
            r"unknown parameter\(s\) \['bias'\]",
        ),
    ],
)
def test_a_calibration_map_is_checked_on_reading(tmp_path, entry, words):
    """Issue 48 point 3: a decreasing map, values outside [0, 1], and fields
    of the wrong type were applied (or were tracebacks)."""
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"format": cal_maps.CALIBRATION_FORMAT, "metrics": {"q4": entry}}))
    with pytest.raises(ValueError, match=words) as refused:
        cal_maps.read_calibration(str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}: metric 'q4': ") and "\n" not in message


def test_a_calibration_file_of_the_wrong_shape_is_one_line(tmp_path):
    path = tmp_path / "calibration.json"
    for text, words in (
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (
            '{"format": "%s", "metrics": [1]}' % cal_maps.CALIBRATION_FORMAT,
            "metrics must be an object",
        ),
        (
            '{"format": "%s", "metrics": {"q4": %s}, "fitted_on": [1]}'
            % (cal_maps.CALIBRATION_FORMAT, json.dumps(_platt())),
            "fitted_on must map each metric",
        ),
    ):
        path.write_text(text)
        with pytest.raises(ValueError, match=words) as refused:
            cal_maps.read_calibration(str(path))
        assert str(refused.value).startswith(f"{path}: ")
    path.write_text(
        json.dumps(
            {
                "format": cal_maps.CALIBRATION_FORMAT,
                "metrics": {"q4": _isotonic([0.0, 0.5, 1.0], [0.0, 0.0, 1.0])},
            }
        )
    )  # flat steps are fine
    assert cal_maps.read_calibration(str(path)).metrics["q4"].apply([0.75]) == [0.5]


def test_platt_refuses_to_fit_a_map_that_would_reverse_the_scores():
    labels, scores = _miscalibrated(400, seed=3)
    with pytest.raises(stats.UndefinedStatistic, match="the labels fall as the scores rise"):
        fitting.fit_platt(labels, 1.0 - scores)


# ------------------------------------------------------------------ evaluate


def _write_split(directory, split: str, n: int, seed: int):
    """A prepared split and its scores (by gem_id|system|line) from a miscalibrated metric."""
    labels, scores = _miscalibrated(n, seed)
    records = [
        {
            "gem_id": f"xsum-{split}-{i}",
            "lang": "en",
            "source": "xsum",
            "system": ("t5", "mt5", "ref")[i % 3],
            "article": f"Article {i}.",
            "summary": f"Summary {i}.",
            **{f"q{q}": bool(labels[i]) for q in range(1, 7)},
            "split": split,
            "line": i + 2,
        }
        for i in range(n)
    ]
    with open(directory / f"{split}.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    return [dict(r, metric=float(s)) for r, s in zip(records, scores)], labels, scores


def _evaluate_cli(argv):
    from seahorse_metrics.cli import evaluate

    parser = argparse.ArgumentParser(prog="seahorse-metrics")
    evaluate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["evaluate"] + argv)
    return args.func(args)


def test_evaluate_fits_on_dev_and_reports_before_and_after(tmp_path):
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    dev_rows, dev_labels, dev_scores = _write_split(prepared, "validation", 600, 3)
    test_rows, test_labels, test_scores = _write_split(prepared, "test", 400, 4)
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps(r) + "\n" for r in dev_rows + test_rows))
    output = tmp_path / "report"
    assert (
        _evaluate_cli(
            [
                "--benchmark",
                f"seahorse:{prepared}:q4",
                "--metric",
                f"q4=scores:{scored}:metric",
                "--metric",
                "baseline:length",
                "--calibrate_on",
                f"q4=seahorse:{prepared}:q4,split=validation",
                "--calibration",
                "platt",
                "--bootstrap",
                "100",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    fitted = cal_maps.read_calibration(str(output / "calibration.json"))
    expected = fitting.fit_calibration("platt", dev_labels, dev_scores)
    assert set(fitted.metrics) == {"q4"}  # The length baseline is no probability.
    for key in ("slope", "intercept"):
        assert fitted.metrics["q4"].parameters[key] == pytest.approx(expected.parameters[key])
    data = json.loads((output / "report.json").read_text())
    assert cal_maps.calibration_from_dict(data).metrics == fitted.metrics
    (cell,) = data["calibration_results"]
    assert (cell["metric"], cell["benchmark"], cell["n"]) == ("q4", "seahorse/q4", 400)
    after = expected.apply(test_scores)
    assert cell["ece"]["before"]["value"] == pytest.approx(
        _direct_ece(test_labels.astype(float).tolist(), test_scores.tolist(), 10)
    )
    assert cell["ece"]["after"]["value"] == pytest.approx(
        _direct_ece(test_labels.astype(float).tolist(), after.tolist(), 10)
    )
    for when in ("before", "after"):
        assert (
            cell["ece"][when]["ci_low"]
            <= cell["ece"][when]["value"]
            <= cell["ece"][when]["ci_high"]
        )
    assert cell["brier"]["after"] == pytest.approx(brier_score_loss(test_labels, after))
    assert cell["brier"]["after"] < cell["brier"]["before"]
    markdown = (output / "report.md").read_text()
    assert (
        "### Expected calibration error (equal-mass bins), before → after calibration" in markdown
    )
    assert "### Calibration maps" in markdown and "### Brier score" in markdown
    assert 'class="recalibration"' in (output / "report.html").read_text()
    # Issue 48 point 23: one term for the ECE's interval, in the report and the documentation.
    assert "### Marks" in markdown and "its interval is bias-corrected" in markdown
    from test_readme import documents  # the README and the documentation's pages

    documentation = ""
    for path in documents():
        with open(path, encoding="utf-8") as handle:
            documentation += handle.read()
    assert "bias-corrected bootstrap interval" in documentation
    assert "bias-shifted" not in documentation
    with pytest.raises(ValueError, match="length are not probabilities"):
        _evaluate_cli(
            [
                "--benchmark",
                f"seahorse:{prepared}:q4",
                "--metric",
                "baseline:length",
                "--calibrate_on",
                f"length=seahorse:{prepared}:q4,split=validation",
                "--output",
                str(tmp_path / "x"),
            ]
        )


# ------------------------------------------------------------------ score


def test_score_calibration_round_trip_and_mismatched_file(tmp_path, tiny_hf_dir):
    from seahorse_metrics import Scorer
    from seahorse_metrics.cli import main as cli_main

    maps = {"q4": cal_maps.CalibrationMap("platt", {"slope": 0.5, "intercept": 0.3})}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(cal_maps.CalibrationSet("platt", {}, maps).to_dict()))
    source = tmp_path / "in.csv"
    with open(source, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["article", "summary"])
        writer.writerows(
            [[f"the fox {i} jumps, over the dog.", f"a fox {i}."] for i in range(6)]
            + [["the fox jumps.", ""]]
        )
    output = tmp_path / "out.csv"
    shape = ["--max_input_length", "64", "--buckets", "64", "--batch_size", "8", "--no_progress"]
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                f"q4={tiny_hf_dir}",
                "--input",
                str(source),
                "--output",
                str(output),
                "--calibration",
                str(path),
            ]
            + shape
        )
        == 0
    )
    with open(output, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[-3:] == ["q4", "q4_calibrated", "error"]
    scores = np.array([float(r["q4"]) for r in rows[:6]])
    np.testing.assert_allclose(
        [float(r["q4_calibrated"]) for r in rows[:6]], maps["q4"].apply(scores), rtol=1e-6
    )
    assert rows[6]["q4_calibrated"] == "" and rows[6]["error"]
    meta = json.loads((tmp_path / "out.csv.meta.json").read_text())
    assert meta["calibration"]["q4"]["parameters"] == {"slope": 0.5, "intercept": 0.3}
    # The Python API applies the same map.
    scorer = Scorer.load(
        tiny_hf_dir, max_input_length=64, bucket_lengths=(64,), calibration=str(path)
    )
    records = list(
        scorer.score_records([{"article": "the fox 0 jumps, over the dog.", "summary": "a fox 0."}])
    )
    assert records[0]["score_calibrated"] == pytest.approx(
        float(rows[0]["q4_calibrated"]), rel=1e-5
    )
    # Issue 48 point 20: `score` of a scorer loaded with a map is calibrated
    # (it returned the raw scores); `calibrated=False` and `score_detailed` give both.
    premises = [f"the fox {i} jumps, over the dog." for i in range(6)]
    hypotheses = [f"a fox {i}." for i in range(6)]
    calibrated = scorer.score(premises, hypotheses)
    assert calibrated.dtype == np.float32
    np.testing.assert_allclose(calibrated, [float(r["q4_calibrated"]) for r in rows[:6]], rtol=1e-5)
    raw = scorer.score(premises, hypotheses, calibrated=False)
    np.testing.assert_allclose(raw, scores, rtol=1e-5)
    detailed = scorer.score_detailed(premises, hypotheses)
    np.testing.assert_array_equal(detailed.scores["score"], raw)
    np.testing.assert_array_equal(detailed.calibrated["score"], calibrated)
    plain = Scorer.load(tiny_hf_dir, max_input_length=64, bucket_lengths=(64,))
    np.testing.assert_array_equal(plain.score(premises, hypotheses), raw)
    with pytest.raises(ValueError, match="calibrated=True needs a calibration map"):
        plain.score(premises, hypotheses, calibrated=True)
    # A file naming a metric this run lacks is refused before any scoring.
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                f"q6={tiny_hf_dir}",
                "--input",
                str(source),
                "--output",
                str(tmp_path / "other.csv"),
                "--calibration",
                str(path),
            ]
            + shape
        )
        == 2
    )
    assert not (tmp_path / "other.csv").exists()
