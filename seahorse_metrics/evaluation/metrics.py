"""Metrics to meta-evaluate: learnt checkpoints, baselines, precomputed scores.

A metric spec is `[NAME=]KIND:ARG[:OPTION]`::

    checkpoint:DIR[,OPTION=VALUE...]  scored with `seahorse_metrics.Scorer` (P("1")); DIR may
                                      be a Hugging Face hub id (google/seahorse-xxl-q4)
    baseline:majority          majority class of the benchmark's labels
    baseline:rougeL[:MEASURE]  ROUGE-L article vs summary, fmeasure|precision|recall
    baseline:length            summary length in SentencePiece pieces
    scores:FILE[:COLUMN]       precomputed scores of any external metric

Checkpoint options are the scorer's modes: `long_inputs=truncate|chunk`
(chunk: overlapping article windows, max over them), `per_sentence=min|mean|
share@T` (score each summary sentence; min, mean, or BooookScore's share of
sentences scored at or above T), `normalize=full|pair`, `max_input_length=N`
and `long_summaries=error|cut` (a summary leaving its article less than a
quarter of the input stops the evaluation, or is cut; see `score`), e.g.
`checkpoint:runs/q4,long_inputs=chunk,per_sentence=share@0.5`;
`vocab=PATH` gives that checkpoint's SentencePiece model (over `--vocab`).
A pair with a question (a query-focused summary) is scored with it.

`NAME=` sets the row label (default: the checkpoint directory name,
`ROUGE-L`, `majority`, `length`, or the scores file name).

A scores file is JSONL, JSON (a list of objects), CSV or TSV with a header,
or plain text with one number per line. The score column is COLUMN, else
`score`, else the only numeric column that is not an id/label/rating field.
With an `id` column, scores are aligned to items by id (and by `benchmark`
too when that column exists, so one file can hold several benchmarks); a
benchmark whose ids are all absent is not covered by the metric (an error,
unless partial coverage is allowed: then it is reported as not covered), one
with some ids missing is an error. Without an `id` column, rows align by
order and apply only to a benchmark with exactly as many items (use ids when
evaluating several benchmarks). A row with an `error` (as `seahorse-metrics
score` writes for a row it could not score) has no score: NaN.
"""
from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import logging
import math
import os
import re
from typing import Optional, Sequence

import numpy as np

from seahorse_metrics.evaluation import baselines
from seahorse_metrics.evaluation.benchmarks import Benchmark
from seahorse_metrics.scoring.options import CHECKPOINT_OPTIONS, options_from_spec

logger = logging.getLogger(__name__)

METRIC_KINDS = ("checkpoint", "baseline", "scores")
BASELINES = ("majority", "rougeL", "length")
_BASELINE_NAMES = {"majority": "majority", "rougeL": "ROUGE-L", "length": "length"}
# Fields of a scores file that are never the score itself.
_NON_SCORE_FIELDS = frozenset({
    "id", "gem_id", "benchmark", "label", "rating", "lang", "source", "system",
    "premise", "hypothesis", "article", "summary", "grounding", "generated_text",
    # The bookkeeping and ratings of a prepared SEAHORSE split.
    "line", "split", "q1", "q2", "q3", "q4", "q5", "q6", "error",
})
_ERROR_FIELD = "error"
_SPEC_HELP = ("metric specs are [NAME=]checkpoint:DIR[,long_inputs=chunk][,vocab=PATH]"
              "[,per_sentence=min|mean|share@T][,engine=ctranslate2][,quantize=int8], "
              "baseline:rougeL|majority|length, "
              "scores:FILE[:COLUMN]")
# Scorer settings a checkpoint spec may set, and how each is read.
_CHECKPOINT_OPTION = re.compile(r",(?=(?:%s)=)" % "|".join(CHECKPOINT_OPTIONS))


class MetricNotApplicable(Exception):
    """The metric has no scores for a benchmark (e.g. the majority class of a
    benchmark without binary labels)."""


class MetricNotAligned(MetricNotApplicable):
    """A scores file has no scores that line up with a benchmark's items: an
    error unless the run allows partial coverage."""


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """A parsed metric spec.

    Attributes:
      name: Row label in the report.
      kind: One of `METRIC_KINDS`.
      argument: Checkpoint directory, baseline name or scores file.
      option: Scores column or ROUGE measure, if given.
      text: The spec as written.
      settings: Checkpoint options as (key, value) pairs (`CHECKPOINT_OPTIONS`).
    """

    name: str
    kind: str
    argument: str
    option: Optional[str]
    text: str
    settings: tuple = ()


