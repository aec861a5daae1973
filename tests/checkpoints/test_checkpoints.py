"""Checkpoint formats, each checked against the Hugging Face PyTorch reference.

The reference is a random HF model of the `tiny` preset (attention inner
width 64 != d_model 32, 2+2 layers, untied head) run by PyTorch on sequences
longer than 128 tokens, so the far relative-position buckets are used in both
the bidirectional encoder and the causal decoder.
"""

import json
import os
import shutil

import numpy as np
import pytest

from seahorse_metrics.checkpoints import (
    CheckpointError,
    detect_format,
    export_hf,
    load_checkpoint,
    save_checkpoint,
)
from seahorse_metrics.checkpoints.params import flatten
from seahorse_metrics.model import EncoderDecoderModel

from fixtures import tiny_model

# The same [4, 160] -> [4, 140] shapes as test_model.py, so compilations are shared.
INPUT_LENGTH = 160
TARGET_LENGTH = 140
PADDED_ROW_LENGTH = 97  # rows 1 and 3: real tokens, then padding
TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def make_batch(vocab_size: int, pad_id: int = 0, start_id: int = 0, seed: int = 0):
    rng = np.random.default_rng(seed)
    encoder_tokens = rng.integers(3, vocab_size, size=(4, INPUT_LENGTH)).astype(np.int32)
    encoder_tokens[1::2, PADDED_ROW_LENGTH:] = pad_id
    targets = rng.integers(3, vocab_size, size=(4, TARGET_LENGTH)).astype(np.int32)
    decoder_inputs = np.concatenate([np.full((4, 1), start_id, np.int32), targets[:, :-1]], axis=1)
    return {
        "encoder_input_tokens": encoder_tokens,
        "decoder_input_tokens": decoder_inputs,
        "decoder_target_tokens": targets,
    }


def hf_outputs(hf_model, batch):
    """Encoder states and teacher-forced logits from the PyTorch reference."""
    import torch

    with torch.no_grad():
        input_ids = torch.from_numpy(batch["encoder_input_tokens"]).long()
        attention_mask = (input_ids != 0).long()
        out = hf_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=torch.from_numpy(batch["decoder_input_tokens"]).long(),
        )
    return out.encoder_last_hidden_state.numpy(), out.logits.numpy()


def assert_matches_hf(config, params, hf_model, batch):
    model = EncoderDecoderModel(config)
    hf_encoded, hf_logits = hf_outputs(hf_model, batch)
    encoded = np.asarray(model.encode(params, batch["encoder_input_tokens"]))
    # Padded positions are not compared: neither implementation defines them.
    np.testing.assert_allclose(encoded[0::2], hf_encoded[0::2], **TOLERANCE)
    np.testing.assert_allclose(
        encoded[1::2, :PADDED_ROW_LENGTH], hf_encoded[1::2, :PADDED_ROW_LENGTH], **TOLERANCE
    )
    logits = np.asarray(model.logits(params, batch))
    np.testing.assert_allclose(logits, hf_logits, **TOLERANCE)
    # First step alone (encoder once, decoder for one position).
    probs = np.asarray(
        model.first_token_probs(params, batch["encoder_input_tokens"], range(config.vocab_size))
    )
    hf_first = hf_logits[:, 0]
    hf_probs = np.exp(hf_first - hf_first.max(-1, keepdims=True))
    hf_probs /= hf_probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(probs, hf_probs, rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="module")
def batch():
    return make_batch(tiny_model.tiny_config().vocab_size)


@pytest.fixture(scope="module")
def t5_class_model():
    # A T5-class model carrying mT5 sizes, as the released SEAHORSE metrics are.
    model = tiny_model.build_hf_model(model_type="t5", seed=1)
    assert type(model).__name__ == "T5ForConditionalGeneration"
    return model


