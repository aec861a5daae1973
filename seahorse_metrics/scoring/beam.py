"""Scoring files beyond one machine: an Apache Beam pipeline (`score --runner ...`).

    from seahorse_metrics.scoring import beam as beam_scoring
    meta = beam_scoring.score_files(
        ["data/part-*.jsonl"], "scores/test.jsonl", {"q4": "ckpt/q4"},
        pipeline_args=["--runner=DirectRunner", "--direct_num_workers=2",
                       "--direct_running_mode=multi_processing"], merge=True)

The pipeline does what `seahorse-metrics score` (`files.score_file`) does, on
the workers a runner gives it (DirectRunner or PrismRunner on one machine;
Dataflow, Flink or Spark clusters):

1. Every input file (JSONL, CSV or TSV; globs; any filesystem Beam reads) is
   read by `files.read_rows`, the reader of `score`, and its rows are cut into
   windows by row number as `score` cuts them.
2. The windows are spread over the workers and scored by RunInference with
   `MultiScorerHandler`: a `MultiScorer` loaded once per worker scores each
   window with its length buckets, so the batches, and so the float32 scores,
   are those of `score`. Rows are checked by `files.row_example`; a row that
   cannot be scored keeps an `error` field and is counted.
3. Each window becomes one shard in the output's format,
   `OUTPUT.shards/FFFFF-WWWWWW.jsonl` (window W of input file F) with its
   counts in `FFFFF-WWWWWW.counts.json`: the window's rows in input order, each
   with its original fields, a `row_id` (`file:line`, or the input's own id
   with `id_field`), the score columns and `error`, written by the same
   functions as `score`'s output.
4. The counts of all windows are combined in the pipeline into
   `OUTPUT.meta.json` (rows, scored, errors, truncated, per input file,
   settings); with `merge`, every row goes to OUTPUT in input order.

Exactly once. A shard is named by its input file and window, and is written
whole under a temporary name, then renamed into place. A bundle that a runner
retries (Dataflow, Flink and Spark do; so does Beam's BundleBasedDirectRunner,
up to four attempts) or runs twice rewrites the same rows under the same
name: no row is duplicated, and every window counts once (the counts flow
through Beam, which keeps one successful attempt's output). Beam's Python
direct runner (the FnApiRunner) and Prism do not retry a failed bundle: the
pipeline fails, keeping the shards written so far, and running the same
command again resumes: finished windows are only counted (from their
`.counts.json`), the others are scored. `OUTPUT.shards/settings.json` makes
sure a resumed run has the same input and settings, as `score` checks its
partial file.
"""
from __future__ import annotations

import atexit
import contextlib
import csv
import dataclasses
import io
import itertools
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from seahorse_metrics.data.inputs import TruncationStats
from seahorse_metrics.scoring import files
from seahorse_metrics.scoring.batching import DEFAULT_WINDOW_SIZE
from seahorse_metrics.scoring.pipeline import Example, ScoringStats
from seahorse_metrics.scoring.records import ERROR_FIELD, renamed_input_fields

logger = logging.getLogger(__name__)

RUNNERS = ("DirectRunner", "PrismRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")
ROW_ID_FIELD = "row_id"
SHARDS_SUFFIX = ".shards"
COUNTS_SUFFIX = ".counts.json"
SETTINGS_FILE = "settings.json"
TOTALS_FILE = "totals.json"
METRICS_NAMESPACE = "seahorse_metrics"
# The input fields, as keyword arguments of `files.row_example`.
DEFAULT_FIELDS = {"premise_field": "article", "hypothesis_field": "summary", "lang_field": "lang",
                  "question_field": None}
_KEPT_BAD_ROWS = 100
_LOGGED_BAD_ROWS = 20
_STATS_COUNTS = ("examples", "model_inputs", "chunked_examples", "real_tokens", "batch_tokens",
                 "batches")
_TRUNCATION_COUNTS = ("count", "truncated", "hypothesis_cut")
_UNCOMPRESSED = CompressionTypes.UNCOMPRESSED