def parse_metric_spec(text: str) -> MetricSpec:
    """Parses `[NAME=]KIND:ARG[:OPTION]` (see the module docstring).

    Raises:
      ValueError: Unknown kind or baseline, or a missing argument.
    """
    name = None
    body = text
    head = text.split(":", 1)[0]
    if "=" in head:
        name, body = text.split("=", 1)
        name = name.strip()
        if not name:
            raise ValueError(f"bad metric spec {text!r}: empty NAME before '='")
    kind, sep, rest = body.partition(":")
    if not sep or kind not in METRIC_KINDS or not rest:
        raise ValueError(f"bad metric spec {text!r}: {_SPEC_HELP}")
    argument, option, settings = rest, None, ()
    if kind == "baseline":
        argument, _, option = rest.partition(":")
        option = option or None
        if argument not in BASELINES:
            raise ValueError(f"bad metric spec {text!r}: unknown baseline {argument!r}; "
                             f"choose from {BASELINES}")
        if option and (argument != "rougeL" or option not in baselines.ROUGE_MEASURES):
            raise ValueError(f"bad metric spec {text!r}: only rougeL takes an option, one of "
                             f"{baselines.ROUGE_MEASURES}")
        default_name = _BASELINE_NAMES[argument] + (f"-{option}" if option else "")
    elif kind == "scores":
        head, sep, tail = rest.rpartition(":")
        # FILE:COLUMN when FILE exists (paths may themselves contain ':').
        if sep and head and not os.path.exists(rest) and os.path.exists(head):
            argument, option = head, tail
        default_name = os.path.splitext(os.path.basename(argument))[0] + (
            f":{option}" if option else "")
    else:
        argument, settings = _checkpoint_settings(rest, text)
        default_name = os.path.basename(os.path.normpath(argument))
    return MetricSpec(name or default_name, kind, argument, option, text, settings)


def _checkpoint_settings(rest: str, text: str) -> tuple[str, tuple]:
    """DIR and its `key=value` options, checked (see `CHECKPOINT_OPTIONS`)."""
    from seahorse_metrics.scoring.units import InputSettings

    argument, *tokens = _CHECKPOINT_OPTION.split(rest)
    settings = dict(token.split("=", 1) for token in tokens)
    if len(settings) != len(tokens):
        raise ValueError(f"bad metric spec {text!r}: an option is given twice")
    try:
        kwargs = options_from_spec(tuple(settings.items()))
        for loading in ("vocab", "engine", "quantize"):
            kwargs.pop(loading, None)
        InputSettings(**kwargs)
    except ValueError as error:
        raise ValueError(f"bad metric spec {text!r}: {error}") from None
    return argument, tuple(sorted(settings.items()))


def _stat_signature(path: str) -> list:
    """(relative path, size, mtime) of a file or every file under a directory."""
    if os.path.isfile(path):
        stat = os.stat(path)
        return [[os.path.basename(path), stat.st_size, stat.st_mtime_ns]]
    entries = []
    for root, _, files in os.walk(path):
        for file in sorted(files):
            full = os.path.join(root, file)
            stat = os.stat(full)
            entries.append([os.path.relpath(full, path), stat.st_size, stat.st_mtime_ns])
    return sorted(entries)


def _digest(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:20]


class Metric(abc.ABC):
    """Something that scores a benchmark's items.

    Attributes:
      spec: The parsed spec.
      threshold: Decision threshold for accuracy (`score >= threshold` = yes),
        or None when the scores are not on a probability-like scale.
      content_only: The score of an item depends only on its premise and
        hypothesis, so scores can be shared between benchmarks holding the
        same pair.
      cacheable: Scores may be stored in the score cache (false when they
        depend on the judgments, which the cache key does not cover).
    """

    content_only = True
    cacheable = True

    def __init__(self, spec: MetricSpec, threshold: Optional[float]):
        self.spec = spec
        self.threshold = threshold

    @property
    def name(self) -> str:
        return self.spec.name

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """Cache key: changes whenever the scores could change."""

    def provenance(self) -> dict:
        """What produced the scores this run scored: {"signature": ...} (see
        `scoring.signature`), with "int8_check" for int8 checkpoints."""
        return {"signature": None}

    def score_pairs(self, premises: Sequence[str], hypotheses: Sequence[str],
                    questions: Optional[Sequence[Optional[str]]] = None) -> np.ndarray:
        """Scores pairs (with the question of each query-focused summary, None
        entries for generic ones); only for `content_only` metrics."""
        raise TypeError(f"metric {self.name} scores whole benchmarks only")

    def score_benchmark(self, benchmark: Benchmark) -> np.ndarray:
        """Scores every item of a benchmark, in item order.

        Raises:
          MetricNotApplicable: The metric has no scores for this benchmark.
        """
        return self.score_pairs([i.premise for i in benchmark.items],
                                [i.hypothesis for i in benchmark.items],
                                [i.question for i in benchmark.items])


