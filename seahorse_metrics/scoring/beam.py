"""Scoring files beyond one machine: an Apache Beam pipeline (`score --runner ...`).

    from seahorse_metrics.scoring import beam as beam_scoring
    meta = beam_scoring.score_files(
        ["data/part-*.jsonl"], "scores/test.jsonl", {"q4": "ckpt/q4"},
        pipeline_args=["--runner=DirectRunner", "--direct_num_workers=2",
                       "--direct_running_mode=multi_processing"], merge=True)

The pipeline does what `seahorse-metrics score` (`files.score_file`) does, on
the workers a runner gives it (DirectRunner or PrismRunner on one machine;
Dataflow, Flink or Spark clusters):

The job, its fingerprint, metadata and row counts are
`seahorse_metrics.scoring.job`'s, rows are scored by
`seahorse_metrics.scoring.rows` and written by `seahorse_metrics.scoring.output`
(the same as in `score`); the shards' files are `seahorse_metrics.scoring.shards`.
`seahorse_metrics.scoring.beam_transforms` holds the Beam transforms; this
module checks the job, launches the pipeline and writes the metadata;
`seahorse_metrics.scoring.shard_merge` merges the shards.

1. Every input file (JSONL, CSV or TSV; globs; any filesystem Beam reads) is
   read by `files.read_rows`, the reader of `score`, and its rows are cut into
   windows by the one rule of `rows.window_rows`.
2. The windows are spread over the workers and scored by RunInference with
   `MultiScorerHandler`: a `MultiScorer` loaded once per worker scores each
   window with its length buckets, so the batches, and so the float32 scores,
   are those of `score`. Rows are checked by `rows.row_example`; a row that
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
partial file, checkpoint content included.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.ml.inference.base import ModelHandler
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from seahorse_metrics.checkpoints.layout import checkpoint_names
from seahorse_metrics.scoring import files, shards
from seahorse_metrics.scoring import job as job_lib
from seahorse_metrics.scoring.beam_transforms import (
    METRICS_NAMESPACE,
    ROW_ID_FIELD,
    MultiScorerHandler,
    build_pipeline,
)
from seahorse_metrics.scoring.job import ScoringJob
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.shard_merge import merge_shards
from seahorse_metrics.scoring.shards import COUNTS_SUFFIX, SETTINGS_FILE, TOTALS_FILE
from seahorse_metrics.scoring.window_scoring import ScoringStats

logger = logging.getLogger(__name__)

RUNNERS = ("DirectRunner", "PrismRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")


# ------------------------------------------------------------------ the job
def beam_job(
    inputs: Sequence[str],
    output: str,
    checkpoints: Union[Mapping[str, str], Sequence[str]],
    *,
    scorer_options: Optional[Any] = None,
    fields: Optional[Mapping[str, Optional[str]]] = None,
    id_field: Optional[str] = None,
    thresholds: Union[Mapping[str, float], str, None] = None,
    calibration: Union[Mapping[str, Any], str, None] = None,
    encoding: str = "utf-8",
    quoting: str = "auto",
) -> ScoringJob:
    """The job of a pipeline: inputs matched, local paths made absolute; loads nothing.

    Args:
      inputs: JSONL, CSV or TSV files or globs, on any filesystem Beam reads.
      output: The JSONL, CSV or TSV file a merge writes; the shards go to
        `output + ".shards/"` in its format, the metadata to `output + ".meta.json"`.
      checkpoints: Output column -> checkpoint directory, or `[NAME=]DIR`
        specs (as `MultiScorer.load`).
      scorer_options: A `ScoringOptions` (or a mapping of its fields) for every worker.
      fields: The input fields (`InputFields.of`; default `InputFields()`).
      id_field: Input field that identifies a row; default: a `row_id` field
        `file:line` is added to every row.
      thresholds, calibration: Metric name -> threshold / calibration map, or
        their files (`job.resolve_job`): `<column>_decision` / `_calibrated`.
      encoding, quoting: How the inputs are read (as `score --encoding/--quoting`).

    Raises:
      FileNotFoundError: if an input pattern matches no file.
      ValueError: for an unsupported input or output file type, no checkpoint,
        or a bad threshold.
    """
    return job_lib.resolve_job(
        match_inputs(inputs),
        shards.absolute(output),
        {str(k): _checkpoint_path(str(v)) for k, v in checkpoint_names(checkpoints).items()},
        options=_worker_options(scorer_options),
        fields=fields,
        thresholds=thresholds,
        calibration=calibration,
        id_field=id_field,
        encoding=encoding,
        quoting=quoting,
    )


def _worker_options(scorer_options: Optional[Any]) -> ScoringOptions:
    """The `ScoringOptions` every worker scores with, its vocabulary path made absolute."""
    options = (
        scorer_options
        if isinstance(scorer_options, ScoringOptions)
        else ScoringOptions.from_dict(scorer_options or {})
    )
    if options.vocab:
        options = ScoringOptions.of(options, vocab=shards.absolute(options.vocab))
    return options


def match_inputs(patterns: Sequence[str]) -> list[str]:
    """The files the patterns match: in pattern order, sorted within a pattern,
    each once; local paths made absolute.

    Raises:
      FileNotFoundError: if a pattern matches no file.
      ValueError: for a file that is not JSONL, CSV or TSV.
    """
    paths: dict[str, None] = {}
    for pattern in patterns:
        found = sorted(shards.matching(shards.absolute(pattern)))
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
        raise ValueError(
            "unknown Beam pipeline options: "
            + ", ".join(f"--{name}" for name in unknown)
            + " (Beam's options are in apache_beam.options.pipeline_options)"
        )


def _checkpoint_path(spec: str) -> str:
    """A local checkpoint path made absolute; a hub id (not a local path) as
    given, for each worker to resolve through its own Hugging Face cache."""
    from seahorse_metrics.checkpoints.hub import is_hub_id

    if is_hub_id(spec) and not os.path.exists(spec):
        return spec
    return shards.absolute(spec)


def run_pipeline(
    job: ScoringJob,
    pipeline_args: Sequence[str],
    handler: ModelHandler,
    show_progress: Optional[bool] = None,
) -> tuple[dict, dict, float]:
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
    folder = shards.shards_dir(job)
    logger.info("scoring %d input files on %s into %s", len(job.inputs), runner, folder)
    start = time.perf_counter()
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, job, handler)
    try:
        with ShardProgress(job, show_progress):
            result = pipeline.run()
            state = result.wait_until_finish()
    except Exception:
        logger.error(
            "the pipeline failed; the windows it wrote stay in %s: run the same command "
            "again to score the rest",
            folder,
        )
        raise
    if state != PipelineState.DONE:
        raise RuntimeError(
            f"the pipeline ended in state {state}; the windows it wrote stay in "
            f"{folder}: run the same command again to score the rest"
        )
    seconds = time.perf_counter() - start
    totals = shards.read_json(shards.FileSystems.join(folder, TOTALS_FILE))
    return totals, _counters(result), seconds


class ShardProgress:
    """A progress bar of the rows written while a pipeline runs, on any runner:
    a thread reads the counts of every new shard."""

    def __init__(self, job: ScoringJob, show: Optional[bool] = None):
        from tqdm.auto import tqdm

        folder = shards.shards_dir(job)
        self.pattern = shards.FileSystems.join(folder, "*" + COUNTS_SUFFIX)
        self.interval = 2.0 if shards.is_local(folder) else 30.0  # Listing a bucket costs more.
        self.seen = set(shards.matching(self.pattern))  # Written before: not this run's progress.
        self.bar = tqdm(
            desc="scoring",
            unit="ex",
            dynamic_ncols=True,
            disable=None if show is None else not show,
        )
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
        for path in shards.matching(self.pattern):
            if path not in self.seen:
                self.seen.add(path)
                self.bar.update(shards.read_json(path)["rows"])


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
            values[distribution.key.metric.name] = {
                "mean": value.mean,
                "min": value.min,
                "max": value.max,
                "count": value.count,
            }
    return values


# ------------------------------------------------------------------ launch
def score_files(
    inputs: Sequence[str],
    output: str,
    checkpoints: Union[Mapping[str, str], Sequence[str]],
    *,
    scorer_options: Optional[Any] = None,
    fields: Optional[Mapping[str, Optional[str]]] = None,
    id_field: Optional[str] = None,
    pipeline_args: Sequence[str] = (),
    thresholds: Union[Mapping[str, float], str, None] = None,
    calibration: Union[Mapping[str, Any], str, None] = None,
    encoding: str = "utf-8",
    quoting: str = "auto",
    merge: bool = False,
    overwrite: bool = False,
    show_progress: Optional[bool] = None,
    make_handler: Callable[[ScoringJob], ModelHandler] = MultiScorerHandler,
    finish: bool = False,
) -> dict:
    """Scores every row of the input files with a Beam pipeline, resumably.

    Args:
      inputs, output, checkpoints, scorer_options, fields, id_field, thresholds,
        calibration, encoding, quoting: The job (see `beam_job`).
      pipeline_args: Beam pipeline options (`--runner=...`, the runner's own).
      merge: Also write every row to `output`, in input order.
      overwrite, show_progress: Discard an earlier run; a progress bar of the
        rows written (default: on a terminal).
      make_handler: Builds RunInference's model handler for the job.
      finish: As `score`: raise `NothingScoredError` when no row could be
        scored; log the counts and signatures (`job.finish_run`).

    Returns:
      The metadata written to `output + ".meta.json"` (`job.run_metadata`).

    Raises:
      FileNotFoundError: if an input pattern matches no file.
      ValueError: for unknown pipeline options, unsupported file types, an unreadable
        input (file and line named), or shards or an output of another input,
        settings or checkpoint content (without `overwrite`).
    """
    check_pipeline_args(pipeline_args)
    job = beam_job(
        inputs,
        output,
        checkpoints,
        scorer_options=scorer_options,
        fields=fields,
        id_field=id_field,
        thresholds=thresholds,
        calibration=calibration,
        encoding=encoding,
        quoting=quoting,
    )
    meta = _run_job(job, pipeline_args, make_handler(job), overwrite, show_progress)
    _conclude(job, meta, merge, finish)
    return meta


def _run_job(
    job: ScoringJob,
    pipeline_args: Sequence[str],
    handler: ModelHandler,
    overwrite: bool,
    show_progress: Optional[bool],
) -> dict:
    """The metadata of the job's run: that of an earlier finished run of the
    same job (unless `overwrite`, which discards it), else of a pipeline run now."""
    fingerprint = job_lib.job_fingerprint(
        job,
        [shards.file_stat(path) for path in job.inputs],
        {"options": job.options.to_dict(), "checkpoints": dict(job.checkpoints)},
    )
    return _previous_run(job, fingerprint, overwrite) or _score_shards(
        job, fingerprint, pipeline_args, handler, show_progress
    )


def _conclude(job: ScoringJob, meta: dict, merge: bool, finish: bool) -> None:
    """After the run: with `merge`, the output written (once); the metadata
    written; with `finish`, the run's counts checked and logged."""
    if merge and not shards.exists(job.output):
        merge_shards(job, meta)
        meta["merged"] = job.output
    shards.write_bytes(
        job.meta_path, json.dumps(meta, indent=2, ensure_ascii=False).encode("utf-8")
    )
    if finish:
        job_lib.finish_run(meta, job.output)


def _score_shards(
    job: ScoringJob,
    fingerprint: dict,
    pipeline_args: Sequence[str],
    handler: ModelHandler,
    show_progress: Optional[bool],
) -> dict:
    """Runs the pipeline over the windows without a shard; returns the metadata."""
    folder = shards.shards_dir(job)
    shards.write_bytes(
        shards.FileSystems.join(folder, SETTINGS_FILE),
        json.dumps(fingerprint, indent=2).encode("utf-8"),
    )
    shards.remove([shards.FileSystems.join(folder, TOTALS_FILE)])
    totals, counters, seconds = run_pipeline(job, pipeline_args, handler, show_progress)
    meta = _metadata(job, fingerprint, totals, counters, seconds)
    shards.remove(shards.matching(shards.FileSystems.join(folder, "*.tmp-*")))
    return meta


def _previous_run(job: ScoringJob, fingerprint: dict, overwrite: bool) -> Optional[dict]:
    """The metadata of a finished run of the same job, or None to run.

    Raises:
      ValueError: for shards, metadata or an output of another job (without `overwrite`).
    """
    if overwrite:
        shards.remove_shards(job)
        shards.remove([job.meta_path, job.output])
        return None
    meta = (
        job_lib.upgrade_metadata(shards.read_json(job.meta_path))
        if shards.exists(job.meta_path)
        else None
    )
    if meta is not None and meta.get("fingerprint") == fingerprint:
        logger.info(
            "%s is complete for this input and these settings; nothing to score",
            shards.shards_dir(job),
        )
        return meta
    if meta is not None or shards.exists(job.output):
        raise job_lib.refuse_other_settings(
            f"{job.output} (or its {job_lib.META_SUFFIX}) exists and",
            meta.get("fingerprint") if meta else None,
        )
    settings = shards.FileSystems.join(shards.shards_dir(job), SETTINGS_FILE)
    if shards.exists(settings):
        previous = shards.read_json(settings)
        if previous != fingerprint:
            raise job_lib.refuse_other_settings(shards.shards_dir(job), previous)
        logger.info(
            "%s: resuming; windows written before are counted, not scored", shards.shards_dir(job)
        )
    return None


def _metadata(
    job: ScoringJob, fingerprint: dict, totals: dict, counters: dict, seconds: float
) -> dict:
    """The run's metadata, after checking that every row read was written once."""
    _check_totals(job, totals)
    stats = ScoringStats.from_dict(totals["stats"])
    settings = totals["settings"] or {}
    stats.log(settings.get("settings", {}).get("max_input_length", 0))
    counts = job_lib.RowCounts.from_dict(totals["counts"])
    rate = totals["scored_now"] / seconds if seconds > 0 else 0.0
    logger.info(
        "%d rows (%d scored, %d bad, %d truncated, %d resumed) in %d files -> %s; this "
        "run scored %d rows at %.2f examples/s",
        counts.rows,
        counts.scored,
        counts.bad,
        counts.truncated,
        counts.resumed,
        len(job.inputs),
        shards.shards_dir(job),
        totals["scored_now"],
        rate,
    )
    return job_lib.run_metadata(
        job,
        inputs=[
            {
                "path": path,
                "rows": totals["files"][str(i)]["rows"],
                "windows": totals["files"][str(i)]["windows"],
            }
            for i, path in enumerate(job.inputs)
        ],
        counts=counts,
        stats=stats.summary(),
        this_run={
            "scored": totals["scored_now"],
            "bad": None,
            "seconds": round(seconds, 3),
            "examples_per_second": round(rate, 3),
            "worker_scoring_seconds": round(totals["seconds"], 3),
            "counters": counters,
        },
        settings=settings,
        fingerprint=fingerprint,
        shards=shards.shards_dir(job),
        id_field=job.id_field or ROW_ID_FIELD,
        renamed_input_columns=totals.get("renamed"),
    )


def _check_totals(job: ScoringJob, totals: dict) -> None:
    """Raises for an input that could not be read or an id (`id_field`) that
    several rows carry, and for rows read but not written exactly once (a bug)."""
    if totals["fatal"]:
        errors = [
            f["error"]
            for f in sorted(
                totals["fatal"], key=lambda f: (f["file"] is None, f["file"] or 0, f["error"])
            )
        ]
        more = f" (and {len(errors) - 1} more input errors)" if len(errors) > 1 else ""
        raise ValueError(
            f"{errors[0]}{more}; the windows scored so far stay in {shards.shards_dir(job)}"
        )
    for index, path in enumerate(job.inputs):
        entry = totals["files"].get(str(index))
        if entry is None:
            raise RuntimeError(f"{path} was never read; this is a bug")
        if (entry["written_rows"], entry["written_windows"]) != (entry["rows"], entry["windows"]):
            raise RuntimeError(
                f"{path}: {entry['rows']} rows in {entry['windows']} windows were read, but "
                f"{entry['written_rows']} rows in {entry['written_windows']} windows written; "
                "this is a bug"
            )
