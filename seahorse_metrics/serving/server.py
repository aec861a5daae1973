"""Running the service on uvicorn, with a graceful shutdown.

On SIGTERM or SIGINT the server stops accepting connections, lets every
request in flight (queued or being scored) get its answer, scores what is
still queued, and returns 0 (uvicorn would re-raise the signal after its
own graceful shutdown; the process is done by then, so it exits normally).
A second SIGINT forces the exit. A failure to load the metrics stops the
server too, and `serve` raises it (exit status 2).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import threading
from typing import Any, Callable, Mapping, Optional, Sequence, Union

logger = logging.getLogger(__name__)

TOKEN_ENV = "SEAHORSE_METRICS_TOKEN"
INSTALL_HINT = "pip install -e '.[serve]' (or: pip install 'seahorse-metrics[serve]')"


class LoadFailed(RuntimeError):
    """The metrics could not be loaded or compiled; the server stopped."""


def require_server_packages() -> None:
    """Raises an ImportError saying how to install the server's packages."""
    missing = []
    for module in ("starlette", "uvicorn", "prometheus_client"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ImportError(f"serve needs {', '.join(missing)}: {INSTALL_HINT}")


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # A host name: it may resolve beyond loopback.
        return False


def read_token(token_file: Optional[str], environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """The bearer token from `token_file` (its first line) or `SEAHORSE_METRICS_TOKEN`.

    Raises:
      FileNotFoundError: for a token file that does not exist.
      ValueError: for an empty token.
    """
    if token_file:
        if not os.path.isfile(token_file):
            raise FileNotFoundError(f"--token_file {token_file}: file not found")
        with open(token_file, encoding="utf-8") as handle:
            token = handle.readline().strip()
        source = f"--token_file {token_file}"
    elif environ.get(TOKEN_ENV) is not None:
        token, source = environ[TOKEN_ENV].strip(), TOKEN_ENV
    else:
        return None
    if not token:
        raise ValueError(f"{source}: the token is empty")
    return token


def _graceful_server_class():
    import uvicorn

    class GracefulServer(uvicorn.Server):
        """uvicorn's server, whose signals end `run` instead of being re-raised."""

        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            import signal

            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return GracefulServer


def serve_checkpoints(
    checkpoints: Union[Mapping[str, str], Sequence[str]],
    limits: Any,
    *,
    options: Any = None,
    mesh: Any = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    token_file: Optional[str] = None,
    threshold: Optional[str] = None,
    calibration: Optional[str] = None,
    log_level: str = "info",
) -> int:
    """Serves checkpoints as `seahorse-metrics serve` does (see `serve`).

    Args:
      checkpoints: Name -> checkpoint, or `[NAME=]DIR` specs.
      limits: The request limits (`service.Limits`).
      options: The `ScoringOptions` of every metric.
      mesh: A device mesh or its spec (`MultiScorer.load`).
      token_file: Where the bearer token is (`read_token`).
      threshold: A `--threshold` value: a number, or a thresholds file.
      calibration: A calibration file with a map for every metric.
      host, port, log_level: As `serve`.

    Raises:
      ValueError, FileNotFoundError: for a bad threshold, calibration or
        token file, before anything listens.
    """
    from seahorse_metrics.calibration.maps import maps_for
    from seahorse_metrics.calibration.thresholds import read_decision_thresholds
    from seahorse_metrics.checkpoints.layout import checkpoint_names

    require_server_packages()
    named = checkpoint_names(checkpoints)
    thresholds = read_decision_thresholds(threshold, list(named))
    maps = maps_for(calibration, list(named)) if calibration else {}
    token = read_token(token_file)

    def load_scorer():
        from seahorse_metrics.scoring.scorer import MultiScorer

        return MultiScorer.load(named, options=options, mesh=mesh)

    return serve(
        load_scorer,
        limits,
        host=host,
        port=port,
        token=token,
        thresholds=thresholds,
        calibration=maps,
        log_level=log_level,
    )


def serve(
    load_scorer: Callable[[], Any],
    limits: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token: Optional[str] = None,
    thresholds: Optional[Mapping[str, float]] = None,
    calibration: Optional[Mapping[str, Any]] = None,
    log_level: str = "info",
) -> int:
    """Serves the metrics until SIGTERM/SIGINT.

    Args:
      load_scorer: Loads the `MultiScorer` (called on a thread once listening).
      limits: The request limits (`service.Limits`).
      host, port: Where to listen.
      token: The bearer token, or None (see `serving.app` for what it opens).
      thresholds: Metric name -> decision threshold.
      calibration: Metric name -> `calibration.CalibrationMap` (adds
        `<metric>_calibrated`).
      log_level: uvicorn's log level.

    Returns:
      0 after a graceful shutdown.

    Raises:
      LoadFailed: when the metrics failed to load.
      OSError: when the server could not listen on `host:port`.
    """
    require_server_packages()
    from seahorse_metrics.serving.app import Authorization, create_app
    from seahorse_metrics.serving.service import ScoringService

    service = ScoringService(load_scorer, limits, thresholds, calibration=calibration)
    loopback = is_loopback(host)
    if token is None and not loopback:
        _warn_open_without_token(host)
    app = create_app(service, Authorization(token, loopback, host))
    server = _graceful_server_class()(_uvicorn_config(app, limits, host, port, log_level))

    def stop() -> None:
        server.should_exit = True

    service.on_failure = stop
    try:
        server.run()
    except SystemExit:  # uvicorn exits when it cannot bind.
        raise OSError(f"could not listen on {host}:{port} (in use? see the log above)") from None
    if service.error:
        raise LoadFailed(f"the metrics could not be served: {service.error}")
    logger.info("stopped")
    return 0


def _warn_open_without_token(host: str) -> None:
    """Beyond loopback, a server without a token refuses every request: says so."""
    logger.warning(
        "listening on %s beyond loopback without a token: every request will be "
        "refused with 401 and no metric is loaded (give --token_file or %s)",
        host,
        TOKEN_ENV,
    )


def _uvicorn_config(app, limits: Any, host: str, port: int, log_level: str):
    """uvicorn's settings for the app: our logging (no access log), the
    lifespan that loads the metrics, and connections guarded by `limits`."""
    import uvicorn

    from seahorse_metrics.serving.connections import guarded_protocol

    http = guarded_protocol(limits.header_timeout_s, limits.body_timeout_s, limits.max_connections)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        log_config=None,
        http=http,
    )
