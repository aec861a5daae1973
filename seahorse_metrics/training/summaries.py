"""Where training metrics go: a JSONL log, TensorBoard event files, a progress bar.

Only process 0 writes; the other processes of a multi-host run hold a writer
that does nothing, so the training loop never asks which process it is on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import Any, Mapping, Optional

import tqdm

from seahorse_metrics.io.atomic import write_atomically

logger = logging.getLogger(__name__)

LOG_FILE = "train_log.jsonl"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _summary_writer_class() -> Any:
    """tensorboardX's `SummaryWriter`, imported without PyTorch.

    Where PyTorch is installed, importing tensorboardX imports it too (about a second of every
    `train` start), only so that it can accept torch tensors; the trainer writes floats. Hiding
    torch for that one import leaves tensorboardX on its NumPy path.
    """
    import sys

    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None  # `import torch` raises ImportError
    try:
        from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
    finally:
        if hide:
            del sys.modules["torch"]
    return SummaryWriter


class MetricsWriter:
    """Appends metrics to MODEL_DIR/train_log.jsonl and TensorBoard events.

    Each JSONL line is `{"step": s, "split": "train"|"validation", ...}`;
    TensorBoard gets the same scalars under `<split>/<name>`. A run that
    starts at `start_step` (a resume) first drops the records of later steps
    that an interrupted run had logged, since those steps are done again:
    each step appears once in the log.

    Args:
      model_dir: The run directory.
      enabled: False on every process but the first.
      start_step: The step the run starts from (0 for a new run).
    """

    def __init__(self, model_dir: str, enabled: bool = True, start_step: int = 0):
        self.enabled = enabled
        self._log = None
        self._tensorboard = None
        if enabled:
            os.makedirs(model_dir, exist_ok=True)
            path = os.path.join(model_dir, LOG_FILE)
            dropped = _drop_records_after(path, start_step)
            self._log = open(path, "a", encoding="utf-8")
            SummaryWriter = _summary_writer_class()
            # purge_step: TensorBoard hides the earlier run's events of the redone steps.
            self._tensorboard = SummaryWriter(
                os.path.join(model_dir, "tensorboard"),
                purge_step=start_step + 1 if dropped else None,
            )

    def write(self, step: int, split: str, metrics: Mapping[str, Any]) -> None:
        """Records `metrics` of `split` at `step`."""
        if not self.enabled:
            return
        record = {
            "step": int(step),
            "split": split,
            **{k: _jsonable(v) for k, v in metrics.items()},
        }
        self._log.write(json.dumps(record, sort_keys=True) + "\n")
        self._log.flush()
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and value is not None and math.isfinite(value):
                self._tensorboard.add_scalar(f"{split}/{name}", value, step)
        self._tensorboard.flush()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._tensorboard.close()
            self._log = self._tensorboard = None

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _drop_records_after(path: str, step: int) -> int:
    """Rewrites the log without records of steps after `step`; returns how many
    were dropped. A torn last line (a killed run) is dropped too."""
    if not os.path.exists(path):
        return 0
    kept, dropped, unterminated = [], 0, False
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                dropped += 1
                continue
            if isinstance(record, dict) and int(record.get("step", 0)) > step:
                dropped += 1
            else:
                unterminated |= not line.endswith("\n")
                kept.append(line if line.endswith("\n") else line + "\n")
    if dropped or unterminated:
        logger.info(
            "%s: dropping %d records after step %d (those steps run again)", path, dropped, step
        )
        write_atomically(path, lambda handle: handle.writelines(kept))
    return dropped


class Throughput:
    """Examples/s and real tokens/s over the steps since the last reading."""

    def __init__(self):
        self._start = time.perf_counter()
        self._examples = 0
        self._tokens = 0

    def add(self, examples: int, tokens: int) -> None:
        self._examples += examples
        self._tokens += tokens

    def read(self) -> dict[str, float]:
        """Rates since the last `read`, then starts a new window."""
        now = time.perf_counter()
        elapsed = max(now - self._start, 1e-9)
        rates = {
            "examples_per_sec": self._examples / elapsed,
            "tokens_per_sec": self._tokens / elapsed,
        }
        self._start, self._examples, self._tokens = now, 0, 0
        return rates


def progress_bar(total: int, initial: int, enabled: bool) -> Optional[tqdm.tqdm]:
    """A tqdm bar over the train steps (None where disabled)."""
    if not enabled:
        return None
    return tqdm.tqdm(total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True)
