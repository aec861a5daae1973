"""The `seahorse-metrics` command line.

Each subcommand lives in its own module of this package and exposes
`add_parser(subparsers)`, which registers the subcommand and sets `func`
to the function that runs it. This module only dispatches, and turns the
errors a user can fix (a missing file, a malformed row, a bad spec, a
damaged checkpoint: `ValueError`, `OSError`, `ImportError` and their
subclasses, plus any types a subcommand module lists in `USER_ERRORS`) into
one line on stderr and exit status 2; `--debug` shows the traceback instead.
"""

import argparse
import importlib
import sys
from typing import Iterable, Optional

from seahorse_metrics import option_names
from seahorse_metrics.cli import logs
from seahorse_metrics.cli.parsing import (
    CommandParser,
    long_flags,
    subcommand_parser,
    unknown_arguments_message,
)

SUBCOMMANDS = ("prepare", "train", "score", "evaluate", "export", "plan", "distill", "serve")
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
# Errors whose message tells the user what to fix; anything else is a bug
# and keeps its traceback.
USER_ERRORS = (ValueError, OSError, ImportError)


def _add_debug_flag(parser: argparse.ArgumentParser, default=False) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="On an error, show the Python traceback instead of one line.",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seahorse-metrics",
        description=(
            "Learnt, reference-free summarization metrics (SEAHORSE): prepare "
            "data, train one metric per quality question, score summaries and "
            "meta-evaluate metrics against human ratings."
        ),
    )
    logs.add_arguments(parser)
    _add_debug_flag(parser)
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=CommandParser
    )
    subparsers.required = True
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"seahorse_metrics.cli.{name}")
        module.add_parser(subparsers)
    for subparser in subparsers.choices.values():
        # Also after the subcommand; SUPPRESS keeps a value given before it.
        _add_debug_flag(subparser, default=argparse.SUPPRESS)
        logs.add_arguments(subparser, default=argparse.SUPPRESS)
    return parser


def user_errors(command: str) -> tuple[type, ...]:
    """The exception types reported as one line for `command`."""
    module = sys.modules.get(f"seahorse_metrics.cli.{command}")
    return USER_ERRORS + tuple(getattr(module, "USER_ERRORS", ()))


def run_command(
    func,
    args: argparse.Namespace,
    errors: tuple[type, ...] = USER_ERRORS,
    flags: Iterable[str] = (),
) -> int:
    """Runs `func(args)`; a user error becomes `error: <message>` and status 2.

    With `args.debug` the exception propagates (full traceback). Ctrl-C
    prints one line and returns 130 (resumable commands continue when rerun).
    Messages name options as the command's `flags` (`option_names`).
    """
    try:
        with option_names.for_command(flags):
            return int(func(args) or 0)
    except errors as error:
        if getattr(args, "debug", False):
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        if getattr(args, "debug", False):
            raise
        print(
            "interrupted (score and train resume when the same command is run again)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def parse_args(argv=None, parser: Optional[argparse.ArgumentParser] = None) -> argparse.Namespace:
    """Parses a command line (with `parser`, default `build_parser()`).
    Options no parser knows are Beam pipeline options for `score --runner ...`
    (kept in `args.pipeline_args`); without `--runner` they are refused as usual."""
    parser = parser or build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "runner", None):
        parser.error(unknown_arguments_message(unknown, long_flags(parser), parser.prog))
    args.pipeline_args = unknown
    return args


def main(argv=None) -> int:
    parser = build_parser()
    args = parse_args(argv, parser)
    logs.configure(args.log_level, args.verbose)
    flags = long_flags(parser) + long_flags(subcommand_parser(parser, args.command))
    return run_command(args.func, args, user_errors(args.command), flags)


if __name__ == "__main__":
    sys.exit(main())
