"""On-disk cache of metric scores per (metric, benchmark).

Layout: `<root>/<metric fingerprint>/<benchmark name>.json` holding the item
ids and scores in item order, the benchmark's content fingerprint and the
metric spec. An entry is used only when the fingerprints and ids match, so a
changed checkpoint, scores file or benchmark text is rescored, while adding a
metric to a report leaves the others' entries untouched.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from typing import Optional

import numpy as np

from seahorse_metrics.evaluation.benchmarks import Benchmark
from seahorse_metrics.io.atomic import write_files_atomically
from seahorse_metrics.io.json_files import read_json_or_none

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ScoreCache:
    """Scores cache rooted at a directory (created on first write).

    Args:
      root: Directory, e.g. `<report dir>/cache`.
    """

    def __init__(self, root: str):
        self.root = root

    def path(self, metric_fingerprint: str, benchmark: Benchmark) -> str:
        file_name = _UNSAFE.sub("_", benchmark.name) + ".json"
        return os.path.join(self.root, metric_fingerprint, file_name)

    def load(self, metric_fingerprint: str, benchmark: Benchmark) -> Optional[np.ndarray]:
        """Cached scores in item order, or None when absent or stale."""
        entry = self.load_entry(metric_fingerprint, benchmark)
        return None if entry is None else entry[0]

    def load_entry(
        self, metric_fingerprint: str, benchmark: Benchmark
    ) -> Optional[tuple[np.ndarray, dict]]:
        """(cached scores in item order, what produced them: `Metric.provenance`),
        or None when absent or stale."""
        path = self.path(metric_fingerprint, benchmark)
        if not os.path.isfile(path):
            return None
        entry = read_json_or_none(path)
        if not isinstance(entry, dict):
            logger.warning("ignoring unreadable cache entry %s", path)
            return None
        if (
            entry.get("benchmark_fingerprint") != benchmark.content_fingerprint()
            or entry.get("ids") != benchmark.ids
        ):
            logger.info("cache entry %s is stale (benchmark changed); rescoring", path)
            return None
        scores = np.array([np.nan if s is None else s for s in entry["scores"]], dtype=np.float64)
        return scores, dict(entry.get("provenance") or {"signature": None})

    def save(
        self,
        metric_fingerprint: str,
        metric_spec: str,
        benchmark: Benchmark,
        scores: np.ndarray,
        provenance: Optional[dict] = None,
    ) -> str:
        """Writes an entry atomically and returns its path.

        Raises:
          OSError: e.g. a full disk, naming the entry's file.
        """
        path = self.path(metric_fingerprint, benchmark)
        entry = {
            "metric": metric_spec,
            "benchmark": benchmark.name,
            "benchmark_fingerprint": benchmark.content_fingerprint(),
            "ids": benchmark.ids,
            # NaN is not JSON: stored as null.
            "scores": [None if not np.isfinite(s) else float(s) for s in scores],
            "provenance": provenance,
        }
        write_files_atomically(
            {path: functools.partial(json.dump, entry)},
            "the scores of this metric were not cached: free some space and run again",
        )
        return path
