"""Int8 scoring (`quantize="int8"`): the quantized parameters, and scores that
rank as the float32 ones do, on random and on trained weights."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util
from scipy.stats import spearmanr

from seahorse_metrics import Scorer
from seahorse_metrics.checkpoints import load_checkpoint
from seahorse_metrics.model import EncoderDecoderModel
from seahorse_metrics.model.quantize import kernel_converter, quantize_kernel, quantize_params

from fixtures import paths
from fixtures import scoring_reference as ref

FAST = {"xla_backend_optimization_level": 0}
BACKBONE = os.path.join(paths.REPO, "seahorse_metrics", "data", "backbone")
SAMPLE = os.path.join(os.path.dirname(BACKBONE), "sample", "seahorse")


def test_quantize_kernel_per_output_channel():
    rng = np.random.default_rng(0)
    kernel = rng.standard_normal((48, 5)).astype(np.float32) * np.array(
        [1, 10, 0.01, 0, 3], np.float32
    )
    values, scale = quantize_kernel(kernel)
    assert values.dtype == np.int8 and scale.dtype == np.float32 and scale.shape == (5,)
    assert np.abs(values).max() == 127 and values.min() >= -127
    # Each column keeps its own range: the error is at most half a step of it.
    error = np.abs(values * scale - kernel)
    assert (error <= scale / 2 + 1e-7).all()
    assert scale[3] == 1.0 and not values[:, 3].any()  # an all-zero column
    with pytest.raises(ValueError, match="2-D"):
        quantize_kernel(np.zeros((2, 3, 4)))


# A fresh interpreter, so that the heap holds only what the script frees.
_FREED_HEAP = """
import numpy as np
from seahorse_metrics.scoring.loading import release_freed_memory

def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])

