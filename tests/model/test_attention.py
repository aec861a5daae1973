"""Blocked attention (`model.blocked_attention`) gives today's dense attention's outputs
and gradients: per function at lengths that do and do not divide into blocks,
with packing segments, padding, causality, key blocks and dropout; in the
network in float32 (loss and gradients), bfloat16 and int8; and under remat.
The scorer's single decoder step folds its cross-attention's keys and values
into the queries (`folded_attention`), with the same logits.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seahorse_metrics.model import EncoderDecoderModel, T5Config, get_config
from seahorse_metrics.model.attention import (
    AttentionMask,
    RelativeBias,
    dense_weights,
    folded_attention,
    weighted_values,
)
from seahorse_metrics.model.attention_layer import Attention
from seahorse_metrics.model.blocked_attention import _band_width, blocked_attention
from seahorse_metrics.model.config import ATTENTION_COMPUTATION
from seahorse_metrics.model.network import relative_position_bucket

HEADS, HEAD_DIM = 2, 8


def _segments(length: int, seed: int) -> np.ndarray:
    """[2, length] packing segment ids 1, 2, ... with trailing padding (0)."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((2, length), np.int32)
    for row in range(2):
        cuts = np.sort(rng.choice(np.arange(1, length - 2), 2, replace=False))
        ids[row, : cuts[0]], ids[row, cuts[0] : cuts[1]], ids[row, cuts[1] : length - 2] = 1, 2, 3
    return ids


