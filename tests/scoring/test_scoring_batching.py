"""Length buckets, batch plans and input order, without a model."""

import collections
import dataclasses
import random

import numpy as np
import pytest

from seahorse_metrics.scoring import batching
from seahorse_metrics.scoring.rows import window_rows
from seahorse_metrics.scoring.window_scoring import ExampleResult, in_input_order


def units_of(lengths):
    return [(i, np.arange(1, n + 1, dtype=np.int32)) for i, n in enumerate(lengths)]


def test_bucket_lengths_end_at_the_maximum():
    assert batching.bucket_lengths(2048) == batching.DEFAULT_BUCKET_LENGTHS
    assert batching.bucket_lengths(300) == (64, 128, 192, 256, 300)
    assert batching.bucket_lengths(32, [16, 64]) == (16, 32)
    with pytest.raises(ValueError, match="positive"):
        batching.bucket_lengths(32, [0, 16])


def test_rows_follow_the_token_budget_and_the_devices():
    config = batching.BatchingConfig(
        buckets=(64, 512, 2048), batch_size=32, max_batch_tokens=4096, row_multiple=4
    )
    assert config.shapes() == [(32, 64), (8, 512), (4, 2048)]
    assert batching.BatchingConfig(buckets=(64,), batch_size=6, row_multiple=4).rows(64) == 4
    with pytest.raises(ValueError, match="exceeds the longest bucket"):
        config.bucket(2049)


def test_plan_covers_every_input_once_with_fixed_shapes_and_bounded_padding():
    rng = random.Random(0)
    lengths = [int(min(2048, max(3, rng.lognormvariate(6.0, 0.7)))) for _ in range(300)]
    config = batching.BatchingConfig(buckets=batching.bucket_lengths(2048), batch_size=16)
    plan = batching.batch_window(units_of(lengths), config, pad_id=0)
    keys = [key for batch in plan for key in batch.keys]
    assert sorted(keys) == list(range(len(lengths)))
    shapes = set(config.shapes())
    for batch in plan:
        assert batch.tokens.shape in shapes
        for row, key in enumerate(batch.keys):
            assert (batch.tokens[row, : lengths[key]] == np.arange(1, lengths[key] + 1)).all()
            assert (batch.tokens[row, lengths[key] :] == 0).all()
        assert not batch.tokens[len(batch.keys) :].any()  # empty rows are padding
    real = sum(lengths)
    total = sum(batch.tokens.size for batch in plan)
    assert real == sum(batch.real_tokens for batch in plan)
    assert total / real < 1.35
    # The plan depends only on the window: the same inputs give the same batches.
    again = batching.batch_window(units_of(lengths), config, pad_id=0)
    assert [b.keys for b in again] == [b.keys for b in plan]


def test_in_input_order_restores_order_and_holds_only_early_arrivals():
    results = [ExampleResult(k, np.zeros(1), None, None, 1, False, False) for k in range(50)]
    shuffled = results[:]
    random.Random(1).shuffle(shuffled)
    groups = [shuffled[i : i + 7] for i in range(0, 50, 7)]
    pending = collections.deque(range(50))
    assert [r.key for r in in_input_order(iter(groups), pending)] == list(range(50))
    with pytest.raises(RuntimeError, match="bug"):
        list(in_input_order(iter([results[:3]]), collections.deque(range(4))))


def test_window_rows_cuts_by_row_number():
    assert [len(w) for w in window_rows(range(10), 4, key=lambda row: row)] == [4, 4, 2]
    assert list(window_rows([], 4)) == []
    # Rows missing from a stretch (already written, or filtered) do not move the cuts.
    assert window_rows([1, 2, 5, 9], 4, key=lambda row: row).__next__() == [1, 2]


def test_packed_plan_fills_padding_with_whole_inputs_in_segments(monkeypatch):
    monkeypatch.setattr(batching, "TOKENS_PER_SLOT", 32)
    rng = random.Random(0)
    lengths = [int(min(512, max(3, rng.lognormvariate(4.5, 0.9)))) for _ in range(200)]
    units = units_of(lengths)
    config = batching.BatchingConfig(buckets=(64, 128, 256, 512), batch_size=16, pack=True)
    plan = batching.batch_window(units, config, pad_id=0)
    keys = [key for batch in plan for key in batch.keys if key is not None]
    assert sorted(keys) == list(range(len(lengths)))
    shapes = set(config.shapes())
    for batch in plan:
        rows, length = batch.tokens.shape
        assert (rows, length) in shapes and batch.slots == config.slots(length) > 1
        assert batch.segment_ids.shape == batch.tokens.shape
        for row in range(rows):
            offset = 0
            for slot in range(batch.slots):
                key = batch.keys[row * batch.slots + slot]
                if key is None:
                    continue
                # Each input lies whole and in order in its own segment, packed left.
                span = slice(offset, offset + lengths[key])
                assert (batch.tokens[row, span] == np.arange(1, lengths[key] + 1)).all()
                assert (batch.segment_ids[row, span] == slot + 1).all()
                offset += lengths[key]
            assert (
                not batch.tokens[row, offset:].any() and not batch.segment_ids[row, offset:].any()
            )
    packed_total = sum(batch.tokens.size for batch in plan)
    assert sum(batch.real_tokens for batch in plan) == sum(lengths)
    unpacked = batching.batch_window(units, dataclasses.replace(config, pack=False), pad_id=0)
    assert packed_total < 0.8 * sum(batch.tokens.size for batch in unpacked)
    again = batching.batch_window(units, config, pad_id=0)
    assert [b.keys for b in again] == [b.keys for b in plan]
    # Unpacked configs keep one input per row.
    assert dataclasses.replace(config, pack=False).slots(512) == 1 and unpacked[0].slots == 1
