"""Score summaries with a SEAHORSE-style metric: P("1") at the first decoder step.

    from seahorse_metrics import Scorer
    scorer = Scorer.load("path/to/checkpoint")      # ours, Hugging Face or T5X
    probs = scorer.score(articles, summaries)       # float numpy array in [0, 1]

Each pair is read as `premise: {premise} hypothesis: {hypothesis}`, tokenised
with the checkpoint's SentencePiece vocabulary, cut to `max_input_length`
tokens (keeping room for EOS), and scored with one encoder pass and one
decoder step (`EncoderDecoderModel.first_token_probs`). The ids of "1" and "0"
are the first pieces of those strings in the vocabulary.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Optional, Sequence

import numpy as np

from seahorse_metrics.model.config import T5Config
from seahorse_metrics.model.model import EncoderDecoderModel

logger = logging.getLogger(__name__)

VOCAB_FILE = "spiece.model"
INPUT_TEMPLATE = "premise: {premise} hypothesis: {hypothesis}"
POSITIVE_TARGET = "1"
NEGATIVE_TARGET = "0"
_MIN_BUCKET = 16


def find_vocabulary(checkpoint_path: str) -> Optional[str]:
    """Returns `spiece.model` in the checkpoint directory (or, for a step
    directory, in its parent), or None."""
    for directory in (checkpoint_path, os.path.dirname(os.path.abspath(checkpoint_path))):
        candidate = os.path.join(directory, VOCAB_FILE)
        if os.path.isfile(candidate):
            return candidate
    return None


def first_piece_id(processor: Any, text: str) -> int:
    """The id of the first SentencePiece piece of `text` (how a target such as
    "1" starts)."""
    ids = processor.encode(text)
    if not ids:
        raise ValueError(f"the vocabulary encodes {text!r} as nothing")
    return int(ids[0])


class Scorer:
    """Scores (premise, hypothesis) pairs with an encoder-decoder metric.

    Attributes:
      model: The `EncoderDecoderModel`.
      params: Its parameters (on the default device).
      positive_id: Vocabulary id of "1".
      negative_id: Vocabulary id of "0".
      max_input_length: Inputs are cut to this many tokens, EOS included.
    """

    def __init__(self, model: EncoderDecoderModel, params: Any, vocab_path: str,
                 max_input_length: int = 2048, batch_size: int = 16):
        """Builds a scorer from loaded parameters.

        Args:
          model: The model object.
          params: Parameters matching `model.config`.
          vocab_path: SentencePiece model file.
          max_input_length: Token budget of one input, EOS included.
          batch_size: Default number of pairs per forward pass.

        Raises:
          ValueError: if the vocabulary does not fit the model, or "1" and
            "0" start with the same piece.
        """
        import jax
        import sentencepiece

        if max_input_length < 2:
            raise ValueError(f"max_input_length must be >= 2, got {max_input_length}")
        self.model = model
        self.params = jax.device_put(params)
        self.max_input_length = int(max_input_length)
        self.batch_size = int(batch_size)
        self.vocab_path = vocab_path
        self._processor = sentencepiece.SentencePieceProcessor(model_file=vocab_path)
        self._check_vocabulary(model.config)
        self.positive_id = first_piece_id(self._processor, POSITIVE_TARGET)
        self.negative_id = first_piece_id(self._processor, NEGATIVE_TARGET)
        if self.positive_id == self.negative_id:
            raise ValueError(
                f"{vocab_path}: {POSITIVE_TARGET!r} and {NEGATIVE_TARGET!r} both start with piece "
                f"{self._processor.id_to_piece(self.positive_id)!r} (id {self.positive_id}), so "
                "their probabilities cannot be told apart; use the vocabulary the metric was "
                "trained with")

    def _check_vocabulary(self, config: T5Config) -> None:
        size = self._processor.get_piece_size()
        if size > config.vocab_size:
            raise ValueError(
                f"{self.vocab_path}: {size} pieces do not fit the model's vocab_size "
                f"{config.vocab_size}; is it the checkpoint's vocabulary?")
        for role, vocab_id, model_id in (("eos", self._processor.eos_id(), config.eos_id),
                                         ("pad", self._processor.pad_id(), config.pad_id)):
            if vocab_id >= 0 and vocab_id != model_id:
                raise ValueError(
                    f"{self.vocab_path}: {role} id {vocab_id} differs from the model's {model_id}")

    @classmethod
    def load(cls, path: str, vocab: Optional[str] = None, dtype: str = "float32",
             max_input_length: int = 2048, batch_size: int = 16) -> "Scorer":
        """Loads a scorer from any checkpoint directory `load_checkpoint` reads.

        Args:
          path: Checkpoint directory (ours, Hugging Face, T5X model or step dir).
          vocab: SentencePiece model; defaults to `spiece.model` in `path`.
          dtype: Compute dtype ("float32" or "bfloat16"); parameters stay float32.
          max_input_length: Token budget of one input, EOS included.
          batch_size: Default number of pairs per forward pass.

        Raises:
          FileNotFoundError: if no vocabulary is given or found.
        """
        from seahorse_metrics.checkpoints import load_checkpoint

        vocab_path = vocab or find_vocabulary(path)
        if vocab_path is None:
            raise FileNotFoundError(
                f"no {VOCAB_FILE} in {path}; pass the SentencePiece model as vocab=...")
        if not os.path.isfile(vocab_path):
            raise FileNotFoundError(f"vocabulary {vocab_path} does not exist")
        config, params = load_checkpoint(path)
        model = EncoderDecoderModel(config.replace(dtype=dtype))
        return cls(model, params, vocab_path, max_input_length=max_input_length,
                   batch_size=batch_size)

    def encode_inputs(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[list[int]]:
        """Token ids of each formatted input, truncated, ending with EOS."""
        if len(premises) != len(hypotheses):
            raise ValueError(
                f"got {len(premises)} premises but {len(hypotheses)} hypotheses; they must pair up")
        texts = []
        for index, (premise, hypothesis) in enumerate(zip(premises, hypotheses)):
            if not isinstance(premise, str) or not isinstance(hypothesis, str):
                raise ValueError(f"pair {index}: premise and hypothesis must be strings, got "
                                 f"{type(premise).__name__} and {type(hypothesis).__name__}")
            texts.append(INPUT_TEMPLATE.format(premise=premise, hypothesis=hypothesis))
        budget = self.max_input_length - 1  # room for EOS
        encoded = self._processor.encode(texts)
        truncated = sum(len(ids) > budget for ids in encoded)
        if truncated:
            logger.warning("%d of %d inputs were longer than %d tokens and were truncated",
                           truncated, len(texts), self.max_input_length)
        return [ids[:budget] + [self.model.config.eos_id] for ids in encoded]

    def _bucket_length(self, length: int) -> int:
        # Powers of two bound both padding and the number of compiled shapes.
        bucket = _MIN_BUCKET
        while bucket < length:
            bucket *= 2
        return min(bucket, self.max_input_length)

    def score(self, premises: Sequence[str], hypotheses: Sequence[str],
              batch_size: Optional[int] = None, show_progress: Optional[bool] = None) -> np.ndarray:
        """Returns P("1") for each (premise, hypothesis) pair.

        Args:
          premises: Articles (or other grounding texts).
          hypotheses: Summaries, one per premise.
          batch_size: Pairs per forward pass (default: the scorer's).
          show_progress: Show a progress bar (default: when on a terminal).

        Returns:
          float32 array [len(premises)].
        """
        from tqdm.auto import tqdm

        token_ids = self.encode_inputs(list(premises), list(hypotheses))
        batch_size = int(batch_size or self.batch_size)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        scores = np.zeros(len(token_ids), np.float32)
        rows_per_batch = min(batch_size, len(token_ids))
        # Longest first: similar lengths share a batch, and the slowest
        # compilation happens up front.
        order = sorted(range(len(token_ids)), key=lambda i: -len(token_ids[i]))
        starts = range(0, len(order), batch_size)
        for start in tqdm(starts, desc="scoring", unit="batch",
                          disable=(None if show_progress is None else not show_progress)):
            rows = order[start:start + batch_size]
            scores[rows] = self._score_rows([token_ids[i] for i in rows], rows_per_batch)
        return scores

    def _score_rows(self, rows: list[list[int]], batch_size: int) -> np.ndarray:
        length = self._bucket_length(max(len(ids) for ids in rows))
        # A fixed batch shape (padding rows are all pad) compiles once per bucket.
        tokens = np.full((batch_size, length), self.model.config.pad_id, np.int32)
        for row, ids in enumerate(rows):
            tokens[row, :len(ids)] = ids
        probs = self.model.first_token_probs(self.params, tokens, (self.positive_id,))
        return np.asarray(probs)[:len(rows), 0]
