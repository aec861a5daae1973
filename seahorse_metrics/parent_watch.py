"""Worker processes that stop with the process that started them.

A Beam runner on one machine (DirectRunner's `multi_processing` mode) starts
its SDK workers as child processes of the launcher (`score --runner ...`).
When the launcher is killed (SIGKILL, or SIGTERM, which Python does not turn
into an exception), nothing tells the workers: they go on scoring until they
notice the broken connection. `follow_parent` starts a daemon thread in a
worker that checks twice a second that the launcher is still its parent and
ends the worker when it is not. What a worker has written stays consistent:
shards are written whole under a temporary name and renamed (see
`seahorse_metrics.scoring.beam`), and a rerun resumes.

    follow_parent(launcher_pid, launcher_host)  # in the worker, e.g. in load_model
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

logger = logging.getLogger(__name__)

# A worker whose launcher went away exits with 128 + SIGTERM, as if told to stop.
EXIT_PARENT_GONE = 143
POLL_SECONDS = 0.5
_followed: set[int] = set()
_followed_lock = threading.Lock()


def launcher_identity() -> tuple[int, str]:
    """(PID, host name) of this process, for its workers' `follow_parent`."""
    return os.getpid(), socket.gethostname()


def follow_parent(parent_pid: int, parent_host: str, poll_seconds: float = POLL_SECONDS) -> bool:
    """Ends this process soon after `parent_pid` stops being its parent.

    Only a direct child of `parent_pid` on the same host follows it: the
    launcher itself (in-process runners) and workers on other machines
    (Dataflow, Flink, Spark), whose parent is someone else, are left alone.
    Calling it again is harmless.

    Args:
      parent_pid, parent_host: The launcher, as `launcher_identity()` gave it.
      poll_seconds: How often the parent is checked.

    Returns:
      Whether this process now follows `parent_pid`.
    """
    if (
        socket.gethostname() != parent_host
        or os.getpid() == parent_pid
        or os.getppid() != parent_pid
    ):
        return False
    with _followed_lock:
        if parent_pid not in _followed:
            _followed.add(parent_pid)
            threading.Thread(
                target=_watch,
                args=(parent_pid, poll_seconds),
                daemon=True,
                name=f"follow-parent-{parent_pid}",
            ).start()
    return True


def _watch(parent_pid: int, poll_seconds: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_seconds)
    logger.warning(
        "The launcher (PID %d) has stopped; worker PID %d stops too (a rerun resumes)",
        parent_pid,
        os.getpid(),
    )
    os._exit(EXIT_PARENT_GONE)  # pylint: disable=protected-access
