"""JAX's persistent compilation cache, for the `score` and `train` commands.

XLA programs compiled by one run are written to a directory and read back by
the next run that compiles the same program (same model, mesh, batch shape,
jax version and devices), so a second `score` on the same shapes starts
without compiling. The directory is, in order of precedence:
`--compilation_cache DIR`, the environment variable
`SEAHORSE_METRICS_COMPILATION_CACHE`, JAX's own `JAX_COMPILATION_CACHE_DIR`,
and `$XDG_CACHE_HOME/seahorse-metrics/jax` (default `~/.cache/...`).
`--no_compilation_cache`, or the value `off`, turns it off.

Library users call `enable()` themselves before their first compilation:
importing this project never changes JAX's configuration.
"""

from __future__ import annotations

import logging
import os
from typing import Optional

logger = logging.getLogger(__name__)

ENV_VAR = "SEAHORSE_METRICS_COMPILATION_CACHE"
OFF = "off"
# Every program the scorer and trainer compile is worth keeping: there are few
# (one per batch shape), and on a CPU even small ones take a second to compile.
MIN_COMPILE_SECONDS = 0.0


def default_directory() -> str:
    """`$XDG_CACHE_HOME/seahorse-metrics/jax`, or `~/.cache/seahorse-metrics/jax`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "seahorse-metrics", "jax")


def resolve_directory(directory: Optional[str] = None) -> Optional[str]:
    """The cache directory to use (see the module docstring), or None when off."""
    chosen = (
        directory
        or os.environ.get(ENV_VAR)
        or os.environ.get("JAX_COMPILATION_CACHE_DIR")
        or default_directory()
    )
    return None if chosen.strip().lower() == OFF else chosen


def enable(directory: Optional[str] = None, enabled: bool = True) -> Optional[str]:
    """Turns JAX's persistent compilation cache on (or off) for this process.

    Call it before anything is compiled: JAX sets its cache up on the first
    compilation.

    Args:
      directory: The cache directory (default: see the module docstring).
      enabled: False turns the cache off, even where JAX's own environment
        variable would turn it on.

    Returns:
      The directory in use, or None when the cache is off.

    Raises:
      ValueError: if the directory cannot be created.
    """
    import jax

    chosen = resolve_directory(directory) if enabled else None
    if chosen is None:
        jax.config.update("jax_enable_compilation_cache", False)
        logger.info("JAX's persistent compilation cache is off")
        return None
    try:
        os.makedirs(chosen, exist_ok=True)
    except OSError as error:
        raise ValueError(
            f"cannot create the compilation cache directory {chosen} ({error}); "
            "pass another with --compilation_cache DIR, or --no_compilation_cache"
        ) from error
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", chosen)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    logger.info("compiled programs are cached in %s", chosen)
    return chosen


def add_arguments(parser) -> None:
    """The `--compilation_cache` / `--no_compilation_cache` options of a command."""
    parser.add_argument(
        "--compilation_cache",
        default=None,
        metavar="DIR",
        help="Where compiled programs are kept for later runs (default: "
        f"${ENV_VAR}, else $JAX_COMPILATION_CACHE_DIR, else "
        "~/.cache/seahorse-metrics/jax).",
    )
    parser.add_argument(
        "--no_compilation_cache",
        action="store_true",
        help="Do not read or write compiled programs on disk.",
    )


def enable_from_args(args) -> Optional[str]:
    """`enable` as a command's parsed `add_arguments` options say."""
    return enable(
        getattr(args, "compilation_cache", None),
        enabled=not getattr(args, "no_compilation_cache", False),
    )
