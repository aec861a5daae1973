"""Generic rated premise/hypothesis files, and the table reading other readers share.

`read_ratings` reads any JSONL, CSV or TSV file with a premise, a hypothesis
(and, for query-focused summaries, an optional `question`) and a rating: binary
(0/1, yes/no, true/false) or continuous (SQuALITY-style
1-100, Likert 1-5, rater averages). Binary ratings become the label;
continuous ratings stay as the raw rating, and become a label only when a
threshold is given.

`read_table` yields the rows of a CSV, TSV, XLSX (needs `openpyxl`), JSONL or
JSON file as dicts with their line/row number, for the mFACE and TRUE readers
too. Text files are read by `seahorse_metrics.data.tables`, which accounts
for every line (see there for encodings and quoting).
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any, Iterator, Optional

from seahorse_metrics.data.records import RatedPair
from seahorse_metrics.data.tables import TableFormatError, read_table_rows
from seahorse_metrics.option_names import option

logger = logging.getLogger(__name__)

TABLE_EXTENSIONS = (".csv", ".tsv", ".xlsx", ".jsonl", ".json")
_BINARY_STRINGS = {"1": True, "0": False, "yes": True, "no": False, "true": True, "false": False}


def read_table(
    path: str | os.PathLike, *, encoding: str = "utf-8", quoting: str = "auto"
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields `(line_or_row_number, row)` for each data row of a table file.

    CSV/TSV: the header row names the columns (surrounding spaces stripped;
    the unnamed index column pandas writes is dropped); the number is the
    line where the record ends. XLSX: the first sheet, its first row as
    header; the number is the sheet row. JSONL (and a JSON array): one object
    per row, numbered by its (last) line.

    Args:
      path: The file; the extension gives the format.
      encoding, quoting: For text files, see `seahorse_metrics.data.tables`.

    Raises:
      FileNotFoundError: if `path` does not exist.
      TableFormatError: for an unknown extension, undecodable text, a header
        that names a column twice, or a malformed row (naming its lines).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: file not found")
    extension = os.path.splitext(path)[1].lower()
    if extension == ".xlsx":
        yield from _read_xlsx(path)
        return
    if extension not in TABLE_EXTENSIONS:
        raise TableFormatError(
            f"{path}: unsupported file type {extension!r}; use one of {TABLE_EXTENSIONS}"
        )
    rows, _ = read_table_rows(path, encoding=encoding, quoting=quoting)
    for row in rows:
        if row.error is not None:
            raise TableFormatError(f"{path}:{row.lines}: {row.error}")
        yield row.line, {k: v for k, v in row.record.items() if k}


def _read_xlsx(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        import openpyxl  # Optional: only spreadsheets need it.
    except ImportError as err:
        raise ImportError(
            f"{path}: reading .xlsx needs openpyxl: pip install 'seahorse-metrics[xlsx]' "
            "(or save the sheet as CSV)"
        ) from err
    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        rows = workbook.worksheets[0].iter_rows(values_only=True)
        header = [str(c).strip() if c is not None else "" for c in next(rows, ())]
        if not any(header):
            raise TableFormatError(f"{path}: the first sheet has no header row")
        named = [name for name in header if name]
        duplicates = sorted({name for name in named if named.count(name) > 1})
        if duplicates:
            raise TableFormatError(
                f"{path}:1: the header names {duplicates} more than once; "
                "give every column its own name"
            )
        for row_number, values in enumerate(rows, start=2):
            if all(v is None or str(v).strip() == "" for v in values):
                continue
            yield row_number, {k: v for k, v in zip(header, values) if k}
    finally:
        workbook.close()


def is_blank(value: Any) -> bool:
    """True for None, empty/whitespace strings and NaN."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and not value.strip()


def parse_binary(value: Any) -> Optional[bool]:
    """1/0, yes/no, true/false (any case; 1.0/0.0 too) -> bool; anything else -> None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _BINARY_STRINGS:
            return _BINARY_STRINGS[text]
        try:
            number = float(text)
        except ValueError:
            return None
        return bool(number) if number in (0.0, 1.0) else None
    return None


def parse_float(value: Any, where: str) -> float:
    """A finite float from a cell, or a TableFormatError naming `where`."""
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise TableFormatError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise TableFormatError(f"{where}: {value!r} is not a finite number")
    return number


def cell_text(value: Any) -> str:
    """A cell as text; whole floats from spreadsheets lose their `.0`."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def optional_text(row: dict[str, Any], field: str) -> Optional[str]:
    """The text of `row[field]`, or None when the field is absent or blank."""
    value = row.get(field)
    return None if is_blank(value) else cell_text(value).strip()


