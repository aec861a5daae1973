"""Resumable scoring of JSONL, CSV and TSV files (`seahorse-metrics score`).

    summary = score_file(multi_scorer, "in.jsonl", "out.jsonl")

The input is streamed: rows are read in windows of `window_size` (by row
number), scored, and each finished batch's rows are appended, with their row
id, to `<output>.partial.jsonl` (flushed per batch, fsynced every few
seconds). A rerun with the same input and settings reads the partial file,
skips every window whose rows are all scored, and re-scores a partly scored
window whole (so its batches, and hence its scores, are bit-identical to an
uninterrupted run) while writing only the missing rows. At the end the output
is written in input order to a temporary file and moved into place, the
metadata goes to `<output>.meta.json`, and the partial file is removed.

Bad rows (invalid JSON, wrong column count, missing/empty/non-text field)
are logged with their line and written with an `error` field, never dropped.
With `question_field`, each row's question (of a query-focused summary) is
part of the input. With `thresholds`, each score column gets a
`<column>_decision` column: `yes` when the score is at or above the metric's
threshold, else `no`.
Memory stays flat: a window of rows, and 8 bytes per row for the index of the
partial file.
"""
from __future__ import annotations

import array
import csv
import dataclasses
import json
import logging
import os
import sys
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.scoring.pipeline import Example, ExampleResult, ScoringStats
from seahorse_metrics.scoring.records import ERROR_FIELD, BadRecord, record_fields

logger = logging.getLogger(__name__)

FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv"}
PARTIAL_SUFFIX = ".partial.jsonl"
META_SUFFIX = ".meta.json"
SENTENCES_COLUMN = "sentences"
DECISION_SUFFIX = "_decision"
_FSYNC_SECONDS = 5.0
_LOGGED_BAD_ROWS = 20
_KEPT_BAD_ROWS = 100


def file_format(path: str) -> str:
    """"jsonl", "csv" or "tsv" from the file extension.

    Raises:
      ValueError: for another extension.
    """
    extension = os.path.splitext(path)[1].lower()
    if extension not in FORMATS:
        raise ValueError(f"{path}: unsupported file type {extension!r}; use one of "
                         f"{sorted(FORMATS)}")
    return FORMATS[extension]


@dataclasses.dataclass
class InputRow:
    """One data row of an input file.

    Attributes:
      row: 0-based index among the data rows (the row id).
      line: 1-based line of the file where the row ends.
      record: The row's fields, or None when the line could not be parsed.
      error: Why the row cannot be scored, or None.
    """

    row: int
    line: int
    record: Optional[dict]
    error: Optional[str] = None


def read_rows(path: str) -> Iterator[InputRow]:
    """Streams the data rows of a JSONL/CSV/TSV file, bad rows included.

    Raises:
      FileNotFoundError: if `path` does not exist.
      ValueError: for an unsupported extension or a CSV without a header.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: input file not found")
    kind = file_format(path)
    if kind == "jsonl":
        yield from _read_jsonl(path)
    else:
        yield from _read_delimited(path, "\t" if kind == "tsv" else ",")


def _read_jsonl(path: str) -> Iterator[InputRow]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        row = 0
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                yield InputRow(row, line_number, None, f"invalid JSON ({error.msg})")
            else:
                if isinstance(record, dict):
                    yield InputRow(row, line_number, record)
                else:
                    yield InputRow(row, line_number, None,
                                   f"expected a JSON object, got {type(record).__name__}")
            row += 1


def _read_delimited(path: str, delimiter: str) -> Iterator[InputRow]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # Articles are long.
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file; expected a header row")
        header = [name.strip() for name in header]
        row = 0
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                yield InputRow(row, reader.line_num, None,
                               f"{len(cells)} columns, the header has {len(header)}")
            else:
                yield InputRow(row, reader.line_num, dict(zip(header, cells)))
            row += 1


def _columns_and_count(path: str) -> tuple[list[str], int]:
    """The input's columns (header, or JSON keys in first-seen order) and rows."""
    columns: dict[str, None] = {}
    count = 0
    for item in read_rows(path):
        count += 1
        if item.record is not None:
            columns.update(dict.fromkeys(item.record))
    return list(columns), count


