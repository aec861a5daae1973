"""`<output>.partial.jsonl`: the rows a resumable scoring run has finished.

A header line (`{"partial": <fingerprint>, "format": 2}`), then one line
per finished row: its entry (scores, or an `error`) and, under `input`, the
row as it was read (its fields and lines). The finished output is written
from this file alone, so a run reads its input once.

The file is always read record by record (never through offsets kept while
writing), so a row written twice or a torn last line cannot misplace the
others. Memory: one byte per row for what is done, and at the end 8 bytes
per row for the offsets of the records in row order.
"""

from __future__ import annotations

import array
import json
import logging
import os
import time
from typing import Any, Iterable, Iterator, Optional

from seahorse_metrics.data.tables import TableRow
from seahorse_metrics.io.atomic import is_no_space, no_space_error
from seahorse_metrics.option_names import option
from seahorse_metrics.scoring.job import refuse_other_settings
from seahorse_metrics.scoring.output import json_line

logger = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".partial.jsonl"
# 2: each record carries its input row (format 1, before 2026-11-28, did not).
PARTIAL_FORMAT = 2
INPUT_KEY = "input"
_FSYNC_SECONDS = 5.0


def input_of(item: TableRow) -> dict:
    """What a partial record keeps of its input row."""
    return {"record": item.record, "line": item.line, "first_line": item.first_line}


def row_of(entry: dict) -> TableRow:
    """The input row a partial record kept (`input_of`), as read."""
    kept = entry[INPUT_KEY]
    return TableRow(entry["row"], kept["line"], kept["first_line"], kept["record"])


class PartialFile:
    """The partial file of one output.

    Attributes:
      path: The file.
      done: 1 for each row already written (grows as rows arrive).
    """

    def __init__(self, path: str, fingerprint: dict):
        self.path = path
        self.done = bytearray()
        self._handle = None
        self._last_sync = time.monotonic()
        if os.path.exists(path):
            self._load(fingerprint)
        else:
            with open(path, "w", encoding="utf-8") as handle:
                header = {"partial": fingerprint, "format": PARTIAL_FORMAT}
                handle.write(json.dumps(header, sort_keys=True) + "\n")
        self._handle = open(path, "ab")

    def _records(self, handle) -> Iterator[tuple[int, dict]]:
        """(offset, entry) of each complete record after the header; stops at
        a torn last line. `handle.tell()` afterwards is the end of the last one."""
        while True:
            offset = handle.tell()
            line = handle.readline()
            entry = _parse_line(line) if line.endswith(b"\n") else None
            if not _is_record(entry):
                handle.seek(offset)
                return
            yield offset, entry

    def _load(self, fingerprint: dict) -> None:
        with open(self.path, "rb") as handle:
            header = _parse_line(handle.readline())
            header = header if isinstance(header, dict) else {}
            previous = header.get("partial")
            if previous != json.loads(json.dumps(fingerprint, sort_keys=True)):
                raise refuse_other_settings(self.path, previous)
            if header.get("format") != PARTIAL_FORMAT:
                raise ValueError(
                    f"{self.path} was written by an older version of seahorse-metrics, whose "
                    f"partial files this one cannot finish; pass "
                    f"{option('overwrite=True', '--overwrite')} to score the input again"
                )
            for _, entry in self._records(handle):
                self._mark(entry["row"])
            good_end = handle.tell()
        if good_end != os.path.getsize(self.path):
            logger.warning(
                "%s: dropping an incomplete last line (the previous run was "
                "interrupted while writing)",
                self.path,
            )
            with open(self.path, "r+b") as handle:
                handle.truncate(good_end)

    def _mark(self, row: int) -> None:
        if row >= len(self.done):
            self.done.extend(bytes(row + 1 - len(self.done)))
        self.done[row] = 1

    @property
    def finished(self) -> int:
        """Rows already written."""
        return sum(self.done)

    def is_done(self, row: int) -> bool:
        return row < len(self.done) and bool(self.done[row])

    def append(self, rows: Iterable[tuple[TableRow, dict]]) -> int:
        """Appends the entries of input rows and flushes; returns how many were new."""
        written = 0
        try:
            for item, entry in rows:
                if self.is_done(item.row):
                    continue
                self._mark(item.row)
                record = dict(entry, **{INPUT_KEY: input_of(item)})
                self._handle.write(json_line(record).encode("utf-8") + b"\n")
                written += 1
            self._handle.flush()
            if time.monotonic() - self._last_sync > _FSYNC_SECONDS:
                os.fsync(self._handle.fileno())
                self._last_sync = time.monotonic()
        except OSError as error:
            if is_no_space(error):
                raise no_space_error(
                    error,
                    self.path,
                    "free some space and run the same "
                    "command again: it resumes from the rows written",
                ) from None
            raise
        return written

    def entries_in_order(self, num_rows: int) -> Iterator[dict]:
        """The entries of rows 0 .. num_rows - 1 in order (the first record of
        a row written twice), each with its input row under `input`.

        Raises:
          RuntimeError: if a row is missing (a bug).
        """
        if self._handle is not None:
            self._handle.flush()
        offsets = array.array("q", [-1]) * num_rows
        repeated = 0
        with open(self.path, "rb") as handle:
            handle.readline()
            for offset, entry in self._records(handle):
                if entry["row"] >= num_rows:
                    raise RuntimeError(
                        f"{self.path}: row {entry['row']} is past the input's "
                        f"{num_rows} rows; this is a bug"
                    )
                if offsets[entry["row"]] < 0:
                    offsets[entry["row"]] = offset
                else:
                    repeated += 1
            if repeated:
                logger.warning(
                    "%s: %d rows were written more than once; the first record of each is used",
                    self.path,
                    repeated,
                )
            for row, offset in enumerate(offsets):
                if offset < 0:
                    raise RuntimeError(f"row {row} was never scored; this is a bug")
                handle.seek(offset)
                yield json.loads(handle.readline())

    def close(self) -> None:
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        try:
            handle.flush()
            os.fsync(handle.fileno())
        except OSError as error:
            if not is_no_space(error):
                raise
            # The disk is full: what did not reach the file is scored again on resume.
            logger.warning("%s: %s", self.path, os.strerror(error.errno))
        finally:
            try:
                handle.close()
            except OSError:
                pass  # the same unwritten buffer


def _is_record(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("row"), int)
        and entry["row"] >= 0
        and isinstance(entry.get(INPUT_KEY), dict)
    )


def _parse_line(line: bytes) -> Optional[Any]:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