def read_ratings(
    path: str | os.PathLike,
    premise_field: str = "premise",
    hypothesis_field: str = "hypothesis",
    rating_field: str = "rating",
    id_field: Optional[str] = None,
    threshold: Optional[float] = None,
    *,
    binary: Optional[bool] = None,
    lang_field: str = "lang",
    system_field: str = "system",
    source: Optional[str] = None,
    strict: bool = True,
    encoding: str = "utf-8",
    question_field: str = "question",
) -> list[RatedPair]:
    """Reads a rated premise/hypothesis file (JSONL, JSON, CSV or TSV).

    Args:
      path: The file.
      premise_field, hypothesis_field, rating_field: Field names.
      id_field: Field with a unique id; None: `"{file stem}-{line}"`.
      threshold: For continuous ratings, label = rating >= threshold; None
        leaves the label None (correlation-only use).
      binary: Force binary (True) or continuous (False) ratings; None decides
        from the values (binary when every rating is 0/1/yes/no/true/false).
      lang_field, system_field: Optional metadata fields, used when present.
      question_field: Optional field with the question a query-focused
        summary answers (blank: a generic summary).
      source: Source name for the pairs (default: the file stem).
      strict: If True a row with an empty or non-numeric rating raises; if
        False it is skipped, counted and logged.
      encoding: Text encoding of the file (default UTF-8).

    Returns:
      RatedPairs in file order; rating is 1.0/0.0 for binary files and the raw
      value otherwise.

    Raises:
      TableFormatError: for missing fields, bad ratings (strict), or duplicate
        ids; the message names file, line and field.
    """
    path = os.fspath(path)
    required = (premise_field, hypothesis_field, rating_field) + ((id_field,) if id_field else ())
    rows = _checked_rows(path, encoding, required)
    kept = _rated_rows(path, rows, rating_field, strict)
    if binary is None:
        binary = all(parse_binary(value) is not None for _, _, value in kept)
    fields = {
        "premise": premise_field,
        "hypothesis": hypothesis_field,
        "id": id_field,
        "rating": rating_field,
        "lang": lang_field,
        "system": system_field,
        "question": question_field,
    }
    pairs = _pairs(path, kept, fields, binary, threshold, source)
    logger.info("%s: %d %s ratings", path, len(pairs), "binary" if binary else "continuous")
    return pairs


def _pairs(
    path: str,
    kept: list,
    fields: dict[str, Optional[str]],
    binary: bool,
    threshold: Optional[float],
    source: Optional[str],
) -> list[RatedPair]:
    """The RatedPairs of the rows with a usable rating; ids must be unique."""
    stem = os.path.splitext(os.path.basename(path))[0]
    pairs, seen = [], set()
    for line, row, value in kept:
        where = f"{path}:{line}: field {fields['rating']!r}"
        label, rating = _judgment(value, binary, threshold, where)
        pair_id = cell_text(row[fields["id"]]) if fields["id"] else f"{stem}-{line}"
        if pair_id in seen:
            raise TableFormatError(f"{path}:{line}: duplicate id {pair_id!r}")
        seen.add(pair_id)
        pairs.append(
            RatedPair(
                id=pair_id,
                premise=cell_text(row[fields["premise"]]),
                hypothesis=cell_text(row[fields["hypothesis"]]),
                label=label,
                rating=rating,
                lang=optional_text(row, fields["lang"]),
                source=source or stem,
                system=optional_text(row, fields["system"]),
                meta={"line": line},
                question=optional_text(row, fields["question"]),
            )
        )
    return pairs


def _checked_rows(path: str, encoding: str, required) -> list[tuple[int, dict[str, Any]]]:
    """The file's (line, row) pairs; refuses a file without rows or a row
    without a `required` field."""
    rows = list(read_table(path, encoding=encoding))
    if not rows:
        raise TableFormatError(f"{path}: no data rows")
    _check_fields(path, rows, required)
    return rows


def _check_fields(path: str, rows: list[tuple[int, dict[str, Any]]], fields) -> None:
    for line, row in rows:
        for field in fields:
            if field not in row:
                raise TableFormatError(
                    f"{path}:{line}: missing field {field!r} (fields: {sorted(row)}); name the "
                    "fields: "
                    + option(
                        "premise_field, hypothesis_field, rating_field, id_field",
                        "ratings:FILE:premise=F,hypothesis=F,rating=F,id=F",
                    )
                )


def _judgment(
    value: Any, binary: bool, threshold: Optional[float], where: str
) -> tuple[Optional[bool], float]:
    """(label, rating) of a rating cell."""
    if binary:
        label = parse_binary(value)
        if label is None:
            raise TableFormatError(f"{where}: {value!r} is not a binary rating")
        return label, 1.0 if label else 0.0
    rating = parse_float(value, where)
    return (None if threshold is None else rating >= threshold), rating


def _rated_rows(path, rows, rating_field, strict):
    """(line, row, rating) of the rows with a usable rating; a row without
    one raises when `strict`, else it is skipped and counted in the log."""
    kept, skipped = [], 0
    for line, row in rows:
        value = row[rating_field]
        usable = not is_blank(value) and (parse_binary(value) is not None or _is_number(value))
        if usable:
            kept.append((line, row, value))
        elif strict:
            raise TableFormatError(
                f"{path}:{line}: field {rating_field!r} is {value!r}, not a rating; fix "
                "the row or read with strict=False to skip such rows"
            )
        else:
            skipped += 1
    if skipped:
        logger.warning("%s: skipped %d rows without a usable rating", path, skipped)
    return kept


def _is_number(value: Any) -> bool:
    try:
        return math.isfinite(float(value.strip() if isinstance(value, str) else value))
    except (TypeError, ValueError):
        return False
