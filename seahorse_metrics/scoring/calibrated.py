"""`score --calibration FILE`: calibrated score columns beside the raw ones.

A step after the scoring run: it reads the finished output, adds
`<column>_calibrated` (the metric's calibration map applied to the score;
empty for a row without a score) before the `error` column, and replaces the
output atomically. Recomputed from the raw scores every time, so a rerun of
a finished (or resumed) run gives the same file. The maps are recorded in
`<output>.meta.json` under `calibration`.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

from seahorse_metrics.calibration import CALIBRATED_SUFFIX, CalibrationMap
from seahorse_metrics.scoring import files
from seahorse_metrics.scoring.job import META_SUFFIX
from seahorse_metrics.scoring.output import (ERROR_FIELD, OutputWriter, write_atomically,
                                             write_json_atomically)


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
    rows = [row.record for row in files.read_rows(output_path)]
    scored = [record for record in rows if ERROR_FIELD not in record or any(
        record.get(column) not in (None, "") for column in maps)]
    missing = [column for column in maps if scored and column not in scored[0]]
    if missing:
        raise ValueError(f"{output_path}: no score column {missing} to calibrate (columns "
                         f"{list(scored[0])})")
    added = [column + CALIBRATED_SUFFIX for column in maps]

    def with_calibrated(record: dict) -> dict:
        out = {k: v for k, v in record.items() if k not in added and k != ERROR_FIELD}
        out.update((column + CALIBRATED_SUFFIX, _calibrated(m, record.get(column)))
                   for column, m in maps.items())
        if ERROR_FIELD in record:
            out[ERROR_FIELD] = record[ERROR_FIELD]
        return out

    rows = [with_calibrated(record) for record in rows]

    def write(handle) -> None:
        writer = OutputWriter(handle, kind, list(rows[0]) if rows else [])
        for record in rows:
            writer.write(record)
        writer.close()

    write_atomically(output_path, write)
    meta_path = output_path + META_SUFFIX
    with open(meta_path, encoding="utf-8") as handle:
        meta = json.load(handle)
    meta["calibration"] = {column: m.to_dict() for column, m in maps.items()}
    write_json_atomically(meta_path, meta)
    return meta