class CheckpointMetric(Metric):
    """A learnt metric: P("1") from `seahorse_metrics.Scorer`.

    The Scorer (and JAX) are imported and the checkpoint loaded on first use,
    so evaluating only baselines or scores files never needs them.
    """

    def __init__(self, spec: MetricSpec, threshold: Optional[float], *,
                 vocab_path: Optional[str] = None, batch_size: int = 32):
        super().__init__(spec, threshold)
        from seahorse_metrics.checkpoints.hub import resolve_checkpoint

        # A directory, or a Hugging Face hub id resolved through the hub cache.
        self.path = resolve_checkpoint(spec.argument)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"metric {spec.name}: checkpoint {spec.argument} not found")
        self.vocab_path = vocab_path
        self.batch_size = batch_size
        self._scorer = None

    def fingerprint(self) -> str:
        # The checkpoint by its content (a replaced checkpoint is rescored even with the
        # same sizes and times); the digest is cached beside it, so this stays cheap.
        from seahorse_metrics.checkpoints.content import content_digest

        settings = [list(s) for s in self.spec.settings]
        return _digest(["checkpoint", os.path.abspath(self.path), content_digest(self.path),
                        self.vocab_path] + ([settings] if settings else []))

    def provenance(self) -> dict:
        if self._scorer is None:
            return {"signature": None}
        described = self._scorer.metadata()
        found = {"signature": described["signatures"]["score"]}
        if "int8_check" in described:
            found["int8_check"] = described["int8_check"]["score"]
        return found

    def score_pairs(self, premises, hypotheses, questions=None):
        if self._scorer is None:
            from seahorse_metrics import Scorer

            logger.info("loading checkpoint %s for metric %s", self.path, self.name)
            kwargs = {"vocab": self.vocab_path, **options_from_spec(self.spec.settings)}
            self._scorer = Scorer.load(self.path, **kwargs)
        scores = self._scorer.score(list(premises), list(hypotheses), batch_size=self.batch_size,
                                    questions=None if questions is None else list(questions))
        return np.asarray(scores, dtype=np.float64)


class BaselineMetric(Metric):
    """One of the paper's baselines (see `seahorse_metrics.evaluation.baselines`)."""

    def __init__(self, spec: MetricSpec, threshold: Optional[float], *,
                 vocab_path: Optional[str] = None):
        # Length and ROUGE-L are not probabilities: no accuracy threshold.
        super().__init__(spec, threshold if spec.argument == "majority" else None)
        self.vocab_path = vocab_path
        self.content_only = self.cacheable = spec.argument != "majority"

    def fingerprint(self) -> str:
        vocab = None
        if self.content_only:
            path = self.vocab_path or str(_default_vocab())
            vocab = [os.path.abspath(path), _stat_signature(path)]
        return _digest(["baseline", self.spec.argument, self.spec.option, vocab])

    def provenance(self) -> dict:
        from seahorse_metrics import __version__

        option = f":{self.spec.option}" if self.spec.option else ""
        return {"signature": f"seahorse:{__version__}|baseline:{self.spec.argument}{option}"}

    def score_pairs(self, premises, hypotheses, questions=None):
        # The baselines compare summary and article; a question does not change them.
        if self.spec.argument == "rougeL":
            return baselines.rouge_l_scores(
                premises, hypotheses, vocab_path=self.vocab_path,
                measure=self.spec.option or "fmeasure", progress=len(premises) > 200)
        if self.spec.argument == "length":
            return baselines.length_scores(hypotheses, vocab_path=self.vocab_path)
        return super().score_pairs(premises, hypotheses)

    def score_benchmark(self, benchmark):
        if self.spec.argument == "majority":
            if not benchmark.has_labels:
                raise MetricNotApplicable(f"{benchmark.name} has no binary labels")
            return baselines.majority_scores([i.label for i in benchmark.items])
        return super().score_benchmark(benchmark)


