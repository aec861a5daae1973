"""`-` for standard input and output of `seahorse-metrics score`.

A scoring input is read several times (checked, counted, then streamed, and
again on resume), so standard input is first saved beside the output as
`OUTPUT.stdin.<format>`, which is kept: rerunning the same command with the
same input resumes from it, as from any input file. The format must be clear
from the first bytes: `{` starts JSON lines, `[` a JSON array; otherwise the
first line is a CSV header (commas, no tab) or a TSV header (tabs, no comma).

With `--output -` the rows are written to a temporary file in the input's
format (JSONL for standard input in JSON lines, ...) and copied to standard
output once all are scored; such a run does not resume (nothing is kept).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from typing import BinaryIO, Optional

from seahorse_metrics.data import tables
from seahorse_metrics.io.atomic import staged_path

STDIN_SUFFIX = ".stdin"
_SNIFF_BYTES = 1 << 16


def sniff_kind(head: bytes) -> Optional[str]:
    """ "jsonl", "json", "csv" or "tsv" from a table's first bytes, or None
    when they do not say."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return "jsonl"
    if text.startswith(b"["):
        return "json"
    first_line = text.split(b"\n", 1)[0]
    if b"\t" in first_line and b"," not in first_line:
        return "tsv"
    if b"," in first_line and b"\t" not in first_line:
        return "csv"
    return None


def save_stdin(output: str, stream: BinaryIO) -> str:
    """Saves `stream` (standard input) as `OUTPUT.stdin.<format>`; returns the path.

    An existing copy with the same bytes is kept as it is (so a rerun resumes).

    Raises:
      ValueError: for empty input, or one whose format is not clear.
    """
    head = stream.read(_SNIFF_BYTES)
    kind = sniff_kind(head)
    if kind is None:
        raise ValueError(
            "--input -: cannot tell the format of standard input (JSON lines start "
            "with {, a JSON array with [, a CSV header has commas and a TSV header "
            "tabs); save it to a file with its extension"
            if head
            else "--input -: standard input is empty"
        )
    path = f"{output}{STDIN_SUFFIX}.{kind}"
    digest = hashlib.sha256()
    with staged_path(path) as temporary:
        with open(temporary, "wb") as handle:
            while head:
                handle.write(head)
                digest.update(head)
                head = stream.read(1 << 20)
        if os.path.isfile(path) and _sha256(path) == digest.hexdigest():
            os.remove(temporary)  # The same bytes: the copy keeps its time, so a rerun resumes.
    return path


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stdout_kind(input_path: str) -> str:
    """The format of `--output -`: the input's (uncompressed)."""
    return tables.table_kind(input_path)


def copy_to(path: str, stream: BinaryIO) -> None:
    """Writes the finished output `path` to `stream` (standard output)."""
    with open(path, "rb") as handle:
        shutil.copyfileobj(handle, stream, 1 << 20)
    stream.flush()
