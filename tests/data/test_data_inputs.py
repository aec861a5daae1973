"""Tests of model-input formatting and truncation, and of the vocabulary helpers."""

import pytest

from seahorse_metrics.data import inputs, vocab
from seahorse_metrics.data.inputs import TruncationStats, encode_pair, format_input

from fixtures import tiny_data

ARTICLE = tiny_data.ARTICLES["xlsum_english-validation-6416"]
SUMMARY = tiny_data.RELEASE_ROWS["train"][0][2]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tiny_data.train_tiny_sentencepiece(str(tmp_path_factory.mktemp("spm")))
    return vocab.SentencePieceTokenizer(path)


def test_format_input():
    assert (
        format_input("An article.", "A summary.") == "premise: An article. hypothesis: A summary."
    )


def test_fitting_input_is_the_plain_tokenisation(tokenizer):
    full = tokenizer.encode(format_input(ARTICLE, SUMMARY))
    for mode in inputs.TRUNCATION_MODES:
        encoded = encode_pair(tokenizer, ARTICLE, SUMMARY, len(full) + 1, mode)
        assert encoded.ids == full + [tokenizer.eos_id]
        assert not encoded.truncated and not encoded.hypothesis_cut


def test_summary_first_shortens_the_article(tokenizer):
    full = tokenizer.encode(format_input(ARTICLE, SUMMARY))
    hypothesis_only = tokenizer.encode(format_input("", SUMMARY))
    max_length = len(hypothesis_only) + 12
    assert len(full) + 1 > max_length
    encoded = encode_pair(tokenizer, ARTICLE, SUMMARY, max_length)
    assert encoded.truncated and not encoded.hypothesis_cut
    assert len(encoded.ids) <= max_length and encoded.ids[-1] == tokenizer.eos_id
    text = tokenizer.decode(encoded.ids)
    assert text.endswith(" hypothesis: " + SUMMARY)
    kept_article = text[len("premise: ") : -len(" hypothesis: " + SUMMARY)]
    assert kept_article and ARTICLE.startswith(kept_article)
    # The ids are the tokenisation of the re-formed string.
    assert encoded.ids[:-1] == tokenizer.encode(format_input(kept_article, SUMMARY))
    # The longest article prefix that fits: one more piece would not.
    premise_ids = tokenizer.encode(ARTICLE)
    kept_pieces = len(tokenizer.encode(kept_article))
    longer = tokenizer.decode(premise_ids[: kept_pieces + 1])
    assert len(tokenizer.encode(format_input(longer, SUMMARY))) + 1 > max_length


def test_summary_cut_only_when_it_cannot_fit(tokenizer):
    hypothesis_only = tokenizer.encode(format_input("", SUMMARY))
    encoded = encode_pair(tokenizer, ARTICLE, SUMMARY, 8)
    assert encoded.truncated and encoded.hypothesis_cut
    assert encoded.ids == hypothesis_only[:7] + [tokenizer.eos_id]


def test_joint_mode_cuts_the_whole_string(tokenizer):
    full = tokenizer.encode(format_input(ARTICLE, SUMMARY))
    encoded = encode_pair(tokenizer, ARTICLE, SUMMARY, 20, mode="joint")
    assert encoded.ids == full[:19] + [tokenizer.eos_id]
    assert encoded.truncated and encoded.hypothesis_cut


def test_long_premise_window_gives_the_same_ids(tokenizer, monkeypatch):
    long_article = " ".join([ARTICLE] * 40)
    max_length = 12 + len(tokenizer.encode(format_input("", SUMMARY)))
    assert len(long_article) > inputs._WINDOW_CHARS_PER_TOKEN * max_length
    windowed = {
        m: encode_pair(tokenizer, long_article, SUMMARY, max_length, m)
        for m in inputs.TRUNCATION_MODES
    }
    monkeypatch.setattr(inputs, "_WINDOW_CHARS_PER_TOKEN", 10**9)
    for mode, result in windowed.items():
        assert encode_pair(tokenizer, long_article, SUMMARY, max_length, mode) == result
    full = tokenizer.encode(format_input(long_article, SUMMARY))
    assert windowed["joint"].ids == full[: max_length - 1] + [tokenizer.eos_id]


def test_bad_arguments(tokenizer):
    with pytest.raises(ValueError, match="truncation mode"):
        encode_pair(tokenizer, "a", "b", 10, mode="left")
    with pytest.raises(ValueError, match="max_length"):
        encode_pair(tokenizer, "a", "b", 1)
    with pytest.raises(ValueError, match="pair up"):
        inputs.encode_pairs(tokenizer, ["a"], [], 10)


