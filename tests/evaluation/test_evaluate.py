"""Meta-evaluation: specs, benchmarks, scores files, cache and `evaluate` end to end."""

import argparse
import dataclasses
import json
import os

import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import roc_auc_score

from seahorse_metrics.evaluation import benchmarks as benchmarks_lib
from seahorse_metrics.evaluation import metrics as metrics_lib
from seahorse_metrics.evaluation import run as run_lib
from seahorse_metrics.evaluation.benchmarks import Benchmark
from seahorse_metrics.evaluation.cache import ScoreCache

from fixtures import eval_data

SAMPLE = os.path.join(os.path.dirname(benchmarks_lib.__file__), "..", "data", "sample")
FAST = run_lib.EvaluationConfig(n_resamples=50)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_data")
    return {
        "prepared": eval_data.write_prepared_split(str(root / "prepared")),
        "mface": eval_data.write_mface_sheet(str(root / "mface.csv")),
        "true": eval_data.write_true_dir(str(root / "true")),
        "ratings": eval_data.write_ratings_jsonl(str(root / "squality.jsonl")),
    }


def _evaluate_cli(argv):
    from seahorse_metrics.cli import evaluate

    parser = argparse.ArgumentParser(prog="seahorse-metrics")
    evaluate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["evaluate"] + argv)
    return args.func(args)


# ----------------------------------------------------------------- specs


