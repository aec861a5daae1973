"""Tests of the mFACE, TRUE and generic ratings readers."""

import math

import pytest

from seahorse_metrics.data import mface, ratings, true
from seahorse_metrics.data.ratings import TableFormatError

from fixtures import tiny_data


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".xlsx"])
def test_read_mface_formats(tmp_path, suffix):
    path = tiny_data.write_mface(str(tmp_path / f"mface{suffix}"))
    pairs = mface.read_mface(path, "attribution")
    assert [p.id for p in pairs] == ["1", "2", "3", "4"]
    assert [p.lang for p in pairs] == ["en", "es", "zh-Hans", "vi"]
    assert [p.label for p in pairs] == [True, False, False, True]
    assert math.isclose(pairs[0].rating, 2 / 3, rel_tol=1e-6)
    first = pairs[0]
    assert first.premise == tiny_data.ARTICLES["xsum-validation-101"]
    assert first.hypothesis == "The town flooded." and first.system == "human"
    assert first.source == "xlsum"
    assert first.meta["question"] == "attribution" and first.meta["max"] == 1.0


def test_mface_questions_threshold_languages_and_blanks(tmp_path):
    path = tiny_data.write_mface(str(tmp_path / "m.csv"))
    informativeness = mface.read_mface(path, "informativeness")
    # The last row has no q3 ratings: skipped, not guessed.
    assert [p.id for p in informativeness] == ["1", "2", "3"]
    assert [p.label for p in informativeness] == [False, True, False]
    strict = mface.read_mface(path, "informativeness", threshold=0.3)
    assert [p.label for p in strict] == [True, True, False]
    shared = mface.read_mface(path, "quality", languages=mface.SEAHORSE_SHARED_LANGS)
    assert [p.lang for p in shared] == ["en", "es", "vi"]
    assert mface.MFACE_TO_SEAHORSE == {"quality": 1, "attribution": 4, "informativeness": 6}
    with pytest.raises(ValueError, match="unknown mFACE question"):
        mface.read_mface(path, "fluency")


def test_mface_language_names_and_codes():
    assert len(mface.XLSUM_LANGUAGES) == 45
    assert len(set(mface.XLSUM_LANGUAGES.values())) == 45
    assert mface.normalise_mface_language("English") == "en"
    assert mface.normalise_mface_language("scottish gaelic") == "gd"
    assert mface.normalise_mface_language("zh-CN") == "zh-Hans"
    assert mface.normalise_mface_language("ES") == "es"
    with pytest.raises(ValueError, match="unknown mFACE language"):
        mface.normalise_mface_language("klingon")


def test_mface_errors(tmp_path):
    rows = [list(r) for r in tiny_data.MFACE_ROWS]
    rows[1][11] = "high"
    path = tiny_data.write_mface(str(tmp_path / "m.csv"), rows)
    with pytest.raises(
        TableFormatError, match=r"m\.csv:3: column 'q2_avg': 'high' is not a number"
    ):
        mface.read_mface(path, "attribution")
    likert = [list(r) for r in tiny_data.MFACE_ROWS]
    likert[0][11] = 4.5
    path = tiny_data.write_mface(str(tmp_path / "likert.csv"), likert)
    with pytest.raises(ValueError, match="pass a threshold"):
        mface.read_mface(path, "attribution")
    rows = [list(r) for r in tiny_data.MFACE_ROWS]
    rows[0][12] = "n/a"
    path_max = tiny_data.write_mface(str(tmp_path / "max.csv"), rows)
    with pytest.raises(TableFormatError, match=r"max\.csv:2: column 'q2_max'"):
        mface.read_mface(path_max, "attribution")
    assert mface.read_mface(path, "attribution", threshold=3.0)[0].label is True
    rows = [list(r) for r in tiny_data.MFACE_ROWS]
    rows[2][2] = "klingon"
    path = tiny_data.write_mface(str(tmp_path / "lang.csv"), rows)
    with pytest.raises(TableFormatError, match=r"lang\.csv:4: unknown mFACE language"):
        mface.read_mface(path, "quality")


