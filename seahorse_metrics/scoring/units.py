"""Encoder inputs ("units") of one (premise, hypothesis) example.

An example becomes one or more units, each a token-id sequence the model
scores with one encoder pass and one decoder step:

* `long_inputs="truncate"` (default, the paper's behaviour): one unit, cut by
  `seahorse_metrics.data.inputs.encode_pair` (the summary is never cut unless it
  alone does not fit; `truncation="joint"` cuts the whole string instead).
* `long_inputs="chunk"`: when the input does not fit, the premise is split
  into overlapping token windows that each fit beside the whole summary
  (`premise_chunks`); every window is a unit, aggregated with max, as
  long-document faithfulness metrics do (a summary is supported if some part
  of the document supports it).
* A summary that leaves the article less than its minimum share of the
  input (`seahorse_metrics.data.inputs.ARTICLE_MIN_SHARE`, a quarter) is
  never scored as if the article were not there, in either mode:
  `long_summaries="error"` (default) raises `SummaryTooLongError` for the
  example (the row gets an `error`), `"cut"` keeps the article's share and
  cuts the summary (`EncodedExample.summary_cut`).
* `per_sentence=True`: the summary is split into sentences (`split_sentences`)
  and each sentence is scored against the premise (truncated or chunked), then
  aggregated with min or mean over the sentences, or `share@T`: the share of
  sentences scored at or above T (BooookScore's share of sentences without
  an error).

A query-focused example carries its question, which every unit repeats
whole, written by `InputSettings.question_template`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np

from seahorse_metrics.data.inputs import (
    LONG_SUMMARY_POLICIES,
    QUESTION_TEMPLATE,
    TRUNCATION_MODES,
    EncodedPair,
    Tokenizer,
    check_question_template,
    encode_pair,
    format_input,
)
from seahorse_metrics.option_names import option

LONG_INPUT_MODES = ("truncate", "chunk")
SENTENCE_AGGREGATES = ("min", "mean", "share@T")
_SHARE_PREFIX = "share@"
NORMALIZATIONS = ("full", "pair")

# A chunk must hold at least this many premise pieces beside the summary;
# with less room, chunking degenerates and the input is truncated instead.
MIN_CHUNK_PIECES = 8

# Sentence ends: ., !, ?, … (and their CJK/Arabic/Devanagari forms) followed
# by whitespace, or a CJK full stop/mark followed by anything (no spaces there).
_SENTENCE_BREAK = re.compile(r"(?<=[.!?…؟।])\s+|(?<=[。！？])\s*")


@dataclasses.dataclass(frozen=True)
class InputSettings:
    """How pairs become encoder inputs and how unit scores combine.

    Attributes:
      max_input_length: Token budget of one encoder input, EOS included.
      truncation: `summary_first` (shorten the article so the summary fits)
        or `joint` (cut the tokenised string, as the released checkpoints saw).
      long_inputs: `truncate` or `chunk` (see the module docstring).
      chunk_overlap: Premise pieces shared by consecutive chunks.
      per_sentence: Score each summary sentence separately.
      sentence_aggregate: `min`, `mean` or `share@T` (e.g. `share@0.5`: the
        share of sentences scored at or above T) over the sentence scores.
      normalize: `full` (P("1") over the whole vocabulary) or `pair`
        (P("1") / (P("1") + P("0"))). Not rank-identical, so recorded with
        every output.
      question_template: The input of an example with a question (fields
        `{question}`, `{premise}`, `{hypothesis}`).
      long_summaries: A summary leaving the article less than its share:
        `error` (the example is not scored) or `cut` (the summary is cut).
    """

    max_input_length: int = 2048
    truncation: str = "summary_first"
    long_inputs: str = "truncate"
    chunk_overlap: int = 128
    per_sentence: bool = False
    sentence_aggregate: str = "min"
    normalize: str = "full"
    question_template: str = QUESTION_TEMPLATE
    long_summaries: str = "error"

    def __post_init__(self):
        choices = (
            ("truncation", TRUNCATION_MODES),
            ("long_inputs", LONG_INPUT_MODES),
            ("normalize", NORMALIZATIONS),
            ("long_summaries", LONG_SUMMARY_POLICIES),
        )
        share_threshold(self.sentence_aggregate)  # Validates the aggregate.
        check_question_template(self.question_template)
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.max_input_length < 2:
            raise ValueError(
                f"{option('max_input_length', '--max_input_length')} must be >= 2, "
                f"got {self.max_input_length}"
            )
        if self.chunk_overlap < 0:
            raise ValueError(
                f"{option('chunk_overlap', '--chunk_overlap')} must be >= 0, got "
                f"{self.chunk_overlap}"
            )

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (recorded with every output)."""
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, options) -> "InputSettings":
        """The input settings of a `ScoringOptions` (its fields of the same
        names; no question template there means the default one)."""
        values = {field.name: getattr(options, field.name) for field in dataclasses.fields(cls)}
        if values["question_template"] is None:
            values["question_template"] = QUESTION_TEMPLATE
        return cls(**values)


