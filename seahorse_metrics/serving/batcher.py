"""Dynamic batching: concurrent requests merged into the scorer's batches.

Requests are queued (`DynamicBatcher.submit`, from any thread) and one
scoring thread takes them in arrival order: the oldest request opens a
window, which closes when requests of its mode hold `max_batch_pairs` pairs
("full") or `max_wait_s` after that request arrived, whichever is first
(while the thread is busy scoring, requests wait anyway, so under load a
window closes as soon as the thread is free). The window's pairs, from every
request in it, are scored as one window of rows by the scoring core
(`serving.core.score_window`): the scorer's own length buckets and batch
plan, as `score` uses them. A request's future is
set as soon as its last pair is scored. A window that fails (an error the
checks before scoring did not foresee) is scored again request by request,
so only the request that caused it gets the error.

The queue is bounded in pairs (`max_queue`): `submit` raises `QueueFull`
rather than queueing more, so an overloaded server answers 503 instead of
losing requests. A cancelled future (a request that timed out) leaves the
queue; one being scored is scored and its result dropped. `close` stops new
requests and scores every queued one before the thread ends.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import threading
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from seahorse_metrics.serving.core import ScoringStats, records_as_rows, score_window
from seahorse_metrics.serving.protocol import Mode

logger = logging.getLogger(__name__)


class QueueFull(RuntimeError):
    """The queue cannot take a request's pairs now (HTTP 503, Retry-After)."""


class BatcherClosed(RuntimeError):
    """The server is shutting down and takes no new requests (HTTP 503)."""


@dataclasses.dataclass(frozen=True)
class WindowReport:
    """What one merged window was, for the server's metrics.

    Attributes:
      requests: Requests merged into it.
      pairs: Their pairs.
      batches: Model batches the scorer cut it into.
      truncated: Encoder inputs that were cut.
      seconds: Time spent scoring it.
      waited_seconds: How long its oldest request had been queued.
    """

    requests: int
    pairs: int
    batches: int
    truncated: int
    seconds: float
    waited_seconds: float


@dataclasses.dataclass(eq=False)
class _Job:
    mode: Mode
    pairs: list[Mapping[str, Any]]
    future: concurrent.futures.Future
    arrived: float
    entries: dict = dataclasses.field(default_factory=dict)


