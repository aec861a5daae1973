"""Resumable scoring of JSONL, JSON, CSV and TSV files (`seahorse-metrics score`).

    summary = score_file(multi_scorer, "in.jsonl", "out.jsonl")

The input is read by `seahorse_metrics.data.tables` (every line accounted
for; TSVs unquoted unless quoted; undecodable text stops the run with its
line) and checked first: it must have rows and the premise and hypothesis
columns. It is then streamed: rows are read in windows of `window_size` (by
row number), scored, and each finished batch's rows are appended, with
their row id, to `<output>.partial.jsonl` (flushed per batch, fsynced every
few seconds). A rerun with the same input and settings reads the partial
file record by record, skips every window whose rows are all scored, and
re-scores a partly scored window whole (so its batches, and hence its
scores, are bit-identical to an uninterrupted run) while writing only the
missing rows. At the end the output is written in input order to a
temporary file and moved into place, the metadata goes to
`<output>.meta.json`, and the partial file is removed. While a run works on
an output it holds an exclusive lock (`<output>.lock`); a second run on the
same output refuses, naming the first one's process.

Bad rows (invalid JSON, wrong column count, missing/empty/non-text field)
are logged with their line and written with an `error` field, never dropped.
With `question_field`, each row's question (of a query-focused summary) is
part of the input. With `thresholds`, each score column gets a
`<column>_decision` column: `yes` when the score is at or above the metric's
threshold, else `no`. Output columns (scores, decisions, `error`) are always
written fresh: input columns of the same names are kept renamed
(`input_<name>`). Memory stays flat: a window of rows, and 9 bytes per row
for the index of the partial file.
"""
from __future__ import annotations

import array
import dataclasses
import fcntl
import json
import logging
import os
import socket
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.data import tables
from seahorse_metrics.scoring.pipeline import Example, ExampleResult, ScoringStats
from seahorse_metrics.scoring.records import (ERROR_FIELD, BadRecord, record_fields,
                                              renamed_input_fields, with_renamed_fields)

logger = logging.getLogger(__name__)

FORMATS = tables.TEXT_FORMATS
PARTIAL_SUFFIX = ".partial.jsonl"
META_SUFFIX = ".meta.json"
LOCK_SUFFIX = ".lock"
SENTENCES_COLUMN = "sentences"
DECISION_SUFFIX = "_decision"
_FSYNC_SECONDS = 5.0
_LOGGED_BAD_ROWS = 20
_KEPT_BAD_ROWS = 100

InputRow = tables.TableRow


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


class OutputInUseError(BlockingIOError):
    """Another run holds the lock of the output file."""


class NothingScoredError(ValueError):
    """Every row of the input failed; the output lists why."""


# ------------------------------------------------------------------ the job
@dataclasses.dataclass(frozen=True)
class ScoringJob:
    """One input -> output scoring, checked and resolved before any scoring.

    Attributes:
      input_path, output_path: The files.
      output_kind: Format of the output ("jsonl", "json", "csv", "tsv").
      encoding: Text encoding of the input.
      quoting: How the input is read ("quoted" or "none" for CSV/TSV).
      fields: {"premise", "hypothesis", "lang", "question"} -> input field.
      columns: Metric name -> output column.
      decisions: Output column -> threshold of its `<column>_decision` column.
      input_columns: The input's columns (header, or JSON keys in order).
      renamed: Input columns renamed because an output column has their name.
      num_rows: Data rows of the input.
      table: The input's line counts (`TableReport.summary()`).
    """

    input_path: str
    output_path: str
    output_kind: str
    encoding: str
    quoting: Optional[str]
    fields: Mapping[str, Optional[str]]
    columns: Mapping[str, str]
    decisions: Mapping[str, float]
    input_columns: Sequence[str]
    renamed: Mapping[str, str]
    num_rows: int
    table: Mapping[str, Any]

    @property
    def partial_path(self) -> str:
        return self.output_path + PARTIAL_SUFFIX

    @property
    def meta_path(self) -> str:
        return self.output_path + META_SUFFIX

    def rows(self) -> Iterator[InputRow]:
        """The input's rows, read as the checks resolved."""
        return read_rows(self.input_path, self.encoding, self.quoting or "auto")


def check_output_path(input_path: str, output_path: str) -> str:
    """The output format; refuses an output that is the input itself.

    Raises:
      ValueError: for an unsupported extension or output == input.
    """
    kind = file_format(output_path)
    file_format(input_path)
    same = os.path.abspath(input_path) == os.path.abspath(output_path) or (
        os.path.exists(output_path) and os.path.samefile(input_path, output_path))
    if same:
        raise ValueError(f"--output {output_path} is the input file; scoring would overwrite "
                         "the input: write the scores to another file")
    return kind


