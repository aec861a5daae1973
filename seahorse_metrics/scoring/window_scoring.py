"""Windows of examples -> length-bucketed batches -> per-example scores.

`WindowScorer.run` takes the examples in windows (the caller decides
where windows start, so a resumed run can reproduce them), turns every
example into units (`units.encode_example`), plans each window's batches
(`batching.batch_window`), and scores every batch with each model. The next
batch is dispatched before the previous one is read back, so the host
tokenises and pads while the devices compute. Results are yielded per
finished batch, for the examples whose units are all scored (completion
order; `in_input_order` restores input order).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Hashable, Iterable, Iterator, Optional, Sequence

import numpy as np

from seahorse_metrics.data.inputs import SummaryTooLongError, Tokenizer, TruncationStats
from seahorse_metrics.engines.base import Engine
from seahorse_metrics.engines.question_columns import shared_calls
from seahorse_metrics.scoring import units as units_lib
from seahorse_metrics.scoring.batching import Batch, BatchingConfig, batch_window

logger = logging.getLogger(__name__)

_STATS_COUNTS = (
    "examples",
    "model_inputs",
    "chunked_examples",
    "real_tokens",
    "batch_tokens",
    "batches",
)
_TRUNCATION_COUNTS = ("count", "truncated", "hypothesis_cut")


@dataclasses.dataclass(frozen=True)
class Example:
    """One (premise, hypothesis) pair to score.

    Attributes:
      key: The caller's id of the example (e.g. its row), returned with the result.
      premise: The article (grounding text).
      hypothesis: The summary.
      lang: Language code, for the truncation counts by language.
      question: The question a query-focused summary answers, or None.
    """

    key: Hashable
    premise: str
    hypothesis: str
    lang: Optional[str] = None
    question: Optional[str] = None


@dataclasses.dataclass
class ExampleResult:
    """The scores of one example.

    Attributes:
      key: `Example.key`.
      scores: float64 [models]: the aggregated score per model.
      sentence_scores: float64 [models, sentences] with `per_sentence`, else None.
      sentences: The summary sentences with `per_sentence`, else None.
      num_units: Encoder inputs scored for the example.
      chunked: Whether its premise was split into chunks.
      truncated: Whether any of its inputs was cut.
      summary_cut: With `long_summaries="cut"`, whether its summary was cut
        to leave the article its share; else None.
      error: Why it was not scored (its scores are NaN), or None.
    """

    key: Hashable
    scores: np.ndarray
    sentence_scores: Optional[np.ndarray]
    sentences: Optional[list[str]]
    num_units: int
    chunked: bool
    truncated: bool
    summary_cut: Optional[bool] = None
    error: Optional[str] = None


@dataclasses.dataclass
class ScoringStats:
    """What scoring did: truncation and batching counts.

    Attributes:
      truncation: Truncation counts per encoder input (by language).
      examples: Examples scored.
      model_inputs: Encoder inputs scored (more than examples when chunking
        or scoring per sentence).
      chunked_examples: Examples whose premise was split into chunks.
      real_tokens: Non-padding tokens of the batches.
      batch_tokens: All tokens of the batches, padding included.
      batches: Batches run (per model).
    """

    truncation: TruncationStats = dataclasses.field(default_factory=TruncationStats)
    examples: int = 0
    model_inputs: int = 0
    chunked_examples: int = 0
    real_tokens: int = 0
    batch_tokens: int = 0
    batches: int = 0

    def summary(self) -> dict:
        """A JSON-ready report."""
        return {
            "examples": self.examples,
            "model_inputs": self.model_inputs,
            "chunked_examples": self.chunked_examples,
            "truncation": self.truncation.summary(),
            "batches": self.batches,
            "padding_fraction": (
                1.0 - self.real_tokens / self.batch_tokens if self.batch_tokens else 0.0
            ),
        }

    def merge(self, other: "ScoringStats") -> "ScoringStats":
        """Adds `other`'s counts to these; returns self."""
        self.truncation.merge(other.truncation)
        for name in _STATS_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def to_dict(self) -> dict:
        """Every count, JSON-ready (`from_dict` reads it back; `summary` is the report)."""
        truncation = self.truncation
        return {
            **{name: getattr(self, name) for name in _STATS_COUNTS},
            "truncation": {
                **{name: getattr(truncation, name) for name in _TRUNCATION_COUNTS},
                "by_language": {
                    lang: dict(counts) for lang, counts in truncation.by_language.items()
                },
            },
        }

    @classmethod
    def from_dict(cls, values: dict) -> "ScoringStats":
        """The counts `to_dict` wrote."""
        stats = cls(**{name: values[name] for name in _STATS_COUNTS})
        truncation = values["truncation"]
        stats.truncation = TruncationStats(
            **{name: truncation[name] for name in _TRUNCATION_COUNTS}
        )
        for lang, counts in truncation["by_language"].items():
            stats.truncation.by_language[lang].update(counts)
        return stats

    def log(self, max_input_length: int) -> None:
        """Logs the truncation counts (a warning when anything was cut)."""
        self.truncation.log("scoring", max_input_length)
        if self.chunked_examples:
            logger.info(
                "scoring: %d of %d examples were split into premise chunks",
                self.chunked_examples,
                self.examples,
            )


