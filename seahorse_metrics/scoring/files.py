"""Resumable scoring of JSONL, JSON, CSV and TSV files (`seahorse-metrics score`).

    summary = score_file(multi_scorer, "in.jsonl", "out.jsonl")

The in-process runner of a `seahorse_metrics.scoring.job.ScoringJob`: what is
scored, its fingerprint, metadata and row counts are the job's; rows are
scored by `seahorse_metrics.scoring.rows` (windows of `window_size` rows by
row number) and written by `seahorse_metrics.scoring.output`. This module
adds the lock and the resume.

The input is read by `seahorse_metrics.data.tables` (every line accounted
for; TSVs unquoted unless quoted; undecodable text stops the run with its
line) and checked first: it must have rows and the premise and hypothesis
columns. It is then streamed: each finished batch's rows are appended, with
their row id, to `<output>.partial.jsonl` (flushed per batch, fsynced every
few seconds). A rerun with the same input, settings and checkpoint content
reads the partial file record by record, skips every window whose rows are
all scored, and re-scores a partly scored window whole (so its batches, and
hence its scores, are bit-identical to an uninterrupted run) while writing
only the missing rows. At the end the output is written in input order to a
temporary file and moved into place, the metadata goes to
`<output>.meta.json`, and the partial file is removed. While a run works on
an output it holds an exclusive lock (`<output>.lock`); a second run on the
same output refuses, naming the first one's process.

Bad rows (invalid JSON, wrong column count, missing/empty/non-text field)
are logged with their line and written with an `error` field, never dropped.
Memory stays flat: a window of rows, and 9 bytes per row for the index of
the partial file.
"""
from __future__ import annotations

import array
import dataclasses
import json
import logging
import math
import os
import time
from typing import Any, Iterable, Iterator, Mapping, Optional

from seahorse_metrics.data import tables
from seahorse_metrics.io.atomic import (is_no_space, no_space_error, write_atomically,
                                        write_json_atomically)
from seahorse_metrics.io.locks import OutputLock
from seahorse_metrics.option_names import option
from seahorse_metrics.scoring import job as job_lib
from seahorse_metrics.scoring.job import (InputFields,
                                          ScoringJob)
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.output import ERROR_FIELD, OutputWriter, json_line
from seahorse_metrics.scoring.rows import InputRow, score_windows, window_rows
from seahorse_metrics.scoring.window_scoring import ScoringStats

logger = logging.getLogger(__name__)

FORMATS = tables.TEXT_FORMATS
PARTIAL_SUFFIX = ".partial.jsonl"
_FSYNC_SECONDS = 5.0


def file_format(path: str) -> str:
    """"jsonl", "json", "csv" or "tsv" from the file extension.

    Raises:
      ValueError: for another extension.
    """
    return tables.table_kind(path)


def read_rows(path: str, encoding: str = "utf-8", quoting: str = "auto",
              report: Optional[tables.TableReport] = None) -> Iterator[InputRow]:
    """Streams the data rows of a JSONL/JSON/CSV/TSV file, bad rows included.

    Raises:
      FileNotFoundError: if `path` does not exist.
      ValueError: for an unsupported extension, undecodable text (naming the
        line), or a CSV/TSV without a header or with a column named twice.
    """
    return tables.iter_table(path, encoding=encoding, quoting=quoting, report=report)


# ------------------------------------------------------------------ the input
@dataclasses.dataclass(frozen=True)
class InputScan:
    """What one read of the input found.

    Attributes:
      columns: The input's columns (header, or JSON keys in order).
      num_rows: Data rows.
      quoting: How the input is read ("quoted" or "none" for CSV/TSV).
      table: The input's line counts (`TableReport.summary()`).
      renamed: Input columns renamed because an output column has their name.
    """

    columns: list
    num_rows: int
    quoting: Optional[str]
    table: Mapping[str, Any]
    renamed: Mapping[str, str]