# ------------------------------------------------------------------ the job
@dataclasses.dataclass(frozen=True)
class ScoringJob:
    """What the launcher and the workers know of one scoring run.

    Attributes:
      inputs: The input files in order (globs matched); a window's file
        index points here.
      output: The output path (the merged file); the shards go to
        `output + ".shards"`, the counts to `output + ".meta.json"`.
      checkpoints: Output column -> checkpoint directory.
      scorer_options: Keyword arguments of `MultiScorer.load`.
      fields: Keyword arguments of `files.row_example` naming the fields.
      id_field: Input field with each row's id, or None (`row_id` is `file:line`).
      decisions: Output column -> threshold of its yes/no `<column>_decision`
        column (`score --threshold`); empty for none.
      encoding, quoting: How the inputs are read (`files.read_rows`).
    """

    inputs: tuple[str, ...]
    output: str
    checkpoints: dict
    scorer_options: dict
    fields: dict
    id_field: Optional[str] = None
    decisions: dict = dataclasses.field(default_factory=dict)
    encoding: str = "utf-8"
    quoting: str = "auto"

    @property
    def shards(self) -> str:
        return self.output + SHARDS_SUFFIX

    @property
    def meta_path(self) -> str:
        return self.output + files.META_SUFFIX

    @property
    def kind(self) -> str:
        return files.file_format(self.output)

    @property
    def extension(self) -> str:
        return os.path.splitext(self.output)[1].lower()

    @property
    def window_size(self) -> int:
        return int(self.scorer_options.get("window_size") or DEFAULT_WINDOW_SIZE)

    @property
    def columns(self) -> dict[str, str]:
        """Metric name -> output column (`MultiScorer.load` names the metrics by column)."""
        return {name: name for name in self.checkpoints}

    @property
    def per_sentence(self) -> bool:
        return bool(self.scorer_options.get("per_sentence"))

    def shard_path(self, file_index: int, window: int, suffix: Optional[str] = None) -> str:
        """The shard of window `window` of input `file_index` (or its `suffix` file)."""
        return FileSystems.join(self.shards,
                                f"{file_index:05d}-{window:06d}{suffix or self.extension}")

    def shard_name(self) -> re.Pattern:
        """Matches a shard's file name (not its counts or a temporary file)."""
        return re.compile(r"(\d{5,})-(\d{6,})" + re.escape(self.extension))


@dataclasses.dataclass
class Window:
    """Consecutive rows of one input file, scored together.

    Attributes:
      file_index: The file's index in `ScoringJob.inputs`.
      index: Row number // window size (as `score` cuts windows).
      path: The input file.
      rows: Its rows, bad ones included, in input order.
    """

    file_index: int
    index: int
    path: str
    rows: list[files.InputRow]


@dataclasses.dataclass
class WindowScores:
    """What RunInference returns for a window.

    Attributes:
      entries: Row id -> the row's scores (a `score` partial-file entry).
      errors: Row id -> why the row cannot be scored.
      stats: Truncation and batching counts.
      seconds: Scoring time.
      settings: The scorer's `metadata()`.
    """

    entries: dict[int, dict]
    errors: dict[int, str]
    stats: ScoringStats
    seconds: float
    settings: dict


def plan_job(inputs: Sequence[str], output: str, checkpoints: Mapping[str, str], *,
             scorer_options: Optional[Mapping[str, Any]] = None,
             fields: Optional[Mapping[str, Optional[str]]] = None,
             id_field: Optional[str] = None,
             thresholds: Optional[Mapping[str, float]] = None, encoding: str = "utf-8",
             quoting: str = "auto") -> ScoringJob:
    """Matches the inputs and checks the formats; loads nothing.

    Raises:
      FileNotFoundError: if an input pattern matches no file.
      ValueError: for an unsupported input or output file type, or no checkpoint.
    """
    if not checkpoints:
        raise ValueError("no checkpoints given")
    files.file_format(output)
    scorer_options = dict(scorer_options or {})
    if scorer_options.get("vocab"):
        scorer_options["vocab"] = _absolute(scorer_options["vocab"])
    return ScoringJob(inputs=tuple(match_inputs(inputs)), output=_absolute(output),
                      checkpoints={str(k): _checkpoint_path(str(v)) for k, v in checkpoints.items()},
                      scorer_options=scorer_options,
                      fields=dict(DEFAULT_FIELDS if fields is None else fields),
                      id_field=id_field,
                      decisions={str(k): float(v) for k, v in (thresholds or {}).items()},
                      encoding=encoding, quoting=quoting)


def match_inputs(patterns: Sequence[str]) -> list[str]:
    """The files the patterns match: in pattern order, sorted within a pattern,
    each once; local paths made absolute.

    Raises:
      FileNotFoundError: if a pattern matches no file.
      ValueError: for a file that is not JSONL, CSV or TSV.
    """
    paths: dict[str, None] = {}
    for pattern in patterns:
        found = sorted(_matching(_absolute(pattern)))
        if not found:
            raise FileNotFoundError(f"{pattern}: no input file matches")
        for path in found:
            files.file_format(path)
            paths.setdefault(path)
    return list(paths)


def check_pipeline_args(args: Sequence[str]) -> None:
    """Refuses pipeline options Beam does not know (Beam itself only warns and
    drops them, so a mistyped `--temp_location` would be lost).

    Raises:
      ValueError: naming the unknown options.
    """
    options = PipelineOptions(list(args))
    every = options.get_all_options(retain_unknown_options=True)
    unknown = sorted(set(every) - set(options.get_all_options()))
    if unknown:
        raise ValueError("unknown Beam pipeline options: "
                         + ", ".join(f"--{name}" for name in unknown)
                         + " (Beam's options are in apache_beam.options.pipeline_options)")


# ------------------------------------------------------------------ files
def _absolute(path: str) -> str:
    return os.path.abspath(path) if _is_local(path) else path


def _checkpoint_path(spec: str) -> str:
    """A local checkpoint path made absolute; a hub id (not a local path) as
    given, for each worker to resolve through its own Hugging Face cache."""
    from seahorse_metrics.checkpoints.hub import is_hub_id

    if is_hub_id(spec) and not os.path.exists(spec):
        return spec
    return _absolute(spec)


def _is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) in (None, "file")


def _exists(path: str) -> bool:
    return FileSystems.exists(path)


