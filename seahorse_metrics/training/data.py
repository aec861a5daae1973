"""Training and validation examples: materialised once, batched by index.

SEAHORSE splits are small (tens of thousands of pairs per question), so the
trainer reads a seqio task split once into memory (`ExampleSet`: ragged token
arrays plus labels) and caches it as `.npz` next to the run. Batches are then
a pure function of (seed, position): each epoch visits the examples in a
permutation drawn from `(seed, epoch)`, and a `BatchStream`'s position
(epoch, index into the permutation, examples held over by packing) is a tiny
JSON object saved with every checkpoint. Resuming restores that position, so
a restarted run sees exactly the batches an uninterrupted run would have seen.

Every process computes the same global batch (token ids are cheap) and
hands its devices their slices (`sharding.global_batch`), so a run on two
hosts trains on exactly the batches of a run on one.

Features follow T5X/seqio's encoder-decoder converter: encoder_input_tokens,
decoder_target_tokens, decoder_input_tokens (targets shifted right, starting
with the decoder start id), decoder_loss_weights and, when packing,
encoder/decoder_segment_ids and _positions.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from typing import Any, Iterator, Mapping, Optional, Sequence

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
            tokens = np.concatenate([np.asarray(s, np.int32) for s in seqs]) if count else np.zeros(0, np.int32)
            return tokens, offsets

        input_tokens, input_offsets = ragged(inputs)
        target_tokens, target_offsets = ragged(targets)
        return cls(
            input_tokens=input_tokens,
            input_offsets=input_offsets,
            target_tokens=target_tokens,
            target_offsets=target_offsets,
            labels=np.asarray([np.nan if l is None else float(l) for l in labels], np.float32),
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
    TensorFlow (same features as its seqio dataset), or None for other tasks."""
    from seahorse_metrics import tasks  # pylint: disable=g-import-not-at-top

    try:
        splits = tasks.task_splits(task_name)
    except ValueError:
        return None
    if split not in splits:
        raise ValueError(f"Task {task_name} has no {split!r} split (it has {list(splits)}).")
    return tasks.examples_for_task(task_name, split)


def read_task_split(task_name: str, split: str, input_length: int, target_length: int) -> ExampleSet:
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
    import seqio  # pylint: disable=g-import-not-at-top

    try:
        provider = seqio.get_mixture_or_task(task_name)
    except ValueError as error:
        raise ValueError(
            f"Unknown seqio task or mixture {task_name!r}: {error}. Pass "
            "TrainConfig.data_dir so the SEAHORSE tasks get registered."
        ) from None
    tasks = provider.tasks if isinstance(provider, seqio.Mixture) else [provider]
    inputs, targets, labels, ids = [], [], [], []
    for task in tasks:
        examples = _project_examples(task.name, split)
        if examples is None:
            examples = _seqio_examples(task, split, input_length, target_length)
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
        task=task_name, split=split, input_length=input_length, target_length=target_length, **fingerprint
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
        path = cached_split_path(cache_dir, task_name, split, input_length, target_length, fingerprint)
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


# --------------------------------------------------------------------------
# Features.


def _shift_right(targets: np.ndarray, start_id: int) -> np.ndarray:
    shifted = np.full_like(targets, start_id)
    shifted[1:] = targets[:-1]
    return shifted


def unpacked_batch(
    examples: ExampleSet,
    indices: Sequence[int],
    batch_size: int,
    input_length: int,
    target_length: int,
    decoder_start_id: int,
) -> dict[str, np.ndarray]:
    """One example per row, padded (rows beyond `indices` are all padding).

    Args:
      examples: The example set.
      indices: Example indices, at most `batch_size`.
      batch_size: Number of rows.
      input_length: Encoder length.
      target_length: Decoder length.
      decoder_start_id: Token fed to the decoder before the first target.

    Returns:
      T5X encoder-decoder features as int32 numpy arrays.
    """
    enc = np.zeros((batch_size, input_length), np.int32)
    tgt = np.zeros((batch_size, target_length), np.int32)
    dec_in = np.zeros((batch_size, target_length), np.int32)
    for row, index in enumerate(indices):
        inputs = examples.inputs(index)[:input_length]
        targets = examples.targets(index)[:target_length]
        enc[row, : len(inputs)] = inputs
        tgt[row, : len(targets)] = targets
        dec_in[row, : len(targets)] = _shift_right(targets, decoder_start_id)
    return {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": dec_in,
        "decoder_target_tokens": tgt,
        "decoder_loss_weights": (tgt != 0).astype(np.int32),
    }