def test_parse_benchmark_specs():
    parse = benchmarks_lib.parse_benchmark_spec
    assert parse("seahorse:data/prep:q4") == benchmarks_lib.BenchmarkSpec(
        "seahorse", "data/prep", (4,)
    )
    spec = parse("seahorse:data/prep:q1,q4,split=validation")
    assert spec.questions == (1, 4) and spec.option("split") == "validation"
    assert parse("seahorse:data/prep").questions == ()
    assert parse("mface:m.csv:q4,threshold=0.6").option("threshold") == "0.6"
    assert parse("ratings:r.jsonl:rating=score,threshold=50").options == (
        ("rating", "score"),
        ("threshold", "50"),
    )
    # A colon inside a path that is not followed by options stays in the path.
    assert parse("true:C:/data/true").path == "C:/data/true"
    for bad, message in [
        ("rouge:x", "benchmark specs are"),
        ("seahorse:", "benchmark specs"),
        ("true:dir:q4", "takes no question"),
        ("mface:m.csv:split=test", "unknown option"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse(bad)


def test_parse_metric_specs(tmp_path):
    scores = tmp_path / "ext.jsonl"
    scores.write_text('{"id": "a", "bleurt": 0.3}\n')
    parse = metrics_lib.parse_metric_spec
    assert parse("baseline:rougeL").name == "ROUGE-L"
    assert parse("baseline:rougeL:precision").option == "precision"
    assert parse("mine=baseline:length").name == "mine"
    checkpoint = parse("checkpoint:runs/q4_small/")
    assert (checkpoint.kind, checkpoint.name) == ("checkpoint", "q4_small")
    spec = parse(f"scores:{scores}:bleurt")
    assert (spec.argument, spec.option, spec.name) == (str(scores), "bleurt", "ext:bleurt")
    assert parse(f"scores:{scores}").option is None
    for bad, message in [
        ("baseline:bleu", "unknown baseline"),
        ("model:x", "metric specs are"),
        ("baseline:length:precision", "only rougeL"),
        ("=baseline:length", "empty NAME"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse(bad)
    with pytest.raises(ValueError, match="occur twice"):
        metrics_lib.build_metrics(["baseline:length", "baseline:length"])


# ------------------------------------------------------------- benchmarks


def test_seahorse_benchmarks_per_question_and_split(data, tmp_path):
    loaded = benchmarks_lib.load_benchmarks([f"seahorse:{data['prepared']}"])
    assert [b.name for b in loaded] == [f"seahorse/q{q}" for q in range(1, 7)]
    q2 = loaded[1]
    assert len(q2) < len(loaded[0])  # unsure ratings are left out
    assert q2.has_labels and not q2.continuous and "Q2 repetition" in q2.description
    only = benchmarks_lib.load_benchmarks([f"seahorse:{data['prepared']}:q4,q1"])
    assert [b.name for b in only] == ["seahorse/q4", "seahorse/q1"]
    by_file = benchmarks_lib.load_benchmarks(
        [f"seahorse:{os.path.join(data['prepared'], 'test.jsonl')}:q4"]
    )
    assert by_file[0].ids == only[0].ids
    eval_data.write_prepared_split(str(tmp_path), n=20, split="validation")
    validation = benchmarks_lib.load_benchmarks([f"seahorse:{tmp_path}:q4,split=validation"])
    assert "SEAHORSE validation" in validation[0].description
    with pytest.raises(FileNotFoundError, match="seahorse-metrics prepare"):
        benchmarks_lib.load_benchmarks([f"seahorse:{tmp_path}:q4"])  # no test.jsonl


def test_mface_benchmarks_map_questions_and_subset_languages(data):
    loaded = benchmarks_lib.load_benchmarks([f"mface:{data['mface']}"])
    names = [b.name for b in loaded]
    assert names == [
        "mface-5lang/q1",
        "mface-all/q1",
        "mface-5lang/q4",
        "mface-all/q4",
        "mface-5lang/q6",
        "mface-all/q6",
    ]
    by_name = {b.name: b for b in loaded}
    assert {i.lang for i in by_name["mface-5lang/q4"].items} == {"en", "es", "ru", "tr", "vi"}
    assert {"fr", "ja", "sw"} <= {i.lang for i in by_name["mface-all/q4"].items}
    assert "mFACE attribution (as SEAHORSE Q4)" in by_name["mface-all/q4"].description
    q4 = by_name["mface-all/q4"]
    assert q4.continuous and q4.has_labels  # raw avg for rho, avg >= 0.5 for ROC
    np.testing.assert_array_equal(q4.labels, q4.ratings >= 0.5)
    only = benchmarks_lib.load_benchmarks([f"mface:{data['mface']}:q4,threshold=0.7"])
    assert [b.name for b in only] == ["mface-5lang/q4", "mface-all/q4"]
    np.testing.assert_array_equal(only[1].labels, only[1].ratings >= 0.7)
    with pytest.raises(ValueError, match="no counterpart of q2"):
        benchmarks_lib.load_benchmarks([f"mface:{data['mface']}:q2"])


def test_true_directory_gives_one_benchmark_per_csv(data):
    loaded = benchmarks_lib.load_benchmarks([f"true:{data['true']}"])
    assert [b.name for b in loaded] == ["true/frank", "true/mnbm"]
    assert [b.column for b in loaded] == ["frank", "mnbm"]
    single = benchmarks_lib.load_benchmarks([f"true:{os.path.join(data['true'], 'mnbm.csv')}"])
    assert [b.name for b in single] == ["true/mnbm"]
    assert single[0].has_labels and not single[0].continuous


def test_ratings_benchmark_continuous_and_thresholded(data):
    (plain,) = benchmarks_lib.load_benchmarks([f"ratings:{data['ratings']}"])
    assert plain.name == "ratings/squality" and plain.continuous and not plain.has_labels
    (labelled,) = benchmarks_lib.load_benchmarks(
        [f"ratings:{data['ratings']}:rating=rating,id=id,threshold=50"]
    )
    assert labelled.ids[0] == "sq0"
    np.testing.assert_array_equal(labelled.labels, labelled.ratings >= 50)


def test_benchmark_errors_name_the_problem(data, tmp_path):
    with pytest.raises(FileNotFoundError):
        benchmarks_lib.load_benchmarks([f"true:{tmp_path / 'missing'}"])
    with pytest.raises(ValueError, match="occur twice"):
        benchmarks_lib.load_benchmarks([f"true:{data['true']}", f"true:{data['true']}"])
    with pytest.raises(ValueError, match="not a number"):
        benchmarks_lib.load_benchmarks([f"ratings:{data['ratings']}:threshold=high"])
    items = eval_data.rated_pairs(4, 0)
    with pytest.raises(ValueError, match="duplicate item id"):
        Benchmark("x/y", "x", "y", "", tuple(items + items[:1]))


# ----------------------------------------------------------- scores files


def _bench(n=30, seed=0, name="true/frank"):
    family, column = name.split("/")
    return Benchmark(name, family, column, "test", tuple(eval_data.rated_pairs(n, seed)))


def test_scores_file_aligned_by_id_and_benchmark(tmp_path):
    bench = _bench()
    other = _bench(name="true/mnbm")
    rng = np.random.default_rng(0)
    rows = [
        {"benchmark": b.name, "id": i, "value": float(rng.uniform())}
        for b in (bench, other)
        for i in reversed(b.ids)
    ]
    path = eval_data.write_scores_file(str(tmp_path / "ext.csv"), rows)
    metric = metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{path}"))
    got = metric.score_benchmark(bench)
    expected = {r["id"]: r["value"] for r in rows if r["benchmark"] == bench.name}
    np.testing.assert_allclose(got, [expected[i] for i in bench.ids])
    # Same ids, other benchmark: the benchmark column keeps them apart.
    assert not np.allclose(metric.score_benchmark(other), got)


def test_scored_prepared_split_aligns_with_the_seahorse_benchmark(tmp_path):
    # `seahorse-metrics score` keeps a prepared split's gem_id/system/line
    # fields; those name the SEAHORSE benchmark's items, and the q1..q6
    # ratings are never mistaken for the score column.
    records = [
        {
            "gem_id": f"xsum-test-{i}",
            "lang": "en",
            "source": "xsum",
            "system": "t5_base",
            "article": f"Article {i}.",
            "summary": f"Summary {i}.",
            **{f"q{q}": (i + q) % 2 == 0 for q in range(1, 7)},
            "split": "test",
            "line": i + 2,
            "q4_metric": i / 10,
        }
        for i in range(8)
    ]
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    with open(prepared / "test.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    with open(tmp_path / "scored.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in reversed(records))
    (bench,) = benchmarks_lib.load_benchmarks([f"seahorse:{prepared}:q4"])
    metric = metrics_lib.build_metric(
        metrics_lib.parse_metric_spec(f"scores:{tmp_path}/scored.jsonl")
    )
    expected = {f"{r['gem_id']}|{r['system']}|{r['line']}": r["q4_metric"] for r in records}
    np.testing.assert_allclose(metric.score_benchmark(bench), [expected[i] for i in bench.ids])


def test_scores_file_by_row_order_and_column_choice(tmp_path):
    bench = _bench(n=5)
    text = tmp_path / "plain.txt"
    text.write_text("\n".join(str(v) for v in [0.1, 0.2, 0.3, 0.4, 0.5]) + "\n")
    metric = metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{text}"))
    np.testing.assert_allclose(metric.score_benchmark(bench), [0.1, 0.2, 0.3, 0.4, 0.5])
    with pytest.raises(metrics_lib.MetricNotApplicable, match="no id column"):
        metric.score_benchmark(_bench(n=6))
    rows = [{"premise": "p", "a": 1.0, "b": 2.0}] * 5
    path = eval_data.write_scores_file(str(tmp_path / "two.tsv"), rows)
    with pytest.raises(ValueError, match="cannot tell which column"):
        metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{path}")).score_benchmark(
            bench
        )
    chosen = metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{path}:b"))
    np.testing.assert_allclose(chosen.score_benchmark(bench), [2.0] * 5)
    with pytest.raises(ValueError, match="no column 'c'"):
        metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{path}:c")).table


def test_scores_file_errors(tmp_path):
    bench = _bench(n=4)
    partial = eval_data.write_scores_file(
        str(tmp_path / "partial.jsonl"), [{"id": i, "score": 0.5} for i in bench.ids[:3]]
    )
    metric = metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{partial}"))
    with pytest.raises(ValueError, match=r"no score for 1 of 4 items of true/frank .*'item3'"):
        metric.score_benchmark(bench)
    with pytest.raises(metrics_lib.MetricNotApplicable, match="no scores for the ids"):
        metric.score_benchmark(
            Benchmark("a/b", "a", "b", "", tuple(eval_data.rated_pairs(3, 1, prefix="other")))
        )
    repeated = eval_data.write_scores_file(
        str(tmp_path / "rep.jsonl"), [{"id": "item0", "score": 0.1}, {"id": "item0", "score": 0.2}]
    )
    with pytest.raises(ValueError, match="row 2 repeats id 'item0' of row 1"):
        metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{repeated}")).table
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "item0", "score": 0.1}\n{"id": \n')
    with pytest.raises(ValueError, match=r"broken\.jsonl:2: invalid JSON"):
        metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{broken}")).table
    words = eval_data.write_scores_file(
        str(tmp_path / "w.jsonl"), [{"id": "item0", "score": "high"}]
    )
    with pytest.raises(ValueError, match="w.jsonl: row 1: score='high' is not a number"):
        metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"scores:{words}")).table
    with pytest.raises(FileNotFoundError):
        metrics_lib.build_metric(metrics_lib.parse_metric_spec("scores:/nope.jsonl"))


def test_a_scores_file_that_cannot_be_aligned_is_an_error_unless_partial_coverage_is_allowed(
    tmp_path,
):
    frank = _bench(n=6)
    other = Benchmark("a/b", "a", "b", "", tuple(eval_data.rated_pairs(5, 1, prefix="other")))
    path = eval_data.write_scores_file(
        str(tmp_path / "ext.jsonl"), [{"id": i, "score": 0.5} for i in frank.ids]
    )
    metric = metrics_lib.build_metric(metrics_lib.parse_metric_spec(f"ext=scores:{path}"))
    with pytest.raises(
        ValueError,
        match=r"metric ext cannot be aligned with a/b: .*has no scores "
        r"for the ids of a/b.*--allow_partial_coverage",
    ):
        run_lib.evaluate([frank, other], [metric], FAST)
    partial = dataclasses.replace(FAST, allow_partial_coverage=True)
    report = run_lib.evaluate([frank, other], [metric], partial)
    assert report.result("ext", "a/b").note.startswith("not covered")
    assert report.result("ext", "true/frank").n == 6
    with pytest.raises(ValueError, match="metric ext covers none of the benchmarks"):
        run_lib.evaluate([other], [metric], partial)


def test_nan_scores_fail_naming_the_metric_unless_dropped(tmp_path):
    bench = _bench(n=40)
    scores = {i: (float("nan") if k % 10 == 0 else k / 40) for k, i in enumerate(bench.ids)}
    metric = eval_data.fixed_scores_metric("flaky", scores)
    with pytest.raises(ValueError, match="metric flaky: 4 of 40 scores on true/frank are NaN"):
        run_lib.evaluate([bench], [metric], FAST)
    report = run_lib.evaluate(
        [bench], [metric], run_lib.EvaluationConfig(n_resamples=50, drop_nan=True)
    )
    result = report.result("flaky", "true/frank")
    assert result.n == 36 and "4 of 40 items left out" in result.note
    assert result.statistics["roc_auc"].n == 36


# ------------------------------------------------------------------ cache


def test_adding_a_metric_does_not_rescore_the_others(tmp_path):
    bench = _bench(n=30)
    cache = ScoreCache(str(tmp_path / "cache"))
    first = eval_data.word_overlap_metric("overlap")
    report = run_lib.evaluate([bench], [first], FAST, cache=cache)
    assert first.calls == [30]
    again = eval_data.word_overlap_metric("overlap")
    added = eval_data.word_overlap_metric("other", version="2")
    report2 = run_lib.evaluate([bench], [again, added], FAST, cache=cache)
    assert again.calls == [] and added.calls == [30]
    assert report2.scoring == {
        "overlap": {"cached": 1, "scored": 0},
        "other": {"cached": 0, "scored": 1},
    }
    np.testing.assert_array_equal(
        report.scores[("overlap", bench.name)], report2.scores[("overlap", bench.name)]
    )
    # Changed text: the entry is stale and the pairs are scored again.
    items = list(bench.items)
    items[0] = eval_data.RatedPair(**{**items[0].__dict__, "hypothesis": "new words"})
    changed = Benchmark(bench.name, bench.family, bench.column, "", tuple(items))
    third = eval_data.word_overlap_metric("overlap")
    run_lib.evaluate([changed], [third], FAST, cache=cache)
    assert third.calls == [30]


def test_pairs_shared_between_benchmarks_are_scored_once():
    items = eval_data.rated_pairs(20, 0)
    a = Benchmark("s/q1", "s", "q1", "", tuple(items))
    b = Benchmark("s/q4", "s", "q4", "", tuple(items[:15]))
    metric = eval_data.word_overlap_metric()
    run_lib.evaluate([a, b], [metric], FAST)
    assert metric.calls == [20]


def test_compare_needs_known_metric_names():
    metric = eval_data.word_overlap_metric()
    with pytest.raises(ValueError, match="needs two different metric names"):
        run_lib.evaluate([_bench()], [metric], FAST, compare=[("overlap", "bleu")])


# ------------------------------------------------------------ end to end


def _scores_rows(benchmarks, seed=0):
    """An external metric: noisy labels/ratings, keyed by benchmark and id."""
    rng = np.random.default_rng(seed)
    rows = []
    for bench in benchmarks:
        for item, rating in zip(bench.items, bench.ratings):
            rows.append(
                {
                    "benchmark": bench.name,
                    "id": item.id,
                    "score": float(
                        np.clip(
                            0.3 * rating / max(bench.ratings.max(), 1) + rng.uniform(0, 0.7), 0, 1
                        )
                    ),
                }
            )
    return rows


def test_evaluate_cli_on_fixture_files(data, tmp_path):
    specs = [
        f"seahorse:{data['prepared']}:q1,q4",
        f"mface:{data['mface']}:q4",
        f"true:{data['true']}",
        f"ratings:{data['ratings']}",
    ]
    benchmarks = benchmarks_lib.load_benchmarks(specs)
    scores = eval_data.write_scores_file(str(tmp_path / "ext.jsonl"), _scores_rows(benchmarks))
    output = tmp_path / "report"
    argv = [a for spec in specs for a in ("--benchmark", spec)] + [
        "--metric",
        "baseline:rougeL",
        "--metric",
        "baseline:majority",
        "--metric",
        f"ext=scores:{scores}",
        "--compare",
        "ext",
        "ROUGE-L",
        "--bootstrap",
        "100",
        "--output",
        str(output),
    ]
    assert _evaluate_cli(argv) == 0
    report = json.loads((output / "report.json").read_text(), parse_constant=_no_nan)
    cells = {(r["metric"], r["benchmark"]): r for r in report["results"]}
    # Numbers agree with scikit-learn/scipy on the same items.
    by_name = {b.name: b for b in benchmarks}
    ext = {(r["benchmark"], r["id"]): r["score"] for r in _scores_rows(benchmarks)}
    for name in ("true/frank", "seahorse/q4", "mface-all/q4"):
        bench = by_name[name]
        x = np.array([ext[(name, i)] for i in bench.ids])
        stats_ = cells[("ext", name)]["statistics"]
        assert stats_["roc_auc"]["value"] == pytest.approx(roc_auc_score(bench.labels, x), abs=1e-9)
        assert stats_["pearson"]["value"] == pytest.approx(
            scipy_stats.pearsonr(x, bench.ratings).statistic, abs=1e-9
        )
        assert stats_["roc_auc"]["n"] == len(bench)
        assert (
            stats_["roc_auc"]["ci_low"]
            <= stats_["roc_auc"]["value"]
            <= stats_["roc_auc"]["ci_high"]
        )
    squality = cells[("ext", "ratings/squality")]["statistics"]
    assert set(squality) >= {"pearson", "spearman", "kendall", "system_pearson"}
    assert "roc_auc" not in squality
    assert cells[("majority", "ratings/squality")]["note"].startswith("not covered")
    assert cells[("majority", "true/frank")]["statistics"]["pearson"]["value"] is None
    assert "accuracy" not in cells[("ROUGE-L", "true/frank")]["statistics"]
    assert len(report["comparisons"]) == len(benchmarks)
    markdown = (output / "report.md").read_text()
    assert (
        "| Metric | frank ρ (n=60) | frank ROC (n=60) | mnbm ρ (n=60) | mnbm ROC (n=60) |"
        in markdown
    )
    assert os.path.isfile(output / "report.html")
    # A second run with one more metric reads the others from the cache.
    argv += ["--metric", "baseline:length"]
    assert _evaluate_cli(argv) == 0
    entries = sorted(os.listdir(output / "cache"))
    assert len(entries) == 3  # ROUGE-L, ext, length (majority depends on labels)


def _no_nan(constant):
    raise AssertionError(f"report.json holds {constant}")


def test_evaluate_on_bundled_samples(tmp_path):
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare

    seahorse = os.path.join(SAMPLE, "seahorse")
    prepare(
        seahorse,
        LocalArticleSource(os.path.join(seahorse, "articles.jsonl")),
        str(tmp_path / "prepared"),
        splits=("test",),
    )
    mface = os.path.join(SAMPLE, "mface", "mface_sample.csv")
    specs = [
        f"seahorse:{tmp_path / 'prepared'}:q1,q4",
        f"mface:{mface}:q4",
        f"true:{os.path.join(SAMPLE, 'true')}",
    ]
    benchmarks = benchmarks_lib.load_benchmarks(specs)
    scores = eval_data.write_scores_file(str(tmp_path / "ext.csv"), _scores_rows(benchmarks))
    output = tmp_path / "report"
    argv = [a for spec in specs for a in ("--benchmark", spec)] + [
        "--metric",
        "baseline:rougeL",
        "--metric",
        f"ext=scores:{scores}",
        # The sample sheet carries an NLI metric's scores: any column can be compared.
        "--metric",
        f"nli=scores:{mface}:e2e_nli_score",
        "--allow_partial_coverage",
        "--compare",
        "ext",
        "ROUGE-L",
        "--bootstrap",
        "100",
        "--output",
        str(output),
    ]
    assert _evaluate_cli(argv) == 0
    report = json.loads((output / "report.json").read_text(), parse_constant=_no_nan)
    cells = {(r["metric"], r["benchmark"]): r for r in report["results"]}
    true_names = [b.name for b in benchmarks if b.family == "true"]
    assert true_names == ["true/frank", "true/paws", "true/qags_x", "true/summeval"]
    markdown = (output / "report.md").read_text()
    header = next(line for line in markdown.splitlines() if line.startswith("| Metric | frank"))
    for name in ("frank", "paws", "qags_x", "summeval"):
        assert f"{name} ρ (n=" in header and f"{name} ROC (n=" in header
    for bench in benchmarks:
        for metric in ("ROUGE-L", "ext"):
            auc = cells[(metric, bench.name)]["statistics"]["roc_auc"]
            assert 0.0 <= auc["value"] <= 1.0 and auc["n"] == len(bench)
    mface_bench = next(b for b in benchmarks if b.name == "mface-all/q4")
    nli = np.array(
        [float(r["e2e_nli_score"]) for r in _csv_rows(mface) if r["id"] in set(mface_bench.ids)]
    )
    assert cells[("nli", "mface-all/q4")]["statistics"]["roc_auc"]["value"] == pytest.approx(
        roc_auc_score(mface_bench.labels, nli), abs=1e-9
    )
    assert cells[("nli", "true/frank")]["note"].startswith("not covered")
    html_text = (output / "report.html").read_text()
    assert html_text.count('class="roc"') == len(benchmarks)
    assert "model-only vs reference-only" in html_text


def _csv_rows(path):
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_checkpoint_metric_scores_with_the_scorer_and_caches(tiny_hf_dir, tmp_path):
    from seahorse_metrics import Scorer

    bench = _bench(n=12)
    spec = metrics_lib.parse_metric_spec(f"tiny=checkpoint:{tiny_hf_dir}")
    metric = metrics_lib.build_metric(spec, batch_size=4)
    cache = ScoreCache(str(tmp_path / "cache"))
    report = run_lib.evaluate([bench], [metric], FAST, cache=cache)
    # The loaded Scorer, called directly on the items in order (no second compile).
    assert isinstance(metric._scorer, Scorer)
    expected = metric._scorer.score(
        [i.premise for i in bench.items], [i.hypothesis for i in bench.items]
    )
    scores = report.scores[("tiny", bench.name)]
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-6)
    assert np.all((scores >= 0) & (scores <= 1))
    result = report.result("tiny", bench.name)
    assert {"roc_auc", "pearson", "accuracy", "balanced_accuracy"} <= set(result.statistics)
    assert result.calibration is not None
    # From the cache, the checkpoint is not even loaded.
    again = metrics_lib.build_metric(spec, batch_size=4)
    run_lib.evaluate([bench], [again], FAST, cache=cache)
    assert again._scorer is None


