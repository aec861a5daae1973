"""A checkpoint's identity by its content, not its path.

    digest = content_digest("runs/q4/best")   # "sha256:..." of every file's name, size and hash

Resumed scoring (`score`, Beam's `settings.json`) and `evaluate`'s score
cache key on this digest, so a checkpoint replaced by another one at the
same path (same size, even the same modification times) is noticed.

Hashing a large checkpoint takes a while, so each file's hash is kept in a
cache file of the directory under `$XDG_CACHE_HOME/seahorse-metrics/content/`
(default `~/.cache/...`), named by the directory's real path and keyed by
each file's size, modification and change times and inode (a file rewritten
in place with its old mtime restored still changes its ctime): a later run
rehashes only the files that changed. Nothing is written into the
checkpoint directory, which may be read-only or an export that `export
--overwrite` replaces; where the cache cannot be written, the digest is
computed every time. A cache entry is only a shortcut: a file whose size,
mtime or inode differ is hashed again. Earlier versions kept the cache as
`.seahorse_content.json` in the checkpoint directory (`LEGACY_CACHE_FILE`):
hidden files are no part of the digest, and `export` replaces an export
holding one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Optional

from seahorse_metrics.io.atomic import write_json_atomically
from seahorse_metrics.io.json_files import read_json_or_none

logger = logging.getLogger(__name__)

LEGACY_CACHE_FILE = ".seahorse_content.json"
_CHUNK = 1 << 22


def cache_path(directory: str) -> str:
    """The cache file of a checkpoint directory (see the module docstring)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(os.path.realpath(directory).encode("utf-8", "surrogateescape"))
    return os.path.join(base, "seahorse-metrics", "content", key.hexdigest()[:32] + ".json")


def _file_hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(directory: str) -> list[str]:
    """Relative paths of the files under `directory`, sorted; hidden files
    (an earlier version's cache, editors' and copies' leftovers) are left out."""
    found = []
    for root, folders, names in os.walk(directory):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        found += [
            os.path.relpath(os.path.join(root, name), directory)
            for name in names
            if not name.startswith(".")
        ]
    return sorted(found)


def _read_cache(path: str, directory: str) -> dict:
    """The cached {file: {"key", "sha256"}} of `directory` ({} when none)."""
    cache = read_json_or_none(path)
    if not isinstance(cache, dict) or cache.get("directory") != os.path.realpath(directory):
        return {}
    files = cache.get("files")
    return files if isinstance(files, dict) else {}


def _write_cache(path: str, directory: str, files: dict) -> None:
    """Writes the cache atomically; silently skipped where it cannot be."""
    try:
        write_json_atomically(
            path, {"directory": os.path.realpath(directory), "files": files}, sort_keys=True
        )
    except OSError:
        logger.debug(
            "%s is not writable: the checkpoint digest is not cached", os.path.dirname(path)
        )


def file_entries(directory: str) -> list[dict]:
    """[{"name", "size", "sha256"}] of every file of a checkpoint directory
    (or of the one file `directory` names), hashing only what changed."""
    if os.path.isfile(directory):
        stat = os.stat(directory)
        return [
            {
                "name": os.path.basename(directory),
                "size": stat.st_size,
                "sha256": _file_hash(directory),
            }
        ]
    cache = cache_path(directory)
    cached, fresh, entries = _read_cache(cache, directory), {}, []
    for name in _files(directory):
        stat = os.stat(os.path.join(directory, name))
        key = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        known = cached.get(name)
        sha = known["sha256"] if isinstance(known, dict) and known.get("key") == key else None
        sha = sha or _file_hash(os.path.join(directory, name))
        fresh[name] = {"key": key, "sha256": sha}
        entries.append({"name": name, "size": stat.st_size, "sha256": sha})
    if fresh != cached:
        _write_cache(cache, directory, fresh)
    return entries


def content_digest(path: str) -> str:
    """ "sha256:<hex>" over the names, sizes and hashes of a checkpoint's files.

    Raises:
      FileNotFoundError: if `path` does not exist.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    payload = json.dumps(file_entries(path), sort_keys=True).encode("utf-8")
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def content_digest_or_none(path: Optional[str]) -> Optional[str]:
    """`content_digest` of a local path, None for None or a path not on this
    machine (a hub id or a remote URL: those are named by their path)."""
    if path is None or not os.path.exists(path):
        return None
    return content_digest(path)
