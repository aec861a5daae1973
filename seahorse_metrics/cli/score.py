"""`seahorse-metrics score`: score a JSONL/CSV/TSV file with one or more metrics."""
from __future__ import annotations

import argparse
import json
import logging
import os
from typing import Any

from seahorse_metrics import compilation_cache
from seahorse_metrics.scoring.job import (InputFields, check_output_path,
                                          raise_if_nothing_scored, resolve_job)
from seahorse_metrics.scoring.options import ScoringOptions, options_from_flags
from seahorse_metrics.scoring.batching import (DEFAULT_BUCKET_LENGTHS, DEFAULT_MAX_BATCH_TOKENS,
                                               DEFAULT_WINDOW_SIZE)

logger = logging.getLogger(__name__)

_EPILOG = """\
checkpoints (repeatable): [NAME=]DIR, any format (ours, Hugging Face, T5X), or a
Hugging Face hub id (google/seahorse-xxl-q4, read from the hub cache; set
HF_HUB_OFFLINE=1 to never touch the network). The output column is NAME, or
`score` for a single unnamed checkpoint, or `score_<dir name>` for several.

Query-focused summaries: --question_field names the column with each
summary's question; the input then reads `question: Q premise: P hypothesis: H`
(or the checkpoint's seahorse_inputs.json template).

--threshold T (a number, or a thresholds.json/report.json written by
`evaluate --tune_threshold_on`) adds a <column>_decision column: yes when the
score is at or above the metric's threshold, else no.

--calibration FILE (a calibration.json or report.json written by `evaluate
--calibrate_on`) adds <column>_calibrated: the metric's calibration map applied
to its score. The file must hold a map for every metric scored and no other.

The run is resumable: finished batches go to OUTPUT.partial.jsonl; rerun the
same command after an interruption and it continues. The output keeps the
input rows and order; bad rows get an `error` column (input columns named
like an output column are kept as input_<name>). Settings and counts go to
OUTPUT.meta.json. A run where no row could be scored exits with status 2.

A TSV is read unquoted (one line per row, as the SEAHORSE release) unless
quotes are detected or --quoting quoted is given; CSV is read quoted.

example:
  seahorse-metrics score --checkpoint q4=runs/q4/best --checkpoint q6=runs/q6/best \\
      --input data/prepared/test.jsonl --output scores/test.jsonl

With --runner, an Apache Beam pipeline scores one or more inputs (files or
globs, --input repeatable) on that runner's workers; options the command does
not know are Beam pipeline options. One shard per window of rows goes to
OUTPUT.shards/ (each row with a row_id, file:line), counts to OUTPUT.meta.json,
and --merge writes OUTPUT in input order. A failed run resumes when rerun.
  seahorse-metrics score --checkpoint q4=runs/q4/best --input 'data/part-*.jsonl' \\
      --output scores/all.jsonl --merge --runner DirectRunner \\
      --direct_num_workers=2 --direct_running_mode=multi_processing
"""

# `--runner` -> Beam's runner. Beam's own DirectRunner first tries to download
# and run Prism, where the --direct_* options do not apply; ours is the Python
# direct runner it otherwise runs (in one process, or in
# --direct_num_workers=N processes with --direct_running_mode=multi_processing).
BEAM_RUNNERS = {"DirectRunner": "FnApiRunner", "PrismRunner": "PrismRunner",
                "DataflowRunner": "DataflowRunner", "FlinkRunner": "FlinkRunner",
                "SparkRunner": "SparkRunner"}


def _add_long_summaries(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--long_summaries", choices=("error", "cut"), default="error",
                        help="A summary that leaves its article less than a quarter of "
                             "--max_input_length (with summary_first truncation): the row gets "
                             "an error (default), or the article keeps its quarter, the summary "
                             "is cut and a summary_cut column flags the row (cut).")


