"""Tests of the SEAHORSE release reader and the prepared-JSONL readers."""

import json
import os

import pytest

from seahorse_metrics.data import seahorse
from seahorse_metrics.data.seahorse import ReleaseFormatError, read_release_split

from fixtures import tiny_data

HEADER = tiny_data.RELEASE_HEADER.encode()
GOOD = tiny_data.release_line(tiny_data.RELEASE_ROWS["train"][0]).encode()
REAL_EXAMPLE = (
    b"xlsum_english-validation-6416\ten-US\tSchools in England, Wales and Scotland are being "
    b"urged to bring back overseas exchange trips.\tt5_base\tYes\tYes\tYes\tYes\tYes\tYes"
)


def _file(tmp_path, *lines: bytes, trailing_newline=True, name="train.tsv"):
    data = b"\n".join((HEADER,) + lines) + (b"\n" if trailing_newline else b"")
    return tiny_data.write_raw(str(tmp_path / name), data)


def test_reads_the_release_example_row(tmp_path):
    rows, dropped = read_release_split(_file(tmp_path, REAL_EXAMPLE))
    assert dropped == {}
    (row,) = rows
    assert row.gem_id == "xlsum_english-validation-6416"
    assert row.lang == "en"
    assert row.source == "xlsum"
    assert row.system == "t5_base"
    assert row.summary.startswith("Schools in England") and row.summary.endswith("trips.")
    assert row.ratings == (True,) * 6
    assert row.line == 2


def test_languages_sources_and_ratings(tmp_path):
    path = tiny_data.write_release(str(tmp_path))
    rows, dropped = read_release_split(os.path.join(path, "train.tsv"))
    assert not dropped
    assert [r.lang for r in rows] == ["en", "en", "de", "ru", "es"]
    assert [r.source for r in rows] == ["xlsum", "xsum", "mlsum", "wiki_lingua", "xlsum"]
    assert [r.line for r in rows] == [2, 3, 4, 5, 6]
    # Yes/No/Unsure.
    assert rows[1].ratings == (True, True, False, False, True, None)
    # question1 = No leaves question2-6 empty: they become None.
    assert rows[3].ratings == (False, None, None, None, None, None)


def test_gem_id_helpers():
    assert seahorse.source_of_gem_id("wiki_lingua_spanish_es-val-3") == "wiki_lingua"
    assert seahorse.source_of_gem_id("mlsum_de-test-3") == "mlsum"
    assert seahorse.source_of_gem_id("xsum-test-1") == "xsum"
    assert seahorse.source_of_gem_id("cnn_dailymail-test-1") is None
    assert seahorse.gem_config("xlsum_english-validation-6416") == "xlsum_english"
    assert seahorse.gem_split("wiki_lingua_german_de-val-12") == "val"
    assert seahorse.normalise_language("es-ES") == "es"
    assert seahorse.normalise_language("vi") == "vi"


def test_unicode_escaped_text_is_decoded(tmp_path):
    escaped = (
        b"xlsum_spanish-validation-9\tes-ES\t"
        b"La selecci\\u00f3n gan\\u00f3 \\ud83c\\udfc6\tt5_base\t"
        b"Yes\tYes\tYes\tYes\tYes\tYes"
    )
    rows, _ = read_release_split(_file(tmp_path, escaped))
    assert rows[0].summary == "La selección ganó \U0001f3c6"


def test_crlf_and_bom_are_accepted(tmp_path):
    data = b"\xef\xbb\xbf" + HEADER + b"\r\n" + GOOD + b"\r\n"
    rows, dropped = read_release_split(tiny_data.write_raw(str(tmp_path / "t.tsv"), data))
    assert len(rows) == 1 and not dropped
    assert rows[0].ratings == (True,) * 6


@pytest.mark.parametrize(
    "bad_line, reason",
    [
        (b"xsum-validation-1\ten-US\ttoo few columns\tt5_base\tYes", "wrong_column_count"),
        (
            GOOD.replace(b"\tYes\tYes\tYes\tYes\tYes\tYes", b"\tYes\tMaybe\tYes\tYes\tYes\tYes"),
            "unknown_rating",
        ),
        (GOOD.replace(b"Schools", b"Sch\xffools"), "bad_utf8"),
        (GOOD.replace(b"xlsum_english-", b"cnn-"), "unknown_source"),
    ],
)
def test_strict_mode_names_file_and_line(tmp_path, bad_line, reason):
    path = _file(tmp_path, GOOD, bad_line, GOOD)
    with pytest.raises(ReleaseFormatError) as info:
        read_release_split(path)
    message = str(info.value)
    assert f"{path}:3:" in message
    assert reason in message
    assert "lenient" in message


