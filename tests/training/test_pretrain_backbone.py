"""The demo's backbone: its pretraining noise functions and the shipped files."""

from __future__ import annotations

import filecmp
import json
import os

import numpy as np
import pytest

from demo_data.backbone import (
    alignment,
    grammar,
    matching,
    noise_detection,
    text_objectives,
    texts,
    vocabulary,
    word_noise,
)
from demo_data.backbone.config import backbone_config
from demo_data.backbone.main import main as pretrain

from fixtures import paths

REPO_ROOT = paths.REPO
SAMPLE_DIR = os.path.join(REPO_ROOT, "seahorse_metrics", "data", "sample")


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
    rng = np.random.default_rng(0)
    ids = list(range(3, 103))
    for _ in range(20):
        inputs, targets = text_objectives.span_corrupt(ids, rng, vocab_size=6144)
        assert inputs[-1] == 1 and targets[-1] == 1
        assert _uncorrupt(inputs, targets, 6144) == ids
        hidden = sum(1 for t in targets[:-1] if t < 6144 - 100)
        assert hidden == 15


def test_grounded_swap_replaces_only_supported_tokens_with_unsupported_ones():
    rng = np.random.default_rng(0)
    premise = [10, 11, 12, 13, 14, 15]
    hypothesis = [7, 8, 12, 20, 14, 21, 15]  # 7, 8: the "hypothesis:" prefix
    donor = ([30, 31, 32], [7, 8, 31, 32, 40])
    for _ in range(10):
        inputs, targets = text_objectives.swap_grounded(
            (premise, hypothesis), donor, 2, rng, rate=0.4
        )
        assert targets == hypothesis[2:] + [1]
        noisy = inputs[len(premise) : -1]
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
        model_file=os.path.join(SAMPLE_DIR, "spiece.model")
    ).get_piece_size()
    assert config == backbone_config(pieces)
    assert filecmp.cmp(
        os.path.join(backbone, "spiece.model"),
        os.path.join(SAMPLE_DIR, "spiece.model"),
        shallow=False,
    )
    with open(os.path.join(backbone, "pretraining.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    assert "no ratings" in record["data"]
    assert np.isfinite(params["token_embedder"]["embedding"]).all()


def _noise_tables():
    pieces = [
        "<pad>",
        "</s>",
        "<unk>",
        "\u2581premise",
        ":",
        "\u2581hypothesis",
        "\u2581Anna",
        "\u2581Berlin",
        "\u25817",
        "\u2581opened",
        "\u2581opens",
        "\u2581a",
        "\u2581plant",
        "\u2581in",
        "\u2581Paris",
        "\u25819",
        "s",
    ]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    word_start = np.array([p.startswith("\u2581") for p in pieces])
    return vocab, word_start, vocabulary.value_pieces(pieces), vocabulary.similar_pieces(pieces)


def test_similar_and_value_pieces():
    vocab, _, is_value, similar = _noise_tables()
    assert similar[vocab["\u2581opened"]] == [vocab["\u2581opens"]]
    assert vocab["\u2581plant"] not in similar
    assert {i for i in np.flatnonzero(is_value)} == {
        vocab[p] for p in ("\u2581Anna", "\u2581Berlin", "\u25817", "\u2581Paris", "\u25819")
    }


def test_noise_detection_labels_exactly_the_pieces_the_noise_put_there():
    vocab, word_start, is_value, similar = _noise_tables()

    def ids(words):
        return [vocab[w] for w in words.split()]

    premise = ids(
        "\u2581premise : \u2581Anna \u2581opened \u2581a \u2581plant \u2581in \u2581Berlin \u25817"
    )
    hypothesis = ids(
        "\u2581hypothesis : \u2581Anna \u2581opened \u2581a \u2581plant \u2581in \u2581Berlin"
    )
    donor = (
        ids("\u2581premise : \u2581Paris \u25819"),
        ids("\u2581hypothesis : \u2581Paris \u25819"),
    )
    rng = np.random.default_rng(0)
    for kind in noise_detection.NOISE_KINDS:
        seen_noise = 0
        for _ in range(20):
            inputs, targets, labels = noise_detection.detect_noise(
                (premise, hypothesis),
                donor,
                2,
                rng,
                word_start,
                is_value,
                similar,
                input_length=64,
                target_length=12,
                clean_rate=0.0,
                kinds=(kind,),
            )
            assert len(labels) == len(inputs) and inputs[-1] == 1 and targets[-1] == 1
            assert inputs[: len(premise)] == premise and labels[: len(premise) + 2] == [-1] * (
                len(premise) + 2
            )
            noisy = [token for token, label in zip(inputs, labels) if label == 1]
            # The target spells out the noisy pieces, in order; clean rows have an empty target.
            assert targets[:-1] == noisy
            body = inputs[len(premise) + 2 : -1]
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
    inputs, targets, labels = noise_detection.detect_noise(
        (premise, hypothesis),
        donor,
        2,
        rng,
        word_start,
        is_value,
        similar,
        input_length=64,
        target_length=12,
        clean_rate=1.0,
    )
    assert targets == [1] and inputs == premise + hypothesis + [1] and 1 not in labels


def test_noise_detection_keeps_the_hypothesis_and_cuts_the_premise():
    vocab, word_start, is_value, similar = _noise_tables()
    premise = [vocab["\u2581premise"], vocab[":"]] + [vocab["\u2581plant"]] * 30
    hypothesis = [vocab["\u2581hypothesis"], vocab[":"]] + [
        vocab["\u2581Anna"],
        vocab["\u2581opened"],
    ] * 5
    inputs, _, labels = noise_detection.detect_noise(
        (premise, hypothesis),
        (premise, hypothesis),
        2,
        np.random.default_rng(1),
        word_start,
        is_value,
        similar,
        input_length=24,
        target_length=12,
        clean_rate=0.0,
        kinds=("duplicate_span",),
    )
    assert len(inputs) == 24 and len(labels) == 24
    assert inputs[-1] == 1 and sum(label == 1 for label in labels) >= 2


def test_noise_strength_makes_the_noise_heavier():
    vocab, word_start, is_value, similar = _noise_tables()
    premise = [vocab["\u2581premise"], vocab[":"]] + [vocab["\u2581plant"]] * 4
    hypothesis = [vocab["\u2581hypothesis"], vocab[":"]] + [
        vocab["\u2581Anna"],
        vocab["\u2581opened"],
        vocab["\u2581a"],
        vocab["\u2581plant"],
    ] * 6
    rng = np.random.default_rng(2)

    def noisy_pieces(kind, strength):
        _, _, labels = noise_detection.detect_noise(
            (premise, hypothesis),
            (premise, hypothesis),
            2,
            rng,
            word_start,
            is_value,
            similar,
            input_length=128,
            target_length=64,
            clean_rate=0.0,
            kinds=(kind,),
            strength=strength,
        )
        return sum(label == 1 for label in labels)

    for kind in ("duplicate_span", "swap_words", "replace_similar"):
        light = np.mean([noisy_pieces(kind, 0.0) for _ in range(20)])
        heavy = np.mean([noisy_pieces(kind, 0.8) for _ in range(20)])
        assert heavy > 1.4 * light, (kind, light, heavy)


def test_pretraining_with_noise_detection_exports_a_backbone_and_its_record(tmp_path):
    from seahorse_metrics.checkpoints import load_checkpoint

    shipped = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
    output = tmp_path / "backbone"
    pretrain(
        [
            "--init",
            shipped,
            "--steps",
            "2",
            "--batch_size",
            "4",
            "--input_length",
            "64",
            "--target_length",
            "8",
            "--detect_rate",
            "0.5",
            "--rtd_weight",
            "1.0",
            "--matching_steps",
            "2",
            "--noise_strength",
            "0.8",
            "0.2",
            "--output",
            str(output),
        ]
    )
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
    # A continued run keeps the record of the run it started from.
    with open(os.path.join(shipped, "pretraining.json"), encoding="utf-8") as handle:
        assert record["init_record"] == json.load(handle)


@pytest.mark.parametrize(
    "stage, flags, changed",
    [
        ("matching", ["--matching_steps", "3"], ("layers_0", "attention", "query")),
        (
            "word_noise",
            ["--word_noise_steps", "3", "--input_length", "64"],
            ("layers_2", "mlp", "wo"),
        ),
        (
            "grammar",
            ["--grammar_steps", "3", "--input_length", "64", "--grammar_split", "0.5"],
            ("layers_2", "attention", "out"),
        ),
        (
            "alignment",
            [
                "--alignment_steps",
                "3",
                "--input_length",
                "64",
                "--alignment_shuffle",
                "0.5",
                "--alignment_swap",
                "0.5",
            ],
            ("layers_1", "attention", "key"),
        ),
        (
            "alignment",
            [
                "--alignment_steps",
                "3",
                "--input_length",
                "64",
                "--alignment_corpus",
                "0.5",
                "--alignment_grammar",
            ],
            ("layers_0", "mlp", "wo"),
        ),
    ],
)
def test_a_stage_alone_trains_the_encoder_only(tmp_path, stage, flags, changed):
    from seahorse_metrics.checkpoints import load_checkpoint

    shipped = os.path.join(os.path.dirname(SAMPLE_DIR), "backbone")
    output = tmp_path / stage
    pretrain(
        ["--init", shipped, "--steps", "0", "--batch_size", "4"] + flags + ["--output", str(output)]
    )
    _, params = load_checkpoint(str(output))
    _, before = load_checkpoint(shipped)
    layer, block, name = changed
    assert not np.allclose(
        params["encoder"][layer][block][name]["kernel"],
        before["encoder"][layer][block][name]["kernel"],
    )
    # The decoder gets no gradient; only AdamW's weight decay touches it.
    np.testing.assert_allclose(
        params["decoder"]["layers_0"]["mlp"]["wi_0"]["kernel"],
        before["decoder"]["layers_0"]["mlp"]["wi_0"]["kernel"],
        rtol=1e-5,
    )
    with open(output / "pretraining.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["objective"] == stage and record["final_loss"] is None
    assert record[stage]["steps"] == 3
    assert 0.0 <= record[stage]["held_out_roc_auc"] <= 1.0
    if stage == "word_noise":
        assert record["word_noise_rates"] == [0.3, 0.1]
    if stage == "grammar":
        assert record["grammar_rates"] == [0.1, 0.05] and record["grammar_split"] == 0.5
    if stage == "alignment" and record["alignment_grammar"]:
        assert record["alignment_corpus"] == 0.5 and "corpus" in record["data"]
    elif stage == "alignment":
        assert record["alignment_shuffle"] == record["alignment_swap"] == 0.5
        assert len(record["alignment"]["held_out_roc_auc_per_column"]) == len(
            alignment.ALIGNMENT_HEADS
        )


def test_pretraining_refuses_bad_noise_options_and_names_them(tmp_path, capsys):
    import pytest

    for flags, named in (
        (["--noise_kinds", "replace_grounded,typo"], "--noise_kinds: unknown ['typo']"),
        (["--noise_kinds", ","], "--noise_kinds"),
        (["--noise_strength", "1.5", "0.1"], "--noise_strength: [1.5, 0.1]"),
        (
            ["--detect_rate", "0.7", "--replace_rate", "0.5"],
            "--detect_rate 0.7 and --replace_rate 0.5",
        ),
        (
            ["--steps", "0"],
            "--steps 0, --matching_steps 0, --word_noise_steps 0, "
            "--grammar_steps 0, --alignment_steps 0: each must",
        ),
        (["--grammar_rates", "0.9", "0.2"], "--grammar_rates 0.9 0.2"),
        (["--grammar_split", "1.5"], "--grammar_split 1.5 must lie in [0, 1]"),
        (["--alignment_corpus", "2"], "--alignment_corpus 2.0 must lie in [0, 1]"),
        (["--word_noise_steps", "-1"], "--word_noise_steps -1"),
        (["--word_noise_rates", "0.8", "0.3"], "--word_noise_rates 0.8 0.3"),
        (["--alignment_noise_rates", "0.9", "0.2"], "--alignment_noise_rates 0.9 0.2"),
        (["--alignment_swap", "1.5"], "--alignment_swap 1.5 must lie in [0, 1]"),
        (["--alignment_shuffle", "-0.1"], "--alignment_shuffle -0.1 must lie in [0, 1]"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            pretrain(["--steps", "1"] + flags + ["--output", str(tmp_path / "backbone")])
        assert exit_info.value.code == 2
        assert named in capsys.readouterr().err
    assert not (tmp_path / "backbone").exists()


def test_elsewhere_marks_pieces_that_occur_twice():
    assert list(matching.elsewhere_labels([5, 6, 5, 7, 8, 8, 8])) == [1, 0, 1, 0, 1, 1, 1]


def test_matching_sequences_are_distinct_pieces_with_labelled_copies():
    rng = np.random.default_rng(0)
    copies = []
    for _ in range(60):
        inputs, labels = matching.matching_example(rng, 300, length=96)
        assert len(inputs) == 96 and inputs[-1] == 1 and min(inputs[:-1]) >= 10
        assert max(inputs) < 300
        np.testing.assert_array_equal(labels, matching.elsewhere_labels(inputs))
        # A piece occurs once or twice: copied pieces come in pairs.
        counts = [inputs.count(piece) for piece in inputs[:-1]]
        assert max(counts) <= 2 and labels.sum() % 2 == 0
        copies.append(labels.sum() // 2)
    # Between none and 23 copies, spread out.
    assert min(copies) == 0 or min(copies) < 5
    assert max(copies) <= 23 and np.mean(copies) > 6


def test_word_noise_labels_exactly_the_swapped_and_reinflected_words():
    vocab, word_start, _, similar = _noise_tables()
    text = [
        vocab[w]
        for w in (
            "\u2581Anna \u2581opened \u2581a \u2581plant \u2581in \u2581Berlin s "
            "\u2581opens \u2581a \u2581plant \u2581in \u2581Paris"
        ).split()
    ]
    rng = np.random.default_rng(0)
    inputs, labels = word_noise.word_noise_example(text, rng, word_start, similar, 0.0, 0.0)
    assert inputs == text + [1] and labels == [0] * (len(text) + 1)
    kinds = set()
    for _ in range(200):
        inputs, labels = word_noise.word_noise_example(text, rng, word_start, similar, 0.3, 0.1)
        assert len(inputs) == len(labels) == len(text) + 1 and inputs[-1] == 1 and labels[-1] == 0
        # Same pieces in the same words: the noise only moves words and changes inflections.
        assert sorted(i for i in inputs[:-1] if i not in similar) == sorted(
            i for i in text if i not in similar
        )
        for position, (noisy, clean, label) in enumerate(zip(inputs, text, labels)):
            if label == 0:
                assert noisy == clean, position
            elif clean in similar and noisy in similar[clean]:
                kinds.add("inflection")
            else:
                kinds.add("swap")
    assert kinds == {"inflection", "swap"}


def test_alignment_labels_say_what_the_premise_its_lead_and_the_hypothesis_contain():
    pieces = [
        "<pad>",
        "</s>",
        "<unk>",
        "\u2581premise",
        ":",
        "\u2581hypothesis",
        "\u2581Anna",
        "\u2581opened",
        "\u2581a",
        "\u2581plant",
        "\u2581in",
        "\u2581Paris",
        "\u2581Tom",
        "\u2581left",
        ".",
        "\u25813.",
        "70",
    ]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    ends, starts_word = vocabulary.sentence_ends(pieces), vocabulary.word_boundaries(pieces)
    is_value = vocabulary.value_pieces(pieces)
    assert [p for p, end in zip(pieces, ends) if end] == ["."]
    assert not starts_word[vocab["70"]] and starts_word[vocab["."]]
    tables = (ends, 64, starts_word, is_value)

    def ids(words):
        return [vocab[w] for w in words.split()]

    premise = ids(
        "\u2581premise : \u2581Tom \u2581left \u25813. 70 . \u2581Anna \u2581opened "
        "\u2581a \u2581plant \u2581in \u2581Paris ."
    )
    hypothesis = ids(
        "\u2581hypothesis : \u2581Anna \u2581left \u2581a \u2581plant \u2581a \u2581plant \u2581Tom"
    )
    inputs, labels = alignment.alignment_example((premise, hypothesis), 2, 2, *tables)
    assert inputs == premise + hypothesis + [1]
    assert labels.shape == (len(inputs), len(alignment.ALIGNMENT_HEADS))
    premise_part, hypothesis_part = labels[2 : len(premise)], labels[len(premise) + 2 : -1]
    # Columns that do not apply, the prefixes and EOS are unlabelled.
    assert (labels[[0, 1, len(premise), len(premise) + 1, -1]] == -1).all()
    assert (premise_part[:, :2] == -1).all() and (hypothesis_part[:, 2:4] == -1).all()
    in_premise, in_lead = hypothesis_part[:, 0].tolist(), hypothesis_part[:, 1].tolist()
    assert in_premise == [1, 1, 1, 1, 1, 1, 1]
    assert in_lead == [0, 1, 0, 0, 0, 0, 1]  # the lead is "Tom left 3.70 ."
    in_hypothesis, lead_position = premise_part[:, 2].tolist(), premise_part[:, 3].tolist()
    assert in_hypothesis == [1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0]
    assert lead_position == [1] * 5 + [0] * 7  # the dot of "3.70" ends no sentence
    assert hypothesis_part[:, 4].tolist() == [0, 0, 1, 1, 1, 1, 0]
    assert premise_part[:, 4].tolist() == [0] * 12
    # Names and numbers only; the premise has them all; no noise was given.
    assert hypothesis_part[:, 5].tolist() == [0, -1, -1, -1, -1, -1, 0]
    assert (premise_part[:, 5:] == -1).all() and hypothesis_part[:, 6].tolist() == [0] * 7
    assert hypothesis_part[:, 7].tolist() == [0] * 7 and (labels[:, 8] == -1).all()
    # Words the premise lacks ("3." alone, it has "3.70"; "Anna70"), and the
    # word noise's flags.
    noisy = ids("\u2581hypothesis : \u2581Tom \u2581Paris \u25813. \u2581Anna 70")
    _, labels = alignment.alignment_example(
        (premise, noisy), 2, 2, *tables, [1, 1, 0, 0, 0], wording_verdict=True
    )
    assert labels[len(premise) + 2 : -1, 5].tolist() == [0, 0, 1, 1, 1]
    assert labels[len(premise) + 2 : -1, 6].tolist() == [1, 1, 0, 0, 0]
    # Two of its four names and numbers are unsupported: every piece says so.
    assert labels[len(premise) + 2 : -1, 7].tolist() == [0.5] * 5
    # The noise flags a word, so every piece says the wording has a fault.
    assert labels[len(premise) + 2 : -1, 8].tolist() == [1] * 5
    # A long premise loses its end so the whole hypothesis fits; the labels
    # describe what is left ("premise: Tom left").
    inputs, labels = alignment.alignment_example(
        (premise, hypothesis), 2, 2, ends, 14, starts_word, is_value
    )
    assert len(inputs) == 14 and inputs[-10:-1] == hypothesis
    assert labels[len(inputs) - 8 : -1, 0].tolist() == [0, 1, 0, 0, 0, 0, 1]


def test_shuffled_premises_keep_their_sentences_and_swapped_values_come_from_the_donor():
    pieces = [
        "<pad>",
        "</s>",
        "<unk>",
        "\u2581premise",
        ":",
        "\u2581hypothesis",
        "\u2581Anna",
        "\u2581left",
        ".",
        "\u2581Tom",
        "\u2581came",
        "\u2581Eve",
        "\u2581sang",
        "\u25817",
        "\u2581and",
        "\u2581Bob",
    ]
    vocab = {piece: index for index, piece in enumerate(pieces)}

    def ids(words):
        return [vocab[w] for w in words.split()]

    ends, starts_word = vocabulary.sentence_ends(pieces), vocabulary.word_boundaries(pieces)
    is_value = vocabulary.value_pieces(pieces)
    premise = ids(
        "\u2581premise : \u2581Anna \u2581left . \u2581Tom \u2581came . \u2581Eve "
        "\u2581sang . \u2581Bob"
    )
    sentences = {
        tuple(ids(s))
        for s in ("\u2581Anna \u2581left .", "\u2581Tom \u2581came .", "\u2581Eve \u2581sang .")
    }
    rng = np.random.default_rng(0)
    leads = set()
    for _ in range(30):
        shuffled = alignment.shuffle_sentences(premise, 2, ends, rng)
        assert shuffled[:2] == premise[:2] and shuffled[-1] == vocab["\u2581Bob"]
        assert {tuple(shuffled[k : k + 3]) for k in (2, 5, 8)} == sentences
        leads.add(tuple(shuffled[2:5]))
    assert leads == sentences
    hypothesis = ids("\u2581hypothesis : \u2581Anna \u2581and \u2581Tom \u2581left")
    donor = ids("\u2581hypothesis : \u2581Eve \u2581sang \u25817")
    swapped_counts = set()
    for _ in range(30):
        swapped = alignment.swap_values(hypothesis, donor, 2, starts_word, is_value, rng)
        assert len(swapped) == len(hypothesis) and swapped[3] == vocab["\u2581and"]
        assert swapped[5] == vocab["\u2581left"]
        values = [swapped[2], swapped[4]]
        assert all(
            v in (vocab["\u2581Anna"], vocab["\u2581Tom"], vocab["\u2581Eve"], vocab["\u25817"])
            for v in values
        )
        swapped_counts.add(sum(v in (vocab["\u2581Eve"], vocab["\u25817"]) for v in values))
    assert swapped_counts == {1, 2}
    # Nothing to swap: unchanged.
    plain = ids("\u2581hypothesis : \u2581left \u2581and \u2581came")
    assert alignment.swap_values(plain, donor, 2, starts_word, is_value, rng) == plain


def _grammar_tables():
    pieces = [
        "<pad>",
        "</s>",
        "<unk>",
        "\u2581police",
        "\u2581have",
        "\u2581has",
        "\u2581arrested",
        "\u2581a",
        "\u2581storm",
        "\u2581damaged",
        "\u2581homes",
        "\u25813",
        ".",
        "\u2581people",
        "\u2581been",
        "\u2581Mia",
        "\u25817",
    ]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    starts_word = vocabulary.word_boundaries(pieces)

    def ids(text):
        return [vocab[piece] for piece in text.split()]

    bodies = [
        ids("\u2581police \u2581have \u2581arrested \u25813 \u2581people ."),
        ids("\u2581a \u2581storm \u2581has \u2581damaged \u25813 \u2581homes ."),
        ids("\u2581police \u2581have \u2581been \u2581arrested ."),
        ids("\u2581a \u2581storm \u2581has \u2581been ."),
    ]
    return pieces, ids, starts_word, bodies


def test_word_pairs_know_what_follows_what_and_which_words_can_stand_in():
    pieces, ids, starts_word, bodies = _grammar_tables()
    pairs, substitutes = grammar.word_pairs(bodies, starts_word, pieces)
    word = {piece: (index,) for index, piece in enumerate(pieces)}
    assert pairs.has(grammar.EDGE, word["\u2581police"])
    assert pairs.has(word["\u2581people"], word["."]) and pairs.has(word["."], grammar.EDGE)
    assert not pairs.has(word["\u2581police"], word["\u2581has"])
    # Any number stands where a number was seen.
    assert pairs.has(word["\u2581arrested"], word["\u25817"])
    assert not pairs.has(word["\u2581police"], word["\u25817"])
    # `has` and `have` both come before `been`: each stands in for the other.
    assert word["\u2581have"] in substitutes[word["\u2581has"]]
    assert word["\u2581has"] in substitutes[word["\u2581have"]]
    # A number neither gets substitutes nor makes them: `arrested` and
    # `damaged` only share the `3` after them.
    assert word["\u25813"] not in substitutes and word["."] not in substitutes
    assert word["\u2581damaged"] not in substitutes.get(word["\u2581arrested"], [])


def test_grammar_labels_mark_the_words_of_pairs_the_corpus_never_has():
    pieces, ids, starts_word, bodies = _grammar_tables()
    pairs, substitutes = grammar.word_pairs(bodies, starts_word, pieces)
    premise = ids("\u2581Mia \u2581a \u2581storm \u2581has \u2581damaged \u25813 \u2581homes .")
    prefix = 1  # one piece stands for `hypothesis:`
    clean = [0] + ids("\u2581police \u2581have \u2581arrested \u25813 \u2581people .")
    rng = np.random.default_rng(0)
    inputs, labels = grammar.grammar_example(
        (premise, clean), prefix, rng, starts_word, pairs, substitutes, 64, 0.0, 0.0
    )
    assert inputs == premise + clean + [1]
    body = slice(len(premise) + prefix, len(inputs) - 1)
    assert (labels[: body.start] == -1).all() and (labels[body] == 0).all()
    assert (labels[-1] == -1).all()
    # An error that the text brings is found without any noise: `police has`;
    # every hypothesis piece says that the hypothesis has one.
    broken = [0] + ids("\u2581police \u2581has \u2581arrested \u25813 \u2581people .")
    _, labels = grammar.grammar_example(
        (premise, broken), prefix, rng, starts_word, pairs, substitutes, 64, 0.0, 0.0
    )
    assert labels[body, 0].tolist() == [1, 1, 1, 0, 0, 0] and (labels[body, 1] == 1).all()
    # Noise: whatever it did, a piece is labelled 1 exactly when its word
    # makes a pair the corpus lacks; the premise is cut to fit the length.
    changed = 0
    for _ in range(100):
        inputs, labels = grammar.grammar_example(
            (premise, clean), prefix, rng, starts_word, pairs, substitutes, 10, 0.3, 0.2
        )
        assert len(inputs) == len(labels) <= 10 and inputs[-1] == 1
        start = inputs.index(0) + 1
        noisy = inputs[start:-1]
        assert len(noisy) == len(clean) - prefix
        assert inputs[: start - 1] == premise[: len(inputs) - len(clean) - 1]
        words = [grammar.EDGE] + [(piece,) for piece in noisy] + [grammar.EDGE]
        expected = [
            int(not pairs.has(words[k - 1], words[k]) or not pairs.has(words[k], words[k + 1]))
            for k in range(1, len(words) - 1)
        ]
        assert labels[start:-1, 0].tolist() == expected
        assert (labels[start:-1, 1] == max(expected)).all()
        changed += noisy != clean[prefix:]
    assert changed > 50


def test_the_corpus_reader_names_the_line_of_a_bad_record(tmp_path):
    import gzip

    pairs = texts.read_corpus(SAMPLE_DIR)
    assert len(pairs) == 9000 and all(article and summary for article, summary in pairs)
    (tmp_path / "corpus").mkdir()
    with gzip.open(tmp_path / "corpus" / "train.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write('{"text": "A.", "summary": "B."}\n{"text": "C."}\n')
    with pytest.raises(ValueError, match=r"train.jsonl.gz:2: not a corpus record"):
        texts.read_corpus(str(tmp_path))
    # A file that is not gzip, and one cut short, are named too.
    (tmp_path / "corpus" / "train.jsonl.gz").write_text('{"text": "A.", "summary": "B."}\n')
    with pytest.raises(ValueError, match=r"train.jsonl.gz: unreadable after line 0"):
        texts.read_corpus(str(tmp_path))
    whole = gzip.compress(('{"text": "A.", "summary": "B."}\n' * 400).encode())
    (tmp_path / "corpus" / "train.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"train.jsonl.gz: unreadable after line \d+"):
        texts.read_corpus(str(tmp_path))
