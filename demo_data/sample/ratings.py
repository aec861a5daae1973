"""The continuous-ratings sample: SQuALITY-style 1-100 quality ratings."""

from __future__ import annotations

import random

from demo_data.sample.articles import make_article
from demo_data.sample.corruptions import draw_summary
from demo_data.sample.systems import SYSTEM_ERROR_RATES, draw_corruptions

RATING_PENALTIES = (45, 15, 10, 30, 15, 10)  # points lost per failed question


def make_ratings(rng: random.Random, n_rows: int) -> tuple[list[dict], dict]:
    """SQuALITY-style 1-100 quality ratings of English summaries."""
    records = []
    systems = sorted(SYSTEM_ERROR_RATES)
    for i in range(n_rows):
        article, pool = make_article(rng, "en")
        system = rng.choice(systems)
        summary = draw_summary(rng, article, pool, draw_corruptions(rng, system))
        penalty = sum(p for p, good in zip(RATING_PENALTIES, summary.labels) if not good)
        rating = int(round(min(100.0, max(1.0, 92 - penalty + rng.gauss(0.0, 7.0)))))
        records.append(
            {
                "id": f"squality-style-{i:04d}",
                "system": system,
                "premise": article.text,
                "hypothesis": summary.text,
                "rating": rating,
            }
        )
    return records, {"rows": len(records)}
