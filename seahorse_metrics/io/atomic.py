"""Atomic writes: a file (or directory) is replaced whole, or not at all.

    write_atomically("scores/out.csv", lambda handle: handle.write(text))
    write_json_atomically("run/meta.json", meta)
    with staged_path("data/train.npz") as temporary:   # for writers that take a path
        np.savez(temporary, ...)

Everything is written to a hidden temporary beside its target (so the
rename stays on one file system), flushed and synced, then renamed onto the
target. A failure removes the temporary; a full disk or quota is raised as
one `OSError` naming the target and saying what to do next. A `.gz` target
is written through gzip (no name or time in its header, so equal content
gives equal bytes).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import shutil
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

GZIP_SUFFIX = ".gz"
# Errors of a full disk or quota: they name the file being written, and leave no temporary.
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
RUN_AGAIN = "nothing was left half-written: free some space and run again"


def is_gzip(path: str) -> bool:
    """Whether `path` names a gzip file (`.gz`)."""
    return os.fspath(path).lower().endswith(GZIP_SUFFIX)


def is_no_space(error: BaseException) -> bool:
    """Whether `error` is a full disk or quota (ENOSPC, EDQUOT, EFBIG)."""
    return isinstance(error, OSError) and error.errno in _NO_SPACE


def no_space_error(error: OSError, path: str, what_next: str) -> OSError:
    """`error` (ENOSPC and the like) as an error that names the file being written."""
    return OSError(error.errno, f"{os.strerror(error.errno)} while writing {path}; {what_next}")


def temporary_beside(path: str) -> str:
    """A hidden temporary name in `path`'s directory, own to this process."""
    return os.path.join(
        os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.tmp"
    )


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


@contextlib.contextmanager
def staged_path(
    path: str, what_next: str = RUN_AGAIN, temporary: Optional[str] = None
) -> Iterator[str]:
    """Yields a temporary path beside `path` for a writer that takes a path (a
    file or a directory); when the block ends, what is there replaces `path`.

    The block may remove the temporary to keep `path` as it is. If the block
    fails, the temporary is removed (a full disk is raised naming `path`,
    ending with `what_next`). `temporary` names it (default `temporary_beside`).
    """
    temporary = temporary or temporary_beside(path)
    os.makedirs(os.path.dirname(temporary), exist_ok=True)
    try:
        yield temporary
        if os.path.lexists(temporary):
            os.replace(temporary, path)
    except BaseException as error:
        _remove(temporary)
        if is_no_space(error):
            raise no_space_error(error, path, what_next) from None
        raise


def write_atomically(path: str, write: Callable[[Any], None], what_next: str = RUN_AGAIN) -> None:
    """Calls `write(handle)` on a hidden temporary text file beside `path`,
    syncs it and renames it onto `path`: the file is replaced whole or not at all.

    A `.gz` path is written through gzip. If the write fails (a full disk:
    the error names `path`), the temporary file is removed.
    """
    temporary = temporary_beside(path)
    _stage(path, temporary, write, what_next)
    os.replace(temporary, path)


def write_files_atomically(files: Mapping[str, Callable[[Any], None]], what_next: str) -> None:
    """`write_atomically` for files that belong together (a report's .json,
    .md and .html): every file is written and synced to a temporary first,
    and only then are they all renamed into place, so a failure (a full
    disk: the error names the file and ends with `what_next`) replaces none
    of them and leaves no temporary behind.
    """
    staged = []
    try:
        for path, write in files.items():
            temporary = temporary_beside(path)
            _stage(path, temporary, write, what_next)
            staged.append((temporary, path))
    except BaseException:
        for temporary, _ in staged:
            os.remove(temporary)
        raise
    for temporary, path in staged:
        os.replace(temporary, path)


def write_json_atomically(
    path: str, value: Any, sort_keys: bool = False, newline: bool = False
) -> None:
    """Writes `value` as indented JSON (UTF-8 text as it is) with `write_atomically`;
    `sort_keys` sorts object keys, `newline` ends the file with a line break."""

    def write(handle) -> None:
        json.dump(value, handle, indent=2, ensure_ascii=False, sort_keys=sort_keys)
        if newline:
            handle.write("\n")

    write_atomically(path, write)


def write_text_atomically(path: str, text: str) -> None:
    """Writes `text` to `path` with `write_atomically`."""
    write_atomically(path, lambda handle: handle.write(text))


def write_lines_atomically(path: str, lines: Iterable[str]) -> None:
    """Writes `lines` (each ending with its line break) to `path` with
    `write_atomically`, streaming them: a generator is never held whole."""
    write_atomically(path, lambda handle: handle.writelines(lines))


def _stage(path: str, temporary: str, write: Callable[[Any], None], what_next: str) -> None:
    """`write(handle)` into `temporary` (gzip for a `.gz` `path`), synced; on
    failure the temporary is removed and a full disk named as `path`."""
    os.makedirs(os.path.dirname(temporary), exist_ok=True)
    try:
        with open(temporary, "wb") as raw:
            _write_text(raw, write, is_gzip(path))
            raw.flush()
            os.fsync(raw.fileno())
    except BaseException as error:
        if os.path.exists(temporary):
            os.remove(temporary)
        if is_no_space(error):
            raise no_space_error(error, path, what_next) from None
        raise


def _write_text(raw, write: Callable[[Any], None], compress: bool) -> None:
    """`write(text handle)` into the binary `raw`, gzip-compressed if asked
    (no name or time in the gzip header, so equal rows give equal bytes)."""
    binary = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if compress else raw
    text = io.TextIOWrapper(binary, encoding="utf-8", newline="")
    try:
        write(text)
        text.flush()
    finally:
        text.detach()
        if compress:
            binary.close()  # writes the gzip trailer; `raw` stays open


# ------------------------------------------------------------------ directories
def retired_name(target: str) -> str:
    """Where `replace_directory` keeps the previous `target` while it swaps."""
    return f"{target}.old"


def replace_directory(staging: str, target: str, retired: Optional[str] = None) -> None:
    """Moves the finished directory `staging` to `target`; a previous `target`
    is moved to `retired` (default `retired_name(target)`) first and removed
    only afterwards, so a crash between the two renames leaves it there for
    `restore_directory`."""
    if not os.path.exists(target):
        os.replace(staging, target)
        return
    retired = retired or retired_name(target)
    if os.path.exists(retired):
        shutil.rmtree(retired)
    os.replace(target, retired)
    os.replace(staging, target)
    shutil.rmtree(retired)


def publish_directory(staging: str, target: str) -> bool:
    """Moves the finished directory `staging` to `target` unless another
    process published one there first (a shared cache); returns whether this
    call did."""
    try:
        os.rename(staging, target)
    except OSError as error:
        if error.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not os.path.isdir(target):
            raise
        return False
    return True


def restore_directory(target: str) -> bool:
    """Puts back the previous `target` that a `replace_directory` interrupted
    between its renames left at `retired_name(target)`; returns whether it did."""
    retired = retired_name(target)
    if os.path.isdir(retired) and not os.path.exists(target):
        os.replace(retired, target)
        return True
    return False
