"""The article/summary pairs a distillation learns from and is measured on.

`read_split` reads a prepared split's pairs with their human label for one
question; `read_pair_files` reads unlabelled pairs from JSONL/CSV/TSV files
(globs); `pair_key` is the key of a pair in the teacher's score cache.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import os
from typing import Any, Sequence

import numpy as np

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Pairs:
    """Article/summary pairs with their human labels (NaN = none) and ids."""

    premises: list
    hypotheses: list
    labels: np.ndarray
    ids: list

    def __len__(self) -> int:
        return len(self.ids)

    def keys(self) -> list[str]:
        return [pair_key(p, h) for p, h in zip(self.premises, self.hypotheses)]


def pair_key(premise: str, hypothesis: str) -> str:
    """The cache key of a pair (its texts' hash)."""
    return hashlib.sha1(f"{premise}\x00{hypothesis}".encode("utf-8")).hexdigest()


def _label(value: Any) -> float:
    return float(value) if isinstance(value, bool) else np.nan


def read_split(data_dir: str, split: str, question: int) -> Pairs:
    """The pairs of a prepared split and their label for `question` (NaN: unsure/none).

    Raises:
      FileNotFoundError: when the split was not prepared.
      ValueError: for a line that is not a prepared row (naming file and line).
    """
    path = os.path.join(data_dir, f"{split}.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} not found: prepare the release with `seahorse-metrics prepare` (DATA_DIR)"
        )
    pairs = Pairs([], [], [], [])
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                premise, hypothesis = record["article"], record["summary"]
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(
                    f"{path}:{number}: not a prepared row ({error}); prepare the "
                    "release again with `seahorse-metrics prepare`"
                ) from None
            pairs.premises.append(premise)
            pairs.hypotheses.append(hypothesis)
            pairs.labels.append(_label(record.get(f"q{question}")))
            pairs.ids.append(f"{split}:{number}")
    pairs.labels = np.asarray(pairs.labels, np.float64)
    return pairs


def read_pair_files(
    patterns: Sequence[str], premise_field: str = "article", hypothesis_field: str = "summary"
) -> Pairs:
    """Unlabelled pairs from JSONL/CSV/TSV files (paths or globs).

    Rows without both texts are skipped, counted and logged.

    Raises:
      FileNotFoundError: for a pattern that matches no file.
    """
    from seahorse_metrics.data import tables

    pairs, skipped = Pairs([], [], [], []), 0
    for pattern in patterns:
        paths = sorted(glob.glob(pattern)) or ([pattern] if os.path.isfile(pattern) else [])
        if not paths:
            raise FileNotFoundError(f"--pairs {pattern}: no such file")
        for path in paths:
            for row in tables.iter_table(path):
                record = row.record or {}
                premise, hypothesis = record.get(premise_field), record.get(hypothesis_field)
                if not (
                    isinstance(premise, str)
                    and premise.strip()
                    and isinstance(hypothesis, str)
                    and hypothesis.strip()
                ):
                    skipped += 1
                    continue
                pairs.premises.append(premise)
                pairs.hypotheses.append(hypothesis)
                pairs.ids.append(f"{path}:{row.line}")
    if skipped:
        logger.warning(
            "--pairs: %d rows without %s and %s were skipped",
            skipped,
            premise_field,
            hypothesis_field,
        )
    pairs.labels = np.full(len(pairs.ids), np.nan)
    return pairs


def concatenate(parts: Sequence[Pairs]) -> Pairs:
    return Pairs(
        [p for part in parts for p in part.premises],
        [h for part in parts for h in part.hypotheses],
        np.concatenate([part.labels for part in parts]),
        [i for part in parts for i in part.ids],
    )


def first(pairs: Pairs, count: int) -> Pairs:
    return Pairs(
        pairs.premises[:count], pairs.hypotheses[:count], pairs.labels[:count], pairs.ids[:count]
    )