def scan_input(input_path: str, fields: InputFields, encoding: str = "utf-8",
               quoting: str = "auto") -> tuple[list[str], int, tables.TableReport]:
    """Reads the input once: its columns, its row count and its line counts.

    Raises:
      ValueError: for an input without data rows, or without the premise or
        hypothesis column (with a hint to name them).
    """
    fields = InputFields.of(fields)
    report = tables.TableReport(input_path, "")
    columns: dict[str, None] = {}
    for item in read_rows(input_path, encoding, quoting, report):
        if item.record is not None:
            columns.update(dict.fromkeys(item.record))
    report.log()
    if report.rows == 0:
        raise ValueError(f"{input_path}: no data rows; nothing to score")
    if report.header is not None:
        columns = dict.fromkeys(report.header)
    missing = [name for name in (fields.premise, fields.hypothesis, fields.question)
               if name and name not in columns]
    if missing:
        raise ValueError(
            f"{input_path}: no {' or '.join(map(repr, missing))} "
            f"{'column' if report.header is not None else 'field in any row'} (columns: "
            f"{', '.join(columns) or 'none'}); name the article and summary columns with "
            f"{option('premise_field', '--premise_field')} and "
            f"{option('hypothesis_field', '--hypothesis_field')}, and the question column with "
            f"{option('question_field', '--question_field')}")
    return list(columns), report.rows, report


def _scan(job: ScoringJob) -> InputScan:
    input_path = job.inputs[0]
    columns, num_rows, report = scan_input(input_path, job.fields, job.encoding, job.quoting)
    renamed = job.output_fields.renamed(columns)
    if renamed:
        logger.warning("%s already has the column(s) %s that this run writes; the input's "
                       "values are kept as %s", input_path, ", ".join(renamed),
                       ", ".join(renamed.values()))
    return InputScan(columns, num_rows, report.quoting, report.summary(), renamed)


# ------------------------------------------------------------------ partial
class PartialFile:
    """`<output>.partial.jsonl`: a header line, then one line per finished row.

    The file is always read record by record (never through offsets kept
    while writing), so a row written twice or a torn last line cannot
    misplace the others.

    Attributes:
      path: The file.
      done: 1 for each row already written.
    """

    def __init__(self, path: str, fingerprint: dict, num_rows: int):
        self.path = path
        self.done = bytearray(num_rows)
        self._handle = None
        self._last_sync = time.monotonic()
        if os.path.exists(path):
            self._load(fingerprint)
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(json.dumps({"partial": fingerprint}, sort_keys=True) + "\n")
        self._handle = open(path, "ab")

    def _records(self, handle) -> Iterator[tuple[int, dict]]:
        """(offset, entry) of each complete record after the header; stops at
        a torn last line. `handle.tell()` afterwards is the end of the last one."""
        while True:
            offset = handle.tell()
            line = handle.readline()
            entry = _parse_line(line) if line.endswith(b"\n") else None
            row = entry.get("row") if isinstance(entry, dict) else None
            if not isinstance(row, int) or not 0 <= row < len(self.done):
                handle.seek(offset)
                return
            yield offset, entry

    def _load(self, fingerprint: dict) -> None:
        with open(self.path, "rb") as handle:
            header = _parse_line(handle.readline())
            previous = header.get("partial") if isinstance(header, dict) else None
            if previous != json.loads(json.dumps(fingerprint, sort_keys=True)):
                raise job_lib.refuse_other_settings(self.path, previous)
            for _, entry in self._records(handle):
                self.done[entry["row"]] = 1
            good_end = handle.tell()
        if good_end != os.path.getsize(self.path):
            logger.warning("%s: dropping an incomplete last line (the previous run was "
                           "interrupted while writing)", self.path)
            with open(self.path, "r+b") as handle:
                handle.truncate(good_end)

    @property
    def finished(self) -> int:
        """Rows already written."""
        return sum(self.done)

    def is_done(self, row: int) -> bool:
        return bool(self.done[row])

    def append(self, entries: Iterable[dict]) -> int:
        """Appends rows' entries and flushes; returns how many were new."""
        written = 0
        try:
            for entry in entries:
                if self.done[entry["row"]]:
                    continue
                self.done[entry["row"]] = 1
                self._handle.write(json_line(entry).encode("utf-8") + b"\n")
                written += 1
            self._handle.flush()
            if time.monotonic() - self._last_sync > _FSYNC_SECONDS:
                os.fsync(self._handle.fileno())
                self._last_sync = time.monotonic()
        except OSError as error:
            if is_no_space(error):
                raise no_space_error(error, self.path, "free some space and run the same "
                                     "command again: it resumes from the rows written") from None
            raise
        return written

    def entries_in_order(self) -> Iterator[dict]:
        """Every row's entry, by row id (the first record of a row written twice).

        Raises:
          RuntimeError: if a row is missing (a bug).
        """
        if self._handle is not None:
            self._handle.flush()
        offsets = array.array("q", [-1]) * len(self.done)
        repeated = 0
        with open(self.path, "rb") as handle:
            handle.readline()
            for offset, entry in self._records(handle):
                if offsets[entry["row"]] < 0:
                    offsets[entry["row"]] = offset
                else:
                    repeated += 1
            if repeated:
                logger.warning("%s: %d rows were written more than once; the first record of "
                               "each is used", self.path, repeated)
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