big = np.ones(4 << 20, np.float32)
del big  # a freed 16 MB block raises glibc's mmap threshold: what follows is heap
blocks = [np.ones(1 << 20, np.float32) for _ in range(100)]
keep = np.ones(1 << 20, np.float32)  # above the freed blocks: the heap's top stays
del blocks
before = rss()
print(release_freed_memory(), (before - rss()) // 1024)
"""


def _has_malloc_trim() -> bool:
    import ctypes

    return hasattr(ctypes.CDLL(None), "malloc_trim")


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and _has_malloc_trim()),
    reason="the check reads /proc and the C library's heap (glibc)",
)
def test_memory_freed_after_quantizing_goes_back_to_the_system():
    # Scorer.load(..., quantize="int8") calls it after the float32 kernels are freed.
    result = subprocess.run(
        [sys.executable, "-c", _FREED_HEAP], capture_output=True, text=True, check=True
    )
    returned, megabytes = result.stdout.split()
    assert returned == "True"
    assert int(megabytes) > 200, f"only {megabytes} MB of 400 MB freed went back"


def test_quantized_params_fit_the_quantized_network(tiny_hf_dir):
    config, params = load_checkpoint(tiny_hf_dir)
    model = EncoderDecoderModel(config.replace(quantize="int8"))
    quantized = quantize_params(model, params)
    abstract = model.abstract_params()
    assert jax.tree.structure(quantized) == jax.tree.structure(abstract)
    for got, want in zip(jax.tree.leaves(quantized), jax.tree.leaves(abstract)):
        assert got.shape == want.shape and got.dtype == want.dtype
    query = quantized["encoder"]["layers_0"]["attention"]["query"]
    assert query["kernel"].dtype == np.int8 and query["kernel_scale"].shape == (config.inner_dim,)
    assert quantized["decoder"]["layers_0"]["mlp"]["wo"]["kernel"].dtype == np.int8
    for name in ("token_embedder",):  # embeddings and the output head stay float32
        assert quantized[name]["embedding"].dtype == np.float32
    assert quantized["decoder"]["logits_dense"]["kernel"].dtype == np.float32
    axes = model.param_logical_axes()
    assert axes["encoder"]["layers_0"]["mlp"]["wi_0"]["kernel_scale"] == jax.sharding.PartitionSpec(
        "mlp"
    )
    with pytest.raises(ValueError, match="not quantized"):
        quantize_params(EncoderDecoderModel(config), params)
    del params["encoder"]["layers_0"]["mlp"]
    with pytest.raises(ValueError, match="lack"):
        quantize_params(model, params)
    with pytest.raises(ValueError, match="quantize"):
        config.replace(quantize="int4")


def test_int8_t5_v1_0_relu_feed_forward(tiny_hf_dir):
    # T5 v1.0 (the TRUE NLI metric): one input kernel `wi`, quantized as the others.
    config, _ = load_checkpoint(tiny_hf_dir)
    config = config.replace(feed_forward_proj="relu", tie_word_embeddings=True)
    params = EncoderDecoderModel(config).init_params(jax.random.PRNGKey(0))
    model = EncoderDecoderModel(config.replace(quantize="int8"))
    quantized = quantize_params(model, params)
    assert quantized["encoder"]["layers_0"]["mlp"]["wi"]["kernel"].dtype == np.int8
    assert quantized["decoder"]["layers_0"]["mlp"]["wo"]["kernel_scale"].dtype == np.float32
    tokens = np.random.default_rng(0).integers(2, config.vocab_size, (4, 12)).astype(np.int32)
    batch = {
        "encoder_input_tokens": jnp.asarray(tokens),
        "decoder_input_tokens": jnp.zeros((4, 1), jnp.int32),
    }
    want = np.asarray(EncoderDecoderModel(config).logits(params, batch))[:, 0]
    got = np.asarray(model.logits(quantized, batch))[:, 0]
    assert not np.array_equal(got, want)
    for row_got, row_want in zip(got, want):
        assert np.corrcoef(row_got, row_want)[0, 1] > 0.999


def test_int8_products_in_float32_are_the_dequantized_model(tiny_hf_dir):
    """Where the CPU has no bfloat16 products (`isa.xla_int8_products`), int8
    kernels multiply in float32: the float32 network with each kernel
    replaced by values * scale, to float rounding; bfloat16 products are not."""
    config, params = load_checkpoint(tiny_hf_dir)
    quantized = quantize_params(EncoderDecoderModel(config.replace(quantize="int8")), params)
    flat = traverse_util.flatten_dict(quantized, sep="/")
    dequantized = traverse_util.unflatten_dict(
        {
            name: (value * flat[name + "_scale"] if name + "_scale" in flat else value)
            for name, value in flat.items()
            if not name.endswith("_scale")
        },
        sep="/",
    )
    tokens = np.random.default_rng(1).integers(2, config.vocab_size, (4, 20)).astype(np.int32)
    batch = {
        "encoder_input_tokens": jnp.asarray(tokens),
        "decoder_input_tokens": jnp.zeros((4, 1), jnp.int32),
    }
    want = np.asarray(EncoderDecoderModel(config).logits(dequantized, batch))
    logits = {
        products: np.asarray(
            EncoderDecoderModel(config.replace(quantize="int8", int8_products=products)).logits(
                quantized, batch
            )
        )
        for products in ("float32", "bfloat16")
    }
    np.testing.assert_allclose(logits["float32"], want, rtol=1e-4, atol=1e-4)
    assert np.abs(logits["bfloat16"] - want).max() > 10 * np.abs(logits["float32"] - want).max()
    with pytest.raises(ValueError, match="int8_products"):
        config.replace(int8_products="int8")


def test_int8_scores_rank_as_float32_on_random_weights(tiny_hf_dir):
    pairs = ref.random_pairs(40, seed=3, max_words=30)
    options = dict(bucket_lengths=(64, 128), compiler_options=FAST)
    float32 = Scorer.load(tiny_hf_dir, **options).score(*pairs)
    int8 = Scorer.load(tiny_hf_dir, quantize="int8", **options)
    scores = int8.score(*pairs)
    assert int8.metadata()["quantize"] == {"score": "int8"}
    assert spearmanr(scores, float32).statistic > 0.99
    np.testing.assert_allclose(scores, float32, rtol=0.1)
    assert not np.array_equal(scores, float32)  # it does compute differently
    # Packing and int8 together: bfloat16 rounding of the activations turns the
    # packed batches' different float summation orders into differences of
    # the same order as int8's own, so the check is the same.
    packed = Scorer.load(tiny_hf_dir, quantize="int8", packing=True, **options).score(*pairs)
    assert spearmanr(packed, float32).statistic > 0.99
    np.testing.assert_allclose(packed, float32, rtol=0.1)


def test_int8_scores_rank_as_float32_on_the_trained_backbone():
    with open(os.path.join(SAMPLE, "validation.tsv"), encoding="utf-8") as handle:
        summaries = [line.split("\t")[2] for line in list(handle)[1:121]]
    with open(os.path.join(SAMPLE, "articles.jsonl"), encoding="utf-8") as handle:
        articles = [json.loads(line)["text"] for line in handle][: len(summaries)]
    options = dict(max_input_length=256, bucket_lengths=(128,), compiler_options=FAST)
    float32 = Scorer.load(BACKBONE, **options).score(articles, summaries)
    int8 = Scorer.load(BACKBONE, quantize="int8", **options).score(articles, summaries)
    assert np.ptp(float32) > 10 * np.abs(int8 - float32).max() > 0
    assert spearmanr(int8, float32).statistic > 0.995


def test_score_command_takes_quantize_and_packing(tmp_path, tiny_hf_dir):
    from seahorse_metrics.cli import main as cli_main

    premises, hypotheses = ref.random_pairs(12, seed=5, max_words=30)
    source = tmp_path / "pairs.jsonl"
    source.write_text(
        "".join(
            json.dumps({"article": p, "summary": h}) + "\n" for p, h in zip(premises, hypotheses)
        )
    )
    output = tmp_path / "scored.jsonl"
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                tiny_hf_dir,
                "--input",
                str(source),
                "--output",
                str(output),
                "--buckets",
                "64,128",
                "--quantize",
                "int8",
                "--packing",
                "--no_progress",
            ]
        )
        == 0
    )
    scores = [json.loads(line)["score"] for line in output.read_text().splitlines()]
    float32 = Scorer.load(tiny_hf_dir, bucket_lengths=(64, 128)).score(premises, hypotheses)
    assert spearmanr(scores, float32).statistic > 0.98
    np.testing.assert_allclose(scores, float32, rtol=0.1)
    meta = json.loads((tmp_path / "scored.jsonl.meta.json").read_text())
    assert meta["settings"]["quantize"] == {"score": "int8"}
    assert meta["settings"]["batching"]["packing"] is True


def _equal_trees(got, want):
    flat_got, flat_want = (traverse_util.flatten_dict(t, sep="/") for t in (got, want))
    assert sorted(flat_got) == sorted(flat_want)
    for name, value in flat_want.items():
        assert np.asarray(flat_got[name]).dtype == np.asarray(value).dtype, name
        np.testing.assert_array_equal(np.asarray(flat_got[name]), np.asarray(value), err_msg=name)


def test_int8_loading_quantizes_each_kernel_as_it_is_read(tmp_path, tiny_hf_dir):
    from seahorse_metrics.checkpoints import save_checkpoint
    from seahorse_metrics.model.partitioning import make_mesh

    from fixtures.tiny_model import write_t5x_checkpoint

    config, params = load_checkpoint(tiny_hf_dir)
    model = EncoderDecoderModel(config.replace(quantize="int8"))
    want = quantize_params(model, params)
    save_checkpoint(str(tmp_path / "ours"), config, params)
    paths = {
        "hf": tiny_hf_dir,
        "ours": str(tmp_path / "ours"),
        "t5x": write_t5x_checkpoint(str(tmp_path / "t5x"), params, step=3),
    }
    for fmt, path in paths.items():
        seen = []
        convert = kernel_converter(model)

        def recording(name, value, convert=convert, seen=seen):
            seen.append(name)
            return convert(name, value)

        _, got = load_checkpoint(path, convert=recording)
        _equal_trees(got, want)
        assert len(seen) == len(set(seen)) == len(traverse_util.flatten_dict(params)), fmt
    # Onto a mesh: the kernels come back as host int8, the rest placed as read.
    _, got = load_checkpoint(paths["ours"], mesh=make_mesh(), convert=kernel_converter(model))
    _equal_trees(got, want)
    assert isinstance(got["token_embedder"]["embedding"], jax.Array)
    with pytest.raises(ValueError, match="not quantized"):
        kernel_converter(EncoderDecoderModel(config))
    with pytest.raises(ValueError, match="wants"):
        kernel_converter(model)("encoder/layers_0/mlp/wo/kernel", np.zeros((2, 2), np.float32))


_LOAD_PEAKS = """
import gc, json, sys
from seahorse_metrics.checkpoints import checkpoint_config, load_checkpoint
from seahorse_metrics.model import EncoderDecoderModel
from seahorse_metrics.model.quantize import kernel_converter
from seahorse_metrics.scoring.loading import release_freed_memory

def status(field):
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(field)) >> 10