@dataclasses.dataclass
class EncodedExample:
    """The units of one example.

    Attributes:
      units: int32 token ids per unit, each ending with EOS.
      sentence_of_unit: Index of the summary sentence each unit scores (all 0
        without `per_sentence`).
      sentences: The summary sentences with `per_sentence`, else None.
      pairs: The `EncodedPair` flags per unit (for truncation counts).
      chunked: Whether the premise was split into chunks.
    """

    units: list[np.ndarray]
    sentence_of_unit: list[int]
    sentences: Optional[list[str]]
    pairs: list[EncodedPair]
    chunked: bool

    @property
    def summary_cut(self) -> bool:
        """Whether a summary (sentence) was cut to leave the article its share."""
        return any(pair.summary_cut for pair in self.pairs)


def share_threshold(sentence_aggregate: str) -> Optional[float]:
    """T of a `share@T` aggregate, None for `min` and `mean`.

    Raises:
      ValueError: for another aggregate, or a T that is not a number.
    """
    if sentence_aggregate in ("min", "mean"):
        return None
    if sentence_aggregate.startswith(_SHARE_PREFIX):
        try:
            return float(sentence_aggregate[len(_SHARE_PREFIX) :])
        except ValueError:
            pass
    raise ValueError(
        f"{option('sentence_aggregate', '--sentence_aggregate')} must be min, mean "
        f"or share@T with T a number "
        f"(e.g. share@0.5), got {sentence_aggregate!r}"
    )


def split_sentences(text: str) -> list[str]:
    """Splits a summary into sentences (never empty: a text without a break is
    one sentence; a blank text is returned as is)."""
    sentences = [s.strip() for s in _SENTENCE_BREAK.split(text) if s and s.strip()]
    return sentences or [text]


