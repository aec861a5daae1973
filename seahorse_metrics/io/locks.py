"""Exclusive locks on what a run writes: `score`'s outputs, `export`'s output, `train`'s MODEL_DIR.

    with OutputLock("scores/test.jsonl"):   # holds scores/test.jsonl.lock
        ...

The lock is `fcntl.flock` on `<path>.lock`, which holds the owner's PID and
host. A second run on the same path is refused, naming that PID; the kernel
releases the lock of a process that dies (kill -9 included), so the next run
takes the stale file over without help.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time

LOCK_SUFFIX = ".lock"


class OutputInUseError(BlockingIOError):
    """Another run holds the lock of the output file."""


class OutputLock:
    """An exclusive lock on an output: `fcntl.flock` on `<output>.lock`.

    The lock file holds the owner's PID and host; it is removed on release.
    Raises `OutputInUseError` on entry when another process holds it.
    """

    def __init__(self, output_path: str):
        self.output_path = output_path
        self.path = output_path + LOCK_SUFFIX
        self._handle = None

    def _try_lock(self):
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "a process that is starting"
            handle.close()
            raise OutputInUseError(
                f"{self.output_path} is being written by another run ({owner}); wait for it "
                f"to finish or stop it (if no such process is alive, remove {self.path})"
            ) from None
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if current is None or not os.path.samestat(current, os.fstat(handle.fileno())):
            handle.close()  # the previous owner removed the file meanwhile: lock the new one
            return None
        return handle

    def __enter__(self) -> "OutputLock":
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        while self._handle is None:
            self._handle = self._try_lock()
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(
            f"PID {os.getpid()} on {socket.gethostname()}, since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        self._handle.flush()
        return self

    def __exit__(self, *exc) -> None:
        os.remove(self.path)
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None