peaks = {}
for path in sys.argv[1:]:
    model = EncoderDecoderModel(checkpoint_config(path).replace(quantize="int8"))
    for mode in ("float32", "int8"):
        release_freed_memory()
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # the peak (VmHWM) starts again from the current RSS
        before = status("VmRSS:")
        convert = kernel_converter(model) if mode == "int8" else None
        _, params = load_checkpoint(path, convert=convert)
        peaks[f"{path} {mode}"] = status("VmHWM:") - before
        del params
print(json.dumps(peaks))
"""


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.path.exists("/proc/self/clear_refs")),
    reason="the check resets and reads the process's peak memory in /proc",
)
def test_int8_loading_never_holds_the_float32_kernels(tmp_path):
    # Kernels (d_model 512, d_ff 2048, 3+3 layers: 113 MB in float32) dominate a small vocabulary.
    from seahorse_metrics.checkpoints import save_checkpoint

    from fixtures.tiny_model import build_hf_model, save_hf_model, tiny_config

    config = tiny_config(
        d_model=512, d_ff=2048, num_heads=8, d_kv=64, num_encoder_layers=3, num_decoder_layers=3
    )
    paths = [str(tmp_path / "hf"), str(tmp_path / "ours")]
    save_hf_model(build_hf_model(config), paths[0])
    save_checkpoint(paths[1], *load_checkpoint(paths[0]))
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_PEAKS, *paths], capture_output=True, text=True, check=True
    )
    peaks = json.loads(result.stdout.strip().splitlines()[-1])
    for path in paths:  # MB above the memory before each load
        assert peaks[f"{path} float32"] > 100, peaks
        # Int8 keeps a quarter of the kernels' bytes (28 MB), and one tensor read in float32
        # at a time: 46-47 MB from HF, 68-80 MB from ours (Orbax), against 168-198 MB.
        assert peaks[f"{path} int8"] < 0.55 * peaks[f"{path} float32"], peaks


def test_int8_scoring_step_does_not_hold_every_converted_kernel():
    # XLA:CPU converted all int8 kernels to bfloat16 at the start of the step and held
    # them (mT5-large: 2.5 GB of temporaries against float32's 0.5 GB).
    from seahorse_metrics.model.first_step import compile_first_step
    from seahorse_metrics.model.partitioning import make_mesh

    from fixtures.tiny_model import tiny_config

    temporaries = {}
    for quantize in (None, "int8"):
        config = tiny_config(
            d_model=512,
            d_ff=2048,
            num_heads=8,
            d_kv=64,
            num_encoder_layers=4,
            num_decoder_layers=4,
            quantize=quantize,
        )
        model = EncoderDecoderModel(config)
        compiled = compile_first_step(model, (4, 5), make_mesh(), model.abstract_params(), 1, 256)
        temporaries[quantize] = compiled.memory_analysis().temp_size_in_bytes
    kernels = sum(
        leaf.size for leaf in jax.tree.leaves(model.abstract_params()) if leaf.dtype == jnp.int8
    )  # 38 M: 76 MB in bfloat16
    assert temporaries["int8"] < temporaries[None] + 0.1 * 2 * kernels, temporaries
