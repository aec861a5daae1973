"""The flags `score` and `serve` share: how pairs are scored, where the model
runs, and what each adds to a scored row (thresholds, calibration).

Each flag of how pairs are scored sets one `ScoringOptions` field through the
one table `scoring.options.OPTION_FLAGS` (`options_from_flags`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from seahorse_metrics import compilation_cache
from seahorse_metrics.scoring.batching import DEFAULT_BUCKET_LENGTHS, DEFAULT_MAX_BATCH_TOKENS


def _add_long_summaries(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--long_summaries",
        choices=("error", "cut"),
        default="error",
        help="A summary that leaves its article less than a quarter of "
        "--max_input_length (with summary_first truncation): the row gets "
        "an error (default), or the article keeps its quarter, the summary "
        "is cut and a summary_cut column flags the row (cut).",
    )


def add_scoring_options(parser, serving: bool = False) -> None:
    """How pairs are scored: the options `score` and `serve` share (`serving`:
    the options are the defaults of requests that do not say)."""
    parser.add_argument(
        "--vocab",
        default=None,
        help="SentencePiece model (default: spiece.model in the checkpoints).",
    )
    parser.add_argument(
        "--normalize",
        choices=("full", "pair"),
        default="full",
        help='P("1") over the full vocabulary (default) or over {0, 1}.',
    )
    _add_long_input_options(parser, serving)
    _add_sentence_options(parser, serving)
    _add_batch_options(parser, serving)


def _add_long_input_options(parser, serving: bool) -> None:
    """Inputs over --max_input_length: truncated, chunked, or refused."""
    parser.add_argument(
        "--truncation",
        choices=("summary_first", "joint"),
        default="summary_first",
        help="Shorten the article so the summary fits (default), or cut the "
        "whole input as the released checkpoints saw it.",
    )
    parser.add_argument(
        "--long_inputs",
        choices=("truncate", "chunk"),
        default="truncate",
        help=("Default of requests that do not say: " if serving else "")
        + "truncate long inputs (default) or score overlapping premise chunks "
        "and keep the max.",
    )
    _add_long_summaries(parser)
    parser.add_argument(
        "--chunk_overlap",
        type=int,
        default=128,
        help="Premise tokens shared by consecutive chunks (default 128).",
    )


def _add_sentence_options(parser, serving: bool) -> None:
    parser.add_argument(
        "--per_sentence",
        action="store_true",
        help=(
            "Score per sentence unless a request says otherwise."
            if serving
            else "Score each summary sentence; adds <column>_sentences."
        ),
    )
    parser.add_argument(
        "--sentence_aggregate",
        default="min",
        metavar="min|mean|share@T",
        help="Combine sentence scores with min (default), mean, or share@T: "
        "the share of sentences scored at or above T.",
    )


def _add_batch_options(parser, serving: bool) -> None:
    """The shapes of batches: input length, rows and tokens per batch, bucket lengths."""
    parser.add_argument(
        "--max_input_length",
        type=int,
        default=2048,
        help="Input tokens, EOS included (default 2048).",
    )
    parser.add_argument(
        "--batch_size", type=int, default=16, help="Most rows per batch (default 16)."
    )
    parser.add_argument(
        "--max_batch_tokens",
        type=int,
        default=DEFAULT_MAX_BATCH_TOKENS,
        help=f"Tokens per batch; long buckets get fewer rows (default {DEFAULT_MAX_BATCH_TOKENS}).",
    )
    parser.add_argument(
        "--buckets",
        default=None,
        metavar="L1,L2,...",
        help="Batch lengths (default "
        f"{','.join(map(str, DEFAULT_BUCKET_LENGTHS))} up to "
        "--max_input_length)"
        + ("; each is compiled before /healthz is ready." if serving else "."),
    )


def add_device_options(parser) -> None:
    """--engine, --dtype, --quantize, --scan_layers, --packing, --mesh and the
    compilation cache options."""
    _add_engine_options(parser)
    _add_precision_options(parser)
    _add_layout_options(parser)
    compilation_cache.add_arguments(parser)


def _add_engine_options(parser) -> None:
    parser.add_argument(
        "--engine",
        default="jax",
        choices=("jax", "ctranslate2"),
        help="The model call: jax (default; any device, --mesh, --dtype, "
        "--packing) or ctranslate2 (this machine's CPUs, float32 or "
        "--quantize int8 with CTranslate2's int8 kernels; the checkpoint is "
        "converted once into ~/.cache/seahorse-metrics/ctranslate2, or "
        "$SEAHORSE_METRICS_CTRANSLATE2_CACHE; pip install -e '.[cpu]').",
    )
    parser.add_argument(
        "--engine_option",
        action="append",
        type=engine_option,
        default=[],
        metavar="KEY=VALUE",
        help="An option of --engine ctranslate2, repeatable: threads, "
        "threads_per_batch, cache_dir, and for --quantize int8 "
        "int8_smoothing (0 turns the smoothing off), smoothing_data "
        "(JSON-lines pairs to calibrate it on), smoothing_pairs.",
    )


def _add_precision_options(parser) -> None:
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "bfloat16"),
        help="Parameter and compute dtype (default float32). bfloat16 loads the "
        "weights in half the memory; norms, softmax and logits stay "
        "float32. Slower on CPUs.",
    )
    parser.add_argument(
        "--quantize",
        default=None,
        choices=("int8",),
        help="int8: int8 attention and feed-forward weights (products in "
        "bfloat16 where the CPU has AVX512-BF16, else float32); scores "
        "rank as float32's but are not equal to them.",
    )
    parser.add_argument(
        "--int8_check",
        default="on",
        choices=("on", "off"),
        help="With --quantize int8: score a probe of 96 pairs in float32 and "
        "int8 once per checkpoint, engine and CPU (kept in "
        "~/.cache/seahorse-metrics/int8_checks), record the agreement in "
        "meta.json and warn when ranks move (default on).",
    )
    parser.add_argument(
        "--int8_min_spearman",
        type=float,
        default=None,
        metavar="R",
        help="With --quantize int8: refuse to score when the probe's int8 "
        "scores rank below Spearman R against float32 on this host.",
    )


def _add_layout_options(parser) -> None:
    """How the model is laid out on the devices: scanned layers, packed rows, mesh, CPU devices."""
    parser.add_argument(
        "--scan_layers",
        action="store_true",
        help="Run each stack's layers under nn.scan (one compiled layer): a "
        "deep metric compiles several times faster, same scores to float "
        "rounding (jax engine).",
    )
    parser.add_argument(
        "--packing",
        action="store_true",
        help="Pack short inputs into other rows' padding (same scores to float "
        "rounding; pays off with few or coarse --buckets).",
    )
    parser.add_argument(
        "--mesh",
        default=None,
        type=mesh_spec,
        metavar="data=D,model=M",
        help="Device mesh: batches are split over data, parameters over model "
        "(the trainer's rules), e.g. --mesh model=4 for a metric too big "
        "for one device (default: every local device on data).",
    )
    parser.add_argument(
        "--cpu_devices",
        type=int,
        default=None,
        metavar="N",
        help="Where JAX runs on CPUs: present them as N devices that score "
        "parts of each batch side by side (the jax engine; each holds its "
        "own copy of the weights). mT5-small float32 scoring ran 1.0-1.1x "
        "faster with 2 on a 2-core CPU. Default: as XLA_FLAGS says (one).",
    )


def split_cpu(args) -> None:
    """`--cpu_devices`, before anything starts JAX's backends."""
    if args.cpu_devices is None:
        return
    if args.engine != "jax":
        raise ValueError(
            "--cpu_devices is the jax engine's; ctranslate2 runs batches side by "
            "side by itself (--engine_option threads_per_batch=N)"
        )
    if getattr(args, "runner", None):
        raise ValueError(
            "--cpu_devices is for scoring in this process; a Beam worker scores on "
            "its own devices (drop --cpu_devices, or score without --runner)"
        )
    from seahorse_metrics.model.partitioning import split_host_cpu

    split_host_cpu(args.cpu_devices)


def engine_option(text: str) -> tuple[str, Any]:
    """argparse type of --engine_option: KEY=VALUE, the value read as JSON
    when it is JSON (numbers, true/false) and as a string otherwise."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def mesh_spec(text: str) -> str:
    """argparse type of --mesh (and `plan --mesh`): checks `data=D,model=M`."""
    from seahorse_metrics.model.partitioning import parse_mesh_spec

    try:
        parse_mesh_spec(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text
