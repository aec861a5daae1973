"""The Beam transforms of the scoring pipeline (`seahorse_metrics.scoring.beam` runs them).

    inputs -> ReadWindows -> RunInference(MultiScorerHandler) -> WriteWindow -> TotalsFn

`ReadWindows` reads each input file with `score`'s reader and cuts it into
windows by the one rule of `rows.window_rows`; `MultiScorerHandler` loads a
`MultiScorer` once per worker from the job's `ScoringOptions` and scores a
window whole (`rows.score_windows`); `WriteWindow` writes the window's shard
and counts (`output` rows, `job.RowCounts`); `TotalsFn` adds every window's
counts up with their `merge`.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import time
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference

from seahorse_metrics import parent_watch
from seahorse_metrics.option_names import option
from seahorse_metrics.scoring import files, shards
from seahorse_metrics.scoring import job as job_lib
from seahorse_metrics.scoring.job import ScoringJob
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.output import OutputWriter
from seahorse_metrics.scoring.rows import InputRow, score_windows, window_rows
from seahorse_metrics.scoring.shards import COUNTS_SUFFIX, TOTALS_FILE
from seahorse_metrics.scoring.window_scoring import ScoringStats

logger = logging.getLogger(__name__)

ROW_ID_FIELD = "row_id"
METRICS_NAMESPACE = "seahorse_metrics"


# ------------------------------------------------------------------ windows
@dataclasses.dataclass
class Window:
    """Consecutive rows of one input file, scored together.

    Attributes:
      file_index: The file's index in `ScoringJob.inputs`.
      index: Its window number (`rows.window_index`).
      path: The input file.
      rows: Its rows, bad ones included, in input order.
    """

    file_index: int
    index: int
    path: str
    rows: list[InputRow]


@dataclasses.dataclass
class WindowScores:
    """What RunInference returns for a window.

    Attributes:
      entries: Row id -> the row's entry (scores, or an `error`).
      stats: Truncation and batching counts.
      seconds: Scoring time.
      settings: The scorer's `metadata()`.
    """

    entries: dict[int, dict]
    stats: ScoringStats
    seconds: float
    settings: dict


# ------------------------------------------------------------------ reading
class ReadWindows(beam.DoFn):
    """(file index, path) -> the file's windows to score; as tagged outputs,
    the windows a previous run wrote (`DONE`) and the file's row and window
    counts, or the error that stopped its reading (`TOTALS`)."""

    DONE = "done"
    TOTALS = "totals"
    IDS = "ids"  # with id_field: (id, "file:line") of every row that has one

    def __init__(self, job: ScoringJob):
        self.job = job
        self.launcher = parent_watch.launcher_identity()

    def setup(self):
        parent_watch.follow_parent(*self.launcher)

    def process(self, element):  # (file index, path); no hints: Beam would parse them
        file_index, path = element
        done = shards.written_windows(self.job, file_index)
        rows = windows = 0
        with shards.local_copy(path) as local:
            try:
                for items in window_rows(
                    files.read_rows(local, self.job.encoding, self.job.quoting),
                    self.job.window_size,
                ):
                    self._check_ids(path, items)
                    yield from self._ids(path, items)
                    index = items[0].row // self.job.window_size
                    rows, windows = rows + len(items), windows + 1
                    if index in done:
                        yield beam.pvalue.TaggedOutput(self.DONE, (file_index, index))
                    else:
                        yield Window(file_index, index, path, items)
            except (ValueError, FileNotFoundError) as error:
                logger.error("%s", error)
                yield beam.pvalue.TaggedOutput(
                    self.TOTALS,
                    {"kind": "fatal", "file": file_index, "error": str(error).replace(local, path)},
                )
                return
        logger.info("%s: %d rows in %d windows, %d written before", path, rows, windows, len(done))
        yield beam.pvalue.TaggedOutput(
            self.TOTALS, {"kind": "file", "file": file_index, "rows": rows, "windows": windows}
        )

    def _ids(self, path: str, items: Sequence[InputRow]) -> Iterator[Any]:
        if not self.job.id_field:
            return
        for item in items:
            value = (item.record or {}).get(self.job.id_field)
            if not _blank(value):
                yield beam.pvalue.TaggedOutput(self.IDS, (str(value), f"{path}:{item.line}"))

    def _check_ids(self, path: str, items: Sequence[InputRow]) -> None:
        if self.job.id_field == ROW_ID_FIELD:
            return
        for item in items:
            if item.record is not None and ROW_ID_FIELD in item.record:
                raise ValueError(
                    f"{path}:{item.line}: the input has a {ROW_ID_FIELD!r} field, which the "
                    f"pipeline adds; pass "
                    f"{option(f'id_field={ROW_ID_FIELD!r}', f'--id_field {ROW_ID_FIELD}')} to "
                    "use it as the rows' id"
                )


# ------------------------------------------------------------------ scoring
class MultiScorerHandler(ModelHandler):
    """RunInference's model handler: `Window`s in, `WindowScores` out.

    `load_model` loads the job's checkpoints as one `MultiScorer` with the
    job's `ScoringOptions`, once per worker; each window is scored whole, in
    its length buckets. A worker process that the launcher started on its
    own machine (DirectRunner's multi_processing mode) stops soon after the
    launcher is gone (`seahorse_metrics.parent_watch`), killed or terminated.
    """

    def __init__(self, job: ScoringJob):
        # A window is already a batch: RunInference hands them over one by one.
        super().__init__(min_batch_size=1, max_batch_size=1)
        self.job = job
        self.launcher = parent_watch.launcher_identity()

    def load_model(self):
        from seahorse_metrics.scoring.scorer import MultiScorer

        parent_watch.follow_parent(*self.launcher)

        options = self.job.options
        if options.vocab:
            options = ScoringOptions.of(options, vocab=shards.staged(options.vocab))
        checkpoints = {name: shards.staged(path) for name, path in self.job.checkpoints.items()}
        return MultiScorer.load(checkpoints, options=options)

    def run_inference(
        self, batch: Sequence[Window], model, inference_args: Optional[dict] = None
    ) -> list[PredictionResult]:
        return [PredictionResult(window, score_window(model, window, self.job)) for window in batch]

    def get_num_bytes(self, batch: Sequence[Window]) -> int:
        """The characters of the windows' text fields (Beam's default pickles the batch)."""
        return sum(
            len(value)
            for window in batch
            for item in window.rows
            for value in (item.record or {}).values()
            if isinstance(value, str)
        )

    def get_metrics_namespace(self) -> str:
        return METRICS_NAMESPACE


def score_window(scorer, window: Window, job: ScoringJob) -> WindowScores:
    """Scores a window's rows with a `MultiScorer` as `score` scores a window."""
    stats = ScoringStats()
    start = time.perf_counter()
    entries = {}
    for group in score_windows(
        scorer,
        [window.rows],
        job.fields,
        job.columns,
        stats=stats,
        check=functools.partial(_missing_id, job),
    ):
        entries.update((item.row, entry) for item, entry in group)
    return WindowScores(entries, stats, time.perf_counter() - start, scorer.metadata())


