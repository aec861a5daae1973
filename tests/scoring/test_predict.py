"""Scorer and MultiScorer against Hugging Face PyTorch (tiny random mT5)."""

import os
import shutil

import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.checkpoints import load_checkpoint, save_checkpoint
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.engines import jax_engine

from fixtures import scoring_reference as ref
from fixtures import tiny_model

PREMISES = [
    "the quick brown fox jumps over the lazy dog " * 6,
    "short one",
    "premise with 1 and 0 inside it " * 3,
    "",
    "another article about nothing in particular " * 12,
]
HYPOTHESES = ["a fox jumps", "short", "it has digits", "empty premise", "nothing much"]
# Probabilities are ~1e-3 in the tiny model: absolute tolerance well below them.
ATOL = 1e-8
# Compiling at XLA's lowest optimisation level halves the compile time of
# each batch shape; the first test keeps the default.
FAST = {"xla_backend_optimization_level": 0}


def load(path, **kwargs):
    return Scorer.load(path, compiler_options=FAST, **kwargs)


@pytest.fixture(scope="module")
def tokenizer(tiny_vocab_path):
    return SentencePieceTokenizer(tiny_vocab_path)


@pytest.fixture(scope="module")
def scorer(tiny_hf_dir):
    # Default compilation; one bucket, so most tests share one (16, 128) program.
    return Scorer.load(tiny_hf_dir, bucket_lengths=(128,))


@pytest.fixture(scope="module")
def mixed_pairs():
    return ref.random_pairs(23, seed=1, max_words=20)


@pytest.fixture(scope="module")
def mixed_expected(tiny_hf_model, tokenizer, tiny_vocab_path, mixed_pairs):
    return ref.hf_scores(tiny_hf_model, tokenizer, tiny_vocab_path, *mixed_pairs)


def test_scores_equal_hf_first_step_probability(scorer, tiny_hf_model, tokenizer, tiny_vocab_path):
    assert scorer.positive_id != scorer.negative_id
    expected = ref.hf_scores(tiny_hf_model, tokenizer, tiny_vocab_path, PREMISES, HYPOTHESES)
    scores = scorer.score(PREMISES, HYPOTHESES)
    assert scores.dtype == np.float32 and scores.shape == (len(PREMISES),)
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=ATOL)
    assert expected.min() > 1e-4  # probabilities large enough for the tolerance to matter
    assert scorer.score([], []).shape == (0,)


@pytest.mark.parametrize(
    "options",
    [
        dict(batch_size=1, bucket_lengths=(128,)),
        dict(batch_size=3, window_size=5, bucket_lengths=(48, 64, 128)),
        dict(batch_size=16, max_batch_tokens=256, bucket_lengths=(40, 56, 80, 128)),
    ],
)
def test_any_batch_size_and_bucket_setting_gives_hf_scores_in_input_order(
    tiny_hf_dir, mixed_pairs, mixed_expected, options
):
    batch_size = options.pop("batch_size")
    scorer = load(tiny_hf_dir, **options)
    lengths = [len(ids) for ids in scorer.encode_inputs(*mixed_pairs)]
    assert max(lengths) > 96 and min(lengths) < 48  # several buckets in play
    scores = scorer.score(*mixed_pairs, batch_size=batch_size)
    np.testing.assert_allclose(scores, mixed_expected, rtol=1e-5, atol=ATOL)


def test_each_batch_shape_compiles_once(tiny_hf_dir, mixed_pairs):
    scorer = load(tiny_hf_dir, bucket_lengths=(48, 64, 128))
    shapes = scorer.multi.batching().shapes()
    runner = scorer.multi.engines[0]
    new_shapes = [shape for shape in shapes if not runner.is_compiled(*shape)]
    before = jax_engine.compiled_shape_count()
    scorer.score(*mixed_pairs)
    used = [shape for shape in new_shapes if runner.is_compiled(*shape)]
    assert jax_engine.compiled_shape_count() - before == len(used)
    premises, hypotheses = mixed_pairs
    scorer.score(premises[::-1], hypotheses[::-1])
    scorer.score(premises[:3], hypotheses[:3])
    # An equal config (another scorer of the same model) reuses the programs.
    load(tiny_hf_dir, bucket_lengths=(48, 64, 128)).score(*mixed_pairs)
    assert jax_engine.compiled_shape_count() - before == len(used)
    scorer.precompile()
    assert all(runner.is_compiled(*shape) for shape in shapes)
    assert jax_engine.compiled_shape_count() - before == len(new_shapes)


@pytest.mark.parametrize("truncation", ["summary_first", "joint"])
def test_truncation_as_in_the_data_module_is_counted(
    tiny_hf_dir, tiny_hf_model, tokenizer, tiny_vocab_path, truncation, caplog
):
    scorer = load(tiny_hf_dir, max_input_length=32, truncation=truncation, bucket_lengths=(16,))
    ids = scorer.encode_inputs(PREMISES, HYPOTHESES)
    assert max(len(row) for row in ids) == 32 and all(row[-1] == 1 for row in ids)
    with caplog.at_level("WARNING"):
        output = scorer.score_detailed(PREMISES, HYPOTHESES, batch_size=5, langs=["en"] * 5)
    assert "were truncated" in caplog.text
    truncated = output.stats.truncation.summary()
    assert truncated["truncated"] == 3 and truncated["by_language"]["en"]["count"] == 5
    assert output.metadata["settings"]["truncation"] == truncation
    assert scorer.stats.truncation.truncated == 3
    expected = ref.hf_scores(
        tiny_hf_model,
        tokenizer,
        tiny_vocab_path,
        PREMISES,
        HYPOTHESES,
        max_input_length=32,
        truncation=truncation,
    )
    np.testing.assert_allclose(output.scores["score"], expected, rtol=1e-5, atol=ATOL)
    if truncation == "summary_first":  # the summary is never cut
        summary_ids = tokenizer.encode(HYPOTHESES[4])
        assert ids[4][-1 - len(summary_ids) : -1] == summary_ids


