"""The Beam runner's files: `OUTPUT.shards/` on any filesystem Beam reads.

`OUTPUT.shards/FFFFF-WWWWWW.<ext>` holds window W of input file F in the
output's format, `FFFFF-WWWWWW.counts.json` its counts, `settings.json` the
job's fingerprint and `totals.json` the pipeline's totals. Every file is
written whole under a temporary name and renamed into place
(`write_bytes`). Local paths go through `os`, others through Beam's
`FileSystems` (gs://, s3://, hdfs://, ...).
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import json
import logging
import os
import re
import shutil
import tempfile
import uuid
from typing import Any, Iterable, Iterator, Optional

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from seahorse_metrics.io.atomic import is_gzip, staged_path
from seahorse_metrics.scoring.job import ScoringJob

logger = logging.getLogger(__name__)

SHARDS_SUFFIX = ".shards"
COUNTS_SUFFIX = ".counts.json"
SETTINGS_FILE = "settings.json"
TOTALS_FILE = "totals.json"
_UNCOMPRESSED = CompressionTypes.UNCOMPRESSED


# ------------------------------------------------------------------ layout
def shards_dir(job: ScoringJob) -> str:
    """`OUTPUT.shards`."""
    return job.output + SHARDS_SUFFIX


def _extension(job: ScoringJob) -> str:
    """The shards' extension: the output's format (shards of a `.gz` output are plain)."""
    return "." + job.output_kind


def shard_path(job: ScoringJob, file_index: int, window: int, suffix: Optional[str] = None) -> str:
    """The shard of window `window` of input `file_index` (or its `suffix` file)."""
    return FileSystems.join(
        shards_dir(job), f"{file_index:05d}-{window:06d}{suffix or _extension(job)}"
    )


def written_windows(job: ScoringJob, file_index: int) -> set[int]:
    """The windows of input `file_index` whose shard exists."""
    pattern = FileSystems.join(shards_dir(job), f"{file_index:05d}-*{_extension(job)}")
    name = re.compile(r"(\d{5,})-(\d{6,})" + re.escape(_extension(job)))
    windows = set()
    for path in matching(pattern):
        match = name.fullmatch(path.rsplit("/", 1)[-1])
        if match and int(match.group(1)) == file_index:
            windows.add(int(match.group(2)))
    return windows


def remove_shards(job: ScoringJob) -> None:
    """Removes `OUTPUT.shards/` and everything in it."""
    if is_local(shards_dir(job)):
        shutil.rmtree(shards_dir(job), ignore_errors=True)
    else:
        remove(matching(FileSystems.join(shards_dir(job), "*")))


# ------------------------------------------------------------------ files
def absolute(path: str) -> str:
    return os.path.abspath(path) if is_local(path) else path


def is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) in (None, "file")


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def read_bytes(path: str) -> bytes:
    with FileSystems.open(path, compression_type=_UNCOMPRESSED) as handle:
        return handle.read()


def read_json(path: str) -> Any:
    return json.loads(read_bytes(path).decode("utf-8"))


def open_binary(path: str):
    """A binary handle reading `path` as it is (no decompression)."""
    return FileSystems.open(path, compression_type=_UNCOMPRESSED)


def matching(pattern: str) -> list[str]:
    """The paths `pattern` matches (none when nothing does)."""
    try:
        return [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    except Exception:  # Nothing matched, on filesystems that raise for that.
        return []


def file_stat(path: str) -> dict:
    """The fingerprint entry of an input: {"path", "bytes", "modified_ns"}."""
    metadata = FileSystems.match([path])[0].metadata_list[0]
    return {
        "path": path,
        "bytes": metadata.size_in_bytes,
        "modified_ns": int(round(metadata.last_updated_in_seconds * 1e9)),
    }


@contextlib.contextmanager
def writing(path: str) -> Iterator[Any]:
    """A binary handle whose content replaces `path` whole when the block ends
    (a temporary file renamed into place), or never if the block fails; a
    `.gz` path is gzip-compressed. A full disk names `path`."""
    directory, name = os.path.split(path) if is_local(path) else path.rsplit("/", 1)
    temporary = FileSystems.join(directory, f"{name}.tmp-{uuid.uuid4().hex}")
    if is_local(path):
        with (
            staged_path(
                path, "free some space and run the same command again: it resumes", temporary
            ) as staged,
            open(staged, "wb") as handle,
        ):
            with _compressed(handle, path) as target:
                yield target
            handle.flush()
            os.fsync(handle.fileno())
        return
    with FileSystems.create(temporary, compression_type=_UNCOMPRESSED) as handle:
        with _compressed(handle, path) as target:
            yield target
    FileSystems.rename([temporary], [path])


@contextlib.contextmanager
def _compressed(handle, path: str) -> Iterator[Any]:
    """`handle`, through gzip when `path` ends in `.gz` (no name or time in its header)."""
    if not is_gzip(path):
        yield handle
        return
    with gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0) as target:
        yield target


def write_bytes(path: str, data: bytes) -> None:
    with writing(path) as handle:
        handle.write(data)


def remove(paths: Iterable[str]) -> None:
    paths = [p for p in paths if exists(p)]
    if paths:
        FileSystems.delete(paths)


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
    """`path` itself when local, else a temporary local copy (the reader of
    `score` reads local files)."""
    if is_local(path):
        yield path
        return
    with tempfile.TemporaryDirectory() as folder:
        local = os.path.join(folder, os.path.basename(path))
        with open_binary(path) as source, open(local, "wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
        yield local


def staged(path: str) -> str:
    """`path` when local; else a local copy of the file, or of every file
    under the folder (checkpoints load from local files), kept for the
    worker's life."""
    if is_local(path):
        return path
    root = path.rstrip("/")
    target = tempfile.mkdtemp(prefix="seahorse_")
    atexit.register(shutil.rmtree, target, True)
    found = matching(root + "/**")
    if found:
        copies = {
            source: os.path.join(target, *source[len(root) + 1 :].split("/")) for source in found
        }
        local = target
    elif exists(root):
        local = os.path.join(target, root.rsplit("/", 1)[-1])
        copies = {root: local}
    else:
        raise FileNotFoundError(f"{path} does not exist")
    for source, destination in copies.items():
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        with open_binary(source) as src, open(destination, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
    logger.info("copied %s (%d files) to %s", path, len(copies), local)
    return local
