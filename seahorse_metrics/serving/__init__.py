"""`seahorse-metrics serve`: the metrics as an HTTP service, on the one scoring core.

* `protocol`: the JSON of `POST /v1/score` (checking requests, response rows).
* `core`: the service's one contact with the scoring core (rows in, the
  entries and output fields `score` writes out).
* `batcher`: dynamic batching: concurrent requests merged into scoring windows.
* `service`: loading, limits and outcomes (no HTTP).
* `metrics`: the Prometheus metrics.
* `app`: the Starlette routes, the bearer token, body limits.
* `page`: the self-contained page of `GET /`.
* `server`: uvicorn with a graceful shutdown.
* `client`: `RemoteScorer`, the Python client (`seahorse_metrics.RemoteScorer`;
  the standard library and numpy only, no server packages).

Starlette, uvicorn and prometheus_client come with the `serve` extra.
"""
