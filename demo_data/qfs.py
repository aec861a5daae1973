"""Builds the bundled query-focused sample from the sample's English articles.

    python -m demo_data.qfs       # from the repository root; writes
                                  # seahorse_metrics/data/sample/qfs/qfs_sample.jsonl

SQuALITY- and KI-QFS-style data: one article, several questions, a summary
per question, each rated. The articles are the synthetic xsum-style ones of
`seahorse/articles.jsonl` (template news: every sentence states one fact of
one of seven kinds). For each article two of its facts become questions
(one template per kind of fact), and each question gets three summaries:

* `answer`: the sentence that states the fact asked about (rating 1);
* `other_question`: the answer to the article's other question, faithful to
  the article but not to the question (rating 0);
* `changed_number`: the answer with its first number replaced by one the
  article never mentions (rating 0).

So the same summary text is rated 1 under one question and 0 under another:
a metric that ignores the question cannot tell them apart. Output: one JSON
object per line, `id, article_id, lang, question, premise, hypothesis,
rating, construction`, byte-identical for the same input and seed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
from typing import Optional, Sequence

from demo_data.paths import SAMPLE_DIR

ARTICLES = 20
# Kind of fact -> (words that identify its sentence, the question asked about it).
QUESTIONS = {
    "resignation": (("resign",), "Who resigned, and after how many years?"),
    "protest": (("demonstrat", "protest", "marched"), "How many people protested, and where?"),
    "storm": (("storm",), "How many homes did the storm damage, and where?"),
    "plant": (
        ("plant", "factory"),
        "Which company opened a plant, and how many jobs will it bring?",
    ),
    "investment": (("invest",), "Which company will invest, and how much?"),
    "election": (("vote", "election"), "Who won the election, and with what share of the vote?"),
    "arrests": (("detained", "arrest"), "How many people were detained, and where?"),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_NUMBER = re.compile(r"\d[\d,]*")


def fact_kind(sentence: str) -> Optional[str]:
    """The kind of fact a sentence states, or None when it is not one kind only."""
    lowered = sentence.lower()
    kinds = [kind for kind, (words, _) in QUESTIONS.items() if any(w in lowered for w in words)]
    return kinds[0] if len(kinds) == 1 else None


def change_number(sentence: str, article: str, rng: random.Random) -> Optional[str]:
    """The sentence with its first number replaced by one the article lacks."""
    match = _NUMBER.search(sentence)
    if match is None:
        return None
    value = int(match.group().replace(",", ""))
    present = {int(n.replace(",", "")) for n in _NUMBER.findall(article)}
    percent = sentence[match.end() :].startswith(" percent")
    if percent:  # A share of the vote stays one.
        candidates = [value + offset for offset in rng.sample((-12, -7, 7, 12), 4)]
    else:
        candidates = [value * factor for factor in rng.sample((2, 3, 4, 5), 4)]
    usable = [n for n in candidates if n not in present and (not percent or 0 < n < 100)]
    if not usable:
        return None
    new = usable[0]
    text = f"{new:,}" if "," in match.group() or new >= 1000 else str(new)
    return sentence[: match.start()] + text + sentence[match.end() :]


def article_rows(gem_id: str, article: str, rng: random.Random) -> list[dict]:
    """Six rated rows (two questions, three summaries each), or none."""
    facts = [(fact_kind(s), s) for s in _SENTENCE_END.split(article.strip())]
    facts = [(kind, sentence) for kind, sentence in facts if kind is not None]
    if len({kind for kind, _ in facts}) < 2:
        return []
    (kind_a, answer_a), (kind_b, answer_b) = rng.sample(facts, 2)
    if kind_a == kind_b:
        return []
    rows = []
    for index, (kind, answer, other) in enumerate(
        ((kind_a, answer_a, answer_b), (kind_b, answer_b, answer_a)), start=1
    ):
        changed = change_number(answer, article, rng)
        if changed is None:
            return []
        for construction, summary, rating in (
            ("answer", answer, 1),
            ("other_question", other, 0),
            ("changed_number", changed, 0),
        ):
            rows.append(
                {
                    "id": f"{gem_id}|q{index}|{construction}",
                    "article_id": gem_id,
                    "lang": "en",
                    "question": QUESTIONS[kind][1],
                    "premise": article,
                    "hypothesis": summary,
                    "rating": rating,
                    "construction": construction,
                }
            )
    return rows


def build(articles_path: str, seed: int = 0, count: int = ARTICLES) -> list[dict]:
    """The rows of the first `count` English test articles that have two kinds of fact."""
    rng = random.Random(seed)
    with open(articles_path, encoding="utf-8") as handle:
        articles = sorted(
            (json.loads(line) for line in handle if line.strip()),
            key=lambda record: record["gem_id"],
        )
    rows: list[dict] = []
    used = 0
    for record in articles:
        if used == count:
            break
        if not record["gem_id"].startswith("xsum-test-"):
            continue
        new = article_rows(record["gem_id"], record["text"], rng)
        if new:
            rows.extend(new)
            used += 1
    if used < count:
        raise ValueError(
            f"{articles_path}: only {used} English test articles with two kinds "
            f"of fact; need {count}"
        )
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo_data.qfs", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--sample_dir",
        default=SAMPLE_DIR,
        help="the bundled sample (articles are read from seahorse/articles.jsonl)",
    )
    parser.add_argument(
        "--output", default=None, help="where to write (default: <sample_dir>/qfs/qfs_sample.jsonl)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = build(os.path.join(args.sample_dir, "seahorse", "articles.jsonl"), args.seed)
    output = args.output or os.path.join(args.sample_dir, "qfs", "qfs_sample.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    temporary = output + ".tmp"
    with open(temporary, "w", encoding="utf-8", newline="\n") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(temporary, output)
    print(f"wrote {len(rows)} rows to {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
