"""The serving batcher and service without a model: merging, timeouts, cancellation.

A stand-in scorer (the `MultiScorer.run` interface) records the windows it
is given and can be held, so what the batcher merges, and what a timed-out
request leaves behind, is checked exactly and in milliseconds.
"""

import asyncio
import threading
import time

import numpy as np
import pytest

from seahorse_metrics.scoring.units import InputSettings
from seahorse_metrics.serving import protocol
from seahorse_metrics.serving.batcher import DynamicBatcher, QueueFull
from seahorse_metrics.serving.service import Limits, ScoringService


class HeldScorer:
    """Scores every example 0.25 once `release` is set; records the windows."""

    names = ["m"]
    settings = InputSettings(max_input_length=64)
    window_size = 512
    checkpoints: dict = {}

    def __init__(self):
        self.release = threading.Event()
        self.windows = []

    def precompile(self):
        pass

    def metadata(self):
        return {"engine": "jax", "batching": {"data_parallel": 1}, "signatures": self.signatures()}

    def signatures(self):
        return {"m": "seahorse:test|held"}

    def run(self, windows, batch_size=None, stats=None):
        from seahorse_metrics.scoring.window_scoring import ExampleResult

        for window in windows:
            self.windows.append([example.hypothesis for example in window])
            assert self.release.wait(30)
            yield [
                ExampleResult(example.key, np.array([0.25]), None, None, 1, False, False)
                for example in window
            ]


MODE = protocol.Mode(("m",), "truncate", False)


def _pairs(*names):
    return [{"article": "an article.", "summary": name} for name in names]


def test_requests_queued_while_scoring_are_merged_into_one_window():
    scorer = HeldScorer()
    batcher = DynamicBatcher(lambda mode: scorer, max_batch_pairs=4, max_wait_s=0.0, max_queue=8)
    first = batcher.submit(MODE, _pairs("a"))
    while not scorer.windows:  # the thread holds the first window
        time.sleep(0.001)
    later = [batcher.submit(MODE, _pairs(f"b{n}", f"c{n}")) for n in range(3)]
    assert batcher.queued_pairs == 6
    with pytest.raises(QueueFull):
        batcher.submit(MODE, _pairs("d", "e", "f"))
    scorer.release.set()
    assert first.result(5) == {
        0: {"row": 0, "scores": {"m": 0.25}, "truncated": False, "chunked": False}
    }
    assert [sorted(f.result(5)) for f in later] == [[0, 1]] * 3
    # Full at 4 pairs: the second window took two requests, the third the last one.
    assert scorer.windows == [["a"], ["b0", "c0", "b1", "c1"], ["b2", "c2"]]
    batcher.close(5)


def test_blank_pairs_get_the_error_score_writes_and_others_are_scored():
    scorer = HeldScorer()
    scorer.release.set()
    batcher = DynamicBatcher(lambda mode: scorer, max_wait_s=0.0)
    entries = batcher.submit(MODE, _pairs("fine", " ") + [{"summary": "no article"}]).result(5)
    assert entries[0]["scores"] == {"m": 0.25}
    assert entries[1]["error"] == "field 'summary' is empty"
    assert entries[2]["error"] == "missing field 'article'"
    rows = [
        protocol.response_row(pair, entries[i], {"m": 0.2})
        for i, pair in enumerate(_pairs("fine", " "))
    ]
    assert rows == [
        {"m": 0.25, "m_decision": "yes", "truncated": False, "chunked": False},
        {"error": "field 'summary' is empty"},
    ]
    batcher.close(5)


class PoisonedScorer(HeldScorer):
    """Fails any window holding the summary "poison" (an error the checks
    before scoring did not foresee)."""

    def run(self, windows, batch_size=None, stats=None):
        for window in windows:
            if any(example.hypothesis == "poison" for example in window):
                raise RuntimeError("cannot encode this text")
            self.release.set()
            yield from super().run([window], batch_size, stats)


def test_a_window_that_fails_fails_only_the_request_that_caused_it():
    """Issue 48 point 1: one bad pair failed every request merged with it."""
    scorer = PoisonedScorer()
    batcher = DynamicBatcher(lambda mode: scorer, max_batch_pairs=64, max_wait_s=0.2)
    futures = [
        batcher.submit(MODE, _pairs("a", "b")),
        batcher.submit(MODE, _pairs("poison")),
        batcher.submit(MODE, _pairs("c")),
    ]
    assert futures[0].result(5)[1]["scores"] == {"m": 0.25}
    assert futures[2].result(5)[0]["scores"] == {"m": 0.25}
    with pytest.raises(RuntimeError, match="cannot encode"):
        futures[1].result(5)
    assert scorer.windows == [["a", "b"], ["c"]]  # the merged window failed; each alone
    batcher.close(5)


