"""Resumable scoring of JSONL, JSON, CSV and TSV files (`seahorse-metrics score`).

    summary = score_file(multi_scorer, "in.jsonl", "out.jsonl")

The in-process runner of a `seahorse_metrics.scoring.job.ScoringJob`: what is
scored, its fingerprint, metadata and row counts are the job's; rows are
scored by `seahorse_metrics.scoring.rows` (windows of `window_size` rows by
row number) and written by `seahorse_metrics.scoring.output`. This module
adds the lock and the resume.

The input is read once, by `seahorse_metrics.data.tables` (every line
accounted for; TSVs unquoted unless quoted; undecodable text stops the run
with its line), and streamed: the premise, hypothesis and question columns
are checked before the first window is scored (a CSV/TSV's header, a JSON
input's first window), and each finished batch's rows are appended, with
their row id and the input row, to `<output>.partial.jsonl`
(`scoring.partial`; flushed per batch, fsynced every few seconds). A rerun
with the same input, settings and checkpoint content reads the partial file
record by record, skips every window whose rows are all scored, and
re-scores a partly scored window whole (so its batches, and hence its
scores, are bit-identical to an uninterrupted run) while writing only the
missing rows. At the end the output is written in input order from the
partial file to a temporary file and moved into place, the metadata goes to
`<output>.meta.json`, and the partial file is removed. While a run works on
an output it holds an exclusive lock (`<output>.lock`); a second run on the
same output refuses, naming the first one's process.

Bad rows (invalid JSON, wrong column count, missing/empty/non-text field)
are logged with their line and written with an `error` field, never dropped.
Memory stays flat: a window of rows, and 9 bytes per row for the index of
the partial file. `score_table` is the `score` command's one call: it loads
the metrics, reads the threshold and calibration files, and scores.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import time
from typing import Any, Iterator, Mapping, Optional

from seahorse_metrics.data import tables
from seahorse_metrics.io.atomic import write_atomically, write_json_atomically
from seahorse_metrics.io.locks import OutputLock
from seahorse_metrics.option_names import option
from seahorse_metrics.scoring import job as job_lib
from seahorse_metrics.scoring.job import InputFields, ScoringJob
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.output import ERROR_FIELD, OutputWriter
from seahorse_metrics.scoring.partial import PARTIAL_SUFFIX, PartialFile, row_of
from seahorse_metrics.scoring.rows import InputRow, score_windows, window_rows
from seahorse_metrics.scoring.window_scoring import ScoringStats

logger = logging.getLogger(__name__)

FORMATS = tables.TEXT_FORMATS


def file_format(path: str) -> str:
    """ "jsonl", "json", "csv" or "tsv" from the file extension.

    Raises:
      ValueError: for another extension.
    """
    return tables.table_kind(path)


def read_rows(
    path: str,
    encoding: str = "utf-8",
    quoting: str = "auto",
    report: Optional[tables.TableReport] = None,
) -> Iterator[InputRow]:
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
    """What the read of the input found.

    Attributes:
      columns: The input's columns (header, or JSON keys in order).
      num_rows: Data rows.
      table: The input's line counts (`TableReport.summary()`).
      renamed: Input columns renamed because an output column has their name.
    """

    columns: list
    num_rows: int
    table: Mapping[str, Any]
    renamed: Mapping[str, str]


class InputPass:
    """The one read of a job's input: its rows as they are scored, then what
    the read found (`scan`).

    The premise, hypothesis and question columns are checked before the
    first window is scored: a CSV/TSV's header, or a JSON input's first
    window of rows.
    """

    def __init__(self, job: ScoringJob):
        self.job = job
        self.path = job.inputs[0]
        self.report = tables.TableReport(self.path, "")
        self.columns: dict[str, None] = {}
        self._checked = False
        # The size on disk stands for the bytes to read (unknown for a gzipped input).
        self._size = None if self.path.endswith(".gz") else os.path.getsize(self.path)

    def rows(self) -> Iterator[InputRow]:
        """Every row of the input (bad ones included), read once."""
        for item in read_rows(self.path, self.job.encoding, self.job.quoting, self.report):
            if item.record is not None:
                self.columns.update(dict.fromkeys(item.record))
            if not self._checked and (
                self.report.header is not None or item.row == self.job.window_size - 1
            ):
                self._check_columns()
            yield item
        if not self._checked:
            self._check_columns()

    def _check_columns(self) -> None:
        self._checked = True
        if self.report.rows == 0:
            raise ValueError(f"{self.path}: no data rows; nothing to score")
        header = self.report.header
        columns = self.columns if header is None else dict.fromkeys(header)
        fields = self.job.fields
        missing = [
            name
            for name in (fields.premise, fields.hypothesis, fields.question)
            if name and name not in columns
        ]
        if not missing:
            return
        where = (
            "column"
            if header is not None
            else (
                "field in any row"
                if self.report.rows < self.job.window_size
                else f"field in any of the first {self.report.rows} rows"
            )
        )
        raise ValueError(
            f"{self.path}: no {' or '.join(map(repr, missing))} {where} (columns: "
            f"{', '.join(columns) or 'none'}); name the article and summary columns with "
            f"{option('premise_field', '--premise_field')} and "
            f"{option('hypothesis_field', '--hypothesis_field')}, and the question column with "
            f"{option('question_field', '--question_field')}"
        )

    def estimated_rows(self) -> Optional[int]:
        """The input's rows as far as the bytes read so far tell (None for a
        gzipped input, or before anything is read)."""
        if self._size is None or not self.report.bytes_read:
            return None
        fraction = min(1.0, self.report.bytes_read / max(1, self._size))
        return max(self.report.rows, round(self.report.rows / fraction))

    def scan(self) -> InputScan:
        """What the read found, once every row is read; logs the line counts."""
        self.report.log()
        columns = list(self.columns if self.report.header is None else self.report.header)
        renamed = self.job.output_fields.renamed(columns)
        if renamed:
            logger.warning(
                "%s already has the column(s) %s that this run writes; the input's "
                "values are kept as %s",
                self.path,
                ", ".join(renamed),
                ", ".join(renamed.values()),
            )
        return InputScan(columns, self.report.rows, self.report.summary(), renamed)


# ------------------------------------------------------------------ scoring
@dataclasses.dataclass
class _Progress:
    """Counts of this run, for the log and the metadata."""

    bad_count: int = 0
    scored_now: int = 0
    resumed: int = 0
    seconds: float = 0.0


def score_table(
    checkpoints,
    input_path: str,
    output_path: str,
    *,
    options: Optional[ScoringOptions] = None,
    fields: Optional[Mapping[str, Optional[str]]] = None,
    threshold: Optional[str] = None,
    calibration: Optional[str] = None,
    mesh: Optional[str] = None,
    encoding: str = "utf-8",
    quoting: str = "auto",
    overwrite: bool = False,
    show_progress: Optional[bool] = None,
) -> dict:
    """Loads the metrics and scores one table, as `seahorse-metrics score` does.

    Args:
      checkpoints: `[NAME=]DIR` specs or hub ids (`checkpoints.layout.checkpoint_names`).
      input_path, output_path: As `score_file`.
      options: How pairs are scored.
      fields: The input fields (`job.InputFields.of`).
      threshold: A number for every metric, or a thresholds file by metric
        name (`calibration.thresholds.read_decision_thresholds`).
      calibration: A calibration file with a map for every metric.
      mesh: A device mesh, or a spec such as "data=2,model=4" (`MultiScorer.load`).
      encoding, quoting, overwrite, show_progress: As `score_file`.

    Returns:
      The run's metadata (`job.run_metadata`).

    Raises:
      NothingScoredError: when the input has rows and none could be scored.
      And what `resolve_job`, `MultiScorer.load` and `score_job` raise.
    """
    from seahorse_metrics.scoring.scorer import MultiScorer

    resolve = functools.partial(
        job_lib.resolve_job,
        [input_path],
        output_path,
        fields=fields,
        thresholds=threshold,
        calibration=calibration,
        encoding=encoding,
        quoting=quoting,
    )
    # Every file and setting is checked before a model is loaded.
    tables.check_table_file(input_path, option("input_path", "--input"))
    job = resolve(checkpoints, options=options)
    scorer = MultiScorer.load(job.checkpoints, options=job.options, mesh=mesh)
    # Again with the checkpoints as loaded (hub ids resolved to their directories, whose
    # questions.json gives a multi-question metric's columns) and the options in force.
    job = resolve(scorer.checkpoints, options=scorer.options)
    summary = score_job(scorer, job, overwrite=overwrite, show_progress=show_progress)
    job_lib.finish_run(summary, output_path)
    return summary


def score_file(
    scorer,
    input_path: str,
    output_path: str,
    *,
    columns: Optional[Mapping[str, str]] = None,
    premise_field: str = "article",
    hypothesis_field: str = "summary",
    lang_field: Optional[str] = "lang",
    batch_size: Optional[int] = None,
    overwrite: bool = False,
    show_progress: Optional[bool] = None,
    encoding: str = "utf-8",
    quoting: str = "auto",
    question_field: Optional[str] = None,
    thresholds: Optional[Mapping[str, float]] = None,
    calibration: Optional[Mapping[str, Any]] = None,
) -> dict:
    """Scores every row of a file with a `MultiScorer`, resumably.

    Args:
      scorer: A `seahorse_metrics.MultiScorer` (or `Scorer.multi`).
      input_path: JSONL, JSON, CSV or TSV file with the text fields.
      output_path: JSONL, JSON, CSV or TSV file to write: the input rows in
        input order with a score column per metric (and an `error` column).
      columns: metric name -> output column (default: the metric names).
      premise_field, hypothesis_field, lang_field, question_field: Names of the text fields, of
        a field with a language code (optional; for the counts) and of one with the question of
        a query-focused summary (required in every row when given), or None.
      batch_size: Most rows of a batch (default: the scorer's).
      overwrite: Discard a previous partial run or finished output.
      show_progress: Progress bar with examples/s and ETA (default: on a terminal).
      encoding, quoting: The input's text encoding (default UTF-8), and "auto",
        "none" or "quoted" for a CSV/TSV input (see `seahorse_metrics.data.tables`).
      thresholds, calibration: metric name -> decision threshold / `maps.CalibrationMap`: a
        yes/no `<column>_decision` / `<column>_calibrated` column per metric named (row by row).

    Returns:
      The metadata written to `<output>.meta.json` (`job.run_metadata`).

    Raises:
      FileNotFoundError: if the input does not exist.
      ValueError: for unsupported file types, an output that is the input, an input without rows
        or without the text columns, undecodable text, a threshold for an unknown metric, or a
        partial/finished output of another input, settings or checkpoint content (no `overwrite`).
      OutputInUseError: while another run writes the same output.
    """
    job = job_lib.resolve_job(
        [input_path],
        output_path,
        {name: scorer.checkpoints.get(name) for name in scorer.names},
        options=_with_batch_size(scorer.options, batch_size),
        columns=columns,
        fields=InputFields(premise_field, hypothesis_field, lang_field, question_field),
        thresholds=thresholds,
        calibration=calibration,
        encoding=encoding,
        quoting=quoting,
    )
    return score_job(scorer, job, overwrite=overwrite, show_progress=show_progress)


def _with_batch_size(options: ScoringOptions, batch_size: Optional[int]) -> ScoringOptions:
    """`options`, with `batch_size` rows per batch unless it is None."""
    if batch_size is None:
        return options
    return ScoringOptions.of(options, batch_size=int(batch_size))


def score_job(
    scorer, job: ScoringJob, *, overwrite: bool = False, show_progress: Optional[bool] = None
) -> dict:
    """Scores a one-input `ScoringJob` with a loaded `MultiScorer` (see `score_file`)."""
    tables.check_table_file(job.inputs[0], option("input_path", "--input"))
    fingerprint = job_lib.job_fingerprint(
        job, [job_lib.local_input_stat(job.inputs[0])], scorer.metadata()
    )
    with OutputLock(job.output):
        if _already_done(job, fingerprint, overwrite):
            return job_lib.read_metadata(job.meta_path)
        return _run_job(scorer, job, fingerprint, overwrite, show_progress)


def _partial_path(job: ScoringJob) -> str:
    return job.output + PARTIAL_SUFFIX


def _run_job(
    scorer, job: ScoringJob, fingerprint: dict, overwrite: bool, show_progress: Optional[bool]
) -> dict:
    """Scores what the partial file lacks, writes the output and the metadata."""
    partial_path = _partial_path(job)
    if overwrite and os.path.exists(partial_path):
        os.remove(partial_path)
    partial = PartialFile(partial_path, fingerprint)
    reading = InputPass(job)
    try:
        stats, progress = _score_missing_rows(scorer, job, reading, partial, show_progress)
    except ValueError:
        if not partial.finished:  # The input was refused before anything was scored.
            partial.close()
            os.remove(partial_path)
        raise
    finally:
        partial.close()
    scan = reading.scan()
    stats.log(scorer.settings.max_input_length)
    summary = _finish(scorer, job, scan, partial, fingerprint, stats, progress)
    write_json_atomically(job.meta_path, summary)
    os.remove(partial_path)
    return summary


def _score_missing_rows(
    scorer, job: ScoringJob, reading: InputPass, partial: PartialFile, show_progress: Optional[bool]
):
    """Scores the rows the partial file lacks; returns (stats, progress)."""
    from tqdm.auto import tqdm

    progress = _Progress(resumed=partial.finished)
    if progress.resumed:
        logger.info("%s: resuming, %d rows already scored", partial.path, progress.resumed)
    stats, start, bad_log = ScoringStats(), time.perf_counter(), job_lib.BadRowLog()
    windows = (
        window
        for window in window_rows(reading.rows(), job.window_size)
        if not all(partial.is_done(item.row) for item in window)
    )
    with tqdm(
        total=None,
        initial=progress.resumed,
        desc="scoring",
        unit="ex",
        dynamic_ncols=True,
        disable=(None if show_progress is None else not show_progress),
    ) as bar:
        for group in score_windows(
            scorer, windows, job.fields, job.columns, batch_size=job.options.batch_size, stats=stats
        ):
            fresh = [(item, entry) for item, entry in group if not partial.is_done(item.row)]
            for item, entry in fresh:
                if ERROR_FIELD in entry:
                    bad_log.note(job.inputs[0], item, entry[ERROR_FIELD])
            progress.bad_count = bad_log.count
            progress.scored_now += sum(ERROR_FIELD not in entry for _, entry in fresh)
            bar.total = reading.estimated_rows()
            bar.update(partial.append(fresh))
    progress.seconds = time.perf_counter() - start
    return stats, progress


def _already_done(job: ScoringJob, fingerprint: dict, overwrite: bool) -> bool:
    if overwrite or os.path.exists(_partial_path(job)) or not os.path.exists(job.output):
        return False
    meta = job_lib.read_metadata(job.meta_path)
    previous = meta.get("fingerprint") if meta else None
    if previous == fingerprint:
        logger.info("%s is complete for this input and these settings; nothing to do", job.output)
        return True
    raise job_lib.refuse_other_settings(f"{job.output} exists and", previous)


def _finish(
    scorer,
    job: ScoringJob,
    scan: InputScan,
    partial: PartialFile,
    fingerprint: dict,
    stats: ScoringStats,
    progress: _Progress,
) -> dict:
    """Writes the output in input order from the partial file; returns the metadata."""
    counts = job_lib.RowCounts(resumed=progress.resumed)
    fields = job.output_fields
    header = fields.header(scan.columns, scan.renamed)
    input_path = os.path.abspath(job.inputs[0])

    def write(handle) -> None:
        writer = OutputWriter(handle, job.output_kind, header)
        for entry in partial.entries_in_order(scan.num_rows):
            item = row_of(entry)
            counts.add(entry, item, input_path)
            writer.write(fields.record(item.record, entry, scan.renamed))
        writer.close()

    write_atomically(job.output, write)
    return _metadata(scorer, job, scan, fingerprint, stats, progress, counts)


def _metadata(
    scorer,
    job: ScoringJob,
    scan: InputScan,
    fingerprint: dict,
    stats: ScoringStats,
    progress: _Progress,
    counts: job_lib.RowCounts,
) -> dict:
    rate = progress.scored_now / progress.seconds if progress.seconds > 0 else 0.0
    logger.info(
        "%s: %d rows (%d scored, %d bad, %d truncated, %d resumed) -> %s; this run "
        "scored %d rows at %.2f examples/s",
        job.inputs[0],
        counts.rows,
        counts.scored,
        counts.bad,
        counts.truncated,
        counts.resumed,
        job.output,
        progress.scored_now,
        rate,
    )
    return job_lib.run_metadata(
        job,
        inputs=[
            {
                "path": os.path.abspath(job.inputs[0]),
                "rows": scan.num_rows,
                "windows": math.ceil(scan.num_rows / job.window_size),
            }
        ],
        counts=counts,
        stats=stats.summary(),
        this_run={
            "scored": progress.scored_now,
            "bad": progress.bad_count,
            "seconds": round(progress.seconds, 3),
            "examples_per_second": round(rate, 3),
        },
        settings=scorer.metadata(),
        fingerprint=fingerprint,
        renamed_input_columns=scan.renamed,
        input_table=scan.table,
        merged=os.path.abspath(job.output),
    )
