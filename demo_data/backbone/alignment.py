"""The alignment stage: on the train split's pairs (and some of the corpus'),
per-piece labels that the text itself gives, one column per
`ALIGNMENT_HEADS` entry (-1 where a column does not apply):
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
* `noisy_word` (hypothesis pieces): the word noise put into the hypothesis
  (`word_noise.word_noise_example`, or the grammar stage's verdicts; all 0
  without noise);
* `unsupported_share` (every hypothesis piece, the same soft label): the
  share of the hypothesis' names and numbers that the premise lacks (one
  minus the entity-level precision of Nan et al., 2021; 0 without any), so
  that each piece carries the whole hypothesis' verdict;
* `any_noisy_word` (every hypothesis piece, the same label; only with the
  grammar stage's verdicts): whether any piece is noisy, the verdict on the
  hypothesis' wording.
The encoder learns to align a summary with its article, sentence by
sentence, and to notice repeats; the metric's fine-tune then reads those
alignments instead of discovering them from a few thousand ratings.
Shuffling the article's sentences and giving the summary names and numbers of
another summary keep the encoder comparing rather than remembering the pairs.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from demo_data.backbone.grammar import WordPairs, noisy_words, novel_pair_flags
from demo_data.backbone.texts import Texts, column_batch
from demo_data.backbone.vocabulary import Vocabulary, text_words, words_of
from demo_data.backbone.word_noise import word_noise_example

ALIGNMENT_HEADS = (
    "in_premise",
    "in_lead",
    "in_hypothesis",
    "lead_position",
    "repeated",
    "unsupported_value",
    "noisy_word",
    "unsupported_share",
    "any_noisy_word",
)


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


def alignment_example(
    example: tuple[Sequence[int], Sequence[int]],
    premise_prefix: int,
    hypothesis_prefix: int,
    ends_sentence: np.ndarray,
    input_length: int,
    starts_word: np.ndarray,
    is_value: np.ndarray,
    noise_flags: Sequence[int] | None = None,
    wording_verdict: bool = False,
) -> tuple[list[int], np.ndarray]:
    """A premise and its hypothesis as given, with the module docstring's
    per-piece labels; `noise_flags` are the hypothesis' `noisy_word` labels,
    and `wording_verdict` fills `any_noisy_word` from them.

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
    inputs = premise + list(hypothesis) + [1]
    labels = np.full((len(inputs), len(ALIGNMENT_HEADS)), -1, np.float32)
    _label_premise(labels[premise_prefix : len(premise)], source, body, lead_end)
    start = len(premise) + hypothesis_prefix
    _label_hypothesis(
        labels[start : start + len(body)], source, body, lead_end, starts_word, is_value
    )
    _label_noise(labels[start : start + len(body)], noise_flags, wording_verdict)
    return inputs, labels


def _label_premise(
    labels: np.ndarray, source: Sequence[int], body: Sequence[int], lead_end: int
) -> None:
    """The premise pieces' columns, in place: in_hypothesis, lead_position,
    repeated."""
    body_set = set(body)
    labels[:, 2] = [piece in body_set for piece in source]
    labels[:, 3] = np.arange(len(source)) < lead_end
    labels[:, 4] = repeated_bigram_flags(source)


def _label_hypothesis(
    labels: np.ndarray,
    source: Sequence[int],
    body: Sequence[int],
    lead_end: int,
    starts_word: np.ndarray,
    is_value: np.ndarray,
) -> None:
    """The hypothesis pieces' columns, in place: in_premise, in_lead,
    repeated, unsupported_value and unsupported_share."""
    source_set, lead_set = set(source), set(source[:lead_end])
    labels[:, 0] = [piece in source_set for piece in body]
    labels[:, 1] = [piece in lead_set for piece in body]
    labels[:, 4] = repeated_bigram_flags(body)
    premise_words = {tuple(source[a:b]) for a, b in words_of(source, starts_word)}
    unsupported = []
    for a, b in words_of(body, starts_word):
        if is_value[body[a]]:
            unsupported.append(tuple(body[a:b]) not in premise_words)
            labels[a:b, 5] = unsupported[-1]
    labels[:, 7] = np.mean(unsupported) if unsupported else 0.0


def _label_noise(
    labels: np.ndarray, noise_flags: Sequence[int] | None, wording_verdict: bool
) -> None:
    """The hypothesis pieces' noise columns, in place: noisy_word, and with
    `wording_verdict` any_noisy_word."""
    labels[:, 6] = list(noise_flags) if noise_flags is not None else 0
    if wording_verdict:
        labels[:, 8] = max(noise_flags or [0])


