"""Training a multi-question metric (issue 49): prefix loss weights, the tasks
and mixture, per-question sampling and validation, resume, and T5X's train.py."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seahorse_metrics.model.model import EncoderDecoderModel
from seahorse_metrics.model.questions import QuestionPrefixes

from fixtures import paths
from fixtures.multi_question import QUESTIONS
from fixtures.tiny_model import tiny_config


# ----------------------------------------------------------------- training
def test_prefix_tokens_get_loss_weight_zero():
    """Through the seqio preprocessor and T5X-facing converter: weights 0 on
    the prefix, 1 on label and EOS, 0 on padding; the model's loss then is
    the label's and EOS's cross-entropy only."""
    tf = pytest.importorskip("tensorflow")
    from seahorse_metrics.tasks.questions import (
        PrefixWeightedEncDecFeatureConverter,
        add_question_prefix,
    )

    examples = [
        {"inputs": [20, 21, 22, 1], "targets": [5, 1]},
        {"inputs": [23, 24, 1], "targets": [6, 1]},
    ]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(examples),
        output_signature={
            "inputs": tf.TensorSpec([None], tf.int32),
            "targets": tf.TensorSpec([None], tf.int32),
        },
    )
    prefixed = add_question_prefix(dataset, prefix_ids=(10, 11, 12))
    converted = list(
        PrefixWeightedEncDecFeatureConverter(pack=False)(
            prefixed, {"inputs": 6, "targets": 7}
        ).as_numpy_iterator()
    )
    np.testing.assert_array_equal(converted[0]["decoder_target_tokens"], [10, 11, 12, 5, 1, 0, 0])
    np.testing.assert_array_equal(converted[0]["decoder_input_tokens"], [0, 10, 11, 12, 5, 1, 0])
    np.testing.assert_array_equal(converted[0]["decoder_loss_weights"], [0, 0, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(converted[1]["decoder_loss_weights"], [0, 0, 0, 1, 1, 0, 0])

    model = EncoderDecoderModel(tiny_config())
    params = model.init_params(jax.random.PRNGKey(2))
    batch = {name: jnp.asarray(np.stack([c[name] for c in converted])) for name in converted[0]}
    _, aux = model.loss(params, batch, z_loss=0.0)
    token_loss = np.asarray(aux["token_loss"])
    assert (token_loss[:, :3] == 0).all() and (token_loss[:, 3:5] > 0).all()
    assert float(aux["num_tokens"]) == 4.0
    with pytest.raises(ValueError, match="does not pack"):
        PrefixWeightedEncDecFeatureConverter(pack=True)


def test_example_targets_weights():
    targets, weights = QUESTIONS.example_targets(2, (5,), eos_id=1)
    np.testing.assert_array_equal(targets, [10, 11, 12, 5, 1])
    np.testing.assert_array_equal(weights, [0, 0, 0, 1, 1])


def test_multi_question_tasks_and_mixture_rates(tmp_path):
    """seahorse_mq_q<n> read seahorse_q<n>'s inputs unchanged, targets with the
    prefix first, and the mixture samples questions at the given rates."""
    seqio = pytest.importorskip("seqio")
    from seahorse_metrics import tasks
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare
    from seahorse_metrics.tasks.questions import (
        MULTI_QUESTION_MIXTURE,
        register_multi_question,
        unregister_multi_question,
    )

    from fixtures import tiny_data

    prepared = str(tmp_path / "prepared")
    prepare(
        tiny_data.write_release(str(tmp_path / "release")),
        LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl"))),
        prepared,
    )
    tasks.unregister()
    tasks.register(
        prepared,
        vocabulary=tiny_data.train_tiny_sentencepiece(str(tmp_path / "spm")),
        input_length=1024,
        seed=5,
    )
    try:
        with pytest.raises(ValueError, match=r"rates of unknown questions \['q9'\]"):
            register_multi_question(QUESTIONS, rates={"q9": 1.0})
        names = register_multi_question(QUESTIONS, rates={"q4": 3.0})
        assert names[-1] == MULTI_QUESTION_MIXTURE and names[3] == "seahorse_mq_q4"
        lengths = {"inputs": 1024, "targets": 8}
        plain = next(
            seqio.get_mixture_or_task("seahorse_q4")
            .get_dataset(lengths, "validation", shuffle=False)
            .as_numpy_iterator()
        )
        prefixed = next(
            seqio.get_mixture_or_task("seahorse_mq_q4")
            .get_dataset(lengths, "validation", shuffle=False)
            .as_numpy_iterator()
        )
        np.testing.assert_array_equal(prefixed["inputs"], plain["inputs"])
        np.testing.assert_array_equal(prefixed["targets"], [13, *plain["targets"]])
        np.testing.assert_array_equal(
            prefixed["targets_loss_weights"], [0] + [1] * len(plain["targets"])
        )
        mixture = seqio.get_mixture_or_task(MULTI_QUESTION_MIXTURE)
        assert mixture.get_rate(seqio.get_mixture_or_task("seahorse_mq_q4")) == 3.0
        q1_train = len(tasks.examples_for_task("seahorse_q1", "train"))
        assert mixture.get_rate(seqio.get_mixture_or_task("seahorse_mq_q1")) == float(q1_train)
    finally:
        if MULTI_QUESTION_MIXTURE in seqio.MixtureRegistry.names():
            unregister_multi_question(QUESTIONS)
        tasks.unregister()


# ------------------------------------------------------------ trainer runs
def _multi_question_run(tmp_path, name, **overrides):
    """A tiny multi-question run's config and examples: six synthetic
    questions (label in the first input token), prefixes of the sample
    vocabulary, q4 sampled at twice its share."""
    from seahorse_metrics.data.vocab import SentencePieceTokenizer, target_token_ids
    from seahorse_metrics.model.questions import seahorse_question_texts
    from seahorse_metrics.training import run_inputs
    from seahorse_metrics.training.multi_question import MULTI_QUESTION_TASK, QuestionExampleSet

    from fixtures import train_utils

    values = {
        "TrainConfig.train_steps": 8,
        "TrainConfig.eval_every": 4,
        "TrainConfig.checkpoint_every": 4,
        "TrainConfig.target_length": 16,
        "TrainConfig.question_rates": {"q4": 60.0},
        "TASK": MULTI_QUESTION_TASK,
    }
    values.update(overrides)
    config = train_utils.demo_config(
        train_utils.sample_bindings(
            str(tmp_path / name), str(tmp_path / "unused"), str(tmp_path / "cache"), **values
        )
    )
    tokenizer = SentencePieceTokenizer(run_inputs.resolve_vocabulary(config))
    yes, no = target_token_ids(tokenizer)
    questions = QuestionPrefixes.from_texts(seahorse_question_texts(), tokenizer)
    sets = {
        split: [
            train_utils.synthetic_examples(
                count, seed=seed + q, vocab_size=200, yes_id=yes, no_id=no
            )
            for q in range(6)
        ]
        for split, count, seed in (("train", 30, 0), ("validation", 12, 50))
    }
    examples = {
        split: QuestionExampleSet.build(subsets, questions, config.question_rates)
        for split, subsets in sets.items()
    }
    return config, examples


def test_question_stream_rates_and_prefix_weights(tmp_path):
    from seahorse_metrics.training.soft_targets import make_stream

    config, examples = _multi_question_run(tmp_path, "stream")
    train = examples["train"]
    assert train.rates == (30.0, 30.0, 30.0, 60.0, 30.0, 30.0)
    stream = make_stream(train, 20, 64, 16, 0, 0)
    order = stream.permutation(0)
    # 180 draws an epoch; q4 at rate 60 against 30 for each other question: 360/7 and 180/7.
    counts = np.bincount(train.question[order], minlength=6)
    assert len(order) == len(train) == 180
    assert counts[3] in (51, 52) and all(counts[q] in (25, 26) for q in (0, 1, 2, 4, 5))
    batch = next(stream)
    for row in range(20):
        index = stream._rows[row][0]
        prefix = train.prefix_length(index)
        assert (batch["decoder_loss_weights"][row, :prefix] == 0).all()
        np.testing.assert_array_equal(
            batch["decoder_target_tokens"][row, :prefix],
            train.questions.prefixes[train.question[index]],
        )
        assert batch["decoder_loss_weights"][row, prefix : prefix + 2].tolist() == [1, 1]
    with pytest.raises(ValueError, match="TrainConfig.target_length is 4; raise it"):
        make_stream(train, 20, 64, 4, 0, 0)


@pytest.mark.slow  # three tiny runs: about 30 s on 2 cores
def test_multi_question_run_validates_per_question_and_resumes(tmp_path, monkeypatch):
    """Per-question validation ROC-AUC (their mean picks the best), questions.json
    beside the best checkpoint, and a run stopped after its step-4 checkpoint
    resumes to the parameters of an uninterrupted run, bit for bit."""
    from seahorse_metrics.scoring.scorer import MultiScorer
    from seahorse_metrics.training import checkpointing, trainer

    from fixtures import train_utils

    config, examples = _multi_question_run(tmp_path, "whole")
    result = trainer.train(config, examples)
    names = ["q1", "q2", "q3", "q4", "q5", "q6"]
    metrics = result.best_metrics
    assert metrics["roc_auc"] == pytest.approx(np.mean([metrics[f"roc_auc_{n}"] for n in names]))
    assert metrics["num_examples"] == 72  # eval_max_examples=64 of each question's 12
    best = MultiScorer.load(
        [result.best_checkpoint], max_input_length=64, bucket_lengths=(64,), batch_size=8
    )
    assert best.names == names

    stopped, _ = _multi_question_run(tmp_path, "stopped")
    original = checkpointing.RunCheckpoints.save

    def save_then_stop(self, step, state, record):
        original(self, step, state, record)
        if step == 4:
            self.wait()
            raise KeyboardInterrupt("stopped after step 4")

    monkeypatch.setattr(checkpointing.RunCheckpoints, "save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        trainer.train(stopped, examples)
    monkeypatch.setattr(checkpointing.RunCheckpoints, "save", original)
    trainer.train(stopped, examples)
    whole = train_utils.checkpoint_params(config.model_dir, 8)
    resumed = train_utils.checkpoint_params(stopped.model_dir, 8)
    for key, value in whole.items():
        np.testing.assert_array_equal(resumed[key], value, err_msg=key)


T5X_MODEL_GIN = """
from __gin__ import dynamic_registration
import seqio
from t5x import adafactor
from t5x import models
from t5x.examples.t5 import network

