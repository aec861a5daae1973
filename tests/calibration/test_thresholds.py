"""Tuned thresholds (the LLM-AggreFact protocol), the LLM-AggreFact and SummaC layouts,
and checkpoint metrics with the scorer's modes in `evaluate`."""

import argparse
import csv
import json
import os

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, f1_score

from seahorse_metrics import stats
from seahorse_metrics.calibration import thresholds
from seahorse_metrics.data.ratings import TableFormatError
from seahorse_metrics.evaluation import benchmarks as benchmarks_lib
from seahorse_metrics.evaluation import metrics as metrics_lib
from seahorse_metrics.evaluation import run as run_lib
from seahorse_metrics.scoring.options import options_from_spec

from fixtures import eval_data

FAST = run_lib.EvaluationConfig(n_resamples=50)
DATASETS = ("AggreFact-CNN", "TofuEval-MediaS", "Wice")


def _evaluate_cli(argv):
    from seahorse_metrics.cli import evaluate

    parser = argparse.ArgumentParser(prog="seahorse-metrics")
    evaluate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["evaluate"] + argv)
    return args.func(args)


# ------------------------------------------------------------------ tuning


def _grid_data(cut: float, n: int = 4000, flip: float = 0.1, seed: int = 0):
    """Scores on a 0.01 grid; labels = score >= cut, each flipped with probability `flip`."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.uniform(0, 1, size=n), 2)
    labels = (scores >= cut) ^ (rng.uniform(size=n) < flip)
    return labels, scores


@pytest.mark.parametrize("cut", [0.37, 0.5, 0.82])
def test_tuned_threshold_finds_the_known_cut_within_one_score_step(cut):
    labels, scores = _grid_data(cut)
    tuned = thresholds.tune_threshold(labels, scores)
    assert abs(tuned.threshold - cut) <= 0.01 + 1e-9
    # Applied to the split it was tuned on, it reproduces sklearn's balanced accuracy.
    assert tuned.value == pytest.approx(balanced_accuracy_score(labels, scores >= tuned.threshold))
    assert stats.balanced_accuracy(labels, scores, tuned.threshold) == pytest.approx(tuned.value)
    # No other cut does better.
    best = max(balanced_accuracy_score(labels, scores >= t) for t in np.unique(scores))
    assert tuned.value == pytest.approx(best)


def test_other_objectives_and_bad_input():
    labels, scores = _grid_data(0.4, seed=1)
    f1 = thresholds.tune_threshold(labels, scores, "f1")
    assert f1.value == pytest.approx(f1_score(labels, scores >= f1.threshold))
    assert f1.value == pytest.approx(max(f1_score(labels, scores >= t) for t in np.unique(scores)))
    precise = thresholds.tune_threshold(labels, scores, "precision@0.8")
    predicted = scores >= precise.threshold
    assert predicted[labels].mean() >= 0.8
    candidates = [t for t in np.unique(scores) if (scores >= t)[labels].mean() >= 0.8]
    assert precise.value == pytest.approx(max(labels[scores >= t].mean() for t in candidates))
    for bad in ("accuracy", "precision@0", "precision@x", "precision@1.5"):
        with pytest.raises(ValueError, match="threshold objective"):
            thresholds.tune_threshold(labels, scores, bad)
    with pytest.raises(stats.UndefinedStatistic, match="one class"):
        thresholds.tune_threshold([True] * 5, np.arange(5.0))


def test_macro_average_is_the_mean_with_a_stratified_interval():
    parts = [_grid_data(cut, n=300, seed=seed) for seed, cut in enumerate((0.3, 0.6))]
    estimate = stats.macro_average(
        "balanced_accuracy", [(y, s, 0.45) for y, s in parts], n_resamples=200, seed=0
    )
    values = [balanced_accuracy_score(y, s >= 0.45) for y, s in parts]
    assert estimate.value == pytest.approx(np.mean(values))
    assert estimate.ci_low < estimate.value < estimate.ci_high and estimate.n == 600
    one_class = stats.macro_average(
        "balanced_accuracy", [(parts[0][0], parts[0][1], 0.5), ([True] * 3, [0.1, 0.2, 0.3], 0.5)]
    )
    assert one_class.value is None and "set 2" in one_class.note


# ------------------------------------------------------------------ layouts


def _write_aggrefact(path, split, n=90, seed=0, drop=None):
    """An LLM-AggreFact split in the published columns, three datasets."""
    pairs = eval_data.make_pairs(n, seed + (0 if split == "dev" else 50))
    rng = np.random.default_rng(seed)
    columns = ["dataset", "doc", "claim", "label", "contamination_identifier"]
    columns = [c for c in columns if c != drop]
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for index, pair in enumerate(pairs):
            writer.writerow(
                {
                    "dataset": DATASETS[index % 3],
                    "doc": pair.article,
                    "claim": pair.summary,
                    "label": int(eval_data.noisy_label(rng, pair.quality)),
                    "contamination_identifier": f"{index:064x}",
                }
            )
    return path


@pytest.fixture(scope="module")
def aggrefact_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("aggrefact")
    os.makedirs(root / "data")
    _write_aggrefact(root / "data" / "dev-00000-of-00001.csv", "dev")
    _write_aggrefact(root / "data" / "test-00000-of-00001.csv", "test")
    return str(root)


def test_aggrefact_gives_one_benchmark_per_dataset_of_the_split(aggrefact_dir):
    test = benchmarks_lib.load_benchmarks([f"aggrefact:{aggrefact_dir}"])
    dev = benchmarks_lib.load_benchmarks([f"aggrefact:{aggrefact_dir}:split=dev"])
    assert [b.name for b in test] == [f"aggrefact/{d}" for d in DATASETS]
    assert [b.name for b in dev] == [b.name for b in test]
    assert all(len(b) == 30 and b.has_labels and b.family == "aggrefact" for b in test)
    assert test[0].items[0].premise != dev[0].items[0].premise
    one_file = os.path.join(aggrefact_dir, "data", "test-00000-of-00001.csv")
    assert [len(b) for b in benchmarks_lib.load_benchmarks([f"aggrefact:{one_file}"])] == [30] * 3


def test_aggrefact_parquet_shards_are_read(tmp_path, aggrefact_dir):
    import pyarrow
    import pyarrow.parquet

    with open(
        os.path.join(aggrefact_dir, "data", "test-00000-of-00001.csv"), encoding="utf-8"
    ) as handle:
        rows = list(csv.DictReader(handle))
    table = pyarrow.Table.from_pylist([dict(r, label=int(r["label"])) for r in rows])
    pyarrow.parquet.write_table(table, str(tmp_path / "test-00000-of-00001.parquet"))
    loaded = benchmarks_lib.load_benchmarks([f"aggrefact:{tmp_path}"])
    assert [(b.name, len(b)) for b in loaded] == [(f"aggrefact/{d}", 30) for d in DATASETS]


def test_aggrefact_and_summac_name_a_missing_column_and_the_file(tmp_path):
    broken = _write_aggrefact(tmp_path / "test.csv", "test", n=6, drop="claim")
    with pytest.raises(TableFormatError, match=r"test\.csv:2: missing column 'claim'"):
        benchmarks_lib.load_benchmarks([f"aggrefact:{broken}"])
    summac = tmp_path / "summac.jsonl"
    summac.write_text(json.dumps({"document": "d", "claim": "c", "label": 1}) + "\n")
    with pytest.raises(TableFormatError, match=r"summac\.jsonl:1: missing column 'cut'"):
        benchmarks_lib.load_benchmarks([f"summac:{summac}"])
    with pytest.raises(FileNotFoundError, match="no dev file"):
        benchmarks_lib.load_benchmarks([f"aggrefact:{tmp_path}:split=dev"])
    with pytest.raises(ValueError, match="unknown option"):
        benchmarks_lib.parse_benchmark_spec(f"summac:{summac}:split=test")


def test_summac_reads_the_cut_by_dataset(tmp_path):
    path = tmp_path / "summac_benchmark.jsonl"
    rows = []
    for index, pair in enumerate(eval_data.make_pairs(40, 3)):
        rows.append(
            {
                "document": pair.article,
                "claim": pair.summary,
                "label": int(pair.faithful),
                "cut": ("val", "test")[index % 2],
                "dataset": ("frank", "xsumfaith")[index % 4 // 2],
                "model_name": ("bart", "pegasus")[index % 2],
                "origin": "cnndm",
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    test = benchmarks_lib.load_benchmarks([f"summac:{path}"])
    val = benchmarks_lib.load_benchmarks([f"summac:{path}:cut=val"])
    assert [(b.name, len(b)) for b in test] == [("summac/frank", 10), ("summac/xsumfaith", 10)]
    assert {i.system for b in val for i in b.items} == {"bart"}
    assert test[0].items[0].label == bool(rows[1]["label"])


# ------------------------------------------------------------------ evaluate


def test_evaluate_tunes_on_dev_and_reports_balanced_accuracy_on_test(aggrefact_dir, tmp_path):
    output = tmp_path / "report"
    assert (
        _evaluate_cli(
            [
                "--benchmark",
                f"aggrefact:{aggrefact_dir}",
                "--metric",
                "baseline:rougeL",
                "--metric",
                "baseline:length",
                "--tune_threshold_on",
                f"aggrefact:{aggrefact_dir}:split=dev",
                "--bootstrap",
                "100",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    data = json.loads((output / "report.json").read_text())
    tuned = thresholds.read_thresholds(str(output / "thresholds.json"))
    assert tuned.to_dict() == data["thresholds"] and set(tuned.metrics) == {"ROUGE-L", "length"}
    # The threshold is the one that maximises balanced accuracy on all dev items.
    dev = benchmarks_lib.load_benchmarks([f"aggrefact:{aggrefact_dir}:split=dev"])
    rouge = metrics_lib.build_metrics(["baseline:rougeL"])[0]
    labels = np.concatenate([b.labels for b in dev])
    scores = np.concatenate([rouge.score_benchmark(b) for b in dev])
    expected = thresholds.tune_threshold(labels, scores)
    assert tuned.metrics["ROUGE-L"].threshold == pytest.approx(expected.threshold)
    # Balanced accuracy on each test dataset at that threshold, and their mean.
    test = benchmarks_lib.load_benchmarks([f"aggrefact:{aggrefact_dir}"])
    values = []
    for benchmark in test:
        cell = next(
            r
            for r in data["results"]
            if r["metric"] == "ROUGE-L" and r["benchmark"] == benchmark.name
        )
        value = balanced_accuracy_score(
            benchmark.labels, rouge.score_benchmark(benchmark) >= expected.threshold
        )
        assert cell["statistics"]["tuned_balanced_accuracy"]["value"] == pytest.approx(value)
        assert cell["statistics"]["tuned_balanced_accuracy"]["ci_low"] is not None
        assert cell["tuned_threshold"] == pytest.approx(expected.threshold)
        values.append(value)
    macro = next(
        m for m in data["macro_averages"] if m["metric"] == "ROUGE-L" and m["family"] == "aggrefact"
    )
    assert macro["value"] == pytest.approx(np.mean(values))
    markdown = (output / "report.md").read_text()
    assert "### LLM-AggreFact: balanced accuracy at tuned thresholds" in markdown
    assert "avg (3 sets)" in markdown and "### Tuned thresholds" in markdown
    # The thresholds are reusable: the same numbers from --thresholds, no tuning.
    again = tmp_path / "again"
    assert (
        _evaluate_cli(
            [
                "--benchmark",
                f"aggrefact:{aggrefact_dir}",
                "--metric",
                "baseline:rougeL",
                "--metric",
                "baseline:length",
                "--thresholds",
                str(output / "report.json"),
                "--bootstrap",
                "100",
                "--output",
                str(again),
            ]
        )
        == 0
    )
    reused = json.loads((again / "report.json").read_text())
    cell = lambda d: next(r for r in d["results"] if r["metric"] == "ROUGE-L")  # noqa: E731
    assert (
        cell(reused)["statistics"]["tuned_balanced_accuracy"]
        == cell(data)["statistics"]["tuned_balanced_accuracy"]
    )
    assert not (again / "thresholds.json").exists()


def test_per_benchmark_scope_tunes_each_dataset_on_its_dev_counterpart(aggrefact_dir, tmp_path):
    config = run_lib.EvaluationConfig(n_resamples=0, threshold_scope="benchmark")
    report = run_lib.run_evaluation(
        [f"aggrefact:{aggrefact_dir}"],
        ["baseline:rougeL"],
        str(tmp_path),
        config,
        tune_on=[f"aggrefact:{aggrefact_dir}:split=dev"],
    )
    dev = benchmarks_lib.load_benchmarks([f"aggrefact:{aggrefact_dir}:split=dev"])
    rouge = report.metrics[0]
    for benchmark in dev:
        expected = thresholds.tune_threshold(benchmark.labels, rouge.score_benchmark(benchmark))
        applied = report.result("ROUGE-L", benchmark.name).tuned_threshold
        assert applied == pytest.approx(expected.threshold)


def test_a_thresholds_file_naming_an_unknown_metric_is_refused(aggrefact_dir, tmp_path):
    path = tmp_path / "thresholds.json"
    path.write_text(
        json.dumps({"format": thresholds.THRESHOLDS_FORMAT, "metrics": {"q4": {"threshold": 0.4}}})
    )
    with pytest.raises(
        ValueError,
        match=r"thresholds\.json: thresholds for unknown metric\(s\) "
        r"\['q4'\]",
    ):
        _evaluate_cli(
            [
                "--benchmark",
                f"aggrefact:{aggrefact_dir}",
                "--metric",
                "baseline:rougeL",
                "--thresholds",
                str(path),
                "--output",
                str(tmp_path / "out"),
            ]
        )
    path.write_text(json.dumps({"metrics": {}}))
    with pytest.raises(ValueError, match="not a thresholds file"):
        thresholds.read_thresholds(str(path))
    with pytest.raises(ValueError, match="not both"):
        run_lib.run_evaluation(
            [f"aggrefact:{aggrefact_dir}"],
            ["baseline:rougeL"],
            str(tmp_path / "x"),
            FAST,
            tune_on=["aggrefact:x"],
            thresholds_path=str(path),
        )


# ------------------------------------------------------------------ checkpoint modes


def test_checkpoint_specs_take_the_scorers_modes(tmp_path):
    spec = metrics_lib.parse_metric_spec(
        f"chunked=checkpoint:{tmp_path},long_inputs=chunk,per_sentence=share@0.5"
    )
    assert spec.argument == str(tmp_path) and spec.name == "chunked"
    assert spec.settings == (("long_inputs", "chunk"), ("per_sentence", "share@0.5"))
    assert options_from_spec(spec.settings) == {
        "long_inputs": "chunk",
        "per_sentence": True,
        "sentence_aggregate": "share@0.5",
    }
    plain = metrics_lib.parse_metric_spec(f"checkpoint:{tmp_path}")
    assert plain.settings == () and plain.name == os.path.basename(str(tmp_path))
    assert (
        metrics_lib.build_metric(spec).fingerprint()
        != metrics_lib.build_metric(plain).fingerprint()
    )
    for bad, message in [
        (",per_sentence=median", "share@T"),
        (",long_inputs=split", "long_inputs"),
        (",max_input_length=lots", "whole number"),
    ]:
        with pytest.raises(ValueError, match=message):
            metrics_lib.parse_metric_spec(f"checkpoint:{tmp_path}{bad}")


def test_evaluate_scores_checkpoints_per_sentence_and_chunked(tiny_hf_dir, tmp_path):
    """share@T against the Scorer's per-sentence scores; chunked scores as the Scorer gives."""
    from seahorse_metrics import Scorer

    items = eval_data.rated_pairs(12, 4, prefix="s")
    items = [
        eval_data.RatedPair(**{**i.__dict__, "hypothesis": i.hypothesis + ". " + i.hypothesis})
        for i in items
    ]
    benchmark = benchmarks_lib.Benchmark(
        "ratings/s", "ratings", "s", "two-sentence summaries", tuple(items)
    )
    specs = [
        f"share=checkpoint:{tiny_hf_dir},per_sentence=share@0.001,max_input_length=128",
        # The summaries are longer than 32 tokens: cut, leaving the article a quarter.
        f"chunk=checkpoint:{tiny_hf_dir},long_inputs=chunk,max_input_length=32,long_summaries=cut",
    ]
    metrics = metrics_lib.build_metrics(specs, batch_size=8)
    report = run_lib.evaluate([benchmark], metrics, run_lib.EvaluationConfig(n_resamples=0))
    scorer = Scorer.load(tiny_hf_dir, max_input_length=128, per_sentence=True)
    detailed = scorer.score_detailed([i.premise for i in items], [i.hypothesis for i in items])
    expected = [float(np.mean(s >= 0.001)) for s in detailed.sentence_scores["score"]]
    np.testing.assert_allclose(report.scores[("share", "ratings/s")], expected)
    assert {0.0, 0.5, 1.0} >= set(report.scores[("share", "ratings/s")])
    chunked = Scorer.load(
        tiny_hf_dir, max_input_length=32, long_inputs="chunk", long_summaries="cut"
    )
    np.testing.assert_allclose(
        report.scores[("chunk", "ratings/s")],
        chunked.score([i.premise for i in items], [i.hypothesis for i in items]),
        rtol=1e-6,
    )