def _missing_id(job: ScoringJob, item: InputRow) -> Optional[str]:
    if job.id_field and _blank(item.record.get(job.id_field)):
        return f"missing field {job.id_field!r} (the rows' id)"
    return None


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


# ------------------------------------------------------------------ writing
class WriteWindow(beam.DoFn):
    """Writes a scored window's shard (and its counts); yields the counts."""

    def __init__(self, job: ScoringJob):
        self.job = job
        self.counters = {
            name: Metrics.counter(METRICS_NAMESPACE, name)
            for name in ("rows", "scored", "errors", "truncated", "chunked")
        }
        self.rate = Metrics.distribution(METRICS_NAMESPACE, "examples_per_second")

    def process(self, prediction):  # PredictionResult(Window, WindowScores)
        window, scores = prediction.example, prediction.inference
        text, counts = render_window(window, scores, self.job)
        # The counts go first: a shard that exists always has its counts.
        shards.write_bytes(
            shards.shard_path(self.job, window.file_index, window.index, COUNTS_SUFFIX),
            json.dumps(counts, ensure_ascii=False).encode("utf-8"),
        )
        shards.write_bytes(
            shards.shard_path(self.job, window.file_index, window.index), text.encode("utf-8")
        )
        for name, key in (
            ("rows", "rows"),
            ("scored", "scored"),
            ("errors", "bad"),
            ("truncated", "truncated"),
            ("chunked", "chunked"),
        ):
            self.counters[name].inc(counts[key])
        if counts["scored"] and scores.seconds > 0:
            self.rate.update(int(round(counts["scored"] / scores.seconds)))
        logger.info(
            "%s window %d: %d rows (%d bad) in %.2f s",
            window.path,
            window.index,
            counts["rows"],
            counts["bad"],
            scores.seconds,
        )
        yield counts