@pytest.mark.parametrize("weights", ["safetensors", "sharded", "bin", "bin_sharded", "flax"])
def test_hf_formats_match_pytorch(tmp_path, tiny_hf_model, batch, weights):
    directory = tiny_model.save_hf_model(tiny_hf_model, str(tmp_path / weights), weights=weights)
    shards = {
        "sharded": ("model.safetensors.index.json", ".safetensors"),
        "bin_sharded": ("pytorch_model.bin.index.json", ".bin"),
    }
    if weights in shards:
        index, suffix = shards[weights]
        assert os.path.isfile(os.path.join(directory, index))
        assert len([f for f in os.listdir(directory) if f.endswith(suffix)]) > 1
    assert detect_format(directory) == "hf"
    config, params = load_checkpoint(directory)
    assert config == tiny_model.tiny_config()
    assert config.inner_dim != config.d_model
    assert_matches_hf(config, params, tiny_hf_model, batch)


def test_t5_class_config_with_mt5_sizes(tmp_path, t5_class_model, batch):
    directory = tiny_model.save_hf_model(t5_class_model, str(tmp_path / "t5"))
    with open(os.path.join(directory, "config.json")) as handle:
        saved = json.load(handle)
    assert saved["model_type"] == "t5" and saved["tie_word_embeddings"] is False
    config, params = load_checkpoint(directory)
    assert_matches_hf(config, params, t5_class_model, batch)


def assert_log_probs_close(config, params, hf_model, batch, tolerance=1e-4):
    """Teacher-forced log P of every vocabulary entry at every step agree within `tolerance`."""
    import jax

    _, hf_logits = hf_outputs(hf_model, batch)
    logits = np.asarray(EncoderDecoderModel(config).logits(params, batch))
    difference = np.abs(
        np.asarray(jax.nn.log_softmax(logits)) - np.asarray(jax.nn.log_softmax(hf_logits))
    )
    assert difference.max() < tolerance, difference.max()


@pytest.fixture(scope="module")
def t5_v1_0_model():
    """A random T5 v1.0 (ReLU, tied head, T5-class) model: the TRUE NLI metric's network."""
    model = tiny_model.build_hf_model(tiny_model.tiny_t5_v1_0_config(), model_type="t5", seed=2)
    assert model.config.feed_forward_proj == "relu" and model.config.tie_word_embeddings
    return model


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_t5_v1_0_matches_pytorch(tmp_path, t5_v1_0_model, batch, weights):
    directory = tiny_model.save_hf_model(t5_v1_0_model, str(tmp_path / weights), weights=weights)
    config, params = load_checkpoint(directory)
    assert config == tiny_model.tiny_t5_v1_0_config()
    assert "logits_dense" not in params["decoder"]
    assert sorted(params["encoder"]["layers_0"]["mlp"]) == ["wi", "wo"]
    assert_matches_hf(config, params, t5_v1_0_model, batch)
    assert_log_probs_close(config, params, t5_v1_0_model, batch)


def test_t5_v1_0_t5x_checkpoint(tmp_path, t5_v1_0_model, batch):
    # T5X's t5_1_0 layout: mlp/wi, no decoder/logits_dense (logits_via_embedding).
    directory = tiny_model.save_hf_model(t5_v1_0_model, str(tmp_path / "hf"))
    config, params = load_checkpoint(directory)
    step_dir = tiny_model.write_t5x_checkpoint(str(tmp_path / "t5x"), params, step=7)
    assert os.path.isdir(os.path.join(step_dir, "target.encoder.layers_0.mlp.wi.kernel"))
    loaded_config, loaded = load_checkpoint(str(tmp_path / "t5x"))
    assert loaded_config == config
    for name, value in flatten(params).items():
        np.testing.assert_array_equal(flatten(loaded)[name], value, err_msg=name)
    assert_log_probs_close(loaded_config, loaded, t5_v1_0_model, batch)


def test_t5x_encoder_only_is_refused(tmp_path, tiny_hf_dir):
    _, params = load_checkpoint(tiny_hf_dir)
    encoder_only = {
        name: value for name, value in flatten(params).items() if not name.startswith("decoder/")
    }
    from seahorse_metrics.checkpoints.params import unflatten

    tiny_model.write_t5x_checkpoint(str(tmp_path), unflatten(encoder_only), step=1)
    with pytest.raises(CheckpointError, match="encoder-only"):
        load_checkpoint(str(tmp_path))