# ------------------------------------------------------------------ partial
class PartialFile:
    """`<output>.partial.jsonl`: a header line, then one line per finished row.

    Attributes:
      path: The file.
      offsets: Byte offset of each row's line (-1: not finished).
    """

    def __init__(self, path: str, fingerprint: dict, num_rows: int):
        self.path = path
        self.offsets = array.array("q", [-1]) * num_rows
        self._handle = None
        self._last_sync = time.monotonic()
        if os.path.exists(path):
            self._load(fingerprint)
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(json.dumps({"partial": fingerprint}, sort_keys=True) + "\n")
        self._handle = open(path, "ab")

    def _load(self, fingerprint: dict) -> None:
        with open(self.path, "rb") as handle:
            header = _parse_line(handle.readline())
            if not isinstance(header, dict) or header.get("partial") != json.loads(
                    json.dumps(fingerprint, sort_keys=True)):
                raise ValueError(
                    f"{self.path} was written for another input or other settings; rerun with "
                    "the original ones, or pass --overwrite (overwrite=True) to start over")
            good_end = handle.tell()
            while True:
                offset = handle.tell()
                line = handle.readline()
                entry = _parse_line(line) if line.endswith(b"\n") else None
                if entry is None or not 0 <= entry.get("row", -1) < len(self.offsets):
                    break  # End of file, or the torn last line of a killed run.
                self.offsets[entry["row"]] = offset
                good_end = handle.tell()
        if good_end != os.path.getsize(self.path):
            logger.warning("%s: dropping an incomplete last line (the previous run was "
                           "interrupted while writing)", self.path)
            with open(self.path, "r+b") as handle:
                handle.truncate(good_end)

    @property
    def finished(self) -> int:
        """Rows already written."""
        return sum(1 for offset in self.offsets if offset >= 0)

    def is_done(self, row: int) -> bool:
        return self.offsets[row] >= 0

    def append(self, entries: Iterable[dict]) -> int:
        """Appends rows' entries and flushes; returns how many were new."""
        written = 0
        for entry in entries:
            if self.offsets[entry["row"]] >= 0:
                continue
            self.offsets[entry["row"]] = self._handle.tell()
            self._handle.write(json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n")
            written += 1
        self._handle.flush()
        if time.monotonic() - self._last_sync > _FSYNC_SECONDS:
            os.fsync(self._handle.fileno())
            self._last_sync = time.monotonic()
        return written

    def entries_in_order(self) -> Iterator[dict]:
        """Every row's entry, by row id.

        Raises:
          RuntimeError: if a row is missing (a bug).
        """
        if self._handle is not None:
            self._handle.flush()
        with open(self.path, "rb") as handle:
            for row, offset in enumerate(self.offsets):
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
    """Writes output rows as JSONL, CSV or TSV."""

    def __init__(self, handle, kind: str, columns: Sequence[str]):
        self.kind = kind
        self.handle = handle
        self.columns = list(columns)
        if kind != "jsonl":
            self.writer = csv.writer(handle, delimiter="\t" if kind == "tsv" else ",",
                                     lineterminator="\n")
            self.writer.writerow(self.columns)

    def write(self, record: Mapping[str, Any]) -> None:
        if self.kind == "jsonl":
            self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        self.writer.writerow([_cell(record.get(column)) for column in self.columns])


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


def score_file(scorer, input_path: str, output_path: str, *,
               columns: Optional[Mapping[str, str]] = None, premise_field: str = "article",
               hypothesis_field: str = "summary", lang_field: Optional[str] = "lang",
               batch_size: Optional[int] = None, overwrite: bool = False,
               show_progress: Optional[bool] = None, question_field: Optional[str] = None,
               thresholds: Optional[Mapping[str, float]] = None) -> dict:
    """Scores every row of a file with a `MultiScorer`, resumably.

    Args:
      scorer: A `seahorse_metrics.MultiScorer` (or `Scorer.multi`).
      input_path: JSONL, CSV or TSV file with the text fields.
      output_path: JSONL, CSV or TSV file to write: the input rows in input
        order with a score column per metric (and an `error` column).
      columns: metric name -> output column (default: the metric names).
      premise_field, hypothesis_field: Names of the text fields.
      lang_field: Field with a language code (optional; for the counts).
      batch_size: Most rows of a batch (default: the scorer's).
      overwrite: Discard a previous partial run or finished output.
      show_progress: Progress bar with examples/s and ETA (default: on a terminal).
      question_field: Field with the question of a query-focused summary
        (required in every row when given), or None.
      thresholds: metric name -> decision threshold; adds a yes/no
        `<column>_decision` column per metric named.

    Returns:
      The metadata written to `<output>.meta.json`.

    Raises:
      FileNotFoundError: if the input does not exist.
      ValueError: for unsupported file types, a threshold for an unknown
        metric, or a partial/finished output of another input or settings
        (without `overwrite`).
    """
    from tqdm.auto import tqdm

    columns = dict(columns or {name: name for name in scorer.names})
    decisions = decision_thresholds(thresholds, scorer.names, columns)
    output_kind = file_format(output_path)
    file_format(input_path)
    input_columns, num_rows = _columns_and_count(input_path)
    fingerprint = _fingerprint(scorer, input_path, columns, premise_field, hypothesis_field,
                               lang_field, batch_size, question_field, decisions)
    partial_path, meta_path = output_path + PARTIAL_SUFFIX, output_path + META_SUFFIX
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    if _already_done(output_path, partial_path, meta_path, fingerprint, overwrite):
        with open(meta_path, encoding="utf-8") as handle:
            return json.load(handle)
    if overwrite and os.path.exists(partial_path):
        os.remove(partial_path)

    start = time.perf_counter()
    partial = PartialFile(partial_path, fingerprint, num_rows)
    resumed = partial.finished
    if resumed:
        logger.info("%s: resuming, %d of %d rows already scored", partial_path, resumed, num_rows)
    progress_counts = _Progress()
    stats = ScoringStats()
    window_size = scorer.window_size
    try:
        with tqdm(total=num_rows, initial=resumed, desc="scoring", unit="ex", dynamic_ncols=True,
                  disable=(None if show_progress is None else not show_progress)) as bar:
            def note_bad(item: InputRow) -> None:
                _report_bad(input_path, item, progress_counts)
                bar.update(partial.append([{"row": item.row, "line": item.line,
                                            ERROR_FIELD: item.error}]))

            windows = _windows_to_score(read_rows(input_path), partial, window_size,
                                        premise_field, hypothesis_field, lang_field, note_bad,
                                        question_field)
            for group in scorer.run(windows, batch_size, stats):
                entries = [_entry(result, scorer.names, columns) for result in group]
                written = partial.append(entries)
                progress_counts.scored_now += written
                bar.update(written)
    finally:
        partial.close()
    elapsed = time.perf_counter() - start
    stats.log(scorer.settings.max_input_length)
    summary = _finish(scorer, input_path, output_path, output_kind, input_columns, columns,
                      partial, fingerprint, stats, progress_counts, resumed, elapsed, decisions)
    _write_atomically(meta_path, lambda handle: json.dump(summary, handle, indent=2,
                                                          ensure_ascii=False))
    os.remove(partial_path)
    return summary


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


def _fingerprint(scorer, input_path: str, columns: Mapping[str, str], premise_field: str,
                 hypothesis_field: str, lang_field: Optional[str], batch_size: Optional[int],
                 question_field: Optional[str] = None,
                 decisions: Optional[Mapping[str, float]] = None) -> dict:
    """What a partial or finished output must match to be reused."""
    stat = os.stat(input_path)
    return {
        "input": os.path.abspath(input_path),
        "input_bytes": stat.st_size,
        "input_mtime_ns": stat.st_mtime_ns,
        "columns": dict(columns),
        "fields": {"premise": premise_field, "hypothesis": hypothesis_field, "lang": lang_field,
                   "question": question_field},
        "thresholds": dict(decisions or {}),
        "batch_size": int(batch_size or scorer.batch_size),
        "scorer": scorer.metadata(),
    }


def _already_done(output_path: str, partial_path: str, meta_path: str, fingerprint: dict,
                  overwrite: bool) -> bool:
    if overwrite or os.path.exists(partial_path) or not os.path.exists(output_path):
        return False
    previous = None
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as handle:
            previous = json.load(handle).get("fingerprint")
    if previous == json.loads(json.dumps(fingerprint)):
        logger.info("%s is complete for this input and these settings; nothing to do",
                    output_path)
        return True
    raise ValueError(f"{output_path} exists and was not written for this input and these "
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
                      premise_field: str, hypothesis_field: str, lang_field: Optional[str],
                      note_bad: Callable[[InputRow], None],
                      question_field: Optional[str] = None) -> Iterator[list[Example]]:
    """Windows of examples by row number; windows already scored are skipped,
    partly scored ones are returned whole (so their batches are reproduced)."""
    window: list[Example] = []
    window_index, pending = 0, False
    for item in rows:
        if item.row // window_size != window_index:
            if pending:
                yield window
            window, window_index, pending = [], item.row // window_size, False
        example = row_example(item, premise_field, hypothesis_field, lang_field,
                              question_field)
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
        logger.warning("%s:%d: %s; the row is written with an %r field", input_path, item.line,
                       item.error, ERROR_FIELD)
    elif counts.bad_count == _LOGGED_BAD_ROWS + 1:
        logger.warning("%s: more bad rows; the rest are counted in the metadata", input_path)


def _float32(value: float) -> float:
    """The float32 score as its shortest decimal (what the model computes;
    more digits would be noise), e.g. 0.00056663575."""
    return float(str(np.float32(value)))


def _entry(result: ExampleResult, names: Sequence[str], columns: Mapping[str, str]) -> dict:
    entry = {"row": result.key,
             "scores": {columns[n]: _float32(s) for n, s in zip(names, result.scores)},
             "truncated": result.truncated, "chunked": result.chunked}
    if result.sentence_scores is not None:
        entry["sentence_scores"] = {columns[n]: [_float32(v) for v in values]
                                    for n, values in zip(names, result.sentence_scores)}
        entry[SENTENCES_COLUMN] = result.sentences
    return entry


def _output_columns(input_columns: Sequence[str], columns: Mapping[str, str],
                    per_sentence: bool,
                    decisions: Optional[Mapping[str, float]] = None) -> list[str]:
    added = list(columns.values())
    added += [column + DECISION_SUFFIX for column in columns.values() if column in (decisions or {})]
    if per_sentence:
        added += [f"{c}_sentences" for c in columns.values()] + [SENTENCES_COLUMN]
    added.append(ERROR_FIELD)
    return [c for c in input_columns if c not in added] + added


def _output_record(item: InputRow, entry: dict,
                   decisions: Optional[Mapping[str, float]] = None) -> dict:
    record = dict(item.record) if item.record is not None else {}
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


def _finish(scorer, input_path: str, output_path: str, output_kind: str,
            input_columns: Sequence[str], columns: Mapping[str, str], partial: PartialFile,
            fingerprint: dict, stats: ScoringStats, counts: _Progress, resumed: int,
            elapsed: float, decisions: Optional[Mapping[str, float]] = None) -> dict:
    """Writes the output in input order; returns the metadata."""
    totals = {"rows": 0, "scored": 0, "bad": 0, "truncated": 0, "chunked": 0}
    bad_rows = []
    header = _output_columns(input_columns, columns, scorer.settings.per_sentence, decisions)

    def write(handle) -> None:
        writer = _OutputWriter(handle, output_kind, header)
        for item, entry in zip(read_rows(input_path), partial.entries_in_order()):
            if entry["row"] != item.row:
                raise RuntimeError(f"row {item.row} of {input_path} does not match the partial "
                                   f"entry for row {entry['row']}; this is a bug")
            totals["rows"] += 1
            if ERROR_FIELD in entry:
                totals["bad"] += 1
                if len(bad_rows) < _KEPT_BAD_ROWS:
                    bad_rows.append({"row": item.row, "line": item.line,
                                     "error": entry[ERROR_FIELD]})
            else:
                totals["scored"] += 1
                totals["truncated"] += int(entry.get("truncated", False))
                totals["chunked"] += int(entry.get("chunked", False))
            writer.write(_output_record(item, entry, decisions))

    _write_atomically(output_path, write)
    rate = counts.scored_now / elapsed if elapsed > 0 else 0.0
    logger.info("%s: %d rows (%d scored, %d bad, %d truncated, %d resumed) -> %s; this run "
                "scored %d rows at %.2f examples/s", input_path, totals["rows"], totals["scored"],
                totals["bad"], totals["truncated"], resumed, output_path, counts.scored_now, rate)
    return {
        "input": os.path.abspath(input_path),
        "output": os.path.abspath(output_path),
        "columns": dict(columns),
        "rows": dict(totals, resumed=resumed),
        "bad_rows": bad_rows,
        "this_run": {"scored": counts.scored_now, "bad": counts.bad_count,
                     "seconds": round(elapsed, 3), "examples_per_second": round(rate, 3),
                     "stats": stats.summary()},
        "settings": scorer.metadata(),
        "fingerprint": fingerprint,
    }