def _default_vocab():
    from seahorse_metrics.data.vocab import default_vocab_path

    return default_vocab_path()


@dataclasses.dataclass(frozen=True)
class _ScoreTable:
    """A scores file read into memory."""

    column: str
    scores: list  # float per row, NaN for an empty cell
    ids: Optional[list]
    benchmarks: Optional[list]


def _row_error(row: dict) -> Optional[str]:
    """The row's `error` (as `seahorse-metrics score` writes it), or None."""
    value = row.get(_ERROR_FIELD)
    return None if value in (None, "") else str(value)


def _row_score(row: dict, column: str, path: str, number: int) -> float:
    """The row's score; NaN when the row has an error (a stale score beside
    an error is never read)."""
    if _row_error(row):
        return math.nan
    return _parse_number(row.get(column), path, number, column)


def _parse_number(value, path: str, row: int, column: str) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: row {row}: {column}={value!r} is not a number") from None


def _read_rows(path: str, encoding: str = "utf-8") -> list[dict]:
    """The rows of a scores file: a table (see `seahorse_metrics.data.tables`)
    or plain text with one number per line; a malformed row is an error."""
    from seahorse_metrics.data import tables

    if os.path.splitext(path)[1].lower() not in tables.TEXT_FORMATS:
        return [{"score": text.strip()} for _, text in tables.text_lines(path, encoding)
                if text.strip()]
    rows, _ = tables.read_table_rows(path, encoding=encoding)
    for row in rows:
        if row.error is not None:
            raise ValueError(f"{path}:{row.lines}: {row.error}")
    return [row.record for row in rows]


def _choose_column(rows: list[dict], requested: Optional[str], path: str) -> str:
    columns = list(dict.fromkeys(key for row in rows[:100] for key in row))
    if requested:
        if requested not in columns:
            raise ValueError(f"{path}: no column {requested!r}; columns are {columns}")
        return requested
    if "score" in columns:
        return "score"
    numeric = []
    for column in columns:
        if column in _NON_SCORE_FIELDS:
            continue
        try:
            [float(row[column]) for row in rows[:100] if row.get(column) not in (None, "")]
        except (TypeError, ValueError):
            continue
        numeric.append(column)
    if len(numeric) != 1:
        raise ValueError(
            f"{path}: cannot tell which column holds the scores (numeric candidates: "
            f"{numeric}); name it as scores:{path}:COLUMN"
        )
    return numeric[0]


def _prepared_ids(rows: list[dict]) -> Optional[list]:
    """The SEAHORSE benchmark ids (`gem_id|system|line`) of rows that carry
    the fields of a prepared split (`seahorse-metrics score` keeps them), so
    that scoring `prepared/test.jsonl` and evaluating on `seahorse:prepared`
    line up without an id column; None when a row lacks one of them."""
    fields = ("gem_id", "system", "line")
    if not all(row.get(field) not in (None, "") for row in rows for field in fields):
        return None
    return [f"{row['gem_id']}|{row['system']}|{row['line']}" for row in rows]