def test_mface_sheet_without_shared_languages_keeps_the_all_languages_column(tmp_path, caplog):
    import csv

    path = eval_data.write_mface_sheet(str(tmp_path / "m.csv"))
    rows = [r for r in _csv_rows(path) if r["lang"] in ("fr", "ja")]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    loaded = benchmarks_lib.load_benchmarks([f"mface:{path}:q4"])
    assert [b.name for b in loaded] == ["mface-all/q4"]
    assert "mface-5lang/q4 has no items" in caplog.text


def test_evaluate_cli_rejects_bad_arguments(data, tmp_path):
    base = ["--output", str(tmp_path / "out"), "--metric", "baseline:length"]
    with pytest.raises(ValueError, match="bad benchmark spec 'bogus:x'"):
        _evaluate_cli(base + ["--benchmark", "bogus:x"])
    with pytest.raises(ValueError, match="unknown baseline 'bleu'"):
        _evaluate_cli(base + ["--benchmark", f"true:{data['true']}", "--metric", "baseline:bleu"])
    with pytest.raises(ValueError, match=r"--compare \['length', 'bleu'\]"):
        _evaluate_cli(base + ["--benchmark", f"true:{data['true']}", "--compare", "length", "bleu"])
    with pytest.raises(ValueError, match="--compare needs bootstrap resamples"):
        _evaluate_cli(
            base
            + [
                "--benchmark",
                f"true:{data['true']}",
                "--bootstrap",
                "0",
                "--compare",
                "length",
                "length",
            ]
        )
    assert not os.path.exists(tmp_path / "out" / "report.md")


