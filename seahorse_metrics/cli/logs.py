"""What the command line logs to stderr.

By default, our own progress and warnings: the `seahorse_metrics` loggers at
INFO and every other library at WARNING, and the native libraries (XLA's and
TensorFlow's C++ logging, libtpu) asked for errors only, unless the
environment already says otherwise. One `score` run printed 15 Orbax lines
(through absl) and JAX's backend probing among its 27. `-v` brings every
library's INFO lines back (and leaves the native libraries as they are),
`-vv` DEBUG, and `--log_level LEVEL` sets every logger to LEVEL.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Optional

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The loggers whose INFO lines are ours: the package's. uvicorn's levels are
# set by `serve` itself (its lines say where the service listens).
OWN_LOGGERS = ("seahorse_metrics",)
# Environment variables the native libraries read when they start: the
# minimum level they print (2: errors only).
NATIVE_LOG_SETTINGS = {"TF_CPP_MIN_LOG_LEVEL": "2", "TPU_STDERR_LOG_LEVEL": "2"}


def add_arguments(parser: argparse.ArgumentParser, default=None) -> None:
    """`-v` and `--log_level` (`default=argparse.SUPPRESS` on a subcommand,
    so that a value given before it stays)."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0 if default is None else default,
        help="Also show other libraries' INFO lines (Orbax, JAX, ...); -vv: DEBUG.",
    )
    parser.add_argument(
        "--log_level",
        type=str.upper,
        choices=LEVELS,
        default=default,
        help="Every logger's level (default: our own progress at INFO, other libraries' warnings).",
    )


class UvicornNames(logging.Filter):
    """Names uvicorn's records `uvicorn` unless they are errors.

    uvicorn logs everything it says about the server ("Uvicorn running on
    ...", "Shutting down") under `uvicorn.error`, so that a search of the log
    for errors found every line of the service.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.error" and record.levelno < logging.ERROR:
            record.name = "uvicorn"
        return True


class _StderrHandler(logging.StreamHandler):
    """Writes to `sys.stderr` as it is when a record comes (it may be replaced later)."""

    def __init__(self):
        logging.Handler.__init__(self)  # pylint: disable=non-parent-init-called
        self.setFormatter(logging.Formatter(FORMAT))
        self.addFilter(UvicornNames())

    @property
    def stream(self):
        return sys.stderr


def configure(log_level: Optional[str], verbose: int = 0, *, force: bool = False) -> None:
    """Sets up stderr logging for a command as `--log_level` and `-v` say.

    As `logging.basicConfig`, it does nothing where the root logger already
    has handlers (a program that calls `cli.main` has set up its own logging).

    Args:
      log_level: Every logger's level, or None for the default.
      verbose: How many `-v`: 1 shows every library's INFO lines, 2 DEBUG.
      force: Configure even so (adding our handler once).
    """
    root = logging.getLogger()
    ours = [handler for handler in root.handlers if isinstance(handler, _StderrHandler)]
    if root.handlers and not ours and not force:
        return
    if not ours:
        root.addHandler(_StderrHandler())
    if log_level is None and not verbose:
        for name, value in NATIVE_LOG_SETTINGS.items():
            os.environ.setdefault(name, value)
        root.setLevel(logging.WARNING)
        own_level = logging.INFO
    else:
        level = log_level or ("DEBUG" if verbose > 1 else "INFO")
        root.setLevel(level)
        own_level = logging.NOTSET  # as the root
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(own_level)
