"""Summaries and their corruptions: each "No" on a question is caused by one
corruption of an otherwise good summary (see `make_summary`)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Sequence

from demo_data.sample.articles import Article, ValuePool
from demo_data.sample.facts import Fact
from demo_data.sample.languages import LANGS
from demo_data.sample.templates import (
    TEMPLATE_RE,
    Segment,
    capitalise,
    join_segments,
    render,
    template_slots,
)

QUESTION_COUNT = 6
Q4_TWO_SWAPS = 0.6  # share of unfaithful summaries with two wrong values, not one


@dataclasses.dataclass
class Summary:
    text: str
    # Q1..Q6: True = the summary is fine on that dimension.
    labels: tuple[bool, ...]
    corruptions: tuple[str, ...]


def _swap_slot(pool: ValuePool, fact: Fact, slot: str) -> Fact:
    """The fact with one slot replaced by a value the article never mentions."""
    if slot == "person":
        person = pool.person(fact.frame, fact.person.gender, fact.person.role, keep=False)
        return dataclasses.replace(fact, person=person)
    if slot == "place":
        return dataclasses.replace(fact, place=pool.place(keep=False))
    if slot == "org":
        return dataclasses.replace(fact, org=pool.org(keep=False))
    if slot == "num":
        return dataclasses.replace(fact, num=pool.num(fact.frame, keep=False))
    raise ValueError(slot)


def _break_agreement(rng: random.Random, segments: list[Segment]) -> bool:
    points = [s for s in segments if s.wrong and s.text not in s.wrong]
    if not points:
        return False
    point = rng.choice(points)
    point.text = rng.choice(point.wrong)
    return True


def _swap_adjacent_words(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    candidates = [
        i
        for i in range(len(words) - 2)
        if words[i] != words[i + 1]
        and not re.search(r"[.,;:]$", words[i])
        and not re.search(r"[.,;:]$", words[i + 1])
    ]
    i = rng.choice(candidates or list(range(len(words) - 1)))
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def _insert_suffix(sentence: str, suffix: str) -> str:
    assert sentence.endswith(".")
    return sentence[:-1] + suffix + "."


def _stutter(rng: random.Random, sentence: str) -> str:
    """Repeats a 3-6 word phrase right after itself once or twice, as
    degenerate decoders do."""
    words = sentence.split(" ")
    span = rng.randint(min(3, len(words) - 1), max(1, min(6, len(words) - 2)))
    start = rng.randint(0, len(words) - 1 - span)
    copy = [w.rstrip(",;:") for w in words[start : start + span]]
    copies = copy * rng.choice((1, 2))
    return " ".join(words[: start + span] + copies + words[start + span :])


def _foreign_words() -> dict[str, list[str]]:
    """Words of each language's templates, for the code-switched garble of Q1."""
    words = {}
    for code, pack in LANGS.items():
        found = set()
        for frame in pack["frames"].values():
            for template in frame["summary"] + frame["article"]:
                plain = TEMPLATE_RE.sub(" ", template)
                found.update(w.strip(".,;:") for w in plain.split() if len(w) > 3)
        words[code] = sorted(w for w in found if w)
    return words


_FOREIGN = _foreign_words()


def _scramble_letters(rng: random.Random, word: str) -> str:
    """Shuffles a word's inner letters ("Plioce hvae aetrserd"), keeping punctuation."""
    core = word.rstrip(".,;:")
    tail = word[len(core) :]
    if len(core) < 4:
        return word
    inner = list(core[1:-1])
    for _ in range(3):
        rng.shuffle(inner)
        if "".join(inner) != core[1:-1]:
            break
    return core[0] + "".join(inner) + core[-1] + tail


INCOMPREHENSIBLE_KINDS = {"scramble": 30, "shuffle": 20, "truncate": 25, "garble": 25}


