"""The server's Prometheus metrics (`GET /metrics`), on its own registry.

seahorse_requests_total{endpoint, code}   requests answered, by HTTP status
seahorse_pairs_total                      pairs scored
seahorse_pair_errors_total                pairs answered with an `error`
seahorse_truncated_inputs_total           encoder inputs cut to the length budget
seahorse_queue_pairs                      pairs waiting for a window
seahorse_window_pairs                     pairs per merged window (the batches formed)
seahorse_window_requests                  requests per merged window
seahorse_model_batches_total              model batches run
seahorse_request_seconds{endpoint}        latency of answered requests
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from seahorse_metrics.serving.batcher import WindowReport

_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    """Counters, gauges and histograms of one server."""

    def __init__(self, queued_pairs: Callable[[], int]):
        """Args:
        queued_pairs: Reads the batcher's queue depth (sampled on each scrape).
        """
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "seahorse_requests",
            "Requests answered, by endpoint and HTTP status.",
            ("endpoint", "code"),
            registry=self.registry,
        )
        self.pairs = Counter("seahorse_pairs", "Pairs scored.", registry=self.registry)
        self.pair_errors = Counter(
            "seahorse_pair_errors",
            "Pairs answered with an error (missing or blank text).",
            registry=self.registry,
        )
        self.truncated = Counter(
            "seahorse_truncated_inputs",
            "Encoder inputs cut to max_input_length.",
            registry=self.registry,
        )
        self.queue = Gauge(
            "seahorse_queue_pairs", "Pairs waiting for a window.", registry=self.registry
        )
        self.queue.set_function(queued_pairs)
        self.window_pairs = Histogram(
            "seahorse_window_pairs",
            "Pairs per merged window.",
            buckets=_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.window_requests = Histogram(
            "seahorse_window_requests",
            "Requests per merged window.",
            buckets=_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.batches = Counter(
            "seahorse_model_batches", "Model batches run.", registry=self.registry
        )
        self.latency = Histogram(
            "seahorse_request_seconds",
            "Seconds to answer a request.",
            ("endpoint",),
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )

    def observe_window(self, report: WindowReport) -> None:
        """Counts a scored window (the batcher's `on_window`)."""
        self.window_pairs.observe(report.pairs)
        self.window_requests.observe(report.requests)
        self.batches.inc(report.batches)
        self.truncated.inc(report.truncated)

    def observe_request(self, endpoint: str, code: int, seconds: float) -> None:
        """Counts an answered request."""
        self.requests.labels(endpoint, str(code)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def text(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
