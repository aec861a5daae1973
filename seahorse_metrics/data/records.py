"""The record every reader produces and every consumer (tasks, scorer, evaluator) reads.

A `RatedPair` is one premise/hypothesis pair with a human judgment. Readers of
SEAHORSE, mFACE, TRUE and generic ratings files all turn their rows into these,
so that the seqio tasks, the trainer's validation and the meta-evaluation see
the same examples with the same metadata.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

QUESTIONS = (1, 2, 3, 4, 5, 6)

QUESTION_NAMES = {
    1: "comprehensible",
    2: "repetition",
    3: "grammar",
    4: "attribution",
    5: "main_ideas",
    6: "conciseness",
}


@dataclasses.dataclass(frozen=True)
class RatedPair:
    """One premise/hypothesis pair and its human judgment.

    Attributes:
      id: Stable identifier, unique within a benchmark (used to align
        precomputed scores and to resume scoring).
      premise: The article (grounding) text.
      hypothesis: The summary (generated text).
      label: Binary judgment (True = yes/consistent), or None when the rating
        is continuous only.
      rating: The raw rating as a float: 1.0/0.0 for binary sets, the rater
        average for mFACE, the 1-100 or Likert value for continuous sets.
      lang: ISO 639-1 language code when known.
      source: The source dataset (xsum, mlsum, xlsum, wiki_lingua, a TRUE set
        name, ...).
      system: The summarization system that produced the hypothesis;
        "reference" for human-written reference summaries.
      meta: Any further fields a reader keeps (question number, line number).
      question: For a query-focused summary (SQuALITY, KI-QFS: one article,
        several questions, a summary per question), the question the summary
        answers; None for a generic summary. It is part of the model input
        (`seahorse_metrics.data.inputs.QUESTION_TEMPLATE`). Not to be confused
        with the SEAHORSE question numbers 1-6 (`meta["question"]`).
    """

    id: str
    premise: str
    hypothesis: str
    label: Optional[bool]
    rating: Optional[float]
    lang: Optional[str] = None
    source: Optional[str] = None
    system: Optional[str] = None
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    question: Optional[str] = None
