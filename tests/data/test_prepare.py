"""Tests of `prepare` and the `seahorse-metrics prepare` command."""

import json
import os

import pytest

from seahorse_metrics.data import seahorse
from seahorse_metrics.data.articles import LocalArticleSource
from seahorse_metrics.data.prepare import prepare

from fixtures import paths, tiny_data

SAMPLE_DIR = os.path.join(paths.REPO, "seahorse_metrics", "data", "sample")


def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_prepare_writes_self_contained_splits(tmp_path):
    release = tiny_data.write_release(str(tmp_path / "release"))
    os.makedirs(os.path.join(release, "duplicates"))
    source = LocalArticleSource(tiny_data.write_articles(str(tmp_path / "articles.jsonl")))
    out = str(tmp_path / "prepared")
    report = prepare(release, source, out)

    train = _read_jsonl(os.path.join(out, "train.jsonl"))
    first = tiny_data.RELEASE_ROWS["train"][0]
    assert train[0] == {
        "gem_id": first[0],
        "lang": "en",
        "source": "xlsum",
        "system": "t5_base",
        "article": tiny_data.ARTICLES[first[0]],
        "summary": first[2],
        "q1": True,
        "q2": True,
        "q3": True,
        "q4": True,
        "q5": True,
        "q6": True,
        "split": "train",
        "line": 2,
    }
    assert train[3]["q1"] is False and train[3]["q2"] is None
    for split, rows in tiny_data.RELEASE_ROWS.items():
        assert len(_read_jsonl(os.path.join(out, f"{split}.jsonl"))) == len(rows)
        assert report["splits"][split]["rows_written"] == len(rows)
        assert report["splits"][split]["ratings_written"]["q4"]["yes"] + report["splits"][split][
            "ratings_written"
        ]["q4"]["no"] == tiny_data.yes_no_counts(4, split)
    assert report["totals"]["missing_articles"] == {}
    assert report["ignored"] == ["duplicates/"]
    with open(os.path.join(out, "prepare_report.json"), encoding="utf-8") as f:
        assert json.load(f) == report
    # Prepared splits read back as rated pairs.
    pairs = seahorse.prepared_pairs(os.path.join(out, "validation.jsonl"), 4)
    assert len(pairs) == tiny_data.yes_no_counts(4, "validation")


def test_missing_articles_are_counted_and_listed(tmp_path):
    release = tiny_data.write_release(str(tmp_path / "release"))
    removed = ["xsum-validation-101", "xlsum_vietnamese-test-55"]
    source = LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl"), drop=removed))
    out = str(tmp_path / "prepared")
    report = prepare(release, source, out)
    # xsum-validation-101 has one summary in train and one in validation; the
    # Vietnamese article two summaries in test.
    assert report["splits"]["train"]["missing_articles"] == {"xsum": 1}
    assert report["splits"]["validation"]["missing_articles"] == {"xsum": 1}
    assert report["splits"]["test"]["missing_articles"] == {"xlsum": 2}
    assert report["totals"]["missing_articles"] == {"xlsum": 2, "xsum": 2}
    assert report["totals"]["rows_read"] == 12 and report["totals"]["rows_written"] == 8
    assert report["splits"]["test"]["articles_joined"] == 2
    missing = _read_jsonl(os.path.join(out, "missing_articles.jsonl"))
    assert sorted((m["split"], m["gem_id"]) for m in missing) == [
        ("test", "xlsum_vietnamese-test-55"),
        ("test", "xlsum_vietnamese-test-55"),
        ("train", "xsum-validation-101"),
        ("validation", "xsum-validation-101"),
    ]
    assert all("article" not in m and "q1" in m for m in missing)
    written = {r["gem_id"] for r in _read_jsonl(os.path.join(out, "test.jsonl"))}
    assert written.isdisjoint(removed)


def test_strict_and_lenient_release_errors(tmp_path):
    release = tiny_data.write_release(str(tmp_path / "release"))
    with open(os.path.join(release, "validation.tsv"), "a", encoding="utf-8") as f:
        f.write("xsum-validation-1\ten-US\tbroken row\n")
    source = LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl")))
    with pytest.raises(seahorse.ReleaseFormatError, match=r"validation\.tsv:5:"):
        prepare(release, source, str(tmp_path / "strict"))
    assert not os.path.exists(tmp_path / "strict" / "train.jsonl")
    report = prepare(release, source, str(tmp_path / "lenient"), strict=False)
    assert report["splits"]["validation"]["rows_dropped"] == {"wrong_column_count": 1}
    assert report["totals"]["rows_read"] == 13 and report["totals"]["rows_written"] == 12