def test_truncation_stats(tokenizer):
    stats = TruncationStats()
    encoded = inputs.encode_pairs(
        tokenizer,
        [ARTICLE, ARTICLE, "Short."],
        ["Trips.", "Trips.", "Short."],
        30,
        langs=["en", "es", None],
        stats=stats,
    )
    assert [e.truncated for e in encoded] == [True, True, False]
    other = TruncationStats()
    other.add(encode_pair(tokenizer, ARTICLE, SUMMARY, 5), "en")
    stats.merge(other)
    summary = stats.summary()
    assert summary["count"] == 4 and summary["truncated"] == 3 and summary["hypothesis_cut"] == 1
    assert summary["truncated_fraction"] == 0.75
    assert summary["by_language"] == {
        "en": {"count": 2, "truncated": 2, "hypothesis_cut": 1},
        "es": {"count": 1, "truncated": 1, "hypothesis_cut": 0},
        "unknown": {"count": 1, "truncated": 0, "hypothesis_cut": 0},
    }


def test_sentencepiece_tokenizer(tokenizer):
    assert (tokenizer.pad_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2)
    ids = tokenizer.encode("premise: hypothesis:")
    assert tokenizer.decode(ids + [tokenizer.eos_id, 5, 6]) == "premise: hypothesis:"
    assert tokenizer.encode_batch(["premise:", "hypothesis:"]) == [
        tokenizer.encode("premise:"),
        tokenizer.encode("hypothesis:"),
    ]
    with open(tokenizer.path, "rb") as f:
        clone = vocab.SentencePieceTokenizer(model_proto=f.read())
    assert clone.encode(SUMMARY) == tokenizer.encode(SUMMARY)
    with pytest.raises(FileNotFoundError):
        vocab.SentencePieceTokenizer("/no/such/spiece.model")


def test_target_token_ids(tokenizer, tmp_path):
    one, zero = vocab.target_token_ids(tokenizer)
    assert tokenizer.id_to_piece(one) == "▁1" and tokenizer.id_to_piece(zero) == "▁0"
    # A vocabulary without whole "▁1"/"▁0" pieces cannot tell yes from no at step one.
    import sentencepiece

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(tiny_data.ARTICLES.values()) + "\n1 0\n", encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(tmp_path / "bare"),
        vocab_size=200,
        hard_vocab_limit=False,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
    )
    bare = vocab.SentencePieceTokenizer(str(tmp_path / "bare.model"))
    assert bare.id_to_piece(bare.encode("1")[0]) == "▁"
    with pytest.raises(ValueError, match="bare"):
        vocab.target_token_ids(bare)


def test_default_vocab_path(monkeypatch, tmp_path):
    monkeypatch.setattr(vocab, "_SAMPLE_VOCAB", str(tmp_path / "missing.model"))
    with pytest.raises(FileNotFoundError, match="missing.model"):
        vocab.default_vocab_path()
    present = tmp_path / "spiece.model"
    present.write_bytes(b"x")
    monkeypatch.setattr(vocab, "_SAMPLE_VOCAB", str(present))
    assert vocab.default_vocab_path() == str(present)


def test_a_summary_crowding_out_the_article_is_an_error_or_cut_to_leave_its_share(tokenizer):
    """Issue 29 point 4: never a score of `premise: hypothesis: <cut summary>` in silence."""
    long_summary = " ".join([SUMMARY] * 6)
    summary_pieces = len(tokenizer.encode(format_input("", long_summary)))
    for max_length in (summary_pieces // 2, summary_pieces + 3):  # longer than / nearly the input
        with pytest.raises(inputs.SummaryTooLongError, match=r"ignore the article.*--long_summar"):
            encode_pair(tokenizer, ARTICLE, long_summary, max_length, long_summaries="error")
        cut = encode_pair(tokenizer, ARTICLE, long_summary, max_length, long_summaries="cut")
        assert cut.summary_cut and cut.hypothesis_cut and cut.truncated
        assert len(cut.ids) <= max_length and cut.ids[-1] == tokenizer.eos_id
        share = inputs.article_floor(len(tokenizer.encode(ARTICLE)), max_length)
        assert share == -(-max_length // 4)
        article = tokenizer.decode(tokenizer.encode(ARTICLE)[:share])
        text = tokenizer.decode(cut.ids)
        assert text.startswith(f"premise: {article} hypothesis: ")  # the article's share, whole
        assert long_summary.startswith(text[len(f"premise: {article} hypothesis: ") :])
        # Two articles, two inputs (the old cut read the summary alone for both).
        other = encode_pair(
            tokenizer,
            "Another article altogether. " * 20,
            long_summary,
            max_length,
            long_summaries="cut",
        )
        assert other.ids != cut.ids
    # Without a policy (the seqio tasks) and where the article keeps its share: as before.
    assert not encode_pair(tokenizer, ARTICLE, long_summary, summary_pieces // 2).summary_cut
    roomy = (summary_pieces + 2) * 4 // 3 + 2  # the article keeps its quarter, and is cut
    long_article = " ".join([ARTICLE] * 5)
    kept = encode_pair(tokenizer, long_article, long_summary, roomy, long_summaries="error")
    assert kept.truncated and not kept.hypothesis_cut and not kept.summary_cut
    assert kept == encode_pair(tokenizer, long_article, long_summary, roomy)
    with pytest.raises(ValueError, match="long_summaries"):
        encode_pair(tokenizer, ARTICLE, SUMMARY, 10, long_summaries="drop")
