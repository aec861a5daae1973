"""Length buckets and the batches of a window of encoder inputs.

The encoder dominates the cost of scoring, and XLA compiles one program per
input shape. So every batch has one of a few fixed shapes `(rows(L), L)`:
`L` is a bucket length (a short list, e.g. 128 ... 2048) and the row count
keeps about `max_batch_tokens` tokens per batch. Within a window of inputs
(in input order) the inputs are sorted by length, longest first, and cut
into consecutive batches; a batch is padded to the bucket of its longest
input, so padding is bounded by the bucket spacing, and only the window's
last (shortest) batch is padded with empty rows.

With packing (`BatchingConfig.pack`), the room that padding would take is
filled instead: inputs, longest first, go into the first row that still has
room for them (first-fit decreasing), a new row of their own bucket when
none has; each row then holds up to `slots(length)` inputs side by side,
told apart by segment ids (1, 2, ... in the row, 0 for padding), and the
model attends within each segment only (block-diagonal attention), with one
decoder position per segment. The rows, longest first, are cut into
batches as unpacked inputs are.

The plan depends only on the window's contents, so re-scoring a window
reproduces every batch exactly (the resumable CLI relies on it).
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Hashable, Optional, Sequence

import numpy as np

from seahorse_metrics.option_names import option

# Spaced by at most 1.25x above 256 tokens (multiples of 64 up to 512, of 128
# up to 1024, of 256 above): padding to the bucket wastes ~6-10% of the
# tokens, for at most 16 shapes to compile up to 2048 tokens, each compiled
# only when a batch needs it.
DEFAULT_BUCKET_LENGTHS = (
    64,
    128,
    192,
    256,
    320,
    384,
    448,
    512,
    640,
    768,
    896,
    1024,
    1280,
    1536,
    1792,
    2048,
)
# About 2k tokens per batch: dense layers of a small T5 on a CPU run as fast
# per token as with 8k (the activations stay in cache), and a window's last,
# partly empty batch wastes less.
DEFAULT_MAX_BATCH_TOKENS = 2048
DEFAULT_WINDOW_SIZE = 512
# A packed row of L tokens gets one decoder position per this many tokens
# (at least 2): each costs an output-head product over the whole vocabulary
# (2 * d_model * vocab FLOPs, ~5% of a 128-token row of mT5-small), paid
# whether a segment fills it or not.
TOKENS_PER_SLOT = 128


def bucket_lengths(
    max_input_length: int, buckets: Optional[Sequence[int]] = None
) -> tuple[int, ...]:
    """The bucket lengths used for inputs of at most `max_input_length` tokens.

    The given (or default) lengths below `max_input_length`, and
    `max_input_length` itself as the last bucket.

    Raises:
      ValueError: for a non-positive bucket length.
    """
    chosen = DEFAULT_BUCKET_LENGTHS if buckets is None else tuple(int(b) for b in buckets)
    if any(b < 1 for b in chosen):
        raise ValueError(
            f"{option('buckets', '--buckets')}: bucket lengths must be positive, got {chosen}"
        )
    return tuple(sorted({b for b in chosen if b < max_input_length} | {int(max_input_length)}))


@dataclasses.dataclass(frozen=True)
class BatchingConfig:
    """Batch shapes.

    Attributes:
      buckets: Bucket lengths, ascending; the last is the longest input.
      batch_size: Maximum rows of a batch.
      max_batch_tokens: Rows of a bucket are `max_batch_tokens // length`,
        at most `batch_size`, so long buckets get fewer rows.
      row_multiple: Rows are a multiple of this (the data-parallel devices).
      window_size: Examples sorted together; larger windows pad less and
        hold more in memory.
      pack: Pack several inputs per row (see the module docstring).
    """

    buckets: tuple[int, ...]
    batch_size: int = 16
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    row_multiple: int = 1
    window_size: int = DEFAULT_WINDOW_SIZE
    pack: bool = False

    def __post_init__(self):
        for name in ("batch_size", "max_batch_tokens", "row_multiple", "window_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(
                    f"{option(name, '--' + name)} must be >= 1, got {getattr(self, name)}"
                )
        if not self.buckets or list(self.buckets) != sorted(set(self.buckets)):
            raise ValueError(
                f"{option('buckets', '--buckets')} must be distinct ascending "
                f"lengths, got {self.buckets}"
            )

    def bucket(self, length: int) -> int:
        """The smallest bucket length that holds `length` tokens.

        Raises:
          ValueError: if `length` exceeds the last bucket.
        """
        index = bisect.bisect_left(self.buckets, length)
        if index == len(self.buckets):
            raise ValueError(
                f"an input of {length} tokens exceeds the longest bucket {self.buckets[-1]}"
            )
        return self.buckets[index]

    def rows(self, length: int) -> int:
        """Rows of a batch of bucket `length` (a multiple of `row_multiple`)."""
        rows = min(self.batch_size, max(1, self.max_batch_tokens // length))
        return max(self.row_multiple, rows - rows % self.row_multiple)

    def slots(self, length: int) -> int:
        """Inputs a packed row of `length` tokens holds at most (1 unpacked)."""
        return max(2, length // TOKENS_PER_SLOT) if self.pack else 1

    def shapes(self) -> list[tuple[int, int]]:
        """Every batch shape `(rows, length)` this config can produce."""
        return [(self.rows(length), length) for length in self.buckets]


@dataclasses.dataclass
class Batch:
    """One padded batch of encoder inputs.

    Attributes:
      keys: The key of the input in each filled row (rows beyond are empty);
        packed, the key in each slot, row by row (`rows * slots` entries,
        None for an empty slot).
      tokens: int32 [rows, length], padded with the pad id.
      real_tokens: Non-padding tokens.
      segment_ids: Packed: int32 [rows, length], the slot of each token
        plus one (0 for padding); None unpacked.
    """

    keys: list[Optional[Hashable]]
    tokens: np.ndarray
    real_tokens: int
    segment_ids: Optional[np.ndarray] = None

    @property
    def slots(self) -> int:
        """Inputs per row (1 unpacked)."""
        return 1 if self.segment_ids is None else len(self.keys) // self.tokens.shape[0]


def batch_window(
    units: Sequence[tuple[Hashable, np.ndarray]], config: BatchingConfig, pad_id: int
) -> list[Batch]:
    """Cuts a window of keyed inputs into padded batches (see the module docstring).

    Args:
      units: (key, int token ids) per input, in input order.
      config: The batch shapes.
      pad_id: Padding id.

    Returns:
      The batches, longest first. Every input is in exactly one batch.
    """
    if config.pack:
        return _batch_packed(units, config, pad_id)
    # Longest first; ties keep input order, so the plan is deterministic.
    order = sorted(range(len(units)), key=lambda i: -len(units[i][1]))
    batches = []
    position = 0
    while position < len(order):
        length = config.bucket(len(units[order[position]][1]))
        rows = config.rows(length)
        members = order[position : position + rows]
        tokens = np.full((rows, length), pad_id, dtype=np.int32)
        for row, index in enumerate(members):
            ids = units[index][1]
            tokens[row, : len(ids)] = ids
        batches.append(
            Batch([units[i][0] for i in members], tokens, sum(len(units[i][1]) for i in members))
        )
        position += rows
    return batches


def _pack_rows(lengths: Sequence[int], config: BatchingConfig) -> list[tuple[int, list[int]]]:
    """First-fit decreasing: (row length, indices of its inputs) per row."""
    rows: list[tuple[int, list[int]]] = []
    room: list[int] = []
    # Longest first; ties keep input order, so the plan is deterministic.
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        length = lengths[index]
        row = next(
            (
                r
                for r, free in enumerate(room)
                if free >= length and len(rows[r][1]) < config.slots(rows[r][0])
            ),
            None,
        )
        if row is None:
            bucket = config.bucket(length)
            rows.append((bucket, []))
            room.append(bucket)
            row = len(rows) - 1
        rows[row][1].append(index)
        room[row] -= length
    return rows


def _batch_packed(
    units: Sequence[tuple[Hashable, np.ndarray]], config: BatchingConfig, pad_id: int
) -> list[Batch]:
    """`batch_window` with several inputs per row (see the module docstring)."""
    rows = _pack_rows([len(ids) for _, ids in units], config)
    # Rows longest first (they already are: each opened after the longer
    # ones), cut into batches as unpacked inputs are.
    batches = []
    position = 0
    while position < len(rows):
        length = rows[position][0]
        per_batch, slots = config.rows(length), config.slots(length)
        tokens = np.full((per_batch, length), pad_id, dtype=np.int32)
        segments = np.zeros((per_batch, length), dtype=np.int32)
        keys: list[Optional[Hashable]] = [None] * (per_batch * slots)
        real = 0
        for row, (_, indices) in enumerate(rows[position : position + per_batch]):
            offset = 0
            for slot, index in enumerate(indices):
                key, ids = units[index]
                tokens[row, offset : offset + len(ids)] = ids
                segments[row, offset : offset + len(ids)] = slot + 1
                keys[row * slots + slot] = key
                offset += len(ids)
            real += offset
        batches.append(Batch(keys, tokens, real, segments))
        position += per_batch
    return batches