def test_lenient_mode_counts_and_skips(tmp_path):
    path = _file(
        tmp_path,
        GOOD,
        b"xsum-validation-1\ten-US\tshort\tt5_base",
        GOOD.replace(b"\tYes\tYes\tYes\tYes\tYes\tYes", b"\tYes\tYes\tYes\tNope\tYes\tYes"),
        GOOD.replace(b"Schools", b"\xc3\x28Schools"),
        GOOD,
        GOOD.replace(b"\tYes\tYes\tYes\tYes\tYes\tYes", b"\tYes\tYes\tYes\tYes\tYes\tYes\tYes"),
    )
    rows, dropped = read_release_split(path, strict=False)
    assert [r.line for r in rows] == [2, 6]
    assert dropped == {"wrong_column_count": 2, "unknown_rating": 1, "bad_utf8": 1}


def test_truncated_last_line(tmp_path):
    cut = GOOD[: GOOD.index(b"\tt5_base")]
    path = _file(tmp_path, GOOD, cut, trailing_newline=False)
    with pytest.raises(ReleaseFormatError, match=r":3: .*truncated") as info:
        read_release_split(path)
    assert path in str(info.value)
    rows, dropped = read_release_split(path, strict=False)
    assert len(rows) == 1 and dropped == {"truncated_last_line": 1}


def test_truncated_inside_a_utf8_character(tmp_path):
    line = GOOD + "é".encode()[:1]
    path = _file(tmp_path, GOOD, line, trailing_newline=False)
    rows, dropped = read_release_split(path, strict=False)
    assert dropped == {"truncated_last_line": 1}


def test_complete_last_line_without_newline_is_fine(tmp_path):
    rows, dropped = read_release_split(_file(tmp_path, GOOD, GOOD, trailing_newline=False))
    assert len(rows) == 2 and not dropped


def test_bad_header_and_missing_file(tmp_path):
    path = tiny_data.write_raw(str(tmp_path / "x.tsv"), GOOD + b"\n")
    with pytest.raises(ReleaseFormatError, match=r"x\.tsv:1: unexpected header"):
        read_release_split(path, strict=False)
    with pytest.raises(FileNotFoundError, match="train.tsv"):
        read_release_split(str(tmp_path / "nope" / "train.tsv"))


def _write_prepared(path, records):
    return tiny_data.write_jsonl(str(path), records)


def _prepared_record(gem_id="xsum-validation-101", system="t5_base", line=2, q4=True):
    record = {
        "gem_id": gem_id,
        "lang": "en",
        "source": "xsum",
        "system": system,
        "article": "An article.",
        "summary": "A summary.",
        "split": "validation",
        "line": line,
    }
    record.update({f"q{q}": True for q in range(1, 7)})
    record["q4"] = q4
    return record


def test_prepared_pairs_keeps_yes_no_only(tmp_path):
    path = _write_prepared(
        tmp_path / "validation.jsonl",
        [
            _prepared_record(line=2, q4=True),
            _prepared_record(line=3, q4=None),
            _prepared_record(line=4, q4=False, system="reference"),
        ],
    )
    pairs = seahorse.prepared_pairs(path, 4)
    assert [p.id for p in pairs] == [
        "xsum-validation-101|t5_base|2",
        "xsum-validation-101|reference|4",
    ]
    assert [(p.label, p.rating) for p in pairs] == [(True, 1.0), (False, 0.0)]
    assert pairs[0].premise == "An article." and pairs[0].hypothesis == "A summary."
    assert pairs[0].meta["question"] == 4
    assert (pairs[0].lang, pairs[0].source, pairs[0].system) == ("en", "xsum", "t5_base")
    with pytest.raises(ValueError, match="question"):
        seahorse.prepared_pairs(path, 7)


def test_prepared_errors_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_prepared_record()) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ReleaseFormatError, match=r"bad\.jsonl:2: invalid JSON"):
        list(seahorse.iter_prepared(path))
    record = _prepared_record()
    del record["article"]
    _write_prepared(path, [record])
    with pytest.raises(ReleaseFormatError, match=r"bad\.jsonl:1: missing fields \['article'\]"):
        list(seahorse.iter_prepared(path))
    _write_prepared(path, [_prepared_record(q4="Yes")])
    with pytest.raises(ReleaseFormatError, match="q4 is 'Yes'"):
        seahorse.prepared_pairs(path, 4)
    _write_prepared(path, [_prepared_record(), _prepared_record()])
    with pytest.raises(ReleaseFormatError, match="duplicate example id"):
        seahorse.prepared_pairs(path, 4)
