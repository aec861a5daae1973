"""The network, its config presets, the model object and the partitioning helpers.

Equivalence with Hugging Face PyTorch through every checkpoint format is in
test_checkpoints.py; this file checks the parts that stand on their own.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seahorse_metrics.model import PRESETS, EncoderDecoderModel, T5Config, get_config
from seahorse_metrics.model.network import relative_position_bucket

from fixtures import paths

# Published mT5 sizes (Xue et al. 2021, Table/footnotes; google/mt5-* model cards).
PUBLISHED_SIZES = {
    "mt5_small": 300e6,
    "mt5_base": 580e6,
    "mt5_large": 1.2e9,
    "mt5_xl": 3.7e9,
    "mt5_xxl": 13e9,
}


@pytest.fixture(scope="module")
def tiny(tiny_hf_dir):
    """The tiny model with the (random) weights of the session's HF model.

    Loading them avoids compiling a random initialisation, the slowest
    compilation on a CPU; init_params has its own test.
    """
    from seahorse_metrics.checkpoints import load_checkpoint

    config, params = load_checkpoint(tiny_hf_dir)
    return EncoderDecoderModel(config), params


# ------------------------------------------------------------------ config
def test_presets_have_published_parameter_counts():
    for name, published in PUBLISHED_SIZES.items():
        abstract = EncoderDecoderModel(get_config(name)).abstract_params()
        leaves = jax.tree.leaves(abstract)
        assert all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves)
        assert all(leaf.dtype == jnp.float32 for leaf in leaves)
        count = sum(int(np.prod(leaf.shape)) for leaf in leaves)
        assert abs(count - published) / published < 0.03, (name, count)
    small = get_config("mt5_small")
    assert small.inner_dim == 384 != small.d_model == 512


def test_config_replace_dict_and_errors():
    tiny = get_config("tiny")
    assert tiny.inner_dim != tiny.d_model and tiny.num_encoder_layers >= 2
    assert get_config("mt5-small") is PRESETS["mt5_small"]
    assert get_config("tiny", vocab_size=64).vocab_size == 64
    assert T5Config.from_dict(json.loads(json.dumps(tiny.to_dict()))) == tiny
    assert tiny.replace(dtype="bfloat16").dtype == "bfloat16"
    with pytest.raises(ValueError, match="mt5_small"):
        get_config("mt5_tiny")
    with pytest.raises(ValueError, match="bogus"):
        T5Config.from_dict(dict(tiny.to_dict(), bogus=1))
    with pytest.raises(ValueError, match="dtype"):
        tiny.replace(dtype="int8")
    with pytest.raises(ValueError, match="d_model"):
        tiny.replace(d_model=0)
    # T5 v1.0 (the TRUE NLI metric) is a variant of the same config.
    v1_0 = tiny.replace(feed_forward_proj="relu", tie_word_embeddings=True)
    assert T5Config.from_dict(json.loads(json.dumps(v1_0.to_dict()))) == v1_0
    old_file = {
        k: v
        for k, v in tiny.to_dict().items()
        if k not in ("feed_forward_proj", "tie_word_embeddings")
    }
    assert T5Config.from_dict(old_file) == tiny  # configs saved before v1.0 support
    with pytest.raises(ValueError, match="feed_forward_proj='gated-silu'"):
        tiny.replace(feed_forward_proj="gated-silu")


# ---------------------------------------------------------------- network
@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_bucket_matches_hf(bidirectional):
    os.environ.setdefault("USE_TF", "0")
    import torch
    from transformers.models.t5.modeling_t5 import T5Attention

    offsets = np.arange(-3000, 3000)
    reference = T5Attention._relative_position_bucket(
        torch.from_numpy(offsets), bidirectional=bidirectional, num_buckets=32, max_distance=128
    ).numpy()
    ours = relative_position_bucket(
        offsets, bidirectional=bidirectional, num_buckets=32, max_distance=128
    )
    np.testing.assert_array_equal(ours, reference)
    assert ours.max() == 31  # the far buckets are reached


def test_init_params_tree_names_shapes_and_axes():
    # A one-layer variant keeps the (slow on CPU) random-init compilation small.
    model = EncoderDecoderModel(get_config("tiny", num_encoder_layers=1, num_decoder_layers=1))
    params = model.init_params(jax.random.PRNGKey(0))
    abstract = model.abstract_params()
    assert jax.tree.structure(params) == jax.tree.structure(abstract)
    assert all(
        isinstance(leaf, jax.Array) and leaf.dtype == jnp.float32
        for leaf in jax.tree.leaves(params)
    )
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    names = {"/".join(k.key for k in path): leaf.shape for path, leaf in flat}
    cfg = model.config
    assert names["token_embedder/embedding"] == (cfg.vocab_size, cfg.d_model)
    assert names["encoder/relpos_bias/rel_embedding"] == (cfg.num_heads, 32)
    assert names["decoder/relpos_bias/rel_embedding"] == (cfg.num_heads, 32)
    assert names["encoder/layers_0/attention/query/kernel"] == (cfg.d_model, cfg.inner_dim)
    assert names["decoder/layers_0/encoder_decoder_attention/out/kernel"] == (
        cfg.inner_dim,
        cfg.d_model,
    )
    assert names["decoder/layers_0/mlp/wi_1/kernel"] == (cfg.d_model, cfg.d_ff)
    assert names["decoder/logits_dense/kernel"] == (cfg.d_model, cfg.vocab_size)
    assert "decoder/layers_0/pre_cross_attention_layer_norm/scale" in names
    assert "encoder/encoder_norm/scale" in names and "decoder/decoder_norm/scale" in names
    assert not any("relpos" in name and "layers_" in name for name in names)  # once per stack
    # T5X's initialisation: unit-variance embedding, unit norm scales.
    assert 0.8 < float(jnp.std(params["token_embedder"]["embedding"])) < 1.2
    assert float(jnp.min(params["encoder"]["encoder_norm"]["scale"])) == 1.0

    axes = model.param_logical_axes()
    spec = jax.sharding.PartitionSpec
    assert jax.tree.structure(axes, is_leaf=lambda x: isinstance(x, spec)) == jax.tree.structure(
        params
    )
    assert axes["token_embedder"]["embedding"] == spec("vocab", "embed")
    assert axes["encoder"]["layers_0"]["attention"]["query"]["kernel"] == spec("embed", "joined_kv")
    assert axes["decoder"]["layers_0"]["mlp"]["wo"]["kernel"] == spec("mlp", "embed")
    assert axes["encoder"]["relpos_bias"]["rel_embedding"] == spec("heads", "relpos_buckets")
    assert axes["decoder"]["logits_dense"]["kernel"] == spec("embed", "vocab")


# Every unpacked batch here (and in test_checkpoints.py) is [4, 160] -> [4, 140],
# so each jitted method compiles once per session.
EXAMPLE_INPUTS, EXAMPLE_TARGETS = [40, 150, 7, 60], [5, 8, 3, 6]


def _batch(seed, vocab=512):
    """Unpacked batch, one row per example, padded to 160 inputs / 140 targets."""
    rng = np.random.default_rng(seed)
    encoder = np.zeros((4, 160), np.int32)
    target = np.zeros((4, 140), np.int32)
    for row, (n, m) in enumerate(zip(EXAMPLE_INPUTS, EXAMPLE_TARGETS)):
        encoder[row, :n] = rng.integers(3, vocab, n)
        target[row, :m] = rng.integers(3, vocab, m)
    decoder_in = np.concatenate([np.zeros((4, 1), np.int32), target[:, :-1]], axis=1)
    return {
        "encoder_input_tokens": encoder,
        "decoder_input_tokens": decoder_in,
        "decoder_target_tokens": target,
        "decoder_loss_weights": (target > 0).astype(np.float32),
    }


def _pack(unpacked):
    """All examples in one row, with T5X's segment ids and positions."""
    feats = {
        name: []
        for name in (
            "encoder_input_tokens",
            "decoder_input_tokens",
            "decoder_target_tokens",
            "decoder_loss_weights",
            "encoder_segment_ids",
            "decoder_segment_ids",
            "encoder_positions",
            "decoder_positions",
        )
    }
    for row, (n, m) in enumerate(zip(EXAMPLE_INPUTS, EXAMPLE_TARGETS)):
        feats["encoder_input_tokens"] += list(unpacked["encoder_input_tokens"][row, :n])
        feats["encoder_segment_ids"] += [row + 1] * n
        feats["encoder_positions"] += list(range(n))
        feats["decoder_target_tokens"] += list(unpacked["decoder_target_tokens"][row, :m])
        feats["decoder_loss_weights"] += [1.0] * m
        # Each packed segment's decoder input starts again from the start id.
        feats["decoder_input_tokens"] += list(unpacked["decoder_input_tokens"][row, :m])
        feats["decoder_segment_ids"] += [row + 1] * m
        feats["decoder_positions"] += list(range(m))
    packed = {}
    for name, values in feats.items():
        width = 260 if name.startswith("encoder") else 24  # trailing padding too
        array = np.zeros((1, width), np.float32 if name == "decoder_loss_weights" else np.int32)
        array[0, : len(values)] = values
        packed[name] = array
    return packed