def render_window(window: Window, scores: WindowScores, job: ScoringJob) -> tuple[str, dict]:
    """The window's shard text (its rows as `score` writes them, with a row id)
    and its counts."""
    counts, bad_log = job_lib.RowCounts(), job_lib.BadRowLog()
    records, input_columns, renamed_here = [], {}, {}
    fields = job.output_fields
    for item in window.rows:
        entry = scores.entries[item.row]
        counts.add(entry, item, window.path, window.file_index)
        if "scores" not in entry:
            bad_log.note(window.path, item, entry["error"])
        record = _with_row_id(item, window.path, job)
        # Output fields are written fresh: input fields of those names are renamed, as in score.
        renamed = fields.renamed(record)
        renamed_here.update(renamed)
        input_columns.update(dict.fromkeys(renamed.get(c, c) for c in record))
        records.append(fields.record(record, entry, renamed))
    buffer = io.StringIO()
    writer = OutputWriter(buffer, job.output_kind, fields.header(list(input_columns)))
    for record in records:
        writer.write(record)
    return buffer.getvalue(), {
        "kind": "window",
        "file": window.file_index,
        "window": window.index,
        **counts.to_dict(),
        "stats": scores.stats.to_dict(),
        "seconds": scores.seconds,
        "settings": scores.settings,
        "renamed": renamed_here,
    }


def _with_row_id(item: InputRow, path: str, job: ScoringJob) -> dict:
    record = dict(item.record) if item.record is not None else {}
    if not (job.id_field and not _blank(record.get(job.id_field))):
        record[ROW_ID_FIELD] = f"{path}:{item.line}"
    return record


class ReadCounts(beam.DoFn):
    """(file index, window) of a window written before -> its counts."""

    def __init__(self, job: ScoringJob):
        self.job = job
        self.resumed = Metrics.counter(METRICS_NAMESPACE, "resumed_rows")

    def process(self, key):  # (file index, window)
        counts = shards.read_json(shards.shard_path(self.job, *key, COUNTS_SUFFIX))
        self.resumed.inc(counts["rows"])
        yield dict(counts, resumed=True)


