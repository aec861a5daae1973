"""Baselines: majority class, ROUGE-L on SentencePiece pieces, summary length."""

import numpy as np
import pytest
import sentencepiece
from rouge_score import rouge_scorer

from seahorse_metrics.evaluation import baselines

from fixtures import eval_data


@pytest.fixture(scope="module")
def vocab_path():
    from seahorse_metrics.data.vocab import default_vocab_path

    return default_vocab_path()


def test_majority_is_the_constant_majority_label():
    np.testing.assert_array_equal(baselines.majority_scores([True, False, True]), [1.0] * 3)
    np.testing.assert_array_equal(baselines.majority_scores([False, False, True, None]), [0.0] * 4)
    # A tie goes to yes.
    np.testing.assert_array_equal(baselines.majority_scores([True, False]), [1.0, 1.0])
    with pytest.raises(ValueError, match="needs binary labels"):
        baselines.majority_scores([None, None])


def test_rouge_l_equals_rouge_score_on_sentencepiece_pieces(vocab_path):
    pairs = eval_data.make_pairs(12, seed=3)
    articles, summaries = [p.article for p in pairs], [p.summary for p in pairs]
    processor = sentencepiece.SentencePieceProcessor(model_file=vocab_path)

    class Pieces:
        def tokenize(self, text):
            return processor.encode(text, out_type=str)

    reference = rouge_scorer.RougeScorer(["rougeL"], tokenizer=Pieces())
    for measure in baselines.ROUGE_MEASURES:
        got = baselines.rouge_l_scores(articles, summaries, vocab_path=vocab_path, measure=measure)
        expected = [
            getattr(reference.score(a, s)["rougeL"], measure) for a, s in zip(articles, summaries)
        ]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # Pieces, not whitespace words: the tokenizer the scores come from matters.
    words = rouge_scorer.RougeScorer(
        ["rougeL"], tokenizer=type("Words", (), {"tokenize": lambda self, text: text.split()})()
    )
    by_words = [words.score(a, s)["rougeL"].fmeasure for a, s in zip(articles, summaries)]
    assert not np.allclose(
        baselines.rouge_l_scores(articles, summaries, vocab_path=vocab_path), by_words
    )


def test_rouge_l_separates_faithful_from_unfaithful_summaries(vocab_path):
    pairs = eval_data.make_pairs(80, seed=4)
    precision = baselines.rouge_l_scores(
        [p.article for p in pairs],
        [p.summary for p in pairs],
        vocab_path=vocab_path,
        measure="precision",
    )
    faithful = np.array([p.faithful for p in pairs])
    assert precision[faithful].mean() > precision[~faithful].mean() + 0.2


def test_rouge_l_refuses_bad_input(vocab_path):
    with pytest.raises(ValueError, match="2 premises but 1 hypotheses"):
        baselines.rouge_l_scores(["a", "b"], ["c"], vocab_path=vocab_path)
    with pytest.raises(ValueError, match="unknown ROUGE measure"):
        baselines.rouge_l_scores(["a"], ["b"], vocab_path=vocab_path, measure="f1")
    with pytest.raises(FileNotFoundError, match="pass --vocab"):
        baselines.rouge_l_scores(["a"], ["b"], vocab_path="/nonexistent/spm.model")


def test_length_counts_sentencepiece_pieces(vocab_path):
    processor = sentencepiece.SentencePieceProcessor(model_file=vocab_path)
    summaries = [p.summary for p in eval_data.make_pairs(5, seed=5)] + [""]
    expected = [len(processor.encode(s, out_type=str)) for s in summaries]
    np.testing.assert_array_equal(
        baselines.length_scores(summaries, vocab_path=vocab_path), expected
    )
    assert expected[-1] == 0


def test_default_vocabulary_is_the_bundled_one(vocab_path):
    pieces = baselines.SentencePiecePieces()
    assert pieces.vocab_path == vocab_path
    assert pieces.tokenize("Police arrested 47 people.")


def test_lcs_length_equals_rouge_scores_table_on_random_sequences():
    rng = np.random.default_rng(0)
    for _ in range(200):
        first = list(rng.choice(list("abcde"), size=int(rng.integers(0, 40))))
        second = list(rng.choice(list("abcdef"), size=int(rng.integers(0, 40))))
        expected = rouge_scorer._lcs_table(first, second)[-1][-1]
        assert (
            baselines.lcs_length(first, second) == expected == baselines.lcs_length(second, first)
        )


def test_rouge_l_reads_a_bounded_prefix_of_a_huge_cell(vocab_path, monkeypatch):
    """Issue 48 point 12: ROUGE-L on one 100 MB cell peaked at 4.8 GB. A 24 MB
    article and a 6 MB summary: only their first pieces are read, in a few MB."""
    import time
    import tracemalloc

    pieces = baselines._pieces(vocab_path)
    read = []
    real_tokenize = pieces.tokenize

    def tokenize(text):
        read.append(len(text))
        assert len(text) <= 16 * 16_384, f"read {len(text):,} characters of a cell"
        return real_tokenize(text)

    monkeypatch.setattr(pieces, "tokenize", tokenize)
    sentence = "Police arrested forty-seven people in the capital on Monday. "
    article, summary = sentence * 400_000, sentence * 100_000
    tracemalloc.start()
    start = time.perf_counter()
    try:
        score = baselines.rouge_l_scores(
            [article], [summary], vocab_path=vocab_path, measure="precision"
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 20
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert read == [16 * 16_384, 16 * 2_048]
    # The summary's first 2,048 pieces are all in the article's first 16,384, in order.
    assert score[0] == 1.0
