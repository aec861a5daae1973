"""Reading JSONL, JSON, CSV and TSV tables so that no row is lost or merged silently.

Every text table the project reads (score inputs, ratings, TRUE, mFACE,
scores files) goes through `iter_table`, which accounts for every physical
line of the file: each one is the header, blank, or part of exactly one row
(a good row, or a bad row that carries its error and its lines). The counts
are kept in a `TableReport`, checked at the end of the file, and logged.

Decoding: the file is read in `encoding` (UTF-8 by default) line by line; a
byte sequence that does not decode stops the read with the file and line. A
UTF-8 byte order mark at the start is accepted in every format.

Quoting (`quoting`):

* CSV is read as RFC 4180 CSV: a field may be in double quotes, which may
  hold commas, doubled quotes and line breaks.
* TSV is read *unquoted* (split on tabs only, one line per row: the
  SEAHORSE release's layout), unless the file is declared quoted
  (`quoting="quoted"`) or detected as such (`quoting="auto"`, the default):
  a file is quoted when its rows only line up when quotes are honoured
  (quoted fields holding tabs or line breaks), or when it has fields such as
  `"say ""hi"" twice"` or a quoted header, as CSV writers produce, and no field that
  opens a quote without closing it. A stray `"` at the start of a summary
  therefore never swallows the lines after it.
* Quoted fields that hold a line break (or a tab, in a TSV) are flagged: the
  rows that span several lines are counted and their lines logged.

JSONL is one object per line; a `.json` file is either a JSON array of
objects or JSON lines (told apart by its first character).

Compressed tables: a name ending in `.gz` (`scores.jsonl.gz`, `test.csv.gz`)
is read through gzip; its format is that of the name without `.gz`. A table is
read more than once (its quoting is detected, its rows counted, then
streamed), so it must be a regular file: a directory, a named pipe or a
device such as `/dev/stdin` is refused by `check_table_file`, saying what it is.
"""

from __future__ import annotations

import bisect
import codecs
import dataclasses
import functools
import gzip
import json
import logging
import os
import stat
import zlib
from typing import Any, Iterable, Iterator, Optional

from seahorse_metrics.data import delimited
from seahorse_metrics.io.atomic import GZIP_SUFFIX, is_gzip
from seahorse_metrics.io.json_files import json_object

logger = logging.getLogger(__name__)

TEXT_FORMATS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv"}
DELIMITERS = {"csv": ",", "tsv": "\t"}
QUOTING_MODES = ("auto", "none", "quoted")
ENCODING_HINT = "encoding=... (score: --encoding; evaluate: the spec option encoding=)"
_LOGGED_RANGES = 5


class TableFormatError(ValueError):
    """A table file does not match its format; the message names file and line."""


@dataclasses.dataclass
class TableRow:
    """One data row of a table.

    Attributes:
      row: 0-based index among the data rows (blank lines are not rows).
      line: 1-based physical line where the row ends.
      first_line: 1-based physical line where the row starts.
      record: The row's fields, or None when it could not be parsed.
      error: Why the row is bad (wrong number of columns, invalid JSON, a
        quote that never closes, ...), or None.
    """

    row: int
    line: int
    first_line: int
    record: Optional[dict]
    error: Optional[str] = None

    @property
    def lines(self) -> str:
        """`"7"` or `"7-9"`: the lines of the row, for messages."""
        return str(self.line) if self.first_line == self.line else f"{self.first_line}-{self.line}"