def test_a_failed_evaluate_leaves_no_output_directory(data, tmp_path):
    """Issue 48 point 22: a scores file without the named column."""
    scores = eval_data.write_scores_file(
        str(tmp_path / "ext.jsonl"), [{"id": "item0", "score": 0.5}]
    )
    output = tmp_path / "report"
    with pytest.raises(ValueError, match=r"ext\.jsonl: no column 'nope'"):
        _evaluate_cli(
            [
                "--benchmark",
                f"true:{data['true']}",
                "--metric",
                f"ext=scores:{scores}:nope",
                "--output",
                str(output),
            ]
        )
    assert not output.exists()
    # An output directory that was there before is left as it was.
    output.mkdir()
    with pytest.raises(ValueError, match="no column 'nope'"):
        _evaluate_cli(
            [
                "--benchmark",
                f"true:{data['true']}",
                "--metric",
                f"ext=scores:{scores}:nope",
                "--output",
                str(output),
            ]
        )
    assert output.is_dir() and not os.listdir(output)


def test_evaluate_prints_its_headline_table(data, tmp_path, capsys):
    """Issue 48 point 16: per metric and benchmark, ROC-AUC and rho with
    intervals; the best per benchmark marked."""
    specs = [f"true:{data['true']}", f"ratings:{data['ratings']}"]
    benchmarks = benchmarks_lib.load_benchmarks(specs)
    scores = eval_data.write_scores_file(str(tmp_path / "ext.jsonl"), _scores_rows(benchmarks))
    output = tmp_path / "report"
    assert (
        _evaluate_cli(
            [a for spec in specs for a in ("--benchmark", spec)]
            + [
                "--metric",
                "baseline:rougeL",
                "--metric",
                f"ext=scores:{scores}",
                "--bootstrap",
                "100",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    report = json.loads((output / "report.json").read_text())
    cells = {(r["metric"], r["benchmark"]): r["statistics"] for r in report["results"]}
    header = next(line for line in printed.splitlines() if line.startswith("benchmark"))
    assert header.split() == [
        "benchmark",
        "metric",
        "n",
        "ROC-AUC",
        "Pearson",
        "ρ",
        "Spearman",
        "ρ",
    ]
    rows = {}
    for line in printed.splitlines():
        parts = line.split()
        if len(parts) > 3 and (parts[0], parts[1]) in {(b, m) for m, b in cells}:
            rows[(parts[1], parts[0])] = line
    assert set(rows) == set(cells)

    def shown(estimate):
        return f"{estimate['value']:.3f} [{estimate['ci_low']:.3f}, {estimate['ci_high']:.3f}]"

    for benchmark in (b.name for b in benchmarks):
        for statistic in ("roc_auc", "pearson", "spearman"):
            values = {
                m: s[statistic] for (m, b), s in cells.items() if b == benchmark and statistic in s
            }
            if not values:
                continue
            best = max(values, key=lambda m: values[m]["value"])
            for metric, estimate in values.items():
                assert (
                    shown(estimate) + (" *" if metric == best else "") in rows[(metric, benchmark)]
                ), (metric, benchmark, statistic)
    assert "* best on its benchmark" in printed
    assert "95% percentile bootstrap intervals" in printed
    assert f"wrote {output}/report.md, report.json, report.html" in printed


def test_each_metric_carries_its_signature_into_the_reports(tiny_hf_dir, tmp_path, monkeypatch):
    """What produced each metric's scores (`scoring.signature`) is in report.json,
    .md and .html, from the cache too; an int8 checkpoint adds its self-check."""
    from seahorse_metrics.evaluation.report import write_report
    from seahorse_metrics.scoring.signature import parse_signature

    monkeypatch.setenv("SEAHORSE_METRICS_CACHE", str(tmp_path / "user_cache"))
    monkeypatch.setenv("SEAHORSE_METRICS_INT8_CHECK", "on")  # conftest turns it off
    bench = _bench(n=12)
    rows = [{"id": i, "q4": float(n) / 12} for n, i in enumerate(bench.ids)]
    scores = eval_data.write_scores_file(str(tmp_path / "scored.csv"), rows)
    with open(scores + ".meta.json", "w", encoding="utf-8") as handle:
        json.dump(
            {"columns": {"q4": "q4"}, "settings": {"signatures": {"q4": "seahorse:x|q"}}}, handle
        )
    specs = [
        f"tiny=checkpoint:{tiny_hf_dir},quantize=int8,max_input_length=128",
        "baseline:length",
        f"ext=scores:{scores}:q4",
    ]
    cache = ScoreCache(str(tmp_path / "cache"))
    for run in range(2):
        metrics = [
            metrics_lib.build_metric(metrics_lib.parse_metric_spec(s), batch_size=4) for s in specs
        ]
        report = run_lib.evaluate([bench], metrics, FAST, cache=cache)
        tiny = report.provenance["tiny"]
        assert parse_signature(tiny["signature"])["quant"].startswith("int8-")
        assert tiny["int8_check"]["pairs"] > 0
        assert (metrics[0]._scorer is None) == (run == 1)  # The second run reads the cache.
    assert report.provenance["length"]["signature"].endswith("|baseline:length")
    assert report.provenance["ext"]["signature"] == "seahorse:x|q"
    paths = write_report(report, str(tmp_path / "report"))
    with open(paths["json"], encoding="utf-8") as handle:
        listed = {m["name"]: m for m in json.load(handle)["metrics"]}
    assert listed["tiny"]["signature"] == tiny["signature"]
    for kind in ("md", "html"):
        with open(paths[kind], encoding="utf-8") as handle:
            text = handle.read()
        assert tiny["signature"].split("|")[1] in text and "int8 against float32" in text