def add_scoring_options(parser, serving: bool = False) -> None:
    """How pairs are scored: the options `score` and `serve` share (`serving`:
    the options are the defaults of requests that do not say)."""
    parser.add_argument("--vocab", default=None,
                        help="SentencePiece model (default: spiece.model in the checkpoints).")
    parser.add_argument("--normalize", choices=("full", "pair"), default="full",
                        help="P(\"1\") over the full vocabulary (default) or over {0, 1}.")
    parser.add_argument("--truncation", choices=("summary_first", "joint"),
                        default="summary_first",
                        help="Shorten the article so the summary fits (default), or cut the "
                             "whole input as the released checkpoints saw it.")
    parser.add_argument("--long_inputs", choices=("truncate", "chunk"), default="truncate",
                        help=("Default of requests that do not say: " if serving else "")
                        + "truncate long inputs (default) or score overlapping premise chunks "
                          "and keep the max.")
    _add_long_summaries(parser)
    parser.add_argument("--chunk_overlap", type=int, default=128,
                        help="Premise tokens shared by consecutive chunks (default 128).")
    parser.add_argument("--per_sentence", action="store_true",
                        help=("Score per sentence unless a request says otherwise." if serving
                              else "Score each summary sentence; adds <column>_sentences."))
    parser.add_argument("--sentence_aggregate", default="min", metavar="min|mean|share@T",
                        help="Combine sentence scores with min (default), mean, or share@T: "
                             "the share of sentences scored at or above T.")
    parser.add_argument("--max_input_length", type=int, default=2048,
                        help="Input tokens, EOS included (default 2048).")
    parser.add_argument("--batch_size", type=int, default=16,
                        help="Most rows per batch (default 16).")
    parser.add_argument("--max_batch_tokens", type=int, default=DEFAULT_MAX_BATCH_TOKENS,
                        help="Tokens per batch; long buckets get fewer rows "
                             f"(default {DEFAULT_MAX_BATCH_TOKENS}).")
    parser.add_argument("--buckets", default=None, metavar="L1,L2,...",
                        help="Batch lengths (default "
                             f"{','.join(map(str, DEFAULT_BUCKET_LENGTHS))} up to "
                             "--max_input_length)"
                             + ("; each is compiled before /healthz is ready." if serving
                                else "."))


def _add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """The input and output files and how the input is read."""
    parser.add_argument("--input", required=True, action="append",
                        help="JSONL, JSON, CSV or TSV file (.gz: gzipped), or - for standard "
                             "input (kept as OUTPUT.stdin.<format>); with --runner repeatable, "
                             "and globs.")
    parser.add_argument("--output", required=True,
                        help="JSONL, JSON, CSV or TSV file to write (format from the extension; "
                             ".gz: gzipped), or - for standard output in the input's format.")
    parser.add_argument("--premise_field", default="article",
                        help="Column of the article (default: article).")
    parser.add_argument("--hypothesis_field", default="summary",
                        help="Column of the summary (default: summary).")
    parser.add_argument("--encoding", default="utf-8",
                        help="Text encoding of the input (default utf-8; a byte order mark is "
                             "accepted), e.g. latin-1 or cp1252.")
    parser.add_argument("--quoting", choices=("auto", "none", "quoted"), default="auto",
                        help="CSV/TSV quoting: detect (default; CSV is always quoted), none "
                             "(split on the delimiter only), or quoted (fields in double quotes).")
    parser.add_argument("--lang_field", default="lang",
                        help="Column of the language code, for truncation counts (default: lang).")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "score",
        help="Score summaries in a JSONL/CSV/TSV file with one or more metrics.",
        description="Adds a P(\"1\") score column per checkpoint to every row of the input.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--checkpoint", action="append", required=True, metavar="[NAME=]DIR",
                        help="Metric checkpoint directory or hub id (repeatable).")
    _add_file_arguments(parser)
    _add_question_and_threshold(parser)
    add_scoring_options(parser)
    parser.add_argument("--window_size", type=int, default=DEFAULT_WINDOW_SIZE,
                        help=f"Rows sorted by length together (default {DEFAULT_WINDOW_SIZE}).")
    _add_device_options(parser)
    parser.add_argument("--overwrite", action="store_true",
                        help="Start over: discard a partial run or an existing output.")
    parser.add_argument("--no_progress", action="store_true", help="No progress bar.")
    parser.passes_unknown_after = "--runner"  # Beam's pipeline options
    beam = parser.add_argument_group("Apache Beam (pip install -e '.[beam]')")
    beam.add_argument("--runner", choices=sorted(BEAM_RUNNERS), default=None,
                      help="Score with a Beam pipeline on this runner (default: in this "
                           "process); unknown options are passed to Beam.")
    beam.add_argument("--merge", action="store_true",
                      help="With --runner: also write OUTPUT, every row in input order "
                           "(rerun with --merge to merge a finished run).")
    beam.add_argument("--id_field", default=None,
                      help="With --runner: the input's id field; default: a row_id field "
                           "(file:line) is added to every row.")
    parser.set_defaults(func=run)