def _attention_inputs(length: int, causal: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    q, k, v = (
        jnp.asarray(rng.standard_normal((2, length, HEADS, HEAD_DIM)), jnp.float32)
        for _ in range(3)
    )
    buckets = relative_position_bucket(
        np.arange(-(length - 1), length), bidirectional=not causal, num_buckets=8, max_distance=16
    )
    table = jnp.asarray(rng.standard_normal((HEADS, 8))[:, buckets], jnp.float32)
    segments = jnp.asarray(_segments(length, seed))
    mask = (
        AttentionMask(None, segments, segments, causal=True)
        if causal
        else AttentionMask(segments > 0, segments, segments)
    )
    return (q, k, v, table), mask


def _bucket_table_inputs(length: int, causal: bool):
    """`_attention_inputs` with the per-head table of 8 buckets [H, 8] in place
    of the bias per offset, and the bucket of each offset."""
    (q, k, v, _), mask = _attention_inputs(length, causal)
    rel_HxN = jnp.asarray(np.random.default_rng(5).standard_normal((HEADS, 8)), jnp.float32)
    buckets = relative_position_bucket(
        np.arange(-(length - 1), length), bidirectional=not causal, num_buckets=8, max_distance=16
    )
    return (q, k, v, rel_HxN), buckets, mask


def test_bias_is_constant_beyond_the_distance_the_buckets_give():
    offsets = np.arange(-2047, 2048)
    # (buckets, max distance, bidirectional): the distance.
    for (buckets, max_distance, bidirectional), want in {
        (32, 128, True): 91,
        (32, 128, False): 113,
        (8, 16, True): 6,
        (8, 16, False): 12,
    }.items():
        bucket_of_offset = relative_position_bucket(
            offsets, bidirectional=bidirectional, num_buckets=buckets, max_distance=max_distance
        )
        distance = RelativeBias.of_buckets(
            jnp.eye(buckets), bucket_of_offset, 2048, 2048
        ).constant_beyond
        assert distance == want
        bucket_at = dict(zip(offsets, bucket_of_offset))
        assert all(bucket_at[o] == bucket_at[distance] for o in offsets if o >= distance)
        assert all(bucket_at[o] == bucket_at[-distance] for o in offsets if o <= -distance)
        assert bucket_at[-(distance - 1)] != bucket_at[-distance]


def _blocked_and_dense(length: int, cases):
    """[(case, output and gradients of the blocked attention, of the dense)]
    for cases (causal, query block, key block, bias band); the bias gradient
    is that of the bucket table (the network's parameter)."""
    cotangent = jnp.asarray(
        np.random.default_rng(1).standard_normal((2, length, HEADS, HEAD_DIM)), jnp.float32
    )

    def output_and_gradients(causal, query_block, key_block, band=False):
        inputs, buckets, mask = _bucket_table_inputs(length, causal)

        def position(rel_HxN):
            bias = RelativeBias.of_buckets(rel_HxN, buckets, length, length)
            return bias if band else bias.replace(constant_beyond=None)

        if band:  # the band is narrow enough to be used
            assert (
                _band_width(position(inputs[3]), query_block, key_block or length, length)
                is not None
            )
        if query_block is None:  # the dense attention

            def attend(q, k, v, rel_HxN):
                weights = dense_weights(q, k, position(rel_HxN), mask, jnp.float32)
                return weighted_values(weights, v, jnp.float32, jnp.float32, False)
        else:

            def attend(q, k, v, rel_HxN):
                return blocked_attention(
                    q,
                    k,
                    v,
                    position(rel_HxN),
                    mask,
                    query_block=query_block,
                    key_block=key_block,
                    products_dtype=jnp.float32,
                    output_dtype=jnp.float32,
                )

        output, pullback = jax.vjp(attend, *inputs)
        return (output,) + pullback(cotangent)

    got, want = jax.jit(
        lambda: (
            [output_and_gradients(*case) for case in cases],
            {causal: output_and_gradients(causal, None, None) for causal in (False, True)},
        )
    )()
    return [(case, g, want[case[0]]) for case, g in zip(cases, got)]


def test_blocked_equals_dense_outputs_and_gradients():
    # Packed and padded bidirectional (encoder), packed causal (decoder); the
    # bias from a strip, and added only near the diagonal (band; 8 buckets up
    # to distance 16 stop changing beyond 6 tokens, or 12 if causal). 40
    # tokens: 8 divides it, 16 and 6 do not, and one block of all 40 queries.
    results = _blocked_and_dense(
        40,
        [
            (False, 8, None),
            (False, 40, None),
            (False, 16, 8),
            (True, 8, 16),
            (False, 8, None, True),
            (False, 6, None, True),
        ],
    )
    results += _blocked_and_dense(72, [(True, 8, None, True), (True, 5, None, True)])
    for case, got, want in results:
        for name, g, w in zip(("output", "d_query", "d_key", "d_value", "d_buckets"), got, want):
            np.testing.assert_allclose(
                np.asarray(g),
                np.asarray(w),
                rtol=2e-5,
                atol=2e-5,
                err_msg=f"{name}, (causal, query block, key block, band) {case}",
            )


def test_blocked_bfloat16_products_stay_close():
    (q, k, v, table), mask = _attention_inputs(37, causal=False)
    position = RelativeBias(table, 37, 37)
    want, got = jax.jit(
        lambda: (
            weighted_values(
                dense_weights(q, k, position, mask, jnp.bfloat16),
                v,
                jnp.bfloat16,
                jnp.float32,
                accumulate_float32=True,
            ),
            blocked_attention(
                q,
                k,
                v,
                position,
                mask,
                query_block=16,
                key_block=None,
                products_dtype=jnp.bfloat16,
                output_dtype=jnp.float32,
            ),
        )
    )()
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-2)


def test_attention_module_blocked_under_remat_with_dropout():
    """nn.remat around the layer, dropout on: same outputs and parameter
    gradients as the dense layer without remat (the same dropout mask)."""
    (_, _, _, table), mask = _attention_inputs(37, causal=False)
    inputs = jnp.asarray(np.random.default_rng(2).standard_normal((2, 37, 16)), jnp.float32)
    position = RelativeBias(table, 37, 37)
    dense = Attention(HEADS, HEAD_DIM, jnp.float32, dropout_rate=0.3)
    # Argument 5 (self is 0) is `deterministic`, static under remat.
    blocked = nn.remat(Attention, static_argnums=(5,))(
        HEADS, HEAD_DIM, jnp.float32, dropout_rate=0.3, blocked_min_length=16, query_block=16
    )
    params = dense.init(jax.random.PRNGKey(0), inputs, None, position, mask, True)
    rngs = {"dropout": jax.random.PRNGKey(3)}

    def loss(module, params):
        out = module.apply(params, inputs, None, position, mask, False, rngs=rngs)
        return jnp.sum(jnp.sin(out)), out

    (want_loss, want_out), want_grads = jax.jit(
        jax.value_and_grad(lambda p: loss(dense, p), has_aux=True)
    )(params)
    (got_loss, got_out), got_grads = jax.jit(
        jax.value_and_grad(lambda p: loss(blocked, p), has_aux=True)
    )(params)
    assert float(jnp.max(jnp.abs(want_out))) > 0
    np.testing.assert_allclose(np.asarray(got_out), np.asarray(want_out), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=2e-5)
    for got, want in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-5)


