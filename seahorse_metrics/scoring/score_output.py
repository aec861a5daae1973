"""`ScoreOutput`: the scores of a list of pairs held in memory (what
`MultiScorer.score_detailed` returns), and the collection of a scoring run's
results into it, in input order."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Optional, Sequence

import numpy as np

from seahorse_metrics.data.inputs import SummaryTooLongError
from seahorse_metrics.scoring.window_scoring import ExampleResult, ScoringStats


@dataclasses.dataclass
class ScoreOutput:
    """Scores of a list of pairs with everything that describes them.

    Attributes:
      scores: Per model name: float32 [n] scores in input order.
      sentence_scores: With `per_sentence`, per model name: a float32 array of
        sentence scores per pair; else None.
      sentences: With `per_sentence`, the sentences of each summary; else None.
      stats: Truncation and batching counts of this call.
      metadata: The scorer's settings (`MultiScorer.metadata()`).
      calibrated: From a `Scorer` loaded with `calibration=FILE`, per model
        name: float32 [n] calibrated probabilities of `scores`; else None.
    """

    scores: dict[str, np.ndarray]
    sentence_scores: Optional[dict[str, list[np.ndarray]]]
    sentences: Optional[list[list[str]]]
    stats: ScoringStats
    metadata: dict
    calibrated: Optional[dict[str, np.ndarray]] = None


@dataclasses.dataclass
class CollectedResults:
    """A run's results by example key (`0..n-1`, the input order).

    Attributes:
      scores: float32 [metrics, n].
      sentence_scores: Per example, its `ExampleResult.sentence_scores`.
      sentences: Per example, its `ExampleResult.sentences`.
    """

    scores: np.ndarray
    sentence_scores: list
    sentences: list

    def output(
        self, names: Sequence[str], per_sentence: bool, stats: ScoringStats, metadata: dict
    ) -> ScoreOutput:
        """The `ScoreOutput` of the metrics `names` (in the order of the rows of
        `scores`); sentence scores and sentences only with `per_sentence`."""
        sentence_scores = None
        if per_sentence:
            sentence_scores = {
                name: [np.asarray(s[m], np.float32) for s in self.sentence_scores]
                for m, name in enumerate(names)
            }
        return ScoreOutput(
            scores={name: self.scores[m] for m, name in enumerate(names)},
            sentence_scores=sentence_scores,
            sentences=self.sentences if per_sentence else None,
            stats=stats,
            metadata=metadata,
        )


def collect_results(
    groups: Iterable[list[ExampleResult]], metrics: int, count: int, progress
) -> CollectedResults:
    """Places each result of `groups` (as `MultiScorer.run` yields them) at
    its key, advancing `progress` (a tqdm bar) by each group.

    Raises:
      SummaryTooLongError: for a result with an error (a summary too long
        for its input).
    """
    collected = CollectedResults(
        np.zeros((metrics, count), np.float32), [None] * count, [None] * count
    )
    for group in groups:
        for result in group:
            if result.error is not None:
                raise SummaryTooLongError(f"pair {result.key}: {result.error}")
            collected.scores[:, result.key] = result.scores
            collected.sentence_scores[result.key] = result.sentence_scores
            collected.sentences[result.key] = result.sentences
        progress.update(len(group))
    return collected
