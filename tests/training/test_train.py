"""The trainer in-process on the tiny preset: learning, NaN, packing, best checkpoint, gin."""

from __future__ import annotations

import dataclasses
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seahorse_metrics.model import EncoderDecoderModel, get_config
from seahorse_metrics.model.partitioning import make_mesh
from seahorse_metrics.training import (
    ExampleSet,
    NonFiniteLossError,
    OptimizerConfig,
    batches,
    config_from_gin,
    optimizers,
    run_inputs,
    train,
)
from seahorse_metrics.training import data as data_lib
from seahorse_metrics.training.config import binding_from_flag, split_gin_flags

from fixtures import train_utils


@pytest.fixture(scope="module")
def sample(train_sample):
    """The bundled sample prepared, with its Q4 splits cached for tiny runs."""
    return train_sample


def _sample_config(sample, model_dir, **overrides):
    return train_utils.demo_config(
        train_utils.sample_bindings(
            str(model_dir), sample["prepared"], sample["cache"], **overrides
        )
    )


# ----------------------------------------------------------------------------- optimizers


def test_default_optimizer_is_t5x_finetuning_adafactor():
    config = OptimizerConfig()
    assert (config.name, config.learning_rate, config.schedule) == ("adafactor", 1e-3, "constant")
    assert (config.decay_rate, config.clipping_threshold, config.momentum) == (0.8, 1.0, None)
    assert config.multiply_by_parameter_scale
    schedule = optimizers.make_schedule(config, 100)
    assert [float(schedule(s)) for s in (0, 50, 99)] == pytest.approx([1e-3] * 3)


def test_schedules_warm_up_and_decay():
    cosine = optimizers.make_schedule(OptimizerConfig(schedule="cosine", warmup_steps=10), 110)
    assert float(cosine(0)) == 0.0
    assert float(cosine(10)) == pytest.approx(1e-3)
    assert float(cosine(60)) == pytest.approx(5e-4, rel=1e-3)
    assert float(cosine(110)) == pytest.approx(0.0, abs=1e-9)
    linear = optimizers.make_schedule(OptimizerConfig(schedule="linear", learning_rate=2.0), 4)
    assert [float(linear(s)) for s in range(5)] == pytest.approx([2.0, 1.5, 1.0, 0.5, 0.0])
    rsqrt = optimizers.make_schedule(OptimizerConfig(schedule="rsqrt", warmup_steps=100), 1000)
    assert float(rsqrt(50)) == pytest.approx(1e-3) and float(rsqrt(400)) == pytest.approx(5e-4)
    with pytest.raises(ValueError, match="schedule"):
        OptimizerConfig(schedule="triangle")
    with pytest.raises(ValueError, match="name"):
        OptimizerConfig(name="sgd")


def test_adamw_option_builds_and_updates():
    params = {"w": jnp.ones((3, 4))}
    optimizer = optimizers.make_optimizer(OptimizerConfig(name="adamw", weight_decay=0.1), 10)
    updates, _ = optimizer.update({"w": jnp.ones((3, 4))}, optimizer.init(params), params)
    assert np.all(np.asarray(updates["w"]) < 0)


# ----------------------------------------------------------------------------- gin


@pytest.mark.parametrize("question", [1, 2, 3, 4, 5, 6])
def test_finetune_gin_files_follow_t5_finetuning_defaults(question):
    config = config_from_gin(
        [f"gin/runs/finetune_q{question}.gin"], ["MODEL_DIR = '/tmp/run'", "DATA_DIR = '/data'"]
    )
    assert config.task == f"seahorse_q{question}"
    assert (config.input_length, config.target_length, config.dropout_rate) == (2048, 4, 0.1)
    assert config.optimizer == OptimizerConfig(
        name="adafactor", learning_rate=1e-3, schedule="constant"
    )
    assert config.model == "mt5_large"


