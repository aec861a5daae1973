"""Checkpoints of a training run: resumable state and the best model.

`MODEL_DIR/checkpoints/` is one Orbax `CheckpointManager` that saves, at the
same step and atomically, the train state (params, optimizer state, step,
dropout key) and a small JSON record of the data position and the
best-so-far validation result; the last `keep` are kept. Restarting a run on
the same MODEL_DIR restores the latest one and continues exactly; a
checkpoint that cannot be read (a file cut short or damaged) is moved to
`MODEL_DIR/checkpoints_damaged/` with a warning saying why, and the next
older one is used.

`MODEL_DIR/best/` is a standalone scoring checkpoint (the project's own
format, `seahorse_metrics.checkpoints.save_checkpoint`, plus the vocabulary
`spiece.model` and `best.json`) of the step with the best validation ROC-AUC,
the paper's selection rule; `Scorer.load(MODEL_DIR/best)` reads it. Its files
are per layer (`encoder/layers_0/...`) also when the run scans its layers
(`T5Config.scan_layers`): any scorer, exporter or later run reads them.
The resumable state in `checkpoints/` is saved as the run holds it (stacked
when scanned), which is why `scan_layers` cannot change on resume.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from typing import Any, Mapping, Optional

import jax
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from seahorse_metrics import checkpoints as checkpoint_formats
from seahorse_metrics.checkpoints.layout import BEST_RECORD, VOCAB_FILE, write_question_prefixes
from seahorse_metrics.io.atomic import replace_directory, restore_directory, write_json_atomically
from seahorse_metrics.io.json_files import read_json
from seahorse_metrics.model import stacks

logger = logging.getLogger(__name__)

STATE_ITEM = "state"
RECORD_ITEM = "record"


class RunCheckpoints:
    """The Orbax checkpoints of one run (state + data position record).

    Args:
      directory: Where the checkpoints live (MODEL_DIR/checkpoints).
      keep: How many of the most recent checkpoints to keep (None: all).
      async_save: Write in a background thread while training goes on.
    """

    def __init__(self, directory: str, keep: Optional[int], async_save: bool = True):
        self.directory = os.path.abspath(directory)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=True,
            # Leftovers of a save interrupted by a crash are removed on restart.
            cleanup_tmp_directories=True,
            enable_async_checkpointing=async_save,
        )
        self._manager = ocp.CheckpointManager(
            self.directory, options=options, item_names=(STATE_ITEM, RECORD_ITEM)
        )

    def latest_step(self) -> Optional[int]:
        """The step of the newest complete checkpoint, or None."""
        return self._manager.latest_step()

    def save(self, step: int, state, record: Mapping[str, Any]) -> None:
        """Saves the state and the JSON record at `step` (asynchronously)."""
        self._manager.save(
            step,
            args=ocp.args.Composite(
                **{
                    STATE_ITEM: ocp.args.StandardSave(state),
                    RECORD_ITEM: ocp.args.JsonSave(dict(record)),
                }
            ),
            force=True,
        )

    def restore(self, step: int, abstract_state) -> tuple[Any, dict[str, Any]]:
        """Restores (state, record) of `step` into the shardings of `abstract_state`."""
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                **{
                    STATE_ITEM: ocp.args.StandardRestore(abstract_state),
                    RECORD_ITEM: ocp.args.JsonRestore(),
                }
            ),
        )
        return restored[STATE_ITEM], dict(restored[RECORD_ITEM])

    def restore_latest(self, abstract_state) -> Optional[tuple[int, Any, dict[str, Any]]]:
        """(step, state, record) of the newest checkpoint that can be read, or None.

        A checkpoint that fails to restore is moved aside (see the module
        docstring) and the next older one is tried.

        Raises:
          CheckpointError: if there are checkpoints and none can be read (they
            are moved aside, so a rerun starts over).
        """
        failures = []
        for step in sorted(self._manager.all_steps(), reverse=True):
            try:
                state, record = self.restore(step, abstract_state)
            except Exception as error:  # Orbax/TensorStore raise many types for damaged files
                reason = " ".join(str(error).split())[:300] or type(error).__name__
                failures.append(f"step {step}: {type(error).__name__}: {reason}")
                moved = self._set_aside(step)
                logger.warning(
                    "Checkpoint step %d of %s cannot be read (%s: %s); moved it to %s "
                    "and trying the previous one.",
                    step,
                    self.directory,
                    type(error).__name__,
                    reason,
                    moved,
                )
                continue
            return step, state, record
        if failures:
            raise checkpoint_formats.CheckpointError(
                f"none of the checkpoints in {self.directory} can be read ({'; '.join(failures)});"
                f" they were moved to {self.directory}_damaged, so running again starts over"
            )
        return None

    def _set_aside(self, step: int) -> str:
        """Moves a damaged step out of the manager's directory; returns where."""
        target = os.path.join(f"{self.directory}_damaged", str(step))
        if jax.process_index() == 0:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            suffix = 1
            while os.path.exists(target):
                suffix += 1
                target = os.path.join(f"{self.directory}_damaged", f"{step}.{suffix}")
            os.replace(os.path.join(self.directory, str(step)), target)
        _barrier(f"checkpoint_set_aside_{step}")
        self._manager.reload()
        return target

    def wait(self) -> None:
        """Blocks until pending saves are on disk."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()


def _barrier(name: str) -> None:
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def per_layer(model_config, params) -> tuple[Any, Any]:
    """(config, params) as checkpoint files hold them: per layer, with the
    execution-only settings (`scan_layers`, `remat`) at their defaults."""
    if not model_config.scan_layers:
        return model_config.replace(remat="none"), params
    return model_config.replace(scan_layers=False, remat="none"), stacks.unstack_layers(params)


def is_better(value: Optional[float], best: Optional[float]) -> bool:
    """The selection rule: a defined value strictly above the best so far."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return best is None or value > best