@dataclasses.dataclass
class TableReport:
    """How the lines of a table file were accounted for.

    Attributes:
      path: The file.
      kind: "jsonl", "json" (an array), "csv" or "tsv".
      quoting: For CSV/TSV, "quoted" or "none" as read.
      header: For CSV/TSV, the column names.
      lines: Physical lines of the file.
      header_lines: Lines of the header (CSV/TSV).
      blank_lines: Blank lines and rows whose cells are all blank.
      rows: Data rows (good and bad).
      bad_rows: Rows that could not be parsed.
      row_lines: Lines inside data rows.
      spanning_rows: Rows whose quoted fields hold a line break (or, in a
        TSV, a tab).
      spanning_examples: The lines of the first few of them, e.g. "4-6".
      bytes_read: Bytes read so far (uncompressed), for progress bars.
    """

    path: str
    kind: str
    quoting: Optional[str] = None
    header: Optional[list] = None
    lines: int = 0
    header_lines: int = 0
    blank_lines: int = 0
    rows: int = 0
    bad_rows: int = 0
    row_lines: int = 0
    spanning_rows: int = 0
    spanning_examples: list = dataclasses.field(default_factory=list)
    bytes_read: int = 0

    def count_row(self, row: TableRow, spans_fields: bool) -> None:
        self.rows += 1
        self.bad_rows += row.error is not None
        self.row_lines += row.line - row.first_line + 1
        if spans_fields:
            self.spanning_rows += 1
            if len(self.spanning_examples) < _LOGGED_RANGES:
                self.spanning_examples.append(row.lines)

    def check(self) -> None:
        """Raises unless every physical line is header, blank or part of a row."""
        if self.kind == "json":
            return  # an array's elements are counted, not its lines
        accounted = self.header_lines + self.blank_lines + self.row_lines
        if accounted != self.lines:
            raise TableFormatError(
                f"{self.path}: read {self.rows} rows covering {accounted} of {self.lines} lines; "
                "some lines were lost or counted twice (this is a bug; please report it)"
            )

    def summary(self) -> dict:
        """A JSON-ready dict of the counts."""
        counts = dataclasses.asdict(self)
        del counts["bytes_read"]
        return counts

    def log(self) -> None:
        """Logs the counts; a warning for rows that span several lines."""
        logger.info(
            "%s: %d rows (%d bad) in %d lines (%d header, %d blank)%s",
            self.path,
            self.rows,
            self.bad_rows,
            self.lines,
            self.header_lines,
            self.blank_lines,
            f", read as {self.quoting} {self.kind.upper()}" if self.quoting else "",
        )
        if self.spanning_rows:
            where = "line break or tab" if self.kind == "tsv" else "line break"
            logger.warning(
                "%s: %d rows have a quoted field holding a %s, so one row spans several "
                "lines (lines %s%s); if the file is not meant to be quoted, read it with "
                "quoting='none' (CLI: --quoting none)",
                self.path,
                self.spanning_rows,
                where,
                ", ".join(self.spanning_examples),
                ", ..." if self.spanning_rows > len(self.spanning_examples) else "",
            )


def table_kind(path: str) -> str:
    """ "jsonl", "json", "csv" or "tsv" from the extension (before a `.gz`).

    Raises:
      TableFormatError: for another extension.
    """
    name = os.fspath(path)[: -len(GZIP_SUFFIX)] if is_gzip(path) else os.fspath(path)
    extension = os.path.splitext(name)[1].lower()
    if extension not in TEXT_FORMATS:
        raise TableFormatError(
            f"{path}: unsupported file type {extension!r}; use one of "
            f"{sorted(TEXT_FORMATS)}, optionally gzipped ({GZIP_SUFFIX})"
        )
    return TEXT_FORMATS[extension]


def open_binary(path: str, mode: str = "rb"):
    """`open(path, mode)`, through gzip for a `.gz` name ("rb", "wb" or "ab")."""
    return gzip.open(path, mode) if is_gzip(path) else open(path, mode)


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_table_file(path: str, what: str = "") -> None:
    """Refuses anything but an existing regular file, saying what it is.

    Args:
      path: The table.
      what: How the user gave it, for the message (e.g. "--input").

    Raises:
      FileNotFoundError: if nothing is there.
      IsADirectoryError: for a directory.
      ValueError: for a named pipe, a device (`/dev/stdin`) or a socket.
    """
    label = f"{what} {path}" if what else path
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{label}: file not found") from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(
            f"{label} is a directory; give a JSONL, JSON, CSV or TSV file "
            f"in it (optionally {GZIP_SUFFIX})"
        )
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _SPECIAL_FILES if test(mode)), "no regular file")
        raise ValueError(
            f"{label} is {kind}, which can be read only once; the table is read "
            "several times (checked, then streamed), so save it to a file first"
            + (" (or give - for standard input)" if what == "--input" else "")
        )


# ------------------------------------------------------------------ lines
def _decoder(encoding: str):
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        raise TableFormatError(f"unknown text encoding {encoding!r}") from None
    # A UTF-8 byte order mark is accepted (and dropped) at the start of any file.
    return codecs.getincrementaldecoder("utf-8-sig" if name == "utf-8" else name)("strict")