def test_folded_cross_attention_equals_projected_keys_and_values():
    """Carrying the queries to the inputs' width (W_k q . x, then the weighed
    inputs times W_v) gives the attention of the projected keys and values,
    with key padding and with packed segments; bfloat16 products stay close."""
    rng = np.random.default_rng(7)
    batch, queries, keys, depth = 2, 3, 37, 24
    inputs = jnp.asarray(rng.standard_normal((batch, keys, depth)), jnp.float32)
    w_key, w_value = (
        jnp.asarray(rng.standard_normal((depth, HEADS * HEAD_DIM)) / depth**0.5, jnp.float32)
        for _ in range(2)
    )
    query = jnp.asarray(rng.standard_normal((batch, queries, HEADS, HEAD_DIM)), jnp.float32)
    key, value = ((inputs @ w).reshape(batch, keys, HEADS, HEAD_DIM) for w in (w_key, w_value))
    is_token = np.ones((batch, keys), bool)
    is_token[1, 30:] = False
    key_segments = np.where(is_token, 1 + (np.arange(keys) >= 12), 0)
    masks = {
        "padding": AttentionMask(jnp.asarray(is_token)),
        "packed": AttentionMask(
            jnp.asarray(is_token), jnp.asarray([[1, 2, 2], [1, 1, 2]]), jnp.asarray(key_segments)
        ),
    }
    for name, mask in masks.items():
        want = weighted_values(
            dense_weights(query, key, None, mask, jnp.float32),
            value,
            jnp.float32,
            jnp.float32,
            False,
        )
        got = folded_attention(query, inputs, w_key, w_value, mask, jnp.float32, jnp.float32)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
        half = jax.jit(folded_attention, static_argnums=(5, 6))(
            query, inputs, w_key, w_value, mask, jnp.bfloat16, jnp.float32
        )
        np.testing.assert_allclose(half, want, rtol=0.05, atol=0.05, err_msg=name)


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_the_scoring_step_folds_cross_attention_with_the_same_logits(tiny, monkeypatch, quantize):
    """One decoder query without dropout (the scorer's first step) folds every
    cross-attention and gives the unfolded network's logits (dropout on at
    rate 0); as many queries as the head width, and training, project keys
    and values. Int8 kernels fold in bfloat16 products, as the unfolded
    network projects: the order of the products is what differs."""
    from seahorse_metrics.model import attention_layer
    from seahorse_metrics.model.quantize import quantize_params

    config, _, params = tiny
    model = EncoderDecoderModel(config.replace(dropout_rate=0.0, quantize=quantize))
    params = quantize_params(model, params) if quantize else params
    folded, folds = attention_layer.folded_attention, []
    monkeypatch.setattr(
        attention_layer,
        "folded_attention",
        lambda *args: folds.append(args[0].shape) or folded(*args),
    )
    tokens = np.random.default_rng(3).integers(3, 512, (2, 45)).astype(np.int32)
    tokens[1, 33:] = 0
    step = {"encoder_input_tokens": tokens, "decoder_input_tokens": np.zeros((2, 1), np.int32)}
    one_step = model._logits(params, step, None)
    assert folds == [(2, 1, config.num_heads, config.d_kv)] * config.num_decoder_layers
    unfolded = model._logits(params, step, jax.random.PRNGKey(0))
    if quantize:  # 0.3% of the largest logit on these weights
        assert np.max(np.abs(one_step - unfolded)) <= 0.01 * np.max(np.abs(unfolded))
    else:
        np.testing.assert_allclose(one_step, unfolded, rtol=1e-5, atol=1e-5)
    wide = dict(step, decoder_input_tokens=np.zeros((2, config.d_kv), np.int32))
    model._logits(params, wide, None)
    assert len(folds) == config.num_decoder_layers


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_the_folded_scoring_step_holds_no_copy_of_the_cross_attention_kernels(quantize):
    """Read per head ([H, D, V]), the key and value kernels were transposed
    copies, which XLA made for every layer at the start of the step and held
    (mT5-XXL: 3.2 GB of its 4.3 GB of temporaries at 1 x 2048). The fold
    uses them as stored: the compiled step's temporaries stay well below the
    cross-attention kernels' float32 bytes (before: above them)."""
    from seahorse_metrics.model.first_step import compile_first_step
    from seahorse_metrics.model.partitioning import make_mesh

    from fixtures.tiny_model import tiny_config

    config = tiny_config(
        d_model=1024,
        d_ff=256,
        num_heads=16,
        d_kv=64,
        num_encoder_layers=1,
        num_decoder_layers=6,
        quantize=quantize,
    )
    model = EncoderDecoderModel(config)
    compiled = compile_first_step(model, (1, 2), make_mesh(), model.abstract_params(), 1, 64)
    cross_kernels = config.num_decoder_layers * 2 * config.d_model * config.inner_dim * 4
    assert compiled.memory_analysis().temp_size_in_bytes < 0.5 * cross_kernels  # 50 MB


