"""Training and validation examples: read once, cached, held by index.

SEAHORSE splits are small (tens of thousands of pairs per question), so the
trainer reads a seqio task split once into memory (`ExampleSet`: ragged token
arrays plus labels) and caches it as `.npz` next to the run. `batches` makes
the training batches from an `ExampleSet` by index.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.io.atomic import staged_path

logger = logging.getLogger(__name__)

CACHE_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ExampleSet:
    """Tokenised examples of one split, stored as ragged arrays.

    Attributes:
      input_tokens: All encoder inputs concatenated (int32).
      input_offsets: Start of example i's inputs is input_offsets[i]; length
        n+1.
      target_tokens: All decoder targets concatenated (int32, EOS included).
      target_offsets: Offsets into target_tokens, length n+1.
      labels: 1.0 (yes), 0.0 (no) or NaN (unknown) per example.
      ids: Example identifiers.
    """

    input_tokens: np.ndarray
    input_offsets: np.ndarray
    target_tokens: np.ndarray
    target_offsets: np.ndarray
    labels: np.ndarray
    ids: tuple[str, ...]

    @classmethod
    def from_examples(
        cls,
        inputs: Sequence[Sequence[int]],
        targets: Sequence[Sequence[int]],
        labels: Optional[Sequence[Optional[float]]] = None,
        ids: Optional[Sequence[str]] = None,
    ) -> "ExampleSet":
        """Builds a set from per-example token lists.

        Args:
          inputs: Encoder token ids per example (already truncated).
          targets: Decoder token ids per example (with EOS).
          labels: Optional binary labels (None entries become NaN).
          ids: Optional identifiers (default: the index as a string).

        Returns:
          The set.

        Raises:
          ValueError: If the sequences have different lengths or an example
            has no input or no target tokens.
        """
        count = len(inputs)
        if len(targets) != count:
            raise ValueError(f"{count} inputs but {len(targets)} targets.")
        labels = [np.nan] * count if labels is None else labels
        ids = [str(i) for i in range(count)] if ids is None else ids
        if len(labels) != count or len(ids) != count:
            raise ValueError(f"{count} examples but {len(labels)} labels and {len(ids)} ids.")
        for name, seqs in (("inputs", inputs), ("targets", targets)):
            empty = [str(ids[i]) for i, s in enumerate(seqs) if len(s) == 0]
            if empty:
                raise ValueError(f"Examples with empty {name}: {empty[:5]} ({len(empty)} in all).")

        def ragged(seqs):
            offsets = np.zeros(count + 1, np.int64)
            offsets[1:] = np.cumsum([len(s) for s in seqs])
            tokens = (
                np.concatenate([np.asarray(s, np.int32) for s in seqs])
                if count
                else np.zeros(0, np.int32)
            )
            return tokens, offsets

        input_tokens, input_offsets = ragged(inputs)
        target_tokens, target_offsets = ragged(targets)
        return cls(
            input_tokens=input_tokens,
            input_offsets=input_offsets,
            target_tokens=target_tokens,
            target_offsets=target_offsets,
            labels=np.asarray(
                [np.nan if label is None else float(label) for label in labels], np.float32
            ),
            ids=tuple(str(i) for i in ids),
        )

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def input_lengths(self) -> np.ndarray:
        return np.diff(self.input_offsets)

    @property
    def target_lengths(self) -> np.ndarray:
        return np.diff(self.target_offsets)

    def inputs(self, i: int) -> np.ndarray:
        return self.input_tokens[self.input_offsets[i] : self.input_offsets[i + 1]]

    def targets(self, i: int) -> np.ndarray:
        return self.target_tokens[self.target_offsets[i] : self.target_offsets[i + 1]]

    def take(self, count: int) -> "ExampleSet":
        """The first `count` examples (`take`)."""
        return take(self, count)

    def with_labels(self, labels: Sequence[float]) -> "ExampleSet":
        """A copy with other labels (same examples)."""
        labels = np.asarray(labels, np.float32)
        if labels.shape != (len(self),):
            raise ValueError(f"Expected {len(self)} labels, got shape {labels.shape}.")
        return dataclasses.replace(self, labels=labels)

    def save(self, path: str) -> None:
        """Writes the set as one .npz file, atomically, with the umask's permissions."""
        with staged_path(path) as temporary, open(temporary, "wb") as f:
            np.savez(
                f,
                input_tokens=self.input_tokens,
                input_offsets=self.input_offsets,
                target_tokens=self.target_tokens,
                target_offsets=self.target_offsets,
                labels=self.labels,
                ids=np.asarray(self.ids, dtype=str),
            )

    @classmethod
    def load(cls, path: str) -> "ExampleSet":
        """Reads a set written by `save`."""
        with np.load(path) as data:
            return cls(
                input_tokens=data["input_tokens"],
                input_offsets=data["input_offsets"],
                target_tokens=data["target_tokens"],
                target_offsets=data["target_offsets"],
                labels=data["labels"],
                ids=tuple(str(i) for i in data["ids"]),
            )


# --------------------------------------------------------------------------
# Reading a seqio task (lazy: seqio/TensorFlow load only here).


def _label_of(example: Mapping[str, Any]) -> float:
    value = example.get("label")
    if value is None:
        return np.nan
    value = np.asarray(value).item()
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes"):
            return 1.0
        if lowered in ("0", "false", "no"):
            return 0.0
        return np.nan
    return float(value)