def _parse_line(line: bytes) -> Optional[Any]:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None



# ------------------------------------------------------------------ scoring
@dataclasses.dataclass
class _Progress:
    """Counts of this run, for the log and the metadata."""

    bad_count: int = 0
    scored_now: int = 0
    resumed: int = 0
    seconds: float = 0.0


def score_file(scorer, input_path: str, output_path: str, *,
               columns: Optional[Mapping[str, str]] = None, premise_field: str = "article",
               hypothesis_field: str = "summary", lang_field: Optional[str] = "lang",
               batch_size: Optional[int] = None, overwrite: bool = False,
               show_progress: Optional[bool] = None, encoding: str = "utf-8",
               quoting: str = "auto", question_field: Optional[str] = None,
               thresholds: Optional[Mapping[str, float]] = None,
               calibration: Optional[Mapping[str, Any]] = None) -> dict:
    """Scores every row of a file with a `MultiScorer`, resumably.

    Args:
      scorer: A `seahorse_metrics.MultiScorer` (or `Scorer.multi`).
      input_path: JSONL, JSON, CSV or TSV file with the text fields.
      output_path: JSONL, JSON, CSV or TSV file to write: the input rows in
        input order with a score column per metric (and an `error` column).
      columns: metric name -> output column (default: the metric names).
      premise_field, hypothesis_field: Names of the text fields.
      lang_field: Field with a language code (optional; for the counts).
      batch_size: Most rows of a batch (default: the scorer's).
      overwrite: Discard a previous partial run or finished output.
      show_progress: Progress bar with examples/s and ETA (default: on a terminal).
      encoding: Text encoding of the input (default UTF-8).
      quoting: "auto", "none" or "quoted" for a CSV/TSV input (see
        `seahorse_metrics.data.tables`).
      question_field: Field with the question of a query-focused summary
        (required in every row when given), or None.
      thresholds: metric name -> decision threshold; adds a yes/no
        `<column>_decision` column per metric named.
      calibration: metric name -> `calibration.maps.CalibrationMap`; adds a
        `<column>_calibrated` column per metric named, row by row.

    Returns:
      The metadata written to `<output>.meta.json` (`job.run_metadata`).

    Raises:
      FileNotFoundError: if the input does not exist.
      ValueError: for unsupported file types, an output that is the input, an
        input without rows or without the text columns, undecodable text, a
        threshold for an unknown metric, or a partial/finished output of
        another input, settings or checkpoint content (without `overwrite`).
      OutputInUseError: while another run writes the same output.
    """
    options = scorer.options if batch_size is None else ScoringOptions.of(
        scorer.options, batch_size=int(batch_size))
    job = job_lib.resolve_job(
        [input_path], output_path, {name: scorer.checkpoints.get(name) for name in scorer.names},
        options=options, columns=columns,
        fields=InputFields(premise_field, hypothesis_field, lang_field, question_field),
        thresholds=thresholds, calibration=calibration, encoding=encoding, quoting=quoting)
    return score_job(scorer, job, overwrite=overwrite, show_progress=show_progress)


def score_job(scorer, job: ScoringJob, *, overwrite: bool = False,
              show_progress: Optional[bool] = None) -> dict:
    """Scores a one-input `ScoringJob` with a loaded `MultiScorer` (see `score_file`)."""
    scan = _scan(job)
    fingerprint = job_lib.job_fingerprint(job, [job_lib.local_input_stat(job.inputs[0])],
                                          scorer.metadata())
    with OutputLock(job.output):
        if _already_done(job, fingerprint, overwrite):
            return job_lib.read_metadata(job.meta_path)
        return _run_job(scorer, job, scan, fingerprint, overwrite, show_progress)


def _partial_path(job: ScoringJob) -> str:
    return job.output + PARTIAL_SUFFIX


def _job_rows(job: ScoringJob, scan: InputScan) -> Iterator[InputRow]:
    return read_rows(job.inputs[0], job.encoding, scan.quoting or "auto")


def _run_job(scorer, job: ScoringJob, scan: InputScan, fingerprint: dict, overwrite: bool,
             show_progress: Optional[bool]) -> dict:
    """Scores what the partial file lacks, writes the output and the metadata."""
    partial_path = _partial_path(job)
    if overwrite and os.path.exists(partial_path):
        os.remove(partial_path)
    partial = PartialFile(partial_path, fingerprint, scan.num_rows)
    try:
        stats, progress = _score_missing_rows(scorer, job, scan, partial, show_progress)
    finally:
        partial.close()
    stats.log(scorer.settings.max_input_length)
    summary = _finish(scorer, job, scan, partial, fingerprint, stats, progress)
    write_json_atomically(job.meta_path, summary)
    os.remove(partial_path)
    return summary


