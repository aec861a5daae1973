"""`score --calibration FILE`: calibrated score columns beside the raw ones.

A step after the scoring run: it reads the finished output, adds
`<column>_calibrated` (the metric's calibration map applied to the score;
empty for a row without a score) before the `error` column, and replaces the
output atomically. Recomputed from the raw scores every time, so a rerun of
a finished (or resumed) run gives the same file. The maps are recorded in
`<output>.meta.json` under `calibration`. The output is streamed, a row at a
time (twice: once to find its columns, once to rewrite it), never held whole.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterator, Mapping, Optional

from seahorse_metrics.calibration import CALIBRATED_SUFFIX, CalibrationMap
from seahorse_metrics.data import tables
from seahorse_metrics.scoring import files
from seahorse_metrics.scoring.job import META_SUFFIX
from seahorse_metrics.io.atomic import write_atomically, write_json_atomically
from seahorse_metrics.scoring.output import ERROR_FIELD, OutputWriter
from seahorse_metrics.io.json_files import read_json


def _score(value: Any) -> float:
    """A score cell as a float (NaN when the row has none)."""
    if value is None or value == "":
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _calibrated(calibration_map: CalibrationMap, value: Any):
    score = _score(value)
    if not math.isfinite(score):
        return None
    return float(str(float(calibration_map.apply([min(max(score, 0.0), 1.0)])[0])))


def output_records(path: str, kind: str) -> Iterator[dict]:
    """The rows of an output `score` wrote, one at a time (a JSON array as
    `OutputWriter` writes it: `[`, a row per line, `]`).

    Raises:
      ValueError: for a JSON array line that is no row, naming the line.
    """
    if kind != "json":
        for row in files.read_rows(path):
            yield row.record
        return
    for number, text in tables.text_lines(path):
        item = text.strip().rstrip(",")
        if item in ("", "[", "]"):
            continue
        try:
            yield json.loads(item)
        except ValueError:
            raise ValueError(f"{path}:{number}: not an output row as `score` writes them "
                             "(one per line)") from None


def _first_scored(path: str, kind: str, columns) -> tuple[Optional[dict], Optional[dict]]:
    """(the first row, the first row with a score) of the output."""
    first = None
    for record in output_records(path, kind):
        first = record if first is None else first
        if ERROR_FIELD not in record or any(record.get(c) not in (None, "") for c in columns):
            return first, record
    return first, None


def add_calibrated_columns(output_path: str, maps: Mapping[str, CalibrationMap]) -> dict:
    """Adds `<column>_calibrated` for each score column in `maps` to a
    finished output of `files.score_file`.

    Args:
      output_path: The output file (JSONL, JSON, CSV or TSV).
      maps: Score column -> calibration map.

    Returns:
      The updated metadata (also written to `<output>.meta.json`).

    Raises:
      ValueError: a column in `maps` that the output does not have.
    """
    kind = files.file_format(output_path)
    first, scored = _first_scored(output_path, kind, maps)
    missing = [column for column in maps if scored is not None and column not in scored]
    if missing:
        raise ValueError(f"{output_path}: no score column {missing} to calibrate (columns "
                         f"{list(scored)})")
    added = [column + CALIBRATED_SUFFIX for column in maps]

    def with_calibrated(record: dict) -> dict:
        out = {k: v for k, v in record.items() if k not in added and k != ERROR_FIELD}
        out.update((column + CALIBRATED_SUFFIX, _calibrated(m, record.get(column)))
                   for column, m in maps.items())
        if ERROR_FIELD in record:
            out[ERROR_FIELD] = record[ERROR_FIELD]
        return out

    def write(handle) -> None:
        # CSV/TSV rows share the header; JSON rows keep their own keys.
        writer = OutputWriter(handle, kind, list(with_calibrated(first)) if first else [])
        for record in output_records(output_path, kind):
            writer.write(with_calibrated(record))
        writer.close()

    write_atomically(output_path, write)
    meta_path = output_path + META_SUFFIX
    meta = read_json(meta_path, "run metadata")
    meta["calibration"] = {column: m.to_dict() for column, m in maps.items()}
    write_json_atomically(meta_path, meta)
    return meta