def _add_question_and_threshold(parser) -> None:
    parser.add_argument("--question_field", default=None,
                        help="Column of the question a query-focused summary answers "
                             "(default: none; when given, every row needs one).")
    parser.add_argument("--threshold", default=None, metavar="T|FILE",
                        help="Decision threshold (a number for every metric, or a thresholds "
                             "file from `evaluate --tune_threshold_on`, by metric name): adds "
                             "a yes/no <column>_decision column.")
    parser.add_argument("--calibration", default=None, metavar="FILE",
                        help="Calibration maps from `evaluate --calibrate_on` (calibration.json "
                             "or report.json), by metric name: adds <column>_calibrated.")


def _add_device_options(parser) -> None:
    """--engine, --dtype, --quantize, --scan_layers, --packing, --mesh and the
    compilation cache options."""
    parser.add_argument("--engine", default="jax", choices=("jax", "ctranslate2"),
                        help="The model call: jax (default; any device, --mesh, --dtype, "
                             "--packing) or ctranslate2 (this machine's CPUs, float32 or "
                             "--quantize int8 with CTranslate2's int8 kernels; the checkpoint is "
                             "converted once into ~/.cache/seahorse-metrics/ctranslate2, or "
                             "$SEAHORSE_METRICS_CTRANSLATE2_CACHE; pip install -e '.[cpu]').")
    parser.add_argument("--engine_option", action="append", type=engine_option, default=[],
                        metavar="KEY=VALUE",
                        help="An option of --engine ctranslate2, repeatable: threads, "
                             "threads_per_batch, cache_dir, and for --quantize int8 "
                             "int8_smoothing (0 turns the smoothing off), smoothing_data "
                             "(JSON-lines pairs to calibrate it on), smoothing_pairs.")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="Parameter and compute dtype (default float32). bfloat16 loads the "
                             "weights in half the memory; norms, softmax and logits stay "
                             "float32. Slower on CPUs.")
    parser.add_argument("--quantize", default=None, choices=("int8",),
                        help="int8: int8 attention and feed-forward weights (products in "
                             "bfloat16 where the CPU has AVX512-BF16, else float32); scores "
                             "rank as float32's but are not equal to them.")
    parser.add_argument("--int8_check", default="on", choices=("on", "off"),
                        help="With --quantize int8: score a probe of 96 pairs in float32 and "
                             "int8 once per checkpoint, engine and CPU (kept in "
                             "~/.cache/seahorse-metrics/int8_checks), record the agreement in "
                             "meta.json and warn when ranks move (default on).")
    parser.add_argument("--int8_min_spearman", type=float, default=None, metavar="R",
                        help="With --quantize int8: refuse to score when the probe's int8 "
                             "scores rank below Spearman R against float32 on this host.")
    parser.add_argument("--scan_layers", action="store_true",
                        help="Run each stack's layers under nn.scan (one compiled layer): a "
                             "deep metric compiles several times faster, same scores to float "
                             "rounding (jax engine).")
    parser.add_argument("--packing", action="store_true",
                        help="Pack short inputs into other rows' padding (same scores to float "
                             "rounding; pays off with few or coarse --buckets).")
    parser.add_argument("--mesh", default=None, type=mesh_spec, metavar="data=D,model=M",
                        help="Device mesh: batches are split over data, parameters over model "
                             "(the trainer's rules), e.g. --mesh model=4 for a metric too big "
                             "for one device (default: every local device on data).")
    parser.add_argument("--cpu_devices", type=int, default=None, metavar="N",
                        help="Where JAX runs on CPUs: present them as N devices that score "
                             "parts of each batch side by side (the jax engine; each holds its "
                             "own copy of the weights). mT5-small float32 scoring ran 1.0-1.1x "
                             "faster with 2 on a 2-core CPU. Default: as XLA_FLAGS says (one).")
    compilation_cache.add_arguments(parser)


