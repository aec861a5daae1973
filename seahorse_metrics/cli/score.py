"""`seahorse-metrics score`: score a JSONL/CSV/TSV file with one or more metrics."""

from __future__ import annotations

import argparse
import logging
import os

from seahorse_metrics import compilation_cache
from seahorse_metrics.cli import flags
from seahorse_metrics.scoring.batching import DEFAULT_WINDOW_SIZE
from seahorse_metrics.scoring.options import options_from_flags

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
BEAM_RUNNERS = {
    "DirectRunner": "FnApiRunner",
    "PrismRunner": "PrismRunner",
    "DataflowRunner": "DataflowRunner",
    "FlinkRunner": "FlinkRunner",
    "SparkRunner": "SparkRunner",
}


def _add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """The input and output files and how the input is read."""
    parser.add_argument(
        "--input",
        required=True,
        action="append",
        help="JSONL, JSON, CSV or TSV file (.gz: gzipped), or - for standard "
        "input (kept as OUTPUT.stdin.<format>); with --runner repeatable, "
        "and globs.",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="JSONL, JSON, CSV or TSV file to write (format from the extension; "
        ".gz: gzipped), or - for standard output in the input's format.",
    )
    parser.add_argument(
        "--premise_field", default="article", help="Column of the article (default: article)."
    )
    parser.add_argument(
        "--hypothesis_field", default="summary", help="Column of the summary (default: summary)."
    )
    parser.add_argument(
        "--encoding",
        default="utf-8",
        help="Text encoding of the input (default utf-8; a byte order mark is "
        "accepted), e.g. latin-1 or cp1252.",
    )
    parser.add_argument(
        "--quoting",
        choices=("auto", "none", "quoted"),
        default="auto",
        help="CSV/TSV quoting: detect (default; CSV is always quoted), none "
        "(split on the delimiter only), or quoted (fields in double quotes).",
    )
    parser.add_argument(
        "--lang_field",
        default="lang",
        help="Column of the language code, for truncation counts (default: lang).",
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "score",
        help="Score summaries in a JSONL/CSV/TSV file with one or more metrics.",
        description='Adds a P("1") score column per checkpoint to every row of the input.',
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        action="append",
        required=True,
        metavar="[NAME=]DIR",
        help="Metric checkpoint directory or hub id (repeatable).",
    )
    _add_file_arguments(parser)
    _add_question_and_threshold(parser)
    flags.add_scoring_options(parser)
    parser.add_argument(
        "--window_size",
        type=int,
        default=DEFAULT_WINDOW_SIZE,
        help=f"Rows sorted by length together (default {DEFAULT_WINDOW_SIZE}).",
    )
    flags.add_device_options(parser)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="Start over: discard a partial run or an existing output.",
    )
    parser.add_argument("--no_progress", action="store_true", help="No progress bar.")
    parser.passes_unknown_after = "--runner"  # Beam's pipeline options
    beam = parser.add_argument_group("Apache Beam (pip install -e '.[beam]')")
    beam.add_argument(
        "--runner",
        choices=sorted(BEAM_RUNNERS),
        default=None,
        help="Score with a Beam pipeline on this runner (default: in this "
        "process); unknown options are passed to Beam.",
    )
    beam.add_argument(
        "--merge",
        action="store_true",
        help="With --runner: also write OUTPUT, every row in input order "
        "(rerun with --merge to merge a finished run).",
    )
    beam.add_argument(
        "--id_field",
        default=None,
        help="With --runner: the input's id field; default: a row_id field "
        "(file:line) is added to every row.",
    )
    parser.set_defaults(func=run)


def _add_question_and_threshold(parser) -> None:
    parser.add_argument(
        "--question_field",
        default=None,
        help="Column of the question a query-focused summary answers "
        "(default: none; when given, every row needs one).",
    )
    parser.add_argument(
        "--threshold",
        default=None,
        metavar="T|FILE",
        help="Decision threshold (a number for every metric, or a thresholds "
        "file from `evaluate --tune_threshold_on`, by metric name): adds "
        "a yes/no <column>_decision column.",
    )
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="Calibration maps from `evaluate --calibrate_on` (calibration.json "
        "or report.json), by metric name: adds <column>_calibrated.",
    )


def input_fields(args) -> dict:
    """The input fields the command line names (`job.InputFields.of`)."""
    return {
        "premise": args.premise_field,
        "hypothesis": args.hypothesis_field,
        "lang": args.lang_field,
        "question": args.question_field,
    }


def run(args) -> int:
    flags.split_cpu(args)
    compilation_cache.enable_from_args(args)
    if args.runner:
        if "-" in args.input or args.output == "-":
            raise ValueError(
                "--input - and --output - (standard input and output) are for "
                "scoring in this process; drop --runner, or give files"
            )
        return run_beam(args)
    if len(args.input) > 1 or args.merge or args.id_field or getattr(args, "pipeline_args", None):
        raise ValueError(
            "several --input files, --merge, --id_field and Beam options need "
            "--runner (the Beam pipeline); without it, score one file"
        )
    if args.output == "-":
        return _score_to_stdout(args)
    return _score_file(args, _input_file(args.input[0], args.output), args.output)


def _input_file(path: str, output: str) -> str:
    """The input table: `path`, or standard input saved beside `output` for `-`."""
    import sys

    from seahorse_metrics.scoring import streams

    if path == "-":
        path = streams.save_stdin(output, sys.stdin.buffer)
        logger.info("standard input saved as %s (kept: the same command resumes from it)", path)
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
    from seahorse_metrics.scoring.files import score_table

    score_table(
        args.checkpoint,
        input_path,
        output,
        options=options_from_flags(args),
        fields=input_fields(args),
        threshold=args.threshold,
        calibration=args.calibration,
        mesh=args.mesh,
        encoding=args.encoding,
        quoting=args.quoting,
        overwrite=args.overwrite,
        show_progress=False if args.no_progress else None,
    )
    return 0


def run_beam(args) -> int:
    """`score --runner ...`: the Beam pipeline (`seahorse_metrics.scoring.beam`)."""
    try:
        from seahorse_metrics.scoring import beam as beam_scoring
    except ImportError as error:
        raise ValueError(
            f"--runner needs Apache Beam ({error}); pip install -e '.[beam]'"
        ) from None
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # Beam logs several INFO lines per bundle and worker; ours say what happens.
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
    if args.mesh:
        raise ValueError(
            "--mesh is for scoring in this process; a Beam worker scores on its "
            "own devices (drop --mesh, or score without --runner)"
        )
    beam_scoring.score_files(
        args.input,
        args.output,
        args.checkpoint,
        scorer_options=options_from_flags(args),
        fields=input_fields(args),
        id_field=args.id_field,
        pipeline_args=[f"--runner={BEAM_RUNNERS[args.runner]}", *args.pipeline_args],
        thresholds=args.threshold,
        calibration=args.calibration,
        encoding=args.encoding,
        quoting=args.quoting,
        merge=args.merge,
        overwrite=args.overwrite,
        show_progress=False if args.no_progress else None,
        finish=True,
    )
    return 0
