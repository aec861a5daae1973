"""`seahorse-metrics prepare`: join the SEAHORSE release with its articles."""

from __future__ import annotations

import argparse
import json
import logging

from seahorse_metrics.data.articles import ArticleSourceError, make_article_source
from seahorse_metrics.data.prepare import REPORT_NAME, prepare

logger = logging.getLogger(__name__)

# Reported as one line by the CLI (besides ValueError, OSError and ImportError).
USER_ERRORS = (ArticleSourceError,)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "prepare",
        help="Join the SEAHORSE release TSVs with their articles into JSONL splits.",
        description=(
            "Reads train/validation/test.tsv of the SEAHORSE release, looks up each "
            "article by gem_id, and writes <split>.jsonl, missing_articles.jsonl and "
            f"{REPORT_NAME} to --output_dir."
        ),
    )
    parser.add_argument("--release_dir", required=True, help="Directory with the release TSVs.")
    parser.add_argument(
        "--articles",
        help='Local article file: JSONL {"gem_id", "text"} or TSV gem_id<TAB>text '
        "(implies --article_source local).",
    )
    parser.add_argument(
        "--article_source",
        choices=("local", "tfds", "hf"),
        help="Where articles come from: a local file, TFDS's GEM builder, or Hugging "
        "Face datasets (GEMv2; GEMv1 for wiki_lingua). Default: local.",
    )
    parser.add_argument("--output_dir", required=True, help="Where to write the JSONL splits.")
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="Skip and count malformed release rows instead of stopping at the first one.",
    )
    parser.add_argument("--tfds_data_dir", help="TFDS data directory (tfds source).")
    parser.add_argument(
        "--tfds_download",
        action="store_true",
        help="Let TFDS download and prepare GEM configs that are not prepared yet.",
    )
    parser.add_argument("--hf_cache_dir", help="Hugging Face datasets cache directory (hf source).")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kind = args.article_source or "local"
    if args.articles and kind != "local":
        raise ValueError("--articles is a local file; drop it or use --article_source local")
    source = make_article_source(
        kind,
        path=args.articles,
        tfds_data_dir=args.tfds_data_dir,
        tfds_download=args.tfds_download,
        hf_cache_dir=args.hf_cache_dir,
    )
    report = prepare(args.release_dir, source, args.output_dir, strict=not args.lenient)
    print(json.dumps(report["totals"], indent=2))
    return 0
