"""The word-noise stage: which words of a train-split text were swapped with
their neighbour or turned into another inflection, many per text."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from demo_data.backbone.texts import pad
from demo_data.backbone.vocabulary import Vocabulary


def word_noise_example(
    ids: Sequence[int],
    rng: np.random.Generator,
    word_start: np.ndarray,
    similar: dict[int, list[int]],
    replace_rate: float = 0.3,
    swap_rate: float = 0.1,
) -> tuple[list[int], list[int]]:
    """A text for the word-noise stage, ELECTRA's replaced-token detection
    with a rule in place of the generator, and heavy: word by word, a word
    trades places with the next one (`swap_rate`; both are labelled), or,
    when its first piece has other inflections (`similar_pieces`), becomes
    one of them (`replace_rate`; the new piece is labelled). Many noisy words
    per text, as the matching stage has many copies: a tiny model learns to
    tell words that do not fit their context from many, not from one.

    Returns:
      (inputs, labels): inputs are the noisy text and EOS; labels has one 0/1
      per input piece.
    """
    ids, labels = list(ids), [0] * len(ids)
    starts = [i for i in range(len(ids)) if word_start[ids[i]]] + [len(ids)]
    k = 0
    while k < len(starts) - 2:
        draw = rng.random()
        if draw < swap_rate:
            a, b, c = starts[k], starts[k + 1], starts[k + 2]
            if ids[a:b] != ids[b:c]:
                ids[a:c] = ids[b:c] + ids[a:b]
                labels[a:c] = [1] * (c - a)
            k += 2
            continue
        if draw < swap_rate + replace_rate and ids[starts[k]] in similar:
            options = similar[ids[starts[k]]]
            ids[starts[k]] = int(options[rng.integers(len(options))])
            labels[starts[k]] = 1
        k += 1
    return ids + [1], labels + [0]


def batches(args, texts: Sequence[Sequence[int]], vocab: Vocabulary):
    """`batch_of(rng, size)` for `piece_stage.train_piece_stage`:
    `word_noise_example` texts (`texts`, whole train-split pairs) at
    `args.word_noise_rates`, padded to `args.input_length`."""
    replace_rate, swap_rate = args.word_noise_rates

    def batch_of(rng, size):
        examples = [
            word_noise_example(
                texts[i], rng, vocab.word_start, vocab.similar, replace_rate, swap_rate
            )
            for i in rng.integers(0, len(texts), size)
        ]
        return (
            pad([inputs for inputs, _ in examples], args.input_length),
            pad([labels for _, labels in examples], args.input_length, fill=-1),
        )

    return batch_of
