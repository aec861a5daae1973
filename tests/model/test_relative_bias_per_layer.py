"""A relative position bias per layer (`T5Config.relative_bias_per_layer`, issue 48
point 24): the network of T5X's scalable_t5 and Hugging Face's UMT5, where each
layer computes its bias from a table of its own.

The reference is transformers' `UMT5ForConditionalGeneration` (a random tiny one,
`tiny_umt5_model`): read from its directory, the network's teacher-forced
log-likelihoods and the scorer's scores equal its own to 1e-5, in every scoring
mode; the export to Hugging Face loads back into transformers as UMT5, the same
model. T5X's side (its scanned checkpoints) is in test_t5x_scanned.py.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.checkpoints import load_checkpoint
from seahorse_metrics.checkpoints.params import flatten
from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.model import EncoderDecoderModel, get_config, stacks

from fixtures import scoring_reference as ref
from fixtures import train_utils

PREMISES = ["the fox jumps over the dog. " * 12, "a b c d", "dog 7 is brown and the fox is not."]
HYPOTHESES = ["a fox jumps.", "a b", "the dog is brown."]


@pytest.fixture(scope="module")
def umt5(tiny_umt5_dir):
    return load_checkpoint(tiny_umt5_dir)


def _teacher_forced_batch(vocab_size, seed=0):
    rng = np.random.default_rng(seed)
    encoder = rng.integers(3, vocab_size, (3, 40)).astype(np.int32)
    encoder[1, 25:] = 0  # padding
    target = rng.integers(3, vocab_size, (3, 9)).astype(np.int32)
    target[2, 6:] = 0
    decoder = np.concatenate([np.zeros((3, 1), np.int32), target[:, :-1]], axis=1)
    return {
        "encoder_input_tokens": encoder,
        "decoder_input_tokens": decoder,
        "decoder_target_tokens": target,
        "decoder_loss_weights": (target > 0).astype(np.float32),
    }


def _hf_log_likelihoods(hf_model, batch):
    import torch

    with torch.no_grad():
        logits = hf_model(
            input_ids=torch.tensor(batch["encoder_input_tokens"]).long(),
            attention_mask=torch.tensor(batch["encoder_input_tokens"] > 0).long(),
            decoder_input_ids=torch.tensor(batch["decoder_input_tokens"]).long(),
        ).logits
    log_probs = torch.log_softmax(logits.double(), -1).numpy()
    target = batch["decoder_target_tokens"]
    chosen = np.take_along_axis(log_probs, target[..., None], axis=-1)[..., 0]
    return (chosen * batch["decoder_loss_weights"]).sum(-1)


def test_per_layer_network_is_transformers_umt5(umt5, tiny_umt5_model):
    config, params = umt5
    assert config.relative_bias_per_layer and not get_config("tiny").relative_bias_per_layer
    names = flatten(params)
    assert names["encoder/layers_1/relpos_bias/rel_embedding"].shape == (config.num_heads, 32)
    assert "decoder/layers_1/relpos_bias/rel_embedding" in names
    assert not any(name.endswith("coder/relpos_bias/rel_embedding") for name in names)
    axes = EncoderDecoderModel(config).param_logical_axes()
    assert tuple(axes["decoder"]["layers_0"]["relpos_bias"]["rel_embedding"]) == (
        "heads",
        "relpos_buckets",
    )
    # The layers' tables differ, and each is used: the decoder's whole
    # teacher-forced path (causal bias over 9 positions) equals UMT5's.
    batch = _teacher_forced_batch(config.vocab_size)
    expected = _hf_log_likelihoods(tiny_umt5_model, batch)
    scores = np.asarray(EncoderDecoderModel(config).score_batch(params, batch))
    np.testing.assert_allclose(scores, expected, rtol=1e-5)
    # The same tables as one per stack (layer 0's) give other scores.
    shared = EncoderDecoderModel(config.replace(relative_bias_per_layer=False))
    tree = {
        "token_embedder": params["token_embedder"],
        "encoder": dict(params["encoder"]),
        "decoder": dict(params["decoder"]),
    }
    for stack in ("encoder", "decoder"):
        tree[stack]["relpos_bias"] = tree[stack]["layers_0"]["relpos_bias"]
        for layer in ("layers_0", "layers_1"):
            tree[stack][layer] = {k: v for k, v in tree[stack][layer].items() if k != "relpos_bias"}
    tree["decoder"]["logits_dense"] = params["decoder"]["logits_dense"]
    assert np.abs(np.asarray(shared.score_batch(tree, batch)) - expected).max() > 1e-3


def test_scanned_rematerialised_layers_give_the_unrolled_loss_and_gradients(umt5):
    config, params = umt5
    config = config.replace(dropout_rate=0.1)
    batch = {k: jnp.asarray(v) for k, v in _teacher_forced_batch(config.vocab_size, 1).items()}
    key = jax.random.PRNGKey(3)  # with dropout, which both forms draw alike

    def loss_and_grads(model_config, model_params):
        model = EncoderDecoderModel(model_config)
        return jax.jit(jax.value_and_grad(lambda p: model.loss(p, batch, key)[0]))(model_params)

    stacked = stacks.stack_layers(params)
    assert stacked["encoder"]["layers"]["relpos_bias"]["rel_embedding"].shape == (2, 4, 32)
    scanned_model = EncoderDecoderModel(config.replace(scan_layers=True))
    assert tuple(
        scanned_model.param_logical_axes()["encoder"]["layers"]["relpos_bias"]["rel_embedding"]
    ) == ("layers", "heads", "relpos_buckets")
    loss, grads = loss_and_grads(config, params)
    assert (
        np.abs(np.asarray(grads["encoder"]["layers_1"]["relpos_bias"]["rel_embedding"])).max() > 0
    )
    value, gradient = loss_and_grads(config.replace(scan_layers=True, remat="full"), stacked)
    assert abs(float(value - loss)) < 1e-6
    gradient = flatten(stacks.unstack_layers(gradient))
    for name, expected in flatten(grads).items():
        np.testing.assert_allclose(gradient[name], expected, atol=1e-6, err_msg=name)


def test_scorer_modes_give_transformers_umt5_scores(
    tiny_umt5_dir, tiny_umt5_model, tiny_hf_dir, tiny_hf_model, tiny_vocab_path
):
    # Chunked and per-sentence scoring: test_scoring_modes.py, with both metrics.
    def reference(hf_model, **options):
        return ref.hf_scores(
            hf_model,
            SentencePieceTokenizer(tiny_vocab_path),
            tiny_vocab_path,
            PREMISES,
            HYPOTHESES,
            max_input_length=64,
            **options,
        )

    expected = reference(tiny_umt5_model)
    for options in ({}, {"packing": True, "scan_layers": True}):
        scores = Scorer.load(tiny_umt5_dir, max_input_length=64, **options).score(
            PREMISES, HYPOTHESES
        )
        np.testing.assert_allclose(scores, expected, rtol=1e-5, err_msg=str(options))
    scores = Scorer.load(tiny_umt5_dir, max_input_length=64, normalize="pair").score(
        PREMISES, HYPOTHESES
    )
    np.testing.assert_allclose(scores, reference(tiny_umt5_model, normalize="pair"), rtol=1e-5)
    # int8 (scanned) and bfloat16 stay near float32.
    for options in ({"quantize": "int8", "scan_layers": True}, {"dtype": "bfloat16"}):
        scores = Scorer.load(tiny_umt5_dir, max_input_length=64, **options).score(
            PREMISES, HYPOTHESES
        )
        np.testing.assert_allclose(scores, expected, rtol=0.05, err_msg=str(options))
    # A per-layer metric beside an mT5 one in one MultiScorer.
    both = MultiScorer.load({"umt5": tiny_umt5_dir, "mt5": tiny_hf_dir}, max_input_length=64)
    output = both.score_detailed(PREMISES, HYPOTHESES)
    np.testing.assert_allclose(output.scores["umt5"], expected, rtol=1e-5)
    np.testing.assert_allclose(output.scores["mt5"], reference(tiny_hf_model), rtol=1e-5)


def test_export_to_hugging_face_is_transformers_umt5(umt5, tiny_umt5_dir, tmp_path):
    transformers = pytest.importorskip("transformers")
    from seahorse_metrics.checkpoints.export import export_checkpoint

    config, params = umt5
    output = str(tmp_path / "umt5-hf")
    export_checkpoint(tiny_umt5_dir, "hf", output)
    with open(os.path.join(output, "config.json"), encoding="utf-8") as handle:
        written = json.load(handle)
    assert written["model_type"] == "umt5"
    assert written["architectures"] == ["UMT5ForConditionalGeneration"]
    read_config, read = load_checkpoint(output)
    assert read_config == config
    for name, value in flatten(params).items():
        np.testing.assert_array_equal(flatten(read)[name], value, err_msg=name)
    hf_model = transformers.UMT5ForConditionalGeneration.from_pretrained(output).eval()
    batch = _teacher_forced_batch(config.vocab_size, 2)
    scores = np.asarray(EncoderDecoderModel(config).score_batch(params, batch))
    np.testing.assert_allclose(_hf_log_likelihoods(hf_model, batch), scores, rtol=1e-5)
    bias = hf_model.decoder.block[1].layer[0].SelfAttention.relative_attention_bias.weight
    np.testing.assert_array_equal(
        bias.detach().numpy().T, params["decoder"]["layers_1"]["relpos_bias"]["rel_embedding"]
    )


def test_ctranslate2_refuses_a_bias_per_layer_in_one_line(tiny_umt5_dir, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    options = {"cache_dir": str(tmp_path / "ct2"), "convert_in_child": False}
    with pytest.raises(
        ValueError,
        match=r"relative position bias in every layer .* CTranslate2 "
        r"cannot run \(its issue #2102\)",
    ):
        Scorer.load(tiny_umt5_dir, engine="ctranslate2", engine_options=options)
    pairs = ref.write_pairs(tmp_path / "pairs.jsonl", PREMISES, HYPOTHESES)
    status = cli_main(
        [
            "score",
            "--checkpoint",
            tiny_umt5_dir,
            "--input",
            pairs,
            "--output",
            str(tmp_path / "scores.jsonl"),
            "--engine",
            "ctranslate2",
        ]
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert status != 0 and len(error) == 1 and "issue #2102" in error[0]
    assert "--engine jax" in error[0] and "Traceback" not in error[0]
    assert not os.path.exists(tmp_path / "ct2") or not os.listdir(tmp_path / "ct2")


@pytest.mark.slow
def test_training_a_scanned_per_layer_network_saves_what_scores(train_sample, tmp_path):
    model_dir = str(tmp_path / "run")
    train_utils.train_sample_run(
        model_dir,
        train_sample,
        **{
            "TrainConfig.model_overrides": {"relative_bias_per_layer": True},
            "TrainConfig.scan_layers": True,
            "TrainConfig.train_steps": 4,
            "TrainConfig.eval_every": 4,
            "TrainConfig.checkpoint_every": 4,
        },
    )
    saved = train_utils.checkpoint_params(model_dir, 4)
    assert any("layers" in name and "relpos_bias" in name for name in saved)
    config, params = load_checkpoint(os.path.join(model_dir, "best"))
    assert config.relative_bias_per_layer and not config.scan_layers
    tables = [params["encoder"][f"layers_{i}"]["relpos_bias"]["rel_embedding"] for i in (0, 1)]
    assert np.abs(tables[0] - tables[1]).max() > 0  # each layer trained its own
    scores = Scorer.load(os.path.join(model_dir, "best"), max_input_length=64).score(
        PREMISES, HYPOTHESES
    )
    scanned = Scorer.load(
        os.path.join(model_dir, "best"), max_input_length=64, scan_layers=True
    ).score(PREMISES, HYPOTHESES)
    np.testing.assert_allclose(scanned, scores, rtol=1e-5)
