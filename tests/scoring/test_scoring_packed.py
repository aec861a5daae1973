"""Packed scoring (several inputs per row, block-diagonal attention) gives the
unpacked scores: against Hugging Face PyTorch one pair at a time, to float
rounding, in every scoring mode."""

import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.scoring import batching

from fixtures import scoring_reference as ref

FAST = {"xla_backend_optimization_level": 0}


@pytest.fixture(autouse=True)
def many_slots(monkeypatch):
    # One decoder position per 16 tokens: a 128-token row holds up to 8 of the
    # tiny inputs, so rows really mix several of them.
    monkeypatch.setattr(batching, "TOKENS_PER_SLOT", 16)


@pytest.fixture(scope="module")
def pairs():
    return ref.random_pairs(23, seed=1, max_words=20)


@pytest.fixture(scope="module")
def expected(tiny_hf_model, tiny_vocab_path, pairs):
    tokenizer = SentencePieceTokenizer(tiny_vocab_path)
    return ref.hf_scores(tiny_hf_model, tokenizer, tiny_vocab_path, *pairs)


def test_packed_scores_equal_hf_and_pad_less(tiny_hf_dir, pairs, expected):
    options = dict(bucket_lengths=(48,), max_input_length=128, batch_size=4, compiler_options=FAST)
    packed = Scorer.load(tiny_hf_dir, packing=True, **options)
    output = packed.score_detailed(*pairs)
    np.testing.assert_allclose(output.scores["score"], expected, rtol=1e-5, atol=1e-8)
    unpacked = Scorer.load(tiny_hf_dir, **options).score_detailed(*pairs)
    assert output.stats.batch_tokens < 0.85 * unpacked.stats.batch_tokens
    assert output.stats.batches < unpacked.stats.batches
    assert output.metadata["batching"]["packing"] is True
    # Streaming records and a resumed order go through the same plan.
    records = [{"article": p, "summary": h} for p, h in zip(*pairs)]
    streamed = [r["score"] for r in packed.score_records(records)]
    np.testing.assert_allclose(streamed, expected, rtol=1e-5, atol=1e-8)


def test_packed_precompile_covers_every_packed_shape(tiny_hf_dir, pairs):
    scorer = Scorer.load(
        tiny_hf_dir,
        packing=True,
        bucket_lengths=(48,),
        max_input_length=128,
        batch_size=4,
        compiler_options=FAST,
    )
    scorer.precompile()
    runner = scorer.multi.engines[0]
    config = scorer.multi.batching()
    assert all(
        runner.is_compiled(rows, length, config.slots(length)) for rows, length in config.shapes()
    )


def test_packed_multiscorer_chunks_and_sentences(tiny_hf_dir, pairs):
    # A few sentences leave their article less than a quarter of 48 tokens: cut them.
    options = dict(
        bucket_lengths=(24, 48),
        max_input_length=48,
        long_inputs="chunk",
        per_sentence=True,
        long_summaries="cut",
        compiler_options=FAST,
    )
    premises = [p + " " + p for p in pairs[0]]  # several premises need chunks
    hypotheses = [h + " And one more." for h in pairs[1]]
    plain = MultiScorer.load({"a": tiny_hf_dir, "b": tiny_hf_dir}, **options)
    packed = MultiScorer.load({"a": tiny_hf_dir, "b": tiny_hf_dir}, packing=True, **options)
    want = plain.score_detailed(premises, hypotheses)
    got = packed.score_detailed(premises, hypotheses)
    assert got.stats.chunked_examples == want.stats.chunked_examples > 0
    assert got.stats.model_inputs == want.stats.model_inputs > 2 * len(premises)
    for name in ("a", "b"):
        np.testing.assert_allclose(got.scores[name], want.scores[name], rtol=1e-5, atol=1e-8)
        for g, w in zip(got.sentence_scores[name], want.sentence_scores[name]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-8)