def scan_input(input_path: str, fields: Mapping[str, Optional[str]], encoding: str = "utf-8",
               quoting: str = "auto") -> tuple[list[str], int, tables.TableReport]:
    """Reads the input once: its columns, its row count and its line counts.

    Raises:
      ValueError: for an input without data rows, or without the premise or
        hypothesis column (with a hint to name them).
    """
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
    missing = [fields[k] for k in ("premise", "hypothesis", "question")
               if fields.get(k) and fields[k] not in columns]
    if missing:
        raise ValueError(
            f"{input_path}: no {' or '.join(map(repr, missing))} "
            f"{'column' if report.header is not None else 'field in any row'} (columns: "
            f"{', '.join(columns) or 'none'}); name the article and summary columns with "
            "--premise_field and --hypothesis_field (premise_field=, hypothesis_field=), and "
            "the question column with --question_field")
    return list(columns), report.rows, report


def plan_job(scorer, input_path: str, output_path: str, columns: Optional[Mapping[str, str]],
             fields: Mapping[str, Optional[str]], encoding: str = "utf-8",
             quoting: str = "auto",
             thresholds: Optional[Mapping[str, float]] = None) -> ScoringJob:
    """Checks the input and output and resolves everything a run needs."""
    output_kind = check_output_path(input_path, output_path)
    columns = dict(columns or {name: name for name in scorer.names})
    decisions = decision_thresholds(thresholds, scorer.names, columns)
    input_columns, num_rows, report = scan_input(input_path, fields, encoding, quoting)
    added = output_columns([], columns, scorer.settings.per_sentence, decisions=decisions)
    renamed = renamed_input_fields(input_columns, added)
    if renamed:
        logger.warning("%s already has the column(s) %s that this run writes; the input's "
                       "values are kept as %s", input_path, ", ".join(renamed),
                       ", ".join(renamed.values()))
    return ScoringJob(input_path, output_path, output_kind, encoding, report.quoting,
                      dict(fields), columns, decisions, input_columns, renamed, num_rows,
                      report.summary())


def decision_thresholds(thresholds: Optional[Mapping[str, float]], names: Sequence[str],
                        columns: Mapping[str, str]) -> dict[str, float]:
    """Score column -> threshold, from metric name -> threshold.

    Raises:
      ValueError: for a metric name the scorer does not have, or a threshold
        that is not a finite number.
    """
    decisions = {}
    for name, threshold in (thresholds or {}).items():
        if name not in names:
            raise ValueError(f"a threshold is given for {name!r}, which is not one of the "
                             f"metrics scored ({list(names)})")
        if not isinstance(threshold, (int, float)) or not np.isfinite(threshold):
            raise ValueError(f"the threshold of {name!r} must be a finite number, got "
                             f"{threshold!r}")
        decisions[columns[name]] = float(threshold)
    return decisions