@pytest.mark.parametrize("layout", ["tensorstore", "mixed_inline", "placeholders"])
def test_t5x_checkpoint_matches_pytorch(tmp_path, tiny_hf_dir, tiny_hf_model, batch, layout):
    config, params = load_checkpoint(tiny_hf_dir)
    model_dir = str(tmp_path / "t5x")
    inline = ()
    if layout == "mixed_inline":
        # T5X writes unpartitioned parameters into the msgpack itself.
        inline = [name for name in flatten(params) if "layer_norm" in name or "relpos" in name]
    tiny_model.write_t5x_checkpoint(
        model_dir, params, step=1000, inline=inline, placeholders=(layout == "placeholders")
    )
    # An older step with other weights: the model directory must resolve to the latest.
    shifted = {name: np.asarray(value) + 1.0 for name, value in flatten(params).items()}
    from seahorse_metrics.checkpoints.params import unflatten

    tiny_model.write_t5x_checkpoint(model_dir, unflatten(shifted), step=500)
    assert detect_format(model_dir) == "t5x"
    for path in (model_dir, os.path.join(model_dir, "checkpoint_1000")):
        loaded_config, loaded = load_checkpoint(path)
        # What shapes do not tell (max distance, eps, dropout) takes mT5's defaults.
        assert loaded_config == config
        for name, value in flatten(params).items():
            np.testing.assert_array_equal(flatten(loaded)[name], value, err_msg=name)
    assert_matches_hf(loaded_config, loaded, tiny_hf_model, batch)


def test_t5x_bfloat16_arrays(tmp_path, tiny_hf_dir):
    import ml_dtypes

    _, params = load_checkpoint(tiny_hf_dir)
    tiny_model.write_t5x_checkpoint(str(tmp_path), params, step=1, dtype="bfloat16")
    _, loaded = load_checkpoint(str(tmp_path))
    _, loaded_bf16 = load_checkpoint(str(tmp_path), dtype="bfloat16")
    for name, value in flatten(params).items():
        rounded = np.asarray(value).astype(ml_dtypes.bfloat16)
        assert flatten(loaded)[name].dtype == np.float32
        np.testing.assert_array_equal(
            flatten(loaded)[name], rounded.astype(np.float32), err_msg=name
        )
        assert flatten(loaded_bf16)[name].dtype == ml_dtypes.bfloat16


def test_round_trip_hf_orbax_hf_is_exact(tmp_path, tiny_hf_model, tiny_hf_dir, tiny_vocab_path):
    import torch
    import transformers
    from safetensors.numpy import load_file

    config, params = load_checkpoint(tiny_hf_dir)
    written = save_checkpoint(str(tmp_path / "ours"), config, params)
    assert detect_format(written) == "ours"
    assert sorted(os.listdir(written)) == ["params", "seahorse_config.json"]
    config2, params2 = load_checkpoint(written)
    assert config2 == config
    export_dir = str(tmp_path / "exported")
    export_hf(export_dir, config2, params2, vocab_path=tiny_vocab_path)
    assert sorted(os.listdir(export_dir)) == ["config.json", "model.safetensors", "spiece.model"]

    exported = load_file(os.path.join(export_dir, "model.safetensors"))
    original = {name: tensor.numpy() for name, tensor in tiny_hf_model.state_dict().items()}
    # HF's state dict repeats the tied embedding aliases; the export stores it once.
    for alias in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        np.testing.assert_array_equal(original.pop(alias), original["shared.weight"])
    assert set(exported) == set(original)
    for name, value in original.items():
        assert exported[name].dtype == value.dtype
        np.testing.assert_array_equal(exported[name], value, err_msg=name)

    # Hugging Face reads the export back without missing or unexpected weights.
    reloaded, info = transformers.MT5ForConditionalGeneration.from_pretrained(
        export_dir, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    for name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, tiny_hf_model.state_dict()[name]), name


def test_save_with_steps_loads_latest(tmp_path, tiny_hf_dir):
    config, params = load_checkpoint(tiny_hf_dir)
    save_checkpoint(str(tmp_path), config, params, step=10)
    bumped = {name: np.asarray(v) * 2 for name, v in flatten(params).items()}
    from seahorse_metrics.checkpoints.params import unflatten

    save_checkpoint(str(tmp_path), config, unflatten(bumped), step=20)
    assert detect_format(str(tmp_path)) == "ours"
    _, loaded = load_checkpoint(str(tmp_path))
    np.testing.assert_array_equal(
        flatten(loaded)["token_embedder/embedding"], bumped["token_embedder/embedding"]
    )
    with pytest.raises(FileExistsError):
        save_checkpoint(str(tmp_path), config, params, step=20)


