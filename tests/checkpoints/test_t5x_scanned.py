"""T5X checkpoints of scanned layers (issue 48 point 24): T5X's scalable_t5 network
stacks each stack's layers on a `layers` axis (`param_scan_axis`, 1 by default) and
keeps attention heads and kv apart. They are read layer by layer, scored, and exported
to Hugging Face and T5X and converted for CTranslate2 as the unscanned checkpoint.
scalable_t5 gives each layer a relative position bias table of its own: a checkpoint
whose layers hold different ones (any that scalable_t5 initialised or trained) is
read as a `relative_bias_per_layer` network, scored as T5X scores it, and exported
to T5X in the scanned layout T5X writes (and restores) and to Hugging Face as UMT5.

Fixtures: T5X's own network, train state and both checkpointers (its legacy msgpack +
TensorStore `Checkpointer` and the Orbax `OrbaxCheckpointManagerInterface` train.py
uses) where T5X is importable (see /work/shared/t5x/README.md); everywhere, the same
layout written by `tiny_model.scalable_t5_tree`, whose names and shapes the T5X test
compares with T5X's network.
"""

import os

import numpy as np
import pytest

from seahorse_metrics.checkpoints import (
    CheckpointError,
    checkpoint_config,
    detect_format,
    load_checkpoint,
)
from seahorse_metrics.checkpoints.params import flatten, unflatten

from fixtures import tiny_model
from fixtures.tiny_model import scalable_t5_tree, write_t5x_orbax_checkpoint


@pytest.fixture(scope="module")
def tiny(tiny_hf_dir):
    return load_checkpoint(tiny_hf_dir)


def _assert_equal_trees(actual, expected):
    actual, expected = flatten(actual), flatten(expected)
    assert set(actual) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(
            np.asarray(actual[name]), np.asarray(expected[name]), err_msg=name
        )


def _write(tmp_path, tree, layout, step=3):
    model_dir = str(tmp_path / f"scanned-{layout}")
    if layout == "orbax":
        return write_t5x_orbax_checkpoint(model_dir, tree, step)
    return tiny_model.write_t5x_checkpoint(model_dir, tree, step)


@pytest.mark.parametrize("layout, scan_axis", [("orbax", 1), ("legacy", 1), ("orbax", 0)])
def test_scanned_layers_read_as_the_unscanned_checkpoint(layout, scan_axis, tmp_path, tiny):
    config, params = tiny
    step_dir = _write(tmp_path, scalable_t5_tree(params, scan_axis), layout)
    assert detect_format(step_dir) == "t5x"
    assert checkpoint_config(step_dir) == config
    read_config, read = load_checkpoint(os.path.dirname(step_dir))
    assert read_config == config
    _assert_equal_trees(read, params)


def test_a_layer_view_reads_any_box():
    from seahorse_metrics.checkpoints.streaming import StoredTensor
    from seahorse_metrics.checkpoints.t5x_scanned import layer_view

    rng = np.random.default_rng(0)
    stacked = rng.standard_normal((6, 3, 4, 5)).astype(np.float32)  # [embed, layers, heads, kv]
    tensor = StoredTensor.in_memory("q", "mem", stacked)
    view = layer_view(tensor, "layers_2/q", 2, 1, ((0,), (1, 2)))
    expected = stacked[:, 2].reshape(6, 20)
    assert view.shape == (6, 20)
    for _ in range(50):  # boxes a mesh's shards or the row blocks of a load ask for
        r0, c0 = int(rng.integers(0, 6)), int(rng.integers(0, 20))
        box = (slice(r0, int(rng.integers(r0 + 1, 7))), slice(c0, int(rng.integers(c0 + 1, 21))))
        np.testing.assert_array_equal(view.read(box), expected[box])
    out = StoredTensor.in_memory("o", "mem", rng.standard_normal((4, 3, 5, 6)))  # [heads, L, kv, e]
    view = layer_view(out, "layers_1/o", 1, 1, ((0, 1), (2,)))
    np.testing.assert_array_equal(
        view.read((slice(3, 17), slice(1, 5))),
        np.asarray(out.reader(()))[:, 1].reshape(20, 6)[3:17, 1:5],
    )


