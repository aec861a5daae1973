"""Export a checkpoint to the formats other tools train and serve with.

    export_checkpoint("runs/q4/best", "hf", "exported/q4-hf")     # transformers
    export_checkpoint("runs/q4/best", "t5x", "exported/q4-t5x")   # T5X

`hf` writes a Hugging Face directory (config.json, model.safetensors,
spiece.model) that `MT5ForConditionalGeneration` (or, for T5 v1.0 networks,
`T5ForConditionalGeneration`) loads. `t5x` writes a T5X model directory:
`checkpoint_<step>/checkpoint`, the msgpack `{"version": 3, "optimizer":
{"target": ..., "state": {"step": ...}}}` whose parameters are TensorStore
specs of gzip zarr arrays beside it (`target.encoder.layers_0...`, paths
relative to the step directory), the layout T5X's own `Checkpointer` writes
and `checkpoints.load_t5x_checkpoint` reads. `state` also holds Adafactor's
`param_states` as T5X initialises them (`t5x.initial_optimizer_state`), so
T5X's default, strict restore starts training from it (the optimizer starts
afresh). `spiece.model` goes next to the step directories (and a multi-question
metric's `questions.json`, in both formats). A network with a
relative position bias per layer (`relative_bias_per_layer`: a scalable_t5
or UMT5 model) goes to `hf` as `UMT5ForConditionalGeneration` and to `t5x`
in the layout of T5X's scalable_t5 network with `scan_layers` (its mT5 and
UMT5 gin files), which alone of T5X's networks holds such biases: each
stack's layers stacked (`encoder/encoder/attention/query/kernel` [embed,
layers, heads, kv]; `t5x_scanned.scanned_arrays`).

The output is built in a staging directory beside it (`.NAME.export-XXXXXX`)
and renamed into place, so an interrupted export leaves no half-written
checkpoint. SIGTERM stops an export like Ctrl-C: its staging directory is
removed; the staging directories a killed export left (kill -9, power loss)
are removed by the next export to the same output, which says what it removed.
While it works, an export holds the lock `NAME.lock` beside the output (the
lock `score` takes on its outputs), so two exports never share a staging area.

Every export writes the marker `seahorse_export.json` (format, checkpoint,
the files written). A non-empty output directory is refused unless
`overwrite`, and `overwrite` replaces only a previous export: a directory
holding that marker and nothing but the files it lists. It never replaces
the current directory or one of its parents. Directories and files get the
permissions the user's umask gives, as `prepare` and `score` write theirs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
from typing import Any, Mapping, Optional

import numpy as np

from seahorse_metrics.checkpoints.content import LEGACY_CACHE_FILE
from seahorse_metrics.checkpoints.layout import (
    QUESTIONS_FILE,
    VOCAB_FILE,
    best_step,
    find_vocabulary,
    question_prefixes,
    questions_path,
)
from seahorse_metrics.checkpoints.params import check_params, flatten
from seahorse_metrics.checkpoints.t5x import initial_optimizer_state
from seahorse_metrics.checkpoints.t5x_scanned import scanned_arrays, scanned_axes
from seahorse_metrics.io.atomic import replace_directory, staged_path
from seahorse_metrics.io.json_files import read_json_or_none
from seahorse_metrics.model.config import T5Config

logger = logging.getLogger(__name__)

EXPORT_FORMATS = ("hf", "t5x")
T5X_VERSION = 3  # T5X's checkpoint version since 2021: bfloat16 stored natively.
# T5X cuts arrays into zarr chunks of at most 64 MiB; so do we.
_CHUNK_BYTES = 64 * 1024 * 1024
# T5X's `find_checkpoint` treats a model directory whose latest step is 0 as
# empty, so a checkpoint of unknown step is written as step 1.
_DEFAULT_STEP = 1
_STEP_DIR = re.compile(r"^checkpoint_(\d+)$")
EXPORT_MARKER = "seahorse_export.json"
_STAGING_INFIX = ".export-"
_RETIRED_INFIX = ".old-"


def chunk_shape(shape: tuple[int, ...], itemsize: int, max_bytes: int = _CHUNK_BYTES) -> list[int]:
    """A zarr chunk shape dividing `shape` whose chunks stay under `max_bytes`.

    The largest chunk dimension is cut to its next smaller divisor until the
    chunk fits, so chunks tile the array exactly.
    """
    chunks = [max(int(size), 1) for size in shape]
    while chunks and int(np.prod(chunks)) * itemsize > max_bytes:
        axis = int(np.argmax(chunks))
        size = int(shape[axis])
        chunks[axis] = (
            max(d for d in range(1, chunks[axis]) if size % d == 0) if chunks[axis] > 1 else 1
        )
    return chunks


def _write_zarr(step_dir: str, name: str, array: np.ndarray) -> dict[str, Any]:
    """Writes one parameter as a gzip zarr array; returns its relative TensorStore spec."""
    import tensorstore as ts

    spec = {
        "driver": "zarr",
        "dtype": np.dtype(array.dtype).name,
        "kvstore": {"driver": "file", "path": "target." + name.replace("/", ".")},
        "metadata": {
            "compressor": {"id": "gzip"},
            "shape": list(array.shape),
            "chunks": chunk_shape(array.shape, array.dtype.itemsize),
        },
    }
    absolute = dict(
        spec, kvstore={"driver": "file", "path": os.path.join(step_dir, spec["kvstore"]["path"])}
    )
    store = ts.open(absolute, create=True, delete_existing=True).result()
    store.write(array).result()
    return spec


def export_t5x(model_dir: str, config: T5Config, params: Mapping[str, Any], step: int) -> str:
    """Writes `params` as the T5X checkpoint `model_dir/checkpoint_<step>`
    (scalable_t5's scanned layout for `relative_bias_per_layer`); returns it.

    Raises:
      CheckpointError: if `params` do not fit `config`.
      FileExistsError: if that step directory exists.
    """
    from flax import serialization

    flat = {name: np.asarray(value, np.float32) for name, value in flatten(params).items()}
    check_params(config, flat, "params to export")
    axes = None
    if config.relative_bias_per_layer:
        flat, axes = scanned_arrays(config, flat), scanned_axes(config)
    step_dir = os.path.join(model_dir, f"checkpoint_{int(step)}")
    if os.path.exists(step_dir):
        raise FileExistsError(f"{step_dir} exists; choose another step or directory")
    with staged_path(step_dir) as staging:
        os.makedirs(staging)
        target = {}
        for name, array in flat.items():
            node = target
            *parents, leaf = name.split("/")
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = _write_zarr(staging, name, array)
        state = initial_optimizer_state(
            {name: array.shape for name, array in flat.items()}, step, axes
        )
        contents = {"version": T5X_VERSION, "optimizer": {"target": target, "state": state}}
        with open(os.path.join(staging, "checkpoint"), "wb") as handle:
            handle.write(serialization.msgpack_serialize(contents))
    logger.info("Wrote T5X checkpoint %s (%d arrays)", step_dir, len(flat))
    return step_dir


def checkpoint_step(path: str) -> Optional[int]:
    """The training step a checkpoint directory records, or None.

    `MODEL_DIR/best` records it in `best.json`; step directories
    (`checkpoint_<step>`, ours or T5X's) in their name.
    """
    step = best_step(path)
    if step is not None:
        return step
    match = _STEP_DIR.match(os.path.basename(os.path.normpath(path)))
    return int(match.group(1)) if match else None


def _check_output(source: str, output: str, overwrite: bool) -> None:
    source, output = os.path.realpath(source), os.path.realpath(output)
    if output == source or source.startswith(output + os.sep) or output.startswith(source + os.sep):
        raise ValueError(
            f"export output {output} overlaps the checkpoint {source}; "
            "choose a directory outside it"
        )
    if os.path.exists(output) and not os.path.isdir(output):
        raise FileExistsError(f"export output {output} is a file; choose a directory")
    if not os.path.isdir(output):
        return
    if os.path.commonpath([os.path.realpath(os.getcwd()), output]) == output:
        raise ValueError(
            f"export output {output} is the current directory or one of its "
            "parents; choose a new directory for the export"
        )
    if os.listdir(output):
        if not overwrite:
            raise FileExistsError(
                f"export output {output} is not empty; choose another "
                "directory or pass --overwrite to replace a previous export"
            )
        _check_previous_export(output)


def _check_previous_export(output: str) -> None:
    """Refuses to replace `output` unless it is one of our exports and holds nothing else."""
    marker = os.path.join(output, EXPORT_MARKER)
    recorded = read_json_or_none(marker)
    written = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(written, list):
        raise FileExistsError(
            f"export output {output} is not empty and is no previous export (it has no valid "
            f"{EXPORT_MARKER}); --overwrite replaces only an export: choose another directory"
        )
    # An earlier `score` of the export may have left its digest cache there.
    others = sorted(
        name
        for name in set(os.listdir(output)) - set(written) - {EXPORT_MARKER}
        if not name.startswith(LEGACY_CACHE_FILE)
    )
    if others:
        listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise FileExistsError(
            f"export output {output} holds a previous export and other files ({listed}); "
            "--overwrite would delete them: move them or choose another directory"
        )


def remove_leftover_staging(output: str) -> list[str]:
    """Removes the staging directories interrupted exports to `output` left beside it.

    Call it only while holding the output's lock (no export to `output` is
    running then).

    Returns:
      The directories removed.
    """
    parent, name = os.path.split(os.path.abspath(output))
    prefixes = (f".{name}{_STAGING_INFIX}", f".{name}{_RETIRED_INFIX}")
    removed = []
    for entry in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        path = os.path.join(parent, entry)
        if entry.startswith(prefixes) and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
            removed.append(path)
    if removed:
        logger.warning(
            "Removed %d staging director%s left by interrupted exports: %s",
            len(removed),
            "y" if len(removed) == 1 else "ies",
            ", ".join(removed),
        )
    return removed


def _replace_directory(staging: str, output: str) -> None:
    """Moves the finished `staging` to `output`, dropping what `output` held."""
    if not os.path.isdir(output):
        replace_directory(staging, output)
        return
    retired = tempfile.mkdtemp(
        dir=os.path.dirname(output), prefix=f".{os.path.basename(output)}{_RETIRED_INFIX}"
    )
    replace_directory(staging, output, os.path.join(retired, "output"))
    os.rmdir(retired)


def current_umask() -> int:
    """The process's umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _honour_umask(root: str) -> None:
    """Gives `root` and everything in it the modes a plain mkdir/open would.

    mkdtemp makes 0700 directories and some writers (safetensors) 0600 files.
    """
    mask = current_umask()
    for directory, _, files in os.walk(root, topdown=False):
        for name in files:
            os.chmod(os.path.join(directory, name), 0o666 & ~mask)
        os.chmod(directory, 0o777 & ~mask)


class _StopOnSigterm:
    """Within the block, SIGTERM raises SystemExit(143), so cleanups run.

    Only in the main thread, and not where SIGTERM is ignored.
    """

    def __enter__(self):
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGTERM)
            if previous is not signal.SIG_IGN:
                self._previous = signal.signal(signal.SIGTERM, self._stop)
        return self

    @staticmethod
    def _stop(signum, frame):
        del frame
        raise SystemExit(128 + signum)

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def _write_export(
    staging: str,
    to: str,
    checkpoint: str,
    vocab_path: Optional[str],
    step: Optional[int],
    summary: dict[str, Any],
) -> None:
    """Writes the export and its marker into `staging`; fills `summary`."""
    from seahorse_metrics.checkpoints import load_checkpoint
    from seahorse_metrics.checkpoints.hf import export_hf

    config, params = load_checkpoint(checkpoint)
    summary["config"] = config.to_dict()
    if to == "hf":
        export_hf(staging, config, params, vocab_path=vocab_path)
    else:
        summary["step"] = int(
            step if step is not None else checkpoint_step(checkpoint) or _DEFAULT_STEP
        )
        export_t5x(staging, config, params, summary["step"])
        if vocab_path is not None:
            shutil.copyfile(vocab_path, os.path.join(staging, VOCAB_FILE))
    if question_prefixes(checkpoint) is not None:  # Read first: a malformed file stops here.
        # A multi-question metric's questions go beside it, as its vocabulary does.
        shutil.copyfile(questions_path(checkpoint), os.path.join(staging, QUESTIONS_FILE))
    summary["files"] = sorted(os.listdir(staging))
    marker = {
        key: summary[key] for key in ("format", "checkpoint", "files", "step") if key in summary
    }
    with open(os.path.join(staging, EXPORT_MARKER), "w", encoding="utf-8") as handle:
        json.dump(marker, handle, indent=2, sort_keys=True)
    _honour_umask(staging)