@dataclasses.dataclass
class _Window:
    """Scoring state of one window."""

    examples: list[Example]
    encoded: list[units_lib.EncodedExample]
    log_probs: list[np.ndarray]  # per example: float32 [models, units, 2]
    remaining: list[int]  # per example: units not scored yet
    failed: list[ExampleResult]  # examples that cannot be scored, with their error


class WindowScorer:
    """Scores examples with one or more models sharing a tokenizer and mesh."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        engines: Sequence[Engine],
        settings: units_lib.InputSettings,
        batching: BatchingConfig,
        pad_id: int,
    ):
        """Args:
          tokenizer: The models' SentencePiece tokenizer.
          engines: One per model; all on the same mesh.
          settings: Input and aggregation settings.
          batching: Batch shapes (rows a multiple of the data-parallel devices).
          pad_id: Padding id of the models.

        Raises:
          ValueError: if the engines' meshes differ or the batch rows do not
            split over the devices.
        """
        if not engines:
            raise ValueError("need at least one engine")
        if any(r.mesh != engines[0].mesh for r in engines[1:]):
            raise ValueError("all models must run on the same device mesh")
        if batching.row_multiple % engines[0].data_parallel:
            raise ValueError(
                f"batch rows must be a multiple of the {engines[0].data_parallel} "
                f"data-parallel devices, got row_multiple={batching.row_multiple}"
            )
        self.tokenizer = tokenizer
        self.engines = list(engines)
        self.settings = settings
        self.batching = batching
        self.pad_id = pad_id

    def run(
        self, windows: Iterable[Sequence[Example]], stats: Optional[ScoringStats] = None
    ) -> Iterator[list[ExampleResult]]:
        """Scores windows of examples.

        Args:
          windows: Groups of examples sorted and batched together.
          stats: Accumulates truncation and batching counts.

        Yields:
          After each batch, the results of the examples it completed; once a
          window is encoded, those of its examples that cannot be scored (a
          summary that would crowd out the article), with their `error`.
        """
        stats = stats if stats is not None else ScoringStats()
        in_flight = collections.deque()
        computing_at_once = max(engine.batches_at_once for engine in self.engines)
        for window, batch in self._batches(windows, stats):
            if batch is None:  # The window's examples that cannot be scored.
                yield window.failed
                continue
            in_flight.append((window, batch, self._dispatch(batch)))
            stats.batches += 1
            stats.real_tokens += batch.real_tokens
            stats.batch_tokens += batch.tokens.size
            # One batch queued behind those computing keeps the devices busy.
            if len(in_flight) > computing_at_once:
                yield self._finish(*in_flight.popleft())
        while in_flight:
            yield self._finish(*in_flight.popleft())

    def _dispatch(self, batch: Batch) -> list:
        """Starts every model on `batch` (packed batches with their segment ids)."""
        tokens = self.engines[0].put(batch.tokens)
        # The columns of a multi-question metric share one call (one encoder pass).
        if batch.segment_ids is None:
            return shared_calls(self.engines, lambda engine: engine(tokens))
        segments = self.engines[0].put(batch.segment_ids)
        return shared_calls(self.engines, lambda engine: engine(tokens, segments, batch.slots))

    def _encode_window(self, examples: Sequence[Example], stats: ScoringStats) -> _Window:
        encoded, kept, failed = [], [], []
        for example in examples:
            try:
                item = units_lib.encode_example(
                    self.tokenizer,
                    example.premise,
                    example.hypothesis,
                    self.settings,
                    example.question,
                )
            except SummaryTooLongError as error:
                failed.append(self._failed(example, str(error)))
                continue
            kept.append(example)
            for pair in item.pairs:
                stats.truncation.add(pair, example.lang)
            stats.examples += 1
            stats.model_inputs += len(item.units)
            stats.chunked_examples += int(item.chunked)
            encoded.append(item)
        models = len(self.engines)
        return _Window(
            kept,
            encoded,
            [np.zeros((models, len(e.units), 2), np.float32) for e in encoded],
            [len(e.units) for e in encoded],
            failed,
        )

    def _failed(self, example: Example, error: str) -> ExampleResult:
        return ExampleResult(
            key=example.key,
            scores=np.full(len(self.engines), np.nan),
            sentence_scores=None,
            sentences=None,
            num_units=0,
            chunked=False,
            truncated=True,
            error=error,
        )

    def _batches(
        self, windows: Iterable[Sequence[Example]], stats: ScoringStats
    ) -> Iterator[tuple[_Window, Batch]]:
        for examples in windows:
            if not examples:
                continue
            window = self._encode_window(examples, stats)
            if window.failed:
                yield window, None
            keyed = [
                ((position, unit), ids)
                for position, item in enumerate(window.encoded)
                for unit, ids in enumerate(item.units)
            ]
            for batch in batch_window(keyed, self.batching, self.pad_id):
                yield window, batch

    def _finish(self, window: _Window, batch: Batch, outputs: list) -> list[ExampleResult]:
        # Waits for the devices; packed outputs [rows, slots, 2] go slot by slot.
        log_probs = [
            engine.read(output).reshape(-1, 2) for engine, output in zip(self.engines, outputs)
        ]
        finished = []
        for row, key in enumerate(batch.keys):
            if key is None:  # An empty slot of a packed row.
                continue
            position, unit = key
            for model, values in enumerate(log_probs):
                window.log_probs[position][model, unit] = values[row]
            window.remaining[position] -= 1
            if window.remaining[position] == 0:
                finished.append(self._result(window, position))
        return finished

    def _result(self, window: _Window, position: int) -> ExampleResult:
        item = window.encoded[position]
        log_probs = window.log_probs[position]
        num_sentences = len(item.sentences) if item.sentences is not None else 1
        scores, sentence_scores = [], []
        for model in range(len(self.engines)):
            unit_scores = units_lib.unit_scores(
                log_probs[model, :, 0], log_probs[model, :, 1], self.settings.normalize
            )
            score, per_sentence = units_lib.aggregate(
                unit_scores, item.sentence_of_unit, num_sentences, self.settings.sentence_aggregate
            )
            scores.append(score)
            sentence_scores.append(per_sentence)
        # The window keeps only what is still needed.
        window.log_probs[position] = None
        return ExampleResult(
            key=window.examples[position].key,
            scores=np.asarray(scores),
            sentence_scores=np.stack(sentence_scores) if item.sentences is not None else None,
            sentences=item.sentences,
            num_units=len(item.units),
            chunked=item.chunked,
            truncated=any(p.truncated for p in item.pairs),
            summary_cut=item.summary_cut if self.settings.long_summaries == "cut" else None,
        )


def in_input_order(
    results: Iterable[list[ExampleResult]], pending_keys: "collections.deque[Hashable]"
) -> Iterator[ExampleResult]:
    """Re-orders batched results into input order.

    Args:
      results: `WindowScorer.run` output.
      pending_keys: Keys of the examples fed to the pipeline and not yet
        returned, oldest first; the feeder appends as it reads examples.

    Yields:
      Results in the order of `pending_keys`, holding back only those that
      arrived before an earlier example's.

    Raises:
      RuntimeError: if the pipeline dropped or invented an example (a bug).
    """
    waiting: dict[Hashable, ExampleResult] = {}
    for group in results:
        for result in group:
            waiting[result.key] = result
        while pending_keys and pending_keys[0] in waiting:
            yield waiting.pop(pending_keys.popleft())
    if pending_keys or waiting:
        raise RuntimeError(
            f"scoring ended with {len(pending_keys)} examples unscored and "
            f"{len(waiting)} unexpected; this is a bug"
        )