def test_shapes_are_traced_once_per_context_and_handed_out_as_new_trees():
    from seahorse_metrics.model import model as model_lib
    from seahorse_metrics.model.partitioning import make_mesh, sharding_context

    model = EncoderDecoderModel(get_config("tiny", num_encoder_layers=1, num_decoder_layers=1))
    model_lib._trace_shapes.cache_clear()
    plain = model.abstract_params()
    plain["encoder"].clear()  # a caller's change stays its own
    axes = model.param_logical_axes()
    assert model.abstract_params()["encoder"] and axes["encoder"]
    assert model_lib._trace_shapes.cache_info().misses == 1
    # Under a mesh and axis rules, traced again there (the trace may carry them), and once.
    with sharding_context(make_mesh(1)):
        meshed = EncoderDecoderModel(model.config).abstract_params()
        assert model.param_logical_axes() == axes
    assert model_lib._trace_shapes.cache_info().misses == 2
    assert jax.tree.map(lambda a: a.shape, meshed) == jax.tree.map(
        lambda a: a.shape, model.abstract_params()
    )


def test_packed_and_unpacked_give_the_same_loss(tiny):
    model, params = tiny
    unpacked = _batch(seed=1)
    packed = _pack(unpacked)
    loss_u, aux_u = model.loss(params, unpacked)
    loss_p, aux_p = model.loss(params, packed)
    segments = packed["decoder_segment_ids"][0]
    token_loss = np.asarray(aux_p["token_loss"])[0]
    per_segment = [float(np.sum(token_loss[segments == s])) for s in (1, 2, 3, 4)]
    np.testing.assert_allclose(per_segment, np.asarray(aux_u["example_loss"]), rtol=2e-5)
    np.testing.assert_allclose(float(loss_p), float(loss_u), rtol=2e-5)
    assert float(aux_p["num_tokens"]) == float(aux_u["num_tokens"]) == sum(EXAMPLE_TARGETS)
    assert float(aux_u["z_loss"]) > 0


