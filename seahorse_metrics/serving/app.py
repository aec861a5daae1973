"""The HTTP routes (Starlette) of `seahorse-metrics serve`.

    GET  /            the page for people (`page.PAGE`)
    GET  /healthz     200 {"status": "ready", "metrics": [...], ...} once loaded and
                      compiled; 503 {"status": "loading"|"failed"|"stopping"} before
    GET  /metrics     Prometheus text (`serving.metrics`)
    POST /v1/score    scores (`serving.protocol` has the JSON)

Bearer token (`Authorization: Bearer <token>`):

* with a token, `/v1/score` and `/metrics` need it (401 otherwise); `/` (a
  static page, whose requests carry the token typed into it) and `/healthz`
  (for probes) stay open;
* without a token, a server listening on a loopback address answers
  everyone; one listening beyond loopback (e.g. `--host 0.0.0.0`) refuses
  every request, on every path, with 401 and a message saying to set a
  token (and loads no metric, having no one to serve).

Bodies over `max_body_bytes` get 413 (by `Content-Length`, or while reading);
a body that is not JSON gets 400. No handler answers with a traceback.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import time
from typing import Optional

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from seahorse_metrics.serving.metrics import CONTENT_TYPE
from seahorse_metrics.serving.page import PAGE
from seahorse_metrics.serving.protocol import RequestError, decode_body
from seahorse_metrics.serving.service import Outcome, ScoringService

logger = logging.getLogger(__name__)


class BodyTooLarge(ValueError):
    """A request body over the limit."""


class Authorization:
    """Who may call: a bearer token, or loopback only without one."""

    def __init__(self, token: Optional[str], loopback: bool, host: str):
        self.token = token
        self.refuse_all = token is None and not loopback
        self.host = host

    def refusal(self, request: Request, protected: bool) -> Optional[Response]:
        """A 401 for a request that may not be answered, else None."""
        if self.refuse_all:
            return _json(
                Outcome(
                    401,
                    {
                        "error": (
                            f"this server listens on {self.host}, beyond loopback, without a "
                            "token: it answers no one. Restart it with --token_file or "
                            "SEAHORSE_METRICS_TOKEN (or "
                            "--host 127.0.0.1)"
                        )
                    },
                )
            )
        if self.token is None or not protected:
            return None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        ):
            return None
        return _json(
            Outcome(
                401,
                {"error": "missing or wrong bearer token (send 'Authorization: Bearer <token>')"},
                {"WWW-Authenticate": "Bearer"},
            )
        )


class _JSONResponse(JSONResponse):
    """Starlette's JSON response, which escapes what UTF-8 cannot hold (a
    lone surrogate of a field name sent back in an error) instead of failing."""

    def render(self, content) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def _json(outcome: Outcome) -> JSONResponse:
    return _JSONResponse(outcome.body, outcome.status, headers=outcome.headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes without reading them all.

    Raises:
      BodyTooLarge: over the limit.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(
            f"the body has {declared} bytes, more than the {limit} this server "
            "takes (--max_body_bytes)"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(
                f"the body exceeds the {limit} bytes this server takes (--max_body_bytes)"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(service: ScoringService, authorization: Authorization) -> Starlette:
    """The Starlette application serving `service`."""

    def observed(endpoint: str, protected: bool):
        def wrap(handler):
            async def route(request: Request) -> Response:
                start = time.perf_counter()
                response = authorization.refusal(request, protected)
                if response is None:
                    response = await handler(request)
                service.metrics.observe_request(
                    endpoint, response.status_code, time.perf_counter() - start
                )
                return response

            return route

        return wrap

    @observed("/", protected=False)
    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})

    @observed("/healthz", protected=False)
    async def health(request: Request) -> Response:
        return _json(service.health())

    @observed("/metrics", protected=True)
    async def prometheus(request: Request) -> Response:
        return Response(service.metrics.text(), media_type=CONTENT_TYPE)

    @observed("/v1/score", protected=True)
    async def score(request: Request) -> Response:
        return _json(await _score(service, request))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if not authorization.refuse_all:  # Refusing everyone, it needs no metrics.
            service.start()
        yield
        service.close()

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/metrics", prometheus, methods=["GET"]),
        Route("/v1/score", score, methods=["POST"]),
    ]
    if authorization.refuse_all:  # Every path and method, known or not, gets the 401.

        async def refuse_everyone(request: Request) -> Response:
            return authorization.refusal(request, protected=True)

        routes = [Route("/{path:path}", refuse_everyone, methods=list(_ALL_METHODS))]
    return Starlette(routes=routes, lifespan=lifespan)


_ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


async def _score(service: ScoringService, request: Request) -> Outcome:
    try:
        raw = await read_body(request, service.limits.max_body_bytes)
    except BodyTooLarge as error:
        return Outcome(
            413, {"error": str(error), "field": "body", "limit": service.limits.max_body_bytes}
        )
    except ClientDisconnect:
        return Outcome(400, {"error": "the client disconnected while sending the body"})
    try:
        body = decode_body(raw)
    except RequestError as error:
        return Outcome(400, error.to_json())
    checked = service.check(body)
    if isinstance(checked, Outcome):
        return checked
    return await service.score(checked)
