"""The mFACE-format sample: min/avg/max of three raters per question, with
ROUGE and a word-support score."""

from __future__ import annotations

import random
import re

from demo_data.sample.articles import make_article
from demo_data.sample.corruptions import make_summary
from demo_data.sample.stats import count
from demo_data.sample.systems import draw_corruptions

XLSUM_NAMES = {
    "en": "english",
    "es": "spanish",
    "ru": "russian",
    "tr": "turkish",
    "vi": "vietnamese",
    "fr": "french",
    "pt": "portuguese",
}


_WORD_RE = re.compile(r"\w+", re.UNICODE)


class WordTokenizer:
    """Lower-cased unicode words: rouge-score's default tokenizer drops non-ASCII."""

    def tokenize(self, text: str) -> list[str]:
        return _WORD_RE.findall(text.lower())


def _rouge_scorer():
    from rouge_score import rouge_scorer  # only needed for the mFACE columns

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=WordTokenizer())


def word_support(article: str, summary: str) -> float:
    """Share of the summary's words that occur in the article."""
    article_words = set(WordTokenizer().tokenize(article))
    words = WordTokenizer().tokenize(summary)
    return sum(w in article_words for w in words) / max(1, len(words))


MFACE_COLUMNS = (
    "id",
    "doc_id",
    "lang",
    "split",
    "input",
    "summary",
    "system",
    "q1_min",
    "q1_avg",
    "q1_max",
    "q2_min",
    "q2_avg",
    "q2_max",
    "q3_min",
    "q3_avg",
    "q3_max",
    "rouge1",
    "rouge2",
    "rougeL",
    "e2e_nli_logprob",
    "e2e_nli_score",
)
MFACE_LANGS = ("en", "es", "ru", "tr", "vi", "fr", "pt")
MFACE_SYSTEMS = {
    "human": "reference",
    "mt5_xxl": "mt5_xxl",
    "palm_finetuned": "palm_finetuned",
    "palm_1shot": "palm_1shot",
}
MFACE_RATERS = 3
MFACE_RATER_NOISE = 0.1


def _rater_stats(rng: random.Random, good: bool) -> list[str]:
    votes = [int(good != (rng.random() < MFACE_RATER_NOISE)) for _ in range(MFACE_RATERS)]
    return [str(min(votes)), f"{sum(votes) / MFACE_RATERS:.4f}", str(max(votes))]


def make_mface(rng: random.Random, docs_per_lang: int) -> tuple[list[list[str]], dict]:
    """mFACE-style rows: q1 quality ~ Q1, q2 attribution ~ Q4, q3 informativeness ~ Q6."""
    scorer = _rouge_scorer()
    rows = []
    for lang in MFACE_LANGS:
        for d in range(docs_per_lang):
            article, pool = make_article(rng, lang)
            doc_id = f"{XLSUM_NAMES[lang]}-{d:04d}"
            split = "validation" if d % 3 == 0 else "test"
            systems = sorted(MFACE_SYSTEMS)
            rng.shuffle(systems)
            for system in sorted(systems[: rng.choice((2, 3, 4))]):
                corrupt = draw_corruptions(rng, MFACE_SYSTEMS[system])
                summary = make_summary(rng, article, pool, corrupt)
                labels = summary.labels
                scores = scorer.score(article.text, summary.text)
                support = word_support(article.text, summary.text)
                rows.append(
                    [
                        f"{doc_id}-{system}",
                        doc_id,
                        XLSUM_NAMES[lang],
                        split,
                        article.text,
                        summary.text,
                        system,
                    ]
                    + _rater_stats(rng, labels[0])
                    + _rater_stats(rng, labels[3])
                    + _rater_stats(rng, labels[5])
                    + [f"{scores[k].fmeasure:.4f}" for k in ("rouge1", "rouge2", "rougeL")]
                    + [f"{_log(support):.4f}", f"{support:.4f}"]
                )
    stats = {
        "rows": len(rows),
        "docs": len({r[1] for r in rows}),
        "langs": count(r[2] for r in rows),
        "systems": count(r[6] for r in rows),
    }
    return rows, stats


def _log(x: float) -> float:
    import math

    return math.log(max(x, 1e-4))
