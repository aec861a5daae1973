"""Baseline metrics the paper compares learnt metrics with.

- `majority_scores`: the majority class of the benchmark's labels, as a
  constant score (1.0 = yes). Its ROC-AUC is 0.5 and its correlations are
  undefined (constant scores); its accuracy at 0.5 is the majority share.
- `rouge_l_scores`: ROUGE-L between the article (reference side) and the
  summary (candidate side) on SentencePiece pieces, as the `rouge-score`
  package computes it with a custom tokenizer (the SEAHORSE paper's
  footnote). F-measure by default; precision (share of the summary covered by
  the longest common subsequence with the article) and recall are options.
  It reads at most the first `ROUGE_MAX_PIECES["article"]` (16,384) pieces of
  an article and `ROUGE_MAX_PIECES["summary"]` (2,048) of a summary, each from
  its first 16 characters per piece (SentencePiece's longest piece), and
  finds the longest common subsequence bit-parallel in memory linear in the
  article: a 100 MB cell costs what 262,144 characters do, where
  `rouge-score`'s table of every piece pair took gigabytes. No SEAHORSE,
  mFACE or TRUE text comes near the limits.
- `length_scores`: summary length in SentencePiece pieces.

SentencePiece pieces rather than whitespace words keep the baselines
language-independent (mFACE includes languages written without spaces).
"""

from __future__ import annotations

import functools
import os
from typing import Optional, Sequence

import numpy as np

ROUGE_MEASURES = ("fmeasure", "precision", "recall")
# Most pieces ROUGE-L reads of each side (see the module docstring).
ROUGE_MAX_PIECES = {"article": 16_384, "summary": 2_048}
# SentencePiece's longest piece (`max_sentencepiece_length`): so many
# characters hold at least one piece each.
_CHARS_PER_PIECE = 16


class SentencePiecePieces:
    """Splits text into SentencePiece pieces; a `rouge-score` tokenizer.

    `rouge_score.rouge_scorer.RougeScorer(tokenizer=...)` only calls
    `tokenize(text) -> list[str]`.

    Args:
      vocab_path: A SentencePiece `.model` file; None uses the project's
        default vocabulary (`seahorse_metrics.data.vocab.default_vocab_path()`).
    """

    def __init__(self, vocab_path: Optional[str] = None):
        import sentencepiece

        if vocab_path is None:
            from seahorse_metrics.data.vocab import default_vocab_path

            vocab_path = str(default_vocab_path())
        if not os.path.isfile(vocab_path):
            raise FileNotFoundError(
                f"SentencePiece model {vocab_path} not found; pass --vocab with a .model file"
            )
        self.vocab_path = str(vocab_path)
        self._processor = sentencepiece.SentencePieceProcessor(model_file=self.vocab_path)

    def tokenize(self, text: str) -> list[str]:
        return self._processor.encode(text, out_type=str)

    def first_pieces(self, text: str, limit: int) -> list[str]:
        """The first `limit` pieces of `text`, reading only its first
        `limit * 16` characters."""
        return self.tokenize(text[: limit * _CHARS_PER_PIECE])[:limit]


@functools.lru_cache(maxsize=4)
def _pieces(vocab_path: Optional[str]) -> SentencePiecePieces:
    return SentencePiecePieces(vocab_path)


def majority_scores(labels: Sequence[Optional[bool]]) -> np.ndarray:
    """Constant score of the majority label (ties go to yes).

    Args:
      labels: Binary labels; None entries (unlabelled items) are ignored.

    Returns:
      float array, 1.0 everywhere when yes is the majority, else 0.0.

    Raises:
      ValueError: No item has a label.
    """
    known = [bool(label) for label in labels if label is not None]
    if not known:
        raise ValueError(
            "the majority baseline needs binary labels; this benchmark has none "
            "(give the ratings reader a threshold)"
        )
    majority = 1.0 if 2 * sum(known) >= len(known) else 0.0
    return np.full(len(labels), majority, dtype=np.float64)


def rouge_l_scores(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    *,
    vocab_path: Optional[str] = None,
    measure: str = "fmeasure",
    progress: bool = False,
) -> np.ndarray:
    """ROUGE-L between each article and its summary on SentencePiece pieces.

    Args:
      premises: Articles (the reference side of ROUGE).
      hypotheses: Summaries (the candidate side).
      vocab_path: SentencePiece model; None = project default.
      measure: "fmeasure", "precision" or "recall".
      progress: Show a tqdm bar.

    Returns:
      float array in [0, 1].
    """
    if measure not in ROUGE_MEASURES:
        raise ValueError(f"unknown ROUGE measure {measure!r}; choose from {ROUGE_MEASURES}")
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    pieces = _pieces(vocab_path)
    pairs = zip(premises, hypotheses)
    if progress:
        from tqdm import tqdm

        pairs = tqdm(pairs, total=len(premises), desc="ROUGE-L", unit="pair")
    return np.array(
        [
            _rouge_l(
                pieces.first_pieces(article, ROUGE_MAX_PIECES["article"]),
                pieces.first_pieces(summary, ROUGE_MAX_PIECES["summary"]),
                measure,
            )
            for article, summary in pairs
        ],
        dtype=np.float64,
    )


def _rouge_l(reference: Sequence[str], candidate: Sequence[str], measure: str) -> float:
    """ROUGE-L of piece lists as `rouge_score.rouge_scorer._score_lcs` computes it."""
    from rouge_score import scoring

    if not reference or not candidate:
        return 0.0
    common = lcs_length(reference, candidate)
    precision, recall = common / len(candidate), common / len(reference)
    return {
        "precision": precision,
        "recall": recall,
        "fmeasure": scoring.fmeasure(precision, recall),
    }[measure]


def lcs_length(first: Sequence[str], second: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison and
    Dix, 1986): one bit per item of the longer sequence, so memory is linear
    and time len(a) * len(b) / 64 word operations."""
    if len(first) < len(second):
        first, second = second, first
    masks: dict[str, int] = {}
    for position, item in enumerate(first):
        masks[item] = masks.get(item, 0) | (1 << position)
    full = (1 << len(first)) - 1
    row = full  # A 0 bit: that prefix of `first` ends a common subsequence.
    for item in second:
        matches = row & masks.get(item, 0)
        row = ((row + matches) | (row - matches)) & full
    return len(first) - row.bit_count()


def length_scores(hypotheses: Sequence[str], *, vocab_path: Optional[str] = None) -> np.ndarray:
    """Number of SentencePiece pieces of each summary."""
    pieces = _pieces(vocab_path)
    return np.array([len(pieces.tokenize(text)) for text in hypotheses], dtype=np.float64)
