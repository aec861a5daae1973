"""Rendering a template with a fact's values.

A template is a sentence with slots and agreement points:
  {slot} or {slot.form}  a value of the fact (name, role, place, org, num,
                         day); `{n:key}` is a noun whose form agrees with the
                         number (Russian).
  <m|f>                  chosen by the person's gender; the other one is the
                         "broken agreement" alternative.
  <<good|bad|...>>       a fixed agreement: the first alternative is right,
                         the others are the broken ones.
Templates start lower-case unless the first word is a name or a German noun;
the sentence is capitalised after rendering (so filler prefixes can precede
it).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable

from demo_data.sample.facts import Fact, Person
from demo_data.sample.morphology import format_number, ru_number_form, tr_case, tr_case_broken


@dataclasses.dataclass
class Segment:
    """A piece of a rendered sentence; `wrong` are its broken-agreement variants."""

    text: str
    wrong: tuple[str, ...] = ()


TEMPLATE_RE = re.compile(r"<<([^<>]*)>>|<([^<>]*)>|\{([^{}]+)\}")


def _full_name(pack: dict, person: Person, gender: str) -> str:
    surname = person.surname_for(gender)
    if pack.get("surname_first"):
        return f"{surname} {person.given}"
    return f"{person.given} {surname}"


def _gendered(value: object, gender: str) -> Segment:
    if isinstance(value, tuple):
        good = value[0 if gender == "m" else 1]
        other = value[1 if gender == "m" else 0]
        return Segment(good, (other,) if other != good else ())
    return Segment(str(value))


def _resolve_slot(pack: dict, fact: Fact, ref: str) -> Segment:
    lang = pack["code"]
    if ref.startswith("n:"):
        forms = pack["counted"][ref[2:]]
        good = forms[ru_number_form(fact.num, forms)]
        return Segment(good, tuple(sorted({f for f in forms if f != good})))
    slot, _, form = ref.partition(".")
    if slot == "name":
        person = fact.person
        name = _full_name(pack, person, person.gender)
        if form == "gen":
            return Segment(tr_case(name, "gen"), (tr_case_broken(name, "gen"),))
        other = "f" if person.gender == "m" else "m"
        wrong_name = _full_name(pack, person, other)
        return Segment(name, (wrong_name,) if wrong_name != name else ())
    if slot == "role":
        return _gendered(pack["roles"][fact.person.role], fact.person.gender)
    if slot == "place":
        place = fact.place
        if lang == "ru":
            nom, prep, gen = place
            if not form:
                return Segment(nom)
            return Segment({"prep": prep, "gen": gen}[form], (nom,))
        if lang == "tr" and form:
            return Segment(tr_case(place, form), (tr_case_broken(place, form),))
        return Segment(place)
    if slot == "org":
        if lang == "tr" and form:
            return Segment(tr_case(fact.org, form), (tr_case_broken(fact.org, form),))
        return Segment(fact.org)
    if slot == "num":
        return Segment(format_number(lang, fact.num))
    if slot == "day":
        return Segment(fact.day)
    raise ValueError(f"unknown slot {{{ref}}} in a {lang} template")


def render(pack: dict, template: str, fact: Fact) -> list[Segment]:
    """Fills a template with a fact's values; agreement points keep their variants."""
    segments: list[Segment] = []
    pos = 0
    for match in TEMPLATE_RE.finditer(template):
        if match.start() > pos:
            segments.append(Segment(template[pos : match.start()]))
        fixed, gendered, slot = match.groups()
        if fixed is not None:
            good, *bad = fixed.split("|")
            segments.append(Segment(good, tuple(bad)))
        elif gendered is not None:
            masc, fem = gendered.split("|")
            segments.append(_gendered((masc, fem), fact.person.gender))
        else:
            segments.append(_resolve_slot(pack, fact, slot))
        pos = match.end()
    if pos < len(template):
        segments.append(Segment(template[pos:]))
    return segments


def capitalise(text: str, lang: str) -> str:
    if not text:
        return text
    first = text[0]
    upper = "İ" if (lang == "tr" and first == "i") else first.upper()
    return upper + text[1:]


def join_segments(segments: Iterable[Segment]) -> str:
    return "".join(s.text for s in segments)


def template_slots(template: str) -> set[str]:
    """The fact slots a template mentions (`name`/`role` count as `person`)."""
    slots = set()
    for match in TEMPLATE_RE.finditer(template):
        ref = match.group(3)
        if ref is None or ref.startswith("n:"):
            continue
        slot = ref.partition(".")[0]
        slots.add("person" if slot in ("name", "role") else slot)
    return slots