class DynamicBatcher:
    """Merges concurrent requests into scoring windows on one thread.

    Attributes:
      max_batch_pairs: Pairs at which a window is full.
      max_wait_s: Longest a window waits for more requests.
      max_queue: Most pairs queued (not yet being scored).
    """

    def __init__(
        self,
        scorer_for: Callable[[Mode], Any],
        *,
        max_batch_pairs: int = 64,
        max_wait_s: float = 0.005,
        max_queue: int = 4096,
        batch_size: Optional[int] = None,
        on_window: Optional[Callable[[WindowReport], None]] = None,
    ):
        """Starts the scoring thread.

        Args:
          scorer_for: Mode -> the `MultiScorer` that scores it (see
            `serving.core.scorer_for_mode`).
          max_batch_pairs: Pairs at which a window closes.
          max_wait_s: Seconds a window stays open after its first request.
          max_queue: Most pairs waiting; more raise `QueueFull`.
          batch_size: Most rows of a model batch (default: the scorer's).
          on_window: Called after each window with its `WindowReport`.
        """
        for name, value in (("max_batch_pairs", max_batch_pairs), ("max_queue", max_queue)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.max_batch_pairs = int(max_batch_pairs)
        self.max_wait_s = max(0.0, float(max_wait_s))
        self.max_queue = int(max_queue)
        self._scorer_for = scorer_for
        self._batch_size = batch_size
        self._on_window = on_window
        self._pending: collections.deque[_Job] = collections.deque()
        self._queued = 0
        self._closing = False
        self._condition = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="seahorse-batcher", daemon=True)
        self._thread.start()

    @property
    def queued_pairs(self) -> int:
        """Pairs waiting for a window."""
        return self._queued

    def submit(self, mode: Mode, pairs: Sequence[Mapping[str, Any]]) -> concurrent.futures.Future:
        """Queues a request's pairs (records with the fields `mode.fields()` names).

        Returns:
          A future of {pair index: the core's entry (scores or `error`)}.

        Raises:
          QueueFull: when the queue has no room for them.
          BatcherClosed: after `close`.
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        if not pairs:
            future.set_result({})
            return future
        job = _Job(mode, list(pairs), future, time.monotonic())
        with self._condition:
            if self._closing:
                raise BatcherClosed("the server is shutting down")
            if self._queued + len(job.pairs) > self.max_queue:
                raise QueueFull(
                    f"{self._queued} pairs are queued; the queue holds {self.max_queue}"
                )
            self._pending.append(job)
            self._queued += len(job.pairs)
            self._condition.notify_all()
        future.add_done_callback(lambda done: self._forget(job) if done.cancelled() else None)
        return future

    def close(self, timeout: Optional[float] = None) -> None:
        """Takes no more requests, scores the queued ones, stops the thread."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        self._thread.join(timeout)

    def _forget(self, job: _Job) -> None:
        with self._condition:
            if job in self._pending:
                self._pending.remove(job)
                self._queued -= len(job.pairs)
                self._condition.notify_all()

    def _loop(self) -> None:
        while True:
            jobs = self._next_window()
            if jobs is None:
                return
            self._score(jobs)

    def _mode_pairs(self, mode: Mode) -> int:
        return sum(len(job.pairs) for job in self._pending if job.mode == mode)

    def _next_window(self) -> Optional[list[_Job]]:
        """Waits for a window to close; returns its jobs (None: closed and empty)."""
        with self._condition:
            while True:
                while not self._pending:
                    if self._closing:
                        return None
                    self._condition.wait()
                first = self._pending[0]
                deadline = first.arrived + self.max_wait_s
                while (
                    not self._closing
                    and self._pending
                    and self._pending[0] is first
                    and self._mode_pairs(first.mode) < self.max_batch_pairs
                ):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._condition.wait(remaining)
                if self._pending and self._pending[0] is first:
                    return self._take(first.mode)
                # The first request was cancelled meanwhile: start over.

    def _take(self, mode: Mode) -> list[_Job]:
        """Pops the oldest jobs of `mode` while they fit in a window (at least one)."""
        taken, pairs = [], 0
        for job in list(self._pending):
            if job.mode != mode:
                continue
            if taken and pairs + len(job.pairs) > self.max_batch_pairs:
                break
            taken.append(job)
            pairs += len(job.pairs)
            self._pending.remove(job)
        self._queued -= pairs
        return taken

    def _score(self, jobs: list[_Job]) -> None:
        """Scores the jobs' pairs as one window; sets each future when its
        last pair is done. When the window fails and merged several
        requests, each is scored again alone, so only the request that
        caused the failure gets it."""
        running = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not running:
            return
        waited = time.monotonic() - running[0].arrived
        stats, start = ScoringStats(), time.perf_counter()
        pairs, failure = self._score_window(running, stats)
        if failure is not None and len(running) > 1:
            logger.warning(
                "scoring a window of %d requests failed (%s: %s); scoring each alone",
                len(running),
                type(failure).__name__,
                failure,
            )
            for job in running:
                if not job.future.done():
                    job.entries.clear()
                    self._score_window([job], stats)
        if self._on_window is not None:
            self._on_window(
                WindowReport(
                    requests=len(running),
                    pairs=pairs,
                    batches=stats.batches,
                    truncated=stats.truncation.truncated,
                    seconds=time.perf_counter() - start,
                    waited_seconds=waited,
                )
            )

    def _score_window(
        self, running: list[_Job], stats: ScoringStats
    ) -> tuple[int, Optional[Exception]]:
        """Scores running jobs as one window; returns its pairs and the error
        that stopped it (None when scored). A lone job's future gets the error."""
        owners = [
            (number, index) for number, job in enumerate(running) for index in range(len(job.pairs))
        ]
        rows = list(records_as_rows(running[number].pairs[index] for number, index in owners))
        remaining = [len(job.pairs) for job in running]
        try:
            scorer = self._scorer_for(running[0].mode)
            for group in score_window(
                scorer, rows, running[0].mode.fields(), batch_size=self._batch_size, stats=stats
            ):
                for item, entry in group:
                    number, index = owners[item.row]
                    running[number].entries[index] = entry
                    remaining[number] -= 1
                    if remaining[number] == 0:
                        running[number].future.set_result(running[number].entries)
        except Exception as error:  # The requests get it; the thread goes on.
            if len(running) == 1:
                logger.exception("scoring a request of %d pairs failed", len(rows))
                if not running[0].future.done():
                    running[0].future.set_exception(error)
            return len(rows), error
        return len(rows), None