def test_read_true_directory(tmp_path):
    directory = tmp_path / "true"
    directory.mkdir()
    tiny_data.write_true_csv(str(directory / "frank_valid_download.csv"))
    tiny_data.write_true_csv(str(directory / "vitc_dev_download.csv"), with_index=False)
    tiny_data.write_true_csv(str(directory / "my_set.csv"))
    sets = true.read_true(str(directory))
    assert sorted(sets) == ["frank", "my_set", "vitaminc"]
    frank = sets["frank"]
    assert [p.label for p in frank] == [True, False, True]
    assert [p.id for p in frank] == ["frank-2", "frank-3", "frank-4"]
    assert (
        frank[1].premise == tiny_data.TRUE_ROWS[1][0]
        and frank[1].hypothesis == "A dog sat on a mat."
    )
    assert frank[0].system == "bart" and frank[0].source == "frank" and frank[0].rating == 1.0
    assert true.read_true(str(directory / "my_set.csv")).keys() == {"my_set"}
    assert {
        true.true_name(f"{stem}.csv") for stem in true.TRUE_FILE_NAMES if "test" not in stem
    } == set(true.TRUE_NAMES)


def test_true_errors(tmp_path):
    path = tmp_path / "q2_download.csv"
    path.write_text("grounding,generated_text,label\nA,B,1\nC,D,maybe\n", encoding="utf-8")
    with pytest.raises(TableFormatError, match=r"q2_download\.csv:3: column 'label' is 'maybe'"):
        true.read_true(str(path))
    path.write_text("grounding,text,label\nA,B,1\n", encoding="utf-8")
    with pytest.raises(TableFormatError, match="missing column 'generated_text'"):
        true.read_true(str(path))
    (tmp_path / "q2.csv").write_text("grounding,generated_text,label\nA,B,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="both map to the TRUE set 'q2'"):
        true.read_true(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        true.read_true(str(tmp_path / "nothing"))


def test_read_ratings_continuous_and_binary(tmp_path):
    path = tiny_data.write_jsonl(str(tmp_path / "squality.jsonl"), tiny_data.RATINGS_ROWS)
    continuous = ratings.read_ratings(path)
    assert [p.rating for p in continuous] == [87.0, 12.0, 55.0]
    assert all(p.label is None for p in continuous)
    assert [p.id for p in continuous] == ["squality-1", "squality-2", "squality-3"]
    assert continuous[0].source == "squality"
    binarised = ratings.read_ratings(path, threshold=50)
    assert [p.label for p in binarised] == [True, False, True]

    csv_path = tmp_path / "binary.csv"
    csv_path.write_text(
        "doc,claim,ok,key,lang\nA,B,yes,k1,en\nC,D,No,k2,de\nE,F,1,k3,\n", encoding="utf-8"
    )
    binary = ratings.read_ratings(
        str(csv_path),
        premise_field="doc",
        hypothesis_field="claim",
        rating_field="ok",
        id_field="key",
    )
    assert [(p.id, p.label, p.rating, p.lang) for p in binary] == [
        ("k1", True, 1.0, "en"),
        ("k2", False, 0.0, "de"),
        ("k3", True, 1.0, None),
    ]
    tsv_path = tmp_path / "likert.tsv"
    tsv_path.write_text("premise\thypothesis\trating\nA\tB\t4\nC\tD\t2\n", encoding="utf-8")
    assert [p.rating for p in ratings.read_ratings(str(tsv_path))] == [4.0, 2.0]


def test_ratings_errors(tmp_path):
    path = tiny_data.write_jsonl(
        str(tmp_path / "r.jsonl"),
        [
            {"premise": "A", "hypothesis": "B", "rating": 3},
            {"premise": "C", "hypothesis": "D", "rating": ""},
        ],
    )
    with pytest.raises(TableFormatError, match=r"r\.jsonl:2: field 'rating' is ''"):
        ratings.read_ratings(path)
    assert len(ratings.read_ratings(path, strict=False)) == 1
    with pytest.raises(TableFormatError, match=r"r\.jsonl:1: missing field 'claim'"):
        ratings.read_ratings(path, hypothesis_field="claim")
    dup = tiny_data.write_jsonl(
        str(tmp_path / "d.jsonl"),
        [{"premise": "A", "hypothesis": "B", "rating": 1, "id": "x"}] * 2,
    )
    with pytest.raises(TableFormatError, match="duplicate id 'x'"):
        ratings.read_ratings(dup, id_field="id")
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("premise,hypothesis,rating\nA,B,1,extra\n", encoding="utf-8")
    with pytest.raises(TableFormatError, match=r"bad\.csv:2: 4 columns"):
        ratings.read_ratings(str(bad_csv))
    (tmp_path / "x.parquet").write_bytes(b"")
    with pytest.raises(TableFormatError, match="unsupported file type"):
        list(ratings.read_table(str(tmp_path / "x.parquet")))