def packed_batch(
    examples: ExampleSet,
    rows: Sequence[Sequence[int]],
    batch_size: int,
    input_length: int,
    target_length: int,
    decoder_start_id: int,
) -> dict[str, np.ndarray]:
    """Several examples per row, told apart by segment ids and positions.

    Args:
      examples: The example set.
      rows: Example indices per row (at most `batch_size` rows), each row's
        inputs fitting `input_length` and targets `target_length`.
      batch_size: Number of rows.
      input_length: Encoder length.
      target_length: Decoder length.
      decoder_start_id: Token fed to the decoder before each segment's first
        target.

    Returns:
      T5X packed encoder-decoder features as int32 numpy arrays; segment ids
      count from 1 in each row, 0 marks padding.
    """
    shape_in, shape_out = (batch_size, input_length), (batch_size, target_length)
    features = {
        "encoder_input_tokens": np.zeros(shape_in, np.int32),
        "encoder_segment_ids": np.zeros(shape_in, np.int32),
        "encoder_positions": np.zeros(shape_in, np.int32),
        "decoder_input_tokens": np.zeros(shape_out, np.int32),
        "decoder_target_tokens": np.zeros(shape_out, np.int32),
        "decoder_segment_ids": np.zeros(shape_out, np.int32),
        "decoder_positions": np.zeros(shape_out, np.int32),
    }
    for row, indices in enumerate(rows):
        enc_at = dec_at = 0
        for segment, index in enumerate(indices, start=1):
            inputs, targets = examples.inputs(index), examples.targets(index)
            n_in, n_out = len(inputs), len(targets)
            if enc_at + n_in > input_length or dec_at + n_out > target_length:
                raise ValueError(f"Row {row} of the packed batch overflows at example {index}.")
            enc, dec = slice(enc_at, enc_at + n_in), slice(dec_at, dec_at + n_out)
            features["encoder_input_tokens"][row, enc] = inputs
            features["encoder_segment_ids"][row, enc] = segment
            features["encoder_positions"][row, enc] = np.arange(n_in)
            features["decoder_target_tokens"][row, dec] = targets
            features["decoder_input_tokens"][row, dec] = _shift_right(targets, decoder_start_id)
            features["decoder_segment_ids"][row, dec] = segment
            features["decoder_positions"][row, dec] = np.arange(n_out)
            enc_at, dec_at = enc_at + n_in, dec_at + n_out
    features["decoder_loss_weights"] = (features["decoder_segment_ids"] > 0).astype(np.int32)
    return features


# --------------------------------------------------------------------------
# The stream of training batches.


@dataclasses.dataclass
class StreamPosition:
    """Where a `BatchStream` stands; JSON-serialisable.

    Attributes:
      epoch: Current pass over the data (0-based).
      index: Next position in the current epoch's permutation.
      pending: Example indices drawn but held over by packing (they go
        first into the next batch).
      examples_seen: Examples placed into batches so far.
    """

    epoch: int = 0
    index: int = 0
    pending: list[int] = dataclasses.field(default_factory=list)
    examples_seen: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "StreamPosition":
        return cls(
            epoch=int(data["epoch"]),
            index=int(data["index"]),
            pending=[int(i) for i in data.get("pending", [])],
            examples_seen=int(data.get("examples_seen", 0)),
        )


