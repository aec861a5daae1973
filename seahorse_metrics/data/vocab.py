"""SentencePiece vocabularies: a TF-free tokenizer and the seqio vocabulary.

The real metrics use mT5's `spiece.model` (250k pieces). The repo ships a
small multilingual SentencePiece model, trained on the bundled sample, for
tests and the demo (`default_vocab_path()`).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import sentencepiece

_SAMPLE_VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample", "spiece.model")


def default_vocab_path() -> str:
    """Path of the small SentencePiece model shipped with the package.

    Raises:
      FileNotFoundError: if the packaged model is missing (broken install).
    """
    if not os.path.isfile(_SAMPLE_VOCAB):
        raise FileNotFoundError(
            f"{_SAMPLE_VOCAB}: the bundled sample SentencePiece model is missing; "
            "reinstall seahorse-metrics or pass the path of an spiece.model"
        )
    return _SAMPLE_VOCAB


class SentencePieceTokenizer:
    """A SentencePiece model through the Python `sentencepiece` package (no TF).

    Args:
      path: Path of the `.model` file (e.g. mT5's `spiece.model`).
      model_proto: Serialized model, instead of reading `path` (seqio
        vocabularies on remote storage expose it as `sp_model`).

    Attributes:
      path: The model path (for messages and caching keys).
      eos_id, pad_id, unk_id: Special ids of the model.
      vocab_size: Number of pieces.
    """

    def __init__(
        self, path: Optional[str | os.PathLike] = None, model_proto: Optional[bytes] = None
    ):
        if path is None and model_proto is None:
            raise ValueError("pass the path of a SentencePiece model (or its serialized proto)")
        self.path = os.fspath(path) if path is not None else "<serialized>"
        self._processor = sentencepiece.SentencePieceProcessor()
        if model_proto is not None:
            self._processor.LoadFromSerializedProto(model_proto)
        else:
            if not os.path.isfile(self.path):
                raise FileNotFoundError(f"{self.path}: SentencePiece model not found")
            self._processor.Load(self.path)
        self.eos_id = self._processor.eos_id()
        self.pad_id = self._processor.pad_id()
        self.unk_id = self._processor.unk_id()
        self.vocab_size = self._processor.get_piece_size()
        if self.eos_id < 0:
            raise ValueError(f"{self.path}: the SentencePiece model has no EOS piece")

    def encode(self, text: str) -> list[int]:
        """Piece ids of `text` (no EOS)."""
        return self._processor.encode(text, out_type=int)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Piece ids of each text (no EOS)."""
        return self._processor.encode(list(texts), out_type=int)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of piece ids; stops at the first EOS, as seqio's decode does."""
        ids = [int(i) for i in ids]
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return self._processor.decode(ids)

    def id_to_piece(self, token_id: int) -> str:
        """The piece string of an id (`▁` marks a preceding space)."""
        return self._processor.id_to_piece(int(token_id))

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer({self.path!r}, vocab_size={self.vocab_size})"


def target_token_ids(tokenizer) -> tuple[int, int]:
    """The ids the metric reads at the first decoder step: (`1`, `0`).

    Each is the first piece of the encoded target string, which is what a
    model trained on targets `1`/`0` emits first.

    Raises:
      ValueError: if the two coincide, or the first piece is a bare `▁` (the
        vocabulary lacks `▁1`/`▁0`, so the first step cannot tell yes from no).
    """
    ids = []
    for target in ("1", "0"):
        encoded = tokenizer.encode(target)
        if not encoded:
            raise ValueError(f"the vocabulary encodes {target!r} to nothing")
        first = encoded[0]
        if not tokenizer.decode([first]).strip():
            raise ValueError(
                f"the vocabulary encodes {target!r} as a bare '▁' piece followed by "
                f"{encoded[1:]}; the first decoder step cannot tell `1` from `0`. Use a "
                "vocabulary with whole pieces for '▁1' and '▁0' (mT5's has them)."
            )
        ids.append(first)
    if ids[0] == ids[1]:
        raise ValueError(f"`1` and `0` start with the same piece id {ids[0]}")
    return ids[0], ids[1]


def seqio_vocabulary(path: Optional[str | os.PathLike] = None, extra_ids: int = 0):
    """A `seqio.SentencePieceVocabulary` for `path` (default: the shipped sample model).

    seqio (and TensorFlow) are imported only when this is called.
    """
    import seqio  # Lazy: importing seqio/TF costs seconds.

    return seqio.SentencePieceVocabulary(
        os.fspath(path) if path is not None else default_vocab_path(), extra_ids=extra_ids
    )