def _score_missing_rows(scorer, job: ScoringJob, scan: InputScan, partial: PartialFile,
                        show_progress: Optional[bool]):
    """Scores the rows the partial file lacks; returns (stats, progress)."""
    from tqdm.auto import tqdm

    progress = _Progress(resumed=partial.finished)
    if progress.resumed:
        logger.info("%s: resuming, %d of %d rows already scored", partial.path,
                    progress.resumed, scan.num_rows)
    stats, start, bad_log = ScoringStats(), time.perf_counter(), job_lib.BadRowLog()
    windows = (window for window in window_rows(_job_rows(job, scan), job.window_size)
               if not all(partial.is_done(item.row) for item in window))
    with tqdm(total=scan.num_rows, initial=progress.resumed, desc="scoring", unit="ex",
              dynamic_ncols=True,
              disable=(None if show_progress is None else not show_progress)) as bar:
        for group in score_windows(scorer, windows, job.fields, job.columns,
                                   batch_size=job.options.batch_size, stats=stats):
            fresh = [(item, entry) for item, entry in group if not partial.is_done(item.row)]
            for item, entry in fresh:
                if ERROR_FIELD in entry:
                    bad_log.note(job.inputs[0], item, entry[ERROR_FIELD])
            progress.bad_count = bad_log.count
            progress.scored_now += sum(ERROR_FIELD not in entry for _, entry in fresh)
            bar.update(partial.append(entry for _, entry in fresh))
    progress.seconds = time.perf_counter() - start
    return stats, progress


def _already_done(job: ScoringJob, fingerprint: dict, overwrite: bool) -> bool:
    if overwrite or os.path.exists(_partial_path(job)) or not os.path.exists(job.output):
        return False
    meta = job_lib.read_metadata(job.meta_path)
    previous = meta.get("fingerprint") if meta else None
    if previous == fingerprint:
        logger.info("%s is complete for this input and these settings; nothing to do",
                    job.output)
        return True
    raise job_lib.refuse_other_settings(f"{job.output} exists and", previous)


def _finish(scorer, job: ScoringJob, scan: InputScan, partial: PartialFile, fingerprint: dict,
            stats: ScoringStats, progress: _Progress) -> dict:
    """Writes the output in input order; returns the metadata."""
    counts = job_lib.RowCounts(resumed=progress.resumed)
    fields = job.output_fields
    header = fields.header(scan.columns, scan.renamed)
    input_path = os.path.abspath(job.inputs[0])

    def write(handle) -> None:
        writer = OutputWriter(handle, job.output_kind, header)
        for item, entry in zip(_job_rows(job, scan), partial.entries_in_order()):
            if entry["row"] != item.row:
                raise RuntimeError(f"row {item.row} of {input_path} does not match the "
                                   f"partial entry for row {entry['row']}; this is a bug")
            counts.add(entry, item, input_path)
            writer.write(fields.record(item.record, entry, scan.renamed))
        writer.close()

    write_atomically(job.output, write)
    return _metadata(scorer, job, scan, fingerprint, stats, progress, counts)


def _metadata(scorer, job: ScoringJob, scan: InputScan, fingerprint: dict,
              stats: ScoringStats, progress: _Progress, counts: job_lib.RowCounts) -> dict:
    rate = progress.scored_now / progress.seconds if progress.seconds > 0 else 0.0
    logger.info("%s: %d rows (%d scored, %d bad, %d truncated, %d resumed) -> %s; this run "
                "scored %d rows at %.2f examples/s", job.inputs[0], counts.rows, counts.scored,
                counts.bad, counts.truncated, counts.resumed, job.output, progress.scored_now,
                rate)
    return job_lib.run_metadata(
        job, inputs=[{"path": os.path.abspath(job.inputs[0]), "rows": scan.num_rows,
                      "windows": math.ceil(scan.num_rows / job.window_size)}],
        counts=counts, stats=stats.summary(),
        this_run={"scored": progress.scored_now, "bad": progress.bad_count,
                  "seconds": round(progress.seconds, 3), "examples_per_second": round(rate, 3)},
        settings=scorer.metadata(), fingerprint=fingerprint,
        renamed_input_columns=scan.renamed, input_table=scan.table,
        merged=os.path.abspath(job.output))
