"""The subcommands' argument parser: an unknown flag is named first, with the closest known one.

argparse collects the flags it does not know and reports them only once the
required ones are checked, so `score --chekpoint DIR` said "the following
arguments are required: --checkpoint", and an unknown flag after a complete
command line was reported by the top-level parser, with the top-level usage.
`CommandParser` looks at the flags before parsing: an unknown one is an
error naming it and the closest flag of the subcommand, under the
subcommand's usage.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Iterable, Optional, Sequence


class CommandParser(argparse.ArgumentParser):
    """The parser of one subcommand.

    Attributes:
      passes_unknown_after: A flag (e.g. `score`'s "--runner") whose presence
        lets unknown flags through, for the caller to hand on (Beam's
        pipeline options); None: every unknown flag is an error.
    """

    passes_unknown_after: Optional[str] = None

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        passes = self._passes_unknown(args)
        if not passes:
            self._refuse(self.unknown_flags(args))
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not passes:
            self._refuse(extras)
        return namespace, extras

    def unknown_flags(self, args: Sequence[str]) -> list[str]:
        """The `--` flags of `args` (before a `--`) that no option of this
        parser takes, an abbreviation argparse accepts counting as known."""
        known = long_flags(self)
        unknown = []
        for token in args:
            if token == "--":
                break
            if not token.startswith("--") or " " in token:
                continue
            name = token.split("=", 1)[0]
            if name in known or (self.allow_abbrev and any(f.startswith(name) for f in known)):
                continue
            unknown.append(name)
        return unknown

    def _passes_unknown(self, args: Sequence[str]) -> bool:
        flag = self.passes_unknown_after
        return bool(flag) and any(token == flag or token.startswith(flag + "=") for token in args)

    def _refuse(self, unknown: Iterable[str]) -> None:
        unknown = list(unknown)
        if unknown:
            self.error(unknown_arguments_message(unknown, long_flags(self), self.prog))


def long_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The `--` flags `parser` takes."""
    return [
        option
        for action in parser._actions  # pylint: disable=protected-access
        for option in action.option_strings
        if option.startswith("--")
    ]


def subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of `parser`'s subcommand `name`."""
    for action in parser._actions:  # pylint: disable=protected-access
        if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
            return action.choices[name]
    raise KeyError(f"{parser.prog} has no subcommands")


def closest_flag(name: str, flags: Iterable[str]) -> Optional[str]:
    """The flag of `flags` spelt most like `name`, or None when none is close."""
    stripped = {flag.lstrip("-"): flag for flag in flags}
    match = difflib.get_close_matches(name.lstrip("-"), list(stripped), n=1, cutoff=0.6)
    return stripped[match[0]] if match else None


def unknown_arguments_message(unknown: Sequence[str], flags: Iterable[str], prog: str) -> str:
    """ "unrecognized argument --chekpoint (did you mean --checkpoint?)", one
    entry per unknown argument, and where to read the flags."""
    flags = list(flags)
    described = []
    for token in unknown:
        suggestion = closest_flag(token, flags) if token.startswith("-") else None
        described.append(f"{token} (did you mean {suggestion}?)" if suggestion else token)
    noun = "argument" if len(described) == 1 else "arguments"
    return f"unrecognized {noun} {', '.join(described)}; see `{prog} --help`"
