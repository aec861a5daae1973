"""Unlabelled article-summary pairs (the summarisation datasets' train split)."""

from __future__ import annotations

import random

from demo_data.sample.articles import make_article
from demo_data.sample.corruptions import draw_summary
from demo_data.sample.seahorse import LANG_WEIGHTS
from demo_data.sample.stats import count
from demo_data.sample.systems import SYSTEM_ERROR_RATES

# What a journalist's summary gets wrong, per question: never incomprehensible
# or ungrammatical, otherwise as often repetitive, unfaithful, off the lead or
# padded as the sample's references.
CORPUS_ERROR_RATES = (
    (0.0,) + SYSTEM_ERROR_RATES["reference"][1:2] + (0.0,) + SYSTEM_ERROR_RATES["reference"][3:]
)
CORPUS_PAIRS_PER_LANG = 1500


def make_corpus(rng: random.Random, pairs_per_lang: int) -> tuple[list[dict], dict]:
    """Unlabelled (article, summary) pairs per language, as the train splits of
    XL-Sum, MLSum and WikiLingua are: the text a model learns the languages
    and the task from before any rating is seen. Nobody rated them; the
    summaries are fluent and grammatical, and otherwise as imperfect as the
    references (`CORPUS_ERROR_RATES`)."""
    records, applied = [], []
    for lang in sorted(LANG_WEIGHTS):
        for index in range(pairs_per_lang):
            article, pool = make_article(rng, lang)
            corrupt = [rng.random() < p for p in CORPUS_ERROR_RATES]
            summary = draw_summary(rng, article, pool, corrupt)
            applied.extend(summary.corruptions)
            records.append(
                {
                    "id": f"{lang}-train-{index}",
                    "lang": lang,
                    "text": article.text,
                    "summary": summary.text,
                }
            )
    return records, {
        "pairs": len(records),
        "langs": count(r["lang"] for r in records),
        "corruptions": count(applied),
    }
