"""Scorer v1: P("1") at the first decoder step, against Hugging Face PyTorch."""
import os
import shutil

import numpy as np
import pytest

from fixtures import tiny_model
from seahorse_metrics import Scorer
from seahorse_metrics.checkpoints import load_checkpoint, save_checkpoint

PREMISES = [
    "the quick brown fox jumps over the lazy dog " * 6,
    "short one",
    "premise with 1 and 0 inside it " * 3,
    "",
    "another article about nothing in particular " * 12,
]
HYPOTHESES = ["a fox jumps", "short", "it has digits", "empty premise", "nothing much"]


def hf_p_one(hf_model, vocab_path, premises, hypotheses, max_input_length=2048):
    """P("1") from the HF model's first-step logits, tokenised independently."""
    import sentencepiece
    import torch

    processor = sentencepiece.SentencePieceProcessor(model_file=vocab_path)
    one_id = processor.piece_to_id("▁1")
    assert processor.id_to_piece(one_id) == "▁1"
    probs = []
    for premise, hypothesis in zip(premises, hypotheses):
        ids = processor.encode(f"premise: {premise} hypothesis: {hypothesis}")
        ids = ids[:max_input_length - 1] + [1]
        with torch.no_grad():
            logits = hf_model(input_ids=torch.tensor([ids]),
                              decoder_input_ids=torch.tensor([[0]])).logits[0, 0]
        probs.append(torch.softmax(logits.double(), -1)[one_id].item())
    return np.array(probs)


def test_scores_equal_hf_first_step_probability(tiny_hf_dir, tiny_hf_model, tiny_vocab_path):
    scorer = Scorer.load(tiny_hf_dir)  # spiece.model found in the directory
    assert scorer.positive_id != scorer.negative_id
    expected = hf_p_one(tiny_hf_model, tiny_vocab_path, PREMISES, HYPOTHESES)
    scores = scorer.score(PREMISES, HYPOTHESES, batch_size=2)
    assert scores.dtype == np.float32 and scores.shape == (len(PREMISES),)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-6)
    assert expected.min() > 1e-4  # probabilities large enough for the tolerance to matter
    # Batching and the length-sorted order do not change any score.
    np.testing.assert_allclose(scorer.score(PREMISES, HYPOTHESES, batch_size=5), scores, rtol=1e-5)
    assert scorer.score([], []).shape == (0,)


def test_truncation_to_max_input_length(tiny_hf_dir, tiny_hf_model, tiny_vocab_path, caplog):
    scorer = Scorer.load(tiny_hf_dir, max_input_length=32)
    ids = scorer.encode_inputs(PREMISES, HYPOTHESES)
    assert max(len(row) for row in ids) == 32 and all(row[-1] == 1 for row in ids)
    with caplog.at_level("WARNING"):
        scores = scorer.score(PREMISES, HYPOTHESES, batch_size=5)
    assert "were truncated" in caplog.text
    expected = hf_p_one(tiny_hf_model, tiny_vocab_path, PREMISES, HYPOTHESES, max_input_length=32)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-6)


def test_scorer_on_our_checkpoint_with_explicit_vocab(tmp_path, tiny_hf_dir, tiny_vocab_path):
    config, params = load_checkpoint(tiny_hf_dir)
    ours = save_checkpoint(str(tmp_path / "ours"), config, params)
    with pytest.raises(FileNotFoundError, match="vocab="):
        Scorer.load(ours)
    scores = Scorer.load(ours, vocab=tiny_vocab_path).score(PREMISES, HYPOTHESES, batch_size=5)
    reference = Scorer.load(tiny_hf_dir).score(PREMISES, HYPOTHESES, batch_size=5)
    np.testing.assert_array_equal(scores, reference)


def test_bad_inputs_and_vocabularies(tmp_path, tiny_hf_dir):
    scorer = Scorer.load(tiny_hf_dir)
    with pytest.raises(ValueError, match="2 premises but 1 hypotheses"):
        scorer.score(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="pair 1"):
        scorer.score(["a", None], ["c", "d"])
    # A vocabulary where "1" and "0" start with the same piece ("▁").
    directory = shutil.copytree(tiny_hf_dir, str(tmp_path / "bad_vocab"))
    os.remove(os.path.join(directory, "spiece.model"))
    bad_vocab = tiny_model.train_vocab_without_digit_pieces(str(tmp_path / "vocab"))
    with pytest.raises(ValueError, match="both start with piece"):
        Scorer.load(directory, vocab=bad_vocab)
