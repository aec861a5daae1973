"""The grammar stage: on the sample's unlabelled corpus and the train split's
pairs, which summary words make a word pair that the corpus never has, once a
bigram generator has swapped words or put others in their place (ELECTRA with
n-gram statistics in both roles), and whether the summary has any such word."""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from demo_data.backbone.texts import Texts, column_batch
from demo_data.backbone.vocabulary import Vocabulary, text_words

logger = logging.getLogger("demo_data.backbone")

# Word pairs mark a text's start and end with this word (no piece has id -1).
EDGE = (-1,)

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


def word_pairs(
    bodies: Sequence[Sequence[int]], starts_word: np.ndarray, pieces: Sequence[str]
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


def noisy_words(
    words: Sequence[tuple[int, ...]],
    rng: np.random.Generator,
    substitutes: dict,
    replace_rate: float,
    swap_rate: float,
) -> list[tuple[int, ...]]:
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


def novel_pair_flags(
    words: Sequence[tuple[int, ...]], pairs: WordPairs
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


def grammar_example(
    example: tuple[Sequence[int], Sequence[int]],
    hypothesis_prefix: int,
    rng: np.random.Generator,
    starts_word: np.ndarray,
    pairs: WordPairs,
    substitutes: dict,
    input_length: int,
    replace_rate: float,
    swap_rate: float,
) -> tuple[list[int], np.ndarray]:
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
    words = noisy_words(
        text_words(hypothesis[hypothesis_prefix:], starts_word),
        rng,
        substitutes,
        replace_rate,
        swap_rate,
    )
    body, flags = novel_pair_flags(words, pairs)
    keep = input_length - 1 - hypothesis_prefix
    body, flags = body[:keep], flags[:keep]
    room = max(0, input_length - 1 - hypothesis_prefix - len(body))
    premise = list(premise[:room])
    inputs = premise + list(hypothesis[:hypothesis_prefix]) + body + [1]
    labels = np.full((len(inputs), len(GRAMMAR_HEADS)), -1, np.float32)
    start = len(premise) + hypothesis_prefix
    labels[start : start + len(body), 0] = flags
    labels[start : start + len(body), 1] = max(flags, default=0)
    return inputs, labels


def corpus_word_pairs(
    tokenizer, corpus: Sequence[tuple[str, str]], corpus_texts: Texts, vocab: Vocabulary
) -> tuple[WordPairs, dict]:
    """`word_pairs` of the corpus' articles and summaries, whole."""
    bodies = [tokenizer.encode(article) for article, _ in corpus]
    bodies += [hypothesis[vocab.hypothesis_prefix :] for _, hypothesis in corpus_texts.pairs]
    pairs, substitutes = word_pairs(bodies, vocab.starts_word, vocab.pieces)
    logger.info(
        "%d corpus pairs: %d word pairs, %d words with substitutes (median %d)",
        len(corpus),
        len(pairs),
        len(substitutes),
        int(np.median([len(v) for v in substitutes.values()])),
    )
    return pairs, substitutes


def batches(
    args,
    corpus_texts: Texts,
    split_texts: Texts,
    vocab: Vocabulary,
    bigrams: tuple[WordPairs, dict],
):
    """`batch_of(rng, size)` for `piece_stage.train_piece_stage`:
    `grammar_example` pairs, from the corpus, and `args.grammar_split` of the
    time from the train split (whose summaries bring their own errors),
    judged by the corpus' word pairs (`bigrams`, from `corpus_word_pairs`);
    `args.grammar_noise` of the hypotheses get noise at `args.grammar_rates`,
    the others are judged as they are."""
    replace_rate, swap_rate = args.grammar_rates
    pairs, substitutes = bigrams

    def batch_of(rng, size):
        examples = []
        for _ in range(size):
            texts = split_texts.pairs if rng.random() < args.grammar_split else corpus_texts.pairs
            noisy = rng.random() < args.grammar_noise
            examples.append(
                grammar_example(
                    texts[rng.integers(len(texts))],
                    vocab.hypothesis_prefix,
                    rng,
                    vocab.starts_word,
                    pairs,
                    substitutes,
                    args.input_length,
                    replace_rate * noisy,
                    swap_rate * noisy,
                )
            )
        return column_batch(examples, args.input_length)

    return batch_of
