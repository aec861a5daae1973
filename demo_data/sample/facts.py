"""News events: the frames an article's facts come from, and a fact's values."""

from __future__ import annotations

import dataclasses
from typing import Optional

FRAMES = ("invest", "protest", "factory", "election", "arrest", "storm", "resign")

# Slots each frame's fact carries, and the range of its number.
FRAME_SLOTS = {
    "invest": ("person", "org", "num", "place", "day"),
    "protest": ("num", "place", "org", "day"),
    "factory": ("org", "place", "num"),
    "election": ("person", "place", "num"),
    "arrest": ("place", "num", "day"),
    "storm": ("place", "num", "person"),
    "resign": ("person", "org", "num", "day"),
}
FRAME_NUMBERS = {
    "invest": (5, 950),
    "protest": (60, 9500),
    "factory": (20, 1900),
    "election": (31, 78),
    "arrest": (3, 60),
    "storm": (12, 950),
    "resign": (3, 28),
}
FRAME_ROLES = {
    "invest": ("minister", "mayor"),
    "election": ("mayor",),
    "storm": ("mayor", "governor"),
    "resign": ("director",),
}


@dataclasses.dataclass(frozen=True)
class Person:
    given: str
    surname: object  # str, or (masculine, feminine) for Russian
    gender: str  # "m" or "f"
    role: str

    def surname_for(self, gender: str) -> str:
        if isinstance(self.surname, tuple):
            return self.surname[0 if gender == "m" else 1]
        return self.surname


@dataclasses.dataclass(frozen=True)
class Fact:
    """One news event: a frame and the values of its slots."""

    frame: str
    person: Optional[Person]
    place: object  # str, or a tuple of case forms
    org: Optional[str]
    num: int
    day: Optional[str]