def shuffle_sentences(
    premise: Sequence[int], prefix: int, ends_sentence: np.ndarray, rng: np.random.Generator
) -> list[int]:
    """The premise with its whole sentences in random order (an unfinished
    last one stays last), so that its lead is a different sentence."""
    source = list(premise[prefix:])
    stops = [i + 1 for i, piece in enumerate(source) if ends_sentence[piece]]
    sentences = [source[a:b] for a, b in zip([0] + stops[:-1], stops)]
    rest = source[stops[-1] :] if stops else source
    order = rng.permutation(len(sentences))
    return list(premise[:prefix]) + [p for k in order for p in sentences[k]] + rest


def swap_values(
    hypothesis: Sequence[int],
    donor: Sequence[int],
    prefix: int,
    starts_word: np.ndarray,
    is_value: np.ndarray,
    rng: np.random.Generator,
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


def batches(
    args,
    split_texts: Texts,
    corpus_texts: Texts,
    vocab: Vocabulary,
    bigrams: tuple[WordPairs, dict] | None = None,
):
    """`batch_of(rng, size)` for `piece_stage.train_piece_stage`:
    `alignment_example` pairs of the train split, and `args.alignment_corpus`
    of the time of the corpus; `args.alignment_shuffle` of the premises have
    their sentences shuffled (`shuffle_sentences`), `args.alignment_swap` of
    the hypotheses values of another (`swap_values`), and
    `args.alignment_noise` word noise at `args.alignment_noise_rates`
    (`word_noise_example`, or with `bigrams`, the grammar stage's
    `noisy_words` judged by `novel_pair_flags`)."""

    def batch_of(rng, size):
        examples = [
            _example(rng, index, args, split_texts, corpus_texts, vocab, bigrams)
            for index in rng.integers(0, len(split_texts.pairs), size)
        ]
        return column_batch(examples, args.input_length)

    return batch_of


def _example(
    rng: np.random.Generator,
    index: int,
    args,
    split_texts: Texts,
    corpus_texts: Texts,
    vocab: Vocabulary,
    bigrams: tuple[WordPairs, dict] | None,
) -> tuple[list[int], np.ndarray]:
    """One `alignment_example` of the pair `index` of the train split, or of
    a random corpus pair (see `batches`)."""
    texts = split_texts.pairs
    if args.alignment_corpus and rng.random() < args.alignment_corpus:
        texts = corpus_texts.pairs
        index = rng.integers(len(texts))
    premise, hypothesis = texts[index]
    if rng.random() < args.alignment_shuffle:
        premise = shuffle_sentences(premise, vocab.premise_prefix, vocab.ends_sentence, rng)
    if rng.random() < args.alignment_swap:
        donor = texts[rng.integers(len(texts))][1]
        hypothesis = swap_values(
            hypothesis, donor, vocab.hypothesis_prefix, vocab.starts_word, vocab.is_value, rng
        )
    hypothesis, flags = _noisy_hypothesis(rng, hypothesis, args, vocab, bigrams)
    return alignment_example(
        (premise, hypothesis),
        vocab.premise_prefix,
        vocab.hypothesis_prefix,
        vocab.ends_sentence,
        args.input_length,
        vocab.starts_word,
        vocab.is_value,
        flags,
        wording_verdict=bigrams is not None,
    )


def _noisy_hypothesis(
    rng: np.random.Generator,
    hypothesis: Sequence[int],
    args,
    vocab: Vocabulary,
    bigrams: tuple[WordPairs, dict] | None,
) -> tuple[list[int], list[int] | None]:
    """The hypothesis, `args.alignment_noise` of the time with word noise,
    and its `noisy_word` flags: with `bigrams`, every word of a pair the
    corpus never has, noise or not; without, the words the noise changed
    (None when there was none)."""
    prefix = vocab.hypothesis_prefix
    replace_rate, swap_rate = args.alignment_noise_rates
    if bigrams is not None:
        pairs, substitutes = bigrams
        words = text_words(hypothesis[prefix:], vocab.starts_word)
        if rng.random() < args.alignment_noise:
            words = noisy_words(words, rng, substitutes, replace_rate, swap_rate)
        body, flags = novel_pair_flags(words, pairs)
        return list(hypothesis[:prefix]) + body, flags
    if rng.random() < args.alignment_noise:
        body, flags = word_noise_example(
            hypothesis[prefix:], rng, vocab.word_start, vocab.similar, replace_rate, swap_rate
        )
        return list(hypothesis[:prefix]) + body[:-1], flags[:-1]
    return hypothesis, None
