"""The sequence-to-sequence text objectives' noise: T5's span corruption and
grounded-token replacement (noise detection is `noise_detection`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def span_corrupt(
    ids: Sequence[int],
    rng: np.random.Generator,
    vocab_size: int,
    noise_density: float = 0.15,
    mean_span: float = 3.0,
) -> tuple[list[int], list[int]]:
    """T5 span corruption of one token sequence (without EOS): returns
    (inputs, targets), both ending in EOS (id 1)."""
    length = len(ids)
    noise = max(1, int(round(length * noise_density)))
    num_spans = max(1, int(round(noise / mean_span)))
    # Random span lengths that sum to `noise`, and random gaps between them.
    cuts = (
        np.sort(rng.choice(np.arange(1, noise), num_spans - 1, replace=False))
        if num_spans > 1
        else []
    )
    span_lengths = np.diff(np.concatenate([[0], cuts, [noise]])).astype(int)
    keep = length - noise
    gaps = np.sort(rng.choice(np.arange(0, keep + 1), num_spans, replace=True))
    inputs, targets, position, kept = [], [], 0, 0
    for k, (gap, span) in enumerate(zip(gaps, span_lengths)):
        take = int(gap) - kept
        inputs += list(ids[position : position + take])
        position += take
        kept += take
        sentinel = vocab_size - 1 - k
        inputs.append(sentinel)
        targets += [sentinel] + list(ids[position : position + span])
        position += int(span)
    inputs += list(ids[position:])
    return inputs + [1], targets + [1]


def grounded_tokens(premise: Sequence[int], hypothesis: Sequence[int], prefix: int) -> list[int]:
    """Positions of hypothesis tokens (after its `prefix` pieces) that also
    occur in the premise: mostly the names, places and numbers it restates."""
    seen = set(premise)
    return [i for i in range(prefix, len(hypothesis)) if hypothesis[i] in seen]


def swap_grounded(
    example: tuple[Sequence[int], Sequence[int]],
    donor: tuple[Sequence[int], Sequence[int]],
    prefix: int,
    rng: np.random.Generator,
    rate: float = 0.15,
) -> tuple[list[int], list[int]]:
    """Grounded-token replacement: about `rate` of the hypothesis tokens that
    the premise supports are replaced by supported tokens of another (donor)
    pair, the premise does not contain; the target is the original
    hypothesis, so the model learns to check the hypothesis against the
    premise and restore it from there. A token-level, label-free noise in
    the spirit of BART's token replacement and FactCC's swaps.

    Returns:
      (inputs, targets), both ending in EOS.
    """
    premise, hypothesis = example
    positions = grounded_tokens(premise, hypothesis, prefix)
    seen = set(premise)
    replacements = sorted({donor[1][i] for i in grounded_tokens(*donor, prefix)} - seen)
    noisy = list(hypothesis)
    if positions and replacements:
        count = max(1, int(round((len(hypothesis) - prefix) * rate)))
        for position in rng.choice(positions, min(count, len(positions)), replace=False):
            noisy[position] = int(replacements[rng.integers(len(replacements))])
    return list(premise) + noisy + [1], list(hypothesis[prefix:]) + [1]