# ------------------------------------------------------------------ counts
class TotalsFn(beam.CombineFn):
    """Adds up the counts of the files and windows (written now or before):
    `RowCounts` and `ScoringStats`, each with its `merge`."""

    def create_accumulator(self) -> dict:
        return {
            "counts": job_lib.RowCounts().to_dict(),
            "scored_now": 0,
            "seconds": 0.0,
            "files": {},
            "stats": ScoringStats().to_dict(),
            "settings": None,
            "fatal": [],
            "renamed": {},
        }

    def add_input(self, totals: dict, counts: Mapping[str, Any]) -> dict:
        if counts["kind"] == "fatal":
            totals["fatal"].append(counts)
            return totals
        entry = totals["files"].setdefault(
            str(counts["file"]), {"rows": 0, "windows": 0, "written_rows": 0, "written_windows": 0}
        )
        if counts["kind"] == "file":
            entry["rows"] += counts["rows"]
            entry["windows"] += counts["windows"]
            return totals
        entry["written_rows"] += counts["rows"]
        entry["written_windows"] += 1
        window = job_lib.RowCounts.from_dict(counts)
        window.resumed = window.rows if counts.get("resumed") else 0
        if not counts.get("resumed"):
            totals["scored_now"] += counts["scored"]
            totals["seconds"] += counts["seconds"]
        totals["counts"] = job_lib.RowCounts.from_dict(totals["counts"]).merge(window).to_dict()
        totals["stats"] = (
            ScoringStats.from_dict(totals["stats"])
            .merge(ScoringStats.from_dict(counts["stats"]))
            .to_dict()
        )
        totals["settings"] = totals["settings"] or counts["settings"]
        totals["renamed"].update(counts.get("renamed") or {})  # Windows written before lack it.
        return totals

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        accumulators = list(accumulators)
        merged = accumulators[0]
        for other in accumulators[1:]:
            merged["scored_now"] += other["scored_now"]
            merged["seconds"] += other["seconds"]
            for key, entry in other["files"].items():
                mine = merged["files"].setdefault(key, dict.fromkeys(entry, 0))
                for name, value in entry.items():
                    mine[name] += value
            merged["counts"] = (
                job_lib.RowCounts.from_dict(merged["counts"])
                .merge(job_lib.RowCounts.from_dict(other["counts"]))
                .to_dict()
            )
            merged["stats"] = (
                ScoringStats.from_dict(merged["stats"])
                .merge(ScoringStats.from_dict(other["stats"]))
                .to_dict()
            )
            merged["settings"] = merged["settings"] or other["settings"]
            merged["fatal"] += other["fatal"]
            merged["renamed"].update(other["renamed"])
        return merged

    def extract_output(self, totals: dict) -> dict:
        return totals


def duplicate_id(grouped: tuple[str, Iterable[str]], id_field: str) -> Iterator[dict]:
    """A fatal error for an id that several rows carry (`evaluate` refuses those scores)."""
    value, places = grouped
    places = sorted(places)
    if len(places) > 1:
        shown = ", ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3 else "")
        yield {
            "kind": "fatal",
            "file": None,  # about rows of any file
            "error": f"--id_field {id_field!r}: {len(places)} rows have the id {value!r} "
            f"({shown}); evaluate refuses scores with duplicate ids: give every row "
            "its own id",
        }


# ------------------------------------------------------------------ pipeline
def build_pipeline(pipeline: beam.Pipeline, job: ScoringJob, handler: ModelHandler) -> None:
    """Adds the scoring of `job` to `pipeline` (see the module docstring)."""
    read = (
        pipeline
        | "Inputs" >> beam.Create(list(enumerate(job.inputs)))
        | "SpreadFiles" >> beam.Reshuffle()
        | "Read"
        >> beam.ParDo(ReadWindows(job)).with_outputs(
            ReadWindows.DONE, ReadWindows.TOTALS, ReadWindows.IDS, main="windows"
        )
    )
    written = (
        read.windows
        | "SpreadWindows" >> beam.Reshuffle()
        | "Score" >> RunInference(handler)
        | "Write" >> beam.ParDo(WriteWindow(job))
    )
    resumed = read[ReadWindows.DONE] | "ReadCounts" >> beam.ParDo(ReadCounts(job))
    counts = [written, resumed, read[ReadWindows.TOTALS]]
    if job.id_field:
        counts.append(
            read[ReadWindows.IDS]
            | "GroupIds" >> beam.GroupByKey()
            | "DuplicateIds" >> beam.FlatMap(duplicate_id, job.id_field)
        )
    _ = (
        tuple(counts)
        | "AllCounts" >> beam.Flatten()
        | "Totals" >> beam.CombineGlobally(TotalsFn())
        | "TotalsJson" >> beam.Map(json.dumps)
        | "WriteTotals"
        >> beam.io.WriteToText(
            shards.FileSystems.join(shards.shards_dir(job), TOTALS_FILE), shard_name_template=""
        )
    )
