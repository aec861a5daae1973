"""`seahorse-metrics serve`: the metrics as an HTTP service (`seahorse_metrics.serving`)."""

from __future__ import annotations

import argparse

from seahorse_metrics.cli.flags import add_device_options, add_scoring_options, split_cpu
from seahorse_metrics.scoring.batching import DEFAULT_WINDOW_SIZE
from seahorse_metrics.scoring.options import options_from_flags
from seahorse_metrics.serving.server import LoadFailed

_EPILOG = """\
Scores what `score` scores, with the same options, numbers and columns, for
programs that call a metric over HTTP (a reward in an RL loop, evaluation
during training, an annotation tool) and for people (GET / is a page to try
it). Needs the serve extra: pip install -e '.[serve]'.

  POST /v1/score  {"pairs": [{"article": "...", "summary": "...", "question"?: "...",
                  "id"?: ...}], "metrics"?: [...], "long_inputs"?: "truncate"|"chunk",
                  "per_sentence"?: true|false}
                  -> {"metrics": [...], "results": [{"id", "<metric>", "<metric>_decision"?,
                  "<metric>_sentences"?, "sentences"?, "truncated", "chunked"} or
                  {"id", "error"}, ...], "truncated": N, "errors": N, ...}
  GET /healthz    200 once the metrics are loaded and compiled, 503 before
  GET /metrics    Prometheus text
  GET /           a page: paste an article and a summary, see the scores

Concurrent requests are merged into the scorer's length-bucketed batches: a
window closes at --max_batch_pairs pairs or --max_wait_ms after its first
request. Over --max_request_pairs pairs: 413; a body over --max_body_bytes:
413; a full queue (--max_queue pairs): 503 with Retry-After; not scored in
--request_timeout_s: 504; a malformed request: 400 naming the field and the
pair; a pair with a missing or blank text: its `error`, as in `score`.
A connection has --header_timeout_s to send its headers and then
--body_timeout_s for the body (then 408 and closed); beyond --max_connections
open at once, a new one closes the connection idle longest (503 when all are
busy), so silent connections cannot lock clients out.

Token: --token_file FILE (its first line) or SEAHORSE_METRICS_TOKEN. With a
token, /v1/score and /metrics need `Authorization: Bearer <token>` (/ and
/healthz stay open). Without one, the server answers only on loopback: on
any other --host (e.g. 0.0.0.0) it refuses every request with 401.

SIGTERM or SIGINT: stop accepting, answer every request in flight, exit 0.

example:
  seahorse-metrics serve --checkpoint q4=runs/q4/best --port 8080
  curl -s localhost:8080/v1/score -H 'Content-Type: application/json' \\
      -d '{"pairs": [{"article": "...", "summary": "..."}]}'
"""

# Loading failures are reported in one line like other user errors.
USER_ERRORS = (LoadFailed,)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="Serve metrics over HTTP (scores, a page, Prometheus metrics).",
        description="Serves one or more metric checkpoints over HTTP with dynamic batching.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        action="append",
        required=True,
        metavar="[NAME=]DIR",
        help="Metric checkpoint directory or hub id (repeatable); NAME is the "
        "metric's field in the responses.",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="Address to listen on (default 127.0.0.1, loopback only).",
    )
    parser.add_argument("--port", type=int, default=8080, help="Port (default 8080).")
    parser.add_argument(
        "--token_file",
        default=None,
        help="File whose first line is the bearer token (default: "
        "SEAHORSE_METRICS_TOKEN, else no token).",
    )
    parser.add_argument(
        "--threshold",
        default=None,
        metavar="T|FILE",
        help="Decision threshold (a number, or a thresholds file from "
        "`evaluate --tune_threshold_on`): adds <metric>_decision.",
    )
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="Calibration maps from `evaluate --calibrate_on` (one per metric "
        "served): adds <metric>_calibrated, as `score --calibration`.",
    )
    _add_limits(parser)
    _add_scoring_options(parser)
    add_device_options(parser)
    parser.set_defaults(func=run)


def _add_limits(parser) -> None:
    limits = parser.add_argument_group("limits and batching")
    limits.add_argument(
        "--max_request_pairs",
        type=int,
        default=256,
        help="Most pairs per request; more get 413 (default 256).",
    )
    limits.add_argument(
        "--max_body_bytes",
        type=int,
        default=16 * 1024 * 1024,
        help="Most bytes per request body; more get 413 (default 16 MiB).",
    )
    limits.add_argument(
        "--max_queue",
        type=int,
        default=4096,
        help="Most pairs waiting to be scored; a request that does not fit "
        "gets 503 with Retry-After (default 4096).",
    )
    limits.add_argument(
        "--max_batch_pairs",
        type=int,
        default=64,
        help="Pairs at which a merged window of requests is full (default 64).",
    )
    limits.add_argument(
        "--max_wait_ms",
        type=float,
        default=5.0,
        help="Longest a window waits for more requests (default 5 ms).",
    )
    limits.add_argument(
        "--request_timeout_s",
        type=float,
        default=60.0,
        help="Longest a request waits for its scores; then 504 (default 60).",
    )
    limits.add_argument(
        "--header_timeout_s",
        type=float,
        default=10.0,
        help="Longest a connection takes to send a request's headers; then "
        "408 and closed (default 10).",
    )
    limits.add_argument(
        "--body_timeout_s",
        type=float,
        default=30.0,
        help="Longest it then takes to send the body; then 408 and closed (default 30).",
    )
    limits.add_argument(
        "--max_connections",
        type=int,
        default=512,
        help="Most connections open at once; a new one beyond closes the one "
        "idle longest, or gets 503 when all are busy (default 512).",
    )


def _add_scoring_options(parser) -> None:
    """`score`'s options of how pairs are scored (the server's defaults)."""
    scoring = parser.add_argument_group("scoring (as `score`)")
    add_scoring_options(scoring, serving=True)
    scoring.set_defaults(window_size=DEFAULT_WINDOW_SIZE)


def limits_from_args(args):
    """The `serving.service.Limits` the command line sets."""
    from seahorse_metrics.serving.service import Limits

    return Limits(
        max_request_pairs=args.max_request_pairs,
        max_body_bytes=args.max_body_bytes,
        max_queue=args.max_queue,
        max_batch_pairs=args.max_batch_pairs,
        max_wait_ms=args.max_wait_ms,
        request_timeout_s=args.request_timeout_s,
        header_timeout_s=args.header_timeout_s,
        body_timeout_s=args.body_timeout_s,
        max_connections=args.max_connections,
    )


def run(args) -> int:
    from seahorse_metrics import compilation_cache
    from seahorse_metrics.serving.server import serve_checkpoints

    split_cpu(args)
    compilation_cache.enable_from_args(args)
    return serve_checkpoints(
        args.checkpoint,
        limits_from_args(args),
        options=options_from_flags(args),
        mesh=args.mesh,
        host=args.host,
        port=args.port,
        token_file=args.token_file,
        threshold=args.threshold,
        calibration=args.calibration,
        log_level=str(getattr(args, "log_level", None) or "INFO").lower(),
    )
