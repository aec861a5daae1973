"""Smoothing for int8 before CTranslate2 converts a model (SmoothQuant).

The folds keep the float model's outputs and cover every linear layer; on a
model whose activations carry an outlier channel, int8 scores without
smoothing stray from float32 and with it they come back; the engine options
are checked before converting, enter the cache key and are recorded.
"""

import copy
import json
import os

import numpy as np
import pytest

from seahorse_metrics import Scorer
from seahorse_metrics.engines import conversion, smoothing
from seahorse_metrics.engines import ctranslate2 as engine

from fixtures import isa_child, tiny_model
from fixtures import scoring_reference as ref

pytest.importorskip("ctranslate2")
torch = pytest.importorskip("torch")

SHAPES = dict(max_input_length=64, bucket_lengths=(32, 64), long_summaries="cut", normalize="full")
OUTLIER = 40.0  # How much larger channel 0 of every attention input is made.


def _logits(model, token_ids):
    start = torch.tensor([[model.config.decoder_start_token_id]])
    with torch.no_grad():
        return np.stack(
            [
                model(input_ids=torch.tensor([ids]), decoder_input_ids=start).logits[0, 0].numpy()
                for ids in token_ids
            ]
        )


@pytest.fixture(scope="module")
def token_ids(tiny_vocab_path):
    from seahorse_metrics.data.vocab import SentencePieceTokenizer

    premises, hypotheses = ref.random_pairs(6, seed=2, max_words=40)
    return smoothing.calibration_ids(
        SentencePieceTokenizer(tiny_vocab_path), list(zip(premises, hypotheses)), max_length=64
    )


@pytest.mark.parametrize("variant", ["v1_1", "v1_0"])
def test_folds_keep_the_model_and_cover_every_linear_layer(tiny_hf_model, token_ids, variant):
    if variant == "v1_1":
        model = copy.deepcopy(tiny_hf_model)
    else:  # relu feed-forward (wi folds into wo), lm_head tied to the embeddings
        model = tiny_model.build_hf_model(tiny_model.tiny_t5_v1_0_config(), model_type="t5", seed=3)
    before = _logits(model, token_ids)
    weights = {name: p.detach().clone() for name, p in model.named_parameters()}
    report = smoothing.smooth_model(model, token_ids, alpha=0.5)
    np.testing.assert_allclose(_logits(model, token_ids), before, rtol=1e-5, atol=1e-5)
    linear = {name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    readers = {name for fold in smoothing.folds(model.config) for name in fold.readers}
    assert readers == (linear if variant == "v1_1" else linear - {"lm_head"})
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, weights[name])}
    assert {f"{name}.weight" for name in readers} <= changed
    assert report["folds"] == len(smoothing.folds(model.config))
    assert report["inputs"] == len(token_ids) and report["tokens"] > 100


def _with_outlier_channel(model):
    """The same function, with channel 0 of every self-attention input OUTLIER
    times larger (its norm scale up, q/k/v's column down), as trained T5s have."""
    model = copy.deepcopy(model)
    with torch.no_grad():
        for name, module in model.named_modules():
            if name.endswith("layer.0"):
                module.layer_norm.weight[0] *= OUTLIER
                for projection in (
                    module.SelfAttention.q,
                    module.SelfAttention.k,
                    module.SelfAttention.v,
                ):
                    projection.weight[:, 0] /= OUTLIER
    return model


def outlier_errors(checkpoint: str, cache_dir: str) -> dict:
    """Mean |log score difference| to the JAX engine's float32 scores, on the
    ctranslate2 engine in float32 and in int8 unsmoothed and smoothed."""
    premises, hypotheses = ref.random_pairs(24, seed=7, max_words=50)
    options = {"cache_dir": cache_dir, "convert_in_child": False}
    reference = Scorer.load(checkpoint, **SHAPES).score(premises, hypotheses)

    def log_error(quantize, **extra):
        scores = Scorer.load(
            checkpoint,
            engine="ctranslate2",
            quantize=quantize,
            engine_options={**options, **extra},
            **SHAPES,
        ).score(premises, hypotheses)
        return float(np.abs(np.log(scores) - np.log(reference)).mean())

    return {
        "float32": log_error(None),
        "plain": log_error("int8", int8_smoothing=0),
        "smoothed": log_error("int8"),
    }


