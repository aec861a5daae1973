"""Noise detection, ELECTRA's replaced-token detection for a premise and its
hypothesis: the hypothesis gets one kind of noise (or none), the target lists
the pieces the noise put there, and every hypothesis piece is labelled noise
or original for a discriminator on the encoder's outputs.

The kinds (`NOISE_KINDS`) are generic:
* `replace_grounded`: one or two hypothesis pieces the premise contains
  become pieces of another pair that the premise lacks;
* `swap_in_premise`: a name or number the premise contains becomes another
  name or number of the same premise (FactCC's entity swap);
* `duplicate_span`: 2-10 pieces are repeated, in place or at the end;
* `swap_words`: two adjacent words trade places;
* `replace_similar`: a word becomes another with the same first three
  letters (another inflection, mostly).

`strength` (0-1) makes the noise heavier: that share of the candidate pieces
is replaced, of the words swapped, of the hypothesis repeated. A tiny model
only learns to compare pieces from strong signals (one repeated piece in a
sentence is not enough to start), so a run starts strong and weakens to the
lightest noise (`--noise_strength`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from demo_data.backbone.text_objectives import grounded_tokens

NOISE_KINDS = (
    "replace_grounded",
    "swap_in_premise",
    "duplicate_span",
    "swap_words",
    "replace_similar",
)


def detect_noise(
    example: tuple[Sequence[int], Sequence[int]],
    donor: tuple[Sequence[int], Sequence[int]],
    prefix: int,
    rng: np.random.Generator,
    word_start: np.ndarray,
    is_value: np.ndarray,
    similar: dict[int, list[int]],
    input_length: int,
    target_length: int,
    clean_rate: float = 0.3,
    kinds: Sequence[str] = NOISE_KINDS,
    strength: float = 0.0,
) -> tuple[list[int], list[int], list[int]]:
    """A noise-detection example (see the module docstring): the hypothesis
    gets one of `kinds` of noise at `strength`, or none (`clean_rate`); the
    target lists the pieces the noise put there (empty when clean), so the
    first decoder step must tell whether anything in the hypothesis is out of
    place, the step a metric reads.

    Returns:
      (inputs, targets, labels): inputs and targets end in EOS; labels has
      one entry per input piece, 1 for noise, 0 for an original hypothesis
      piece and -1 outside the hypothesis. The premise loses its end when the
      whole does not fit `input_length`.
    """
    premise, hypothesis = example
    body = list(hypothesis[prefix:])
    flags = [0] * len(body)
    noise: list[int] = []
    if rng.random() >= clean_rate and len(body) > 2:
        kind = kinds[rng.integers(len(kinds))]
        if kind in ("replace_grounded", "swap_in_premise"):
            pool = _value_pool(kind, premise, donor, prefix, is_value)
            noise = _replace_values(kind, premise, body, flags, pool, is_value, rng, strength)
        elif kind == "duplicate_span":
            noise = _duplicate_span(body, flags, rng, strength)
        elif kind == "swap_words":
            noise = _swap_words(body, flags, rng, word_start, strength)
        else:
            noise = _replace_similar(body, flags, rng, similar, strength)
    noisy = list(hypothesis[:prefix]) + body
    room = max(0, input_length - 1 - len(noisy))
    inputs = list(premise[:room]) + noisy + [1]
    labels = [-1] * (len(inputs) - 1 - len(body)) + flags + [-1]
    return inputs, noise[: target_length - 1] + [1], labels


def _value_pool(
    kind: str,
    premise: Sequence[int],
    donor: tuple[Sequence[int], Sequence[int]],
    prefix: int,
    is_value: np.ndarray,
) -> list[int]:
    """The pieces `replace_grounded` or `swap_in_premise` put in: supported
    pieces of the donor that the premise lacks, or the premise's names and
    numbers."""
    if kind == "replace_grounded":
        return sorted({donor[1][i] for i in grounded_tokens(*donor, prefix)} - set(premise))
    return sorted({piece for piece in premise if is_value[piece]})


def _replace_values(
    kind: str,
    premise: Sequence[int],
    body: list[int],
    flags: list[int],
    pool: Sequence[int],
    is_value: np.ndarray,
    rng: np.random.Generator,
    strength: float,
) -> list[int]:
    """`replace_grounded` and `swap_in_premise`: hypothesis pieces the premise
    contains (its names and numbers, for `swap_in_premise`) become pieces of
    `pool`; changes `body` and `flags` in place and returns the new pieces."""
    positions = grounded_tokens(premise, body, 0)
    if kind == "swap_in_premise":
        positions = [i for i in positions if is_value[body[i]]]
    noise = []
    if positions and pool:
        count = max(1 + int(rng.integers(2)), int(round(strength * len(positions))))
        chosen = sorted(rng.choice(positions, min(len(positions), count), replace=False))
        for position in chosen:
            options = [piece for piece in pool if piece != body[position]]
            if options:
                body[position] = int(options[rng.integers(len(options))])
                flags[position] = 1
                noise.append(body[position])
    return noise


def _duplicate_span(
    body: list[int], flags: list[int], rng: np.random.Generator, strength: float
) -> list[int]:
    """`duplicate_span`: a span repeated right after itself or at the end;
    changes `body` and `flags` in place and returns the copy."""
    longest = max(10, int(round(strength * len(body))))
    span = int(rng.integers(2, min(longest, len(body)) + 1))
    start = int(rng.integers(0, len(body) - span + 1))
    copy = body[start : start + span]
    at = start + span if rng.random() < 0.5 else len(body)
    body[at:at] = copy
    flags[at:at] = [1] * span
    return copy


def _swap_words(
    body: list[int],
    flags: list[int],
    rng: np.random.Generator,
    word_start: np.ndarray,
    strength: float,
) -> list[int]:
    """`swap_words`: adjacent words trade places; changes `body` and `flags`
    in place and returns the pieces of the swapped words."""
    starts = [i for i in range(len(body)) if word_start[body[i]]] + [len(body)]
    pairs = list(range(0, len(starts) - 2, 2))
    count = max(1, int(round(strength * len(pairs))))
    noise = []
    for k in sorted(rng.choice(pairs, min(count, len(pairs)), replace=False)) if pairs else []:
        a, b, c = starts[k], starts[k + 1], starts[k + 2]
        if body[a:b] != body[b:c]:
            body[a:c] = body[b:c] + body[a:b]
            flags[a:c] = [1] * (c - a)
            noise += body[a:c]
    return noise


def _replace_similar(
    body: list[int],
    flags: list[int],
    rng: np.random.Generator,
    similar: dict[int, list[int]],
    strength: float,
) -> list[int]:
    """`replace_similar`: words become other inflections (`similar_pieces`);
    changes `body` and `flags` in place and returns the new pieces."""
    positions = [i for i, piece in enumerate(body) if piece in similar]
    count = max(1, int(round(strength * len(positions))))
    noise = []
    for position in (
        sorted(rng.choice(positions, min(count, len(positions)), replace=False))
        if positions
        else []
    ):
        options = similar[body[position]]
        body[position] = int(options[rng.integers(len(options))])
        flags[position] = 1
        noise.append(body[position])
    return noise
