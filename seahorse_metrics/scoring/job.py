"""A scoring job: its settings, its fingerprint, its metadata and its row counts.

Every runner (`files.score_file` in this process, the Beam pipeline, the
service) scores a `ScoringJob`:

* `InputFields`: which input fields hold the premise, hypothesis, language
  and question.
* `ScoringJob`: inputs, output, checkpoints, options
  (`scoring.options.ScoringOptions`), output columns,
  decision thresholds, calibration maps, how the inputs are read;
  `resolve_job` checks it.
* `job_fingerprint`: what a partial or finished output must match to be
  reused: the inputs (size, modification time), the settings, and every
  checkpoint's content digest (`checkpoints.content`), so a checkpoint
  replaced at the same path is refused like any other changed setting.
* `run_metadata`: the one `<output>.meta.json` schema of every runner
  (`read_metadata` also reads the older keys).
* `RowCounts`: the bad-row policy (a bad row is written with an `error`
  field, never dropped; the first 20 are logged, the first 100 kept in the
  metadata) and the counts of rows, with `merge` for counts made apart.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Mapping, Optional, Sequence, Union

from seahorse_metrics.calibration.maps import maps_for
from seahorse_metrics.calibration.thresholds import (
    check_probability_threshold,
    read_decision_thresholds,
)
from seahorse_metrics.checkpoints.layout import checkpoint_names, metric_columns
from seahorse_metrics.data import tables
from seahorse_metrics.io.json_files import read_json
from seahorse_metrics.option_names import option
from seahorse_metrics.scoring.batching import DEFAULT_WINDOW_SIZE
from seahorse_metrics.scoring.options import ScoringOptions
from seahorse_metrics.scoring.output import ERROR_FIELD, OutputFields

logger = logging.getLogger(__name__)

META_SUFFIX = ".meta.json"
LOGGED_BAD_ROWS = 20
KEPT_BAD_ROWS = 100
_ROW_COUNTS = ("rows", "scored", "bad", "truncated", "chunked", "resumed")


class NothingScoredError(ValueError):
    """Every row of the input failed; the output lists why."""


# ------------------------------------------------------------------ inputs
@dataclasses.dataclass(frozen=True)
class InputFields:
    """The input fields scoring reads.

    Attributes:
      premise, hypothesis: The article and summary fields.
      lang: Field with a language code (for the truncation counts), or None.
      question: Field with the question of a query-focused summary (then
        required in every row), or None.
    """

    premise: str = "article"
    hypothesis: str = "summary"
    lang: Optional[str] = "lang"
    question: Optional[str] = None

    @classmethod
    def of(cls, fields: Optional[Mapping[str, Optional[str]]] = None) -> "InputFields":
        """From a mapping keyed `premise` or `premise_field` (the keyword
        arguments of `score_file`) and so on; None gives the defaults."""
        if isinstance(fields, InputFields):
            return fields
        values = {
            key[: -len("_field")] if key.endswith("_field") else key: value
            for key, value in (fields or {}).items()
        }
        return cls(**values)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ the job
@dataclasses.dataclass(frozen=True)
class ScoringJob:
    """One scoring run, checked before anything is loaded or scored.

    Attributes:
      inputs: The input files, in order.
      output: The output file (for Beam: the merged file; shards beside it).
      checkpoints: Metric name -> checkpoint path (or hub id).
      options: How pairs are scored.
      columns: Metric name -> output column.
      fields: The input fields read.
      decisions: Output column -> threshold of its `<column>_decision` column.
      calibration: Output column -> calibration map of its `<column>_calibrated` column.
      id_field: Input field with each row's id (Beam), or None.
      encoding: Text encoding of the inputs.
      quoting: How CSV/TSV inputs are read ("auto", "none", "quoted").
    """

    inputs: tuple[str, ...]
    output: str
    checkpoints: Mapping[str, str]
    options: ScoringOptions
    columns: Mapping[str, str]
    fields: InputFields = InputFields()
    decisions: Mapping[str, float] = dataclasses.field(default_factory=dict)
    calibration: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    id_field: Optional[str] = None
    encoding: str = "utf-8"
    quoting: str = "auto"

    @property
    def output_kind(self) -> str:
        """ "jsonl", "json", "csv" or "tsv"."""
        return tables.table_kind(self.output)

    @property
    def meta_path(self) -> str:
        return self.output + META_SUFFIX

    @property
    def window_size(self) -> int:
        return int(self.options.window_size or DEFAULT_WINDOW_SIZE)

    @property
    def per_sentence(self) -> bool:
        return bool(self.options.per_sentence)

    @property
    def output_fields(self) -> OutputFields:
        """The fields scoring adds to each row of this job's output."""
        return OutputFields(
            self.columns,
            self.per_sentence,
            self.decisions,
            self.calibration,
            summary_cut=self.options.long_summaries == "cut",
        )


