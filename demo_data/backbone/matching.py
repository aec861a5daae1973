"""The matching stage: for every piece of a random sequence with many copied
pieces, whether it occurs elsewhere in it. A tiny model does not learn to
find equal pieces from text whose pairs differ by one piece, and every
comparison of the later stages needs it."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def elsewhere_labels(inputs: Sequence[int]) -> np.ndarray:
    """1 for each piece that occurs at another position of the input too: the
    matching stage's label."""
    ids = np.asarray(inputs)
    _, index, counts = np.unique(ids, return_inverse=True, return_counts=True)
    return (counts[index] > 1).astype(np.int32)


def matching_example(
    rng: np.random.Generator, pieces: int, length: int = 96
) -> tuple[list[int], np.ndarray]:
    """A random sequence for the matching stage: `length - 1` distinct
    pieces (ids 10 to `pieces` - 1) and EOS, where 0-23 pieces are copied
    over others; each piece is labelled 1 when it occurs at another position
    too (`elsewhere_labels`; EOS does not). No language, only equal pieces to
    find. A tiny model learns this from many copies in a few hundred steps,
    and not from one repeated or foreign piece per pair (see the README's
    demo section), so the copies are many.

    Returns:
      (inputs, labels): inputs end in EOS; labels has one 0/1 per input piece.
    """
    copies = int(rng.integers(0, length // 4))
    content = rng.choice(np.arange(10, pieces), length - 1, replace=False)
    if copies:
        ends = rng.choice(length - 1, 2 * copies, replace=False)
        content[ends[copies:]] = content[ends[:copies]]
    inputs = [int(piece) for piece in content] + [1]
    labels = elsewhere_labels(inputs)
    return inputs, labels


def batches(pieces: int):
    """`batch_of(rng, size)` for `piece_stage.train_piece_stage`:
    `matching_example` sequences over the ids below `pieces`."""

    def batch_of(rng, size):
        examples = [matching_example(rng, pieces) for _ in range(size)]
        return np.array([inputs for inputs, _ in examples], np.int32), np.stack(
            [labels for _, labels in examples]
        )

    return batch_of