def _example_id(example: Mapping[str, Any], index: int) -> str:
    value = example.get("id")
    if value is None:
        return str(index)
    value = np.asarray(value).item()
    return value.decode() if isinstance(value, bytes) else str(value)


def _seqio_examples(task, split: str, input_length: int, target_length: int):
    dataset = task.get_dataset(
        sequence_length={"inputs": input_length, "targets": target_length},
        split=split,
        shuffle=False,
        num_epochs=1,
        use_cached=False,
        trim_output_features=True,
    )
    return dataset.as_numpy_iterator()


def _project_examples(task_name: str, split: str):
    """The examples of a task registered by `seahorse_metrics.tasks`, read without
    TensorFlow (same features as its seqio dataset)."""
    from seahorse_metrics import tasks  # pylint: disable=g-import-not-at-top

    splits = tasks.task_splits(task_name)
    if split not in splits:
        raise ValueError(f"Task {task_name} has no {split!r} split (it has {list(splits)}).")
    return tasks.examples_for_task(task_name, split)


def _task_examples(task_name: str, split: str, input_length: int, target_length: int):
    """Each task's examples of the split, for a task or mixture: this package's
    own through its TensorFlow-free readers (seqio is not imported), others
    through seqio's `get_dataset`."""
    from seahorse_metrics import tasks  # pylint: disable=g-import-not-at-top

    ours = tasks.task_names_of(task_name)
    if ours is not None:
        return [_project_examples(name, split) for name in ours]
    import seqio  # pylint: disable=g-import-not-at-top

    try:
        provider = seqio.get_mixture_or_task(task_name)
    except ValueError as error:
        raise ValueError(
            f"Unknown seqio task or mixture {task_name!r}: {error}. Pass "
            "TrainConfig.data_dir so the SEAHORSE tasks get registered."
        ) from None
    members = provider.tasks if isinstance(provider, seqio.Mixture) else [provider]
    return [
        _seqio_examples(task, split, input_length, target_length)
        if tasks.task_names_of(task.name) is None
        else _project_examples(task.name, split)
        for task in members
    ]


def read_task_split(
    task_name: str, split: str, input_length: int, target_length: int
) -> ExampleSet:
    """Materialises one split of a registered seqio task or mixture.

    Tasks registered by `seahorse_metrics.tasks` are read through its
    TensorFlow-free accessor (the same tokenised examples as their seqio
    datasets, several times faster); other seqio tasks through `get_dataset`.
    Mixtures are read as the concatenation of their tasks' splits, i.e.
    examples-proportional mixing (as `seahorse_all` is defined), which the
    epoch shuffle then interleaves.

    Args:
      task_name: A registered seqio task or mixture name.
      split: "train", "validation" or "test".
      input_length: Inputs are truncated to this many tokens.
      target_length: Targets are truncated to this many tokens.

    Returns:
      The examples, in the task's deterministic (unshuffled) order.

    Raises:
      ValueError: If the task is not registered or the split is empty.
    """
    inputs, targets, labels, ids = [], [], [], []
    for examples in _task_examples(task_name, split, input_length, target_length):
        for example in examples:
            ids.append(_example_id(example, len(ids)))
            inputs.append(example["inputs"][:input_length])
            targets.append(example["targets"][:target_length])
            labels.append(_label_of(example))
    if not ids:
        raise ValueError(f"Split {split!r} of seqio task {task_name!r} has no examples.")
    logger.info("Read %d %s examples of %s.", len(ids), split, task_name)
    return ExampleSet.from_examples(inputs, targets, labels, ids)


def cache_key(**fields: Any) -> str:
    """A short stable digest of what determines a materialised split."""
    text = json.dumps({"version": CACHE_FORMAT_VERSION, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_split_path(
    cache_dir: str,
    task_name: str,
    split: str,
    input_length: int,
    target_length: int,
    fingerprint: Mapping[str, Any],
) -> str:
    """Where `load_split` caches a split."""
    key = cache_key(
        task=task_name,
        split=split,
        input_length=input_length,
        target_length=target_length,
        **fingerprint,
    )
    return os.path.join(cache_dir, f"{task_name}-{split}-{key}.npz")


def load_split(
    task_name: str,
    split: str,
    input_length: int,
    target_length: int,
    cache_dir: Optional[str],
    fingerprint: Mapping[str, Any],
    write_cache: bool = True,
) -> ExampleSet:
    """Reads a split from the cache, or from seqio and then caches it.

    Args:
      task_name: seqio task or mixture name.
      split: Split name.
      input_length: Input truncation length.
      target_length: Target truncation length.
      cache_dir: Directory of cached splits (None: no cache).
      fingerprint: Whatever else determines the examples (data directory,
        vocabulary, truncation mode); part of the cache file name.
      write_cache: Whether to write a missing cache file (one process does).

    Returns:
      The examples.
    """
    path = None
    if cache_dir:
        path = cached_split_path(
            cache_dir, task_name, split, input_length, target_length, fingerprint
        )
        if os.path.exists(path):
            logger.info("Reading cached %s examples from %s.", split, path)
            return ExampleSet.load(path)
    examples = read_task_split(task_name, split, input_length, target_length)
    if path and write_cache:
        examples.save(path)
    return examples


def take(examples: ExampleSet, count: int) -> ExampleSet:
    """The first `count` examples of a set."""
    if count >= len(examples):
        return examples
    return ExampleSet.from_examples(
        [examples.inputs(i) for i in range(count)],
        [examples.targets(i) for i in range(count)],
        examples.labels[:count].tolist(),
        examples.ids[:count],
    )