def test_model_gin_files_pick_presets():
    for name in ("tiny", "mt5_small", "mt5_base", "mt5_large", "mt5_xl", "mt5_xxl"):
        config = config_from_gin(
            ["gin/runs/finetune.gin", f"gin/models/{name}.gin"],
            ["MODEL_DIR = '/tmp/r'", "TASK = 'seahorse_q1'", "DATA_DIR = '/d'"],
        )
        assert config.model == name
        get_config(name)  # the preset exists


def test_gin_flags_become_bindings_and_missing_values_are_named():
    bindings, rest = split_gin_flags(
        [
            "--gin.MODEL_DIR=/runs/q4",
            "--gin.TASK",
            "seahorse_q4",
            "--gin.TrainConfig.batch_size=16",
            "--multihost",
        ]
    )
    assert rest == ["--multihost"]
    assert bindings == [
        "MODEL_DIR = '/runs/q4'",
        "TASK = 'seahorse_q4'",
        "TrainConfig.batch_size = 16",
    ]
    assert binding_from_flag("MODEL_DIR", '"/quoted"') == 'MODEL_DIR = "/quoted"'
    with pytest.raises(ValueError, match="model_dir"):
        config_from_gin(["gin/runs/finetune.gin"], ["TASK = 'seahorse_q1'", "DATA_DIR = '/d'"])
    with pytest.raises(FileNotFoundError, match="no_such.gin"):
        config_from_gin(["gin/runs/no_such.gin"])


# ----------------------------------------------------------------------------- data stream


def test_batch_stream_visits_each_example_once_per_epoch_and_resumes():
    examples = train_utils.synthetic_examples(37, seed=0, vocab_size=50, yes_id=5, no_id=6)
    stream = batches.BatchStream(examples, 8, 48, 4, 0, seed=3)
    seen = [r for _ in range(9) for r in stream._next_rows()]  # 72 rows: epoch 0 and part of 1
    first_epoch = [r[0] for r in seen[:37]]
    assert sorted(first_epoch) == list(range(37))
    assert first_epoch != sorted(first_epoch)  # shuffled
    position = batches.StreamPosition.from_json(stream.position.to_json())
    expected = [next(stream) for _ in range(3)]
    resumed = batches.BatchStream(examples, 8, 48, 4, 0, seed=3, position=position)
    for batch, again in zip(expected, (next(resumed) for _ in range(3))):
        for name in batch:
            np.testing.assert_array_equal(batch[name], again[name])


def test_packed_stream_fits_rows_and_uses_every_example_once():
    examples = train_utils.synthetic_examples(
        200, seed=1, vocab_size=50, yes_id=5, no_id=6, max_length=60
    )
    stream = batches.BatchStream(examples, 4, 64, 16, 0, seed=0, pack=True)
    used = []
    while stream.position.epoch == 0:
        batch = next(stream)
        assert batch["encoder_input_tokens"].shape == (4, 64)
        segments = batch["encoder_segment_ids"]
        # Positions restart at 0 in every segment; padding has segment 0.
        starts = (batch["encoder_positions"] == 0) & (segments > 0)
        assert np.all(np.diff(segments, axis=1)[~starts[:, 1:] & (segments[:, 1:] > 0)] == 0)
        assert np.array_equal(
            batch["decoder_loss_weights"], (batch["decoder_segment_ids"] > 0).astype(np.int32)
        )
        used.append(batches.batch_stats(batch)["examples"])
    # Every example of epoch 0 went into exactly one batch (held-over ones included).
    assert stream.position.examples_seen >= 200 - len(stream.position.pending)
    assert sum(used) == stream.position.examples_seen
    assert np.mean(used) > 4  # packing put more than one example per row