def test_relative_paths_save_and_load(tmp_path, tiny_hf_dir, monkeypatch):
    # `seahorse-metrics score --checkpoint runs/q4/best` passes a relative path.
    config, params = load_checkpoint(tiny_hf_dir)
    monkeypatch.chdir(tmp_path)
    save_checkpoint(os.path.join("runs", "q4", "best"), config, params)
    _, loaded = load_checkpoint(os.path.join("runs", "q4", "best"))
    np.testing.assert_array_equal(
        flatten(loaded)["token_embedder/embedding"], flatten(params)["token_embedder/embedding"]
    )


# ------------------------------------------------------------------ errors
def _edit_safetensors(directory, edit):
    from safetensors.numpy import load_file, save_file

    path = os.path.join(directory, "model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path, metadata={"format": "pt"})


def _copy(tiny_hf_dir, tmp_path):
    return shutil.copytree(tiny_hf_dir, str(tmp_path / "copy"))


def test_missing_parameter_is_named(tmp_path, tiny_hf_dir):
    directory = _copy(tiny_hf_dir, tmp_path)
    name = "decoder.block.1.layer.1.EncDecAttention.k.weight"
    _edit_safetensors(directory, lambda t: t.pop(name))
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")):
        load_checkpoint(directory)


def test_unknown_parameter_is_named(tmp_path, tiny_hf_dir):
    directory = _copy(tiny_hf_dir, tmp_path)
    _edit_safetensors(
        directory, lambda t: t.update({"encoder.block.0.extra.weight": np.ones(3, np.float32)})
    )
    with pytest.raises(CheckpointError, match=r"encoder\.block\.0\.extra\.weight"):
        load_checkpoint(directory)


def test_wrong_shape_is_named(tmp_path, tiny_hf_dir):
    directory = _copy(tiny_hf_dir, tmp_path)
    name = "encoder.block.1.layer.1.DenseReluDense.wo.weight"
    _edit_safetensors(directory, lambda t: t.update({name: t[name][:, :-1]}))
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.") + ".*shape"):
        load_checkpoint(directory)


def test_integer_dtype_is_refused(tmp_path, tiny_hf_dir):
    directory = _copy(tiny_hf_dir, tmp_path)
    name = "encoder.final_layer_norm.weight"
    _edit_safetensors(directory, lambda t: t.update({name: t[name].astype(np.int32)}))
    with pytest.raises(CheckpointError, match="encoder/encoder_norm/scale.*dtype"):
        load_checkpoint(directory)


@pytest.mark.parametrize(
    "change, message",
    [
        # The head of these weights is not the embedding.
        ({"tie_word_embeddings": True}, r"lm_head\.weight differs.*tie_word_embeddings"),
        ({"feed_forward_proj": "gated-silu"}, "feed_forward_proj='gated-silu' is not supported"),
        ({"feed_forward_proj": "gelu"}, "feed_forward_proj='gelu' is not supported"),
        # A ReLU config over gated weights: the wi kernels are missing.
        ({"feed_forward_proj": "relu"}, r"missing parameters.*DenseReluDense\.wi\.weight"),
        (
            {"architectures": ["T5EncoderModel"]},
            r"architectures=\['T5EncoderModel'\] is an encoder-only",
        ),
        ({"is_encoder_decoder": False}, "is_encoder_decoder=false"),
        ({"num_decoder_layers": 0}, "num_decoder_layers=0 is an encoder-only"),
        ({"model_type": "bart"}, "not a T5"),
    ],
)
def test_unsupported_hf_configs(tmp_path, tiny_hf_dir, change, message):
    directory = _copy(tiny_hf_dir, tmp_path)
    path = os.path.join(directory, "config.json")
    with open(path) as handle:
        hf_config = json.load(handle)
    hf_config.update(change)
    tiny_model.write_json(path, hf_config)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(directory)


def test_t5_class_default_is_tied_and_refused(tmp_path, tiny_hf_dir):
    directory = _copy(tiny_hf_dir, tmp_path)
    path = os.path.join(directory, "config.json")
    with open(path) as handle:
        hf_config = json.load(handle)
    hf_config["model_type"] = "t5"
    del hf_config["tie_word_embeddings"]  # T5Config's default ties them
    tiny_model.write_json(path, hf_config)
    with pytest.raises(CheckpointError, match="tie_word_embeddings"):
        load_checkpoint(directory)


def test_t5x_missing_array_and_not_a_checkpoint(tmp_path, tiny_hf_dir):
    _, params = load_checkpoint(tiny_hf_dir)
    step_dir = tiny_model.write_t5x_checkpoint(str(tmp_path / "t5x"), params, step=1)
    shutil.rmtree(os.path.join(step_dir, "target.decoder.layers_1.mlp.wo.kernel"))
    with pytest.raises(FileNotFoundError, match="decoder/layers_1/mlp/wo/kernel"):
        load_checkpoint(step_dir)
    os.makedirs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="not a checkpoint"):
        detect_format(str(tmp_path / "empty"))


