"""The CSV/TSV record grammar that `seahorse_metrics.data.tables` reads with:
RFC 4180 quoted cells (quotes holding delimiters, doubled quotes and line
breaks), the detection of a TSV written with CSV quoting, and the writing of
a line that reads back exactly. Works on `(line number, text)` lines; the
files, their decoding and the line accounting are `tables`'."""

from __future__ import annotations

import re
from typing import Callable, Iterator, Optional, Sequence

_FULLY_QUOTED = re.compile(r'"(?:[^"]|"")*"', re.S)


def chomp(text: str) -> str:
    """A line without the `\\r` of a CRLF line end."""
    return text[:-1] if text.endswith("\r") else text


def _closing_quote(text: str, start: int) -> int:
    """Index of the quote that closes a field opened before `start`, or -1."""
    index = text.find('"', start)
    while index >= 0 and text.startswith('"', index + 1):
        index = text.find('"', index + 2)
    return index


class _QuotedFieldError(Exception):
    """(last line, reason): a quote that never closes, or text after a closing quote."""


def _quoted_cells(
    first: tuple[int, str], lines: Iterator[tuple[int, str]], delimiter: str
) -> tuple[list[str], int]:
    """The cells of one RFC 4180 record starting at line `first`, reading
    further lines while a quoted field is open; returns (cells, last line).

    Raises:
      _QuotedFieldError: (last line, reason) for a quote that never closes
        or text after a closing quote.
    """
    last, text = first
    cells, position = [], 0
    while True:
        if not text.startswith('"', position):
            end = text.find(delimiter, position)
            cells.append(chomp(text[position:]) if end < 0 else text[position:end])
            if end < 0:
                return cells, last
            position = end + 1
            continue
        parts, position = [], position + 1
        while (close := _closing_quote(text, position)) < 0:
            parts.append(text[position:])
            following = next(lines, None)
            if following is None:
                raise _QuotedFieldError(
                    last,
                    f"the quote opened in column {len(cells) + 1} on line {first[0]} never closes",
                )
            (last, text), position = following, 0
            parts.append("\n")
        parts.append(text[position:close])
        cells.append("".join(parts).replace('""', '"'))
        position = close + 1
        if position == len(chomp(text)):
            return cells, last
        if text[position] != delimiter:
            raise _QuotedFieldError(
                last, f"text after the closing quote of column {len(cells)} on line {last}"
            )
        position += 1


def records(
    lines: Iterator[tuple[int, str]], delimiter: str, quoted: bool
) -> Iterator[tuple[int, int, Optional[list[str]], Optional[str]]]:
    """(first line, last line, cells or None, error or None) per record."""
    for number, text in lines:
        if not quoted or '"' not in text:
            yield number, number, chomp(text).split(delimiter), None
            continue
        try:
            cells, last = _quoted_cells((number, text), lines, delimiter)
        except _QuotedFieldError as error:
            last, reason = error.args
            yield number, last, None, reason
        else:
            yield number, last, cells, None


def looks_quoted(lines: Callable[[], Iterator[tuple[int, str]]]) -> bool:
    """Whether a TSV was written with CSV quoting (see `seahorse_metrics.data.tables`);
    `lines()` reads the file's `(line number, text)` anew on each call."""
    width, regular, evidence, stray = None, True, False, False
    for _, text in lines():
        if not text.strip():
            continue
        cells = chomp(text).split("\t")
        if width is None:
            width = len(cells)
            evidence = all(_FULLY_QUOTED.fullmatch(c) for c in cells)
        regular &= len(cells) == width
        for cell in cells:
            if not cell.startswith('"'):
                continue
            if _FULLY_QUOTED.fullmatch(cell):
                evidence |= '""' in cell[1:-1] or "\r" in cell
            else:
                stray = True
    if width is None:
        return False
    if regular:
        return evidence and not stray
    # Rows of other widths: either quoted fields hold tabs or line breaks, or
    # the file is broken; it is quoted only if honouring quotes lines it up.
    parsed = records(lines(), "\t", quoted=True)
    return all(
        error is None and (len(cells) == width or not any(c.strip() for c in cells))
        for _, _, cells, error in parsed
    )


def delimited_line(cells: Sequence[str], delimiter: str) -> str:
    """One CSV/TSV line: cells holding the delimiter, a quote or a line break
    (`\\n` or `\\r`) are quoted, so `records` (and `tables.iter_table`) reads
    them back exactly."""
    special = (delimiter, '"', "\n", "\r")
    quoted = [
        '"' + c.replace('"', '""') + '"' if any(s in c for s in special) else c for c in cells
    ]
    return delimiter.join(quoted) + "\n"