# ----------------------------------------------------------------- network
def _packed_batch(vocab: int = 512):
    """One row of 3 packed examples: 45 inputs (40 real), 10 targets (9 real)."""
    rng = np.random.default_rng(4)
    encoder_segments = np.array([[1] * 12 + [2] * 20 + [3] * 8 + [0] * 5], np.int32)
    decoder_segments = np.array([[1] * 3 + [2] * 4 + [3] * 2 + [0]], np.int32)
    targets = np.where(decoder_segments > 0, rng.integers(3, vocab, (1, 10)), 0)
    inputs = np.zeros_like(targets)
    for start in (0, 3, 7):  # each segment restarts from the decoder start id (0)
        end = start + int(np.sum(decoder_segments[0] == decoder_segments[0, start]))
        inputs[0, start + 1 : end] = targets[0, start : end - 1]
    return {
        "encoder_input_tokens": np.where(encoder_segments > 0, rng.integers(3, vocab, (1, 45)), 0),
        "encoder_segment_ids": encoder_segments,
        "decoder_segment_ids": decoder_segments,
        "decoder_input_tokens": inputs.astype(np.int32),
        "decoder_target_tokens": targets.astype(np.int32),
        "decoder_loss_weights": (decoder_segments > 0).astype(np.float32),
    }


@pytest.fixture(scope="module")
def tiny(tiny_hf_dir):
    from seahorse_metrics.checkpoints import load_checkpoint

    config, params = load_checkpoint(tiny_hf_dir)
    # One layer per stack is enough here, and compiles in half the time.
    config = config.replace(num_encoder_layers=1, num_decoder_layers=1)
    params = jax.tree.map(lambda x: x, params)
    for stack in ("encoder", "decoder"):
        params[stack] = {name: value for name, value in params[stack].items() if name != "layers_1"}
    # Blocks of 4 queries: the encoder (45) and the decoder self- and cross-
    # attention (10 queries) all run blocked, none of them in whole blocks.
    # Buckets up to distance 9: the encoder's bias is constant beyond 9 tokens
    # and added in a band of 4 + 2 x 9 keys (at most half of 45); the
    # decoder's causal bias still changes within 10 tokens (the strip).
    config = config.replace(relative_attention_max_distance=9)
    buckets = relative_position_bucket(
        np.arange(-44, 45),
        bidirectional=True,
        num_buckets=config.relative_attention_num_buckets,
        max_distance=9,
    )
    encoder_bias = RelativeBias.of_buckets(
        jnp.zeros((1, config.relative_attention_num_buckets)), buckets, 45, 45
    )
    assert _band_width(encoder_bias, 4, 45, 45) == 22
    blocked = dict(
        attention_blocked_min_length=8,
        attention_forward_min_length=8,
        attention_band_min_length=8,
        attention_query_block=4,
    )
    dense = dict(attention_blocked_min_length=None, attention_forward_min_length=None)
    return config.replace(**dense), config.replace(**blocked), params


