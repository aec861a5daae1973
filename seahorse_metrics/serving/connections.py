"""Bounds on the service's connections, against clients that hold them open.

uvicorn waits as long as a client likes for a request's headers and body,
and accepts every connection, so 1,100 connections that send half a request
line and then nothing use up the process's open files and lock out everyone
else. The HTTP protocol of `serve` (uvicorn's h11 one, with these bounds):

* a connection has `header_timeout_s` to send a request's headers (from
  when it opened, or when the previous response on it was sent), and then
  `body_timeout_s` to send the body; past either it is answered 408 and
  closed;
* at most `max_connections` are open at once: a new connection beyond them
  closes the one that has waited longest for its headers (an idle or slow
  client; none that is sending a body or waiting for its scores), and when
  every connection is busy with a request it is itself answered 503 and
  closed.

So a client that sends its request promptly is served however many
connections others leave silent.
"""

from __future__ import annotations

import logging
from typing import Optional

from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

HEADERS, BODY, ANSWERING = "headers", "body", "answering"


def _raw_answer(status: int, reason: str, message: str) -> bytes:
    body = ('{"error": "%s"}' % message).encode("ascii")
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("ascii") + body


_TOO_SLOW = _raw_answer(
    408,
    "Request Timeout",
    "the request was not sent in time (--header_timeout_s, --body_timeout_s)",
)
_TOO_MANY = _raw_answer(
    503, "Service Unavailable", "too many connections (--max_connections); retry later"
)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with read timeouts and a bounded number of
    connections (the limits are class attributes: see `guarded_protocol`)."""

    header_timeout_s = 10.0
    body_timeout_s = 30.0
    max_connections = 512

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.phase, self.phase_started = HEADERS, 0.0
        self._timer = None
        self._cycle_seen = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._wait_for(HEADERS)
        open_now = sum(not c.transport.is_closing() for c in self.connections)
        if open_now > self.max_connections and not self._make_room():
            logger.warning(
                "%d connections are open and busy (--max_connections): refusing a new one",
                open_now - 1,
            )
            self._close(_TOO_MANY)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.transport.is_closing():
            self._stop_timer()
        elif self.cycle is not None and self.cycle is not self._cycle_seen:
            self._cycle_seen = self.cycle  # The headers of a new request are in.
            if self.cycle.more_body:
                self._wait_for(BODY)
            else:
                self._answering()
        elif self.phase == BODY and not self.cycle.more_body:
            self._answering()

    def on_response_complete(self) -> None:
        # Before uvicorn's own: it may go on to a pipelined request at once.
        if not self.transport.is_closing():
            self._wait_for(HEADERS)
        super().on_response_complete()

    def _wait_for(self, phase: str) -> None:
        self._stop_timer()
        self.phase, self.phase_started = phase, self.loop.time()
        timeout = self.header_timeout_s if phase == HEADERS else self.body_timeout_s
        self._timer = self.loop.call_later(timeout, self._timed_out)

    def _answering(self) -> None:
        self._stop_timer()
        self.phase = ANSWERING

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        logger.debug("closing a connection that did not send its request %s in time", self.phase)
        self._close(_TOO_SLOW)

    def _close(self, answer: bytes) -> None:
        """Answers (unless between two requests of a kept-alive connection,
        where closing says enough) and closes."""
        self._stop_timer()
        if self.transport.is_closing():
            return
        if self.cycle is None or (self.phase == BODY and not self.cycle.response_started):
            self.transport.write(answer)
        self.transport.close()

    def _make_room(self) -> bool:
        """Closes the connection that has waited longest for headers, if any."""
        waiting = [
            c
            for c in self.connections
            if c is not self
            and getattr(c, "phase", None) == HEADERS
            and not c.transport.is_closing()
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.phase_started)
        logger.debug(
            "too many connections: closing one idle for %.1f s",
            self.loop.time() - oldest.phase_started,
        )
        oldest._close(_TOO_MANY)
        return True


def guarded_protocol(header_timeout_s: float, body_timeout_s: float, max_connections: int) -> type:
    """`GuardedH11Protocol` with these limits, for `uvicorn.Config(http=...)`.

    Args:
      header_timeout_s: Seconds a connection has to send a request's headers.
      body_timeout_s: Seconds it then has to send the body.
      max_connections: Most connections open at once.
    """
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "header_timeout_s": float(header_timeout_s),
            "body_timeout_s": float(body_timeout_s),
            "max_connections": int(max_connections),
        },
    )
