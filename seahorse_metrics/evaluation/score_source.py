"""Where a meta-evaluation's scores come from: the cache, the run's memo of
pairs already scored, or the metric itself (`ScoreSource`), and which of
them a cell uses (`nan_mask`).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Optional

import numpy as np

from seahorse_metrics.evaluation.benchmarks import Benchmark
from seahorse_metrics.evaluation.cache import ScoreCache
from seahorse_metrics.evaluation.metrics import Metric

logger = logging.getLogger(__name__)


def _pair_key(premise: str, hypothesis: str, question: Optional[str] = None) -> bytes:
    texts = [premise, hypothesis] + ([] if question is None else [question])
    return hashlib.sha1(b"\x00".join(t.encode("utf-8") for t in texts)).digest()


class ScoreSource:
    """Gets a metric's scores for a benchmark: cache, then in-run memo, then scoring.

    Within a run, a content-only metric scores each distinct (premise,
    hypothesis) pair once, so SEAHORSE's six questions or mFACE's language
    subsets, which share pairs, cost one scoring pass.

    Args:
      cache: The on-disk cache, or None.
    """

    def __init__(self, cache: Optional[ScoreCache]):
        self.cache = cache
        self._memo: dict = {}
        self._fingerprints: dict = {}
        self.counts: dict = {}
        self.provenance: dict = {}  # Metric name -> what produced its scores.

    def _fingerprint(self, metric: Metric) -> str:
        if metric.name not in self._fingerprints:
            self._fingerprints[metric.name] = metric.fingerprint()
        return self._fingerprints[metric.name]

    def _count(self, metric: Metric, what: str) -> None:
        per_metric = self.counts.setdefault(metric.name, {"cached": 0, "scored": 0})
        per_metric[what] += 1

    def scores(self, metric: Metric, benchmark: Benchmark) -> np.ndarray:
        """Scores in item order.

        Raises:
          MetricNotApplicable: The metric has no scores for this benchmark.
          ValueError: The metric returned the wrong number of scores.
        """
        use_cache = self.cache is not None and metric.cacheable
        fingerprint = self._fingerprint(metric) if use_cache or metric.content_only else None
        if use_cache:
            cached = self.cache.load_entry(fingerprint, benchmark)
            if cached is not None:
                self._count(metric, "cached")
                self.provenance.setdefault(metric.name, cached[1])
                return cached[0]
        if metric.content_only:
            scores = self._score_by_content(metric, fingerprint, benchmark)
        else:
            scores = np.asarray(metric.score_benchmark(benchmark), dtype=np.float64)
        if scores.shape != (len(benchmark),):
            raise ValueError(
                f"metric {metric.name} returned {scores.shape} scores for "
                f"{len(benchmark)} items of {benchmark.name}"
            )
        self._count(metric, "scored")
        provenance = metric.provenance()
        if provenance.get("signature") is not None or metric.name not in self.provenance:
            self.provenance[metric.name] = provenance
        if use_cache:
            self.cache.save(fingerprint, metric.spec.text, benchmark, scores, provenance)
        return scores

    def _score_by_content(
        self, metric: Metric, fingerprint: str, benchmark: Benchmark
    ) -> np.ndarray:
        memo = self._memo.setdefault(fingerprint, {})
        keys = [_pair_key(i.premise, i.hypothesis, i.question) for i in benchmark.items]
        todo = {}
        for key, item in zip(keys, benchmark.items):
            if key not in memo and key not in todo:
                todo[key] = item
        if todo:
            logger.info("scoring %d pairs of %s with %s", len(todo), benchmark.name, metric.name)
            new = np.asarray(
                metric.score_pairs(
                    [i.premise for i in todo.values()],
                    [i.hypothesis for i in todo.values()],
                    [i.question for i in todo.values()],
                ),
                dtype=np.float64,
            )
            if new.shape != (len(todo),):
                raise ValueError(
                    f"metric {metric.name} returned {new.shape} scores for {len(todo)} pairs"
                )
            memo.update(zip(todo, new.tolist()))
        return np.array([memo[key] for key in keys], dtype=np.float64)


def nan_mask(
    metric: Metric, benchmark: Benchmark, scores: np.ndarray, drop_nan: bool
) -> tuple[np.ndarray, Optional[str]]:
    """Which of a cell's scores are finite, and a note on those left out.

    Raises:
      ValueError: naming the metric and benchmark, for NaN or infinite scores
        without `drop_nan`.
    """
    valid = np.isfinite(scores)
    bad = int((~valid).sum())
    if not bad:
        return valid, None
    if not drop_nan:
        raise ValueError(
            f"metric {metric.name}: {bad} of {len(scores)} scores on {benchmark.name} are NaN "
            "or infinite; fix the metric or pass --drop_nan to leave those items out"
        )
    if bad == len(scores):
        return valid, f"all {bad} scores are NaN or infinite"
    return valid, f"{bad} of {len(scores)} items left out: NaN or infinite scores"