def test_prepare_is_deterministic(tmp_path):
    release = tiny_data.write_release(str(tmp_path / "release"))
    source = LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl")))
    prepare(release, source, str(tmp_path / "one"))
    prepare(release, source, str(tmp_path / "two"))
    for name in ("train.jsonl", "validation.jsonl", "test.jsonl", "missing_articles.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_missing_split_file(tmp_path):
    release = tiny_data.write_release(
        str(tmp_path / "release"), {"train": tiny_data.RELEASE_ROWS["train"]}
    )
    source = LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl")))
    with pytest.raises(FileNotFoundError, match="validation.tsv"):
        prepare(release, source, str(tmp_path / "out"))


def _cli(argv):
    from seahorse_metrics.cli import main

    return main(["prepare"] + argv)


def test_cli(tmp_path, capsys):
    release = tiny_data.write_release(str(tmp_path / "release"))
    articles = tiny_data.write_articles(str(tmp_path / "a.jsonl"), drop=["mlsum_es-test-3"])
    out = str(tmp_path / "out")
    assert _cli(["--release_dir", release, "--articles", articles, "--output_dir", out]) == 0
    totals = json.loads(capsys.readouterr().out)
    assert totals["missing_articles"] == {"mlsum": 1}
    assert os.path.isfile(os.path.join(out, "prepare_report.json"))
    with open(os.path.join(release, "test.tsv"), "ab") as f:
        f.write(b"xsum-test-1\ten-US\tbad \xff bytes\tt5\tYes\tYes\tYes\tYes\tYes\tYes\n")
    assert _cli(["--release_dir", release, "--articles", articles, "--output_dir", out]) == 2
    assert "test.tsv:6: the line is not valid UTF-8" in capsys.readouterr().err
    assert (
        _cli(["--release_dir", release, "--articles", articles, "--output_dir", out, "--lenient"])
        == 0
    )
    assert _cli(["--release_dir", release, "--article_source", "local", "--output_dir", out]) == 2
    assert "--articles" in capsys.readouterr().err


def _sample_articles():
    for candidate in ("seahorse/articles.jsonl", "articles.jsonl"):
        path = os.path.join(SAMPLE_DIR, candidate)
        if os.path.isfile(path):
            return path
    pytest.fail(f"the bundled sample in {SAMPLE_DIR} has no articles.jsonl")


def test_prepare_on_the_bundled_sample(tmp_path):
    release = os.path.join(SAMPLE_DIR, "seahorse")
    articles_path = _sample_articles()
    out = tmp_path / "full"
    assert (
        _cli(["--release_dir", release, "--articles", articles_path, "--output_dir", str(out)]) == 0
    )
    with open(out / "prepare_report.json", encoding="utf-8") as f:
        report = json.load(f)
    rows = {split: report["splits"][split]["rows_read"] for split in seahorse.SPLITS}
    for split in seahorse.SPLITS:
        assert len(_read_jsonl(out / f"{split}.jsonl")) == rows[split]
    assert all(rows.values())
    assert report["totals"]["missing_articles"] == {}
    assert report["totals"]["rows_written"] == sum(rows.values())

    # Remove some articles: the report counts them by source dataset.
    with open(articles_path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    removed = {r["gem_id"] for r in records[::5]}
    tiny_data.write_jsonl(
        str(tmp_path / "fewer.jsonl"), [r for r in records if r["gem_id"] not in removed]
    )
    fewer = prepare(
        release, LocalArticleSource(str(tmp_path / "fewer.jsonl")), str(tmp_path / "fewer")
    )
    expected: dict = {}
    for split in seahorse.SPLITS:
        split_rows, _ = seahorse.read_release_split(os.path.join(release, f"{split}.tsv"))
        for row in split_rows:
            if row.gem_id in removed:
                expected[row.source] = expected.get(row.source, 0) + 1
    assert expected and fewer["totals"]["missing_articles"] == dict(sorted(expected.items()))
    assert fewer["totals"]["rows_written"] == report["totals"]["rows_written"] - sum(
        expected.values()
    )