@pytest.mark.parametrize("isa", isa_child.ISAS)
def test_smoothing_brings_int8_back_to_float32_on_an_outlier_channel(
    isa, tiny_hf_model, tiny_vocab_path, tmp_path
):
    """On this host and as an AVX2-only host computes (7-bit weights there)."""
    isa_child.skip_unless_above(isa)
    checkpoint = tiny_model.save_hf_model(
        _with_outlier_channel(tiny_hf_model), str(tmp_path / "outlier"), vocab_path=tiny_vocab_path
    )
    errors = isa_child.call(
        isa,
        "test_smoothing:outlier_errors",
        checkpoint=checkpoint,
        cache_dir=str(tmp_path / "cache"),
    )
    assert errors["float32"] < 1e-5  # the outlier model is the same model in float32
    assert errors["smoothed"] < errors["plain"] / 3, errors


def test_the_conversion_names_its_smoothing(tiny_hf_model, tiny_vocab_path, tmp_path):
    checkpoint = tiny_model.save_hf_model(
        _with_outlier_channel(tiny_hf_model), str(tmp_path / "outlier"), vocab_path=tiny_vocab_path
    )
    options = {"cache_dir": str(tmp_path / "cache"), "convert_in_child": False}
    # What produced the scores names the conversion, so a run resumes only with
    # the same smoothing (the JAX engine's metadata has no conversions).
    described = [
        Scorer.load(
            checkpoint,
            engine="ctranslate2",
            quantize="int8",
            engine_options={**options, "int8_smoothing": alpha},
            **SHAPES,
        ).metadata()
        for alpha in (0, 0.5, 0.5)
    ]
    names = [d["conversions"]["score"] for d in described]
    assert names[0] != names[1] == names[2] and names[1].endswith("-int8")
    assert "conversions" not in Scorer.load(checkpoint, **SHAPES).metadata()


def test_options_are_checked_keyed_and_recorded(tiny_hf_dir, tiny_vocab_path, tmp_path):
    cache = str(tmp_path / "cache")
    for options, words in (
        ({"int8_smoothing": 1.5}, "int8_smoothing"),
        ({"int8_smoothing": True}, "int8_smoothing"),
        ({"smoothing_pairs": 0}, "smoothing_pairs"),
        ({"smoothing_data": str(tmp_path / "none.jsonl")}, "none.jsonl"),
    ):
        with pytest.raises(ValueError, match=words):
            engine.load_converted(
                tiny_hf_dir, tiny_vocab_path, "int8", {"cache_dir": cache, **options}
            )
    assert not os.path.exists(cache)  # refused before converting

    assert smoothing.recipe("float32", {"int8_smoothing": 0.5}) is None
    assert smoothing.recipe("int8", {"int8_smoothing": 0}) is None
    recipe = smoothing.recipe("int8", {})
    assert recipe["alpha"] == 0.5 and recipe["pairs"] == smoothing.DEFAULT_PAIRS
    keys = {
        conversion.conversion_key(tiny_hf_dir, tiny_vocab_path, "int8", r)
        for r in (None, recipe, smoothing.recipe("int8", {"int8_smoothing": 0.7}))
    }
    assert len(keys) == 3

    # A calibration file enters the key by content; a bad row is named by line.
    calibration = tmp_path / "pairs.jsonl"
    calibration.write_text(
        '{"article": "a cat sat on the mat", "summary": "a cat"}\n\n'
        '{"text": "the dog ran", "hypothesis": "a dog"}\n'
    )
    mine = smoothing.recipe("int8", {"smoothing_data": str(calibration)})
    assert smoothing.calibration_pairs(str(calibration), 5) == [
        ("a cat sat on the mat", "a cat"),
        ("the dog ran", "a dog"),
    ]
    moved = tmp_path / "moved.jsonl"
    moved.write_text(calibration.read_text())
    assert conversion.conversion_key(
        tiny_hf_dir, tiny_vocab_path, "int8", mine
    ) == conversion.conversion_key(
        tiny_hf_dir,
        tiny_vocab_path,
        "int8",
        smoothing.recipe("int8", {"smoothing_data": str(moved)}),
    )
    for text, error in (
        (
            '{"article": "a cat", "summary": "a cat"}\n{"article": "x"}\n',
            r"pairs.jsonl:2: no text field summary / hypothesis",
        ),
        (
            '{"article": "a cat", "summary": "a cat"}\n{"article": \n',
            r"pairs.jsonl:2: invalid JSON",
        ),
        ('["a cat", "a cat"]\n', r"pairs.jsonl:1: expected a JSON object, got list"),
        ("\n\n", r"pairs.jsonl has no pairs"),
    ):
        calibration.write_text(text)
        with pytest.raises(ValueError, match=error):
            smoothing.calibration_pairs(str(calibration), 2)
    # Through the engine: refused at conversion, the line named, nothing cached.
    with pytest.raises(ValueError, match=r"pairs.jsonl has no pairs"):
        engine.load_converted(
            tiny_hf_dir,
            tiny_vocab_path,
            "int8",
            {"cache_dir": cache, "convert_in_child": False, "smoothing_data": str(calibration)},
        )
    assert [name for name in os.listdir(cache) if not name.startswith(".")] == []

    # The library's default: converted in a child process, smoothing recorded.
    model_dir, converted = conversion.converted_model(
        tiny_hf_dir, tiny_vocab_path, "int8", cache, smoothing=recipe
    )
    record = json.load(open(os.path.join(model_dir, conversion.ENGINE_FILE), encoding="utf-8"))
    assert converted and record["smoothing"]["alpha"] == 0.5
    assert record["smoothing"]["inputs"] == smoothing.DEFAULT_PAIRS
    assert record["smoothing"]["calibration"] == smoothing.DEFAULT_CALIBRATION