def _read_bytes(path: str) -> bytes:
    with FileSystems.open(path, compression_type=_UNCOMPRESSED) as handle:
        return handle.read()


def _read_json(path: str) -> Any:
    return json.loads(_read_bytes(path).decode("utf-8"))


@contextlib.contextmanager
def _writing(path: str) -> Iterator[Any]:
    """A binary handle whose content replaces `path` whole when the block ends
    (a temporary file renamed into place), or never if the block fails."""
    directory, name = os.path.split(path) if _is_local(path) else path.rsplit("/", 1)
    temporary = FileSystems.join(directory, f"{name}.tmp-{uuid.uuid4().hex}")
    if _is_local(path):
        os.makedirs(directory, exist_ok=True)
        try:
            with open(temporary, "wb") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)
        return
    with FileSystems.create(temporary, compression_type=_UNCOMPRESSED) as handle:
        yield handle
    FileSystems.rename([temporary], [path])


def _write_bytes(path: str, data: bytes) -> None:
    with _writing(path) as handle:
        handle.write(data)


def _remove(paths: Iterable[str]) -> None:
    paths = [p for p in paths if _exists(p)]
    if paths:
        FileSystems.delete(paths)


@contextlib.contextmanager
def _local_copy(path: str) -> Iterator[str]:
    """`path` itself when local, else a temporary local copy (the reader of
    `score` reads local files)."""
    if _is_local(path):
        yield path
        return
    with tempfile.TemporaryDirectory() as folder:
        local = os.path.join(folder, os.path.basename(path))
        with FileSystems.open(path, compression_type=_UNCOMPRESSED) as source, \
                open(local, "wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
        yield local


def _staged(path: str) -> str:
    """`path` when local; else a local copy of the file, or of every file
    under the folder (checkpoints load from local files), kept for the
    worker's life."""
    if _is_local(path):
        return path
    root = path.rstrip("/")
    target = tempfile.mkdtemp(prefix="seahorse_")
    atexit.register(shutil.rmtree, target, True)
    found = _matching(root + "/**")
    if found:
        copies = {source: os.path.join(target, *source[len(root) + 1:].split("/"))
                  for source in found}
        staged = target
    elif _exists(root):
        staged = os.path.join(target, root.rsplit("/", 1)[-1])
        copies = {root: staged}
    else:
        raise FileNotFoundError(f"{path} does not exist")
    for source, local in copies.items():
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with FileSystems.open(source, compression_type=_UNCOMPRESSED) as src, \
                open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
    logger.info("copied %s (%d files) to %s", path, len(copies), staged)
    return staged


# ------------------------------------------------------------------ reading
class ReadWindows(beam.DoFn):
    """(file index, path) -> the file's windows to score; as tagged outputs,
    the windows a previous run wrote (`DONE`) and the file's row and window
    counts, or the error that stopped its reading (`TOTALS`)."""

    DONE = "done"
    TOTALS = "totals"

    def __init__(self, job: ScoringJob):
        self.job = job

    def process(self, element):  # (file index, path); no hints: Beam would parse them
        file_index, path = element
        done = written_windows(self.job, file_index)
        rows = windows = 0
        with _local_copy(path) as local:
            try:
                for index, items in itertools.groupby(
                        files.read_rows(local, self.job.encoding, self.job.quoting),
                        key=lambda item: item.row // self.job.window_size):
                    items = list(items)
                    self._check_ids(path, items)
                    rows, windows = rows + len(items), windows + 1
                    if index in done:
                        yield beam.pvalue.TaggedOutput(self.DONE, (file_index, index))
                    else:
                        yield Window(file_index, index, path, items)
            except (ValueError, FileNotFoundError) as error:
                logger.error("%s", error)
                yield beam.pvalue.TaggedOutput(self.TOTALS, {
                    "kind": "fatal", "file": file_index,
                    "error": str(error).replace(local, path)})
                return
        logger.info("%s: %d rows in %d windows, %d written before", path, rows, windows, len(done))
        yield beam.pvalue.TaggedOutput(self.TOTALS, {"kind": "file", "file": file_index,
                                                     "rows": rows, "windows": windows})

    def _check_ids(self, path: str, items: Sequence[files.InputRow]) -> None:
        if self.job.id_field == ROW_ID_FIELD:
            return
        for item in items:
            if item.record is not None and ROW_ID_FIELD in item.record:
                raise ValueError(
                    f"{path}:{item.line}: the input has a {ROW_ID_FIELD!r} field, which the "
                    f"pipeline adds; pass --id_field {ROW_ID_FIELD} (id_field=...) to use it as "
                    "the rows' id")


def written_windows(job: ScoringJob, file_index: int) -> set[int]:
    """The windows of input `file_index` whose shard exists."""
    pattern = FileSystems.join(job.shards, f"{file_index:05d}-*{job.extension}")
    name = job.shard_name()
    windows = set()
    for path in _matching(pattern):
        match = name.fullmatch(path.rsplit("/", 1)[-1])
        if match and int(match.group(1)) == file_index:
            windows.add(int(match.group(2)))
    return windows


# ------------------------------------------------------------------ scoring
class MultiScorerHandler(ModelHandler):
    """RunInference's model handler: `Window`s in, `WindowScores` out.

    `load_model` loads the job's checkpoints as one `MultiScorer`, once per
    worker; each window is scored whole, in its length buckets.
    """

    def __init__(self, job: ScoringJob):
        # A window is already a batch: RunInference hands them over one by one.
        super().__init__(min_batch_size=1, max_batch_size=1)
        self.job = job

    def load_model(self):
        from seahorse_metrics.scoring.scorer import MultiScorer

        options = dict(self.job.scorer_options)
        if options.get("vocab"):
            options["vocab"] = _staged(options["vocab"])
        checkpoints = {name: _staged(path) for name, path in self.job.checkpoints.items()}
        return MultiScorer.load(checkpoints, **options)

    def run_inference(self, batch: Sequence[Window], model,
                      inference_args: Optional[dict] = None) -> list[PredictionResult]:
        return [PredictionResult(window, score_window(model, window, self.job))
                for window in batch]

    def get_num_bytes(self, batch: Sequence[Window]) -> int:
        """The characters of the windows' text fields (Beam's default pickles the batch)."""
        return sum(len(value) for window in batch for item in window.rows
                   for value in (item.record or {}).values() if isinstance(value, str))

    def get_metrics_namespace(self) -> str:
        return METRICS_NAMESPACE


def score_window(scorer, window: Window, job: ScoringJob) -> WindowScores:
    """Scores a window's rows with a `MultiScorer` as `score` scores a window."""
    examples, errors = [], {}
    for item in window.rows:
        example = _row_example(item, job)
        if example is None:
            errors[item.row] = item.error
        else:
            examples.append(example)
    stats = ScoringStats()
    start = time.perf_counter()
    entries = {}
    for group in scorer.run([examples], stats=stats):
        for result in group:
            entries[result.key] = files.result_entry(result, scorer.names, job.columns)
    return WindowScores(entries, errors, stats, time.perf_counter() - start, scorer.metadata())


def _row_example(item: files.InputRow, job: ScoringJob) -> Optional[Example]:
    example = files.row_example(item, **job.fields)
    if example is not None and job.id_field and _blank(item.record.get(job.id_field)):
        item.error = f"missing field {job.id_field!r} (the rows' id)"
        return None
    return example


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


# ------------------------------------------------------------------ writing
class WriteWindow(beam.DoFn):
    """Writes a scored window's shard (and its counts); yields the counts."""

    def __init__(self, job: ScoringJob):
        self.job = job
        self.counters = {name: Metrics.counter(METRICS_NAMESPACE, name)
                         for name in ("rows", "scored", "errors", "truncated", "chunked")}
        self.rate = Metrics.distribution(METRICS_NAMESPACE, "examples_per_second")

    def process(self, prediction):  # PredictionResult(Window, WindowScores)
        window, scores = prediction.example, prediction.inference
        text, counts = render_window(window, scores, self.job)
        # The counts go first: a shard that exists always has its counts.
        _write_bytes(self.job.shard_path(window.file_index, window.index, COUNTS_SUFFIX),
                     json.dumps(counts, ensure_ascii=False).encode("utf-8"))
        _write_bytes(self.job.shard_path(window.file_index, window.index), text.encode("utf-8"))
        for name, key in (("rows", "rows"), ("scored", "scored"), ("errors", "bad"),
                          ("truncated", "truncated"), ("chunked", "chunked")):
            self.counters[name].inc(counts[key])
        if counts["scored"] and scores.seconds > 0:
            self.rate.update(int(round(counts["scored"] / scores.seconds)))
        logger.info("%s window %d: %d rows (%d bad) in %.2f s", window.path, window.index,
                    counts["rows"], counts["bad"], scores.seconds)
        yield counts


def render_window(window: Window, scores: WindowScores, job: ScoringJob) -> tuple[str, dict]:
    """The window's shard text (its rows as `score` writes them, with a row id)
    and its counts."""
    counts = {"kind": "window", "file": window.file_index, "window": window.index,
              "rows": 0, "scored": 0, "bad": 0, "truncated": 0, "chunked": 0, "bad_rows": [],
              "stats": _stats_to_dict(scores.stats), "seconds": scores.seconds,
              "settings": scores.settings}
    # The entries, records and writer of `score` (files.py): one output policy.
    records, input_columns = [], {}
    added = files.output_columns([], job.columns, job.per_sentence, decisions=job.decisions)
    for item in window.rows:
        entry = scores.entries.get(item.row)
        if entry is None:
            entry = {"row": item.row, "line": item.line, ERROR_FIELD: scores.errors[item.row]}
            _note_bad(counts, window, item, entry[ERROR_FIELD])
        else:
            counts["scored"] += 1
            counts["truncated"] += int(entry.get("truncated", False))
            counts["chunked"] += int(entry.get("chunked", False))
        counts["rows"] += 1
        named = dataclasses.replace(item, record=_with_row_id(item, window.path, job))
        # Output fields are written fresh: input fields of those names are renamed, as in score.
        renamed = renamed_input_fields(named.record, added)
        input_columns.update(dict.fromkeys(renamed.get(c, c) for c in named.record))
        records.append(files.output_record(named, entry, renamed, job.decisions))
    buffer = io.StringIO()
    writer = files._OutputWriter(buffer, job.kind, files.output_columns(
        list(input_columns), job.columns, job.per_sentence, decisions=job.decisions))
    for record in records:
        writer.write(record)
    return buffer.getvalue(), counts


def _with_row_id(item: files.InputRow, path: str, job: ScoringJob) -> dict:
    record = dict(item.record) if item.record is not None else {}
    if not (job.id_field and not _blank(record.get(job.id_field))):
        record[ROW_ID_FIELD] = f"{path}:{item.line}"
    return record


def _note_bad(counts: dict, window: Window, item: files.InputRow, error: str) -> None:
    counts["bad"] += 1
    if counts["bad"] <= _LOGGED_BAD_ROWS:
        logger.warning("%s:%d: %s; the row is written with an %r field", window.path, item.line,
                       error, ERROR_FIELD)
    if len(counts["bad_rows"]) < _KEPT_BAD_ROWS:
        counts["bad_rows"].append({"file": window.path, "file_index": window.file_index,
                                   "row": item.row, "line": item.line, "error": error})


class ReadCounts(beam.DoFn):
    """(file index, window) of a window written before -> its counts."""

    def __init__(self, job: ScoringJob):
        self.job = job
        self.resumed = Metrics.counter(METRICS_NAMESPACE, "resumed_rows")

    def process(self, key):  # (file index, window)
        counts = _read_json(self.job.shard_path(*key, COUNTS_SUFFIX))
        self.resumed.inc(counts["rows"])
        yield dict(counts, resumed=True)


# ------------------------------------------------------------------ counts
def _stats_to_dict(stats: ScoringStats) -> dict:
    truncation = stats.truncation
    return {**{name: getattr(stats, name) for name in _STATS_COUNTS},
            "truncation": {**{name: getattr(truncation, name) for name in _TRUNCATION_COUNTS},
                           "by_language": {lang: dict(counts) for lang, counts
                                           in truncation.by_language.items()}}}


def _stats_from_dict(values: Mapping[str, Any]) -> ScoringStats:
    stats = ScoringStats(**{name: values[name] for name in _STATS_COUNTS})
    truncation = values["truncation"]
    stats.truncation = TruncationStats(**{name: truncation[name] for name in _TRUNCATION_COUNTS})
    for lang, counts in truncation["by_language"].items():
        stats.truncation.by_language[lang].update(counts)
    return stats


def _add_stats(total: dict, other: Mapping[str, Any]) -> dict:
    merged = _stats_from_dict(total)
    more = _stats_from_dict(other)
    for name in _STATS_COUNTS:
        setattr(merged, name, getattr(merged, name) + getattr(more, name))
    merged.truncation.merge(more.truncation)
    return _stats_to_dict(merged)


class TotalsFn(beam.CombineFn):
    """Adds up the counts of the files and windows (written now or before)."""

    def create_accumulator(self) -> dict:
        return {"rows": 0, "scored": 0, "bad": 0, "truncated": 0, "chunked": 0, "resumed": 0,
                "scored_now": 0, "seconds": 0.0, "files": {}, "bad_rows": [],
                "stats": _stats_to_dict(ScoringStats()), "settings": None, "fatal": []}

    def add_input(self, totals: dict, counts: Mapping[str, Any]) -> dict:
        if counts["kind"] == "fatal":
            totals["fatal"].append(counts)
            return totals
        entry = totals["files"].setdefault(str(counts["file"]), {
            "rows": 0, "windows": 0, "written_rows": 0, "written_windows": 0})
        if counts["kind"] == "file":
            entry["rows"] += counts["rows"]
            entry["windows"] += counts["windows"]
            return totals
        entry["written_rows"] += counts["rows"]
        entry["written_windows"] += 1
        for name in ("rows", "scored", "bad", "truncated", "chunked"):
            totals[name] += counts[name]
        if counts.get("resumed"):
            totals["resumed"] += counts["rows"]
        else:
            totals["scored_now"] += counts["scored"]
            totals["seconds"] += counts["seconds"]
        totals["bad_rows"] = _first_bad_rows(totals["bad_rows"] + counts["bad_rows"])
        totals["stats"] = _add_stats(totals["stats"], counts["stats"])
        totals["settings"] = totals["settings"] or counts["settings"]
        return totals

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        accumulators = list(accumulators)
        merged = accumulators[0]
        for other in accumulators[1:]:
            for name in ("rows", "scored", "bad", "truncated", "chunked", "resumed",
                         "scored_now", "seconds"):
                merged[name] += other[name]
            for key, entry in other["files"].items():
                mine = merged["files"].setdefault(key, dict.fromkeys(entry, 0))
                for name, value in entry.items():
                    mine[name] += value
            merged["bad_rows"] = _first_bad_rows(merged["bad_rows"] + other["bad_rows"])
            merged["stats"] = _add_stats(merged["stats"], other["stats"])
            merged["settings"] = merged["settings"] or other["settings"]
            merged["fatal"] += other["fatal"]
        return merged

    def extract_output(self, totals: dict) -> dict:
        return totals


def _first_bad_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["file_index"], r["row"]))[:_KEPT_BAD_ROWS]