def check_output_path(input_path: str, output_path: str) -> str:
    """The output format; refuses an output that is the input itself.

    Raises:
      IsADirectoryError: for an output that is a directory.
      ValueError: for an unsupported extension or output == input.
    """
    if os.path.isdir(output_path):
        raise IsADirectoryError(
            f"--output {output_path} is a directory; give a file in it, e.g. "
            f"{os.path.join(output_path, 'scores.jsonl')} (--overwrite never replaces a directory)"
        )
    kind = tables.table_kind(output_path)
    tables.table_kind(input_path)
    same = os.path.abspath(input_path) == os.path.abspath(output_path) or (
        os.path.exists(output_path)
        and os.path.exists(input_path)
        and os.path.samefile(input_path, output_path)
    )
    if same:
        raise ValueError(
            f"--output {output_path} is the input file; scoring would overwrite "
            "the input: write the scores to another file"
        )
    return kind


def decision_thresholds(
    thresholds: Optional[Mapping[str, float]], names: Sequence[str], columns: Mapping[str, str]
) -> dict[str, float]:
    """Score column -> threshold, from metric name -> threshold.

    Raises:
      ValueError: for a metric name that is not scored, or a threshold that
        is not a number in [0, 1] (scores are probabilities).
    """
    decisions = {}
    for name, threshold in (thresholds or {}).items():
        if name not in names:
            raise ValueError(
                f"a threshold is given for {name!r}, which is not one of the "
                f"metrics scored ({list(names)})"
            )
        decisions[columns[name]] = check_probability_threshold(
            threshold, f"the threshold of {name!r}"
        )
    return decisions


def resolve_job(
    inputs: Sequence[str],
    output: str,
    checkpoints: Union[Mapping[str, str], Sequence[str]],
    *,
    options: Optional[ScoringOptions] = None,
    columns: Optional[Mapping[str, str]] = None,
    fields: Optional[Mapping[str, Optional[str]]] = None,
    thresholds: Union[Mapping[str, float], str, None] = None,
    calibration: Union[Mapping[str, Any], str, None] = None,
    id_field: Optional[str] = None,
    encoding: str = "utf-8",
    quoting: str = "auto",
) -> ScoringJob:
    """Checks a job's formats, columns and thresholds; loads no model.

    Args:
      inputs: The input files (already matched).
      output: The output file.
      checkpoints: Metric name -> checkpoint, or `[NAME=]DIR` specs
        (`checkpoints.layout.checkpoint_names`).
      options: How pairs are scored (default `ScoringOptions()`).
      columns: Metric name -> output column (default: the names).
      fields: The input fields (`InputFields.of`).
      thresholds: Metric name -> decision threshold, or a `--threshold`
        value: a number for every metric, or a thresholds file
        (`calibration.thresholds.read_decision_thresholds`).
      calibration: Metric name -> calibration map, or a calibration file
        with a map for every metric (`calibration.maps.maps_for`).
      id_field, encoding, quoting: See `ScoringJob`.

    Raises:
      ValueError: for no checkpoint, an unsupported file type, an output
        that is an input, or a bad threshold or calibration file.
    """
    checkpoints = checkpoint_names(checkpoints)
    for path in inputs:
        check_output_path(path, output)
    names = metric_columns(checkpoints)  # a multi-question checkpoint scores several
    if thresholds is None or isinstance(thresholds, str):
        thresholds = read_decision_thresholds(thresholds, names)
    if isinstance(calibration, str):
        calibration = maps_for(calibration, names)
    columns = dict(columns or {name: name for name in names})
    return ScoringJob(
        inputs=tuple(inputs),
        output=output,
        checkpoints=dict(checkpoints),
        options=options or ScoringOptions(),
        columns=columns,
        fields=InputFields.of(fields),
        decisions=decision_thresholds(thresholds, names, columns),
        calibration={columns[name]: m for name, m in (calibration or {}).items()},
        id_field=id_field,
        encoding=encoding,
        quoting=quoting,
    )


