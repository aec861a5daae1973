"""`seahorse-metrics train`: fine-tune a metric from gin files.

    seahorse-metrics train --gin_file=gin/runs/finetune_q4.gin \
        --gin.MODEL_DIR=runs/q4 --gin.DATA_DIR=prepared/ --gin.INIT_CHECKPOINT=mt5-large/

`--gin.NAME=VALUE` flags are gin bindings (T5X style); a VALUE that is no gin
literal is taken as a string. `--multihost` calls `jax.distributed.initialize`
first (cluster autodetection on SLURM and Cloud TPU, or the explicit
coordinator flags), as the scripts in launch/ do.
"""

from __future__ import annotations

import argparse
import logging
import sys

from seahorse_metrics import compilation_cache
from seahorse_metrics.cli.parsing import CommandParser

logger = logging.getLogger(__name__)

EXIT_DIVERGED = 3


class GinFlagParser(CommandParser):
    """An ArgumentParser that sets `gin_flag_bindings` from `--gin.NAME=VALUE` flags.

    Such flags cannot be declared to argparse (their names are open-ended),
    so they are taken out of the arguments before argparse reads the rest.
    """

    def parse_known_args(self, args=None, namespace=None):
        from seahorse_metrics.training.config import split_gin_flags  # pylint: disable=g-import-not-at-top

        bindings, rest = split_gin_flags(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(rest, namespace)
        namespace.gin_flag_bindings = (
            list(getattr(namespace, "gin_flag_bindings", None) or []) + bindings
        )
        return namespace, extras


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The train options, shared by the subcommand and `python -m seahorse_metrics.train`."""
    parser.add_argument(
        "--gin_file",
        action="append",
        default=[],
        required=True,
        help="Gin file (repeatable; later files override earlier ones), e.g. "
        "gin/runs/finetune.gin. Paths are tried in the working directory, then "
        "in the repository root.",
    )
    parser.add_argument(
        "--gin_bindings",
        action="append",
        default=[],
        help='A gin binding such as "TrainConfig.batch_size = 32" (repeatable). '
        "--gin.NAME=VALUE is the short form.",
    )
    compilation_cache.add_arguments(parser)
    parser.add_argument(
        "--multihost",
        action="store_true",
        help="Call jax.distributed.initialize() before training (one process per "
        "host or per accelerator; see launch/).",
    )
    parser.add_argument(
        "--coordinator_address",
        default=None,
        help="host:port of process 0 (multihost; default: autodetected).",
    )
    parser.add_argument(
        "--num_processes",
        type=int,
        default=None,
        help="Number of processes (multihost; default: autodetected).",
    )
    parser.add_argument(
        "--process_id",
        type=int,
        default=None,
        help="This process's index (multihost; default: autodetected).",
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="Fine-tune a metric (gin-configured; resumes from MODEL_DIR).",
        description=(
            "Fine-tunes one metric as the gin files say (T5X fine-tuning defaults: "
            "Adafactor, constant learning rate 1e-3, dropout 0.1). Checkpoints, the best "
            "checkpoint by validation ROC-AUC (MODEL_DIR/best), train_log.jsonl and "
            "TensorBoard events go to MODEL_DIR; re-running on the same MODEL_DIR resumes."
        ),
        epilog="Pass bindings as --gin.NAME=VALUE, e.g. --gin.MODEL_DIR=runs/q4 "
        "--gin.TASK=seahorse_q4.",
    )
    # Let the subcommand accept --gin.NAME=VALUE flags (see GinFlagParser).
    parser.__class__ = GinFlagParser
    add_arguments(parser)
    parser.set_defaults(func=run)


def _initialize_distributed(args: argparse.Namespace) -> None:
    import jax  # pylint: disable=g-import-not-at-top

    jax.distributed.initialize(
        coordinator_address=args.coordinator_address,
        num_processes=args.num_processes,
        process_id=args.process_id,
    )
    logger.info(
        "Process %d of %d; %d devices in all.",
        jax.process_index(),
        jax.process_count(),
        jax.device_count(),
    )


def run(args: argparse.Namespace) -> int:
    """Runs training as the parsed arguments say; returns the exit status."""
    if args.multihost:
        _initialize_distributed(args)
    compilation_cache.enable_from_args(args)
    from seahorse_metrics.training import trainer  # pylint: disable=g-import-not-at-top

    bindings = list(args.gin_bindings) + list(getattr(args, "gin_flag_bindings", []))
    try:
        result = trainer.train_from_gin(args.gin_file, bindings)
    except trainer.NonFiniteLossError as error:
        if getattr(args, "debug", False):
            raise
        print(f"error: {error}", file=sys.stderr)
        return EXIT_DIVERGED
    import jax  # pylint: disable=g-import-not-at-top

    if jax.process_index() == 0:
        print(result.summary)
    return 0