# ------------------------------------------------------------------ pipeline
def build_pipeline(pipeline: beam.Pipeline, job: ScoringJob, handler: ModelHandler) -> None:
    """Adds the scoring of `job` to `pipeline` (see the module docstring)."""
    read = (pipeline
            | "Inputs" >> beam.Create(list(enumerate(job.inputs)))
            | "SpreadFiles" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(ReadWindows(job)).with_outputs(
                ReadWindows.DONE, ReadWindows.TOTALS, main="windows"))
    written = (read.windows
               | "SpreadWindows" >> beam.Reshuffle()
               | "Score" >> RunInference(handler)
               | "Write" >> beam.ParDo(WriteWindow(job)))
    resumed = read[ReadWindows.DONE] | "ReadCounts" >> beam.ParDo(ReadCounts(job))
    _ = ((written, resumed, read[ReadWindows.TOTALS])
         | "AllCounts" >> beam.Flatten()
         | "Totals" >> beam.CombineGlobally(TotalsFn())
         | "TotalsJson" >> beam.Map(json.dumps)
         | "WriteTotals" >> beam.io.WriteToText(FileSystems.join(job.shards, TOTALS_FILE),
                                                shard_name_template=""))


def run_pipeline(job: ScoringJob, pipeline_args: Sequence[str], handler: ModelHandler,
                 show_progress: Optional[bool] = None) -> tuple[dict, dict, float]:
    """Runs the pipeline to the end (with a progress bar of the rows written;
    default: on a terminal).

    Returns:
      (the totals of every window and file, Beam's counters, seconds).

    Raises:
      Whatever the runner raises for a failed pipeline (the shards written so
      far stay; the same call again resumes).
    """
    from apache_beam.runners.runner import PipelineState

    options = PipelineOptions(list(pipeline_args))
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    logger.info("scoring %d input files on %s into %s", len(job.inputs), runner, job.shards)
    start = time.perf_counter()
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, job, handler)
    try:
        with ShardProgress(job, show_progress):
            result = pipeline.run()
            state = result.wait_until_finish()
    except Exception:
        logger.error("the pipeline failed; the windows it wrote stay in %s: run the same command "
                     "again to score the rest", job.shards)
        raise
    if state != PipelineState.DONE:
        raise RuntimeError(f"the pipeline ended in state {state}; the windows it wrote stay in "
                           f"{job.shards}: run the same command again to score the rest")
    seconds = time.perf_counter() - start
    return _read_json(FileSystems.join(job.shards, TOTALS_FILE)), _counters(result), seconds