def test_network_loss_and_gradients_with_dropout_and_packing(tiny):
    dense_config, blocked_config, params = tiny
    batch = _packed_batch()

    def loss_and_grads(config):
        model = EncoderDecoderModel(config)
        return jax.jit(
            jax.value_and_grad(lambda p: model.loss(p, batch, dropout_rng=jax.random.PRNGKey(5))[0])
        )(params)

    want_loss, want_grads = loss_and_grads(dense_config)
    got_loss, got_grads = loss_and_grads(blocked_config)
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=1e-5)
    flat_want = dict(jax.tree_util.tree_leaves_with_path(want_grads))
    for path, got in jax.tree_util.tree_leaves_with_path(got_grads):
        np.testing.assert_allclose(
            np.asarray(got),
            np.asarray(flat_want[path]),
            rtol=1e-4,
            atol=1e-6,
            err_msg=jax.tree_util.keystr(path),
        )


def test_network_bfloat16_and_int8_logits(tiny):
    from seahorse_metrics.model.quantize import quantize_params

    dense_config, blocked_config, params = tiny
    batch = _packed_batch()
    for mode, tolerance in (("bfloat16", 0.1), ("int8", 0.05)):
        overrides = {"dtype": "bfloat16"} if mode == "bfloat16" else {"quantize": "int8"}
        logits = []
        for config in (dense_config, blocked_config):
            model = EncoderDecoderModel(config.replace(**overrides))
            mode_params = quantize_params(model, params) if mode == "int8" else params
            logits.append(np.asarray(model.logits(mode_params, batch), np.float32))
        scale = float(np.max(np.abs(logits[0])))
        assert np.max(np.abs(logits[1] - logits[0])) <= tolerance * scale, mode


def test_config_blocking_fields():
    config = get_config("tiny")
    assert T5Config.from_dict(config.to_dict()) == config
    assert config.replace(attention_blocked_min_length=None, attention_key_block=64)
    for field, value in (
        ("attention_query_block", 0),
        ("attention_query_block", None),
        ("attention_key_block", -8),
        ("attention_blocked_min_length", 1.5),
        ("attention_forward_min_length", 0),
        ("attention_band_min_length", -1),
    ):
        with pytest.raises(ValueError, match=field):
            config.replace(**{field: value})


def test_passes_without_dropout_block_shorter_queries_and_take_two_blocks_as_one():
    attention = Attention(
        HEADS,
        HEAD_DIM,
        jnp.float32,
        dropout_rate=0.1,
        blocked_min_length=256,
        forward_min_length=64,
        query_block=128,
    )
    forward = {
        length: attention.query_block_for(length, True) for length in (32, 64, 192, 256, 257, 2048)
    }
    assert forward == {32: None, 64: 64, 192: 192, 256: 256, 257: 128, 2048: 128}
    training = {length: attention.query_block_for(length, False) for length in (192, 256, 2048)}
    assert training == {192: None, 256: 128, 2048: 128}
    assert attention.clone(forward_min_length=None).query_block_for(2048, True) is None


def test_scoring_adds_the_bias_in_a_band_from_band_min_length_training_always(tiny, monkeypatch):
    _, blocked_config, params = tiny
    bands = []
    band = RelativeBias.band
    monkeypatch.setattr(RelativeBias, "band", lambda *args: bands.append(args[1:]) or band(*args))
    batch = _packed_batch()
    EncoderDecoderModel(blocked_config).logits(params, batch)
    assert bands == [(4, 12, 45, 22)]  # the encoder's; the decoder's bias never stops changing
    short_of_it = EncoderDecoderModel(blocked_config.replace(attention_band_min_length=46))
    short_of_it.logits(params, batch)
    assert len(bands) == 1
    short_of_it.loss(params, batch, jax.random.PRNGKey(0))
    assert len(bands) == 2


