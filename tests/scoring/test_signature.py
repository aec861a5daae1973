"""A signature on every score: each part of what produced a score is in it,
and two scorers with one signature give the same scores."""

import os
import shutil

import numpy as np
import pytest

from seahorse_metrics import Scorer
from seahorse_metrics.scoring.signature import format_signature, parse_signature

from fixtures import scoring_reference as ref

SHAPES = dict(
    max_input_length=64,
    bucket_lengths=(32, 64),
    long_summaries="cut",
    compiler_options={"xla_backend_optimization_level": 0},
    int8_check=False,
)


def signature(checkpoint, **options):
    return Scorer.load(checkpoint, **{**SHAPES, **options}).metadata()["signatures"]["score"]


def test_equal_signatures_give_equal_scores(tiny_hf_dir):
    pairs = ref.random_pairs(6, seed=2, max_words=30)
    first, second = (Scorer.load(tiny_hf_dir, batch_size=batch, **SHAPES) for batch in (2, 8))
    assert first.metadata()["signatures"] == second.metadata()["signatures"]
    np.testing.assert_allclose(first.score(*pairs), second.score(*pairs), rtol=1e-5)
    parts = parse_signature(first.metadata()["signatures"]["score"])
    assert list(parts)[:6] == ["seahorse", "engine", "isa", "dtype", "quant", "ckpt"]
    assert parts["engine"].startswith("jax-") and parts["quant"] == "none"
    assert format_signature(parts) == first.metadata()["signatures"]["score"]


@pytest.mark.parametrize(
    "part, options",
    [
        ("dtype", {"dtype": "bfloat16"}),
        ("quant", {"quantize": "int8"}),
        ("len", {"max_input_length": 32}),
        ("trunc", {"truncation": "joint"}),
        ("long", {"long_inputs": "chunk"}),
        ("unit", {"per_sentence": True}),
        ("norm", {"normalize": "pair"}),
        ("cut", {"long_summaries": "error"}),
        ("tmpl", {"question_template": "q: {question} p: {premise} h: {hypothesis}"}),
    ],
)
def test_each_setting_is_part_of_the_signature(tiny_hf_dir, part, options):
    base, changed = (
        parse_signature(signature(tiny_hf_dir)),
        parse_signature(signature(tiny_hf_dir, **options)),
    )
    assert [key for key in base if base[key] != changed[key]] == [part]


def test_the_checkpoint_content_and_the_instruction_set_are_in_it(
    tiny_hf_dir, tmp_path, monkeypatch
):
    from safetensors.numpy import load_file, save_file

    copy = shutil.copytree(tiny_hf_dir, str(tmp_path / "copy"))
    assert signature(copy) == signature(tiny_hf_dir)  # The content, not the path.
    weights = os.path.join(copy, "model.safetensors")
    tensors = load_file(weights)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] * 1.5
    save_file(tensors, weights, metadata={"format": "pt"})
    base, edited = parse_signature(signature(tiny_hf_dir)), parse_signature(signature(copy))
    assert [key for key in base if base[key] != edited[key]] == ["ckpt"]

    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX")
    capped = parse_signature(signature(tiny_hf_dir, quantize="int8"))
    assert capped["isa"] == "avx" and capped["quant"] == "int8-f32"


def test_the_ctranslate2_engine_names_itself_and_its_int8(tiny_hf_dir, tmp_path):
    pytest.importorskip("ctranslate2")
    options = {"cache_dir": str(tmp_path / "ct2"), "convert_in_child": False}
    float32 = parse_signature(signature(tiny_hf_dir, engine="ctranslate2", engine_options=options))
    int8 = parse_signature(
        signature(
            tiny_hf_dir,
            engine="ctranslate2",
            quantize="int8",
            engine_options={**options, "int8_smoothing": 0.5},
        )
    )
    assert float32["engine"].startswith("ctranslate2-") and float32["quant"] == "none"
    assert int8["quant"] in ("int8-w8-s0.5", "int8-w7-s0.5")
    unsmoothed = parse_signature(
        signature(
            tiny_hf_dir,
            engine="ctranslate2",
            quantize="int8",
            engine_options={**options, "int8_smoothing": 0},
        )
    )
    assert unsmoothed["quant"] == int8["quant"].rsplit("-", 1)[0]
