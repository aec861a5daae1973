"""Model inputs: `premise: {article} hypothesis: {summary}`, tokenised to a length.

Used by the seqio tasks and by the scorer, so training and scoring see the
same inputs. A query-focused pair (a summary that answers a question about
the article, as in SQuALITY or KI-QFS) carries its question, and is read as
`QUESTION_TEMPLATE`, `question: {question} premise: {premise} hypothesis:
{hypothesis}`, unless a checkpoint's `seahorse_inputs.json` names another
template (see `seahorse_metrics.scoring.scorer`). Two truncation modes:

* `summary_first` (default, as the release's authors recommend): when the
  input is too long, the article is shortened so the whole summary fits.
  Only if the summary alone cannot fit is it cut too (flagged).
* `joint`: tokenise the whole string and keep the first `max_length - 1`
  tokens, then EOS. This is what the released checkpoints saw; it cuts the
  summary first, since the summary comes last.

A question, like the summary, is kept whole in `summary_first` mode: only
the article is shortened.

A summary so long that it leaves the article less than `ARTICLE_MIN_SHARE`
of the input (a quarter of `max_length`, or the whole article when it is
shorter) would be scored without (most of) its article. Scoring says what
to do with it (`long_summaries`): `error` raises `SummaryTooLongError`, so
the row gets an error; `cut` keeps the article's first quarter of the input
and cuts the summary to the rest (`EncodedPair.summary_cut`). Without a
policy (the seqio tasks), the summary is kept and the article shortened as
far as needed, as before.

The tokenizer is anything with `encode(str) -> list[int]`,
`decode(list[int]) -> str` and `eos_id`. No TensorFlow here.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import math
import string
from typing import Callable, Iterable, Optional, Protocol, Sequence

logger = logging.getLogger(__name__)

TRUNCATION_MODES = ("summary_first", "joint")
# What scoring does with a summary that leaves the article less than its share.
LONG_SUMMARY_POLICIES = ("error", "cut")
# The share of the input (`max_length`) the article keeps, or all of it when shorter.
ARTICLE_MIN_SHARE = 0.25
# The input of a query-focused pair; a checkpoint may name another (with the
# same three fields).
QUESTION_TEMPLATE = "question: {question} premise: {premise} hypothesis: {hypothesis}"
_TEMPLATE_FIELDS = frozenset({"question", "premise", "hypothesis"})

# SentencePiece pieces are at most 16 characters (its default
# max_sentencepiece_length), so a premise longer than this many characters per
# token of budget cannot fit. Only a leading window of it is tokenised, which
# keeps scoring of very long documents cheap.
_WINDOW_CHARS_PER_TOKEN = 24
# The window must tokenise to clearly more than the budget for its tokens
# inside the budget to be those of the whole premise.
_WINDOW_MARGIN_TOKENS = 16


class Tokenizer(Protocol):
    """What `encode_pair` needs from a tokenizer."""

    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class SummaryTooLongError(ValueError):
    """A summary leaves its article less than `ARTICLE_MIN_SHARE` of the input."""


@dataclasses.dataclass(frozen=True)
class EncodedPair:
    """Token ids of one model input.

    Attributes:
      ids: Token ids, ending with EOS; at most `max_length` long.
      truncated: Whether anything (article or summary) was cut.
      hypothesis_cut: Whether the summary itself was cut.
      summary_cut: Whether the summary was cut so that the article keeps its
        minimum share (`long_summaries="cut"`).
    """

    ids: list[int]
    truncated: bool
    hypothesis_cut: bool
    summary_cut: bool = False


def article_floor(premise_pieces: int, max_length: int) -> int:
    """The article pieces an input of `max_length` keeps at least (with a policy)."""
    return min(premise_pieces, math.ceil(ARTICLE_MIN_SHARE * max_length))


def _cut_summary(
    tokenizer: Tokenizer,
    article: str,
    hypothesis: str,
    budget: int,
    formatter: Callable[[str, str], str],
) -> EncodedPair:
    """`article` whole and the longest summary prefix (in pieces) that fits beside it."""
    hypothesis_ids = tokenizer.encode(hypothesis)

    def encode_with(keep: int) -> list[int]:
        return tokenizer.encode(formatter(article, tokenizer.decode(hypothesis_ids[:keep])))

    keep = max(budget - len(tokenizer.encode(formatter(article, ""))), 0)
    ids = encode_with(keep)
    while len(ids) > budget and keep > 0:
        keep = max(keep - (len(ids) - budget), 0)
        ids = encode_with(keep)
    return EncodedPair(ids[:budget] + [tokenizer.eos_id], True, True, summary_cut=True)


def _crowded_article(
    tokenizer: Tokenizer,
    premise_ids: list[int],
    hypothesis: str,
    budget: int,
    formatter: Callable[[str, str], str],
    long_summaries: str,
) -> Optional[EncodedPair]:
    """None when the summary leaves the article its share; else the `cut`
    input, or `SummaryTooLongError` for `error`."""
    floor = article_floor(len(premise_ids), budget + 1)
    summary_pieces = len(tokenizer.encode(formatter("", hypothesis)))
    if floor == 0 or summary_pieces + floor <= budget:  # no article to ignore, or room
        return None
    if long_summaries == "error":
        raise SummaryTooLongError(
            f"the summary takes {summary_pieces} of the {budget + 1} input tokens, leaving the "
            f"article fewer than its {floor} (a {ARTICLE_MIN_SHARE:.0%} share): its score would "
            "ignore the article. Raise --max_input_length, or pass --long_summaries cut to cut "
            "the summary instead (flagged in the summary_cut column)"
        )
    return _cut_summary(
        tokenizer, tokenizer.decode(premise_ids[:floor]), hypothesis, budget, formatter
    )


def format_input(
    premise: str,
    hypothesis: str,
    question: Optional[str] = None,
    question_template: str = QUESTION_TEMPLATE,
) -> str:
    """The model input string.

    Args:
      premise: The article.
      hypothesis: The summary.
      question: The question a query-focused summary answers, or None.
      question_template: How a pair with a question is written (fields
        `{question}`, `{premise}`, `{hypothesis}`).

    Returns:
      `premise: {premise} hypothesis: {hypothesis}` without a question, else
      `question_template` filled in.
    """
    if question is None:
        return f"premise: {premise} hypothesis: {hypothesis}"
    return question_template.format(question=question, premise=premise, hypothesis=hypothesis)


def check_question_template(template: str) -> str:
    """Returns `template` if it names exactly `{question}`, `{premise}` and
    `{hypothesis}` (each once).

    Raises:
      ValueError: for a malformed template or other fields.
    """
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise ValueError(f"question template {template!r} is malformed ({error})") from None
    if sorted(fields) != sorted(_TEMPLATE_FIELDS):
        raise ValueError(
            f"question template {template!r} must name {{question}}, {{premise}} and "
            f"{{hypothesis}} once each (it names {fields}); e.g. {QUESTION_TEMPLATE!r}"
        )
    return template


def _formatter(question: Optional[str], question_template: str) -> Callable[[str, str], str]:
    return functools.partial(format_input, question=question, question_template=question_template)


def _leading_window(premise: str, max_length: int) -> Optional[str]:
    """A prefix of a very long premise, cut at a space; None if short enough."""
    limit = _WINDOW_CHARS_PER_TOKEN * max_length
    if len(premise) <= limit:
        return None
    cut = premise.rfind(" ", limit // 2, limit)
    # Without a space to cut at (e.g. Chinese, Thai), the pieces near an
    # arbitrary cut could differ from those of the whole text: no shortcut.
    return premise[:cut] if cut > 0 else None


def _encode_from_window(
    tokenizer: Tokenizer,
    premise: str,
    hypothesis: str,
    max_length: int,
    mode: str,
    formatter: Callable[[str, str], str],
    long_summaries: Optional[str],
) -> Optional[EncodedPair]:
    """`encode_pair` of a very long premise from its leading window alone (a
    tokenisation of the whole article would be thrown away); None when the
    premise has no such window or its window fits the budget."""
    budget = max_length - 1
    window = _leading_window(premise, max_length)
    window_ids = tokenizer.encode(window) if window is not None else None
    if window_ids is None or len(window_ids) <= budget + _WINDOW_MARGIN_TOKENS:
        return None
    # The premise alone is longer than the budget: the input is truncated.
    if mode == "joint":
        ids = tokenizer.encode(formatter(window, hypothesis))
        return EncodedPair(ids[:budget] + [tokenizer.eos_id], True, True)
    return _shorten_premise(tokenizer, window_ids, hypothesis, budget, formatter, long_summaries)


_MAX_GROW_STEPS = 3


def _shorten_premise(
    tokenizer: Tokenizer,
    premise_ids: list[int],
    hypothesis: str,
    budget: int,
    formatter: Callable[[str, str], str] = format_input,
    long_summaries: Optional[str] = None,
) -> EncodedPair:
    """Keeps the longest article prefix (in pieces) with which the input fits."""
    if long_summaries is not None:
        crowded = _crowded_article(
            tokenizer, premise_ids, hypothesis, budget, formatter, long_summaries
        )
        if crowded is not None:
            return crowded
    hypothesis_only = tokenizer.encode(formatter("", hypothesis))

    def encode_with(keep: int) -> list[int]:
        if keep == 0:
            return hypothesis_only
        return tokenizer.encode(formatter(tokenizer.decode(premise_ids[:keep]), hypothesis))

    # The article's pieces inside the input are about its pieces alone; start there.
    keep = min(len(premise_ids), max(budget - len(hypothesis_only), 0))
    ids = encode_with(keep)
    while len(ids) > budget and keep > 0:
        # Re-tokenising at the cut can merge pieces differently: shorten by the overflow.
        keep = max(keep - (len(ids) - budget), 0)
        ids = encode_with(keep)
    if len(ids) > budget:
        return EncodedPair(ids[:budget] + [tokenizer.eos_id], True, True)
    for _ in range(_MAX_GROW_STEPS):
        # The first guess may leave room: take it back, a few pieces at a time.
        slack = budget - len(ids)
        if slack <= 0 or keep >= len(premise_ids):
            break
        longer = encode_with(min(keep + slack, len(premise_ids)))
        if len(longer) > budget:
            break
        keep, ids = min(keep + slack, len(premise_ids)), longer
    return EncodedPair(ids + [tokenizer.eos_id], True, False)


def _check_arguments(max_length: int, mode: str, long_summaries: Optional[str]) -> None:
    if mode not in TRUNCATION_MODES:
        raise ValueError(f"unknown truncation mode {mode!r}; choose one of {TRUNCATION_MODES}")
    if long_summaries is not None and long_summaries not in LONG_SUMMARY_POLICIES:
        raise ValueError(
            f"unknown long_summaries {long_summaries!r}; choose one of {LONG_SUMMARY_POLICIES}"
        )
    if max_length < 2:
        raise ValueError(f"max_length must leave room for a token and EOS, got {max_length}")


def encode_pair(
    tokenizer: Tokenizer,
    premise: str,
    hypothesis: str,
    max_length: int,
    mode: str = "summary_first",
    question: Optional[str] = None,
    question_template: str = QUESTION_TEMPLATE,
    long_summaries: Optional[str] = None,
) -> EncodedPair:
    """Tokenises `format_input(premise, hypothesis, question)` to at most `max_length` ids.

    When the whole input fits, the ids are exactly `tokenizer.encode` of the
    formatted string plus EOS, in either mode.

    Args:
      tokenizer: See `Tokenizer`.
      premise: The article.
      hypothesis: The summary.
      max_length: Maximum number of ids, EOS included.
      mode: `summary_first` (shorten the article so the summary, and the
        question, fit) or `joint` (cut the tokenised string, as the released
        checkpoints saw it).
      question: The question of a query-focused summary, or None.
      question_template: The input of a pair with a question (see `format_input`).
      long_summaries: In `summary_first` mode, a summary that leaves the
        article less than `ARTICLE_MIN_SHARE` of the input: `error` raises,
        `cut` cuts the summary (see the module docstring); None shortens the
        article as far as needed.

    Returns:
      The ids and whether the input or the summary was cut.

    Raises:
      ValueError: for an unknown mode or policy, or `max_length < 2`.
      SummaryTooLongError: for such a summary with `long_summaries="error"`.
    """
    _check_arguments(max_length, mode, long_summaries)
    budget = max_length - 1
    eos = tokenizer.eos_id
    formatter = _formatter(question, question_template)

    from_window = _encode_from_window(
        tokenizer, premise, hypothesis, max_length, mode, formatter, long_summaries
    )
    if from_window is not None:
        return from_window
    ids = tokenizer.encode(formatter(premise, hypothesis))
    if len(ids) <= budget:
        return EncodedPair(ids + [eos], False, False)
    if mode == "joint":
        return EncodedPair(ids[:budget] + [eos], True, True)
    return _shorten_premise(
        tokenizer, tokenizer.encode(premise), hypothesis, budget, formatter, long_summaries
    )


@dataclasses.dataclass
class TruncationStats:
    """Counts of truncated inputs, overall and by language.

    Attributes:
      count: Inputs seen.
      truncated: Inputs whose article or summary was cut.
      hypothesis_cut: Inputs whose summary was cut.
      by_language: Per language code: {"count", "truncated", "hypothesis_cut"}.
    """

    count: int = 0
    truncated: int = 0
    hypothesis_cut: int = 0
    by_language: dict[str, collections.Counter] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )

    def add(self, encoded: EncodedPair, lang: Optional[str] = None) -> None:
        """Counts one encoded input (language `unknown` when None)."""
        entry = self.by_language[lang or "unknown"]
        for counter_name, flag in (
            ("count", True),
            ("truncated", encoded.truncated),
            ("hypothesis_cut", encoded.hypothesis_cut),
        ):
            if flag:
                setattr(self, counter_name, getattr(self, counter_name) + 1)
                entry[counter_name] += 1

    def merge(self, other: "TruncationStats") -> None:
        """Adds another accumulator's counts to this one."""
        self.count += other.count
        self.truncated += other.truncated
        self.hypothesis_cut += other.hypothesis_cut
        for lang, counts in other.by_language.items():
            self.by_language[lang].update(counts)

    def summary(self) -> dict:
        """A JSON-ready report: totals, fraction truncated and per-language counts."""
        return {
            "count": self.count,
            "truncated": self.truncated,
            "hypothesis_cut": self.hypothesis_cut,
            "truncated_fraction": self.truncated / self.count if self.count else 0.0,
            "by_language": {
                lang: {k: counts[k] for k in ("count", "truncated", "hypothesis_cut")}
                for lang, counts in sorted(self.by_language.items())
            },
        }

    def log(self, context: str, max_length: int) -> None:
        """Logs the counts; a warning when anything was truncated."""
        if not self.truncated:
            logger.info("%s: none of %d inputs exceeded %d tokens", context, self.count, max_length)
            return
        per_language = {
            lang: f"{c['truncated']}/{c['count']}"
            for lang, c in sorted(self.by_language.items())
            if c["truncated"]
        }
        logger.warning(
            "%s: %d of %d inputs exceeded %d tokens and were truncated (%d with the "
            "summary cut); by language: %s",
            context,
            self.truncated,
            self.count,
            max_length,
            self.hypothesis_cut,
            per_language,
        )


def encode_pairs(
    tokenizer: Tokenizer,
    premises: Sequence[str],
    hypotheses: Sequence[str],
    max_length: int,
    mode: str = "summary_first",
    langs: Optional[Iterable[Optional[str]]] = None,
    stats: Optional[TruncationStats] = None,
    questions: Optional[Sequence[Optional[str]]] = None,
) -> list[EncodedPair]:
    """`encode_pair` over parallel lists (questions None or one per pair),
    counting truncation into `stats`."""
    if len(premises) != len(hypotheses):
        raise ValueError(
            f"got {len(premises)} premises and {len(hypotheses)} hypotheses; they must pair up"
        )
    langs_list = list(langs) if langs is not None else [None] * len(premises)
    questions_list = list(questions) if questions is not None else [None] * len(premises)
    if len(questions_list) != len(premises):
        raise ValueError(f"got {len(questions_list)} questions for {len(premises)} pairs")
    encoded = []
    for premise, hypothesis, lang, question in zip(
        premises, hypotheses, langs_list, questions_list
    ):
        pair = encode_pair(tokenizer, premise, hypothesis, max_length, mode, question)
        if stats is not None:
            stats.add(pair, lang)
        encoded.append(pair)
    return encoded
