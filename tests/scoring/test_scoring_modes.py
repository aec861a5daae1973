"""Chunked premises and per-sentence scoring against a direct computation.

The direct computation builds the documented inputs by hand (premise pieces
cut into windows of `room` pieces overlapping by `overlap`; the summary's
sentences) and scores each with Hugging Face PyTorch, one pair at a time.
"""

import numpy as np
import pytest

from seahorse_metrics import Scorer
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.scoring import units

from fixtures import scoring_reference as ref

FAST = {"xla_backend_optimization_level": 0}
MAX_LENGTH = 48
OVERLAP = 8
LONG_PREMISE = " ".join(
    f"fact {i} is that the fox number {i} jumps over dog {i}." for i in range(9)
)
SHORT_PREMISE = "the fox jumps over the dog."
SENTENCES = ["The fox jumps.", "It is brown!", "Is it 1?"]


@pytest.fixture(scope="module")
def tokenizer(tiny_vocab_path):
    return SentencePieceTokenizer(tiny_vocab_path)


def direct_chunk_texts(tokenizer, premise, hypothesis):
    """Windows of the premise's pieces, as documented, decoded to text."""
    room = MAX_LENGTH - 1 - len(tokenizer.encode(f"premise:  hypothesis: {hypothesis}"))
    pieces = tokenizer.encode(premise)
    shared = min(OVERLAP, room // 2)
    starts = [s for s in range(0, len(pieces), room - shared) if s == 0 or s + shared < len(pieces)]
    return [tokenizer.decode(pieces[s : s + room]) for s in starts]


def direct_chunk_score(hf_model, tokenizer, vocab_path, premise, hypothesis):
    chunks = direct_chunk_texts(tokenizer, premise, hypothesis)
    scores = ref.hf_scores(
        hf_model,
        tokenizer,
        vocab_path,
        chunks,
        [hypothesis] * len(chunks),
        max_input_length=MAX_LENGTH,
    )
    return scores.max(), len(chunks)


def test_split_sentences():
    assert units.split_sentences(" ".join(SENTENCES)) == SENTENCES
    assert units.split_sentences("今天下雨。明天晴天。") == ["今天下雨。", "明天晴天。"]
    assert units.split_sentences("no break at all") == ["no break at all"]
    assert units.split_sentences("one.\ntwo?  three") == ["one.", "two?", "three"]


def test_chunk_windows_cover_the_premise_with_overlap():
    assert units.chunk_windows(30, 40, 8) == [(0, 30)]
    assert units.chunk_windows(100, 40, 10) == [(0, 40), (30, 70), (60, 100)]
    assert units.chunk_windows(71, 40, 10) == [(0, 40), (30, 70), (60, 71)]
    # The overlap never exceeds half a window, so chunking always advances.
    assert units.chunk_windows(10, 4, 9) == [(0, 4), (2, 6), (4, 8), (6, 10)]


def test_chunk_mode_is_the_max_over_premise_windows(
    tiny_hf_dir, tiny_hf_model, tokenizer, tiny_vocab_path
):
    scorer = Scorer.load(
        tiny_hf_dir,
        max_input_length=MAX_LENGTH,
        long_inputs="chunk",
        chunk_overlap=OVERLAP,
        bucket_lengths=(32,),
        compiler_options=FAST,
    )
    hypotheses = ["a fox jumps over a dog.", "dog 7 is brown.", "short"]
    premises = [LONG_PREMISE, LONG_PREMISE, SHORT_PREMISE]
    output = scorer.score_detailed(premises, hypotheses, batch_size=4)
    expected, chunk_counts = zip(
        *(
            direct_chunk_score(tiny_hf_model, tokenizer, tiny_vocab_path, p, h)
            for p, h in zip(premises, hypotheses)
        )
    )
    assert chunk_counts[0] >= 4 and chunk_counts[2] == 1
    np.testing.assert_allclose(output.scores["score"], expected, rtol=1e-5, atol=1e-8)
    assert output.stats.chunked_examples == 2
    assert output.stats.model_inputs == sum(chunk_counts)
    assert output.stats.truncation.truncated == 0  # chunking cuts nothing
    # An input that fits scores exactly as in truncate mode.
    truncating = Scorer.load(
        tiny_hf_dir, max_input_length=MAX_LENGTH, bucket_lengths=(32,), compiler_options=FAST
    )
    truncated = truncating.score(premises, hypotheses, batch_size=4)
    assert truncated[2] == output.scores["score"][2]
    assert truncated[0] != output.scores["score"][0]


@pytest.mark.parametrize("aggregate", ["min", "mean"])
def test_per_sentence_scores_each_summary_sentence(
    tiny_hf_dir, tiny_hf_model, tokenizer, tiny_vocab_path, aggregate
):
    scorer = Scorer.load(
        tiny_hf_dir,
        per_sentence=True,
        sentence_aggregate=aggregate,
        bucket_lengths=(32,),
        max_input_length=MAX_LENGTH,
        compiler_options=FAST,
    )
    hypotheses = [" ".join(SENTENCES), "one sentence only"]
    premises = [SHORT_PREMISE, SHORT_PREMISE]
    output = scorer.score_detailed(premises, hypotheses, batch_size=4)
    assert output.sentences == [SENTENCES, ["one sentence only"]]
    per_sentence = ref.hf_scores(
        tiny_hf_model,
        tokenizer,
        tiny_vocab_path,
        [SHORT_PREMISE] * 4,
        SENTENCES + ["one sentence only"],
    )
    np.testing.assert_allclose(output.sentence_scores["score"][0], per_sentence[:3], rtol=1e-5)
    np.testing.assert_allclose(output.sentence_scores["score"][1], per_sentence[3:], rtol=1e-5)
    combine = np.min if aggregate == "min" else np.mean
    np.testing.assert_allclose(
        output.scores["score"], [combine(per_sentence[:3]), per_sentence[3]], rtol=1e-5
    )
    records = list(scorer.score_records([{"article": SHORT_PREMISE, "summary": hypotheses[0]}]))
    assert records[0]["sentences"] == SENTENCES
    np.testing.assert_allclose(records[0]["score_sentences"], per_sentence[:3], rtol=1e-5)


@pytest.mark.parametrize("metric", ["mt5", "umt5"])  # umt5: a relative position bias per layer
def test_per_sentence_with_chunks_takes_the_best_chunk_per_sentence(
    metric, request, tokenizer, tiny_vocab_path
):
    prefix = "tiny_hf" if metric == "mt5" else "tiny_umt5"
    tiny_hf_dir, tiny_hf_model = (
        request.getfixturevalue(f"{prefix}_{part}") for part in ("dir", "model")
    )
    scorer = Scorer.load(
        tiny_hf_dir,
        per_sentence=True,
        long_inputs="chunk",
        chunk_overlap=OVERLAP,
        max_input_length=MAX_LENGTH,
        bucket_lengths=(32,),
        compiler_options=FAST,
    )
    output = scorer.score_detailed([LONG_PREMISE], [" ".join(SENTENCES)], batch_size=4)
    expected = [
        direct_chunk_score(tiny_hf_model, tokenizer, tiny_vocab_path, LONG_PREMISE, s)[0]
        for s in SENTENCES
    ]
    np.testing.assert_allclose(output.sentence_scores["score"][0], expected, rtol=1e-5)
    np.testing.assert_allclose(output.scores["score"][0], min(expected), rtol=1e-5)


def test_pair_normalisation_and_aggregation_helpers():
    log_one, log_zero = np.log([0.2, 1e-30]), np.log([0.6, 3e-30])
    np.testing.assert_allclose(units.unit_scores(log_one, log_zero, "full"), [0.2, 1e-30])
    np.testing.assert_allclose(units.unit_scores(log_one, log_zero, "pair"), [0.25, 0.25])
    score, per_sentence = units.aggregate(np.array([0.1, 0.7, 0.4, 0.3]), [0, 0, 1, 1], 2, "mean")
    np.testing.assert_allclose(per_sentence, [0.7, 0.4])
    assert score == pytest.approx(0.55)
    with pytest.raises(ValueError, match="long_inputs"):
        units.InputSettings(long_inputs="window")
