"""What the stages need to know of the vocabulary's pieces: which start a
word, end a sentence, start a name or number, or are another inflection of
each other, as tables over piece ids."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


def similar_pieces(pieces: Sequence[str]) -> dict[int, list[int]]:
    """For each word piece, the other word pieces with the same first three
    letters: mostly other inflections of the same word (`haben`/`hat`)."""
    groups: dict[str, list[int]] = {}
    for index, piece in enumerate(pieces):
        if piece.startswith("\u2581") and len(piece) >= 4:
            groups.setdefault(piece[:4], []).append(index)
    return {
        index: [other for other in group if other != index]
        for group in groups.values()
        if len(group) > 1
        for index in group
    }


def value_pieces(pieces: Sequence[str]) -> np.ndarray:
    """Which pieces start a name or a number (capitalised or a digit)."""
    return np.array(
        [
            piece.startswith("\u2581")
            and len(piece) > 1
            and (piece[1].isupper() or piece[1].isdigit())
            for piece in pieces
        ],
        bool,
    )


def sentence_ends(pieces: Sequence[str]) -> np.ndarray:
    """Which pieces end a sentence: a full stop, alone or after a quote or a
    sign, not the dot of a number (`3.` in `3.700`)."""
    return np.array(
        [piece.endswith(".") and not piece.rstrip(".")[-1:].isdigit() for piece in pieces], bool
    )


def word_boundaries(pieces: Sequence[str]) -> np.ndarray:
    """Which pieces start a word: those that start with the word marker, and
    punctuation (a piece without a letter or digit), a word of its own, so
    that `Logistics,` is the word `Logistics` and `,`."""
    return np.array(
        [piece.startswith("\u2581") or not any(c.isalnum() for c in piece) for piece in pieces],
        bool,
    )


def words_of(body: Sequence[int], starts_word: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each word of `body` (`word_boundaries`)."""
    starts = [i for i in range(len(body)) if starts_word[body[i]] or i == 0] + [len(body)]
    return list(zip(starts[:-1], starts[1:]))


def text_words(body: Sequence[int], starts_word: np.ndarray) -> list[tuple[int, ...]]:
    """The words of `body` (`words_of`), each as its tuple of piece ids."""
    return [tuple(body[a:b]) for a, b in words_of(body, starts_word)]


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """The vocabulary's pieces and tables over the model's ids (ids past the
    pieces, the sentinels, are False everywhere)."""

    pieces: list[str]
    premise_prefix: int  # pieces of "premise:"
    hypothesis_prefix: int  # pieces of "hypothesis:"
    word_start: np.ndarray  # starts with the word marker
    starts_word: np.ndarray  # `word_boundaries`: the word marker, or punctuation
    ends_sentence: np.ndarray  # `sentence_ends`
    is_value: np.ndarray  # `value_pieces`
    similar: dict[int, list[int]]  # `similar_pieces`


def vocabulary(tokenizer, vocab_size: int) -> Vocabulary:
    """The tables of a SentencePiece processor's pieces, over `vocab_size` ids."""
    pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.get_piece_size())]

    def table(values) -> np.ndarray:
        over_ids = np.zeros(vocab_size, bool)
        over_ids[: len(pieces)] = values
        return over_ids

    return Vocabulary(
        pieces=pieces,
        premise_prefix=len(tokenizer.encode("premise:")),
        hypothesis_prefix=len(tokenizer.encode("hypothesis:")),
        word_start=table([piece.startswith("\u2581") for piece in pieces]),
        starts_word=table(word_boundaries(pieces)),
        ends_sentence=table(sentence_ends(pieces)),
        is_value=table(value_pieces(pieces)),
        similar=similar_pieces(pieces),
    )