class BatchStream:
    """Deterministic, resumable stream of training batches over an ExampleSet.

    Without packing each batch holds the next `batch_size` examples of the
    epoch permutation (crossing into the next epoch when one ends). With
    packing, examples are placed first-fit into `batch_size` rows of
    `input_length` encoder and `packed_target_length` decoder tokens; an
    example that fits no row is held over for the next batch, and the batch
    closes once `batch_size` examples have been held over (a bounded
    look-ahead, so every example is used once per epoch).

    Args:
      examples: The training examples.
      batch_size: Global batch size (rows).
      input_length: Encoder length.
      target_length: Decoder length of a row.
      decoder_start_id: Decoder start token id.
      seed: Seeds the per-epoch permutations.
      pack: Whether to pack several examples per row.
      position: Where to start (default: the beginning).
    """

    def __init__(
        self,
        examples: ExampleSet,
        batch_size: int,
        input_length: int,
        target_length: int,
        decoder_start_id: int,
        seed: int,
        pack: bool = False,
        position: Optional[StreamPosition] = None,
    ):
        if len(examples) == 0:
            raise ValueError("Cannot train on an empty example set.")
        if pack:
            too_long = int(np.sum(examples.target_lengths > target_length))
            if too_long:
                raise ValueError(
                    f"{too_long} examples have more than target_length={target_length} "
                    "target tokens; raise the packed target length."
                )
        self.examples = examples
        self.batch_size = batch_size
        self.input_length = input_length
        self.target_length = target_length
        self.decoder_start_id = decoder_start_id
        self.seed = seed
        self.pack = pack
        self.position = position or StreamPosition()
        self._permutation_epoch = -1
        self._permutation = np.zeros(0, np.int64)

    def permutation(self, epoch: int) -> np.ndarray:
        """The visiting order of the examples in `epoch`."""
        if epoch != self._permutation_epoch:
            rng = np.random.default_rng([self.seed, epoch])
            self._permutation = rng.permutation(len(self.examples))
            self._permutation_epoch = epoch
        return self._permutation

    def _draw(self) -> int:
        order = self.permutation(self.position.epoch)
        if self.position.index >= len(order):
            self.position.epoch += 1
            self.position.index = 0
            order = self.permutation(self.position.epoch)
        index = int(order[self.position.index])
        self.position.index += 1
        return index

    def _next_rows(self) -> list[list[int]]:
        if not self.pack:
            return [[self._draw()] for _ in range(self.batch_size)]
        enc_len, dec_len = self.examples.input_lengths, self.examples.target_lengths
        rows: list[list[int]] = []
        used_in: list[int] = []
        used_out: list[int] = []
        candidates, held = list(self.position.pending), []
        while len(held) < self.batch_size:
            index = candidates.pop(0) if candidates else self._draw()
            n_in, n_out = min(int(enc_len[index]), self.input_length), int(dec_len[index])
            for row in range(len(rows)):
                if used_in[row] + n_in <= self.input_length and used_out[row] + n_out <= self.target_length:
                    rows[row].append(index)
                    used_in[row] += n_in
                    used_out[row] += n_out
                    break
            else:
                if len(rows) < self.batch_size:
                    rows.append([index])
                    used_in.append(n_in)
                    used_out.append(n_out)
                else:
                    held.append(index)
        self.position.pending = held + candidates
        return rows

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        rows = self._next_rows()
        self.position.examples_seen += sum(len(r) for r in rows)
        build = packed_batch if self.pack else unpacked_batch
        rows_or_indices = rows if self.pack else [r[0] for r in rows]
        return build(
            self.examples,
            rows_or_indices,
            self.batch_size,
            self.input_length,
            self.target_length,
            self.decoder_start_id,
        )


def batch_stats(batch: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Examples and real (non-padding) tokens in a host batch."""
    if "encoder_segment_ids" in batch:
        examples = int(sum(len(np.unique(r[r > 0])) for r in batch["decoder_segment_ids"]))
    else:
        examples = int(np.sum(batch["decoder_target_tokens"][:, 0] != 0))
    tokens = int(np.sum(batch["encoder_input_tokens"] != 0) + np.sum(batch["decoder_target_tokens"] != 0))
    return {"examples": examples, "tokens": tokens}