# ------------------------------------------------------------------ fingerprint
def job_fingerprint(
    job: ScoringJob, inputs: Sequence[Mapping[str, Any]], scorer: Mapping[str, Any]
) -> dict:
    """What a partial or finished output must match to be reused (JSON-ready).

    Args:
      job: The job.
      inputs: Per input file: {"path", "bytes", "modified_ns"}.
      scorer: What describes the scorer: `MultiScorer.metadata()` in this
        process; the options and checkpoints where none is loaded (Beam).
    """
    # Imported here: the checkpoints package loads JAX, which the CLI's start-up does not need.
    from seahorse_metrics.checkpoints.content import content_digest_or_none

    content = {name: content_digest_or_none(path) or path for name, path in job.checkpoints.items()}
    # The int8 self-check is a measurement of this host, not a setting.
    scorer = {key: value for key, value in scorer.items() if key != "int8_check"}
    fingerprint = {
        "inputs": list(inputs),
        "output_format": job.output_kind,
        "encoding": job.encoding,
        "quoting": job.quoting,
        "columns": dict(job.columns),
        "fields": job.fields.to_dict(),
        "id_field": job.id_field,
        "thresholds": dict(job.decisions),
        "batch_size": int(job.options.batch_size),
        "scorer": dict(scorer),
        "checkpoint_content": content,
    }
    if job.calibration:  # Absent without maps, as before they were part of the output.
        fingerprint["calibration"] = calibration_dict(job)
    return json.loads(json.dumps(fingerprint, default=str, sort_keys=True))


def calibration_dict(job: ScoringJob) -> dict:
    """Score column -> its calibration map, JSON-ready (the metadata's `calibration`)."""
    return {
        column: calibration_map.to_dict() for column, calibration_map in job.calibration.items()
    }


def local_input_stat(path: str) -> dict:
    """The fingerprint entry of a local input file."""
    stat = os.stat(path)
    return {"path": os.path.abspath(path), "bytes": stat.st_size, "modified_ns": stat.st_mtime_ns}


def refuse_other_settings(what: str, previous: Optional[Mapping[str, Any]]) -> ValueError:
    """The error for earlier output written for another input or other settings."""
    older = isinstance(previous, Mapping) and "checkpoint_content" not in previous
    return ValueError(
        f"{what} was written for another input or other settings (or the checkpoint at the same "
        "path has changed)"
        + (
            "; an earlier version wrote it without recording the checkpoints' content"
            if older
            else ""
        )
        + f"; rerun with the original ones, or pass {option('overwrite=True', '--overwrite')} "
        "to start over"
    )


# ------------------------------------------------------------------ counts
@dataclasses.dataclass
class RowCounts:
    """Rows written, scored, bad, cut; the first bad rows; `merge` adds counts up.

    Attributes:
      rows, scored, bad, truncated, chunked: Rows written, by outcome.
      resumed: Rows written by an earlier run.
      bad_rows: The first `KEPT_BAD_ROWS` bad rows (file, file_index, row,
        line, first_line, error), in input order.
    """

    rows: int = 0
    scored: int = 0
    bad: int = 0
    truncated: int = 0
    chunked: int = 0
    resumed: int = 0
    bad_rows: list = dataclasses.field(default_factory=list)

    def add(
        self, entry: Mapping[str, Any], item: tables.TableRow, file: str, file_index: int = 0
    ) -> None:
        """Counts one written row (its entry: scores or an `error`)."""
        self.rows += 1
        if ERROR_FIELD not in entry:
            self.scored += 1
            self.truncated += int(bool(entry.get("truncated", False)))
            self.chunked += int(bool(entry.get("chunked", False)))
            return
        self.bad += 1
        if len(self.bad_rows) < KEPT_BAD_ROWS:
            self.bad_rows.append(
                {
                    "file": file,
                    "file_index": file_index,
                    "row": item.row,
                    "line": item.line,
                    "first_line": item.first_line,
                    "error": entry[ERROR_FIELD],
                }
            )

    def merge(self, other: "RowCounts") -> "RowCounts":
        """Adds `other`'s counts to these (the kept bad rows stay the first
        in input order); returns self."""
        for name in _ROW_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.bad_rows = sorted(
            self.bad_rows + other.bad_rows, key=lambda r: (r["file_index"], r["row"])
        )[:KEPT_BAD_ROWS]
        return self

    def summary(self) -> dict:
        """{"rows", "scored", "bad", "truncated", "chunked", "resumed"}."""
        return {name: getattr(self, name) for name in _ROW_COUNTS}

    def to_dict(self) -> dict:
        return dict(self.summary(), bad_rows=list(self.bad_rows))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "RowCounts":
        return cls(
            **{name: values.get(name, 0) for name in _ROW_COUNTS},
            bad_rows=list(values.get("bad_rows", [])),
        )


