"""The table readers account for every line: no row lost, merged or mis-decoded silently.

Unit tests of `seahorse_metrics.data.tables` and of the readers built on it
(ratings, TRUE, mFACE), plus property-based tests (hypothesis): random rows
with quotes, tabs, line breaks, byte order marks and bad bytes, written in
the formats the project documents, come back exactly or are counted with
their lines.
"""

import csv
import io
import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seahorse_metrics.data import mface, ratings, true
from seahorse_metrics.data.tables import TableFormatError, TableReport, iter_table

HEADER = ["premise", "hypothesis", "id"]
BOM = b"\xef\xbb\xbf"


def read(path, **kwargs):
    report = TableReport(str(path), "")
    rows = list(iter_table(str(path), report=report, **kwargs))
    return rows, report


def test_gzipped_tables_read_as_their_plain_selves_and_damage_names_the_line(tmp_path):
    """Issue 29 point 10: `.jsonl.gz` and `.csv.gz` inputs (large corpora come compressed)."""
    import gzip

    texts = {
        "jsonl": '{"premise": "a", "hypothesis": "b"}\n\n{"premise": "c", "hypothesis": "d"}\n',
        "csv": 'premise,hypothesis\na,b\n"c, with comma","d\nover two lines"\n',
    }
    for kind, text in texts.items():
        plain, packed = tmp_path / f"t.{kind}", tmp_path / f"t.{kind}.gz"
        plain.write_text(text)
        packed.write_bytes(gzip.compress(text.encode()))
        (rows, report), (gz_rows, gz_report) = read(plain), read(packed)
        assert [r.record for r in gz_rows] == [r.record for r in rows] and len(rows) == 2
        assert gz_report.kind == kind and gz_report.lines == report.lines
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(texts["jsonl"].encode() * 200)[:-30])
    with pytest.raises(TableFormatError, match=r"cut.jsonl.gz:\d+: the gzip data is damaged"):
        read(cut)
    (tmp_path / "t.txt.gz").write_bytes(gzip.compress(b"a"))
    with pytest.raises(TableFormatError, match=r"unsupported file type '.txt'.*gzipped"):
        read(tmp_path / "t.txt.gz")


# ---------------------------------------------------------------- point 1
STRAY_QUOTE_TSV = (
    "premise\thypothesis\trating\n"
    'An article.\t"Hello, he said.\t1\n'
    "Another one.\tA plain summary.\t0\n"
    'A third.\tIt ended with a quote".\t1\n'
    "The last.\tFine.\t0\n"
)


def test_a_stray_quote_in_an_unquoted_tsv_swallows_nothing(tmp_path):
    path = tmp_path / "stray.tsv"
    path.write_text(STRAY_QUOTE_TSV, encoding="utf-8")
    pairs = ratings.read_ratings(str(path))
    assert [p.hypothesis for p in pairs] == [
        '"Hello, he said.',
        "A plain summary.",
        'It ended with a quote".',
        "Fine.",
    ]
    assert [p.meta["line"] for p in pairs] == [2, 3, 4, 5]
    rows, report = read(path)
    assert report.quoting == "none" and report.rows == 4 and report.lines == 5
    # Declared quoted, the field that swallows a tab and two line breaks
    # makes one bad row that names its lines; nothing is lost.
    rows, report = read(path, quoting="quoted")
    assert [(r.lines, r.error) for r in rows] == [
        ("2-4", "text after the closing quote of column 2 on line 4"),
        ("5", None),
    ]


def test_quoted_tsv_is_detected_and_multiline_fields_are_flagged(tmp_path, caplog):
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t")
    writer.writerows([HEADER, ["a\tb", 'say "hi"', "1"], ["two\nlines", "x", "2"], ["c", "d", "3"]])
    path = tmp_path / "quoted.tsv"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        rows = list(ratings.read_table(str(path)))
    assert [r for _, r in rows] == [
        dict(zip(HEADER, v))
        for v in (["a\tb", 'say "hi"', "1"], ["two\nlines", "x", "2"], ["c", "d", "3"])
    ]
    assert [line for line, _ in rows] == [2, 4, 5]
    assert "2 rows have a quoted field holding a line break or tab" in caplog.text
    assert "lines 2, 3-4" in caplog.text


def test_a_quote_that_never_closes_is_an_error_naming_its_lines(tmp_path):
    path = tmp_path / "open.csv"
    path.write_text('grounding,generated_text,label\nA,"B,1\nC,D,0\n', encoding="utf-8")
    with pytest.raises(
        TableFormatError,
        match=r"open\.csv:2-3: the quote opened in column 2 on "
        r"line 2 never closes",
    ):
        true.read_true_file(str(path))
    path.write_text('grounding,generated_text,label\nA,"B"x,1\n', encoding="utf-8")
    with pytest.raises(TableFormatError, match="text after the closing quote of column 2"):
        true.read_true_file(str(path))


