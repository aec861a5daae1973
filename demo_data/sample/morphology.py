"""What the templates cannot spell out: Turkish case suffixes, Russian noun
forms after a number, and each language's thousands separator."""

from __future__ import annotations

from typing import Sequence

_TR_BACK, _TR_FRONT = "aıou", "eiöü"
_TR_VOICELESS = "çfhkpsşt"
_TR_FLIP = str.maketrans("aıuoeiüö", "eiüöaıou")


def _tr_last_vowel(word: str) -> str:
    for ch in reversed(word.replace("İ", "i").replace("I", "ı").lower()):
        if ch in _TR_BACK + _TR_FRONT:
            return ch
    return "e"


def tr_case(word: str, case: str) -> str:
    """Turkish case suffix on a proper noun (apostrophe, vowel harmony, d/t).

    Args:
      word: The noun phrase; the suffix attaches to its last word.
      case: One of `loc`, `dat`, `gen`.

    Returns:
      e.g. tr_case("İzmir", "loc") == "İzmir'de".
    """
    vowel = _tr_last_vowel(word)
    back = vowel in _TR_BACK
    last = word[-1].lower()
    ends_in_vowel = last in _TR_BACK + _TR_FRONT + "i"
    if case == "loc":
        suffix = ("t" if last in _TR_VOICELESS else "d") + ("a" if back else "e")
    elif case == "dat":
        suffix = ("y" if ends_in_vowel else "") + ("a" if back else "e")
    elif case == "gen":
        four_way = {"a": "ı", "ı": "ı", "o": "u", "u": "u", "e": "i", "i": "i", "ö": "ü", "ü": "ü"}[
            vowel
        ]
        suffix = ("n" if ends_in_vowel else "") + four_way + "n"
    else:
        raise ValueError(f"unknown Turkish case {case!r}")
    return f"{word}'{suffix}"


def tr_case_broken(word: str, case: str) -> str:
    """The same suffix with the vowel harmony broken (back <-> front)."""
    good = tr_case(word, case)
    stem, suffix = good.rsplit("'", 1)
    return f"{stem}'{suffix.translate(_TR_FLIP)}"


def ru_number_form(n: int, forms: Sequence[str]) -> int:
    """Index into (one, few, many) for a Russian noun after the number n."""
    if n % 10 == 1 and n % 100 != 11:
        return 0
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return 1
    return 2


def format_number(lang: str, n: int) -> str:
    """Thousands separators as newspapers of each language print them."""
    if n < 1000:
        return str(n)
    head, tail = divmod(n, 1000)
    sep = {"en": ",", "ru": " ", "fr": " "}.get(lang, ".")
    return f"{head}{sep}{tail:03d}"