def test_packed_and_unpacked_batches_give_the_same_per_example_loss():
    config = get_config("tiny", dropout_rate=0.0, num_encoder_layers=1, num_decoder_layers=1)
    model = EncoderDecoderModel(config)
    params = model.init_params(jax.random.PRNGKey(0), 64, 8)
    examples = train_utils.synthetic_examples(
        6, seed=2, vocab_size=config.vocab_size, yes_id=7, no_id=8, max_length=20
    )
    rows = [[0, 1, 2], [3, 4], [5]]
    packed = batches.packed_batch(examples, rows, 4, 64, 8, config.decoder_start_id)
    unpacked = batches.unpacked_batch(examples, range(6), 6, 64, 4, config.decoder_start_id)
    _, packed_aux = model.loss(params, packed)
    _, unpacked_aux = model.loss(params, unpacked)
    token_loss = np.asarray(packed_aux["token_loss"])
    per_segment = [
        token_loss[row][packed["decoder_segment_ids"][row] == seg + 1].sum()
        for row, members in enumerate(rows)
        for seg in range(len(members))
    ]
    np.testing.assert_allclose(
        per_segment, np.asarray(unpacked_aux["example_loss"]), rtol=1e-5, atol=1e-6
    )


def test_example_set_round_trips_and_rejects_empty_examples(tmp_path):
    examples = train_utils.synthetic_examples(5, seed=0, vocab_size=30, yes_id=5, no_id=6)
    path = str(tmp_path / "set.npz")
    examples.save(path)
    loaded = ExampleSet.load(path)
    assert loaded.ids == examples.ids
    np.testing.assert_array_equal(loaded.input_tokens, examples.input_tokens)
    with pytest.raises(ValueError, match="empty inputs"):
        ExampleSet.from_examples([[3], []], [[5, 1], [6, 1]], ids=["a", "b"])


# ----------------------------------------------------------------------------- training


def test_training_on_the_sample_lowers_the_loss(sample, tmp_path):
    model_dir = tmp_path / "run"
    config = _sample_config(
        sample,
        model_dir,
        **{
            "TrainConfig.train_steps": 30,
            "TrainConfig.eval_every": 30,
            "TrainConfig.checkpoint_every": 30,
        },
    )
    result = train(config)
    losses = train_utils.losses_by_step(str(model_dir))
    assert sorted(losses) == list(range(1, 31))
    first, last = (
        np.mean([losses[s] for s in range(1, 6)]),
        np.mean([losses[s] for s in range(26, 31)]),
    )
    assert last < 0.7 * first, (first, last)
    assert result.final_step == 30 and result.best_step == 30
    assert "Best checkpoint" in result.summary and str(model_dir / "best") in result.summary
    for name in (
        "train_log.jsonl",
        "train_config.json",
        "best/best.json",
        "best/spiece.model",
        "best/seahorse_config.json",
        "checkpoints/30",
    ):
        assert os.path.exists(model_dir / name), name
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(model_dir / "tensorboard"))
    record = train_utils.read_log(str(model_dir))[-1]
    assert record["examples_per_sec"] > 0 and record["tokens_per_sec"] > record["examples_per_sec"]
    # best/ is a scoring checkpoint with its vocabulary.
    from seahorse_metrics import Scorer

    probabilities = Scorer.load(str(model_dir / "best"), max_input_length=64).score(
        ["The council opened a new library on Monday."], ["A library opened."]
    )
    assert probabilities.shape == (1,) and 0.0 < float(probabilities[0]) < 1.0


def test_nan_loss_stops_with_the_step(sample, tmp_path):
    """Parameters with a NaN (a diverged checkpoint) make the loss NaN: the run
    stops with an error naming the step, and nothing NaN is checkpointed."""
    from seahorse_metrics.checkpoints import save_checkpoint

    config = _sample_config(sample, tmp_path / "nan", **{"TrainConfig.eval_every": 0})
    model_config = run_inputs.resolve_model(config)[0]
    rng = np.random.default_rng(0)
    params = jax.tree.map(
        lambda a: rng.normal(0.0, 0.05, a.shape).astype(np.float32),
        EncoderDecoderModel(model_config).abstract_params(),
    )
    params["decoder"]["decoder_norm"]["scale"][:] = np.nan
    save_checkpoint(str(tmp_path / "diverged"), model_config, params)
    config = dataclasses.replace(config, init_checkpoint=str(tmp_path / "diverged"))
    with pytest.raises(NonFiniteLossError, match="at step 1 "):
        train(config)
    assert math.isnan(float(train_utils.read_log(str(tmp_path / "nan"))[-1]["loss"]))
    assert not os.path.exists(tmp_path / "nan" / "checkpoints" / "6")