def test_loss_weights_scores_dropout_and_gradients(tiny):
    model, params = tiny
    batch = _batch(seed=2)
    loss, aux = model.loss(params, batch)
    # Cross-entropy per example is minus the scored log-likelihood.
    scores = np.asarray(model.score_batch(params, batch))
    np.testing.assert_allclose(np.asarray(aux["example_loss"]), -scores, rtol=1e-5)
    np.testing.assert_allclose(
        float(aux["cross_entropy"]), -scores.sum() / sum(EXAMPLE_TARGETS), rtol=1e-5
    )
    np.testing.assert_allclose(float(loss), float(aux["cross_entropy"] + aux["z_loss"]), rtol=1e-6)
    # Weights that drop the second example.
    weights = batch["decoder_loss_weights"].copy()
    weights[1] = 0
    _, aux_w = model.loss(params, dict(batch, decoder_loss_weights=weights))
    assert float(aux_w["num_tokens"]) == sum(EXAMPLE_TARGETS) - EXAMPLE_TARGETS[1]
    assert float(aux_w["example_loss"][1]) == 0.0
    np.testing.assert_allclose(
        np.asarray(aux_w["example_loss"])[[0, 2, 3]],
        np.asarray(aux["example_loss"])[[0, 2, 3]],
        rtol=1e-6,
    )
    # Deterministic without a dropout rng; random, with gradients everywhere, with one.
    assert float(model.loss(params, batch)[0]) == float(model.loss(params, batch)[0])
    loss_and_grad = jax.jit(
        jax.value_and_grad(lambda p, key: model.loss(p, batch, dropout_rng=key)[0])
    )
    (loss_a, grads), (loss_b, _) = (loss_and_grad(params, jax.random.PRNGKey(i)) for i in range(2))
    assert float(loss_a) != float(loss_b) and float(loss_a) != float(model.loss(params, batch)[0])
    assert all(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(grads))


