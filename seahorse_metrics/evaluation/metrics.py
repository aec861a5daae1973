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

A scores file (`score_files.read_score_table`) is JSONL, JSON, CSV, TSV or
plain text; its rows align with a benchmark's items by id, or by order
without an id column (see `ScoresFileMetric`).
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import logging
import os
import re
from typing import Optional, Sequence

import numpy as np

from seahorse_metrics.evaluation import baselines
from seahorse_metrics.evaluation.benchmarks import Benchmark
from seahorse_metrics.evaluation.question_metrics import SharedQuestionScores, shared_scores
from seahorse_metrics.evaluation.score_files import ScoreTable, read_score_table
from seahorse_metrics.scoring.options import CHECKPOINT_OPTIONS, options_from_spec

logger = logging.getLogger(__name__)

METRIC_KINDS = ("checkpoint", "baseline", "scores")
BASELINES = ("majority", "rougeL", "length")
_BASELINE_NAMES = {"majority": "majority", "rougeL": "ROUGE-L", "length": "length"}
_SPEC_HELP = (
    "metric specs are [NAME=]checkpoint:DIR[,long_inputs=chunk][,vocab=PATH]"
    "[,per_sentence=min|mean|share@T][,engine=ctranslate2][,quantize=int8], "
    "baseline:rougeL|majority|length, "
    "scores:FILE[:COLUMN]"
)
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
            raise ValueError(
                f"bad metric spec {text!r}: unknown baseline {argument!r}; choose from {BASELINES}"
            )
        if option and (argument != "rougeL" or option not in baselines.ROUGE_MEASURES):
            raise ValueError(
                f"bad metric spec {text!r}: only rougeL takes an option, one of "
                f"{baselines.ROUGE_MEASURES}"
            )
        default_name = _BASELINE_NAMES[argument] + (f"-{option}" if option else "")
    elif kind == "scores":
        head, sep, tail = rest.rpartition(":")
        # FILE:COLUMN when FILE exists (paths may themselves contain ':').
        if sep and head and not os.path.exists(rest) and os.path.exists(head):
            argument, option = head, tail
        default_name = os.path.splitext(os.path.basename(argument))[0] + (
            f":{option}" if option else ""
        )
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

    def score_pairs(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        questions: Optional[Sequence[Optional[str]]] = None,
    ) -> np.ndarray:
        """Scores pairs (with the question of each query-focused summary, None
        entries for generic ones); only for `content_only` metrics."""
        raise TypeError(f"metric {self.name} scores whole benchmarks only")

    def score_benchmark(self, benchmark: Benchmark) -> np.ndarray:
        """Scores every item of a benchmark, in item order.

        Raises:
          MetricNotApplicable: The metric has no scores for this benchmark.
        """
        return self.score_pairs(
            [i.premise for i in benchmark.items],
            [i.hypothesis for i in benchmark.items],
            [i.question for i in benchmark.items],
        )


class CheckpointMetric(Metric):
    """A learnt metric: P("1") from `seahorse_metrics.Scorer`.

    The Scorer (and JAX) are imported and the checkpoint loaded on first use,
    so evaluating only baselines or scores files never needs them.
    """

    def __init__(
        self,
        spec: MetricSpec,
        threshold: Optional[float],
        *,
        vocab_path: Optional[str] = None,
        batch_size: int = 32,
    ):
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
        from seahorse_metrics.checkpoints.layout import question_prefixes

        settings = [list(s) for s in self.spec.settings]
        # The questions of one multi-question checkpoint are different metrics.
        column = [["question", self.name]] if question_prefixes(self.path) is not None else []
        return _digest(
            ["checkpoint", os.path.abspath(self.path), content_digest(self.path), self.vocab_path]
            + ([settings] if settings else [])
            + column
        )

    def provenance(self) -> dict:
        if self._scorer is None:
            return {"signature": None}
        shared = isinstance(self._scorer, SharedQuestionScores)  # a multi-question checkpoint
        described = (self._scorer.scorer if shared else self._scorer).metadata()
        # Both are loaded unnamed: the checkpoint is "score", a question its column.
        found = {"signature": described["signatures"][self.name if shared else "score"]}
        if "int8_check" in described:
            found["int8_check"] = described["int8_check"]["score"]
        return found

    def score_pairs(self, premises, hypotheses, questions=None):
        questions = None if questions is None else list(questions)
        if self._scorer is None:
            from seahorse_metrics import Scorer

            logger.info("loading checkpoint %s for metric %s", self.path, self.name)
            kwargs = {"vocab": self.vocab_path, **options_from_spec(self.spec.settings)}
            self._scorer = shared_scores(self.path, kwargs) or Scorer.load(self.path, **kwargs)
        if isinstance(self._scorer, SharedQuestionScores):
            return self._scorer.scores(self.name, premises, hypotheses, questions, self.batch_size)
        scores = self._scorer.score(
            list(premises), list(hypotheses), batch_size=self.batch_size, questions=questions
        )
        return np.asarray(scores, dtype=np.float64)


class BaselineMetric(Metric):
    """One of the paper's baselines (see `seahorse_metrics.evaluation.baselines`)."""

    def __init__(
        self, spec: MetricSpec, threshold: Optional[float], *, vocab_path: Optional[str] = None
    ):
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
                premises,
                hypotheses,
                vocab_path=self.vocab_path,
                measure=self.spec.option or "fmeasure",
                progress=len(premises) > 200,
            )
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


class ScoresFileMetric(Metric):
    """Precomputed scores of any metric, aligned by id or row order."""

    content_only = False

    def __init__(self, spec: MetricSpec, threshold: Optional[float]):
        super().__init__(spec, threshold)
        if not os.path.isfile(spec.argument):
            raise FileNotFoundError(f"metric {spec.name}: scores file {spec.argument} not found")
        self._table: Optional[ScoreTable] = None

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
        by_column = {
            (meta.get("columns") or {}).get(name, name): signature
            for name, signature in signatures.items()
        }
        column = self.spec.option or (next(iter(by_column)) if len(by_column) == 1 else None)
        return {"signature": by_column.get(column)}

    @property
    def table(self) -> ScoreTable:
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
                    f"has {len(benchmark)} items (add an id column to align by id)"
                )
            return np.array(table.scores, dtype=np.float64)
        if table.benchmarks is not None:
            lookup = {
                i: s
                for b, i, s in zip(table.benchmarks, table.ids, table.scores)
                if b == benchmark.name
            }
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


def build_metric(
    spec: MetricSpec,
    *,
    threshold: Optional[float] = 0.5,
    vocab_path: Optional[str] = None,
    batch_size: int = 32,
) -> Metric:
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
