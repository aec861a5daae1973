"""`seahorse-metrics export`: write a checkpoint as a Hugging Face or T5X directory."""

from __future__ import annotations

import argparse
import logging

logger = logging.getLogger(__name__)

_EPILOG = """\
hf:  config.json + model.safetensors + spiece.model, loaded by transformers'
     MT5ForConditionalGeneration (T5ForConditionalGeneration for T5 v1.0 models).
t5x: a T5X model directory, checkpoint_<step>/ (msgpack + TensorStore zarr arrays,
     no optimizer state) + spiece.model, read by T5X's checkpoints.load_t5x_checkpoint.

The output is written atomically (staged beside it in .NAME.export-XXXXXX/, then
renamed); SIGTERM or Ctrl-C removes the staging directory, and the next export to
the same output removes those a killed export left (and says so). Each export
writes a marker, seahorse_export.json; --overwrite replaces only such a previous
export holding nothing else, never other files, the current directory or its
parents.

examples:
  seahorse-metrics export --checkpoint runs/q4/best --to hf --output exported/q4-hf
  seahorse-metrics export --checkpoint runs/q4 --to t5x --output exported/q4-t5x
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="Export a checkpoint to a Hugging Face or T5X directory.",
        description="Writes any checkpoint `score` reads (ours, Hugging Face, T5X, a hub id) "
        "in the Hugging Face or T5X format; MODEL_DIR means MODEL_DIR/best.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        metavar="DIR",
        help="Checkpoint directory or hub id (a training run's MODEL_DIR exports MODEL_DIR/best).",
    )
    parser.add_argument("--to", required=True, choices=("hf", "t5x"), help="Output format.")
    parser.add_argument("--output", required=True, metavar="DIR", help="Directory to write.")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="Replace a previous export in the output directory (one that holds "
        "seahorse_export.json and only the files it lists).",
    )
    parser.add_argument(
        "--vocab",
        default=None,
        help="SentencePiece model to include (default: the checkpoint's spiece.model).",
    )
    parser.add_argument(
        "--step",
        type=int,
        default=None,
        help="T5X step directory number (default: the checkpoint's recorded step, else 1).",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from seahorse_metrics.checkpoints.export import export_checkpoint

    summary = export_checkpoint(
        args.checkpoint,
        args.to,
        args.output,
        overwrite=args.overwrite,
        vocab=args.vocab,
        step=args.step,
    )
    for path in summary["removed"]:
        print(f"removed {path} (left by an interrupted export)")
    print(f"wrote {summary['output']} ({args.to}: {', '.join(summary['files'])})")
    return 0