def test_first_token_probs_is_the_first_step_softmax(tiny):
    model, params = tiny
    batch = _batch(seed=3)
    logits = np.asarray(model.logits(params, batch))[:, 0]
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    ids = [5, 7, 5]
    probs = np.asarray(model.first_token_probs(params, batch["encoder_input_tokens"], ids))
    assert probs.shape == (4, 3) and probs.dtype == np.float32
    np.testing.assert_allclose(probs, expected[:, ids], rtol=1e-4)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.first_token_probs(params, batch["encoder_input_tokens"], [model.config.vocab_size])


def test_bfloat16_compute_stays_close(tiny):
    model, params = tiny
    batch = _batch(seed=4)
    bf16 = EncoderDecoderModel(model.config.replace(dtype="bfloat16"))
    encoded = jax.eval_shape(bf16.encode, params, batch["encoder_input_tokens"])
    assert encoded.dtype == jnp.bfloat16  # the residual stream computes in bfloat16
    logits32 = np.asarray(model.logits(params, batch))
    logits16 = bf16.logits(params, batch)
    assert logits16.dtype == jnp.float32  # the head stays float32
    np.testing.assert_allclose(np.asarray(logits16), logits32, atol=0.05 * np.abs(logits32).max())


_SHARDED_SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import flax.linen as nn
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec
    from seahorse_metrics.checkpoints import load_checkpoint
    from seahorse_metrics.model import EncoderDecoderModel
    from seahorse_metrics.model import partitioning

    assert jax.device_count() == 8
    config, params = load_checkpoint(sys.argv[1])
    model = EncoderDecoderModel(config)
    expected = np.load(sys.argv[2])
    batch = {name: expected[name] for name in expected.files if not name.startswith("expected")}

    mesh = partitioning.make_mesh(model_parallel=2)
    assert dict(mesh.shape) == {"data": 4, "model": 2}
    shardings = partitioning.logical_to_sharding(model.param_logical_axes(), mesh)
    assert shardings["token_embedder"]["embedding"].spec == PartitionSpec("model", None)
    wi_0 = shardings["encoder"]["layers_0"]["mlp"]["wi_0"]["kernel"]
    assert wi_0.spec == PartitionSpec(None, "model")
    sharded = jax.device_put(params, shardings)
    batch = jax.device_put(batch, partitioning.data_sharding(mesh))
    assert len(sharded["decoder"]["logits_dense"]["kernel"].addressable_shards) == 8
    with mesh, nn.logical_axis_rules(partitioning.LOGICAL_AXIS_RULES):
        probs = model.first_token_probs(sharded, batch["encoder_input_tokens"], [3, 4])
        loss = model.loss(sharded, batch)[0]
    np.testing.assert_allclose(np.asarray(probs), expected["expected_probs"], rtol=1e-5)
    np.testing.assert_allclose(float(loss), float(expected["expected_loss"]), rtol=1e-5)
    try:
        partitioning.make_mesh(model_parallel=3)
    except ValueError as error:
        assert "divide" in str(error)
    else:
        raise AssertionError("model_parallel=3 on 8 devices must fail")
    print("SHARDED_OK")
""")


@pytest.mark.slow
def test_partitioning_on_eight_cpu_devices(tiny, tiny_hf_dir, tmp_path):
    model, params = tiny
    batch = _batch(seed=5)  # 4 rows: one per data-parallel shard
    expected = str(tmp_path / "expected.npz")
    np.savez(
        expected,
        expected_probs=np.asarray(
            model.first_token_probs(params, batch["encoder_input_tokens"], [3, 4])
        ),
        expected_loss=np.asarray(model.loss(params, batch)[0]),
        **batch,
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    result = subprocess.run(
        [sys.executable, "-c", _SHARDED_SCRIPT, tiny_hf_dir, expected],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=paths.REPO,
    )
    assert result.returncode == 0 and "SHARDED_OK" in result.stdout, result.stderr[-3000:]
