"""Planning children: a program compiled for more devices than this process has.

JAX fixes its device count when it starts, so a plan (or a fit search) for
a mesh of N devices runs in a child process that XLA:CPU shows N devices
(`model.partitioning.with_host_devices`). The child runs the `main` of a
planning module (`memory`, `fitting`) on a request (JSON): it prints its
results as lines, and its log lines are forwarded to the
parent's log as they come (`forward_logs_to_stdout`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any, Iterator, Mapping, Optional

logger = logging.getLogger(__name__)

# A planning child's own log lines, on its stdout among its results.
_LOG_PREFIX = "LOG "
# The child runs its module's `main` (imported by name, so its loggers are the library's).
_RUN_MAIN = "import sys; from %s import main; sys.exit(main(sys.argv[1:]))"


def forward_logs_to_stdout() -> None:
    """In a planning child process: our INFO lines go to stdout, where
    `child_output` logs them in the parent as they come."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(_LOG_PREFIX + "%(message)s"))
    own = logging.getLogger("seahorse_metrics")
    own.addHandler(handler)
    own.setLevel(logging.INFO)
    own.propagate = False


def child_output(
    module: str, request: Mapping[str, Any], devices: int, timeout: Optional[float] = None
) -> Iterator[str]:
    """Runs `module.main([REQUEST])` (`request` as JSON) on `devices`
    simulated CPU devices; yields its stdout lines as they come, and logs
    here the log lines it forwards (`forward_logs_to_stdout`).

    Raises:
      ValueError: with the child's last error line, if it fails.
      subprocess.TimeoutExpired: if it runs longer than `timeout` seconds.
    """
    from seahorse_metrics.model.partitioning import with_host_devices

    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=with_host_devices(os.environ.get("XLA_FLAGS", ""), devices),
    )
    command = [sys.executable, "-c", _RUN_MAIN % module, json.dumps(request)]
    # stderr to a file: a pipe nobody reads while stdout is read could fill and block the child.
    with (
        tempfile.TemporaryFile("w+") as stderr,
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        ) as process,
    ):
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            process.kill()

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer is not None:
            timer.start()
        try:
            yield from _results(process.stdout)
            returncode = process.wait()
        finally:
            if timer is not None:
                timer.cancel()
        if timed_out.is_set():
            raise subprocess.TimeoutExpired(command, timeout)
        stderr.seek(0)
        errors = [line for line in stderr.read().splitlines() if line.strip()]
    if returncode != 0:
        raise ValueError(f"planning failed: {errors[-1] if errors else returncode}")


def _results(lines) -> Iterator[str]:
    """The child's result lines; its forwarded log lines are logged here."""
    for line in lines:
        if line.startswith(_LOG_PREFIX):
            logger.info("%s", line[len(_LOG_PREFIX) :].rstrip("\n"))
        else:
            yield line