def test_checkpoints_are_scored_with_todays_attention_blocks(tiny, tmp_path):
    """A checkpoint stores the attention blocks it was trained with; the
    scorer's loader computes with the library's defaults."""
    from seahorse_metrics.checkpoints import save_checkpoint
    from seahorse_metrics.scoring.loading import load_model

    _, blocked_config, params = tiny
    path = save_checkpoint(
        str(tmp_path / "old"), blocked_config.replace(attention_key_block=2), params
    )
    model, _ = load_model(path, "float32", mesh=None)
    default = get_config("tiny")
    for field in ATTENTION_COMPUTATION:
        assert getattr(model.config, field) == getattr(default, field), field
    assert model.config.attention_key_block is None
    assert model.config.relative_attention_max_distance == 9  # what the model is stays


def test_cudnn_only_for_16_bit_attention_without_dropout_on_gpus():
    from seahorse_metrics.model.attention import uses_cudnn

    assert uses_cudnn("gpu", jnp.bfloat16, 64, deterministic=True)
    assert uses_cudnn("gpu", jnp.float16, 128, deterministic=True)
    assert not uses_cudnn("cpu", jnp.bfloat16, 64, deterministic=True)
    assert not uses_cudnn("tpu", jnp.bfloat16, 64, deterministic=True)
    assert not uses_cudnn("gpu", jnp.float32, 64, deterministic=True)
    assert not uses_cudnn("gpu", jnp.bfloat16, 64, deterministic=False)
    assert not uses_cudnn("gpu", jnp.bfloat16, 256, deterministic=True)
    assert not uses_cudnn("gpu", jnp.bfloat16, 60, deterministic=True)
    assert jax.default_backend() == "cpu"  # so every other test here runs the XLA path


def _right_padded(length: int) -> AttentionMask:
    """Key padding of two rows: all `length` tokens, and 5 fewer."""
    return AttentionMask(
        jnp.asarray(np.arange(length)[None, :] < np.array([[length], [length - 5]]))
    )