def read_score_table(path: str, column: Optional[str] = None) -> _ScoreTable:
    """Reads a scores file (see the module docstring for formats).

    Raises:
      FileNotFoundError: No such file.
      ValueError: Malformed rows (file and row named), ambiguous column,
        or an id given twice.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"scores file {path} not found")
    rows = _read_rows(path)
    if not rows:
        raise ValueError(f"{path}: no rows")
    chosen = _choose_column(rows, column, path)
    scores = [_row_score(row, chosen, path, number) for number, row in enumerate(rows, start=1)]
    failed = [number for number, row in enumerate(rows, start=1) if _row_error(row)]
    if failed:
        logger.warning("%s: %d rows have an %r (first: row %d: %s) and no score; they count as "
                       "NaN (--drop_nan leaves them out)", path, len(failed), _ERROR_FIELD,
                       failed[0], _row_error(rows[failed[0] - 1]))
    has_ids = all(row.get("id") not in (None, "") for row in rows)
    ids = [str(row["id"]) for row in rows] if has_ids else _prepared_ids(rows)
    has_ids = ids is not None
    benchmarks = ([str(row.get("benchmark", "")) for row in rows]
                  if has_ids and any("benchmark" in row for row in rows) else None)
    if ids is not None:
        keys = list(zip(benchmarks or [""] * len(ids), ids))
        seen: dict = {}
        for number, key in enumerate(keys, start=1):
            if key in seen:
                raise ValueError(f"{path}: row {number} repeats id {key[1]!r} of row {seen[key]}")
            seen[key] = number
    return _ScoreTable(chosen, scores, ids, benchmarks)


class ScoresFileMetric(Metric):
    """Precomputed scores of any metric, aligned by id or row order."""

    content_only = False

    def __init__(self, spec: MetricSpec, threshold: Optional[float]):
        super().__init__(spec, threshold)
        if not os.path.isfile(spec.argument):
            raise FileNotFoundError(f"metric {spec.name}: scores file {spec.argument} not found")
        self._table: Optional[_ScoreTable] = None

    def fingerprint(self) -> str:
        with open(self.spec.argument, "rb") as handle:
            content = hashlib.sha256(handle.read()).hexdigest()
        return _digest(["scores", content, self.spec.option])

    def provenance(self) -> dict:
        """The signature `score` wrote for this column into `<file>.meta.json`."""
        from seahorse_metrics.scoring.job import META_SUFFIX, read_metadata

        try:
            meta = read_metadata(self.spec.argument + META_SUFFIX) or {}
        except (OSError, ValueError):
            meta = {}
        signatures = (meta.get("settings") or {}).get("signatures") or {}
        by_column = {(meta.get("columns") or {}).get(name, name): signature
                     for name, signature in signatures.items()}
        column = self.spec.option or (next(iter(by_column)) if len(by_column) == 1 else None)
        return {"signature": by_column.get(column)}

    @property
    def table(self) -> _ScoreTable:
        if self._table is None:
            self._table = read_score_table(self.spec.argument, self.spec.option)
        return self._table

    def score_benchmark(self, benchmark):
        table = self.table
        path = self.spec.argument
        if table.ids is None:
            if len(table.scores) != len(benchmark):
                raise MetricNotAligned(
                    f"{path} has {len(table.scores)} rows and no id column; {benchmark.name} "
                    f"has {len(benchmark)} items (add an id column to align by id)")
            return np.array(table.scores, dtype=np.float64)
        if table.benchmarks is not None:
            lookup = {i: s for b, i, s in zip(table.benchmarks, table.ids, table.scores)
                      if b == benchmark.name}
        else:
            lookup = dict(zip(table.ids, table.scores))
        missing = [item_id for item_id in benchmark.ids if item_id not in lookup]
        if len(missing) == len(benchmark):
            raise MetricNotAligned(f"{path} has no scores for the ids of {benchmark.name}")
        if missing:
            raise ValueError(
                f"{path}: no score for {len(missing)} of {len(benchmark)} items of "
                f"{benchmark.name} (first missing id: {missing[0]!r}); score every item"
            )
        return np.array([lookup[item_id] for item_id in benchmark.ids], dtype=np.float64)


def build_metric(spec: MetricSpec, *, threshold: Optional[float] = 0.5,
                 vocab_path: Optional[str] = None, batch_size: int = 32) -> Metric:
    """Creates the metric a spec describes.

    Args:
      spec: A parsed spec.
      threshold: Accuracy threshold for checkpoint and scores-file metrics
        (baselines other than majority have none).
      vocab_path: SentencePiece model for the checkpoint and the baselines;
        None = their defaults.
      batch_size: Scorer batch size.
    """
    if spec.kind == "checkpoint":
        return CheckpointMetric(spec, threshold, vocab_path=vocab_path, batch_size=batch_size)
    if spec.kind == "baseline":
        return BaselineMetric(spec, threshold, vocab_path=vocab_path)
    return ScoresFileMetric(spec, threshold)


def build_metrics(texts: Sequence[str], **kwargs) -> list[Metric]:
    """Parses and builds metrics; names must be unique.

    Raises:
      ValueError: Malformed spec or duplicate names.
    """
    metrics = [build_metric(parse_metric_spec(text), **kwargs) for text in texts]
    names = [m.name for m in metrics]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"metric names occur twice: {duplicates}; name them with NAME=SPEC")
    return metrics
