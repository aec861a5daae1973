#!/usr/bin/env python3
"""Pretrains the demo's tiny backbone on the sample's text, without labels.

The released SEAHORSE metrics are mT5 checkpoints fine-tuned on the ratings;
mT5 itself learnt the languages by span corruption on unlabelled web text.
The demo follows the same recipe at toy scale: this script trains a tiny
mT5-shaped model with T5's span-corruption objective on the text of the
bundled sample's *train* split only (articles and summaries, written as the
metric's inputs `premise: <article> hypothesis: <summary>`); no rating is
read. The result is written as a Hugging Face `MT5ForConditionalGeneration`
directory (`config.json`, `model.safetensors`, `spiece.model`) in
`seahorse_metrics/data/backbone/`, and `gin/runs/demo.gin` fine-tunes
from it, exactly as a real run fine-tunes from `google/mt5-large`.

Four encoder stages, each a per-piece head on the encoder's outputs that
is dropped afterwards, can come before the text objectives of the same run
(in this order):
* matching (`--matching_steps`, see `matching_example`): for every piece of
  a random sequence with many copied pieces, whether it occurs elsewhere. A
  tiny model does not learn to find equal pieces from text whose pairs
  differ by one piece, and every comparison below needs it;
* word noise (`--word_noise_steps`, see `word_noise_example`): which words
  of a train-split text were swapped with their neighbour or turned into
  another inflection, many per text;
* grammar (`--grammar_steps`, see `grammar_example`): on the sample's
  unlabelled corpus (`corpus/train.jsonl.gz`, 9,000 article-summary pairs
  that nobody rated, standing in for the summarisation datasets' train
  splits and the web text that taught mT5 the languages) and on the train
  split's pairs, which summary words make a word pair that the corpus never
  has, once a bigram generator has swapped words or put others in their
  place (ELECTRA with n-gram statistics in both roles), and whether the
  summary has any such word;
* alignment (`--alignment_steps`, see `alignment_example`): on the train
  split's pairs as they are (and `--alignment_corpus` of the time the
  corpus'), which summary pieces the article contains, and its lead; which
  article pieces the summary contains and which lie in the lead; which
  pieces repeat; which names and numbers the article lacks; and which words
  the word noise changed (with `--alignment_grammar`, the grammar stage's
  noise and verdicts). Shuffling the article's sentences
  (`--alignment_shuffle`) and giving the summary names and numbers of
  another summary (`--alignment_swap`) keep the encoder comparing rather
  than remembering the 3,600 pairs.
Every label comes from the text itself; no rating is read.

Measured on the demo (test split ROC-AUC, README), from the span-corruption
backbone (Q1-Q6 0.90 0.51 0.54 0.48 0.51 0.89): matching alone gives Q2
0.81 but costs Q1 (0.77); matching then word noise keeps Q1 and loses Q2
again (validation 0.95 and 0.60); the alignment stage after them gives
0.89 0.92 0.54 0.72 0.98 0.96 (210 fine-tuning steps each; without
shuffling and swapping, Q4 stays at 0.66). Grammar (Q3) is learnt by none
of them: word noise on the rated text, whose own ungrammatical summaries
count as good text there, reaches a per-piece ROC-AUC of only 0.68-0.78.
The grammar stage on the corpus, then alignment with the corpus' pairs and
the grammar verdicts, gives the shipped backbone: 0.93 0.89 0.90 0.89 0.97
0.97 (validation Q3 0.52 before it, 0.86 after the first grammar run, 0.90
after the second; Q4 0.79 at 630 steps before it, 0.87 at 210 after).

Then three label-free text objectives, all sequence-to-sequence on the same
inputs:
* span corruption as in T5: about 15% of the tokens, in spans of mean
  length 3, are replaced by sentinels (the highest ids of the embedding, as
  mT5's `extra_ids`), and the target spells out the dropped spans after
  their sentinels;
* grounded-token replacement (`--replace_rate`): some hypothesis tokens that
  the premise contains are replaced by such tokens of another pair, and the
  target is the original hypothesis (BART's token-replacement noise, aimed
  at the tokens a summary takes from its article, as FactCC's swaps are);
* noise detection (`--detect_rate`, see `detect_noise`): ELECTRA's
  replaced-token detection for the hypothesis, with generic noises
  (`--noise_kinds`: pieces from another pair, names and numbers swapped
  within the premise, repeated spans, swapped words, other inflections);
  the target lists the noisy pieces, so the first decoder step, the one a
  metric reads, must notice them, and `--rtd_weight` adds ELECTRA's
  per-piece discriminator on the encoder's outputs. `--noise_strength`
  starts the noise heavy and makes it lighter: a tiny model does not learn
  to compare pieces from one repeated or swapped piece, only from many.
The run is deterministic for a given seed on one machine.

The shipped backbone was made in six runs (about 40 + 14 + 14 + 9 + 28 +
16 minutes on 2 CPU cores; `pretraining.json` in the output records the
last, and under `init_record` the ones before it):
  python scripts/pretrain_backbone.py --steps 1500 --output /tmp/backbone_span
  python scripts/pretrain_backbone.py --init /tmp/backbone_span --steps 600 \
      --replace_rate 0.5 --target_length 64 --learning_rate 2e-3 --output /tmp/backbone_text
  python scripts/pretrain_backbone.py --init /tmp/backbone_text --steps 0 \
      --matching_steps 700 --word_noise_steps 1500 --output /tmp/backbone_mw
  python scripts/pretrain_backbone.py --init /tmp/backbone_mw --steps 0 --input_length 96 \
      --alignment_steps 1500 --alignment_shuffle 0.5 --alignment_swap 0.3 \
      --output /tmp/backbone_align
  python scripts/pretrain_backbone.py --init /tmp/backbone_align --steps 0 --input_length 96 \
      --grammar_steps 4000 --alignment_steps 1500 --alignment_grammar --alignment_corpus 0.5 \
      --output /tmp/backbone_grammar
  python scripts/pretrain_backbone.py --init /tmp/backbone_grammar --steps 0 --input_length 96 \
      --grammar_steps 2500 --grammar_split 0.5 --alignment_steps 1000 --alignment_grammar \
      --alignment_corpus 0.5

Smoke run:
  python scripts/pretrain_backbone.py --steps 20 --output /tmp/backbone
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import logging
import os
import sys
import time
from typing import Sequence

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

SAMPLE_DIR = os.path.join(REPO_ROOT, "seahorse_metrics", "data", "sample")
DEFAULT_OUTPUT = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
# Sentinels and padding room above the vocabulary's pieces, as mT5 keeps 100
# extra ids after its 250k pieces; the embedding is a multiple of 128 rows.
EXTRA_IDS = 100

logger = logging.getLogger("pretrain_backbone")


def backbone_config(vocab_pieces: int):
    """The backbone's architecture: mT5-shaped, 3 encoder layers, 1 decoder
    layer (the metric reads one decoder step), d_model 64."""
    from seahorse_metrics.model.config import T5Config

    vocab_size = -(-(vocab_pieces + EXTRA_IDS) // 128) * 128
    return T5Config(vocab_size=vocab_size, d_model=64, d_kv=16, num_heads=4, d_ff=192,
                    num_encoder_layers=3, num_decoder_layers=1, dropout_rate=0.0)


def read_train_text(sample_dir: str) -> list[tuple[str, str]]:
    """(article, summary) pairs of the train split, ratings ignored."""
    articles = {}
    with open(os.path.join(sample_dir, "seahorse", "articles.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            articles[record["gem_id"]] = record["text"]
    pairs = []
    with open(os.path.join(sample_dir, "seahorse", "train.tsv"), encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            pairs.append((articles[row["gem_id"]], row["summary"]))
    return pairs


def span_corrupt(ids: Sequence[int], rng: np.random.Generator, vocab_size: int,
                 noise_density: float = 0.15, mean_span: float = 3.0) -> tuple[list[int], list[int]]:
    """T5 span corruption of one token sequence (without EOS): returns
    (inputs, targets), both ending in EOS (id 1)."""
    length = len(ids)
    noise = max(1, int(round(length * noise_density)))
    num_spans = max(1, int(round(noise / mean_span)))
    # Random span lengths that sum to `noise`, and random gaps between them.
    cuts = np.sort(rng.choice(np.arange(1, noise), num_spans - 1, replace=False)) if num_spans > 1 else []
    span_lengths = np.diff(np.concatenate([[0], cuts, [noise]])).astype(int)
    keep = length - noise
    gaps = np.sort(rng.choice(np.arange(0, keep + 1), num_spans, replace=True))
    inputs, targets, position, kept = [], [], 0, 0
    for k, (gap, span) in enumerate(zip(gaps, span_lengths)):
        take = int(gap) - kept
        inputs += list(ids[position:position + take])
        position += take
        kept += take
        sentinel = vocab_size - 1 - k
        inputs.append(sentinel)
        targets += [sentinel] + list(ids[position:position + span])
        position += int(span)
    inputs += list(ids[position:])
    return inputs + [1], targets + [1]


def grounded_tokens(premise: Sequence[int], hypothesis: Sequence[int], prefix: int) -> list[int]:
    """Positions of hypothesis tokens (after its `prefix` pieces) that also
    occur in the premise: mostly the names, places and numbers it restates."""
    seen = set(premise)
    return [i for i in range(prefix, len(hypothesis)) if hypothesis[i] in seen]


def swap_grounded(example: tuple[Sequence[int], Sequence[int]],
                  donor: tuple[Sequence[int], Sequence[int]], prefix: int,
                  rng: np.random.Generator, rate: float = 0.15) -> tuple[list[int], list[int]]:
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


NOISE_KINDS = ("replace_grounded", "swap_in_premise", "duplicate_span", "swap_words",
               "replace_similar")


def similar_pieces(pieces: Sequence[str]) -> dict[int, list[int]]:
    """For each word piece, the other word pieces with the same first three
    letters: mostly other inflections of the same word (`haben`/`hat`)."""
    groups: dict[str, list[int]] = {}
    for index, piece in enumerate(pieces):
        if piece.startswith("\u2581") and len(piece) >= 4:
            groups.setdefault(piece[:4], []).append(index)
    return {index: [other for other in group if other != index]
            for group in groups.values() if len(group) > 1 for index in group}


def value_pieces(pieces: Sequence[str]) -> np.ndarray:
    """Which pieces start a name or a number (capitalised or a digit)."""
    return np.array([piece.startswith("\u2581") and len(piece) > 1
                     and (piece[1].isupper() or piece[1].isdigit()) for piece in pieces], bool)


def detect_noise(example: tuple[Sequence[int], Sequence[int]],
                 donor: tuple[Sequence[int], Sequence[int]], prefix: int,
                 rng: np.random.Generator, word_start: np.ndarray, is_value: np.ndarray,
                 similar: dict[int, list[int]], input_length: int, target_length: int,
                 clean_rate: float = 0.3, kinds: Sequence[str] = NOISE_KINDS,
                 strength: float = 0.0) -> tuple[list[int], list[int], list[int]]:
    """Noise detection, ELECTRA's replaced-token detection for a premise and
    its hypothesis: the hypothesis gets one kind of noise (or none,
    `clean_rate`); the target lists the pieces the noise put there (empty
    when clean), so the first decoder step must tell whether anything in the
    hypothesis is out of place, the step a metric reads; and every
    hypothesis piece is labelled noise (1) or original (0) for a
    discriminator on the encoder's outputs. The kinds are generic:
    * `replace_grounded`: one or two hypothesis pieces the premise contains
      become pieces of another pair that the premise lacks;
    * `swap_in_premise`: a name or number the premise contains becomes
      another name or number of the same premise (FactCC's entity swap);
    * `duplicate_span`: 2-10 pieces are repeated, in place or at the end;
    * `swap_words`: two adjacent words trade places;
    * `replace_similar`: a word becomes another with the same first three
      letters (another inflection, mostly).

    `strength` (0-1) makes the noise heavier: that share of the candidate
    pieces is replaced, of the words swapped, of the hypothesis repeated. A
    tiny model only learns to compare pieces from strong signals (one
    repeated piece in a sentence is not enough to start), so the run starts
    strong and weakens to the lightest noise (`--noise_strength`).

    Returns:
      (inputs, targets, labels): inputs and targets end in EOS; labels has
      one entry per input piece, -1 outside the hypothesis. The premise loses
      its end when the whole does not fit `input_length`.
    """
    premise, hypothesis = example
    body = list(hypothesis[prefix:])
    flags = [0] * len(body)
    noise: list[int] = []
    if rng.random() >= clean_rate and len(body) > 2:
        kind = kinds[rng.integers(len(kinds))]
        if kind in ("replace_grounded", "swap_in_premise"):
            positions = grounded_tokens(premise, body, 0)
            if kind == "replace_grounded":
                pool = sorted({donor[1][i] for i in grounded_tokens(*donor, prefix)} - set(premise))
            else:
                positions = [i for i in positions if is_value[body[i]]]
                pool = sorted({piece for piece in premise if is_value[piece]})
            if positions and pool:
                count = max(1 + int(rng.integers(2)), int(round(strength * len(positions))))
                chosen = sorted(rng.choice(positions, min(len(positions), count), replace=False))
                for position in chosen:
                    options = [piece for piece in pool if piece != body[position]]
                    if options:
                        body[position] = int(options[rng.integers(len(options))])
                        flags[position] = 1
                        noise.append(body[position])
        elif kind == "duplicate_span":
            longest = max(10, int(round(strength * len(body))))
            span = int(rng.integers(2, min(longest, len(body)) + 1))
            start = int(rng.integers(0, len(body) - span + 1))
            copy = body[start:start + span]
            at = start + span if rng.random() < 0.5 else len(body)
            body[at:at] = copy
            flags[at:at] = [1] * span
            noise = copy
        elif kind == "swap_words":
            starts = [i for i in range(len(body)) if word_start[body[i]]] + [len(body)]
            pairs = list(range(0, len(starts) - 2, 2))
            count = max(1, int(round(strength * len(pairs))))
            for k in sorted(rng.choice(pairs, min(count, len(pairs)), replace=False)) if pairs else []:
                a, b, c = starts[k], starts[k + 1], starts[k + 2]
                if body[a:b] != body[b:c]:
                    body[a:c] = body[b:c] + body[a:b]
                    flags[a:c] = [1] * (c - a)
                    noise += body[a:c]
        else:
            positions = [i for i, piece in enumerate(body) if piece in similar]
            count = max(1, int(round(strength * len(positions))))
            for position in sorted(rng.choice(positions, min(count, len(positions)), replace=False)
                                   ) if positions else []:
                options = similar[body[position]]
                body[position] = int(options[rng.integers(len(options))])
                flags[position] = 1
                noise.append(body[position])
    noisy = list(hypothesis[:prefix]) + body
    room = max(0, input_length - 1 - len(noisy))
    inputs = list(premise[:room]) + noisy + [1]
    labels = [-1] * (len(inputs) - 1 - len(body)) + flags + [-1]
    return inputs, noise[:target_length - 1] + [1], labels


def elsewhere_labels(inputs: Sequence[int]) -> np.ndarray:
    """1 for each piece that occurs at another position of the input too: the
    matching stage's label."""
    ids = np.asarray(inputs)
    _, index, counts = np.unique(ids, return_inverse=True, return_counts=True)
    return (counts[index] > 1).astype(np.int32)


def matching_example(rng: np.random.Generator, pieces: int, length: int = 96
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


def word_noise_example(ids: Sequence[int], rng: np.random.Generator, word_start: np.ndarray,
                       similar: dict[int, list[int]], replace_rate: float = 0.3,
                       swap_rate: float = 0.1) -> tuple[list[int], list[int]]:
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


ALIGNMENT_HEADS = ("in_premise", "in_lead", "in_hypothesis", "lead_position", "repeated",
                   "unsupported_value", "noisy_word", "unsupported_share", "any_noisy_word")


def sentence_ends(pieces: Sequence[str]) -> np.ndarray:
    """Which pieces end a sentence: a full stop, alone or after a quote or a
    sign, not the dot of a number (`3.` in `3.700`)."""
    return np.array([piece.endswith(".") and not piece.rstrip(".")[-1:].isdigit()
                     for piece in pieces], bool)


def repeated_bigram_flags(body: Sequence[int]) -> list[int]:
    """1 for each piece of a two-piece sequence that occurs twice in `body`."""
    seen: dict[tuple[int, int], int] = {}
    for i in range(len(body) - 1):
        key = (body[i], body[i + 1])
        seen[key] = seen.get(key, 0) + 1
    flags = [0] * len(body)
    for i in range(len(body) - 1):
        if seen[(body[i], body[i + 1])] > 1:
            flags[i] = flags[i + 1] = 1
    return flags


def word_boundaries(pieces: Sequence[str]) -> np.ndarray:
    """Which pieces start a word: those that start with the word marker, and
    punctuation (a piece without a letter or digit), a word of its own, so
    that `Logistics,` is the word `Logistics` and `,`."""
    return np.array([piece.startswith("\u2581") or not any(c.isalnum() for c in piece)
                     for piece in pieces], bool)


def words_of(body: Sequence[int], starts_word: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each word of `body` (`word_boundaries`)."""
    starts = [i for i in range(len(body)) if starts_word[body[i]] or i == 0] + [len(body)]
    return list(zip(starts[:-1], starts[1:]))


def alignment_example(example: tuple[Sequence[int], Sequence[int]], premise_prefix: int,
                      hypothesis_prefix: int, ends_sentence: np.ndarray, input_length: int,
                      starts_word: np.ndarray, is_value: np.ndarray,
                      noise_flags: Sequence[int] | None = None, wording_verdict: bool = False
                      ) -> tuple[list[int], np.ndarray]:
    """A premise and its hypothesis as given, with per-piece labels that
    the text itself gives (no rating is read), one column per
    `ALIGNMENT_HEADS` entry, -1 where a column does not apply:
    * `in_premise` (hypothesis pieces): the premise contains the piece;
    * `in_lead` (hypothesis pieces): the premise's first sentence, its lead,
      contains it (the lead is news' classic extractive summary);
    * `in_hypothesis` (premise pieces): the hypothesis contains it;
    * `lead_position` (premise pieces): it lies in the first sentence;
    * `repeated` (every text piece): it belongs to a two-piece sequence that
      occurs twice in its own part (premise or hypothesis);
    * `unsupported_value` (hypothesis names and numbers, word by word): the
      premise has no such word, the hallucinated entities FactCC and
      entity-level precision look for;
    * `noisy_word` (hypothesis pieces): `noise_flags`, the word noise that
      `word_noise_example` put into the hypothesis (all 0 without noise);
    * `unsupported_share` (every hypothesis piece, the same soft label): the
      share of the hypothesis' names and numbers that the premise lacks (one
      minus the entity-level precision of Nan et al., 2021; 0 without any),
      so that each piece carries the whole hypothesis' verdict;
    * `any_noisy_word` (every hypothesis piece, the same label; only with
      `wording_verdict`): whether `noise_flags` flags any piece, the verdict
      on the hypothesis' wording.
    The encoder learns to align a summary with its article, sentence by
    sentence, and to notice repeats; the metric's fine-tune then reads those
    alignments instead of discovering them from a few thousand ratings.

    Returns:
      (inputs, labels): inputs end in EOS, premise first, cut at its end to
      fit `input_length`; labels is float [len(inputs), len(ALIGNMENT_HEADS)].
    """
    premise, hypothesis = example
    room = max(premise_prefix, input_length - 1 - len(hypothesis))
    premise = list(premise[:room])
    source, body = premise[premise_prefix:], list(hypothesis[hypothesis_prefix:])
    stops = [i for i, piece in enumerate(source) if ends_sentence[piece]]
    lead_end = stops[0] + 1 if stops else len(source)
    source_set, lead_set, body_set = set(source), set(source[:lead_end]), set(body)
    inputs = premise + list(hypothesis) + [1]
    labels = np.full((len(inputs), len(ALIGNMENT_HEADS)), -1, np.float32)
    start = premise_prefix
    labels[start:len(premise), 2] = [piece in body_set for piece in source]
    labels[start:len(premise), 3] = np.arange(len(source)) < lead_end
    labels[start:len(premise), 4] = repeated_bigram_flags(source)
    start = len(premise) + hypothesis_prefix
    labels[start:start + len(body), 0] = [piece in source_set for piece in body]
    labels[start:start + len(body), 1] = [piece in lead_set for piece in body]
    labels[start:start + len(body), 4] = repeated_bigram_flags(body)
    premise_words = {tuple(source[a:b]) for a, b in words_of(source, starts_word)}
    unsupported = []
    for a, b in words_of(body, starts_word):
        if is_value[body[a]]:
            unsupported.append(tuple(body[a:b]) not in premise_words)
            labels[start + a:start + b, 5] = unsupported[-1]
    labels[start:start + len(body), 6] = list(noise_flags) if noise_flags is not None else 0
    labels[start:start + len(body), 7] = np.mean(unsupported) if unsupported else 0.0
    if wording_verdict:
        labels[start:start + len(body), 8] = max(noise_flags or [0])
    return inputs, labels


def shuffle_sentences(premise: Sequence[int], prefix: int, ends_sentence: np.ndarray,
                      rng: np.random.Generator) -> list[int]:
    """The premise with its whole sentences in random order (an unfinished
    last one stays last), so that its lead is a different sentence."""
    source = list(premise[prefix:])
    stops = [i + 1 for i, piece in enumerate(source) if ends_sentence[piece]]
    sentences = [source[a:b] for a, b in zip([0] + stops[:-1], stops)]
    rest = source[stops[-1]:] if stops else source
    order = rng.permutation(len(sentences))
    return list(premise[:prefix]) + [p for k in order for p in sentences[k]] + rest


def swap_values(hypothesis: Sequence[int], donor: Sequence[int], prefix: int,
                starts_word: np.ndarray, is_value: np.ndarray, rng: np.random.Generator
                ) -> list[int]:
    """The hypothesis with one or two of its names and numbers replaced by
    those of another (donor) hypothesis, FactCC's entity swap across pairs."""
    body, other = list(hypothesis[prefix:]), list(donor[prefix:])
    ours = [(a, b) for a, b in words_of(body, starts_word) if is_value[body[a]]]
    theirs = [other[a:b] for a, b in words_of(other, starts_word) if is_value[other[a]]]
    if not ours or not theirs:
        return list(hypothesis)
    chosen = rng.choice(len(ours), min(len(ours), 1 + int(rng.integers(2))), replace=False)
    for k in sorted(chosen, reverse=True):
        a, b = ours[k]
        body[a:b] = theirs[rng.integers(len(theirs))]
    return list(hypothesis[:prefix]) + body


def read_corpus(sample_dir: str) -> list[tuple[str, str]]:
    """(article, summary) pairs of the sample's unlabelled corpus
    (`corpus/train.jsonl.gz`, the summarisation datasets' train split)."""
    path = os.path.join(sample_dir, "corpus", "train.jsonl.gz")
    pairs, number = [], 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    record = json.loads(line)
                    pairs.append((record["text"], record["summary"]))
                except (json.JSONDecodeError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}:{number}: not a corpus record ({error!r})") from error
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: unreadable after line {number} ({error!r}); regenerate it with "
                         "python -m demo_data.sample") from error
    return pairs


# Word pairs mark a text's start and end with this word (no piece has id -1).
EDGE = (-1,)


def text_words(body: Sequence[int], starts_word: np.ndarray) -> list[tuple[int, ...]]:
    """The words of `body` (`words_of`), each as its tuple of piece ids."""
    return [tuple(body[a:b]) for a, b in words_of(body, starts_word)]


# Words with a digit share one key in word pairs: `in 3.700` is as
# grammatical as `in 3.600`.
NUMBER = (-2,)


class WordPairs:
    """The word pairs a corpus has (`word_pairs`), numbers as `NUMBER`."""

    def __init__(self, has_digit: np.ndarray):
        self.has_digit = has_digit
        self.seen: set = set()

    def key(self, word: tuple[int, ...]) -> tuple[int, ...]:
        return NUMBER if word != EDGE and any(self.has_digit[i] for i in word) else word

    def add(self, left: tuple[int, ...], right: tuple[int, ...]) -> None:
        self.seen.add((self.key(left), self.key(right)))

    def has(self, left: tuple[int, ...], right: tuple[int, ...]) -> bool:
        return (self.key(left), self.key(right)) in self.seen

    def __len__(self) -> int:
        return len(self.seen)


def word_pairs(bodies: Sequence[Sequence[int]], starts_word: np.ndarray, pieces: Sequence[str]
               ) -> tuple[WordPairs, dict[tuple[int, ...], list[tuple[int, ...]]]]:
    """The word pairs that `bodies` contain (their start and end marked by
    `EDGE`, numbers as `NUMBER`), and for each word of letters its
    substitutes: the other words of letters seen next to one of its
    neighbour words (after its left one or before its right one), the words
    a bigram generator would put in its place: other inflections,
    auxiliaries, articles and pronouns among them. Only neighbours with a
    letter and no digit count, so that a number or a full stop does not make
    the words of two languages substitutes."""
    has_digit = np.array([any(c.isdigit() for c in piece) for piece in pieces], bool)
    is_letter = np.array([any(c.isalpha() for c in piece) for piece in pieces], bool)

    def is_word(word):
        return word != EDGE and is_letter[list(word)].any() and not has_digit[list(word)].any()

    pairs, raw = WordPairs(has_digit), set()
    for body in bodies:
        words = [EDGE] + text_words(body, starts_word) + [EDGE]
        raw.update(zip(words, words[1:]))
    after, before = {}, {}
    for left, right in raw:
        pairs.add(left, right)
        if is_word(left) and is_word(right):
            after.setdefault(left, set()).add(right)
            before.setdefault(right, set()).add(left)
    substitutes = {}
    for word in sorted(set(after) | set(before)):
        options = set()
        for right in after.get(word, ()):
            options |= before[right]
        for left in before.get(word, ()):
            options |= after[left]
        options.discard(word)
        if options:
            substitutes[word] = sorted(options)
    return pairs, substitutes


def noisy_words(words: Sequence[tuple[int, ...]], rng: np.random.Generator, substitutes: dict,
                replace_rate: float, swap_rate: float) -> list[tuple[int, ...]]:
    """`words` with a bigram generator's noise: word by word, a word trades
    places with the next one (`swap_rate`) or a substitute (`word_pairs`)
    takes its place (`replace_rate`)."""
    words = list(words)
    k = 0
    while k < len(words):
        draw = rng.random()
        if draw < swap_rate and k + 1 < len(words) and words[k] != words[k + 1]:
            words[k], words[k + 1] = words[k + 1], words[k]
            k += 2
            continue
        if draw < swap_rate + replace_rate and words[k] in substitutes:
            options = substitutes[words[k]]
            words[k] = options[rng.integers(len(options))]
        k += 1
    return words


def novel_pair_flags(words: Sequence[tuple[int, ...]], pairs: WordPairs
                     ) -> tuple[list[int], list[int]]:
    """The pieces of `words` and, for each, 1 when its word makes a word pair
    that `pairs` lacks with its neighbour on either side (the text's start
    and end count as `EDGE`), else 0."""
    edged = [EDGE] + list(words) + [EDGE]
    body, flags = [], []
    for k, word in enumerate(words, 1):
        novel = not pairs.has(edged[k - 1], word) or not pairs.has(word, edged[k + 1])
        body += word
        flags += [int(novel)] * len(word)
    return body, flags


GRAMMAR_HEADS = ("novel_pair", "any_novel_pair")


def grammar_example(example: tuple[Sequence[int], Sequence[int]], hypothesis_prefix: int,
                    rng: np.random.Generator, starts_word: np.ndarray, pairs: WordPairs,
                    substitutes: dict, input_length: int, replace_rate: float,
                    swap_rate: float) -> tuple[list[int], np.ndarray]:
    """A premise and a noisy hypothesis for the grammar stage, ELECTRA's
    replaced-token detection with a bigram model in both roles: the
    hypothesis gets `noisy_words` noise, and its pieces are labelled, one
    column per `GRAMMAR_HEADS` entry, by `novel_pair_flags` against the
    corpus' word pairs (`pairs`): `novel_pair`, the piece's word makes a
    pair the corpus never has; `any_novel_pair`, some word of the hypothesis
    does (the same label on every hypothesis piece, so that each carries the
    verdict on the whole). Premise pieces are not labelled (-1). A noise
    that keeps the text grammatical (a name for a name) is no error, and an
    error that the text had already is one.

    Returns:
      (inputs, labels): premise, noisy hypothesis and EOS, the premise cut
      at its end to fit `input_length`; labels is float [len(inputs),
      len(GRAMMAR_HEADS)].
    """
    premise, hypothesis = example
    words = noisy_words(text_words(hypothesis[hypothesis_prefix:], starts_word), rng, substitutes,
                        replace_rate, swap_rate)
    body, flags = novel_pair_flags(words, pairs)
    keep = input_length - 1 - hypothesis_prefix
    body, flags = body[:keep], flags[:keep]
    room = max(0, input_length - 1 - hypothesis_prefix - len(body))
    premise = list(premise[:room])
    inputs = premise + list(hypothesis[:hypothesis_prefix]) + body + [1]
    labels = np.full((len(inputs), len(GRAMMAR_HEADS)), -1, np.float32)
    start = len(premise) + hypothesis_prefix
    labels[start:start + len(body), 0] = flags
    labels[start:start + len(body), 1] = max(flags, default=0)
    return inputs, labels


def train_piece_stage(model, params, name: str, steps: int, learning_rate: float,
                      batch_of, batch_size: int, seed: int):
    """An encoder-only stage: `steps` AdamW steps (constant rate) of a
    per-piece logit from a head on the encoder's outputs (dropped
    afterwards), on batches of `batch_size` that `batch_of(rng, size)` draws (tokens, and
    labels in [0, 1], soft or 0/1, with -1 where no label, e.g. padding; a
    last axis of labels gives one logit per column). ROC-AUC reads a soft
    label as positive when above 0.

    Returns:
      (params, record): the updated backbone, and the stage's final loss and
      ROC-AUC on 200 held-out examples.
    """
    import jax
    import jax.numpy as jnp
    import optax
    from sklearn.metrics import roc_auc_score
    from tqdm import tqdm

    rng = np.random.default_rng(seed)

    def logits_of(trained, tokens):
        return model.encode(trained["backbone"], tokens) @ trained["head"]["w"] + trained["head"]["b"]

    def objective(trained, tokens, labels):
        mask = (labels >= 0).astype(jnp.float32)
        loss = optax.sigmoid_binary_cross_entropy(logits_of(trained, tokens),
                                                  jnp.maximum(labels, 0).astype(jnp.float32))
        return (loss * mask).sum() / jnp.maximum(mask.sum(), 1.0)

    optimizer = optax.adamw(learning_rate)
    held_out = batch_of(rng, 200)
    # One logit per piece, or one per piece and column when the labels have columns.
    heads = held_out[1].shape[2:]
    trained = {"backbone": params, "head": {"w": jnp.zeros((model.config.d_model,) + heads),
                                            "b": jnp.zeros(heads)}}
    opt_state = optimizer.init(trained)

    @jax.jit
    def step(trained, opt_state, tokens, labels):
        loss, grads = jax.value_and_grad(objective)(trained, tokens, labels)
        updates, opt_state = optimizer.update(grads, opt_state, trained)
        return optax.apply_updates(trained, updates), opt_state, loss

    start, history = time.time(), []
    for index in tqdm(range(steps), desc=name, mininterval=10):
        trained, opt_state, loss = step(trained, opt_state, *batch_of(rng, batch_size))
        history.append(float(loss))
        if (index + 1) % 100 == 0:
            logger.info("%s step %d loss %.3f (%.0f s)", name, index + 1,
                        np.mean(history[-100:]), time.time() - start)
    labelled, positive = held_out[1] >= 0, held_out[1] > 0
    held_out_logits = np.asarray(jax.jit(logits_of)(trained, held_out[0]))
    auc = round(float(roc_auc_score(positive[labelled], held_out_logits[labelled])), 4)
    logger.info("%s stage: held-out ROC-AUC %.4f", name, auc)
    record = {"steps": steps, "learning_rate": learning_rate,
              "final_loss": round(float(np.mean(history[-100:])), 4),
              "held_out_roc_auc": auc, "seconds": round(time.time() - start)}
    if heads:
        columns = [positive[..., k][labelled[..., k]] for k in range(heads[0])]
        record["held_out_roc_auc_per_column"] = [
            round(float(roc_auc_score(column, held_out_logits[..., k][labelled[..., k]])), 4)
            if len(set(column.tolist())) == 2 else None for k, column in enumerate(columns)]
        logger.info("%s stage: held-out ROC-AUC per column %s", name,
                    record["held_out_roc_auc_per_column"])
    return trained["backbone"], record


def train_matching(model, params, args: argparse.Namespace, pieces: int):
    """The matching stage (`train_piece_stage`) on `matching_example`
    sequences, `args.matching_steps` steps."""
    def batch_of(rng, size):
        examples = [matching_example(rng, pieces) for _ in range(size)]
        return np.array([inputs for inputs, _ in examples], np.int32), np.stack(
            [labels for _, labels in examples])

    return train_piece_stage(model, params, "matching", args.matching_steps,
                             args.matching_learning_rate, batch_of, args.batch_size, args.seed)


def train_word_noise(model, params, args: argparse.Namespace, texts: Sequence[Sequence[int]],
                     word_start: np.ndarray, similar: dict[int, list[int]]):
    """The word-noise stage (`train_piece_stage`) on `word_noise_example`
    texts of the train split, `args.word_noise_steps` steps."""
    replace_rate, swap_rate = args.word_noise_rates

    def batch_of(rng, size):
        examples = [word_noise_example(texts[i], rng, word_start, similar, replace_rate, swap_rate)
                    for i in rng.integers(0, len(texts), size)]
        return (pad([inputs for inputs, _ in examples], args.input_length),
                pad([labels for _, labels in examples], args.input_length, fill=-1))

    return train_piece_stage(model, params, "word_noise", args.word_noise_steps,
                             args.word_noise_learning_rate, batch_of, args.batch_size, args.seed)


def train_alignment(model, params, args: argparse.Namespace,
                    split_texts: Sequence[tuple[Sequence[int], Sequence[int]]],
                    premise_prefix: int, hypothesis_prefix: int, ends_sentence: np.ndarray,
                    word_start: np.ndarray, starts_word: np.ndarray, is_value: np.ndarray,
                    similar: dict[int, list[int]],
                    corpus_texts: Sequence[tuple[Sequence[int], Sequence[int]]] = (),
                    grammar: tuple[WordPairs, dict] | None = None):
    """The alignment stage (`train_piece_stage`) on `alignment_example` pairs
    of the train split, and `args.alignment_corpus` of the time of the
    corpus (`corpus_texts`), `args.alignment_steps` steps;
    `args.alignment_noise` of the hypotheses get word noise
    (`word_noise_example`, or with `grammar`, the word pairs and substitutes
    of `word_pairs`, `noisy_words` judged by `novel_pair_flags`, at
    `args.alignment_noise_rates`); `args.alignment_shuffle` of the premises
    have their sentences shuffled (`shuffle_sentences`) and
    `args.alignment_swap` of the hypotheses values of another
    (`swap_values`), so that the encoder compares instead of remembering the
    few thousand pairs."""
    replace_rate, swap_rate = args.alignment_noise_rates

    def example_of(rng, index):
        texts = split_texts
        if args.alignment_corpus and rng.random() < args.alignment_corpus:
            texts = corpus_texts
            index = rng.integers(len(texts))
        premise, hypothesis = texts[index]
        if rng.random() < args.alignment_shuffle:
            premise = shuffle_sentences(premise, premise_prefix, ends_sentence, rng)
        if rng.random() < args.alignment_swap:
            donor = texts[rng.integers(len(texts))][1]
            hypothesis = swap_values(hypothesis, donor, hypothesis_prefix, starts_word, is_value,
                                     rng)
        flags = None
        if grammar is not None:
            pairs, substitutes = grammar
            words = text_words(hypothesis[hypothesis_prefix:], starts_word)
            if rng.random() < args.alignment_noise:
                words = noisy_words(words, rng, substitutes, replace_rate, swap_rate)
            body, flags = novel_pair_flags(words, pairs)
            hypothesis = list(hypothesis[:hypothesis_prefix]) + body
        elif rng.random() < args.alignment_noise:
            body, flags = word_noise_example(hypothesis[hypothesis_prefix:], rng, word_start,
                                             similar, replace_rate, swap_rate)
            hypothesis = list(hypothesis[:hypothesis_prefix]) + body[:-1]
            flags = flags[:-1]
        return alignment_example((premise, hypothesis), premise_prefix, hypothesis_prefix,
                                 ends_sentence, args.input_length, starts_word, is_value, flags,
                                 wording_verdict=grammar is not None)

    def batch_of(rng, size):
        examples = [example_of(rng, i) for i in rng.integers(0, len(split_texts), size)]
        return column_batch(examples, args.input_length)

    return train_piece_stage(model, params, "alignment", args.alignment_steps,
                             args.alignment_learning_rate, batch_of, args.batch_size, args.seed)


def train_grammar(model, params, args: argparse.Namespace,
                  corpus_texts: Sequence[tuple[Sequence[int], Sequence[int]]],
                  split_texts: Sequence[tuple[Sequence[int], Sequence[int]]],
                  hypothesis_prefix: int, starts_word: np.ndarray, grammar: tuple[WordPairs, dict]):
    """The grammar stage (`train_piece_stage`) on `grammar_example` pairs,
    `args.grammar_steps` steps: the corpus' pairs, and `args.grammar_split`
    of the time the train split's (whose summaries bring their own errors),
    judged by the corpus' word pairs (`grammar`, from `word_pairs`);
    `args.grammar_noise` of the hypotheses get noise, the others are judged
    as they are."""
    replace_rate, swap_rate = args.grammar_rates
    pairs, substitutes = grammar

    def batch_of(rng, size):
        examples = []
        for _ in range(size):
            texts = split_texts if rng.random() < args.grammar_split else corpus_texts
            noisy = rng.random() < args.grammar_noise
            examples.append(grammar_example(
                texts[rng.integers(len(texts))], hypothesis_prefix, rng, starts_word, pairs,
                substitutes, args.input_length, replace_rate * noisy, swap_rate * noisy))
        return column_batch(examples, args.input_length)

    return train_piece_stage(model, params, "grammar", args.grammar_steps,
                             args.grammar_learning_rate, batch_of, args.batch_size, args.seed)


def column_batch(examples: Sequence[tuple[Sequence[int], np.ndarray]], length: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Examples with labels in columns ([pieces, columns]) as one batch:
    tokens padded to `length`, and labels [batch, length, columns] with -1
    where there is no piece."""
    labels = np.full((len(examples), length, examples[0][1].shape[1]), -1, np.float32)
    for row, (_, columns) in enumerate(examples):
        labels[row, :len(columns)] = columns[:length]
    return pad([inputs for inputs, _ in examples], length), labels


def pad(rows: Sequence[Sequence[int]], length: int, fill: int = 0) -> np.ndarray:
    out = np.full((len(rows), length), fill, np.int32)
    for i, row in enumerate(rows):
        row = row[:length]
        out[i, :len(row)] = row
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample_dir", default=SAMPLE_DIR)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--input_length", type=int, default=128)
    parser.add_argument("--target_length", type=int, default=40)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replace_rate", type=float, default=0.0,
                        help="Share of examples trained with grounded-token replacement in "
                             "the hypothesis instead of span corruption.")
    parser.add_argument("--detect_rate", type=float, default=0.0,
                        help="Share of examples trained with noise detection (see detect_noise) "
                             "instead of span corruption.")
    parser.add_argument("--noise_strength", type=float, nargs=2, default=(0.0, 0.0),
                        metavar=("START", "END"),
                        help="Noise detection's strength, decayed linearly over the run.")
    parser.add_argument("--noise_kinds", default=",".join(NOISE_KINDS),
                        help="Comma-separated noise kinds for noise detection.")
    parser.add_argument("--rtd_weight", type=float, default=0.0,
                        help="Weight of the per-piece discriminator loss on the encoder's outputs "
                             "for noise-detection examples (ELECTRA); its head is not exported.")
    parser.add_argument("--matching_steps", type=int, default=0,
                        help="Steps of the matching stage (see matching_example) before the "
                             "text objectives: the encoder learns to find equal pieces.")
    parser.add_argument("--matching_learning_rate", type=float, default=1e-3)
    parser.add_argument("--word_noise_steps", type=int, default=0,
                        help="Steps of the word-noise stage (see word_noise_example), after the "
                             "matching stage and before the text objectives: the encoder learns "
                             "to spot swapped words and wrong inflections.")
    parser.add_argument("--word_noise_rates", type=float, nargs=2, default=(0.3, 0.1),
                        metavar=("REPLACE", "SWAP"),
                        help="Per word: the chance of another inflection, and of trading places "
                             "with the next word.")
    parser.add_argument("--word_noise_learning_rate", type=float, default=1e-3)
    parser.add_argument("--grammar_steps", type=int, default=0,
                        help="Steps of the grammar stage (see grammar_example), after the "
                             "word-noise stage and before the alignment stage: on the sample's "
                             "unlabelled corpus, the encoder learns which words make a word pair "
                             "that grammatical text never has.")
    parser.add_argument("--grammar_learning_rate", type=float, default=1e-3)
    parser.add_argument("--grammar_rates", type=float, nargs=2, default=(0.1, 0.05),
                        metavar=("REPLACE", "SWAP"),
                        help="The grammar stage's noise per hypothesis word: the chance of a "
                             "substitute, and of trading places with the next word.")
    parser.add_argument("--grammar_noise", type=float, default=0.5,
                        help="Share of the grammar stage's hypotheses that get noise.")
    parser.add_argument("--grammar_split", type=float, default=0.3,
                        help="Share of the grammar stage's pairs taken from the train split "
                             "(the rest from the corpus).")
    parser.add_argument("--alignment_steps", type=int, default=0,
                        help="Steps of the alignment stage (see alignment_example), after the "
                             "grammar stage and before the text objectives: the encoder "
                             "learns which summary pieces its article (and its lead) contains, "
                             "and which pieces repeat.")
    parser.add_argument("--alignment_learning_rate", type=float, default=1e-3)
    parser.add_argument("--alignment_noise", type=float, default=0.5,
                        help="Share of the alignment stage's hypotheses that get word noise.")
    parser.add_argument("--alignment_shuffle", type=float, default=0.5,
                        help="Share of the alignment stage's premises whose sentences are "
                             "shuffled.")
    parser.add_argument("--alignment_swap", type=float, default=0.3,
                        help="Share of the alignment stage's hypotheses given names and numbers "
                             "of another hypothesis.")
    parser.add_argument("--alignment_corpus", type=float, default=0.0,
                        help="Share of the alignment stage's pairs taken from the sample's "
                             "unlabelled corpus (the rest from the train split).")
    parser.add_argument("--alignment_grammar", action="store_true",
                        help="The alignment stage's hypothesis noise is the grammar stage's, and "
                             "its noisy_word column marks the words of word pairs the corpus "
                             "never has (see grammar_example), noise or not.")
    parser.add_argument("--alignment_noise_rates", type=float, nargs=2, default=(0.15, 0.05),
                        metavar=("REPLACE", "SWAP"),
                        help="The alignment stage's word noise, as --word_noise_rates.")
    parser.add_argument("--init", default=None,
                        help="Continue from this backbone (a Hugging Face directory).")
    parser.add_argument("--export_every", type=int, default=0,
                        help="Also export the backbone every this many steps (0: only at the end).")
    args = parser.parse_args(argv)
    noise_kinds = tuple(kind for kind in args.noise_kinds.split(",") if kind)
    unknown = sorted(set(noise_kinds) - set(NOISE_KINDS))
    if unknown or not noise_kinds:
        parser.error(f"--noise_kinds: unknown {unknown or args.noise_kinds!r}; "
                     f"choose from {list(NOISE_KINDS)}")
    if not all(0.0 <= value <= 1.0 for value in args.noise_strength):
        parser.error(f"--noise_strength: {list(args.noise_strength)} must lie in [0, 1]")
    if not (0.0 <= args.detect_rate and 0.0 <= args.replace_rate
            and args.detect_rate + args.replace_rate <= 1.0):
        parser.error(f"--detect_rate {args.detect_rate} and --replace_rate {args.replace_rate} "
                     "must be shares that add up to at most 1")
    stages = {"--steps": args.steps, "--matching_steps": args.matching_steps,
              "--word_noise_steps": args.word_noise_steps,
              "--grammar_steps": args.grammar_steps,
              "--alignment_steps": args.alignment_steps}
    if min(stages.values()) < 0 or sum(stages.values()) == 0:
        parser.error(", ".join(f"{name} {value}" for name, value in stages.items())
                     + ": each must be >= 0 and not all 0")
    for name, (replace_rate, swap_rate) in (("--word_noise_rates", args.word_noise_rates),
                                            ("--alignment_noise_rates", args.alignment_noise_rates),
                                            ("--grammar_rates", args.grammar_rates)):
        if min(replace_rate, swap_rate) < 0 or replace_rate + swap_rate > 1:
            parser.error(f"{name} {replace_rate} {swap_rate} must be shares that add up to at "
                         "most 1")
    for name in ("alignment_noise", "alignment_shuffle", "alignment_swap", "alignment_corpus",
                 "grammar_noise", "grammar_split"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            parser.error(f"--{name} {getattr(args, name)} must lie in [0, 1]")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    import jax
    import jax.numpy as jnp
    import optax
    import sentencepiece as spm
    from tqdm import tqdm

    from seahorse_metrics.checkpoints import export_hf
    from seahorse_metrics.model.model import EncoderDecoderModel

    vocab_path = os.path.join(args.sample_dir, "spiece.model")
    tokenizer = spm.SentencePieceProcessor(model_file=vocab_path)
    config = backbone_config(tokenizer.get_piece_size())
    pairs = read_train_text(args.sample_dir)
    # Room for the sentinels and EOS within the input length.
    budget = args.input_length - 12
    texts = [tokenizer.encode(f"premise: {article} hypothesis: {summary}")[-budget:]
             for article, summary in pairs]
    # The same texts in two parts, for token-replacement denoising of the hypothesis.
    prefix = len(tokenizer.encode("hypothesis:"))

    def in_two_parts(article_summary_pairs):
        """(premise, hypothesis) pieces, the premise cut to fit the budget."""
        parts = [(tokenizer.encode(f"premise: {article}"),
                  tokenizer.encode(f"hypothesis: {summary}"))
                 for article, summary in article_summary_pairs]
        return [(premise[:budget - len(hypothesis)], hypothesis) for premise, hypothesis in parts]

    split_texts = in_two_parts(pairs)
    pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.get_piece_size())]
    word_start = np.zeros(config.vocab_size, bool)
    word_start[:len(pieces)] = [piece.startswith("\u2581") for piece in pieces]
    is_value = np.zeros(config.vocab_size, bool)
    is_value[:len(pieces)] = value_pieces(pieces)
    similar = similar_pieces(pieces)
    logger.info("%d train-split texts, %d-%d tokens; model %s", len(texts),
                min(map(len, texts)), max(map(len, texts)), config)

    model = EncoderDecoderModel(config)
    if args.init:
        from seahorse_metrics.checkpoints import load_checkpoint

        init_config, params = load_checkpoint(args.init)
        if init_config != config:
            raise ValueError(f"{args.init} is not a backbone of this shape: {init_config}")
    else:
        params = model.init_params(jax.random.PRNGKey(args.seed))
    matching_record = {}
    if args.matching_steps:
        params, matching_record = train_matching(model, params, args, len(pieces))
    word_noise_record = {}
    if args.word_noise_steps:
        params, word_noise_record = train_word_noise(model, params, args, texts, word_start, similar)
    ends_sentence, starts_word = np.zeros((2, config.vocab_size), bool)
    ends_sentence[:len(pieces)] = sentence_ends(pieces)
    starts_word[:len(pieces)] = word_boundaries(pieces)
    corpus_texts, grammar = [], None
    if args.grammar_steps or args.alignment_corpus or args.alignment_grammar:
        corpus = read_corpus(args.sample_dir)
        corpus_texts = in_two_parts(corpus)
        # The corpus' word pairs: its articles and summaries, whole.
        bodies = [tokenizer.encode(article) for article, _ in corpus]
        bodies += [hypothesis[prefix:] for _, hypothesis in corpus_texts]
        grammar = word_pairs(bodies, starts_word, pieces)
        logger.info("%d corpus pairs: %d word pairs, %d words with substitutes (median %d)",
                    len(corpus), len(grammar[0]), len(grammar[1]),
                    int(np.median([len(v) for v in grammar[1].values()])))
    grammar_record = {}
    if args.grammar_steps:
        params, grammar_record = train_grammar(model, params, args, corpus_texts, split_texts,
                                               prefix, starts_word, grammar)
    alignment_record = {}
    if args.alignment_steps:
        params, alignment_record = train_alignment(
            model, params, args, split_texts, len(tokenizer.encode("premise:")), prefix,
            ends_sentence, word_start, starts_word, is_value, similar, corpus_texts,
            grammar if args.alignment_grammar else None)
    warmup = min(100, args.steps // 10)
    schedule = optax.warmup_cosine_decay_schedule(0.0, args.learning_rate, warmup,
                                                  max(args.steps, 1), args.learning_rate * 0.1)
    optimizer = optax.adamw(schedule, weight_decay=1e-4)
    # The discriminator's head (a projection of the encoder's outputs to one
    # logit per piece) trains with the backbone and is dropped at export.
    trained = {"backbone": params, "discriminator": {"w": np.zeros(config.d_model, np.float32),
                                                     "b": np.zeros((), np.float32)}}
    opt_state = optimizer.init(trained)

    def objective(trained, batch):
        loss, aux = model.loss(trained["backbone"], batch)
        if args.rtd_weight:
            encoded = model.encode(trained["backbone"], batch["encoder_input_tokens"])
            head = trained["discriminator"]
            logits = encoded @ head["w"] + head["b"]
            labels = batch["noise_labels"]
            mask = (labels >= 0).astype(jnp.float32)
            bce = optax.sigmoid_binary_cross_entropy(logits, jnp.maximum(labels, 0).astype(jnp.float32))
            rtd = (bce * mask).sum() / jnp.maximum(mask.sum(), 1.0)
            loss = loss + args.rtd_weight * rtd
        else:
            rtd = jnp.zeros(())
        return loss, dict(aux, rtd=rtd)

    @jax.jit
    def train_step(trained, opt_state, batch):
        (loss, aux), grads = jax.value_and_grad(objective, has_aux=True)(trained, batch)
        updates, opt_state = optimizer.update(grads, opt_state, trained)
        return optax.apply_updates(trained, updates), opt_state, loss, aux["accuracy"], aux["rtd"]

    rng = np.random.default_rng(args.seed)
    start, history = time.time(), []
    with tqdm(range(args.steps), desc="pretrain", mininterval=10) as bar:
        for step in bar:
            chosen = rng.integers(0, len(texts), args.batch_size)
            strength = float(np.interp(step, [0, max(args.steps - 1, 1)], args.noise_strength))
            examples = []
            for i in chosen:
                # Draws in this order so that runs without noise detection
                # repeat those made before it existed (the shipped backbone).
                draw = rng.random()
                if draw < args.detect_rate:
                    donor = split_texts[rng.integers(len(texts))]
                    examples.append(detect_noise(split_texts[i], donor, prefix, rng, word_start, is_value,
                                                 similar, args.input_length, args.target_length,
                                                 strength=strength, kinds=noise_kinds))
                elif draw < args.detect_rate + args.replace_rate:
                    donor = split_texts[rng.integers(len(texts))]
                    examples.append(swap_grounded(split_texts[i], donor, prefix, rng) + (None,))
                else:
                    examples.append(span_corrupt(texts[i], rng, config.vocab_size) + (None,))
            targets = pad([t for _, t, _ in examples], args.target_length)
            batch = {
                "encoder_input_tokens": pad([i for i, _, _ in examples], args.input_length),
                "decoder_target_tokens": targets,
                "decoder_input_tokens": np.concatenate(
                    [np.zeros((len(targets), 1), np.int32), targets[:, :-1]], axis=1),
                "noise_labels": pad([[-1] * len(i) if labels is None else labels
                                     for i, _, labels in examples], args.input_length, fill=-1),
            }
            trained, opt_state, loss, accuracy, rtd = train_step(trained, opt_state, batch)
            params = trained["backbone"]
            history.append((float(loss), float(accuracy), float(rtd)))
            if (step + 1) % 100 == 0:
                recent = np.mean(history[-100:], axis=0)
                bar.set_postfix(loss=f"{recent[0]:.3f}", acc=f"{recent[1]:.3f}")
                logger.info("step %d loss %.3f token accuracy %.3f discriminator loss %.3f (%.0f s)",
                            step + 1, recent[0], recent[1], recent[2], time.time() - start)
            if args.export_every and (step + 1) % args.export_every == 0 and step + 1 < args.steps:
                export_hf(args.output, config, jax.device_get(params), vocab_path=vocab_path)
    export_hf(args.output, config, jax.device_get(params), vocab_path=vocab_path)
    final = np.mean(history[-100:], axis=0) if history else np.full(3, np.nan)

    def rounded(value: float):
        return None if np.isnan(value) else round(float(value), 4)

    objectives = "+".join(name for name, used in (
        ("matching", args.matching_steps > 0),
        ("word_noise", args.word_noise_steps > 0),
        ("grammar", args.grammar_steps > 0),
        ("alignment", args.alignment_steps > 0),
        ("span_corruption", args.steps > 0 and args.detect_rate + args.replace_rate < 1),
        ("grounded_replacement", args.replace_rate > 0),
        ("noise_detection", args.detect_rate > 0)) if used)
    record = {"objective": objectives, "noise_density": 0.15, "mean_span": 3.0,
              "replace_rate": args.replace_rate, "detect_rate": args.detect_rate,
              "noise_strength": list(args.noise_strength), "rtd_weight": args.rtd_weight,
              "matching_steps": args.matching_steps,
              "matching_learning_rate": args.matching_learning_rate,
              "init": args.init,
              "data": "sample train split text (articles + summaries)"
                      + (" and corpus pairs" if corpus_texts else "") + ", no ratings",
              "steps": args.steps, "batch_size": args.batch_size,
              "input_length": args.input_length, "target_length": args.target_length,
              "learning_rate": args.learning_rate, "seed": args.seed,
              "final_loss": rounded(final[0]),
              "final_token_accuracy": rounded(final[1]),
              "final_discriminator_loss": rounded(final[2]),
              "matching": matching_record,
              "word_noise_steps": args.word_noise_steps,
              "word_noise_rates": list(args.word_noise_rates),
              "word_noise_learning_rate": args.word_noise_learning_rate,
              "word_noise": word_noise_record,
              "grammar_steps": args.grammar_steps,
              "grammar_learning_rate": args.grammar_learning_rate,
              "grammar_rates": list(args.grammar_rates),
              "grammar_split": args.grammar_split,
              "grammar_noise": args.grammar_noise,
              "grammar": grammar_record,
              "alignment_steps": args.alignment_steps,
              "alignment_learning_rate": args.alignment_learning_rate,
              "alignment_noise": args.alignment_noise,
              "alignment_noise_rates": list(args.alignment_noise_rates),
              "alignment_shuffle": args.alignment_shuffle,
              "alignment_swap": args.alignment_swap,
              "alignment_corpus": args.alignment_corpus,
              "alignment_grammar": args.alignment_grammar,
              "alignment": alignment_record,
              "seconds": round(time.time() - start)}
    # A continued run keeps the record of the run it started from.
    init_record = os.path.join(args.init, "pretraining.json") if args.init else ""
    if os.path.exists(init_record):
        with open(init_record, encoding="utf-8") as handle:
            record["init_record"] = json.load(handle)
    with open(os.path.join(args.output, "pretraining.json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)
    logger.info("wrote %s", args.output)


if __name__ == "__main__":
    main()