def test_pair_normalisation(tiny_hf_dir, tiny_hf_model, tokenizer, tiny_vocab_path):
    scorer = load(tiny_hf_dir, normalize="pair", bucket_lengths=(128,))
    expected = ref.hf_scores(
        tiny_hf_model, tokenizer, tiny_vocab_path, PREMISES, HYPOTHESES, normalize="pair"
    )
    np.testing.assert_allclose(scorer.score(PREMISES, HYPOTHESES), expected, rtol=1e-5)
    assert scorer.metadata()["normalize"] == "pair"


def test_checkpoint_formats_give_the_same_scores(tmp_path, tiny_hf_dir, tiny_vocab_path, scorer):
    config, params = load_checkpoint(tiny_hf_dir)
    ours = save_checkpoint(str(tmp_path / "ours"), config, params)
    t5x = tiny_model.write_t5x_checkpoint(str(tmp_path / "t5x"), params, step=3)
    with pytest.raises(FileNotFoundError, match="vocab="):
        Scorer.load(ours)
    reference = scorer.score(PREMISES, HYPOTHESES)
    for path in (ours, t5x):
        scores = Scorer.load(path, vocab=tiny_vocab_path, bucket_lengths=(128,)).score(
            PREMISES, HYPOTHESES
        )
        np.testing.assert_array_equal(scores, reference)


def test_bad_inputs_and_vocabularies(tmp_path, tiny_hf_dir, scorer):
    with pytest.raises(ValueError, match="2 premises but 1 hypotheses"):
        scorer.score(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="pair 1"):
        scorer.score(["a", None], ["c", "d"])
    with pytest.raises(ValueError, match="normalize"):
        load(tiny_hf_dir, normalize="softmax")
    # A vocabulary where "1" and "0" start with the same piece ("▁").
    directory = shutil.copytree(tiny_hf_dir, str(tmp_path / "bad_vocab"))
    os.remove(os.path.join(directory, "spiece.model"))
    bad_vocab = tiny_model.train_vocab_without_digit_pieces(str(tmp_path / "vocab"))
    with pytest.raises(ValueError, match="cannot tell"):
        Scorer.load(directory, vocab=bad_vocab)


@pytest.fixture(scope="module")
def second_hf_dir(tmp_path_factory, tiny_vocab_path):
    model = tiny_model.build_hf_model(seed=1)
    return model, tiny_model.save_hf_model(
        model, str(tmp_path_factory.mktemp("second")), vocab_path=tiny_vocab_path
    )


def test_multiscorer_tokenises_once_and_scores_every_question(
    tiny_hf_dir,
    tiny_hf_model,
    second_hf_dir,
    tokenizer,
    tiny_vocab_path,
    mixed_pairs,
    mixed_expected,
    monkeypatch,
):
    second_model, second_dir = second_hf_dir
    multi = MultiScorer.load(
        {"q4": tiny_hf_dir, "q6": second_dir}, bucket_lengths=(48, 64, 128), compiler_options=FAST
    )
    calls = []
    encode = type(multi.tokenizer).encode
    monkeypatch.setattr(
        type(multi.tokenizer), "encode", lambda self, text: calls.append(text) or encode(self, text)
    )
    scores = multi.score(*mixed_pairs)
    # One tokenisation per input, not one per question.
    assert len(calls) == len(mixed_pairs[0])
    assert list(scores) == ["q4", "q6"]
    np.testing.assert_allclose(scores["q4"], mixed_expected, rtol=1e-5, atol=ATOL)
    expected_q6 = ref.hf_scores(second_model, tokenizer, tiny_vocab_path, *mixed_pairs)
    np.testing.assert_allclose(scores["q6"], expected_q6, rtol=1e-5, atol=ATOL)
    assert not np.allclose(scores["q4"], scores["q6"])
    assert multi.metadata()["checkpoints"]["q6"] == os.path.abspath(second_dir)


def test_multiscorer_refuses_different_vocabularies(tmp_path, tiny_hf_dir, second_hf_dir):
    directory = shutil.copytree(second_hf_dir[1], str(tmp_path / "other_vocab"))
    tiny_model.train_tiny_vocab(directory, vocab_size=380)
    with pytest.raises(ValueError, match="different vocabularies"):
        MultiScorer.load([tiny_hf_dir, directory])


def test_score_records_streams_in_input_order_and_flags_bad_records(
    scorer, mixed_pairs, mixed_expected, caplog
):
    premises, hypotheses = mixed_pairs
    records = [{"id": i, "article": p, "summary": h} for i, (p, h) in enumerate(zip(*mixed_pairs))]
    bad = {
        3: {"id": 3, "article": premises[3]},
        7: {"id": 7, "article": premises[7], "summary": "   "},
        11: {"id": 11, "article": 5, "summary": hypotheses[11]},
    }
    records = [bad.get(i, r) for i, r in enumerate(records)]
    with caplog.at_level("WARNING"):
        out = list(scorer.score_records(iter(records), score_field="q4"))
    assert [r["id"] for r in out] == list(range(len(records)))
    for i, record in enumerate(out):
        if i in bad:
            assert "q4" not in record and record["error"]
        else:
            assert "error" not in record
            np.testing.assert_allclose(record["q4"], mixed_expected[i], rtol=1e-5, atol=ATOL)
    assert "missing field 'summary'" in out[3]["error"]
    assert "'summary' is empty" in out[7]["error"]
    assert "'article' is not text (got int)" in out[11]["error"]
    assert "record 7" in caplog.text