def test_best_checkpoint_is_the_validation_peak_not_the_last(sample, tmp_path):
    """Validation labels are the training labels flipped: the better the model
    fits the training data, the worse its validation ROC-AUC, so the peak comes
    early and the best checkpoint must stay there. Without dropout, so the
    trajectory does not hang on how dropout keys are drawn (with dropout 0.1
    the tiny model does not fit the training labels within 40 steps)."""
    train_examples = sample["examples"]["train"]
    flipped = train_examples.with_labels(1.0 - train_examples.labels)
    model_dir = tmp_path / "flip"
    config = _sample_config(
        sample,
        model_dir,
        **{
            "TrainConfig.dropout_rate": 0.0,
            "TrainConfig.train_steps": 40,
            "TrainConfig.eval_every": 5,
            "TrainConfig.checkpoint_every": 40,
            "TrainConfig.eval_max_examples": 48,
        },
    )
    result = train(config, examples={"train": train_examples, "validation": flipped})
    history = {r["step"]: r["roc_auc"] for r in train_utils.read_log(str(model_dir), "validation")}
    peak = max(history, key=lambda s: (history[s], -s))
    assert peak < 40 and history[peak] > history[40] + 0.05, history
    assert result.best_step == peak
    assert f"step {peak}" in result.summary
    # best/ holds the peak step's parameters: scoring with them reproduces its ROC-AUC.
    from seahorse_metrics.checkpoints import load_checkpoint
    from seahorse_metrics.training import validation

    model_config, params = load_checkpoint(str(model_dir / "best"))
    model = EncoderDecoderModel(model_config)
    vocab_ids = run_inputs.target_ids(str(model_dir / "best" / "spiece.model"))
    metrics = validation.validate(
        model, params, data_lib.take(flipped, 48), vocab_ids, 8, 64, make_mesh(1)
    )
    assert metrics["roc_auc"] == pytest.approx(history[peak], abs=1e-6)


def test_init_from_a_hugging_face_checkpoint(sample, tmp_path):
    """A Hugging Face checkpoint gives the run its architecture, its vocabulary
    (spiece.model in the directory) and, exactly, its initial parameters."""
    from seahorse_metrics.checkpoints import load_checkpoint
    from seahorse_metrics.data.vocab import default_vocab_path
    from seahorse_metrics.training import step

    from fixtures import tiny_model

    base = _sample_config(sample, tmp_path / "unused")
    hf_config = run_inputs.resolve_model(base)[0]
    hf_dir = str(tmp_path / "hf")
    tiny_model.save_hf_model(
        tiny_model.build_hf_model(hf_config), hf_dir, vocab_path=default_vocab_path()
    )
    config = dataclasses.replace(base, model="mt5_xxl", init_checkpoint=hf_dir, vocabulary=None)
    model_config, host_params = run_inputs.resolve_model(config)
    assert model_config == hf_config.replace(dropout_rate=config.dropout_rate)
    assert run_inputs.resolve_vocabulary(config) == os.path.join(hf_dir, "spiece.model")
    plan = step.compiled_step(model_config, config.optimizer, 0, config.z_loss, None, make_mesh(1))
    state = plan.init_state(config.seed, host_params)
    _, expected = load_checkpoint(hf_dir)
    for path, value in jax.tree_util.tree_leaves_with_path(expected):
        np.testing.assert_array_equal(
            value, _leaf(state.params, path), err_msg=jax.tree_util.keystr(path)
        )
    assert int(state.step) == 0


def _leaf(tree, path):
    for key in path:
        tree = tree[key.key]
    return np.asarray(tree)
