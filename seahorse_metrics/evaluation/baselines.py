"""Baseline metrics the paper compares learnt metrics with.

- `majority_scores`: the majority class of the benchmark's labels, as a
  constant score (1.0 = yes). Its ROC-AUC is 0.5 and its correlations are
  undefined (constant scores); its accuracy at 0.5 is the majority share.
- `rouge_l_scores`: ROUGE-L between the article (reference side) and the
  summary (candidate side) on SentencePiece pieces, computed by the
  `rouge-score` package with a custom tokenizer, as in the SEAHORSE paper's
  footnote. F-measure by default; precision (share of the summary covered by
  the longest common subsequence with the article) and recall are options.
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
    from rouge_score import rouge_scorer

    if measure not in ROUGE_MEASURES:
        raise ValueError(f"unknown ROUGE measure {measure!r}; choose from {ROUGE_MEASURES}")
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_pieces(vocab_path))
    pairs = zip(premises, hypotheses)
    if progress:
        from tqdm import tqdm

        pairs = tqdm(pairs, total=len(premises), desc="ROUGE-L", unit="pair")
    return np.array(
        [getattr(scorer.score(article, summary)["rougeL"], measure) for article, summary in pairs],
        dtype=np.float64,
    )


def length_scores(hypotheses: Sequence[str], *, vocab_path: Optional[str] = None) -> np.ndarray:
    """Number of SentencePiece pieces of each summary."""
    pieces = _pieces(vocab_path)
    return np.array([len(pieces.tokenize(text)) for text in hypotheses], dtype=np.float64)
