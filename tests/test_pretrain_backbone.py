"""The demo's backbone: its pretraining noise functions and the shipped files."""
from __future__ import annotations

import filecmp
import importlib.util
import json
import os

import numpy as np
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_DIR = os.path.join(REPO_ROOT, "seahorse_metrics", "data", "sample")


def _script():
    spec = importlib.util.spec_from_file_location(
        "pretrain_backbone", os.path.join(REPO_ROOT, "scripts", "pretrain_backbone.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _uncorrupt(inputs, targets, vocab_size):
    """Puts the target spans back in place of their sentinels."""
    spans, current = {}, None
    for token in targets[:-1]:
        if token >= vocab_size - 100:
            current = token
            spans[current] = []
        else:
            spans[current].append(token)
    restored = []
    for token in inputs[:-1]:
        restored.extend(spans[token] if token in spans else [token])
    return restored


def test_span_corruption_hides_about_15_percent_and_can_be_undone():
    script = _script()
    rng = np.random.default_rng(0)
    ids = list(range(3, 103))
    for _ in range(20):
        inputs, targets = script.span_corrupt(ids, rng, vocab_size=6144)
        assert inputs[-1] == 1 and targets[-1] == 1
        assert _uncorrupt(inputs, targets, 6144) == ids
        hidden = sum(1 for t in targets[:-1] if t < 6144 - 100)
        assert hidden == 15


def test_grounded_swap_replaces_only_supported_tokens_with_unsupported_ones():
    script = _script()
    rng = np.random.default_rng(0)
    premise = [10, 11, 12, 13, 14, 15]
    hypothesis = [7, 8, 12, 20, 14, 21, 15]     # 7, 8: the "hypothesis:" prefix
    donor = ([30, 31, 32], [7, 8, 31, 32, 40])
    for _ in range(10):
        inputs, targets = script.swap_grounded((premise, hypothesis), donor, 2, rng, rate=0.4)
        assert targets == hypothesis[2:] + [1]
        noisy = inputs[len(premise):-1]
        changed = [i for i, (a, b) in enumerate(zip(noisy, hypothesis)) if a != b]
        assert changed and all(hypothesis[i] in premise for i in changed)
        assert all(noisy[i] in (31, 32) for i in changed)


def test_shipped_backbone_loads_with_the_sample_vocabulary():
    from seahorse_metrics.checkpoints import detect_format, load_checkpoint

    backbone = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
    assert detect_format(backbone) == "hf"
    config, params = load_checkpoint(backbone)
    import sentencepiece as spm

    pieces = spm.SentencePieceProcessor(
        model_file=os.path.join(SAMPLE_DIR, "spiece.model")).get_piece_size()
    assert config == _script().backbone_config(pieces)
    assert filecmp.cmp(os.path.join(backbone, "spiece.model"),
                       os.path.join(SAMPLE_DIR, "spiece.model"), shallow=False)
    with open(os.path.join(backbone, "pretraining.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    assert "no ratings" in record["data"]
    assert np.isfinite(params["token_embedder"]["embedding"]).all()


def _noise_tables():
    script = _script()
    pieces = ["<pad>", "</s>", "<unk>", "\u2581premise", ":", "\u2581hypothesis",
              "\u2581Anna", "\u2581Berlin", "\u25817", "\u2581opened", "\u2581opens", "\u2581a",
              "\u2581plant", "\u2581in", "\u2581Paris", "\u25819", "s"]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    word_start = np.array([p.startswith("\u2581") for p in pieces])
    return script, vocab, word_start, script.value_pieces(pieces), script.similar_pieces(pieces)


def test_similar_and_value_pieces():
    script, vocab, _, is_value, similar = _noise_tables()
    assert similar[vocab["\u2581opened"]] == [vocab["\u2581opens"]]
    assert vocab["\u2581plant"] not in similar
    assert {i for i in np.flatnonzero(is_value)} == {vocab[p] for p in (
        "\u2581Anna", "\u2581Berlin", "\u25817", "\u2581Paris", "\u25819")}


def test_noise_detection_labels_exactly_the_pieces_the_noise_put_there():
    script, vocab, word_start, is_value, similar = _noise_tables()
    ids = lambda words: [vocab[w] for w in words.split()]
    premise = ids("\u2581premise : \u2581Anna \u2581opened \u2581a \u2581plant \u2581in \u2581Berlin \u25817")
    hypothesis = ids("\u2581hypothesis : \u2581Anna \u2581opened \u2581a \u2581plant \u2581in \u2581Berlin")
    donor = (ids("\u2581premise : \u2581Paris \u25819"), ids("\u2581hypothesis : \u2581Paris \u25819"))
    rng = np.random.default_rng(0)
    for kind in script.NOISE_KINDS:
        seen_noise = 0
        for _ in range(20):
            inputs, targets, labels = script.detect_noise(
                (premise, hypothesis), donor, 2, rng, word_start, is_value, similar,
                input_length=64, target_length=12, clean_rate=0.0, kinds=(kind,))
            assert len(labels) == len(inputs) and inputs[-1] == 1 and targets[-1] == 1
            assert inputs[:len(premise)] == premise and labels[:len(premise) + 2] == [-1] * (len(premise) + 2)
            noisy = [token for token, label in zip(inputs, labels) if label == 1]
            # The target spells out the noisy pieces, in order; clean rows have an empty target.
            assert targets[:-1] == noisy
            body = inputs[len(premise) + 2:-1]
            if noisy:
                seen_noise += 1
                assert body != hypothesis[2:]
            if kind == "replace_grounded":
                assert all(token in (vocab["\u2581Paris"], vocab["\u25819"]) for token in noisy)
            if kind == "swap_in_premise":
                assert all(token in premise and is_value[token] for token in noisy)
            if kind == "duplicate_span":
                assert len(body) == len(hypothesis) - 2 + len(noisy)
            if kind in ("swap_words", "replace_similar"):
                assert len(body) == len(hypothesis) - 2
            if kind == "replace_similar" and noisy:
                assert noisy == [vocab["\u2581opens"]]
        assert seen_noise == 20, kind
    inputs, targets, labels = script.detect_noise(
        (premise, hypothesis), donor, 2, rng, word_start, is_value, similar,
        input_length=64, target_length=12, clean_rate=1.0)
    assert targets == [1] and inputs == premise + hypothesis + [1] and 1 not in labels


def test_noise_detection_keeps_the_hypothesis_and_cuts_the_premise():
    script, vocab, word_start, is_value, similar = _noise_tables()
    premise = [vocab["\u2581premise"], vocab[":"]] + [vocab["\u2581plant"]] * 30
    hypothesis = [vocab["\u2581hypothesis"], vocab[":"]] + [vocab["\u2581Anna"], vocab["\u2581opened"]] * 5
    inputs, _, labels = script.detect_noise(
        (premise, hypothesis), (premise, hypothesis), 2, np.random.default_rng(1), word_start,
        is_value, similar, input_length=24, target_length=12, clean_rate=0.0, kinds=("duplicate_span",))
    assert len(inputs) == 24 and len(labels) == 24
    assert inputs[-1] == 1 and sum(label == 1 for label in labels) >= 2


def test_noise_strength_makes_the_noise_heavier():
    script, vocab, word_start, is_value, similar = _noise_tables()
    premise = [vocab["\u2581premise"], vocab[":"]] + [vocab["\u2581plant"]] * 4
    hypothesis = [vocab["\u2581hypothesis"], vocab[":"]] + [vocab["\u2581Anna"], vocab["\u2581opened"],
                                                           vocab["\u2581a"], vocab["\u2581plant"]] * 6
    rng = np.random.default_rng(2)

    def noisy_pieces(kind, strength):
        _, _, labels = script.detect_noise(
            (premise, hypothesis), (premise, hypothesis), 2, rng, word_start, is_value, similar,
            input_length=128, target_length=64, clean_rate=0.0, kinds=(kind,), strength=strength)
        return sum(label == 1 for label in labels)

    for kind in ("duplicate_span", "swap_words", "replace_similar"):
        light = np.mean([noisy_pieces(kind, 0.0) for _ in range(20)])
        heavy = np.mean([noisy_pieces(kind, 0.8) for _ in range(20)])
        assert heavy > 1.4 * light, (kind, light, heavy)


def test_pretraining_with_noise_detection_exports_a_backbone_and_its_record(tmp_path):
    from seahorse_metrics.checkpoints import load_checkpoint

    script = _script()
    shipped = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
    output = tmp_path / "backbone"
    script.main(["--init", shipped, "--steps", "2", "--batch_size", "4", "--input_length", "64",
                 "--target_length", "8", "--detect_rate", "0.5", "--rtd_weight", "1.0",
                 "--matching_steps", "2",
                 "--noise_strength", "0.8", "0.2", "--output", str(output)])
    config, params = load_checkpoint(str(output))
    _, shipped_params = load_checkpoint(shipped)
    assert config == load_checkpoint(shipped)[0]
    # The discriminator's head is not part of the exported model.
    assert set(params) == set(shipped_params)
    with open(output / "pretraining.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["objective"] == "matching+span_corruption+noise_detection"
    assert record["noise_strength"] == [0.8, 0.2] and record["steps"] == 2
    assert record["matching_steps"] == 2
    matching = record["matching"]
    assert matching["steps"] == 2 and 0.0 <= matching["held_out_roc_auc"] <= 1.0
    assert np.isfinite(matching["final_loss"])
    assert np.isfinite(record["final_loss"]) and np.isfinite(record["final_discriminator_loss"])
    assert record["init_record"]["data"] == record["data"]


@pytest.mark.parametrize("stage, flags, changed", [
    ("matching", ["--matching_steps", "3"], ("layers_0", "attention", "query")),
    ("word_noise", ["--word_noise_steps", "3", "--input_length", "64"], ("layers_2", "mlp", "wo")),
])
def test_a_stage_alone_trains_the_encoder_only(tmp_path, stage, flags, changed):
    from seahorse_metrics.checkpoints import load_checkpoint

    script = _script()
    shipped = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
    output = tmp_path / stage
    script.main(["--init", shipped, "--steps", "0", "--batch_size", "4"] + flags
                + ["--output", str(output)])
    _, params = load_checkpoint(str(output))
    _, before = load_checkpoint(shipped)
    layer, block, name = changed
    assert not np.allclose(params["encoder"][layer][block][name]["kernel"],
                           before["encoder"][layer][block][name]["kernel"])
    # The decoder gets no gradient; only AdamW's weight decay touches it.
    np.testing.assert_allclose(params["decoder"]["layers_0"]["mlp"]["wi_0"]["kernel"],
                               before["decoder"]["layers_0"]["mlp"]["wi_0"]["kernel"], rtol=1e-5)
    with open(output / "pretraining.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["objective"] == stage and record["final_loss"] is None
    assert record[stage]["steps"] == 3
    assert 0.0 <= record[stage]["held_out_roc_auc"] <= 1.0
    if stage == "word_noise":
        assert record["word_noise_rates"] == [0.3, 0.1]


def test_pretraining_refuses_bad_noise_options_and_names_them(tmp_path, capsys):
    import pytest

    script = _script()
    for flags, named in (
            (["--noise_kinds", "replace_grounded,typo"], "--noise_kinds: unknown ['typo']"),
            (["--noise_kinds", ","], "--noise_kinds"),
            (["--noise_strength", "1.5", "0.1"], "--noise_strength: [1.5, 0.1]"),
            (["--detect_rate", "0.7", "--replace_rate", "0.5"], "--detect_rate 0.7 and --replace_rate 0.5"),
            (["--steps", "0"], "--steps 0, --matching_steps 0, --word_noise_steps 0: each must"),
            (["--word_noise_steps", "-1"], "--word_noise_steps -1"),
            (["--word_noise_rates", "0.8", "0.3"], "--word_noise_rates 0.8 0.3")):
        with pytest.raises(SystemExit) as exit_info:
            script.main(["--steps", "1"] + flags + ["--output", str(tmp_path / "backbone")])
        assert exit_info.value.code == 2
        assert named in capsys.readouterr().err
    assert not (tmp_path / "backbone").exists()


def test_elsewhere_marks_pieces_that_occur_twice():
    script = _script()
    assert list(script.elsewhere_labels([5, 6, 5, 7, 8, 8, 8])) == [1, 0, 1, 0, 1, 1, 1]


def test_matching_sequences_are_distinct_pieces_with_labelled_copies():
    script = _script()
    rng = np.random.default_rng(0)
    copies = []
    for _ in range(60):
        inputs, labels = script.matching_example(rng, 300, length=96)
        assert len(inputs) == 96 and inputs[-1] == 1 and min(inputs[:-1]) >= 10
        assert max(inputs) < 300
        np.testing.assert_array_equal(labels, script.elsewhere_labels(inputs))
        # A piece occurs once or twice: copied pieces come in pairs.
        counts = [inputs.count(piece) for piece in inputs[:-1]]
        assert max(counts) <= 2 and labels.sum() % 2 == 0
        copies.append(labels.sum() // 2)
    # Between none and 23 copies, spread out.
    assert min(copies) == 0 or min(copies) < 5
    assert max(copies) <= 23 and np.mean(copies) > 6


def test_word_noise_labels_exactly_the_swapped_and_reinflected_words():
    script, vocab, word_start, _, similar = _noise_tables()
    text = [vocab[w] for w in ("\u2581Anna \u2581opened \u2581a \u2581plant \u2581in \u2581Berlin s "
                               "\u2581opens \u2581a \u2581plant \u2581in \u2581Paris").split()]
    rng = np.random.default_rng(0)
    inputs, labels = script.word_noise_example(text, rng, word_start, similar, 0.0, 0.0)
    assert inputs == text + [1] and labels == [0] * (len(text) + 1)
    kinds = set()
    for _ in range(200):
        inputs, labels = script.word_noise_example(text, rng, word_start, similar, 0.3, 0.1)
        assert len(inputs) == len(labels) == len(text) + 1 and inputs[-1] == 1 and labels[-1] == 0
        # Same pieces in the same words: the noise only moves words and changes inflections.
        assert sorted(i for i in inputs[:-1] if i not in similar) == sorted(
            i for i in text if i not in similar)
        for position, (noisy, clean, label) in enumerate(zip(inputs, text, labels)):
            if label == 0:
                assert noisy == clean, position
            elif clean in similar and noisy in similar[clean]:
                kinds.add("inflection")
            else:
                kinds.add("swap")
    assert kinds == {"inflection", "swap"}