# ------------------------------------------------------------------ lock
class OutputLock:
    """An exclusive lock on an output: `fcntl.flock` on `<output>.lock`.

    The lock file holds the owner's PID and host; it is removed on release.
    Raises `OutputInUseError` on entry when another process holds it.
    """

    def __init__(self, output_path: str):
        self.output_path = output_path
        self.path = output_path + LOCK_SUFFIX
        self._handle = None

    def _try_lock(self):
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "a process that is starting"
            handle.close()
            raise OutputInUseError(
                f"{self.output_path} is being written by another run ({owner}); wait for it "
                f"to finish or stop it (if no such process is alive, remove {self.path})"
            ) from None
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if current is None or not os.path.samestat(current, os.fstat(handle.fileno())):
            handle.close()  # the previous owner removed the file meanwhile: lock the new one
            return None
        return handle

    def __enter__(self) -> "OutputLock":
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        while self._handle is None:
            self._handle = self._try_lock()
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(f"PID {os.getpid()} on {socket.gethostname()}, since "
                           f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        self._handle.flush()
        return self

    def __exit__(self, *exc) -> None:
        os.remove(self.path)
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None


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
            if not isinstance(header, dict) or header.get("partial") != json.loads(
                    json.dumps(fingerprint, sort_keys=True)):
                raise ValueError(
                    f"{self.path} was written for another input or other settings; rerun with "
                    "the original ones, or pass --overwrite (overwrite=True) to start over")
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
        for entry in entries:
            if self.done[entry["row"]]:
                continue
            self.done[entry["row"]] = 1
            self._handle.write(json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n")
            written += 1
        self._handle.flush()
        if time.monotonic() - self._last_sync > _FSYNC_SECONDS:
            os.fsync(self._handle.fileno())
            self._last_sync = time.monotonic()
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
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None


def _parse_line(line: bytes) -> Optional[Any]:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


# ------------------------------------------------------------------ output
class _OutputWriter:
    """Writes output rows as JSONL, a JSON array, CSV or TSV."""

    def __init__(self, handle, kind: str, columns: Sequence[str]):
        self.kind = kind
        self.handle = handle
        self.columns = list(columns)
        self._first = True
        if kind in tables.DELIMITERS:
            handle.write(tables.delimited_line(self.columns, tables.DELIMITERS[kind]))
        elif kind == "json":
            handle.write("[")

    def write(self, record: Mapping[str, Any]) -> None:
        if self.kind in ("jsonl", "json"):
            text = json.dumps(record, ensure_ascii=False)
            if self.kind == "json":
                text = ("\n" if self._first else ",\n") + text
            self.handle.write(text if self.kind == "json" else text + "\n")
            self._first = False
            return
        cells = [_cell(record.get(column)) for column in self.columns]
        self.handle.write(tables.delimited_line(cells, tables.DELIMITERS[self.kind]))

    def close(self) -> None:
        if self.kind == "json":
            self.handle.write("\n]\n")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _write_atomically(path: str, write: Callable[[Any], None]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = os.path.join(directory, f".{os.path.basename(path)}.tmp")
    with open(temporary, "w", encoding="utf-8", newline="") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


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
               thresholds: Optional[Mapping[str, float]] = None) -> dict:
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

    Returns:
      The metadata written to `<output>.meta.json`.

    Raises:
      FileNotFoundError: if the input does not exist.
      ValueError: for unsupported file types, an output that is the input, an
        input without rows or without the text columns, undecodable text, a
        threshold for an unknown metric, or a partial/finished output of
        another input or settings (without `overwrite`).
      OutputInUseError: while another run writes the same output.
    """
    fields = {"premise": premise_field, "hypothesis": hypothesis_field, "lang": lang_field,
              "question": question_field}
    job = plan_job(scorer, input_path, output_path, columns, fields, encoding, quoting,
                   thresholds)
    fingerprint = _fingerprint(scorer, job, batch_size)
    with OutputLock(output_path):
        if _already_done(job, fingerprint, overwrite):
            with open(job.meta_path, encoding="utf-8") as handle:
                return json.load(handle)
        return _run_job(scorer, job, fingerprint, batch_size, overwrite, show_progress)


def _run_job(scorer, job: ScoringJob, fingerprint: dict, batch_size: Optional[int],
             overwrite: bool, show_progress: Optional[bool]) -> dict:
    """Scores what the partial file lacks, writes the output and the metadata."""
    if overwrite and os.path.exists(job.partial_path):
        os.remove(job.partial_path)
    partial = PartialFile(job.partial_path, fingerprint, job.num_rows)
    try:
        stats, progress = _score_missing_rows(scorer, job, partial, batch_size, show_progress)
    finally:
        partial.close()
    stats.log(scorer.settings.max_input_length)
    summary = _finish(scorer, job, partial, fingerprint, stats, progress)
    _write_atomically(job.meta_path, lambda handle: json.dump(summary, handle, indent=2,
                                                              ensure_ascii=False))
    os.remove(job.partial_path)
    return summary


def raise_if_nothing_scored(summary: Mapping[str, Any]) -> None:
    """Raises `NothingScoredError` when a run had rows and scored none of them."""
    rows = summary["rows"]
    if rows["rows"] and not rows["scored"]:
        first = summary["bad_rows"][0] if summary["bad_rows"] else {}
        raise NothingScoredError(
            f"{summary['input']}: none of the {rows['rows']} rows could be scored (line "
            f"{first.get('line', '?')}: {first.get('error', '?')}); every row has an "
            f"{ERROR_FIELD!r} in {summary['output']}")


def _score_missing_rows(scorer, job: ScoringJob, partial: PartialFile,
                        batch_size: Optional[int], show_progress: Optional[bool]):
    """Scores the rows the partial file lacks; returns (stats, progress)."""
    from tqdm.auto import tqdm

    progress = _Progress(resumed=partial.finished)
    if progress.resumed:
        logger.info("%s: resuming, %d of %d rows already scored", job.partial_path,
                    progress.resumed, job.num_rows)
    stats, start = ScoringStats(), time.perf_counter()
    with tqdm(total=job.num_rows, initial=progress.resumed, desc="scoring", unit="ex",
              dynamic_ncols=True,
              disable=(None if show_progress is None else not show_progress)) as bar:
        def note_bad(item: InputRow) -> None:
            _report_bad(job.input_path, item, progress)
            bar.update(partial.append([{"row": item.row, "line": item.line,
                                        ERROR_FIELD: item.error}]))

        windows = _windows_to_score(job.rows(), partial, scorer.window_size, job.fields,
                                    note_bad)
        for group in scorer.run(windows, batch_size, stats):
            entries = [result_entry(result, scorer.names, job.columns) for result in group]
            written = partial.append(entries)
            progress.scored_now += written
            bar.update(written)
    progress.seconds = time.perf_counter() - start
    return stats, progress


def _fingerprint(scorer, job: ScoringJob, batch_size: Optional[int]) -> dict:
    """What a partial or finished output must match to be reused."""
    stat = os.stat(job.input_path)
    return {
        "input": os.path.abspath(job.input_path),
        "input_bytes": stat.st_size,
        "input_mtime_ns": stat.st_mtime_ns,
        "encoding": job.encoding,
        "quoting": job.quoting,
        "columns": dict(job.columns),
        "fields": dict(job.fields),
        "thresholds": dict(job.decisions),
        "batch_size": int(batch_size or scorer.batch_size),
        "scorer": scorer.metadata(),
    }


def _already_done(job: ScoringJob, fingerprint: dict, overwrite: bool) -> bool:
    if overwrite or os.path.exists(job.partial_path) or not os.path.exists(job.output_path):
        return False
    previous = None
    if os.path.exists(job.meta_path):
        with open(job.meta_path, encoding="utf-8") as handle:
            previous = json.load(handle).get("fingerprint")
    if previous == json.loads(json.dumps(fingerprint)):
        logger.info("%s is complete for this input and these settings; nothing to do",
                    job.output_path)
        return True
    raise ValueError(f"{job.output_path} exists and was not written for this input and these "
                     "settings; pass --overwrite (overwrite=True) to replace it")


def row_example(item: InputRow, premise_field: str = "article",
                hypothesis_field: str = "summary", lang_field: Optional[str] = "lang",
                question_field: Optional[str] = None) -> Optional[Example]:
    """The `Example` of a row (keyed by its row id), or None when the row
    cannot be scored; then `item.error` says why.

    The one check of a row's fields, shared by `score_file` and the Beam
    pipeline (`seahorse_metrics.scoring.beam`).
    """
    if item.error is not None:
        return None
    try:
        texts = record_fields(item.record, premise_field, hypothesis_field, lang_field,
                              question_field)
    except BadRecord as error:
        item.error = str(error)
        return None
    return Example(item.row, *texts)


def _windows_to_score(rows: Iterator[InputRow], partial: PartialFile, window_size: int,
                      fields: Mapping[str, Optional[str]],
                      note_bad: Callable[[InputRow], None]) -> Iterator[list[Example]]:
    """Windows of examples by row number; windows already scored are skipped,
    partly scored ones are returned whole (so their batches are reproduced)."""
    window: list[Example] = []
    window_index, pending = 0, False
    for item in rows:
        if item.row // window_size != window_index:
            if pending:
                yield window
            window, window_index, pending = [], item.row // window_size, False
        example = row_example(item, fields["premise"], fields["hypothesis"], fields["lang"],
                              fields.get("question"))
        if example is not None:
            window.append(example)
            pending |= not partial.is_done(item.row)
        elif not partial.is_done(item.row):
            note_bad(item)
    if pending:
        yield window


def _report_bad(input_path: str, item: InputRow, counts: _Progress) -> None:
    counts.bad_count += 1
    if counts.bad_count <= _LOGGED_BAD_ROWS:
        logger.warning("%s:%s: %s; the row is written with an %r field", input_path, item.lines,
                       item.error, ERROR_FIELD)
    elif counts.bad_count == _LOGGED_BAD_ROWS + 1:
        logger.warning("%s: more bad rows; the rest are counted in the metadata", input_path)


def _float32(value: float) -> float:
    """The float32 score as its shortest decimal (what the model computes;
    more digits would be noise), e.g. 0.00056663575."""
    return float(str(np.float32(value)))


def result_entry(result: ExampleResult, names: Sequence[str],
                 columns: Mapping[str, str]) -> dict:
    """The partial-file entry of a scored example (its row is `result.key`)."""
    entry = {"row": result.key,
             "scores": {columns[n]: _float32(s) for n, s in zip(names, result.scores)},
             "truncated": result.truncated, "chunked": result.chunked}
    if result.sentence_scores is not None:
        entry["sentence_scores"] = {columns[n]: [_float32(v) for v in values]
                                    for n, values in zip(names, result.sentence_scores)}
        entry[SENTENCES_COLUMN] = result.sentences
    return entry


def output_columns(input_columns: Sequence[str], columns: Mapping[str, str],
                   per_sentence: bool, renamed: Optional[Mapping[str, str]] = None,
                   decisions: Optional[Mapping[str, float]] = None) -> list[str]:
    """The output's columns: the input's (renamed where an output column
    has their name; see `renamed_input_fields`), then the score columns, their
    decisions and `error`."""
    renamed = renamed or {}
    added = list(columns.values())
    added += [column + DECISION_SUFFIX for column in columns.values() if column in (decisions or {})]
    if per_sentence:
        added += [f"{c}_sentences" for c in columns.values()] + [SENTENCES_COLUMN]
    added.append(ERROR_FIELD)
    return [renamed.get(c, c) for c in input_columns if renamed.get(c, c) not in added] + added


def output_record(item: InputRow, entry: dict, renamed: Optional[Mapping[str, str]] = None,
                  decisions: Optional[Mapping[str, float]] = None) -> dict:
    """The output row of an input row and its partial-file entry: the input's
    fields (renamed as `renamed` says) and fresh score (and decision) or
    error fields."""
    record = with_renamed_fields(item.record, renamed or {}) if item.record is not None else {}
    if ERROR_FIELD in entry:
        record[ERROR_FIELD] = entry[ERROR_FIELD]
        return record
    record.update(entry["scores"])
    for column, threshold in (decisions or {}).items():
        record[column + DECISION_SUFFIX] = "yes" if entry["scores"][column] >= threshold else "no"
    for column, values in entry.get("sentence_scores", {}).items():
        record[f"{column}_sentences"] = values
    if SENTENCES_COLUMN in entry:
        record[SENTENCES_COLUMN] = entry[SENTENCES_COLUMN]
    return record


def _finish(scorer, job: ScoringJob, partial: PartialFile, fingerprint: dict,
            stats: ScoringStats, progress: _Progress) -> dict:
    """Writes the output in input order; returns the metadata."""
    totals = {"rows": 0, "scored": 0, "bad": 0, "truncated": 0, "chunked": 0}
    bad_rows = []
    header = output_columns(job.input_columns, job.columns, scorer.settings.per_sentence,
                            job.renamed, job.decisions)

    def write(handle) -> None:
        writer = _OutputWriter(handle, job.output_kind, header)
        for item, entry in zip(job.rows(), partial.entries_in_order()):
            if entry["row"] != item.row:
                raise RuntimeError(f"row {item.row} of {job.input_path} does not match the "
                                   f"partial entry for row {entry['row']}; this is a bug")
            totals["rows"] += 1
            if ERROR_FIELD in entry:
                totals["bad"] += 1
                if len(bad_rows) < _KEPT_BAD_ROWS:
                    bad_rows.append({"row": item.row, "line": item.line,
                                     "first_line": item.first_line, "error": entry[ERROR_FIELD]})
            else:
                totals["scored"] += 1
                totals["truncated"] += int(entry.get("truncated", False))
                totals["chunked"] += int(entry.get("chunked", False))
            writer.write(output_record(item, entry, job.renamed, job.decisions))
        writer.close()

    _write_atomically(job.output_path, write)
    return _metadata(scorer, job, fingerprint, stats, progress, totals, bad_rows)


def _metadata(scorer, job: ScoringJob, fingerprint: dict, stats: ScoringStats,
              progress: _Progress, totals: dict, bad_rows: list) -> dict:
    rate = progress.scored_now / progress.seconds if progress.seconds > 0 else 0.0
    logger.info("%s: %d rows (%d scored, %d bad, %d truncated, %d resumed) -> %s; this run "
                "scored %d rows at %.2f examples/s", job.input_path, totals["rows"],
                totals["scored"], totals["bad"], totals["truncated"], progress.resumed,
                job.output_path, progress.scored_now, rate)
    return {
        "input": os.path.abspath(job.input_path),
        "output": os.path.abspath(job.output_path),
        "columns": dict(job.columns),
        "thresholds": dict(job.decisions),
        "renamed_input_columns": dict(job.renamed),
        "input_table": dict(job.table),
        "rows": dict(totals, resumed=progress.resumed),
        "bad_rows": bad_rows,
        "this_run": {"scored": progress.scored_now, "bad": progress.bad_count,
                     "seconds": round(progress.seconds, 3),
                     "examples_per_second": round(rate, 3), "stats": stats.summary()},
        "settings": scorer.metadata(),
        "fingerprint": fingerprint,
    }
