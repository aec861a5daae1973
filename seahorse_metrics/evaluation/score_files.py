"""Scores files: the precomputed scores of any external metric
(`scores:FILE[:COLUMN]` metric specs), read into a `ScoreTable`.

A scores file is JSONL, JSON (a list of objects), CSV or TSV with a header,
or plain text with one number per line. The score column is COLUMN, else
`score`, else the only numeric column that is not an id/label/rating field.
With an `id` column, scores are aligned to items by id (and by `benchmark`
too when that column exists, so one file can hold several benchmarks); a
benchmark whose ids are all absent is not covered by the metric (an error,
unless partial coverage is allowed: then it is reported as not covered), one
with some ids missing is an error. Without an `id` column, rows align by
order and apply only to a benchmark with exactly as many items (use ids when
evaluating several benchmarks). A row with an `error` (as `seahorse-metrics
score` writes for a row it could not score) has no score: NaN.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from typing import Optional

logger = logging.getLogger(__name__)

# Fields of a scores file that are never the score itself.
_NON_SCORE_FIELDS = frozenset(
    {
        "id",
        "gem_id",
        "benchmark",
        "label",
        "rating",
        "lang",
        "source",
        "system",
        "premise",
        "hypothesis",
        "article",
        "summary",
        "grounding",
        "generated_text",
        # The bookkeeping and ratings of a prepared SEAHORSE split.
        "line",
        "split",
        "q1",
        "q2",
        "q3",
        "q4",
        "q5",
        "q6",
        "error",
    }
)
_ERROR_FIELD = "error"


@dataclasses.dataclass(frozen=True)
class ScoreTable:
    """A scores file read into memory."""

    column: str
    scores: list  # float per row, NaN for an empty cell
    ids: Optional[list]
    benchmarks: Optional[list]


def _row_error(row: dict) -> Optional[str]:
    """The row's `error` (as `seahorse-metrics score` writes it), or None."""
    value = row.get(_ERROR_FIELD)
    return None if value in (None, "") else str(value)


def _row_score(row: dict, column: str, path: str, number: int) -> float:
    """The row's score; NaN when the row has an error (a stale score beside
    an error is never read)."""
    if _row_error(row):
        return math.nan
    return _parse_number(row.get(column), path, number, column)


def _parse_number(value, path: str, row: int, column: str) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: row {row}: {column}={value!r} is not a number") from None


def _read_rows(path: str, encoding: str = "utf-8") -> list[dict]:
    """The rows of a scores file: a table (see `seahorse_metrics.data.tables`)
    or plain text with one number per line; a malformed row is an error."""
    from seahorse_metrics.data import tables

    if os.path.splitext(path)[1].lower() not in tables.TEXT_FORMATS:
        return [
            {"score": text.strip()} for _, text in tables.text_lines(path, encoding) if text.strip()
        ]
    rows, _ = tables.read_table_rows(path, encoding=encoding)
    for row in rows:
        if row.error is not None:
            raise ValueError(f"{path}:{row.lines}: {row.error}")
    return [row.record for row in rows]


def _choose_column(rows: list[dict], requested: Optional[str], path: str) -> str:
    columns = list(dict.fromkeys(key for row in rows[:100] for key in row))
    if requested:
        if requested not in columns:
            raise ValueError(f"{path}: no column {requested!r}; columns are {columns}")
        return requested
    if "score" in columns:
        return "score"
    numeric = []
    for column in columns:
        if column in _NON_SCORE_FIELDS:
            continue
        try:
            [float(row[column]) for row in rows[:100] if row.get(column) not in (None, "")]
        except (TypeError, ValueError):
            continue
        numeric.append(column)
    if len(numeric) != 1:
        raise ValueError(
            f"{path}: cannot tell which column holds the scores (numeric candidates: "
            f"{numeric}); name it as scores:{path}:COLUMN"
        )
    return numeric[0]


def _prepared_ids(rows: list[dict]) -> Optional[list]:
    """The SEAHORSE benchmark ids (`gem_id|system|line`) of rows that carry
    the fields of a prepared split (`seahorse-metrics score` keeps them), so
    that scoring `prepared/test.jsonl` and evaluating on `seahorse:prepared`
    line up without an id column; None when a row lacks one of them."""
    fields = ("gem_id", "system", "line")
    if not all(row.get(field) not in (None, "") for row in rows for field in fields):
        return None
    return [f"{row['gem_id']}|{row['system']}|{row['line']}" for row in rows]


def read_score_table(path: str, column: Optional[str] = None) -> ScoreTable:
    """Reads a scores file (see the module docstring for its formats).

    Raises:
      FileNotFoundError: No such file.
      ValueError: Malformed rows (file and row named), ambiguous column,
        or an id given twice.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"scores file {path} not found")
    rows = _read_rows(path)
    if not rows:
        raise ValueError(f"{path}: no rows")
    chosen = _choose_column(rows, column, path)
    scores = [_row_score(row, chosen, path, number) for number, row in enumerate(rows, start=1)]
    failed = [number for number, row in enumerate(rows, start=1) if _row_error(row)]
    if failed:
        logger.warning(
            "%s: %d rows have an %r (first: row %d: %s) and no score; they count as "
            "NaN (--drop_nan leaves them out)",
            path,
            len(failed),
            _ERROR_FIELD,
            failed[0],
            _row_error(rows[failed[0] - 1]),
        )
    has_ids = all(row.get("id") not in (None, "") for row in rows)
    ids = [str(row["id"]) for row in rows] if has_ids else _prepared_ids(rows)
    has_ids = ids is not None
    benchmarks = (
        [str(row.get("benchmark", "")) for row in rows]
        if has_ids and any("benchmark" in row for row in rows)
        else None
    )
    if ids is not None:
        keys = list(zip(benchmarks or [""] * len(ids), ids))
        seen: dict = {}
        for number, key in enumerate(keys, start=1):
            if key in seen:
                raise ValueError(f"{path}: row {number} repeats id {key[1]!r} of row {seen[key]}")
            seen[key] = number
    return ScoreTable(chosen, scores, ids, benchmarks)