def test_cudnn_call_equals_dense_attention_with_the_xla_implementation():
    """`cudnn_attention`'s arguments (bias orientation, key counts, causal flag,
    packed segments) mean today's attention: the same call with
    implementation="xla" runs on CPU."""
    from seahorse_metrics.model.attention import cudnn_attention

    length = 24
    (q, k, v, table), packed = _attention_inputs(length, causal=False)
    (_, _, _, causal_table), _ = _attention_inputs(length, causal=True)
    position = RelativeBias(table, length, length)
    cases = {
        "key padding": (position, _right_padded(length)),
        "causal": (RelativeBias(causal_table, length, length), AttentionMask(None, causal=True)),
        "no bias": (None, _right_padded(length)),
        "packed": (position, packed),
    }
    for name, (bias, mask) in cases.items():
        want = weighted_values(
            dense_weights(q, k, bias, mask, jnp.float32), v, jnp.float32, jnp.float32, False
        )
        got = cudnn_attention(q, k, v, bias, mask, jnp.float32, jnp.float32, implementation="xla")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_the_network_on_the_cudnn_path_has_todays_loss_gradients_and_scores(tiny, monkeypatch):
    """The whole network with every attention sent to `cudnn_attention` (as on
    GPUs; here its XLA implementation, in float32): a packed training batch's
    loss and gradients, and the scorer's first step over padded rows, equal
    the dense network's. bench/gpu_attention.py runs the same comparison
    with cuDNN itself on a GPU."""
    import functools

    from seahorse_metrics.model import attention, attention_layer

    dense_config, _, params = tiny
    batch = _packed_batch()
    tokens = np.random.default_rng(5).integers(3, 512, (2, 45)).astype(np.int32)
    tokens[1, 30:] = 0

    def loss_grads_and_scores(config):
        model = EncoderDecoderModel(config.replace(dropout_rate=0.0))
        loss, grads = jax.jit(jax.value_and_grad(lambda p: model.loss(p, batch)[0]))(params)
        return loss, grads, model.first_token_probs(params, tokens, (5, 6))

    want_loss, want_grads, want_probs = loss_grads_and_scores(dense_config)
    calls = []
    monkeypatch.setattr(attention_layer, "uses_cudnn", lambda *_: True)
    monkeypatch.setattr(
        attention_layer,
        "cudnn_attention",
        lambda *args: (
            calls.append(args[0].shape)
            or (functools.partial(attention.cudnn_attention, implementation="xla")(*args))
        ),
    )
    # A config no other test compiles, so the network is traced under the patch.
    got_loss, got_grads, got_probs = loss_grads_and_scores(
        dense_config.replace(attention_forward_min_length=1000)
    )
    # Every self-attention of both passes; the cross-attentions fold here
    # (fewer queries x heads than keys).
    assert len(calls) == 2 * (dense_config.num_encoder_layers + dense_config.num_decoder_layers)
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=1e-5)
    flat_want = dict(jax.tree_util.tree_leaves_with_path(want_grads))
    for path, got in jax.tree_util.tree_leaves_with_path(got_grads):
        np.testing.assert_allclose(
            np.asarray(got),
            np.asarray(flat_want[path]),
            rtol=1e-4,
            atol=1e-6,
            err_msg=jax.tree_util.keystr(path),
        )
    np.testing.assert_allclose(got_probs, want_probs, rtol=1e-5, atol=1e-7)


def test_gpu_scoring_lowers_every_attention_to_cudnn(monkeypatch):
    """Abstract lowering for CUDA (no GPU here): bfloat16 scoring of an
    mT5-small-shaped network at 2048 tokens puts each of its 16 self-attentions
    in cuDNN's fused kernel, with the bias at [1, H, Q, K] and the padding as
    key counts (mask PADDING), never as a [B, H, Q, K] array; the single
    decoder step's cross-attentions are folded (`folded_attention`)."""
    import re

    from jax._src.cudnn import fused_attention_stablehlo

    from seahorse_metrics.model import attention_layer

    # CPU jaxlib has no cuDNN to ask its version of; lowering needs only a number.
    monkeypatch.setattr(fused_attention_stablehlo, "check_cudnn_version", lambda: 90800)
    monkeypatch.setattr(attention_layer.jax, "default_backend", lambda: "gpu")
    config = get_config("mt5-small").replace(dtype="bfloat16")
    model = EncoderDecoderModel(config)
    batch, length = 2, 2048
    batch_shapes = {
        "encoder_input_tokens": jax.ShapeDtypeStruct((batch, length), jnp.int32),
        "decoder_input_tokens": jax.ShapeDtypeStruct((batch, 1), jnp.int32),
    }
    logits = jax.jit(lambda params, batch: model._logits(params, batch, None))
    text = (
        logits.trace(model.abstract_params(), batch_shapes)
        .lower(lowering_platforms=("cuda",))
        .as_text()
    )
    calls = re.findall(
        r"custom_call @__cudnn\$fmha(\w*)\((.*?)\).*?mask_type\\22: \\22(\w+)"
        r".*?: \((.*?)\) ->",
        text,
    )
    assert len(calls) == config.num_encoder_layers + config.num_decoder_layers
    biases = [operands for kind, _, _, operands in calls if "Bias" in kind]
    assert len(biases) == config.num_encoder_layers + config.num_decoder_layers  # all biased
    heads = config.num_heads
    assert all(
        f"tensor<1x{heads}x{length}x{length}xbf16>" in o
        for o in biases[: config.num_encoder_layers]
    )
    assert f"x{batch}x{heads}x{length}x{length}" not in text  # no bias per row
    assert {mask for _, _, mask, _ in calls} == {"PADDING", "CAUSAL"}
