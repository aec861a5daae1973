"""The summarisation systems of the sample and how often each one fails each
question."""

from __future__ import annotations

import random

# Probability that each system's summary is corrupted on Q1..Q6. Weaker systems
# fail more often; references are fluent but often unfaithful (as XSum's are).
SYSTEM_ERROR_RATES = {
    "reference": (0.06, 0.05, 0.15, 0.55, 0.35, 0.40),
    "t5_base": (0.22, 0.20, 0.30, 0.50, 0.45, 0.50),
    "t5_base_250": (0.32, 0.28, 0.40, 0.55, 0.50, 0.55),
    "mt5_small": (0.36, 0.34, 0.44, 0.58, 0.52, 0.55),
    "mt5_small_250": (0.42, 0.38, 0.50, 0.62, 0.56, 0.58),
    "mt5_xxl": (0.14, 0.14, 0.24, 0.45, 0.42, 0.50),
    "palm_1shot": (0.16, 0.22, 0.20, 0.45, 0.46, 0.68),
    "palm_finetuned": (0.08, 0.10, 0.15, 0.40, 0.38, 0.45),
}
ENGLISH_ONLY_SYSTEMS = ("t5_base", "t5_base_250")
SYSTEM_WEIGHTS = {
    "reference": 1.0,
    "t5_base": 1.0,
    "t5_base_250": 0.6,
    "mt5_small": 1.0,
    "mt5_small_250": 0.6,
    "mt5_xxl": 1.0,
    "palm_1shot": 1.0,
    "palm_finetuned": 1.0,
}


def draw_corruptions(rng: random.Random, system: str) -> tuple[bool, ...]:
    return tuple(rng.random() < p for p in SYSTEM_ERROR_RATES[system])


def draw_systems(rng: random.Random, lang: str) -> list[str]:
    names = [s for s in sorted(SYSTEM_ERROR_RATES) if lang == "en" or s not in ENGLISH_ONLY_SYSTEMS]
    k = rng.choice((2, 3, 3, 4))
    chosen: list[str] = []
    while len(chosen) < k:
        pick = rng.choices(names, weights=[SYSTEM_WEIGHTS[s] for s in names])[0]
        if pick not in chosen:
            chosen.append(pick)
    return chosen
