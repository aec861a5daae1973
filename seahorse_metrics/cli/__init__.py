"""The `seahorse-metrics` command line.

Each subcommand lives in its own module of this package and exposes
`add_parser(subparsers)`, which registers the subcommand and sets `func`
to the function that runs it. This module only dispatches.
"""
import argparse
import importlib
import logging
import sys

SUBCOMMANDS = ("prepare", "train", "score", "evaluate", "plan")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seahorse-metrics",
        description=(
            "Learnt, reference-free summarization metrics (SEAHORSE): prepare "
            "data, train one metric per quality question, score summaries and "
            "meta-evaluate metrics against human ratings."
        ),
    )
    parser.add_argument(
        "--log_level", default="INFO", help="Python logging level (default: INFO)."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"seahorse_metrics.cli.{name}")
        module.add_parser(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
