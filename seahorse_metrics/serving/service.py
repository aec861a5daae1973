"""The scoring service behind the HTTP routes: loading, limits, batching.

`ScoringService` owns the scorer's life: it loads and compiles the metrics
on a thread (so `/healthz` can answer "loading" meanwhile), then scores
requests through a `DynamicBatcher`, and on `close` scores what is queued
before it stops. It knows nothing of HTTP beyond the status code and body
of each outcome (`Outcome`), so the routes stay thin.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import logging
import threading
import time
from typing import Any, Callable, Mapping, Optional

from seahorse_metrics.data import records
from seahorse_metrics.serving import protocol
from seahorse_metrics.serving.batcher import BatcherClosed, DynamicBatcher, QueueFull
from seahorse_metrics.serving.core import ERROR_FIELD, scorer_for_mode
from seahorse_metrics.serving.metrics import ServerMetrics

logger = logging.getLogger(__name__)
# Each metric's signature (`scoring.signature`) on every scored response.
SIGNATURE_HEADER = "X-Seahorse-Signature"

LOADING, READY, FAILED, STOPPING = "loading", "ready", "failed", "stopping"


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask of the server.

    Attributes:
      max_request_pairs: Pairs per request (more: 413).
      max_body_bytes: Bytes of a request body (more: 413).
      max_queue: Pairs waiting for a window (a request that does not fit: 503).
      max_batch_pairs: Pairs at which a merged window is full.
      max_wait_ms: Longest a window waits for more requests.
      request_timeout_s: Longest a request waits for its scores (then 504).
      retry_after_s: The `Retry-After` of a 503.
      header_timeout_s: Longest a connection takes to send a request's
        headers (then 408 and closed; see `serving.connections`).
      body_timeout_s: Longest it then takes to send the body.
      max_connections: Most connections open at once.
    """

    max_request_pairs: int = 256
    max_body_bytes: int = 16 * 1024 * 1024
    max_queue: int = 4096
    max_batch_pairs: int = 64
    max_wait_ms: float = 5.0
    request_timeout_s: float = 60.0
    retry_after_s: int = 1
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 512

    def __post_init__(self):
        for name in ("header_timeout_s", "body_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name} must be > 0, got {getattr(self, name)}")
        for name in (
            "max_request_pairs",
            "max_body_bytes",
            "max_queue",
            "max_batch_pairs",
            "max_connections",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.max_request_pairs > self.max_queue:
            raise ValueError(
                f"--max_request_pairs ({self.max_request_pairs}) must not exceed "
                f"--max_queue ({self.max_queue}): such a request could never be "
                "queued"
            )
        if self.max_wait_ms < 0 or self.request_timeout_s <= 0:
            raise ValueError("--max_wait_ms must be >= 0 and --request_timeout_s > 0")


def metric_questions(checkpoints: Mapping[str, str]) -> dict[str, dict]:
    """Metric -> {"question", "name", "meaning"} of the SEAHORSE question it
    answers (`records.question_of_metric`), for the metrics whose name or path says."""
    questions = {}
    for name, path in checkpoints.items():
        question = records.question_of_metric(name, path)
        if question is not None:
            questions[name] = {
                "question": question,
                "name": records.QUESTION_NAMES[question],
                "meaning": records.QUESTION_MEANINGS[question],
            }
    return questions


@dataclasses.dataclass
class Outcome:
    """An HTTP answer: status, JSON body and extra headers."""

    status: int
    body: dict
    headers: dict = dataclasses.field(default_factory=dict)


class ScoringService:
    """Loads the metrics and scores requests in merged windows.

    Attributes:
      state: `loading`, `ready`, `failed` or `stopping`.
      error: Why loading failed (state `failed`), else None.
      limits: The request limits.
      thresholds: Metric -> decision threshold (adds `<metric>_decision`).
      metrics: The Prometheus metrics.
    """

    def __init__(
        self,
        load_scorer: Callable[[], Any],
        limits: Limits,
        thresholds: Optional[Mapping[str, float]] = None,
        on_failure: Optional[Callable[[], None]] = None,
        *,
        calibration: Optional[Mapping[str, Any]] = None,
    ):
        """Args:
        load_scorer: Loads the `MultiScorer` (called on the loading thread).
        limits: The request limits.
        thresholds: Metric name -> decision threshold.
        on_failure: Called when loading fails (e.g. to stop the server).
        calibration: Metric name -> `calibration.CalibrationMap` (adds
          `<metric>_calibrated`).
        """
        self._load_scorer = load_scorer
        self.limits = limits
        self.thresholds = dict(thresholds or {})
        self.calibration = dict(calibration or {})
        self.on_failure = on_failure
        self.state, self.error = LOADING, None
        self.scorer = None
        # The engine, data_parallel, signatures and int8 self-check, for /healthz.
        self.devices: dict = {}
        self.questions: dict = {}  # Metric -> its SEAHORSE question, for /healthz and the page.
        self.batcher: Optional[DynamicBatcher] = None
        self.default_mode: Optional[protocol.Mode] = None
        self.metrics = ServerMetrics(lambda: self.batcher.queued_pairs if self.batcher else 0)
        self._thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------ life
    def start(self) -> None:
        """Starts loading and compiling the metrics on a thread."""
        # Run in a copy of this context: its messages name options as the command does.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._load,),
            name="seahorse-load",
            daemon=True,
        )
        self._thread.start()

    def _load(self) -> None:
        start = time.perf_counter()
        try:
            scorer = self._load_scorer()
            unknown = [name for name in self.thresholds if name not in scorer.names]
            if unknown:
                raise ValueError(
                    f"a threshold is given for {unknown[0]!r}, which is not one of "
                    f"the metrics served ({scorer.names})"
                )
            scorer.precompile()
            described = scorer.metadata()
        except Exception as error:  # Reported by /healthz and the command's exit status.
            logger.error("loading the metrics failed: %s", error)
            self.state, self.error = FAILED, f"{type(error).__name__}: {error}"
            if self.on_failure is not None:
                self.on_failure()
            return
        self.scorer = scorer
        self.devices = {
            "engine": described["engine"],
            "data_parallel": described["batching"]["data_parallel"],
            "signatures": described.get("signatures", {}),
        }
        if "int8_check" in described:
            self.devices["int8_check"] = described["int8_check"]
        self.questions = metric_questions(scorer.checkpoints)
        self.default_mode = protocol.Mode(
            tuple(scorer.names), scorer.settings.long_inputs, scorer.settings.per_sentence
        )
        limits = self.limits

        @functools.lru_cache(maxsize=None)
        def scorer_for(mode: protocol.Mode) -> Any:
            return scorer_for_mode(scorer, mode.metrics, mode.long_inputs, mode.per_sentence)

        self.scorer_for = scorer_for
        self.batcher = DynamicBatcher(
            scorer_for,
            max_batch_pairs=limits.max_batch_pairs,
            max_wait_s=limits.max_wait_ms / 1000.0,
            max_queue=limits.max_queue,
            on_window=self.metrics.observe_window,
        )
        if self.state == LOADING:
            self.state = READY
        logger.info(
            "metrics %s loaded and compiled in %.1f s; ready",
            ", ".join(scorer.names),
            time.perf_counter() - start,
        )

    def close(self) -> None:
        """Refuses new requests, scores the queued ones, stops the batcher
        (stopped while loading, it lets the loading finish first: XLA must
        not be compiling while the interpreter exits)."""
        loading = self._thread is not None and self._thread.is_alive()
        self.state = STOPPING if self.state != FAILED else self.state
        if loading:
            logger.info("shutting down: waiting for the metrics to finish loading")
            self._thread.join()
        if self.batcher is not None:
            queued = self.batcher.queued_pairs
            if queued:
                logger.info("shutting down: scoring the %d queued pairs first", queued)
            self.batcher.close()

    scorer_for: Any = None  # Mode -> the scorer of that mode, once loaded.

    def health(self) -> Outcome:
        """`GET /healthz`: 200 once loaded and compiled, else 503 with the state."""
        body = {"status": self.state}
        if self.state == READY:
            body.update(
                metrics=list(self.scorer.names),
                thresholds=self.thresholds,
                questions=self.questions,
                max_request_pairs=self.limits.max_request_pairs,
                settings=self.scorer.settings.to_dict(),
                **self.devices,
            )
            return Outcome(200, body)
        if self.error:
            body["error"] = self.error
        return Outcome(503, body, {"Retry-After": str(self.limits.retry_after_s)})

    # ------------------------------------------------------------ scoring
    def _unavailable(self) -> Optional[Outcome]:
        if self.state == READY:
            return None
        reason = {
            LOADING: "the metrics are still loading",
            STOPPING: "the server is shutting down",
            FAILED: f"loading the metrics failed ({self.error})",
        }[self.state]
        return Outcome(503, {"error": reason}, {"Retry-After": str(self.limits.retry_after_s)})

    def check(self, body: Any) -> protocol.ScoreRequest | Outcome:
        """A decoded body as a checked request, or the 4xx/503 outcome refusing it."""
        refused = self._unavailable()
        if refused is not None:
            return refused
        try:
            return protocol.parse_request(
                body, self.scorer.names, self.default_mode, self.limits.max_request_pairs
            )
        except protocol.TooManyPairs as error:
            return Outcome(
                413, {"error": str(error), "field": "pairs", "limit": self.limits.max_request_pairs}
            )
        except protocol.RequestError as error:
            return Outcome(400, error.to_json())

    async def score(self, request: protocol.ScoreRequest) -> Outcome:
        """Queues a checked request and waits (at most the timeout) for its rows."""
        try:
            future = self.batcher.submit(request.mode, request.pairs)
        except QueueFull as error:
            return Outcome(
                503,
                {"error": f"overloaded: {error}; retry later"},
                {"Retry-After": str(self.limits.retry_after_s)},
            )
        except BatcherClosed as error:
            return Outcome(
                503, {"error": str(error)}, {"Retry-After": str(self.limits.retry_after_s)}
            )
        try:
            entries = await asyncio.wait_for(
                asyncio.wrap_future(future), self.limits.request_timeout_s
            )
        except asyncio.TimeoutError:
            return Outcome(
                504,
                {
                    "error": f"not scored within {self.limits.request_timeout_s} s "
                    "(--request_timeout_s); send fewer pairs or retry"
                },
            )
        except Exception as error:  # A scoring failure, logged by the batcher.
            return Outcome(500, {"error": f"scoring failed: {type(error).__name__}: {error}"})
        signatures = self.scorer_for(request.mode).signatures()
        return Outcome(
            200,
            {**self._response(request, entries), "signatures": signatures},
            {SIGNATURE_HEADER: "; ".join(f"{m}={s}" for m, s in signatures.items())},
        )

    def _response(self, request: protocol.ScoreRequest, entries: Mapping[int, dict]) -> dict:
        metrics = request.mode.metrics
        rows = [
            protocol.response_row(pair, entries[index], self.thresholds, self.calibration)
            for index, pair in enumerate(request.pairs)
        ]
        errors = sum(ERROR_FIELD in row for row in rows)
        self.metrics.pairs.inc(len(rows) - errors)
        self.metrics.pair_errors.inc(errors)
        return {
            "metrics": list(metrics),
            "thresholds": {m: self.thresholds[m] for m in metrics if m in self.thresholds},
            "long_inputs": request.mode.long_inputs,
            "per_sentence": request.mode.per_sentence,
            "results": rows,
            "truncated": sum(bool(row.get("truncated")) for row in rows),
            "chunked": sum(bool(row.get("chunked")) for row in rows),
            "errors": errors,
        }
