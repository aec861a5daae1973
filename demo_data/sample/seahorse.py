"""The SEAHORSE-format sample: rated rows of three splits and their articles."""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

from demo_data.sample.articles import make_article
from demo_data.sample.corruptions import QUESTION_COUNT, Summary, draw_summary
from demo_data.sample.stats import count
from demo_data.sample.systems import draw_corruptions, draw_systems

WORKER_LANG = {"de": "de", "en": "en-US", "es": "es-ES", "ru": "ru", "tr": "tr", "vi": "vi"}
# GEM configs (gem_id prefixes) per language, as in the SEAHORSE release.
GEM_CONFIGS = {
    "en": ("xsum", "xlsum_english", "wiki_lingua_english_en"),
    "de": ("mlsum_de", "wiki_lingua_german_de"),
    "es": ("mlsum_es", "xlsum_spanish", "wiki_lingua_spanish_es"),
    "ru": ("xlsum_russian", "wiki_lingua_russian_ru"),
    "tr": ("xlsum_turkish", "wiki_lingua_turkish_tr"),
    "vi": ("xlsum_vietnamese", "wiki_lingua_vietnamese_vi"),
}


LABEL_NOISE = 0.02  # a rater disagrees with the corruption that was applied
UNSURE_RATE = 0.03  # a cell is "Unsure"
EMPTY_RATE = 0.005  # a question2-6 cell is left empty although question1 is not No


def rate(rng: random.Random, labels: Sequence[bool]) -> list[str]:
    """The six rating cells a rater gives a summary with these true labels."""
    cells = []
    for good in labels:
        flipped = rng.random() < LABEL_NOISE
        unsure = rng.random() < UNSURE_RATE
        cells.append("Unsure" if unsure else ("Yes" if good != flipped else "No"))
    for q in range(1, QUESTION_COUNT):
        if cells[0] == "No" or rng.random() < EMPTY_RATE:
            cells[q] = ""
    return cells


TSV_HEADER = ("gem_id", "worker_lang", "summary", "model") + tuple(
    f"question{q}" for q in range(1, QUESTION_COUNT + 1)
)
SEAHORSE_SPLITS = ("train", "validation", "test")
LANG_WEIGHTS = {"en": 0.2, "de": 0.16, "es": 0.16, "ru": 0.16, "tr": 0.16, "vi": 0.16}


@dataclasses.dataclass
class SampleRow:
    gem_id: str
    lang: str
    system: str
    summary: Summary
    cells: list[str]

    def tsv_fields(self) -> list[str]:
        return [self.gem_id, WORKER_LANG[self.lang], self.summary.text, self.system] + self.cells


class GemIds:
    """Unique gem_ids in the release's style: `<config>-<split>-<n>`."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def new(self, lang: str) -> str:
        config = self.rng.choice(GEM_CONFIGS[lang])
        # SEAHORSE rated summaries of GEM validation and test articles.
        gem_split = self.rng.choice(("validation", "test"))
        while True:
            gem_id = f"{config}-{gem_split}-{self.rng.randrange(20000)}"
            if gem_id not in self.used:
                self.used.add(gem_id)
                return gem_id


def make_seahorse_split(
    rng: random.Random, gem_ids: GemIds, n_rows: int
) -> tuple[list[SampleRow], dict[str, str]]:
    """Rows of one split (several systems per article) and the split's articles."""
    rows: list[SampleRow] = []
    articles: dict[str, str] = {}
    langs = sorted(LANG_WEIGHTS)
    while len(rows) < n_rows:
        lang = rng.choices(langs, weights=[LANG_WEIGHTS[name] for name in langs])[0]
        article, pool = make_article(rng, lang)
        gem_id = gem_ids.new(lang)
        articles[gem_id] = article.text
        for system in draw_systems(rng, lang)[: n_rows - len(rows)]:
            summary = draw_summary(rng, article, pool, draw_corruptions(rng, system))
            rows.append(SampleRow(gem_id, lang, system, summary, rate(rng, summary.labels)))
    rng.shuffle(rows)
    return rows, articles


def source_of(gem_id: str) -> str:
    config = gem_id.split("-", 1)[0]
    for source in ("xlsum", "mlsum", "wiki_lingua"):
        if config.startswith(source + "_"):
            return source
    return config


def split_stats(rows: Sequence[SampleRow]) -> dict:
    """Counts a reader of the split should find (documented in the README)."""
    ratings = {}
    for q in range(QUESTION_COUNT):
        cells = count((r.cells[q] or "empty") for r in rows)
        yes, no = cells.get("Yes", 0), cells.get("No", 0)
        ratings[f"question{q + 1}"] = dict(cells, yes_rate=round(yes / (yes + no), 4))
    return {
        "rows": len(rows),
        "articles": len({r.gem_id for r in rows}),
        "langs": count(r.lang for r in rows),
        "sources": count(source_of(r.gem_id) for r in rows),
        "systems": count(r.system for r in rows),
        "ratings": ratings,
        "corruptions": count(c for r in rows for c in r.summary.corruptions),
    }
