"""`python -m seahorse_metrics.train`: the trainer entry point (same as `seahorse-metrics train`).

    python -m seahorse_metrics.train --gin_file=gin/runs/finetune.gin \
        --gin.MODEL_DIR=runs/q4 --gin.TASK=seahorse_q4 --gin.DATA_DIR=prepared/

The launch/ scripts call this module with `--multihost`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from seahorse_metrics.cli import logs, run_command
from seahorse_metrics.cli import train as train_cli
from seahorse_metrics.cli.parsing import long_flags


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = train_cli.GinFlagParser(
        prog="python -m seahorse_metrics.train",
        description=train_cli.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train_cli.add_arguments(parser)
    logs.add_arguments(parser)
    parser.add_argument(
        "--debug",
        action="store_true",
        help="On an error, show the Python traceback instead of one line.",
    )
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.verbose)
    return run_command(train_cli.run, args, flags=long_flags(parser))


if __name__ == "__main__":
    sys.exit(main())
