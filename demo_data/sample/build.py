"""Every file of the sample from a seed, and the command line that writes them
(`python -m demo_data.sample`)."""

from __future__ import annotations

import argparse
import gzip
import json
import random
from typing import Optional, Sequence

from demo_data.paths import SAMPLE_DIR
from demo_data.sample.corpus import CORPUS_PAIRS_PER_LANG, make_corpus
from demo_data.sample.mface import MFACE_COLUMNS, make_mface
from demo_data.sample.ratings import make_ratings
from demo_data.sample.seahorse import (
    SEAHORSE_SPLITS,
    TSV_HEADER,
    GemIds,
    make_seahorse_split,
    split_stats,
)
from demo_data.sample.true import TRUE_SETS, make_true_set
from demo_data.sample.writers import csv_text, jsonl_text, tsv_text, write_sample

DESCRIPTION = "Generates the bundled SYNTHETIC sample in `seahorse_metrics/data/sample/`."


def build_sample(
    seed: int,
    split_rows: dict[str, int],
    mface_docs_per_lang: int = 12,
    ratings_rows: int = 200,
    corpus_pairs_per_lang: int = CORPUS_PAIRS_PER_LANG,
) -> dict[str, str | bytes]:
    """Every file of the sample: {relative path: content}. Pure function of its args."""

    def rng_for(part: str) -> random.Random:
        return random.Random(f"seahorse-sample-{seed}-{part}")

    files: dict[str, str] = {}
    stats: dict = {"seed": seed, "seahorse": {}}
    gem_ids = GemIds(rng_for("gem_ids"))
    all_articles: dict[str, str] = {}
    for split in SEAHORSE_SPLITS:
        rows, articles = make_seahorse_split(rng_for(split), gem_ids, split_rows[split])
        files[f"seahorse/{split}.tsv"] = tsv_text(TSV_HEADER, (row.tsv_fields() for row in rows))
        stats["seahorse"][split] = split_stats(rows)
        all_articles.update(articles)
    files["seahorse/articles.jsonl"] = jsonl_text(
        {"gem_id": g, "text": all_articles[g]} for g in sorted(all_articles)
    )
    mface_rows, stats["mface"] = make_mface(rng_for("mface"), mface_docs_per_lang)
    files["mface/mface_sample.csv"] = csv_text(MFACE_COLUMNS, mface_rows)
    stats["true"] = {}
    for name in TRUE_SETS:
        rows, stats["true"][name] = make_true_set(rng_for(f"true-{name}"), name)
        files[f"true/{name}.csv"] = csv_text(("grounding", "generated_text", "label"), rows)
    records, stats["ratings"] = make_ratings(rng_for("ratings"), ratings_rows)
    files["ratings/squality_style.jsonl"] = jsonl_text(records)
    corpus, stats["corpus"] = make_corpus(rng_for("corpus"), corpus_pairs_per_lang)
    # Compressed as the datasets ship; mtime 0 keeps the bytes reproducible.
    files["corpus/train.jsonl.gz"] = gzip.compress(jsonl_text(corpus).encode("utf-8"), mtime=0)
    files["stats.json"] = json.dumps(stats, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    return files


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo_data.sample", description=DESCRIPTION)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output_dir", default=SAMPLE_DIR)
    parser.add_argument("--train_rows", type=int, default=3600)
    parser.add_argument("--validation_rows", type=int, default=1000)
    parser.add_argument("--test_rows", type=int, default=1000)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Writes every file of the sample for `--seed` into `--output_dir`."""
    args = parse_args(argv)
    split_rows = {
        "train": args.train_rows,
        "validation": args.validation_rows,
        "test": args.test_rows,
    }
    files = build_sample(args.seed, split_rows)
    write_sample(args.output_dir, files)
    total = sum(len(c if isinstance(c, bytes) else c.encode("utf-8")) for c in files.values())
    print(f"wrote {len(files)} files ({total / 1e6:.2f} MB) to {args.output_dir}")
    return 0