def test_save_checkpoint_refuses_mismatched_params(tmp_path, tiny_hf_dir):
    config, params = load_checkpoint(tiny_hf_dir)
    with pytest.raises(CheckpointError, match="d_model=48"):
        save_checkpoint(str(tmp_path), config.replace(d_model=48), params)


def test_t5_v1_0_scores_through_the_scorer(tmp_path, t5_v1_0_model, tiny_vocab_path):
    # The TRUE NLI baseline's network, scored like any SEAHORSE metric.
    from seahorse_metrics import Scorer
    from seahorse_metrics.data.vocab import SentencePieceTokenizer

    from fixtures import scoring_reference as ref

    directory = tiny_model.save_hf_model(
        t5_v1_0_model, str(tmp_path / "nli"), vocab_path=tiny_vocab_path
    )
    premises, hypotheses = ref.random_pairs(6, seed=3)
    scores = Scorer.load(directory, batch_size=4).score(premises, hypotheses)
    expected = ref.hf_scores(
        t5_v1_0_model,
        SentencePieceTokenizer(tiny_vocab_path),
        tiny_vocab_path,
        premises,
        hypotheses,
    )
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-7)


def _truncate(path, keep=0.5):
    with open(path, "r+b") as handle:
        handle.truncate(int(os.path.getsize(path) * keep))


def _largest_file(directory):
    files = [os.path.join(root, name) for root, _, names in os.walk(directory) for name in names]
    return max(files, key=os.path.getsize)


def test_a_damaged_file_is_named(tmp_path, tiny_hf_dir):
    """Cut-short checkpoint files give a CheckpointError naming the file, not
    the reader library's own error (an AttributeError, an OCDBT or
    safetensors error), also when each tensor is quantized as it is read."""
    from seahorse_metrics.model import EncoderDecoderModel
    from seahorse_metrics.model.quantize import kernel_converter

    config, params = load_checkpoint(tiny_hf_dir)
    int8 = kernel_converter(EncoderDecoderModel(config.replace(quantize="int8")))
    for case in ("metadata", "data"):
        written = save_checkpoint(str(tmp_path / case), config, params)
        params_dir = os.path.join(written, "params")
        damaged = (
            os.path.join(params_dir, "_METADATA")
            if case == "metadata"
            else _largest_file(params_dir)
        )
        _truncate(damaged)
        expected = damaged if case == "metadata" else params_dir
        for convert in (None, int8):  # int8 scoring reads ours one tensor at a time
            with pytest.raises(
                CheckpointError,
                match=rf"{expected}: cannot read this checkpoint "
                ".*damaged or incomplete",
            ):
                load_checkpoint(written, convert=convert)
    hf = str(tmp_path / "hf")
    shutil.copytree(tiny_hf_dir, hf)
    _truncate(os.path.join(hf, "model.safetensors"))
    for convert in (None, int8):
        with pytest.raises(CheckpointError, match=r"hf/model\.safetensors: cannot read"):
            load_checkpoint(hf, convert=convert)