class BadRowLog:
    """Logs bad rows as the policy says: the first `LOGGED_BAD_ROWS`, then one line."""

    def __init__(self):
        self.count = 0

    def note(self, path: str, item: tables.TableRow, error: str) -> None:
        self.count += 1
        if self.count <= LOGGED_BAD_ROWS:
            logger.warning(
                "%s:%s: %s; the row is written with an %r field",
                path,
                item.lines,
                error,
                ERROR_FIELD,
            )
        elif self.count == LOGGED_BAD_ROWS + 1:
            logger.warning("%s: more bad rows; the rest are counted in the metadata", path)


# ------------------------------------------------------------------ metadata
def run_metadata(
    job: ScoringJob,
    *,
    inputs: Sequence[Mapping[str, Any]],
    counts: RowCounts,
    stats: Mapping[str, Any],
    this_run: Mapping[str, Any],
    settings: Mapping[str, Any],
    fingerprint: Mapping[str, Any],
    **extra: Any,
) -> dict:
    """The `<output>.meta.json` of every runner.

    Args:
      job: The job.
      inputs: Per input file: {"path", "rows", "windows"}.
      counts: The rows of the whole output (this run's and earlier ones').
      stats: `ScoringStats.summary()` of the scoring.
      this_run: {"scored", "bad", "seconds", "examples_per_second"} of this
        run (Beam adds "worker_scoring_seconds" and "counters").
      settings: The scorer's `metadata()`.
      fingerprint: `job_fingerprint`.
      **extra: "shards", "merged", "renamed_input_columns", "input_table",
        "id_field" where the runner has them (None otherwise).
    """
    unknown = set(extra) - {"shards", "merged", "renamed_input_columns", "input_table", "id_field"}
    if unknown:
        raise TypeError(f"unknown metadata keys {sorted(unknown)}")
    calibration = {"calibration": calibration_dict(job)} if job.calibration else {}
    return {
        "inputs": [dict(entry) for entry in inputs],
        "output": os.path.abspath(job.output) if _is_local(job.output) else job.output,
        "shards": extra.get("shards"),
        "merged": extra.get("merged"),
        "columns": dict(job.columns),
        "thresholds": dict(job.decisions),
        "id_field": extra.get("id_field"),
        "renamed_input_columns": dict(extra.get("renamed_input_columns") or {}),
        "input_table": extra.get("input_table"),
        "rows": counts.summary(),
        "bad_rows": list(counts.bad_rows),
        "stats": dict(stats),
        "this_run": dict(this_run),
        "settings": dict(settings),
        "fingerprint": dict(fingerprint),
        **calibration,
    }


def _is_local(path: str) -> bool:
    return "://" not in path


def read_metadata(path: str) -> Optional[dict]:
    """A `meta.json` as `run_metadata` writes it (older files' `input` and
    `this_run.stats` read into `inputs` and `stats`), or None if absent."""
    if not os.path.exists(path):
        return None
    return upgrade_metadata(read_json(path, "run metadata"))


def upgrade_metadata(meta: dict) -> dict:
    """Older metadata's keys in the current schema (new keys kept as they are)."""
    if "input" in meta and "inputs" not in meta:
        meta["inputs"] = [
            {"path": meta.pop("input"), "rows": meta.get("rows", {}).get("rows"), "windows": None}
        ]
    if "stats" not in meta and isinstance(meta.get("this_run"), dict):
        meta["stats"] = meta["this_run"].pop("stats", None)
    return meta


def raise_if_nothing_scored(meta: Mapping[str, Any]) -> None:
    """Raises `NothingScoredError` when a run had rows and scored none of them."""
    rows = meta["rows"]
    if rows["rows"] and not rows["scored"]:
        first = meta["bad_rows"][0] if meta["bad_rows"] else {}
        raise NothingScoredError(
            f"{first.get('file', '?')}: none of the {rows['rows']} rows could be scored (line "
            f"{first.get('line', '?')}: {first.get('error', '?')}); every row has an "
            f"{ERROR_FIELD!r} in {meta.get('shards') or meta['output']}"
        )


def finish_run(meta: Mapping[str, Any], output: str) -> None:
    """What a command does with a finished run's metadata: raises
    `NothingScoredError` if it scored nothing, else logs its counts and one
    line per output column with the signature of its scores
    (`scoring.signature`)."""
    raise_if_nothing_scored(meta)
    columns = meta.get("columns") or {}
    for name, signature in ((meta.get("settings") or {}).get("signatures") or {}).items():
        logger.info("signature %s: %s", columns.get(name, name), signature)
    rows, written = meta["rows"], [meta.get("shards"), meta.get("merged")]
    logger.info(
        "wrote %s (%d rows, %d bad); settings and counts in %s%s",
        " and ".join(path for path in written if path) or output,
        rows["rows"],
        rows["bad"],
        output,
        META_SUFFIX,
    )