def export_checkpoint(
    checkpoint: str,
    to: str,
    output: str,
    *,
    overwrite: bool = False,
    vocab: Optional[str] = None,
    step: Optional[int] = None,
) -> dict[str, Any]:
    """Exports any checkpoint `load_checkpoint` reads to a Hugging Face or T5X directory.

    Args:
      checkpoint: A checkpoint directory (ours, Hugging Face, T5X) or hub id,
        e.g. `MODEL_DIR/best`; a training run's MODEL_DIR means its `best/`.
      to: "hf" or "t5x".
      output: The directory to write; it must not exist or be empty unless
        `overwrite`.
      overwrite: Replace a previous export in `output` (one holding the
        marker `seahorse_export.json` and only the files it lists).
      vocab: SentencePiece model to ship with the export (default: the
        checkpoint's `spiece.model`).
      step: T5X step (default: the step the checkpoint records, else 1).

    Returns:
      A summary: format, output, files written (the marker aside), step
      (T5X), config, and `removed`: staging directories of interrupted
      exports that were removed.

    Raises:
      ValueError: for an unknown format, an output overlapping the
        checkpoint, or an output holding the current directory.
      FileExistsError: for a non-empty output without `overwrite`, or one
        that is no previous export (or holds other files too).
      FileNotFoundError: for a missing checkpoint or vocabulary.
      OutputInUseError: while another export writes the same output.
      SystemExit: on SIGTERM (status 143), after removing the staging directory.
    """
    from seahorse_metrics.io.locks import OutputLock

    if to not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {to!r}; choose one of {EXPORT_FORMATS}")
    checkpoint, vocab_path = _source(checkpoint, vocab)
    _check_output(checkpoint, output, overwrite)
    output = os.path.abspath(output)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    summary = {"format": to, "output": output, "checkpoint": checkpoint}
    with OutputLock(output), _StopOnSigterm():
        summary["removed"] = remove_leftover_staging(output)
        _check_output(checkpoint, output, overwrite)  # as it is now that we hold the lock
        _write_through_staging(output, to, checkpoint, vocab_path, step, summary)
    if vocab_path is None:
        logger.warning(
            "%s has no %s (none found with %s): pass --vocab so that it can be scored",
            output,
            VOCAB_FILE,
            checkpoint,
        )
    logger.info("Exported %s to %s (%s)", checkpoint, output, ", ".join(summary["files"]))
    return summary