class ShardProgress:
    """A progress bar of the rows written while a pipeline runs, on any runner:
    a thread reads the counts of every new shard."""

    def __init__(self, job: ScoringJob, show: Optional[bool] = None):
        from tqdm.auto import tqdm

        self.job = job
        self.pattern = FileSystems.join(job.shards, "*" + COUNTS_SUFFIX)
        self.interval = 2.0 if _is_local(job.shards) else 30.0  # Listing a bucket costs more.
        self.seen = set(_matching(self.pattern))  # Written before: not this run's progress.
        self.bar = tqdm(desc="scoring", unit="ex", dynamic_ncols=True,
                        disable=None if show is None else not show)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "ShardProgress":
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self.thread.join()
        self._update()
        self.bar.close()

    def _poll(self) -> None:
        while not self.stop.wait(self.interval):
            self._update()

    def _update(self) -> None:
        for path in _matching(self.pattern):
            if path not in self.seen:
                self.seen.add(path)
                self.bar.update(_read_json(path)["rows"])


def _counters(result) -> dict:
    """This package's Beam counters (committed values where the runner has them)."""
    try:
        found = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    except Exception as error:  # Not every runner reports metrics to the launcher.
        logger.info("no Beam metrics from this runner (%s)", error)
        return {}
    values = {}
    for counter in found["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        name = counter.key.metric.name
        values[name] = values.get(name, 0) + (value or 0)
    for distribution in found["distributions"]:
        value = distribution.committed or distribution.attempted
        if value is not None and value.count:
            values[distribution.key.metric.name] = {"mean": value.mean, "min": value.min,
                                                    "max": value.max, "count": value.count}
    return values


# ------------------------------------------------------------------ launch
def score_files(inputs: Sequence[str], output: str, checkpoints: Mapping[str, str], *,
                scorer_options: Optional[Mapping[str, Any]] = None,
                fields: Optional[Mapping[str, Optional[str]]] = None,
                id_field: Optional[str] = None, pipeline_args: Sequence[str] = (),
                thresholds: Optional[Mapping[str, float]] = None, encoding: str = "utf-8",
                quoting: str = "auto",
                merge: bool = False, overwrite: bool = False,
                show_progress: Optional[bool] = None,
                make_handler: Callable[[ScoringJob], ModelHandler] = MultiScorerHandler) -> dict:
    """Scores every row of the input files with a Beam pipeline, resumably.

    Args:
      inputs: JSONL, CSV or TSV files or globs, on any filesystem Beam reads.
      output: The JSONL, CSV or TSV file a merge writes; the shards go to
        `output + ".shards/"` in its format, the metadata to `output + ".meta.json"`.
      checkpoints: Output column -> checkpoint directory (as `MultiScorer.load`).
      scorer_options: Other arguments of `MultiScorer.load` (batch_size,
        window_size, normalize, ...), used by every worker.
      fields: The input fields, as keyword arguments of `files.row_example`
        (default `DEFAULT_FIELDS`).
      id_field: Input field that identifies a row; default: a `row_id` field
        `file:line` is added to every row.
      pipeline_args: Beam pipeline options (`--runner=...`, the runner's own).
      thresholds: Output column -> decision threshold: adds a yes/no
        `<column>_decision` column per metric named (as `score --threshold`).
      encoding, quoting: How the inputs are read (as `score --encoding/--quoting`).
      merge: Also write every row to `output`, in input order.
      overwrite: Discard shards, metadata and output of an earlier run.
      show_progress: Progress bar of the rows written (default: on a terminal).
      make_handler: Builds RunInference's model handler for the job.

    Returns:
      The metadata written to `output + ".meta.json"`.

    Raises:
      FileNotFoundError: if an input pattern matches no file.
      ValueError: for unknown pipeline options, unsupported file types, an
        input that cannot be read (file and line named), or shards or an
        output of another input or settings (without `overwrite`).
    """
    check_pipeline_args(pipeline_args)
    job = plan_job(inputs, output, checkpoints, scorer_options=scorer_options, fields=fields,
                   id_field=id_field, thresholds=thresholds, encoding=encoding, quoting=quoting)
    fingerprint = _fingerprint(job)
    meta = _previous_run(job, fingerprint, overwrite)
    if meta is None:
        meta = _score_shards(job, fingerprint, pipeline_args, make_handler(job), show_progress)
    else:
        logger.info("%s is complete for this input and these settings; nothing to score",
                    job.shards)
    if merge and not _exists(job.output):
        merge_shards(job, meta)
        meta["merged"] = job.output
    _write_bytes(job.meta_path, json.dumps(meta, indent=2, ensure_ascii=False).encode("utf-8"))
    return meta


def _score_shards(job: ScoringJob, fingerprint: dict, pipeline_args: Sequence[str],
                  handler: ModelHandler, show_progress: Optional[bool]) -> dict:
    """Runs the pipeline over the windows without a shard; returns the metadata."""
    _write_bytes(FileSystems.join(job.shards, SETTINGS_FILE),
                 json.dumps(fingerprint, indent=2).encode("utf-8"))
    _remove([FileSystems.join(job.shards, TOTALS_FILE)])
    totals, counters, seconds = run_pipeline(job, pipeline_args, handler, show_progress)
    meta = _metadata(job, fingerprint, totals, counters, seconds)
    _remove(_matching(FileSystems.join(job.shards, "*.tmp-*")))
    return meta


def _fingerprint(job: ScoringJob) -> dict:
    """What earlier shards and metadata must match to be reused."""
    inputs = []
    for path in job.inputs:
        metadata = FileSystems.match([path])[0].metadata_list[0]
        inputs.append({"path": path, "bytes": metadata.size_in_bytes,
                       "modified": metadata.last_updated_in_seconds})
    return json.loads(json.dumps({
        "inputs": inputs, "output_format": job.kind, "checkpoints": job.checkpoints,
        "scorer_options": job.scorer_options, "fields": job.fields, "id_field": job.id_field,
        "decisions": job.decisions, "encoding": job.encoding, "quoting": job.quoting,
    }, default=str))


def _previous_run(job: ScoringJob, fingerprint: dict, overwrite: bool) -> Optional[dict]:
    """The metadata of a finished run of the same job, or None to run.

    Raises:
      ValueError: for shards, metadata or an output of another job (without `overwrite`).
    """
    if overwrite:
        _remove_shards(job)
        _remove([job.meta_path, job.output])
        return None
    meta = _read_json(job.meta_path) if _exists(job.meta_path) else None
    if meta is not None and meta.get("fingerprint") == fingerprint:
        return meta
    if meta is not None or _exists(job.output):
        raise ValueError(f"{job.output} (or its {files.META_SUFFIX}) exists and was not written "
                         "for this input and these settings; pass --overwrite (overwrite=True) "
                         "to replace it")
    settings = FileSystems.join(job.shards, SETTINGS_FILE)
    if _exists(settings) and _read_json(settings) != fingerprint:
        raise ValueError(f"{job.shards} was written for another input or other settings; rerun "
                         "with the original ones, or pass --overwrite (overwrite=True) to start "
                         "over")
    if _exists(settings):
        logger.info("%s: resuming; windows written before are counted, not scored", job.shards)
    return None


def _matching(pattern: str) -> list[str]:
    """The paths `pattern` matches (none when nothing does)."""
    try:
        return [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    except Exception:  # Nothing matched, on filesystems that raise for that.
        return []


def _remove_shards(job: ScoringJob) -> None:
    if _is_local(job.shards):
        shutil.rmtree(job.shards, ignore_errors=True)
    else:
        _remove(_matching(FileSystems.join(job.shards, "*")))


def _metadata(job: ScoringJob, fingerprint: dict, totals: dict, counters: dict,
              seconds: float) -> dict:
    """The run's metadata, after checking that every row read was written once."""
    _check_totals(job, totals)
    stats = _stats_from_dict(totals["stats"])
    settings = totals["settings"] or {}
    stats.log(settings.get("settings", {}).get("max_input_length", 0))
    rate = totals["scored_now"] / seconds if seconds > 0 else 0.0
    rows = {name: totals[name] for name in ("rows", "scored", "bad", "truncated", "chunked",
                                            "resumed")}
    logger.info("%d rows (%d scored, %d bad, %d truncated, %d resumed) in %d files -> %s; this "
                "run scored %d rows at %.2f examples/s", rows["rows"], rows["scored"],
                rows["bad"], rows["truncated"], rows["resumed"], len(job.inputs), job.shards,
                totals["scored_now"], rate)
    return {
        "inputs": [{"path": path, "rows": totals["files"][str(i)]["rows"],
                    "windows": totals["files"][str(i)]["windows"]}
                   for i, path in enumerate(job.inputs)],
        "output": job.output, "shards": job.shards, "merged": None,
        "columns": job.columns, "id_field": job.id_field or ROW_ID_FIELD,
        "rows": rows, "bad_rows": totals["bad_rows"], "stats": stats.summary(),
        "this_run": {"scored": totals["scored_now"], "seconds": round(seconds, 3),
                     "examples_per_second": round(rate, 3),
                     "worker_scoring_seconds": round(totals["seconds"], 3),
                     "counters": counters},
        "settings": settings, "fingerprint": fingerprint,
    }


def _check_totals(job: ScoringJob, totals: dict) -> None:
    """Raises for an input that could not be read, and for rows read but not
    written exactly once (a bug)."""
    if totals["fatal"]:
        errors = [f["error"] for f in sorted(totals["fatal"], key=lambda f: f["file"])]
        more = f" (and {len(errors) - 1} more input errors)" if len(errors) > 1 else ""
        raise ValueError(f"{errors[0]}{more}; the windows scored so far stay in {job.shards}")
    for index, path in enumerate(job.inputs):
        entry = totals["files"].get(str(index))
        if entry is None:
            raise RuntimeError(f"{path} was never read; this is a bug")
        if (entry["written_rows"], entry["written_windows"]) != (entry["rows"], entry["windows"]):
            raise RuntimeError(
                f"{path}: {entry['rows']} rows in {entry['windows']} windows were read, but "
                f"{entry['written_rows']} rows in {entry['written_windows']} windows written; "
                "this is a bug")


# ------------------------------------------------------------------ merge
def merge_shards(job: ScoringJob, meta: Mapping[str, Any]) -> str:
    """Writes the rows of every shard to `job.output` in input order (one
    header for CSV/TSV); returns the path.

    Raises:
      RuntimeError: if a shard of the finished run is missing.
    """
    paths = [job.shard_path(index, window) for index, entry in enumerate(meta["inputs"])
             for window in range(entry["windows"])]
    missing = [path for path in paths if not _exists(path)]
    if missing:
        raise RuntimeError(f"{len(missing)} shards of the finished run are missing (the first is "
                           f"{missing[0]}); score again with --overwrite (overwrite=True)")
    with _writing(job.output) as handle:
        if job.kind == "jsonl":
            for path in paths:
                with FileSystems.open(path, compression_type=_UNCOMPRESSED) as shard:
                    shutil.copyfileobj(shard, handle, 1 << 20)
        else:
            _merge_delimited(job, paths, handle)
    logger.info("merged %d shards into %s", len(paths), job.output)
    return job.output


def _merge_delimited(job: ScoringJob, paths: Sequence[str], handle) -> None:
    """CSV/TSV shards under one header: the union of their input columns, then
    the added ones, as `score` orders them."""
    delimiter = "\t" if job.kind == "tsv" else ","
    headers = [_shard_header(path, delimiter) for path in paths]
    added = set(files.output_columns([], job.columns, job.per_sentence, decisions=job.decisions))
    input_columns = dict.fromkeys(c for header in headers for c in header if c not in added)
    header = files.output_columns(list(input_columns), job.columns, job.per_sentence,
                                  decisions=job.decisions)
    text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
    writer = files._OutputWriter(text, job.kind, header)
    same = all(h == header for h in headers)
    text.flush()
    for path, shard_header in zip(paths, headers):
        with FileSystems.open(path, compression_type=_UNCOMPRESSED) as shard:
            body = io.TextIOWrapper(shard, encoding="utf-8", newline="")
            reader = csv.reader(body, delimiter=delimiter)
            next(reader, None)
            if same:  # Copy the rows as they are.
                shutil.copyfileobj(body, text)
            else:
                for cells in reader:
                    writer.write(dict(zip(shard_header, cells)))
            body.detach()
    text.flush()
    text.detach()


def _shard_header(path: str, delimiter: str) -> list[str]:
    with FileSystems.open(path, compression_type=_UNCOMPRESSED) as shard:
        body = io.TextIOWrapper(shard, encoding="utf-8", newline="")
        header = next(csv.reader(body, delimiter=delimiter), [])
        body.detach()
    return header