def _undecodable(
    path: str, line: int, raw: bytes, error: UnicodeDecodeError, encoding: str
) -> TableFormatError:
    bad = raw[error.start : error.end][:4].hex(" ")
    return TableFormatError(
        f"{path}:{line}: not valid {encoding} text (bytes {bad} at byte {error.start + 1} of "
        f"the line); give the file's encoding, e.g. latin-1 or cp1252, with {ENCODING_HINT}, "
        f"or convert the file to {encoding}"
    )


def _raw_lines(path: str, handle, line_number) -> Iterator[bytes]:
    """The byte lines of `handle`; a damaged or cut gzip stream stops with its line."""
    try:
        yield from handle
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise TableFormatError(
            f"{path}:{line_number()}: the gzip data is damaged or cut short ({error})"
        ) from None


def text_lines(
    path: str, encoding: str = "utf-8", report: Optional[TableReport] = None
) -> Iterator[tuple[int, str]]:
    """Yields `(line number, text)` for every physical line of a text file.

    Lines end at `\\n` only; the text keeps a `\\r` before it (a CRLF line end
    outside a quoted field, see `delimited.chomp`, but text inside one). A UTF-8 byte
    order mark at the start is dropped. `report.bytes_read` (if given) counts
    the bytes read (uncompressed, for a `.gz`).

    Raises:
      TableFormatError: for bytes that are not valid in `encoding`, naming
        the line.
    """
    decoder = _decoder(encoding)
    number, pending = 0, ""
    with open_binary(path) as handle:
        for raw in _raw_lines(path, handle, lambda: number + 1):
            if report is not None:
                report.bytes_read += len(raw)
            try:
                text = decoder.decode(raw)
            except UnicodeDecodeError as error:
                raise _undecodable(path, number + 1, raw, error, encoding) from None
            *complete, pending = (pending + text).split("\n")
            for line in complete:
                number += 1
                yield number, line
        try:
            pending += decoder.decode(b"", final=True)
        except UnicodeDecodeError as error:
            raise TableFormatError(
                f"{path}:{number + 1}: the file ends inside a {encoding} "
                f"character ({error.reason}); it looks cut short"
            ) from None
    if pending:
        yield number + 1, pending


# ------------------------------------------------------------------ delimited
# The record grammar (quoted cells, quoting detection) is `delimited`'s; here
# its records become counted rows under the header.
def _header(path: str, records, report: TableReport) -> list[str]:
    for first, last, cells, error in records:
        if cells is not None and not any(c.strip() for c in cells):
            report.blank_lines += last - first + 1
            continue
        if error is not None:
            raise TableFormatError(f"{path}:{first}: the header row is malformed: {error}")
        report.header_lines += last - first + 1
        header = [c.strip() for c in cells]
        seen: dict[str, int] = {}
        for index, name in enumerate(header, start=1):
            if name in seen:
                shown = repr(name) if name else "no name"
                raise TableFormatError(
                    f"{path}:{first}: columns {seen[name]} and {index} both have {shown} in the "
                    "header; give every column its own name"
                )
            seen[name] = index
        report.header = header
        return header
    raise TableFormatError(f"{path}: empty file; expected a header row")


def _delimited_rows(
    path: str, delimiter: str, quoted: bool, encoding: str, report: TableReport
) -> Iterator[TableRow]:
    lines = _counting(text_lines(path, encoding, report), report)
    records = delimited.records(iter(lines), delimiter, quoted)
    header = _header(path, records, report)
    row = 0
    for first, last, cells, error in records:
        if cells is not None and not any(c.strip() for c in cells):
            report.blank_lines += last - first + 1
            continue
        if error is None and len(cells) != len(header):
            error = f"{len(cells)} columns, the header has {len(header)}"
        item = TableRow(row, last, first, None if error else dict(zip(header, cells)), error)
        # A quoted field holding a line break (or a tab in a TSV) is flagged.
        spans = error is None and (
            last > first or (delimiter == "\t" and quoted and any("\t" in c for c in cells))
        )
        report.count_row(item, spans)
        yield item
        row += 1


def _counting(lines: Iterable[tuple[int, str]], report: TableReport) -> Iterator[tuple[int, str]]:
    for number, text in lines:
        report.lines = number
        yield number, text