def chunk_windows(num_pieces: int, room: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) piece ranges of the premise chunks.

    Windows of `room` pieces, consecutive ones sharing `min(overlap, room // 2)`
    pieces; the last window ends at the last piece.
    """
    if room < 1:
        raise ValueError(f"room must be positive, got {room}")
    if num_pieces <= room:
        return [(0, num_pieces)]
    stride = room - min(overlap, room // 2)
    windows = []
    start = 0
    while True:
        end = min(start + room, num_pieces)
        windows.append((start, end))
        if end == num_pieces:
            return windows
        start += stride


def premise_chunks(
    tokenizer: Tokenizer,
    premise: str,
    hypothesis: str,
    max_length: int,
    overlap: int,
    question: Optional[str] = None,
    question_template: str = QUESTION_TEMPLATE,
) -> Optional[list[str]]:
    """The premise split into overlapping texts that each fit beside `hypothesis`
    (and `question`).

    The room of a chunk is `max_length - 1` (EOS) minus the pieces of
    `format_input("", hypothesis, question)`; the premise's pieces are cut into
    `chunk_windows` of that room and decoded back to text.

    Returns:
      The chunk texts (a single one, the premise itself, when it fits), or
      None when the summary leaves fewer than `MIN_CHUNK_PIECES` of room.
    """
    empty = format_input("", hypothesis, question, question_template)
    room = max_length - 1 - len(tokenizer.encode(empty))
    if room < MIN_CHUNK_PIECES:
        return None
    premise_ids = tokenizer.encode(premise)
    windows = chunk_windows(len(premise_ids), room, overlap)
    if len(windows) == 1:
        return [premise]
    return [tokenizer.decode(premise_ids[start:end]) for start, end in windows]


def _as_array(pair: EncodedPair) -> np.ndarray:
    return np.asarray(pair.ids, dtype=np.int32)


def _encode_sentence(
    tokenizer: Tokenizer,
    premise: str,
    hypothesis: str,
    settings: InputSettings,
    question: Optional[str] = None,
) -> tuple[list[EncodedPair], bool]:
    """Units of the premise against one hypothesis, and whether it was chunked."""
    max_length = settings.max_input_length
    template = settings.question_template
    policy = settings.long_summaries if settings.truncation == "summary_first" else None
    pair = encode_pair(
        tokenizer, premise, hypothesis, max_length, settings.truncation, question, template, policy
    )
    if settings.long_inputs == "truncate" or not pair.truncated or pair.summary_cut:
        return [pair], False
    chunks = premise_chunks(
        tokenizer, premise, hypothesis, max_length, settings.chunk_overlap, question, template
    )
    if chunks is None:  # The summary alone (nearly) fills the budget.
        return [pair], False
    pairs = []
    for chunk in chunks:
        chunk_pair = encode_pair(
            tokenizer, chunk, hypothesis, max_length, "summary_first", question, template
        )
        # Re-tokenising a chunk inside the input can merge a piece or two
        # differently; encode_pair trims them. That is not truncation of the
        # example: only a cut summary is.
        pairs.append(
            EncodedPair(chunk_pair.ids, chunk_pair.hypothesis_cut, chunk_pair.hypothesis_cut)
        )
    return pairs, True


def encode_example(
    tokenizer: Tokenizer,
    premise: str,
    hypothesis: str,
    settings: InputSettings,
    question: Optional[str] = None,
) -> EncodedExample:
    """The units of one example under `settings` (see the module docstring);
    `question` is that of a query-focused summary, or None."""
    sentences = split_sentences(hypothesis) if settings.per_sentence else [hypothesis]
    units, sentence_of_unit, pairs, chunked = [], [], [], False
    for index, sentence in enumerate(sentences):
        sentence_pairs, sentence_chunked = _encode_sentence(
            tokenizer, premise, sentence, settings, question
        )
        chunked |= sentence_chunked
        pairs.extend(sentence_pairs)
        units.extend(_as_array(p) for p in sentence_pairs)
        sentence_of_unit.extend([index] * len(sentence_pairs))
    return EncodedExample(
        units, sentence_of_unit, sentences if settings.per_sentence else None, pairs, chunked
    )


def unit_scores(log_p_one: np.ndarray, log_p_zero: np.ndarray, normalize: str) -> np.ndarray:
    """Scores of units from log P("1") and log P("0") over the full vocabulary.

    `full`: P("1"); `pair`: P("1") / (P("1") + P("0")), computed as a sigmoid
    of the log-odds so it stays exact when both probabilities are tiny.
    """
    log_p_one = np.asarray(log_p_one, np.float64)
    if normalize == "full":
        return np.exp(log_p_one)
    if normalize == "pair":
        return 1.0 / (1.0 + np.exp(np.asarray(log_p_zero, np.float64) - log_p_one))
    raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")


def aggregate(
    scores: np.ndarray, sentence_of_unit: list[int], num_sentences: int, sentence_aggregate: str
) -> tuple[float, np.ndarray]:
    """Combines unit scores: max over the chunks of a sentence, then min, mean
    or `share@T` (share of sentences scored at or above T) over the sentences.

    Args:
      scores: float [units] scores of one example's units.
      sentence_of_unit: Sentence index of each unit.
      num_sentences: Number of sentences (every index has at least one unit).
      sentence_aggregate: `min`, `mean` or `share@T`.

    Returns:
      (example score, per-sentence scores [num_sentences]).
    """
    per_sentence = np.full(num_sentences, -np.inf)
    np.maximum.at(per_sentence, np.asarray(sentence_of_unit, np.int64), scores)
    threshold = share_threshold(sentence_aggregate)
    if threshold is not None:
        return float(np.mean(per_sentence >= threshold)), per_sentence
    if sentence_aggregate == "min":
        return float(per_sentence.min()), per_sentence
    return float(per_sentence.mean()), per_sentence