VOCABULARY = @seqio.SentencePieceVocabulary()
seqio.SentencePieceVocabulary.sentencepiece_model_file = "{vocab}"
OPTIMIZER = @adafactor.Adafactor()
adafactor.Adafactor.logical_factor_rules = @adafactor.standard_logical_factor_rules()
MODEL = @models.EncoderDecoderModel()
models.EncoderDecoderModel:
  module = @network.Transformer()
  input_vocabulary = %VOCABULARY
  output_vocabulary = %VOCABULARY
  optimizer_def = %OPTIMIZER
network.Transformer.config = @network.T5Config()
network.T5Config:
  vocab_size = 512
  dtype = 'float32'
  emb_dim = 32
  num_heads = 4
  num_encoder_layers = 2
  num_decoder_layers = 2
  head_dim = 16
  mlp_dim = 64
  mlp_activations = ('gelu', 'linear')
  dropout_rate = %DROPOUT_RATE
  logits_via_embedding = False
"""
T5X_SHORT_RUN_GIN = """
from __gin__ import dynamic_registration
import __main__ as train_script
from t5x import utils
train_script.train.infer_eval_dataset_cfg = None
utils.SaveCheckpointConfig.period = 3
EVAL_PERIOD = 3
TRAIN_STEPS = 3
BATCH_SIZE = 4
INITIAL_CHECKPOINT_PATH = None
SEAHORSE_INPUT_LENGTH = 128
"""


@pytest.mark.slow  # T5X's train.py in its own process: about 40 s
def test_t5x_train_runs_the_multi_question_mixture_with_prefix_weights(tmp_path):
    import re
    import subprocess
    import sys

    pytest.importorskip("t5x.adafactor", reason="T5X is not importable (see /work/shared/t5x)")
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare

    from fixtures import tiny_data

    prepared = str(tmp_path / "prepared")
    prepare(
        tiny_data.write_release(str(tmp_path / "release")),
        LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl"))),
        prepared,
    )
    model_gin, short_gin = tmp_path / "model.gin", tmp_path / "short.gin"
    model_gin.write_text(
        T5X_MODEL_GIN.format(vocab=tiny_data.train_tiny_sentencepiece(str(tmp_path / "spm")))
    )
    short_gin.write_text(T5X_SHORT_RUN_GIN)
    repo = paths.REPO
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONPATH=os.pathsep.join([repo] + [p for p in sys.path if p]),
    )
    model_dir = str(tmp_path / "model_dir")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "t5x.train",
            f"--gin_file={model_gin}",
            "--gin_file=gin/t5x/finetune_multi_question.gin",
            f"--gin_file={short_gin}",
            f"--gin.MODEL_DIR='{model_dir}'",
            f"--gin.SEAHORSE_DATA_DIR='{prepared}'",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert os.path.isdir(os.path.join(model_dir, "checkpoint_3"))
    fractions = dict(
        re.findall(
            r"non_padding_fraction/(loss_weights|decoder_target_tokens)="
            r"([0-9.]+)",
            result.stderr,
        )
    )
    # Only the label and EOS of each row weigh: 2 of 16 target positions.
    assert float(fractions["loss_weights"]) == pytest.approx(2 / 16)
    assert float(fractions["decoder_target_tokens"]) > 0.5
