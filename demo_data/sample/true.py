"""The TRUE-format sample: English grounding/generated_text pairs, label 1 =
consistent."""

from __future__ import annotations

import random

from demo_data.sample.articles import Article, make_article
from demo_data.sample.corruptions import make_summary

# name -> (rows, probability a summary is unfaithful, multi-sentence share)
TRUE_SETS = {
    "frank": (200, 0.45, 0.2),
    "summeval": (150, 0.35, 0.8),
    "qags_x": (120, 0.5, 0.0),
    "paws": (160, 0.5, 0.0),
}


def make_true_set(rng: random.Random, name: str) -> tuple[list[list[str]], dict]:
    """English grounding/generated_text pairs; label 1 = consistent (no Q4 swap)."""
    n_rows, p_unfaithful, p_verbose = TRUE_SETS[name]
    rows = []
    while len(rows) < n_rows:
        article, pool = make_article(rng, "en")
        unfaithful = rng.random() < p_unfaithful
        if name == "paws":
            # Sentence pairs: the lead and a paraphrase of it (or with one swapped value).
            lead = article.text.split(". ")[0].rstrip(".") + "."
            corrupt = (False, False, False, unfaithful, False, False)
            pair = make_summary(rng, Article("en", article.facts[:2], lead), pool, corrupt)
            rows.append([lead, pair.text, str(int(not unfaithful))])
            continue
        corrupt = (
            False,
            False,
            rng.random() < 0.1,
            unfaithful,
            rng.random() < 0.3,
            rng.random() < p_verbose,
        )
        summary = make_summary(rng, article, pool, corrupt)
        rows.append([article.text, summary.text, str(int(not unfaithful))])
    return rows, {"rows": len(rows), "consistent": sum(r[2] == "1" for r in rows)}