def _incomprehensible(rng: random.Random, lang: str, text: str) -> tuple[str, str]:
    """Text a reader cannot follow, as weak systems produce it.

    scramble: most words have their inner letters shuffled; shuffle: the word
    order is shuffled; truncate: the text stops mid-word; garble: half the
    words are replaced by words of other languages (code-switching).
    """
    words = text.split(" ")
    kinds = sorted(INCOMPREHENSIBLE_KINDS)
    kind = rng.choices(kinds, weights=[INCOMPREHENSIBLE_KINDS[k] for k in kinds])[0]
    if kind == "scramble":
        scrambled = [_scramble_letters(rng, w) if rng.random() < 0.6 else w for w in words]
        if scrambled == words:
            return _incomprehensible(rng, lang, text)
        return " ".join(scrambled), kind
    if kind == "shuffle":
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        return " ".join(shuffled), kind
    if kind == "truncate":
        keep = max(2, int(len(words) * rng.uniform(0.4, 0.8)))
        kept = words[:keep]
        kept[-1] = kept[-1].rstrip(".,;:")
        if len(kept[-1]) >= 4:
            kept[-1] = kept[-1][: max(2, len(kept[-1]) // 2)]
        return " ".join(kept), kind
    others = [code for code in sorted(_FOREIGN) if code != lang]
    garbled = []
    for word in words:
        if rng.random() < 0.5:
            garbled.append(rng.choice(_FOREIGN[rng.choice(others)]))
        else:
            garbled.append(word)
    if garbled == words:
        garbled[0] = rng.choice(_FOREIGN[others[0]])
    return " ".join(garbled), kind


def _swap_values(
    rng: random.Random, pool: ValuePool, fact: Fact, template: str, applied: list[str]
) -> Fact:
    """Q4: one or two of the values the template mentions, replaced by unused ones."""
    swappable = sorted(template_slots(template) & {"person", "place", "org", "num"})
    n_swaps = 2 if (len(swappable) > 1 and rng.random() < Q4_TWO_SWAPS) else 1
    for slot in rng.sample(swappable, n_swaps):
        fact = _swap_slot(pool, fact, slot)
        applied.append(f"q4:{slot}")
    return fact


def _ungrammatical(rng: random.Random, segments: list[Segment], applied: list[str]) -> str:
    """Q3: one or two errors, a broken agreement where the template has one,
    else (or in addition) two adjacent words swapped."""
    word_swap = False
    for _ in range(2 if rng.random() < 0.5 else 1):
        if rng.random() < 0.7 and _break_agreement(rng, segments):
            applied.append("q3:agreement")
        elif not word_swap:
            word_swap = True
            applied.append("q3:word_order")
    body = join_segments(segments)
    return _swap_adjacent_words(rng, body) if word_swap else body


def _pad(
    rng: random.Random, pack: dict, article: Article, base_index: int, body: str, applied: list[str]
) -> tuple[str, list[str]]:
    """Q6: one or two kinds of padding; returns the main sentence and extra ones."""
    kinds = ["sentence", "extra_fact"]
    kinds += [k for k in ("prefix", "suffix") if pack["fillers"][k]]
    extra_sentences: list[str] = []
    for kind in sorted(rng.sample(kinds, 2 if rng.random() < 0.4 else 1)):
        applied.append(f"q6:{kind}")
        if kind == "prefix":
            body = rng.choice(pack["fillers"]["prefix"]) + body
        elif kind == "suffix":
            body = _insert_suffix(body, rng.choice(pack["fillers"]["suffix"]))
        elif kind == "sentence":
            extra_sentences.append(rng.choice(pack["fillers"]["sentence"]))
        else:
            # A minor fact: never the lead, never the fact already summarised.
            index = rng.choice([i for i in range(1, len(article.facts)) if i != base_index])
            detail = article.facts[index]
            template = rng.choice(pack["frames"][detail.frame]["summary"])
            extra_sentences.insert(
                0, capitalise(join_segments(render(pack, template, detail)), article.lang)
            )
    return body, extra_sentences


def _repeat(rng: random.Random, sentences: list[str], applied: list[str]) -> None:
    """Q2: a sentence said twice, or a phrase stuttered (in place)."""
    if rng.random() < 0.5:
        i = rng.randrange(len(sentences))
        sentences.insert(i + 1, sentences[i])
        applied.append("q2:sentence")
    else:
        sentences[0] = _stutter(rng, sentences[0])
        applied.append("q2:phrase")


def make_summary(
    rng: random.Random, article: Article, pool: ValuePool, corrupt: Sequence[bool]
) -> Summary:
    """A summary with the requested corruptions (corrupt[q - 1] for question q).

    Corruptions are applied in a fixed order: the fact summarised (Q5), the
    values (Q4), grammar (Q3), padding (Q6), repetition (Q2), and last what
    makes the text incomprehensible (Q1).
    """
    pack = LANGS[article.lang]
    applied: list[str] = []
    base_index = rng.randrange(1, len(article.facts)) if corrupt[4] else 0
    fact = article.facts[base_index]
    template = rng.choice(pack["frames"][fact.frame]["summary"])
    if corrupt[3]:
        fact = _swap_values(rng, pool, fact, template, applied)
    segments = render(pack, template, fact)
    body = _ungrammatical(rng, segments, applied) if corrupt[2] else join_segments(segments)
    extra_sentences: list[str] = []
    if corrupt[5]:
        body, extra_sentences = _pad(rng, pack, article, base_index, body, applied)
    sentences = [capitalise(body, article.lang)] + extra_sentences
    if corrupt[1]:
        _repeat(rng, sentences, applied)
    text = " ".join(sentences)
    if corrupt[0]:
        text, kind = _incomprehensible(rng, article.lang, text)
        applied.append(f"q1:{kind}")
    if corrupt[4]:
        applied.append("q5:non_lead")
    return Summary(text, tuple(not c for c in corrupt), tuple(applied))


# Longer summaries (stacked padding and repetition) are redrawn, which keeps
# the sample's inputs within ~150 pieces of the shipped vocabulary.
MAX_SUMMARY_CHARS = 240


def draw_summary(
    rng: random.Random, article: Article, pool: ValuePool, corrupt: Sequence[bool]
) -> Summary:
    """`make_summary`, redrawn while the text is longer than MAX_SUMMARY_CHARS."""
    for _ in range(20):
        summary = make_summary(rng, article, pool, corrupt)
        if len(summary.text) <= MAX_SUMMARY_CHARS:
            return summary
    raise RuntimeError(f"no summary under {MAX_SUMMARY_CHARS} characters for {article.text!r}")
