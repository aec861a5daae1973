"""Training batches: a pure function of (seed, position) over an `ExampleSet`.

Each epoch visits the examples in a permutation drawn from `(seed, epoch)`,
and a `BatchStream`'s position (epoch, index into the permutation, examples
held over by packing) is a tiny JSON object saved with every checkpoint.
Resuming restores that position, so a restarted run sees exactly the
batches an uninterrupted run would have seen.

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
from typing import Any, Iterator, Mapping, Optional, Sequence

import numpy as np

from seahorse_metrics.training.data import ExampleSet

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
      batch_size, input_length, target_length: As `unpacked_batch`.
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
                if (
                    used_in[row] + n_in <= self.input_length
                    and used_out[row] + n_out <= self.target_length
                ):
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
    tokens = int(
        np.sum(batch["encoder_input_tokens"] != 0) + np.sum(batch["decoder_target_tokens"] != 0)
    )
    return {"examples": examples, "tokens": tokens}