def resolve_quoting(path: str, quoting: str = "auto", encoding: str = "utf-8") -> str:
    """ "quoted" or "none": how a CSV/TSV file is to be read.

    `auto` reads CSV quoted and detects whether a TSV is (see the module
    docstring); "quoted" and "none" are taken as declared.

    Raises:
      ValueError: for an unknown mode.
      TableFormatError: for undecodable bytes (naming the line).
    """
    if quoting not in QUOTING_MODES:
        raise ValueError(f"unknown quoting {quoting!r}; choose one of {QUOTING_MODES}")
    if quoting != "auto":
        return quoting
    if table_kind(path) != "tsv":
        return "quoted"
    lines = functools.partial(text_lines, path, encoding)
    return "quoted" if delimited.looks_quoted(lines) else "none"


# ------------------------------------------------------------------ JSON
def _jsonl_rows(path: str, encoding: str, report: TableReport) -> Iterator[TableRow]:
    row = 0
    for number, text in _counting(text_lines(path, encoding, report), report):
        if not text.strip():
            report.blank_lines += 1
            continue
        record, error = json_object(text)
        item = TableRow(row, number, number, record, error)
        report.count_row(item, False)
        yield item
        row += 1


def _starts_with_array(path: str, encoding: str) -> bool:
    for _, text in text_lines(path, encoding):
        if text.strip():
            return text.lstrip().startswith("[")
    return False


def _json_array_rows(path: str, encoding: str, report: TableReport) -> Iterator[TableRow]:
    lines = [text for _, text in _counting(text_lines(path, encoding, report), report)]
    text = "\n".join(lines)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TableFormatError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from None
    if not isinstance(data, list):
        raise TableFormatError(f"{path}: expected a JSON array of objects (or JSON lines)")
    decoder, position = json.JSONDecoder(), text.index("[") + 1
    for row, value in enumerate(data):
        position = _skip_separators(text, position)
        _, end = decoder.raw_decode(text, position)
        first, last = (bisect.bisect_right(starts, p) for p in (position, end - 1))
        error = (
            None
            if isinstance(value, dict)
            else (f"expected a JSON object, got {type(value).__name__}")
        )
        item = TableRow(row, last, first, value if error is None else None, error)
        report.count_row(item, False)
        position = end
        yield item


def _skip_separators(text: str, position: int) -> int:
    while text[position] in " \t\r\n,":
        position += 1
    return position


# ------------------------------------------------------------------ entry point
def iter_table(
    path: str | os.PathLike,
    *,
    encoding: str = "utf-8",
    quoting: str = "auto",
    report: Optional[TableReport] = None,
) -> Iterator[TableRow]:
    """Yields every data row of a JSONL, JSON, CSV or TSV file, bad rows included.

    Args:
      path: The file; its extension gives the format (gzip for `.gz`).
      encoding: Text encoding (default UTF-8; a byte order mark is accepted).
      quoting: "auto", "none" or "quoted" for CSV/TSV (see the module docstring).
      report: Filled with the line counts as the rows are read; checked when
        the file is exhausted.

    Raises:
      FileNotFoundError: if `path` does not exist.
      IsADirectoryError, ValueError: for a directory, pipe or device (`check_table_file`).
      TableFormatError: for an unknown extension, undecodable bytes, an empty
        file or a header that names a column twice (CSV/TSV), or a `.json`
        file that is not valid JSON; the message names file and line.
    """
    path = os.fspath(path)
    check_table_file(path)
    kind = table_kind(path)
    if kind == "json" and not _starts_with_array(path, encoding):
        kind = "jsonl"
    report = report if report is not None else TableReport(path, kind)
    report.kind = kind
    if kind in DELIMITERS:
        report.quoting = resolve_quoting(path, quoting, encoding)
        rows = _delimited_rows(path, DELIMITERS[kind], report.quoting == "quoted", encoding, report)
    elif kind == "json":
        rows = _json_array_rows(path, encoding, report)
    else:
        rows = _jsonl_rows(path, encoding, report)
    yield from rows
    report.check()


def read_table_rows(path: str | os.PathLike, **kwargs: Any) -> tuple[list[TableRow], TableReport]:
    """All rows of a table (see `iter_table`) and the report, logged."""
    path = os.fspath(path)
    report = TableReport(path, "")
    rows = list(iter_table(path, report=report, **kwargs))
    report.log()
    return rows, report
