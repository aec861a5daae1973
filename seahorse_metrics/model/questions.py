"""Question prefixes of a multi-question metric, as decoder features.

A multi-question metric reads `premise: ... hypothesis: ...` once in the
encoder, exactly as a single metric, and gets each question as a short
prefix of decoder tokens before it predicts "1" or "0":

    decoder inputs   <start> p1 p2 ... pk        (teacher forced)
    decoder targets  p1 p2 ... pk <label> <eos>  (loss weight 0 on p1..pk)

The label is read at position k (the step fed pk). To score every question
against one encoder output, the questions are laid side by side along the
decoder's length axis of each row, one packed segment per question
(`decoder_segment_ids` 1..Q): decoder self-attention stays inside a segment
and is causal, the relative position bias depends on key minus query only,
and cross-attention reads the whole encoder input, so each question's read
position computes what it would alone (`attention.decoder_attention_masks`).
The cross-attention's keys and values are then projected (or folded) once
per pair, not once per question, and no copy of the encoder outputs is made.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.data.records import QUESTION_NAMES, QUESTIONS


def seahorse_question_texts(questions: Sequence[int] = QUESTIONS) -> dict[str, str]:
    """`q<n>` -> the decoder prefix text of SEAHORSE question n ("attribution:")."""
    return {f"q{q}": f"{QUESTION_NAMES[q]}:" for q in questions}


@dataclasses.dataclass(frozen=True)
class QuestionPrefixes:
    """The decoder prefixes of a multi-question metric's questions.

    Attributes:
      names: Column names, e.g. ("q1", ..., "q6").
      prefixes: Token ids per question (no start token, no EOS), each
        non-empty.
    """

    names: tuple[str, ...]
    prefixes: tuple[tuple[int, ...], ...]

    def __post_init__(self):
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))
        object.__setattr__(self, "prefixes", tuple(tuple(int(t) for t in p) for p in self.prefixes))
        if not self.names:
            raise ValueError("a multi-question metric needs at least one question")
        if len(self.names) != len(self.prefixes):
            raise ValueError(f"{len(self.names)} question names but {len(self.prefixes)} prefixes")
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"question names repeat: {list(self.names)}")
        empty = [n for n, p in zip(self.names, self.prefixes) if not p]
        if empty:
            raise ValueError(f"questions {empty} have an empty decoder prefix")

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def from_texts(cls, texts: Mapping[str, str], tokenizer: Any) -> "QuestionPrefixes":
        """Prefixes tokenised from text (no EOS), e.g. `seahorse_question_texts()`.

        Args:
          texts: name -> prefix text, in column order.
          tokenizer: The metric's tokenizer (`encode(text) -> ids`).
        """
        return cls(tuple(texts), tuple(tuple(tokenizer.encode(t)) for t in texts.values()))

    @classmethod
    def from_json(cls, value: Any, source: str = "questions") -> "QuestionPrefixes":
        """The prefixes of a `questions.json` value (`to_json`).

        Raises:
          ValueError: naming `source` and the field, for a malformed value.
        """
        entries = value.get("questions") if isinstance(value, dict) else None
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"{source}: needs a non-empty list 'questions'")
        names, prefixes = [], []
        for index, entry in enumerate(entries):
            ids = entry.get("prefix_ids") if isinstance(entry, dict) else None
            if (
                not isinstance(entry.get("name") if isinstance(entry, dict) else None, str)
                or not isinstance(ids, list)
                or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids)
            ):
                raise ValueError(
                    f"{source}: questions[{index}] needs a string 'name' and a "
                    "list of integer 'prefix_ids'"
                )
            names.append(entry["name"])
            prefixes.append(ids)
        try:
            return cls(tuple(names), tuple(tuple(p) for p in prefixes))
        except ValueError as error:
            raise ValueError(f"{source}: {error}") from None

    def to_json(self, texts: Optional[Sequence[str]] = None) -> dict:
        """The `questions.json` value; `texts` (the prefixes as text) are kept
        for people reading the file."""
        entries = [
            {"name": name, "prefix_ids": list(prefix)}
            for name, prefix in zip(self.names, self.prefixes)
        ]
        for entry, text in zip(entries, texts or ()):
            entry["prefix"] = text
        return {"questions": entries}

    def check_vocab(self, vocab_size: int) -> None:
        """Raises ValueError naming the question whose prefix has ids outside
        [0, vocab_size)."""
        for name, prefix in zip(self.names, self.prefixes):
            bad = [t for t in prefix if not 0 <= t < vocab_size]
            if bad:
                raise ValueError(
                    f"question {name!r}: prefix token ids {bad} are outside "
                    f"the vocabulary [0, {vocab_size})"
                )

    def decoder_row(self, start_id: int) -> dict[str, np.ndarray]:
        """One row's decoder features that score every question at once.

        Returns:
          int32 arrays: 'decoder_input_tokens' [1, S] (question q's segment is
          `start, prefix_q`), 'decoder_segment_ids' [1, S] (q + 1 in question
          q's segment) and 'decoder_read_positions' [1, Q] (where question q's
          label is predicted). S is the sum of the prefix lengths plus Q.
        """
        tokens, segments, reads = [], [], []
        for index, prefix in enumerate(self.prefixes):
            tokens += [start_id, *prefix]
            segments += [index + 1] * (len(prefix) + 1)
            reads.append(len(tokens) - 1)
        as_row = lambda values: np.asarray([values], np.int32)  # noqa: E731
        return {
            "decoder_input_tokens": as_row(tokens),
            "decoder_segment_ids": as_row(segments),
            "decoder_read_positions": as_row(reads),
        }

    def example_targets(
        self, question: int, label_ids: Sequence[int], eos_id: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The decoder targets and loss weights of one training example.

        Args:
          question: Index of the question.
          label_ids: Token ids of the label ("1" or "0"), usually one.
          eos_id: The EOS id, appended after the label.

        Returns:
          int32 `(targets, weights)`: `prefix + label + [eos]`, and weights 0 on
          the prefix and 1 on the label and EOS.
        """
        prefix = self.prefixes[question]
        targets = np.asarray([*prefix, *label_ids, eos_id], np.int32)
        weights = np.ones_like(targets)
        weights[: len(prefix)] = 0
        return targets, weights
