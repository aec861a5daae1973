"""The sample's file formats as text, and writing each file atomically."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from typing import Iterable, Sequence


def tsv_text(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Tab-separated lines without quoting, as the SEAHORSE release has them;
    a field with a tab or newline is refused, naming the row by its first
    field."""
    lines = ["\t".join(header)]
    for fields in rows:
        for field in fields:
            if "\t" in field or "\n" in field or "\r" in field:
                raise ValueError(f"{fields[0]}: a field contains a tab or newline: {field!r}")
        lines.append("\t".join(fields))
    return "\n".join(lines) + "\n"


def jsonl_text(records: Iterable[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in records)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def write_atomic(path: str, content: str | bytes) -> None:
    """Writes `content` (text as UTF-8) to `path` through a temporary file in
    its folder, so that a reader sees the old file or the whole new one."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        if isinstance(content, bytes):
            with os.fdopen(fd, "wb") as f:
                f.write(content)
        else:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_sample(output_dir: str, files: dict[str, str | bytes]) -> None:
    for relative, content in sorted(files.items()):
        write_atomic(os.path.join(output_dir, relative), content)