def split_cpu(args) -> None:
    """`--cpu_devices`, before anything starts JAX's backends."""
    if args.cpu_devices is None:
        return
    if args.engine != "jax":
        raise ValueError("--cpu_devices is the jax engine's; ctranslate2 runs batches side by "
                         "side by itself (--engine_option threads_per_batch=N)")
    if getattr(args, "runner", None):
        raise ValueError("--cpu_devices is for scoring in this process; a Beam worker scores on "
                         "its own devices (drop --cpu_devices, or score without --runner)")
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


def calibration_maps(path: str | None, names: list[str]) -> dict:
    """Metric name (= output column) -> calibration map from `--calibration`."""
    if path is None:
        return {}
    from seahorse_metrics.calibration.maps import maps_for

    return maps_for(path, names)


def scorer_options(args) -> ScoringOptions:
    """The scoring options the command line sets (bar the checkpoints and mesh),
    through the one table of flags (`scoring.options.OPTION_FLAGS`)."""
    return options_from_flags(args)


def input_fields(args) -> InputFields:
    """The input fields the command line names."""
    return InputFields(args.premise_field, args.hypothesis_field, args.lang_field,
                       args.question_field)


def _mesh(args):
    """The `--mesh` device mesh, or None (every local device on data)."""
    if not args.mesh:
        return None
    import jax
    from seahorse_metrics.model.partitioning import mesh_from_spec

    mesh = mesh_from_spec(args.mesh, jax.local_devices())
    logger.info("scoring on a %s mesh", dict(mesh.shape))
    return mesh


def run(args) -> int:
    split_cpu(args)
    compilation_cache.enable_from_args(args)
    if args.runner:
        if "-" in args.input or args.output == "-":
            raise ValueError("--input - and --output - (standard input and output) are for "
                             "scoring in this process; drop --runner, or give files")
        return run_beam(args)
    if len(args.input) > 1 or args.merge or args.id_field or getattr(args, "pipeline_args", None):
        raise ValueError("several --input files, --merge, --id_field and Beam options need "
                         "--runner (the Beam pipeline); without it, score one file")
    if args.output == "-":
        return _score_to_stdout(args)
    return _score_file(args, _input_file(args.input[0], args.output), args.output)


def _input_file(path: str, output: str) -> str:
    """The input table: `path`, or standard input saved beside `output` for `-`."""
    import sys

    from seahorse_metrics.data import tables
    from seahorse_metrics.scoring import streams

    if path == "-":
        path = streams.save_stdin(output, sys.stdin.buffer)
        logger.info("standard input saved as %s (kept: the same command resumes from it)", path)
    tables.check_table_file(path, "--input")
    return path