class BestCheckpoint:
    """Keeps the checkpoint with the best validation ROC-AUC in MODEL_DIR/best.

    Args:
      directory: Where the best checkpoint lives (MODEL_DIR/best).
      vocabulary_path: SentencePiece model copied next to the checkpoint so
        the directory is self-contained (None: not copied).
      metric: The validation metric that decides (higher is better).
      questions: A multi-question model's `QuestionPrefixes`, written beside
        it as `questions.json` (None: a metric of one question).
    """

    def __init__(
        self,
        directory: str,
        vocabulary_path: Optional[str],
        metric: str = "roc_auc",
        questions: Optional[Any] = None,
    ):
        self.directory = os.path.abspath(directory)
        self.vocabulary_path = vocabulary_path
        self.metric = metric
        self.questions = questions
        if jax.process_index() == 0:
            # A crash between the two renames of `replace_directory`: the old
            # best checkpoint is still the best one saved.
            restore_directory(self.directory)

    def read_record(self) -> Optional[dict[str, Any]]:
        """The contents of best.json, or None when nothing has been kept yet."""
        path = os.path.join(self.directory, BEST_RECORD)
        if not os.path.exists(path):
            return None
        return read_json(path, "best checkpoint record")

    def save(self, step: int, model_config, params, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Writes `params` of `step` as the best checkpoint, replacing the old one.

        Every process must call this (the parameters may be sharded over
        hosts); only process 0 writes the JSON record and the vocabulary.

        Returns:
          The record written to best.json.
        """
        staging = f"{self.directory}.tmp"
        if jax.process_index() == 0 and os.path.exists(staging):
            shutil.rmtree(staging)
        _barrier("best_checkpoint_staging")
        # The files are per layer whatever the network runs (scanned layers
        # are sliced apart here; the slices are released after the write).
        files_config, files_params = per_layer(model_config, params)
        checkpoint_formats.save_checkpoint(staging, files_config, files_params)
        record = {"step": int(step), "metric": self.metric, "metrics": dict(metrics)}
        if jax.process_index() == 0:
            if self.vocabulary_path:
                shutil.copyfile(self.vocabulary_path, os.path.join(staging, VOCAB_FILE))
            if self.questions is not None:
                write_question_prefixes(staging, self.questions)
            write_json_atomically(
                os.path.join(staging, BEST_RECORD), record, sort_keys=True, newline=True
            )
            replace_directory(staging, self.directory)
        logger.info(
            "New best checkpoint at step %d (%s=%s) in %s.",
            step,
            self.metric,
            metrics.get(self.metric),
            self.directory,
        )
        return record
