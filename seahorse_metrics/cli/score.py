"""`seahorse-metrics score`: score a JSONL/CSV/TSV file with one or more metrics."""
from __future__ import annotations

import argparse
import logging
import os

from seahorse_metrics.scoring.batching import (DEFAULT_BUCKET_LENGTHS, DEFAULT_MAX_BATCH_TOKENS,
                                               DEFAULT_WINDOW_SIZE)

logger = logging.getLogger(__name__)

_EPILOG = """\
checkpoints (repeatable): [NAME=]DIR, any format (ours, Hugging Face, T5X). The
output column is NAME, or `score` for a single unnamed checkpoint, or
`score_<dir name>` for several.

The run is resumable: finished batches go to OUTPUT.partial.jsonl; rerun the
same command after an interruption and it continues. The output keeps the
input rows and order; bad rows get an `error` column. Settings and counts go
to OUTPUT.meta.json.

example:
  seahorse-metrics score --checkpoint q4=runs/q4/best --checkpoint q6=runs/q6/best \\
      --input data/prepared/test.jsonl --output scores/test.jsonl
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "score",
        help="Score summaries in a JSONL/CSV/TSV file with one or more metrics.",
        description="Adds a P(\"1\") score column per checkpoint to every row of the input.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--checkpoint", action="append", required=True, metavar="[NAME=]DIR",
                        help="Metric checkpoint directory (repeatable).")
    parser.add_argument("--input", required=True, help="JSONL, CSV or TSV file.")
    parser.add_argument("--output", required=True,
                        help="JSONL, CSV or TSV file to write (format from the extension).")
    parser.add_argument("--premise_field", default="article",
                        help="Column of the article (default: article).")
    parser.add_argument("--hypothesis_field", default="summary",
                        help="Column of the summary (default: summary).")
    parser.add_argument("--lang_field", default="lang",
                        help="Column of the language code, for truncation counts (default: lang).")
    parser.add_argument("--vocab", default=None,
                        help="SentencePiece model (default: spiece.model in the checkpoints).")
    parser.add_argument("--normalize", choices=("full", "pair"), default="full",
                        help="P(\"1\") over the full vocabulary (default) or over {0, 1}.")
    parser.add_argument("--truncation", choices=("summary_first", "joint"),
                        default="summary_first",
                        help="Shorten the article so the summary fits (default), or cut the "
                             "whole input as the released checkpoints saw it.")
    parser.add_argument("--long_inputs", choices=("truncate", "chunk"), default="truncate",
                        help="Truncate long inputs (default) or score overlapping premise "
                             "chunks and keep the max.")
    parser.add_argument("--chunk_overlap", type=int, default=128,
                        help="Premise tokens shared by consecutive chunks (default 128).")
    parser.add_argument("--per_sentence", action="store_true",
                        help="Score each summary sentence; adds <column>_sentences.")
    parser.add_argument("--sentence_aggregate", choices=("min", "mean"), default="min",
                        help="Combine sentence scores with min (default) or mean.")
    parser.add_argument("--max_input_length", type=int, default=2048,
                        help="Input tokens, EOS included (default 2048).")
    parser.add_argument("--batch_size", type=int, default=16,
                        help="Most rows per batch (default 16).")
    parser.add_argument("--max_batch_tokens", type=int, default=DEFAULT_MAX_BATCH_TOKENS,
                        help="Tokens per batch; long buckets get fewer rows "
                             f"(default {DEFAULT_MAX_BATCH_TOKENS}).")
    parser.add_argument("--buckets", default=None, metavar="L1,L2,...",
                        help="Batch lengths (default "
                             f"{','.join(map(str, DEFAULT_BUCKET_LENGTHS))} up to "
                             "--max_input_length).")
    parser.add_argument("--window_size", type=int, default=DEFAULT_WINDOW_SIZE,
                        help=f"Rows sorted by length together (default {DEFAULT_WINDOW_SIZE}).")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="Compute dtype (default float32; bfloat16 is slower on CPUs).")
    parser.add_argument("--quantize", default=None, choices=("int8",),
                        help="int8: int8 attention and feed-forward weights, products in "
                             "bfloat16; faster on CPUs with AVX512-BF16, scores rank as "
                             "float32's but are not equal to them.")
    parser.add_argument("--packing", action="store_true",
                        help="Pack short inputs into other rows' padding (same scores to float "
                             "rounding; pays off with few or coarse --buckets).")
    parser.add_argument("--overwrite", action="store_true",
                        help="Start over: discard a partial run or an existing output.")
    parser.add_argument("--no_progress", action="store_true", help="No progress bar.")
    parser.set_defaults(func=run)


def checkpoint_names(specs: list[str]) -> dict[str, str]:
    """Output column -> checkpoint directory from `[NAME=]DIR` specs.

    Raises:
      ValueError: for duplicate column names.
    """
    named = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or os.path.exists(spec):
            name, path = "", spec
        if not name:
            base = os.path.basename(os.path.normpath(path))
            name = "score" if len(specs) == 1 else f"score_{base}"
        if name in named:
            raise ValueError(f"two checkpoints would write column {name!r}; name them NAME=DIR")
        named[name] = path
    return named


def run(args) -> int:
    from seahorse_metrics.scoring.scorer import MultiScorer
    from seahorse_metrics.scoring.files import score_file

    buckets = ([int(b) for b in args.buckets.split(",") if b.strip()]
               if args.buckets else None)
    scorer = MultiScorer.load(
        checkpoint_names(args.checkpoint), vocab=args.vocab, dtype=args.dtype,
        max_input_length=args.max_input_length, batch_size=args.batch_size,
        truncation=args.truncation, normalize=args.normalize, long_inputs=args.long_inputs,
        chunk_overlap=args.chunk_overlap, per_sentence=args.per_sentence,
        sentence_aggregate=args.sentence_aggregate, bucket_lengths=buckets,
        max_batch_tokens=args.max_batch_tokens, window_size=args.window_size,
        quantize=args.quantize, packing=args.packing)
    summary = score_file(scorer, args.input, args.output, premise_field=args.premise_field,
                         hypothesis_field=args.hypothesis_field, lang_field=args.lang_field,
                         overwrite=args.overwrite,
                         show_progress=False if args.no_progress else None)
    rows = summary["rows"]
    logger.info("wrote %s (%d rows, %d bad; settings in %s.meta.json)", args.output,
                rows["rows"], rows["bad"], args.output)
    return 0
