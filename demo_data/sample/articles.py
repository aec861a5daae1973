"""Articles: short template news, a lead fact and a few further facts."""

from __future__ import annotations

import dataclasses
import random
from typing import Optional

from demo_data.sample.facts import FRAME_NUMBERS, FRAME_ROLES, FRAME_SLOTS, FRAMES, Fact, Person
from demo_data.sample.languages import LANGS
from demo_data.sample.templates import capitalise, join_segments, render

ARTICLE_SENTENCES = (3, 3, 3, 4)  # drawn uniformly


@dataclasses.dataclass
class Article:
    lang: str
    facts: list[Fact]
    text: str


def _newsy_number(rng: random.Random, lo: int, hi: int) -> int:
    """A number as news prints it: round above 100; never ending in 1 (keeps
    Russian number agreement in the plural)."""
    while True:
        n = rng.randint(lo, hi)
        if n >= 1000:
            n = round(n, -2)
        elif n >= 100:
            n = round(n, -1)
        if n % 10 != 1 and lo <= n <= hi:
            return n


def _place_key(place: object) -> str:
    return place[0] if isinstance(place, tuple) else place


def _surname_key(surname: object) -> str:
    return surname[0] if isinstance(surname, tuple) else surname


class ValuePool:
    """Draws slot values for one article, never reusing one within it.

    With `keep=False` a value is drawn from those the article does not use
    without being recorded, as the wrong values of unfaithful summaries are.
    """

    def __init__(self, rng: random.Random, pack: dict):
        self.rng = rng
        self.pack = pack
        self.places: set[str] = set()
        self.orgs: set[str] = set()
        self.surnames: set[str] = set()
        self.given: set[str] = set()
        self.nums: set[int] = set()

    def place(self, keep: bool = True) -> object:
        choices = [p for p in self.pack["places"] if _place_key(p) not in self.places]
        value = self.rng.choice(choices)
        if keep:
            self.places.add(_place_key(value))
        return value

    def org(self, keep: bool = True) -> str:
        value = self.rng.choice([o for o in self.pack["orgs"] if o not in self.orgs])
        if keep:
            self.orgs.add(value)
        return value

    def person(
        self,
        frame: str,
        gender: Optional[str] = None,
        role: Optional[str] = None,
        keep: bool = True,
    ) -> Person:
        gender = gender or self.rng.choice("mf")
        given = self.rng.choice([g for g in self.pack["given"][gender] if g not in self.given])
        surname = self.rng.choice(
            [s for s in self.pack["surnames"] if _surname_key(s) not in self.surnames]
        )
        if keep:
            self.given.add(given)
            self.surnames.add(_surname_key(surname))
        return Person(given, surname, gender, role or self.rng.choice(FRAME_ROLES[frame]))

    def num(self, frame: str, keep: bool = True) -> int:
        lo, hi = FRAME_NUMBERS[frame]
        while True:
            n = _newsy_number(self.rng, lo, hi)
            if n not in self.nums:
                if keep:
                    self.nums.add(n)
                return n

    def fact(self, frame: str) -> Fact:
        slots = FRAME_SLOTS[frame]
        return Fact(
            frame=frame,
            person=self.person(frame) if "person" in slots else None,
            place=self.place(),
            org=self.org() if "org" in slots else None,
            num=self.num(frame),
            day=self.rng.choice(self.pack["days"]) if "day" in slots else None,
        )


def make_article(
    rng: random.Random,
    lang: str,
    pool: Optional[ValuePool] = None,
    n_sentences: Optional[int] = None,
) -> tuple[Article, ValuePool]:
    """A short news article: a lead fact and 2-3 further facts, one sentence each.

    All sentences come from the same frame pool, so only its position tells
    the lead (the main idea) from the later details.
    """
    pack = LANGS[lang]
    pool = pool or ValuePool(rng, pack)
    n = n_sentences or rng.choice(ARTICLE_SENTENCES)
    frames = rng.sample(FRAMES, n)
    facts = [pool.fact(frame) for frame in frames]
    sentences = []
    for fact in facts:
        template = rng.choice(pack["frames"][fact.frame]["article"])
        sentences.append(capitalise(join_segments(render(pack, template, fact)), lang))
    return Article(lang, facts, " ".join(sentences)), pool