def test_ids_and_bodies_the_response_could_not_hold_are_refused_naming_the_field():
    """Issue 48 point 6, without a server (test_serve.py sends them over HTTP)."""
    for text, words in (
        ("NaN", "not finite"),
        ("1e400", "not finite"),
        ("7" * 5000, "5000 digits"),
        ('"\\udc00"', r"lone surrogate U\+DC00"),
    ):
        body = protocol.decode_body(
            b'{"pairs": [{"article": "a", "summary": "b", "id": ' + text.encode() + b"}]}"
        )
        with pytest.raises(protocol.RequestError, match=words) as refused:
            protocol.parse_request(body, ["m"], MODE)
        assert refused.value.field == "pairs[0].id" and refused.value.pair == 0
    ok = protocol.parse_request(
        {"pairs": [{"article": "a", "summary": "b", "id": 2**64 - 1}]}, ["m"], MODE
    )
    assert ok.pairs[0]["id"] == 2**64 - 1
    with pytest.raises(protocol.RequestError, match="fit in 64 bits: send it as a string"):
        protocol.parse_request(
            {"pairs": [{"article": "a", "summary": "b", "id": -(2**64)}]}, ["m"], MODE
        )
    with pytest.raises(protocol.RequestError, match="nested too deeply"):
        protocol.decode_body(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(protocol.RequestError, match="number"):
        protocol.parse_request(
            protocol.decode_body(b'{"pairs": [{"article": "a", "summary": ' + b"1" * 99 + b"}]}"),
            ["m"],
            MODE,
        )


def test_a_request_past_its_timeout_gets_504_and_leaves_the_queue():
    scorer = HeldScorer()
    service = ScoringService(lambda: scorer, Limits(request_timeout_s=0.2, max_wait_ms=0))
    service.start()
    service._thread.join(5)
    assert service.health().status == 200

    async def two_requests():
        first = asyncio.ensure_future(service.score(service.check({"pairs": _pairs("a")})))
        while not scorer.windows:
            await asyncio.sleep(0.001)
        second = await service.score(service.check({"pairs": _pairs("b", "c")}))
        return second, first

    second, first = asyncio.run(two_requests())
    assert second.status == 504 and "--request_timeout_s" in second.body["error"]
    assert service.batcher.queued_pairs == 0  # the timed-out request left the queue
    scorer.release.set()
    assert first.done() and first.result().status == 504  # scored too late: dropped
    service.close()
    assert scorer.windows == [["a"]]  # "b" and "c" were never scored
    assert service.check({"pairs": _pairs("x")}).status == 503


def test_limits_are_checked_together():
    with pytest.raises(ValueError, match="must not exceed --max_queue"):
        Limits(max_request_pairs=100, max_queue=50)
    with pytest.raises(ValueError, match="max_batch_pairs must be >= 1"):
        Limits(max_batch_pairs=0)


def test_client_retries_a_503_after_its_retry_after_and_waits_while_loading():
    """RemoteScorer against a stand-in HTTP server: loading, then overloaded once."""
    import http.server
    import json

    from seahorse_metrics.serving.client import RemoteScorer, RemoteScoringError

    ready = {"status": "ready", "metrics": ["m"], "max_request_pairs": 2}
    first_answers = {
        "/healthz": [(503, {"status": "loading"})],
        "/v1/score": [(503, {"error": "overloaded"})],
    }
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.path, json.loads(body) if body else None))
            if first_answers[self.path]:
                status, payload = first_answers[self.path].pop(0)
            elif self.path == "/healthz":
                status, payload = 200, ready
            else:
                pairs = seen[-1][1]["pairs"]
                status, payload = 200, {"results": [{"m": len(p["summary"]) / 10} for p in pairs]}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        scores = RemoteScorer(url).score(["a"] * 3, ["x", "xy", "xyz"], show_progress=False)
        assert scores.dtype == np.float32 and scores.tolist() == pytest.approx([0.1, 0.2, 0.3])
        # Two requests of at most 2 pairs (the server's limit); the first was retried once.
        assert [len(body["pairs"]) for path, body in seen if path == "/v1/score"] == [2, 2, 1]
        with pytest.raises(RemoteScoringError, match="HTTP 0"):
            RemoteScorer("http://127.0.0.1:9").health()
    finally:
        server.shutdown()
        server.server_close()
