"""Merging a finished Beam run's shards into its output, in input order: a
JSONL output is the shards' bytes one after another; a CSV/TSV output has
one header, the union of the shards' input columns and then the added ones,
as `score` orders them. The shards are read where they lie, on any
filesystem Beam reads (`seahorse_metrics.scoring.shards`); no pipeline runs."""

from __future__ import annotations

import csv
import io
import logging
import shutil
from typing import Any, Mapping, Sequence

from seahorse_metrics.option_names import option
from seahorse_metrics.scoring import shards
from seahorse_metrics.scoring.job import ScoringJob
from seahorse_metrics.scoring.output import OutputWriter

logger = logging.getLogger(__name__)


def merge_shards(job: ScoringJob, meta: Mapping[str, Any]) -> str:
    """Writes the rows of every shard to `job.output` in input order (one
    header for CSV/TSV); returns the path.

    Raises:
      RuntimeError: if a shard of the finished run is missing.
    """
    paths = [
        shards.shard_path(job, index, window)
        for index, entry in enumerate(meta["inputs"])
        for window in range(entry["windows"])
    ]
    missing = [path for path in paths if not shards.exists(path)]
    if missing:
        raise RuntimeError(
            f"{len(missing)} shards of the finished run are missing (the first is "
            f"{missing[0]}); score again with "
            f"{option('overwrite=True', '--overwrite')}"
        )
    with shards.writing(job.output) as handle:
        if job.output_kind == "jsonl":
            for path in paths:
                with shards.open_binary(path) as shard:
                    shutil.copyfileobj(shard, handle, 1 << 20)
        else:
            _merge_delimited(job, paths, handle)
    logger.info("merged %d shards into %s", len(paths), job.output)
    return job.output


def _merge_delimited(job: ScoringJob, paths: Sequence[str], handle) -> None:
    """CSV/TSV shards under one header: the union of their input columns, then
    the added ones, as `score` orders them."""
    delimiter = "\t" if job.output_kind == "tsv" else ","
    headers = [_shard_header(path, delimiter) for path in paths]
    added = set(job.output_fields.added())
    input_columns = dict.fromkeys(c for header in headers for c in header if c not in added)
    header = job.output_fields.header(list(input_columns))
    text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
    writer = OutputWriter(text, job.output_kind, header)
    same = all(h == header for h in headers)
    text.flush()
    for path, shard_header in zip(paths, headers):
        with shards.open_binary(path) as shard:
            body = io.TextIOWrapper(shard, encoding="utf-8", newline="")
            reader = csv.reader(body, delimiter=delimiter)
            next(reader, None)
            if same:  # Copy the rows as they are.
                shutil.copyfileobj(body, text)
            else:
                for cells in reader:
                    writer.write(dict(zip(shard_header, cells)))
            body.detach()
    text.flush()
    text.detach()


def _shard_header(path: str, delimiter: str) -> list[str]:
    with shards.open_binary(path) as shard:
        body = io.TextIOWrapper(shard, encoding="utf-8", newline="")
        header = next(csv.reader(body, delimiter=delimiter), [])
        body.detach()
    return header