def test_score_command_passes_engine_options(tiny_hf_dir, tmp_path, monkeypatch, capsys):
    """`--engine_option KEY=VALUE` reaches the ctranslate2 engine (here: the
    smoothing's exponent and pairs, recorded by the conversion); an unknown
    option, or any with the JAX engine, is refused in one line."""
    from seahorse_metrics.cli import main as cli_main

    cache = tmp_path / "cache"
    monkeypatch.setenv(conversion.CACHE_ENV_VAR, str(cache))
    premises, hypotheses = ref.random_pairs(6, seed=3)
    source = ref.write_pairs(tmp_path / "in.jsonl", premises, hypotheses)
    command = [
        "score",
        "--checkpoint",
        tiny_hf_dir,
        "--input",
        str(source),
        "--engine",
        "ctranslate2",
        "--quantize",
        "int8",
        "--max_input_length",
        "64",
        "--long_summaries",
        "cut",
        "--no_progress",
        "--engine_option",
        "int8_smoothing=0.7",
        "--engine_option",
        "smoothing_pairs=8",
        "--engine_option",
        "convert_in_child=false",
    ]
    assert cli_main(command + ["--output", str(tmp_path / "out.jsonl")]) == 0
    # (The int8 self-check converts a float32 twin beside it.)
    (entry,) = [name for name in os.listdir(cache) if name.endswith("-int8")]
    record = json.load(open(cache / entry / conversion.ENGINE_FILE, encoding="utf-8"))
    assert record["smoothing"]["alpha"] == 0.7 and record["smoothing"]["inputs"] == 8
    meta = json.load(open(tmp_path / "out.jsonl.meta.json", encoding="utf-8"))
    assert entry in json.dumps(meta)
    # Beam workers (here in this process) get the same options: no other conversion.
    assert (
        cli_main(
            command
            + [
                "--output",
                str(tmp_path / "beam.jsonl"),
                "--runner",
                "DirectRunner",
                "--merge",
                "--direct_running_mode=in_memory",
            ]
        )
        == 0
    )
    assert [name for name in os.listdir(cache) if name.endswith("-int8")] == [entry]
    capsys.readouterr()

    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        cli_main(command + ["--output", str(tmp_path / "x.jsonl"), "--engine_option", "colour"])
    assert exited.value.code == 2
    assert "expected KEY=VALUE, got 'colour'" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "x.jsonl")
    jax_command = [w for w in command if w not in ("ctranslate2", "--engine")]
    for words, extra in (
        (["int8_smoothing", "ctranslate2 engine's"], []),
        (["unknown engine options", "colour"], ["--engine_option", "colour=red"]),
    ):
        chosen = (jax_command if "ctranslate2 engine's" in words else command) + extra
        assert cli_main(chosen + ["--output", str(tmp_path / "x.jsonl")]) == 2
        error = capsys.readouterr().err
        assert all(word in error for word in words) and error.count("\n") == 1, error
