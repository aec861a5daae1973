"""Evaluating the questions of one multi-question metric, one encoder pass for all.

    --metric q4=checkpoint:runs/mq/best --metric q6=checkpoint:runs/mq/best

A multi-question checkpoint (`questions.json` beside it) is evaluated as one
metric per question: the metric's name picks its column (`q4`). The
metrics of one checkpoint share one `MultiScorer`, and the scores of the
last pairs scored, so the benchmark a first question's metric scored is read
from memory by the others: each pair's encoder runs once for every question.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Optional, Sequence

import numpy as np

# (checkpoint, settings) -> the shared scorer and its last scores.
_SHARED: dict[tuple, "SharedQuestionScores"] = {}


class SharedQuestionScores:
    """A multi-question checkpoint's scorer, and the scores of the last pairs.

    Attributes:
      scorer: The `MultiScorer` (one column per question).
    """

    def __init__(self, scorer: Any):
        self.scorer = scorer
        self._last_key: Optional[str] = None
        self._last_scores: Mapping[str, np.ndarray] = {}

    def scores(
        self,
        column: str,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        questions: Optional[Sequence[Optional[str]]],
        batch_size: int,
    ) -> np.ndarray:
        """The `column` scores of the pairs (every column computed at once).

        Raises:
          ValueError: for a column the checkpoint has not.
        """
        if column not in self.scorer.names:
            raise ValueError(
                f"metric {column!r}: a multi-question checkpoint is evaluated "
                f"as metrics named after its questions ({', '.join(self.scorer.names)})"
            )
        key = _pairs_key(premises, hypotheses, questions)
        if key != self._last_key:
            self._last_scores = self.scorer.score(
                list(premises), list(hypotheses), batch_size=batch_size, questions=questions
            )
            self._last_key = key
        return np.asarray(self._last_scores[column], np.float64)


def shared_scores(path: str, load_kwargs: Mapping[str, Any]) -> Optional[SharedQuestionScores]:
    """The shared scores of the multi-question checkpoint `path` (loaded on
    first use), or None when it is a metric of one question."""
    from seahorse_metrics.checkpoints.layout import question_prefixes

    if question_prefixes(path) is None:
        return None
    key = (path, json.dumps(dict(load_kwargs), sort_keys=True, default=str))
    if key not in _SHARED:
        from seahorse_metrics.scoring.scorer import MultiScorer

        # Unnamed, its columns are the questions' names.
        _SHARED[key] = SharedQuestionScores(MultiScorer.load([path], **load_kwargs))
    return _SHARED[key]


def _pairs_key(premises, hypotheses, questions) -> str:
    digest = hashlib.sha256()
    for part in (premises, hypotheses, questions or ()):
        digest.update(json.dumps(list(part)).encode("utf-8"))
    return digest.hexdigest()
