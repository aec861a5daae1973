"""Counts for `stats.json`."""

from __future__ import annotations

from typing import Iterable


def count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items()))
