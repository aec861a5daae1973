"""`seahorse-metrics distill`: train a small student metric on a teacher's scores.

    seahorse-metrics distill --gin_file=gin/runs/distill.gin \
        --gin.MODEL_DIR=runs/q4_small --gin.DATA_DIR=prepared/ \
        --gin.TEACHER=runs/q4/best --pairs 'unlabelled/*.jsonl'

The student is an ordinary metric directory (MODEL_DIR/best) that `score`,
`evaluate` and `export` read; the run resumes when rerun and ends with a
teacher/student table (MODEL_DIR/distill_report.md).
"""

from __future__ import annotations

import argparse
import logging

from seahorse_metrics.cli.train import GinFlagParser

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "distill",
        help="Distil a metric into a smaller student (gin-configured; resumes from MODEL_DIR).",
        description=(
            "Trains a student metric on a teacher's first-step distribution over 0/1 "
            "(soft-label cross-entropy, optional temperature and mix with human labels) on "
            "the prepared splits' pairs and --pairs files. The teacher is a checkpoint or "
            "hub id (scored once, cached in MODEL_DIR/teacher) or a scores file from "
            "`score`. The best checkpoint (MODEL_DIR/best) is the one that agrees best with "
            "the teacher on held-out pairs."
        ),
        epilog="Bindings as --gin.NAME=VALUE, e.g. --gin.MODEL_DIR=runs/q4_small "
        "--gin.TEACHER=runs/q4/best --gin.DATA_DIR=prepared/.",
    )
    parser.__class__ = GinFlagParser
    parser.add_argument(
        "--gin_file",
        action="append",
        default=[],
        required=True,
        help="Gin file (repeatable), e.g. gin/runs/distill.gin.",
    )
    parser.add_argument(
        "--gin_bindings",
        action="append",
        default=[],
        help="A gin binding (repeatable); --gin.NAME=VALUE is the short form.",
    )
    parser.add_argument(
        "--pairs",
        action="append",
        default=[],
        metavar="FILE",
        help="Unlabelled article/summary pairs (JSONL/CSV/TSV; globs; "
        "repeatable), added to the prepared train split's.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from seahorse_metrics.training import distill

    bindings = list(args.gin_bindings) + list(getattr(args, "gin_flag_bindings", []))
    result = distill.distill_from_gin(args.gin_file, bindings, args.pairs)
    print(result.train.summary)
    if result.table:
        print(result.table)
    return 0