def test_scanned_checkpoint_scores_and_exports_as_the_unscanned_one(tmp_path, tiny, tiny_hf_dir):
    from seahorse_metrics import Scorer
    from seahorse_metrics.checkpoints.export import export_checkpoint

    config, params = tiny
    step_dir = _write(tmp_path, scalable_t5_tree(params), "orbax")
    vocab = os.path.join(tiny_hf_dir, "spiece.model")
    premises, hypotheses = ["the fox jumps over the dog.", "a b c d"], ["a fox jumps.", "a b"]
    expected = Scorer.load(tiny_hf_dir, max_input_length=64).score(premises, hypotheses)
    scores = Scorer.load(step_dir, vocab=vocab, max_input_length=64).score(premises, hypotheses)
    np.testing.assert_array_equal(scores, expected)
    for to in ("hf", "t5x"):
        output = str(tmp_path / f"export-{to}")
        export_checkpoint(step_dir, to, output, vocab=vocab)
        exported_config, exported = load_checkpoint(output)
        assert exported_config == config
        _assert_equal_trees(exported, params)
    transformers = pytest.importorskip("transformers")
    hf_model = transformers.MT5ForConditionalGeneration.from_pretrained(str(tmp_path / "export-hf"))
    weight = hf_model.encoder.block[1].layer[0].SelfAttention.q.weight.detach().numpy()
    np.testing.assert_array_equal(
        weight, np.asarray(params["encoder"]["layers_1"]["attention"]["query"]["kernel"]).T
    )


def test_scanned_checkpoint_converts_for_ctranslate2(tmp_path, tiny, tiny_hf_dir):
    pytest.importorskip("ctranslate2")
    from seahorse_metrics import Scorer

    _, params = tiny
    step_dir = _write(tmp_path, scalable_t5_tree(params), "legacy")
    options = dict(
        max_input_length=64,
        engine="ctranslate2",
        engine_options={"cache_dir": str(tmp_path / "ct2"), "convert_in_child": False},
    )
    premises, hypotheses = ["the fox jumps over the dog.", "a b c d"], ["a fox jumps.", "a b"]
    expected = Scorer.load(tiny_hf_dir, max_input_length=64).score(premises, hypotheses)
    scores = Scorer.load(
        step_dir, vocab=os.path.join(tiny_hf_dir, "spiece.model"), **options
    ).score(premises, hypotheses)
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


@pytest.fixture(scope="module")
def umt5(tiny_umt5_dir):
    return load_checkpoint(tiny_umt5_dir)


@pytest.mark.parametrize("layout, scan_axis", [("orbax", 1), ("legacy", 0)])
def test_layers_with_biases_of_their_own_read_per_layer(layout, scan_axis, tmp_path, umt5):
    config, params = umt5
    step_dir = _write(tmp_path, scalable_t5_tree(params, scan_axis), layout)
    assert checkpoint_config(step_dir) == config and config.relative_bias_per_layer
    read_config, read = load_checkpoint(step_dir)
    assert read_config == config
    _assert_equal_trees(read, params)


def test_one_stack_with_tables_of_its_own_makes_both_per_layer(tmp_path, tiny):
    config, params = tiny
    tree = flatten(scalable_t5_tree(params))
    bias = np.array(tree["decoder/decoder/relpos_bias/rel_embedding"])
    bias[:, 1] += 0.5  # layer 1's own table, as scalable_t5 trains it
    tree["decoder/decoder/relpos_bias/rel_embedding"] = bias
    read_config, read = load_checkpoint(_write(tmp_path, unflatten(tree), "orbax"))
    assert read_config == config.replace(relative_bias_per_layer=True)
    flat = flatten(read)
    for layer in (0, 1):
        np.testing.assert_array_equal(
            flat[f"encoder/layers_{layer}/relpos_bias/rel_embedding"],
            params["encoder"]["relpos_bias"]["rel_embedding"],
        )
        np.testing.assert_array_equal(
            flat[f"decoder/layers_{layer}/relpos_bias/rel_embedding"], bias[:, layer]
        )


def test_a_bias_that_is_no_stack_of_tables_is_refused(tmp_path, tiny):
    _, params = tiny
    tree = flatten(scalable_t5_tree(params))
    tree["encoder/encoder/relpos_bias/rel_embedding"] = np.zeros((4, 32), np.float32)
    with pytest.raises(
        CheckpointError,
        match=r"encoder/encoder/relpos_bias/rel_embedding\[4, 32\] "
        r"is not the \[heads, layers, buckets\] tables",
    ):
        load_checkpoint(_write(tmp_path, unflatten(tree), "orbax"))