def _score_to_stdout(args) -> int:
    """`--output -`: scores into a temporary file, then copies it to standard output."""
    import sys
    import tempfile

    from seahorse_metrics.scoring import streams

    with tempfile.TemporaryDirectory(prefix="seahorse-score-") as folder:
        input_path = _input_file(args.input[0], os.path.join(folder, "input"))
        output = os.path.join(folder, f"scores.{streams.stdout_kind(input_path)}")
        status = _score_file(args, input_path, output)
        streams.copy_to(output, sys.stdout.buffer)
    return status


def _score_file(args, input_path: str, output: str) -> int:
    """Scores the table `input_path` into `output` as the arguments say."""
    from seahorse_metrics.scoring.files import score_job
    from seahorse_metrics.scoring.scorer import MultiScorer

    check_output_path(input_path, output)
    from seahorse_metrics.checkpoints.layout import checkpoint_names

    from seahorse_metrics.calibration.thresholds import read_decision_thresholds

    named = checkpoint_names(args.checkpoint)
    thresholds = read_decision_thresholds(args.threshold, list(named))
    calibration = calibration_maps(args.calibration, list(named))
    scorer = MultiScorer.load(named, options=scorer_options(args), mesh=_mesh(args))
    job = resolve_job([input_path], output, scorer.checkpoints, options=scorer.options,
                      fields=input_fields(args), thresholds=thresholds, calibration=calibration,
                      encoding=args.encoding, quoting=args.quoting)
    summary = score_job(scorer, job, overwrite=args.overwrite,
                        show_progress=False if args.no_progress else None)
    raise_if_nothing_scored(summary)
    rows = summary["rows"]
    logger.info("wrote %s (%d rows, %d bad; settings in %s.meta.json)", output,
                rows["rows"], rows["bad"], output)
    log_signatures(summary["settings"], job.columns)
    return 0


def log_signatures(settings: dict, columns: dict) -> None:
    """One line per output column: the signature of its scores (`scoring.signature`)."""
    for name, signature in (settings.get("signatures") or {}).items():
        logger.info("signature %s: %s", columns.get(name, name), signature)


def run_beam(args) -> int:
    """`score --runner ...`: the Beam pipeline (`seahorse_metrics.scoring.beam`)."""
    try:
        from seahorse_metrics.scoring import beam as beam_scoring
    except ImportError as error:
        raise ValueError(f"--runner needs Apache Beam ({error}); pip install -e '.[beam]'") \
            from None
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # Beam logs several INFO lines per bundle and worker; ours say what happens.
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
    if args.mesh:
        raise ValueError("--mesh is for scoring in this process; a Beam worker scores on its "
                         "own devices (drop --mesh, or score without --runner)")
    pipeline_args = [f"--runner={BEAM_RUNNERS[args.runner]}", *args.pipeline_args]
    from seahorse_metrics.calibration.thresholds import read_decision_thresholds
    from seahorse_metrics.checkpoints.layout import checkpoint_names

    named = checkpoint_names(args.checkpoint)
    meta = beam_scoring.score_files(
        args.input, args.output, named, scorer_options=scorer_options(args),
        fields=input_fields(args), id_field=args.id_field, pipeline_args=pipeline_args,
        thresholds=read_decision_thresholds(args.threshold, list(named)),
        calibration=calibration_maps(args.calibration, list(named)), encoding=args.encoding,
        quoting=args.quoting, merge=args.merge, overwrite=args.overwrite,
        show_progress=False if args.no_progress else None)
    raise_if_nothing_scored(meta)  # As without --runner: a run that scored nothing fails.
    log_signatures(meta.get("settings") or {}, meta.get("columns") or {})
    rows = meta["rows"]
    logger.info("scored %d rows (%d bad) into %s%s; settings and counts in %s", rows["rows"],
                rows["bad"], meta["shards"], f" and {meta['merged']}" if meta.get("merged") else "",
                args.output + ".meta.json")
    return 0