def _write_through_staging(
    output: str,
    to: str,
    checkpoint: str,
    vocab_path: Optional[str],
    step: Optional[int],
    summary: dict[str, Any],
) -> None:
    """Writes the export into a new staging directory beside `output`, then puts
    it in `output`'s place; an export that stops removes its staging directory."""
    staging = tempfile.mkdtemp(
        dir=os.path.dirname(output), prefix=f".{os.path.basename(output)}{_STAGING_INFIX}"
    )
    try:
        _write_export(staging, to, checkpoint, vocab_path, step, summary)
        _replace_directory(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        logger.warning("Export to %s stopped; removed its staging directory %s", output, staging)
        raise


def _source(checkpoint: str, vocab: Optional[str]) -> tuple[str, Optional[str]]:
    """The checkpoint directory to export (hub id resolved, MODEL_DIR -> best/)
    and the vocabulary to ship with it."""
    from seahorse_metrics.checkpoints.hub import resolve_checkpoint

    checkpoint = resolve_checkpoint(checkpoint)
    vocab_path = vocab if vocab is not None else _checkpoint_vocabulary(checkpoint)
    if vocab_path is not None and not os.path.isfile(vocab_path):
        raise FileNotFoundError(f"vocabulary {vocab_path} does not exist")
    return checkpoint, vocab_path


def _checkpoint_vocabulary(checkpoint: str) -> Optional[str]:
    return find_vocabulary(checkpoint)
