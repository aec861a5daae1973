"""Model inputs: `premise: {article} hypothesis: {summary}`, tokenised to a length.

Used by the seqio tasks and by the scorer, so training and scoring see the
same inputs. Two truncation modes:

* `summary_first` (default, as the release's authors recommend): when the
  input is too long, the article is shortened so the whole summary fits.
  Only if the summary alone cannot fit is it cut too (flagged).
* `joint`: tokenise the whole string and keep the first `max_length - 1`
  tokens, then EOS. This is what the released checkpoints saw; it cuts the
  summary first, since the summary comes last.

The tokenizer is anything with `encode(str) -> list[int]`,
`decode(list[int]) -> str` and `eos_id`. No TensorFlow here.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Iterable, Optional, Protocol, Sequence

logger = logging.getLogger(__name__)

TRUNCATION_MODES = ("summary_first", "joint")

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


@dataclasses.dataclass(frozen=True)
class EncodedPair:
    """Token ids of one model input.

    Attributes:
      ids: Token ids, ending with EOS; at most `max_length` long.
      truncated: Whether anything (article or summary) was cut.
      hypothesis_cut: Whether the summary itself was cut.
    """

    ids: list[int]
    truncated: bool
    hypothesis_cut: bool


def format_input(premise: str, hypothesis: str) -> str:
    """The model input string: `premise: {premise} hypothesis: {hypothesis}`."""
    return f"premise: {premise} hypothesis: {hypothesis}"


def _leading_window(premise: str, max_length: int) -> Optional[str]:
    """A prefix of a very long premise, cut at a space; None if short enough."""
    limit = _WINDOW_CHARS_PER_TOKEN * max_length
    if len(premise) <= limit:
        return None
    cut = premise.rfind(" ", limit // 2, limit)
    # Without a space to cut at (e.g. Chinese, Thai), the pieces near an
    # arbitrary cut could differ from those of the whole text: no shortcut.
    return premise[:cut] if cut > 0 else None


_MAX_GROW_STEPS = 3


def _shorten_premise(
    tokenizer: Tokenizer, premise_ids: list[int], hypothesis: str, budget: int
) -> EncodedPair:
    """Keeps the longest article prefix (in pieces) with which the input fits."""
    hypothesis_only = tokenizer.encode(format_input("", hypothesis))

    def encode_with(keep: int) -> list[int]:
        if keep == 0:
            return hypothesis_only
        return tokenizer.encode(format_input(tokenizer.decode(premise_ids[:keep]), hypothesis))

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


def encode_pair(
    tokenizer: Tokenizer,
    premise: str,
    hypothesis: str,
    max_length: int,
    mode: str = "summary_first",
) -> EncodedPair:
    """Tokenises `format_input(premise, hypothesis)` to at most `max_length` ids.

    When the whole input fits, the ids are exactly `tokenizer.encode` of the
    formatted string plus EOS, in either mode.

    Args:
      tokenizer: See `Tokenizer`.
      premise: The article.
      hypothesis: The summary.
      max_length: Maximum number of ids, EOS included.
      mode: `summary_first` (shorten the article so the summary fits) or
        `joint` (cut the tokenised string, as the released checkpoints saw it).

    Returns:
      The ids and whether the input or the summary was cut.

    Raises:
      ValueError: for an unknown mode or `max_length < 2`.
    """
    if mode not in TRUNCATION_MODES:
        raise ValueError(f"unknown truncation mode {mode!r}; choose one of {TRUNCATION_MODES}")
    if max_length < 2:
        raise ValueError(f"max_length must leave room for a token and EOS, got {max_length}")
    budget = max_length - 1
    eos = tokenizer.eos_id

    window = _leading_window(premise, max_length)
    window_ids = tokenizer.encode(window) if window is not None else None
    if window_ids is not None and len(window_ids) > budget + _WINDOW_MARGIN_TOKENS:
        # The premise alone is longer than the budget: the input is truncated.
        if mode == "joint":
            ids = tokenizer.encode(format_input(window, hypothesis))
            return EncodedPair(ids[:budget] + [eos], True, True)
        return _shorten_premise(tokenizer, window_ids, hypothesis, budget)

    ids = tokenizer.encode(format_input(premise, hypothesis))
    if len(ids) <= budget:
        return EncodedPair(ids + [eos], False, False)
    if mode == "joint":
        return EncodedPair(ids[:budget] + [eos], True, True)
    return _shorten_premise(tokenizer, tokenizer.encode(premise), hypothesis, budget)


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
            context, self.truncated, self.count, max_length, self.hypothesis_cut, per_language,
        )


def encode_pairs(
    tokenizer: Tokenizer,
    premises: Sequence[str],
    hypotheses: Sequence[str],
    max_length: int,
    mode: str = "summary_first",
    langs: Optional[Iterable[Optional[str]]] = None,
    stats: Optional[TruncationStats] = None,
) -> list[EncodedPair]:
    """`encode_pair` over parallel lists, counting truncation into `stats`."""
    if len(premises) != len(hypotheses):
        raise ValueError(
            f"got {len(premises)} premises and {len(hypotheses)} hypotheses; they must pair up"
        )
    langs_list = list(langs) if langs is not None else [None] * len(premises)
    encoded = []
    for premise, hypothesis, lang in zip(premises, hypotheses, langs_list):
        pair = encode_pair(tokenizer, premise, hypothesis, max_length, mode)
        if stats is not None:
            stats.add(pair, lang)
        encoded.append(pair)
    return encoded