def _written_t5x_arrays(step_dir):
    """{T5X name: array} of the zarr arrays a legacy T5X step directory's msgpack names."""
    import tensorstore as ts
    from flax import serialization

    with open(os.path.join(step_dir, "checkpoint"), "rb") as handle:
        target = serialization.msgpack_restore(handle.read())["optimizer"]["target"]
    specs = {
        name[: -len("/kvstore/path")]: path
        for name, path in flatten(target).items()
        if name.endswith("/kvstore/path")
    }
    return {
        name: ts.open(
            {"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.join(step_dir, path)}}
        )
        .result()
        .read()
        .result()
        for name, path in specs.items()
    }


def test_per_layer_exports_to_t5x_as_scalable_t5_writes_it(tmp_path, umt5, tiny_umt5_dir):
    from seahorse_metrics.checkpoints.export import export_checkpoint
    from seahorse_metrics.checkpoints.t5x_scanned import scanned_axes

    config, params = umt5
    output = str(tmp_path / "umt5-t5x")
    export_checkpoint(tiny_umt5_dir, "t5x", output, step=5)
    written = _written_t5x_arrays(os.path.join(output, "checkpoint_5"))
    expected = flatten(scalable_t5_tree(params))
    assert set(written) == set(expected) == set(scanned_axes(config))
    for name, value in expected.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    assert scanned_axes(config)["decoder/decoder/self_attention/out/kernel"] == (
        "heads",
        "layers",
        "kv",
        "embed",
    )
    read_config, read = load_checkpoint(output)
    assert read_config == config
    _assert_equal_trees(read, params)


# ------------------------------------------------------------ T5X's own code
def _t5x_model(config, scan_layers=True):
    """T5X's EncoderDecoderModel over its scalable_t5 network, of `config`'s sizes (as
    t5x/examples/scalable_t5/mt5/*.gin bind it)."""
    import seqio
    from t5x import adafactor, models
    from t5x.examples.scalable_t5 import network

    t5x_config = network.T5Config(
        vocab_size=config.vocab_size,
        dtype="float32",
        emb_dim=config.d_model,
        num_heads=config.num_heads,
        num_encoder_layers=config.num_encoder_layers,
        num_decoder_layers=config.num_decoder_layers,
        head_dim=config.d_kv,
        mlp_dim=config.d_ff,
        mlp_activations=("gelu", "linear"),
        dropout_rate=0.0,
        logits_via_embedding=False,
        scan_layers=scan_layers,
        remat_policy="none",
    )
    vocabulary = seqio.PassThroughVocabulary(config.vocab_size)
    return models.EncoderDecoderModel(
        module=network.Transformer(t5x_config),
        input_vocabulary=vocabulary,
        output_vocabulary=vocabulary,
        optimizer_def=adafactor.Adafactor(
            decay_rate=0.8,
            step_offset=0,
            logical_factor_rules=adafactor.standard_logical_factor_rules(),
        ),
    )


def _t5x_save(model, variables, directory):
    """Saves a T5X train state of `variables` (the parameters and T5X's `params_axes`)
    with T5X's two checkpointers; returns the step directories (legacy msgpack +
    TensorStore, Orbax)."""
    from t5x import checkpoints, partitioning, train_state

    state = train_state.FlaxOptimTrainState.create(model.optimizer_def, variables)
    partitioner = partitioning.PjitPartitioner(num_partitions=1)
    legacy, orbax = os.path.join(directory, "legacy"), os.path.join(directory, "orbax")
    os.makedirs(orbax)
    checkpoints.Checkpointer(state, partitioner, legacy).save(state)
    manager = checkpoints.OrbaxCheckpointManagerInterface(orbax, state, partitioner)
    manager.save(state)
    manager.wait_until_finished()
    manager.close()
    return [os.path.join(path, "checkpoint_0") for path in (legacy, orbax)]


def _t5x_batch(config):
    rng = np.random.default_rng(1)
    batch = {
        "encoder_input_tokens": rng.integers(2, config.vocab_size, (3, 12), dtype=np.int32),
        "decoder_input_tokens": np.array([[0, 7, 9, 4]] * 3, np.int32),
        "decoder_target_tokens": np.array([[7, 9, 4, 1]] * 3, np.int32),
        "decoder_loss_weights": np.ones((3, 4), np.float32),
    }
    batch["encoder_input_tokens"][0, 9:] = 0  # padding
    return batch


def _assert_scores_as_t5x(step_dirs, config, t5x_scores, batch):
    """Each step directory reads as `config`, all to one tree, which scores `batch` as
    T5X did, unrolled and scanned; returns the tree."""
    from seahorse_metrics.model import EncoderDecoderModel, stacks

    reads = [load_checkpoint(step_dir) for step_dir in step_dirs]
    assert all(read_config == config for read_config, _ in reads)
    read = reads[0][1]
    for _, other in reads[1:]:
        _assert_equal_trees(other, read)
    for scan in (False, True):
        model = EncoderDecoderModel(config.replace(scan_layers=scan))
        scores = np.asarray(model.score_batch(stacks.stack_layers(read) if scan else read, batch))
        np.testing.assert_allclose(scores, t5x_scores, rtol=2e-5, err_msg=f"scan_layers={scan}")
    return read


@pytest.fixture(scope="module")
def t5x_tiny(tiny):
    """T5X's scalable_t5 model of the tiny widths and the variables it initialises."""
    pytest.importorskip("t5x.checkpoints", reason="T5X is not importable (see /work/shared/t5x)")
    import jax

    model = _t5x_model(tiny[0])
    shapes = {"encoder_input_tokens": (2, 8), "decoder_input_tokens": (2, 4)}
    return model, model.get_initial_variables(jax.random.PRNGKey(0), shapes)


@pytest.mark.slow
def test_t5x_s_own_scanned_checkpoints_read_and_score_as_t5x_scores_them(tmp_path, tiny, t5x_tiny):
    config, params = tiny
    model, variables = t5x_tiny
    initial = flatten(variables["params"])
    ours = flatten(scalable_t5_tree(params))
    assert {name: np.shape(value) for name, value in initial.items()} == {
        name: np.shape(value) for name, value in ours.items()
    }
    batch = _t5x_batch(config)
    t5x_scores = np.asarray(model.score_batch(scalable_t5_tree(params), batch))
    step_dirs = _t5x_save(
        model, dict(variables, params=scalable_t5_tree(params)), str(tmp_path / "t5x")
    )
    _assert_equal_trees(_assert_scores_as_t5x(step_dirs, config, t5x_scores, batch), params)
    # What T5X's initialisation gives every layer: a bias of its own.
    t5x_scores = np.asarray(model.score_batch(variables["params"], batch))
    read = _assert_scores_as_t5x(
        _t5x_save(model, variables, str(tmp_path / "initial")),
        config.replace(relative_bias_per_layer=True),
        t5x_scores,
        batch,
    )
    np.testing.assert_array_equal(
        read["decoder"]["layers_1"]["relpos_bias"]["rel_embedding"],
        initial["decoder/decoder/relpos_bias/rel_embedding"][:, 1],
    )


def test_t5x_restores_a_per_layer_export_and_scores_it_as_we_do(
    tmp_path, umt5, tiny_umt5_dir, tiny, t5x_tiny
):
    from t5x import checkpoints, partitioning, train_state

    from seahorse_metrics.checkpoints.export import export_checkpoint
    from seahorse_metrics.model import EncoderDecoderModel

    config, params = umt5
    assert config == tiny[0].replace(relative_bias_per_layer=True)  # t5x_tiny's widths
    output = str(tmp_path / "umt5-t5x")
    export_checkpoint(tiny_umt5_dir, "t5x", output, step=5)
    model, variables = t5x_tiny
    state = train_state.FlaxOptimTrainState.create(model.optimizer_def, variables)
    # Adafactor's slots as T5X initialises them for the scanned axes (its factor rules).
    with open(os.path.join(output, "checkpoint_5", "checkpoint"), "rb") as handle:
        from flax import serialization

        written = flatten(serialization.msgpack_restore(handle.read())["optimizer"]["state"])
    theirs = flatten(serialization.to_state_dict(state.state_dict()["state"]))
    assert set(written) == set(theirs)
    for name, value in theirs.items():
        assert np.shape(written[name]) == np.shape(value), name
    partitioner = partitioning.PjitPartitioner(num_partitions=1)
    restored = checkpoints.Checkpointer(state, partitioner, output).restore(step=5)
    batch = _t5x_batch(config)
    t5x_scores = np.asarray(model.score_batch(restored.params, batch))
    scores = np.asarray(EncoderDecoderModel(config).score_batch(params, batch))
    np.testing.assert_allclose(scores, t5x_scores, rtol=2e-5)
    assert int(restored.step) == 5
