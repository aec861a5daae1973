"""Workers stop with their launcher (issue 29 point 8): `seahorse_metrics.parent_watch`.

A launcher process starts a worker that follows it, as Beam's DirectRunner
starts its multi_processing SDK workers; the launcher is then killed (kill -9)
or terminated (SIGTERM), and the worker must be gone within seconds.
"""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from seahorse_metrics import parent_watch

from fixtures import paths

REPO_ROOT = paths.REPO
WORKER = """
import os, socket, time
from seahorse_metrics.parent_watch import follow_parent
print("following", follow_parent(os.getppid(), socket.gethostname(), poll_seconds=0.1), flush=True)
time.sleep(60)
print("still running after 60 s", flush=True)
"""
LAUNCHER = f"""
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", {WORKER!r}])
print(worker.pid, flush=True)
time.sleep(60)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in handle)
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_a_worker_stops_soon_after_its_launcher_is_killed(stop):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True, env=env
    )
    worker_pid = None
    try:
        worker_pid = int(launcher.stdout.readline())
        assert launcher.stdout.readline().split() == ["following", "True"]
        assert not _gone(worker_pid)
        launcher.send_signal(stop)
        assert launcher.wait(timeout=30) == -stop
        deadline = time.monotonic() + 10
        while not _gone(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(worker_pid), "the worker outlived its launcher by 10 s"
    finally:
        launcher.kill()
        launcher.wait(timeout=30)
        launcher.stdout.close()
        if worker_pid is not None and not _gone(worker_pid):
            os.kill(worker_pid, signal.SIGKILL)


def test_only_a_direct_child_on_the_same_host_follows():
    assert not parent_watch.follow_parent(os.getpid(), socket.gethostname())  # the launcher
    assert not parent_watch.follow_parent(os.getppid(), "another-host")
    assert not parent_watch.follow_parent(os.getppid() + 1, socket.gethostname())