# ---------------------------------------------------------------- point 4
def test_byte_order_marks_are_accepted_in_every_format(tmp_path):
    (tmp_path / "r.jsonl").write_bytes(BOM + b'{"premise": "A", "hypothesis": "B", "rating": 1}\n')
    (tmp_path / "r.csv").write_bytes(BOM + b"premise,hypothesis,rating\nA,B,1\n")
    (tmp_path / "r.tsv").write_bytes(BOM + b"premise\thypothesis\trating\nA\tB\t1\n")
    (tmp_path / "r.json").write_bytes(BOM + b'[{"premise": "A", "hypothesis": "B", "rating": 1}]')
    for name in ("r.jsonl", "r.csv", "r.tsv", "r.json"):
        pairs = ratings.read_ratings(str(tmp_path / name))
        assert [(p.premise, p.hypothesis, p.label) for p in pairs] == [("A", "B", True)], name


def test_undecodable_text_stops_with_file_and_line_unless_the_encoding_is_given(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("premise,hypothesis,rating\nA,B,1\nCafé,Crème,0\n".encode("latin-1"))
    with pytest.raises(
        TableFormatError,
        match=r"latin1\.csv:3: not valid utf-8 text \(bytes e9 "
        r"at byte 4 of the line\).*--encoding",
    ):
        ratings.read_ratings(str(path))
    pairs = ratings.read_ratings(str(path), encoding="latin-1")
    assert [p.premise for p in pairs] == ["A", "Café"]
    sheet = tmp_path / "m.csv"
    sheet.write_bytes(b"lang,input,summary,system,q1_avg\nen,Caf\xe9,x,s,1\n")
    with pytest.raises(TableFormatError, match=r"m\.csv:2: not valid utf-8"):
        mface.read_mface(str(sheet), "quality")
    assert mface.read_mface(str(sheet), "quality", encoding="cp1252")[0].premise == "Café"


# ---------------------------------------------------------------- point 9
def test_a_json_array_is_read_as_rows(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_text(
        json.dumps(
            [
                {"premise": "A", "hypothesis": "B", "rating": 1},
                {"premise": "C", "hypothesis": "D", "rating": 0},
            ],
            indent=1,
        )
    )
    pairs = ratings.read_ratings(str(path))
    assert [(p.premise, p.label) for p in pairs] == [("A", True), ("C", False)]
    assert [p.meta["line"] for p in pairs] == [6, 11]
    # A .json file of JSON lines (as `datasets` writes them) is JSON lines.
    path.write_text('{"premise": "A", "hypothesis": "B", "rating": 1}\n', encoding="utf-8")
    assert len(ratings.read_ratings(str(path))) == 1
    path.write_text('[{"premise": "A"}, 3]', encoding="utf-8")
    rows, _ = read(path)
    assert rows[1].error == "expected a JSON object, got int"


def test_a_header_that_names_a_column_twice_is_refused(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("premise,hypothesis,hypothesis\nA,B,C\n", encoding="utf-8")
    with pytest.raises(
        TableFormatError,
        match=r"dup\.csv:1: columns 2 and 3 both have "
        r"'hypothesis' in the header",
    ):
        ratings.read_ratings(str(path))


# ---------------------------------------------------------------- properties
_CHARS = st.sampled_from(list('ab é"\t\n\r,') + ["\u2028", "\ufeff", "🙂"])
_CELL = st.text(alphabet=_CHARS, max_size=6)
_ROWS = st.lists(st.lists(_CELL, min_size=3, max_size=3), max_size=8)
# derandomize: the same examples on every run, so CI cannot fail by chance
# (a random run found the ambiguous quoted TSV of test_csv_writer_output_comes_back_exactly).
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _is_blank(cells):
    return not any(c.strip() for c in cells)


def _write(tmp_path, name, text, bom):
    path = tmp_path / name
    path.write_bytes((BOM if bom else b"") + text.encode("utf-8"))
    return path


def _csv_text(rows, delimiter):
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter)  # the csv module's defaults: \r\n, minimal
    writer.writerows([HEADER] + rows)
    return buffer.getvalue()


def _data_lines(path):
    text = path.read_bytes().decode("utf-8").lstrip("\ufeff")
    return [line for line in text.split("\n")[1:] if line.strip()]


def _chomp_line(line):
    return line[:-1] if line.endswith("\r") else line


def _assert_exact(rows, report, written):
    expected = [dict(zip(HEADER, cells)) for cells in written if not _is_blank(cells)]
    assert [r.record for r in rows] == expected
    assert all(r.error is None for r in rows)
    assert report.lines == report.header_lines + report.blank_lines + report.row_lines


@PROPERTY
@given(rows=_ROWS, bom=st.booleans(), delimiter=st.sampled_from([",", "\t"]))
def test_csv_writer_output_comes_back_exactly(tmp_path, rows, bom, delimiter):
    name = "t.csv" if delimiter == "," else "t.tsv"
    path = _write(tmp_path, name, _csv_text(rows, delimiter), bom)
    result, report = read(path)
    if report.quoting == "none":
        # The documented ambiguity: a quoted TSV whose lines also split into
        # full rows on tabs, with no `""` or quoted header to tell (e.g. the
        # row ["\t", "\n", "\t"]), reads as the SEAHORSE release's unquoted
        # layout; declared quoted, it comes back exactly.
        assert delimiter == "\t" and report.bad_rows == 0
        assert {len(_chomp_line(line).split("\t")) for line in _data_lines(path)} <= {len(HEADER)}
        result, report = read(path, quoting="quoted")
    _assert_exact(result, report, rows)
    line_spans = [r.line - r.first_line for r in read(path)[0]]
    assert read(path)[1].spanning_rows >= sum(1 for span in line_spans if span)


@PROPERTY
@given(
    rows=_ROWS, bom=st.booleans(), crlf=st.booleans(), ascii_only=st.booleans(), array=st.booleans()
)
def test_json_lines_and_arrays_come_back_exactly(tmp_path, rows, bom, crlf, ascii_only, array):
    records = [dict(zip(HEADER, cells)) for cells in rows]
    if array:
        text = json.dumps(records, indent=1, ensure_ascii=ascii_only)
        path = _write(tmp_path, "t.json", text, bom)
    else:
        end = "\r\n" if crlf else "\n"
        text = "".join(json.dumps(r, ensure_ascii=ascii_only) + end for r in records)
        path = _write(tmp_path, "t.jsonl", text, bom)
    result, _ = read(path)
    assert [r.record for r in result] == records


def _unquoted_tsv(rows):
    return "".join("\t".join(cells) + "\n" for cells in [HEADER] + rows)


def _representable(cells):
    """A row an unquoted TSV can hold: no tab or line break in a cell, and no
    `\\r` ending the line (it would read as a CRLF line end)."""
    return not any("\t" in c or "\n" in c for c in cells) and not cells[-1].endswith("\r")


def _assert_every_line_once(rows, report, written):
    """Each data line is in exactly one row; read unquoted, a row the format
    can hold comes back exactly at its line; read quoted (a file that only
    lines up that way), a row that spans lines is flagged."""
    covered = [line for r in rows for line in range(r.first_line, r.line + 1)]
    assert len(covered) == len(set(covered))
    assert report.lines == report.header_lines + report.blank_lines + report.row_lines
    by_line = {r.first_line: r for r in rows}
    line = 2
    for cells in written:
        span = "".join(cells).count("\n") + 1
        if _representable(cells) and not _is_blank(cells):
            row = next(r for r in rows if r.first_line <= line <= r.line)
            if report.quoting == "none":
                assert row.first_line == row.line and row.record == dict(zip(HEADER, cells))
            elif row.first_line != row.line:
                assert row.error is not None or report.spanning_rows > 0
        line += span
    assert set(by_line) <= set(range(2, line))


@PROPERTY
@given(rows=_ROWS, bom=st.booleans())
def test_unquoted_tsv_lines_are_rows_or_counted(tmp_path, rows, bom):
    path = _write(tmp_path, "t.tsv", _unquoted_tsv(rows), bom)
    # Declared unquoted: every line is its own row, representable rows exact.
    _assert_every_line_once(*read(path, quoting="none"), rows)
    assert all(r.first_line == r.line for r in read(path, quoting="none")[0])
    # Detected: never loses or double-counts a line; a merge is flagged.
    _assert_every_line_once(*read(path), rows)


@PROPERTY
@given(
    rows=st.lists(
        st.lists(
            _CELL.filter(lambda c: not (len(c) > 1 and c[0] == c[-1] == '"')),
            min_size=3,
            max_size=3,
        ).filter(_representable),
        max_size=8,
    ),
    bom=st.booleans(),
)
def test_seahorse_style_tsv_with_stray_quotes_is_read_line_by_line(tmp_path, rows, bom):
    path = _write(tmp_path, "t.tsv", _unquoted_tsv(rows), bom)
    result, report = read(path)
    assert report.quoting == "none"
    _assert_exact(result, report, rows)
    assert [r.line for r in result] == [
        n + 2 for n, cells in enumerate(rows) if not _is_blank(cells)
    ]


@PROPERTY
@given(
    rows=_ROWS.filter(bool), kind=st.sampled_from(["csv", "tsv", "jsonl", "json"]), data=st.data()
)
def test_a_bad_byte_stops_the_read_naming_its_line(tmp_path, rows, kind, data):
    if kind == "csv":
        text = _csv_text(rows, ",")
    elif kind == "tsv":
        text = _csv_text(rows, "\t")
    elif kind == "jsonl":
        text = "".join(json.dumps(dict(zip(HEADER, c)), ensure_ascii=False) + "\n" for c in rows)
    else:
        text = json.dumps([dict(zip(HEADER, c)) for c in rows], ensure_ascii=False, indent=1)
    raw = text.encode("utf-8")
    position = data.draw(st.integers(0, len(raw)))
    # Never split a character: move back to the start of one.
    while position < len(raw) and 0x80 <= raw[position] < 0xC0:
        position -= 1
    raw = raw[:position] + b"\xff" + raw[position:]
    path = tmp_path / f"t.{kind}"
    path.write_bytes(raw)
    line = raw[:position].count(b"\n") + 1
    with pytest.raises(TableFormatError, match=rf"t\.{kind}:{line}: not valid utf-8"):
        read(path)
