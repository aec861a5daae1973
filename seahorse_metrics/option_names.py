"""How a message names an option: the way its reader passes it.

A user of the Python API passes keywords (`overwrite=True`), a user of the
command line flags (`--overwrite`). A message of the library names an option
with `option(keyword, command_line)`: the keyword, or, while a command runs
(`for_command`, which `seahorse_metrics.cli` enters around every
subcommand), the command line's spelling. A flag is given only if the
running command has it (an `evaluate` metric spec's `max_input_length` is
no flag of `evaluate`: the keyword names it there); another spelling (a
benchmark spec's options) is given as it is.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterable, Iterator, Optional

_COMMAND_FLAGS: contextvars.ContextVar[Optional[frozenset[str]]] = contextvars.ContextVar(
    "seahorse_metrics_command_flags", default=None
)


def option(keyword: str, command_line: str) -> str:
    """`command_line` while a command that takes it runs, else `keyword`.

    Args:
      keyword: The option as the Python API takes it, e.g. "overwrite=True".
      command_line: As the command line takes it, e.g. "--overwrite" (a
        flag: its first word must be one of the running command's flags)
        or "ratings:FILE:premise=F".
    """
    flags = _COMMAND_FLAGS.get()
    if flags is None:
        return keyword
    if command_line.startswith("--") and command_line.split()[0] not in flags:
        return keyword
    return command_line


@contextlib.contextmanager
def for_command(flags: Iterable[str]) -> Iterator[None]:
    """Messages made inside name options as a command with `flags` takes them.

    A thread started inside runs in a copy of this context only when started
    so (`contextvars.copy_context().run`).
    """
    token = _COMMAND_FLAGS.set(frozenset(flags))
    try:
        yield
    finally:
        _COMMAND_FLAGS.reset(token)
