"""The record every reader produces and every consumer (tasks, scorer, evaluator) reads.

A `RatedPair` is one premise/hypothesis pair with a human judgment. Readers of
SEAHORSE, mFACE, TRUE and generic ratings files all turn their rows into these,
so that the seqio tasks, the trainer's validation and the meta-evaluation see
the same examples with the same metadata.
"""

from __future__ import annotations

import dataclasses
import re
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

# What a "yes" (label 1) means for each question, after the SEAHORSE rating
# guidelines (Clark et al. 2023, section 3).
QUESTION_MEANINGS = {
    1: "the summary can be read and understood",
    2: "the summary is free of unnecessarily repeated information",
    3: "the summary is grammatically correct",
    4: "all the information in the summary is fully attributable to the article",
    5: "the summary captures the main idea(s) of the article",
    6: "the summary concisely represents the information in the article",
}

# "q4" in a metric's name or path ("q4", "runs/q4/best", "seahorse-xxl-q4").
_QUESTION_TOKEN = re.compile(r"(?<![A-Za-z0-9])q([1-6])(?![0-9])", re.IGNORECASE)


def question_of_metric(name: str, checkpoint: str = "") -> Optional[int]:
    """The SEAHORSE question a metric answers, by the `qN` in its name (else
    in its checkpoint's path, the last one there), or None when neither says."""
    for text in (name, checkpoint):
        found = _QUESTION_TOKEN.findall(str(text))
        if found:
            return int(found[-1])
    return None


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
