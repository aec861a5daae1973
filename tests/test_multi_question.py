"""The multi-question metric: six questions, one encoder pass (issue 49).

The shared-encoder program (`first_step.question_log_probs`: every question's
decoder prefix packed side by side against one encoder output) must give
what scoring each question alone gives, with the encoder run again for it.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixtures.tiny_model import tiny_config, tiny_t5_v1_0_config
from seahorse_metrics.model import first_step
from seahorse_metrics.model.model import EncoderDecoderModel
from seahorse_metrics.model.questions import QuestionPrefixes

# Prefixes of different lengths, so segments and read positions differ.
QUESTIONS = QuestionPrefixes(names=("q1", "q2", "q3", "q4", "q5", "q6"),
                             prefixes=((7,), (8, 9), (10, 11, 12), (13,), (14, 15), (16, 17, 18, 19)))
LABEL_IDS = (5, 6)


def _tokens(config, rows=3, length=12, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(3, config.vocab_size, (rows, length)).astype(np.int32)
    tokens[1, 8:] = config.pad_id  # a padded row
    return jnp.asarray(tokens)


def _one_question_alone(model, params, tokens, prefix):
    """log P(LABEL_IDS) after `prefix`: a plain teacher-forced forward pass of
    one question (its own encoder pass), read at the prefix's last step."""
    rows = tokens.shape[0]
    decoder = np.asarray([[model.config.decoder_start_id, *prefix]] * rows, np.int32)
    logits = model.logits(params, {"encoder_input_tokens": tokens,
                                   "decoder_input_tokens": jnp.asarray(decoder)})
    log_probs = jax.nn.log_softmax(logits[:, len(prefix)].astype(jnp.float32), axis=-1)
    return np.asarray(log_probs[:, list(LABEL_IDS)])


@pytest.mark.parametrize("config_of", [tiny_config, tiny_t5_v1_0_config], ids=["mt5", "t5v1.0"])
def test_shared_encoder_scores_equal_each_question_alone(config_of):
    model = EncoderDecoderModel(config_of())
    params = model.init_params(jax.random.PRNGKey(1))
    tokens = _tokens(model.config)
    shared = np.asarray(jax.jit(
        lambda p, t: first_step.question_log_probs(model, LABEL_IDS, QUESTIONS, p, t))(
            params, tokens))
    assert shared.shape == (3, len(QUESTIONS), len(LABEL_IDS))
    for index, prefix in enumerate(QUESTIONS.prefixes):
        np.testing.assert_allclose(shared[:, index], _one_question_alone(model, params, tokens,
                                                                         prefix), atol=1e-5)
    # The questions really differ (a broken mask could make them all equal).
    assert np.abs(shared[:, 0] - shared[:, 5]).max() > 1e-4


def test_shared_encoder_runs_the_encoder_once_per_row():
    model = EncoderDecoderModel(tiny_config())
    params = model.init_params(jax.random.PRNGKey(1))
    program = jax.jit(lambda p, t: first_step.question_log_probs(model, LABEL_IDS, QUESTIONS, p, t))
    text = program.lower(params, _tokens(model.config)).as_text()
    # Encoder activations are [3 rows, 12 tokens, 32]; nothing per question
    # (18 = 3 rows x 6 questions) is ever as long as the input.
    assert "tensor<3x12x32xf32>" in text
    assert "tensor<18x12x" not in text


def test_question_prefixes_refuse_bad_input():
    with pytest.raises(ValueError, match="empty decoder prefix"):
        QuestionPrefixes(("q1",), ((),))
    with pytest.raises(ValueError, match="2 question names but 1 prefixes"):
        QuestionPrefixes(("q1", "q2"), ((3,),))
    with pytest.raises(ValueError, match="question 'q2': prefix token ids \\[999\\]"):
        QuestionPrefixes(("q1", "q2"), ((3,), (999,))).check_vocab(512)


# ------------------------------------------------------------------ scoring
PREMISES = ["the cat sat on the mat and looked at the dog for a long time.",
            "a short one.", "rain fell over the hills while the river rose slowly."]
HYPOTHESES = ["a cat sat.", "short.", "it rained."]


@pytest.fixture(scope="module")
def multi_question_dir(tmp_path_factory, tiny_hf_dir):
    """`tiny_hf_dir` with a questions.json beside it: a multi-question metric."""
    import shutil

    from seahorse_metrics.checkpoints.layout import find_vocabulary, write_question_prefixes
    from seahorse_metrics.data.vocab import SentencePieceTokenizer
    from seahorse_metrics.model.questions import seahorse_question_texts

    directory = str(tmp_path_factory.mktemp("multi_question") / "metric")
    shutil.copytree(tiny_hf_dir, directory)
    texts = seahorse_question_texts()
    tokenizer = SentencePieceTokenizer(find_vocabulary(directory))
    write_question_prefixes(directory, QuestionPrefixes.from_texts(texts, tokenizer),
                            list(texts.values()))
    return directory


def test_multi_scorer_reads_a_multi_question_checkpoint_as_six_columns(multi_question_dir):
    from seahorse_metrics.scoring.scorer import MultiScorer

    scorer = MultiScorer.load([multi_question_dir], bucket_lengths=(32, 64),
                              max_input_length=64, batch_size=4)
    assert scorer.names == ["q1", "q2", "q3", "q4", "q5", "q6"]
    # Named, its columns stay apart from a prepared split's labels q1 ... q6.
    assert MultiScorer.load({"mq": multi_question_dir, "other": multi_question_dir},
                            max_input_length=64).names[5:7] == ["mq_q6", "other_q1"]
    scores = scorer.score(PREMISES, HYPOTHESES)
    engine = scorer.engines[0]
    token_ids = (scorer.positive_id, scorer.negative_id)
    for row, ids in enumerate(scorer.encode_inputs(PREMISES, HYPOTHESES)):
        tokens = jnp.asarray([ids], jnp.int32)
        for index, (name, prefix) in enumerate(zip(engine.shared.questions.names,
                                                   engine.shared.questions.prefixes)):
            decoder = jnp.asarray([[engine.model.config.decoder_start_id, *prefix]], jnp.int32)
            logits = engine.model.logits(engine.params, {"encoder_input_tokens": tokens,
                                                         "decoder_input_tokens": decoder})
            expected = jax.nn.softmax(logits[0, len(prefix)].astype(jnp.float32))[token_ids[0]]
            np.testing.assert_allclose(scores[name][row], float(expected), atol=1e-5)
    signatures = scorer.signatures()
    assert signatures["q1"] != signatures["q2"] and "|q:q4" in signatures["q4"]


def test_multi_question_metric_runs_one_call_per_batch(multi_question_dir, monkeypatch):
    from seahorse_metrics.engines.jax_engine import JaxEngine
    from seahorse_metrics.scoring.scorer import MultiScorer

    scorer = MultiScorer.load([multi_question_dir], bucket_lengths=(32, 64),
                              max_input_length=64, batch_size=4)
    calls = []
    original = JaxEngine.__call__
    monkeypatch.setattr(JaxEngine, "__call__",
                        lambda self, *args: calls.append(1) or original(self, *args))
    scorer.score(PREMISES, HYPOTHESES)
    assert len(calls) == scorer.stats.batches == 1


def test_multi_question_metric_refuses_what_cannot_work(multi_question_dir):
    from seahorse_metrics.scoring.scorer import MultiScorer
    from seahorse_metrics.scoring.single import Scorer

    with pytest.raises(ValueError, match="multi-question metric .*MultiScorer.load"):
        Scorer.load(multi_question_dir)
    with pytest.raises(ValueError, match="packing is not supported with a multi-question"):
        MultiScorer.load({"m": multi_question_dir}, packing=True, max_input_length=64)
    with pytest.raises(ValueError, match="m: a multi-question metric is scored by the jax "
                                         "engine only"):
        MultiScorer.load({"m": multi_question_dir}, engine="ctranslate2", max_input_length=64)


# ----------------------------------------------------------------- training
def test_prefix_tokens_get_loss_weight_zero():
    """Through the seqio preprocessor and T5X-facing converter: weights 0 on
    the prefix, 1 on label and EOS, 0 on padding; the model's loss then is
    the label's and EOS's cross-entropy only."""
    tf = pytest.importorskip("tensorflow")
    from seahorse_metrics.tasks.questions import (PrefixWeightedEncDecFeatureConverter,
                                                  add_question_prefix)

    examples = [{"inputs": [20, 21, 22, 1], "targets": [5, 1]},
                {"inputs": [23, 24, 1], "targets": [6, 1]}]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(examples), output_signature={
            "inputs": tf.TensorSpec([None], tf.int32), "targets": tf.TensorSpec([None], tf.int32)})
    prefixed = add_question_prefix(dataset, prefix_ids=(10, 11, 12))
    converted = list(PrefixWeightedEncDecFeatureConverter(pack=False)(
        prefixed, {"inputs": 6, "targets": 7}).as_numpy_iterator())
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
    from fixtures import tiny_data
    from seahorse_metrics import tasks
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare
    from seahorse_metrics.tasks.questions import (MULTI_QUESTION_MIXTURE,
                                                  register_multi_question,
                                                  unregister_multi_question)

    prepared = str(tmp_path / "prepared")
    prepare(tiny_data.write_release(str(tmp_path / "release")),
            LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl"))), prepared)
    tasks.unregister()
    tasks.register(prepared, vocabulary=tiny_data.train_tiny_sentencepiece(str(tmp_path / "spm")),
                   input_length=1024, seed=5)
    try:
        with pytest.raises(ValueError, match=r"rates of unknown questions \['q9'\]"):
            register_multi_question(QUESTIONS, rates={"q9": 1.0})
        names = register_multi_question(QUESTIONS, rates={"q4": 3.0})
        assert names[-1] == MULTI_QUESTION_MIXTURE and names[3] == "seahorse_mq_q4"
        lengths = {"inputs": 1024, "targets": 8}
        plain = next(seqio.get_mixture_or_task("seahorse_q4").get_dataset(
            lengths, "validation", shuffle=False).as_numpy_iterator())
        prefixed = next(seqio.get_mixture_or_task("seahorse_mq_q4").get_dataset(
            lengths, "validation", shuffle=False).as_numpy_iterator())
        np.testing.assert_array_equal(prefixed["inputs"], plain["inputs"])
        np.testing.assert_array_equal(prefixed["targets"], [13, *plain["targets"]])
        np.testing.assert_array_equal(prefixed["targets_loss_weights"],
                                      [0] + [1] * len(plain["targets"]))
        mixture = seqio.get_mixture_or_task(MULTI_QUESTION_MIXTURE)
        assert mixture.get_rate(seqio.get_mixture_or_task("seahorse_mq_q4")) == 3.0
        q1_train = len(tasks.examples_for_task("seahorse_q1", "train"))
        assert mixture.get_rate(seqio.get_mixture_or_task("seahorse_mq_q1")) == float(q1_train)
    finally:
        if MULTI_QUESTION_MIXTURE in seqio.MixtureRegistry.names():
            unregister_multi_question(QUESTIONS)
        tasks.unregister()


def test_score_command_writes_a_column_per_question(tmp_path, multi_question_dir):
    import json

    from seahorse_metrics.cli import main as cli_main
    from seahorse_metrics.scoring.scorer import MultiScorer

    source = tmp_path / "pairs.jsonl"
    source.write_text("".join(json.dumps({"article": p, "summary": h}) + "\n"
                              for p, h in zip(PREMISES, HYPOTHESES)))
    output = str(tmp_path / "scored.jsonl")
    assert cli_main(["score", "--checkpoint", multi_question_dir, "--input", str(source),
                     "--output", output, "--max_input_length", "64", "--buckets", "32,64",
                     "--batch_size", "4", "--threshold", "0.5"]) == 0
    rows = [json.loads(line) for line in open(output)]
    expected = MultiScorer.load([multi_question_dir], bucket_lengths=(32, 64),
                                max_input_length=64, batch_size=4).score(PREMISES, HYPOTHESES)
    for name in ("q1", "q2", "q3", "q4", "q5", "q6"):
        np.testing.assert_allclose([r[name] for r in rows], expected[name], atol=1e-6)
        # A threshold per question: each column gets its decision.
        assert [r[f"{name}_decision"] for r in rows] == [
            "yes" if score >= 0.5 else "no" for score in expected[name]]

    # The Beam runner (in this process) writes the same columns.
    from seahorse_metrics.scoring import beam as beam_scoring

    beam_output = str(tmp_path / "beam.jsonl")
    beam_scoring.score_files(
        [str(source)], beam_output, {"score": multi_question_dir},
        scorer_options={"max_input_length": 64, "bucket_lengths": (32, 64), "batch_size": 4},
        pipeline_args=["--runner=FnApiRunner", "--direct_running_mode=in_memory"], merge=True,
        show_progress=False)
    beam_rows = [json.loads(line) for line in open(beam_output)]
    for name in ("q1", "q6"):
        np.testing.assert_allclose([r[name] for r in beam_rows], expected[name], atol=1e-6)


def test_multi_question_metric_scores_in_int8(multi_question_dir, monkeypatch, tmp_path):
    from seahorse_metrics.scoring.scorer import MultiScorer

    shape = dict(bucket_lengths=(32, 64), max_input_length=64, batch_size=4)
    float32 = MultiScorer.load([multi_question_dir], **shape).score(PREMISES, HYPOTHESES)
    # The int8 self-check (off in the suite) runs once for the checkpoint.
    monkeypatch.setenv("SEAHORSE_METRICS_INT8_CHECK", "on")
    monkeypatch.setenv("SEAHORSE_METRICS_CACHE", str(tmp_path / "cache"))
    int8 = MultiScorer.load({"mq": multi_question_dir}, quantize="int8", **shape)
    assert int8.engines[0].quantization().startswith("int8")
    assert list(int8.metadata()["int8_check"]) == ["mq"]
    scores = int8.score(PREMISES, HYPOTHESES)
    for name in float32:
        np.testing.assert_allclose(scores[f"mq_{name}"], float32[name], atol=0.02)


# ------------------------------------------------------------------- export
def test_exports_carry_the_questions_and_transformers_agrees(tmp_path, multi_question_dir):
    """HF and T5X exports keep questions.json beside the weights, score the
    same q1..q6, and transformers' MT5 gives each question's P("1") after its
    prefix as our shared-encoder program does."""
    import torch
    import transformers

    from seahorse_metrics.checkpoints.export import export_checkpoint
    from seahorse_metrics.checkpoints.layout import QUESTIONS_FILE, question_prefixes
    from seahorse_metrics.scoring.scorer import MultiScorer

    shape = dict(bucket_lengths=(32, 64), max_input_length=64, batch_size=4)
    source = MultiScorer.load([multi_question_dir], **shape)
    expected = source.score(PREMISES, HYPOTHESES)
    questions = question_prefixes(multi_question_dir)
    for to in ("hf", "t5x"):
        output = str(tmp_path / f"export-{to}")
        export_checkpoint(multi_question_dir, to, output)
        assert QUESTIONS_FILE in os.listdir(output)
        assert question_prefixes(output) == questions
        scores = MultiScorer.load([output], **shape).score(PREMISES, HYPOTHESES)
        for name in questions.names:
            np.testing.assert_allclose(scores[name], expected[name], atol=1e-6)

    hf_model = transformers.MT5ForConditionalGeneration.from_pretrained(
        str(tmp_path / "export-hf")).eval()
    for row, ids in enumerate(source.encode_inputs(PREMISES, HYPOTHESES)):
        input_ids = torch.tensor([ids], dtype=torch.long)
        for name, prefix in zip(questions.names, questions.prefixes):
            decoder = torch.tensor([[hf_model.config.decoder_start_token_id, *prefix]])
            with torch.no_grad():
                logits = hf_model(input_ids=input_ids, decoder_input_ids=decoder).logits
            p_yes = torch.softmax(logits[0, len(prefix)].float(), -1)[source.positive_id]
            np.testing.assert_allclose(expected[name][row], float(p_yes), atol=1e-5)


# ------------------------------------------------------------ trainer runs
def _multi_question_run(tmp_path, name, **overrides):
    """A tiny multi-question run's config and examples: six synthetic
    questions (label in the first input token), prefixes of the sample
    vocabulary, q4 sampled at twice its share."""
    from fixtures import train_utils
    from seahorse_metrics.data.vocab import SentencePieceTokenizer, target_token_ids
    from seahorse_metrics.model.questions import seahorse_question_texts
    from seahorse_metrics.training import trainer
    from seahorse_metrics.training.multi_question import MULTI_QUESTION_TASK, QuestionExampleSet

    values = {"TrainConfig.train_steps": 8, "TrainConfig.eval_every": 4,
              "TrainConfig.checkpoint_every": 4, "TrainConfig.target_length": 16,
              "TrainConfig.question_rates": {"q4": 60.0}, "TASK": MULTI_QUESTION_TASK}
    values.update(overrides)
    config = train_utils.demo_config(train_utils.sample_bindings(
        str(tmp_path / name), str(tmp_path / "unused"), str(tmp_path / "cache"), **values))
    tokenizer = SentencePieceTokenizer(trainer.resolve_vocabulary(config))
    yes, no = target_token_ids(tokenizer)
    questions = QuestionPrefixes.from_texts(seahorse_question_texts(), tokenizer)
    sets = {split: [train_utils.synthetic_examples(count, seed=seed + q, vocab_size=200,
                                                   yes_id=yes, no_id=no)
                    for q in range(6)] for split, count, seed in (("train", 30, 0),
                                                                 ("validation", 12, 50))}
    examples = {split: QuestionExampleSet.build(subsets, questions, config.question_rates)
                for split, subsets in sets.items()}
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
        np.testing.assert_array_equal(batch["decoder_target_tokens"][row, :prefix],
                                      train.questions.prefixes[train.question[index]])
        assert batch["decoder_loss_weights"][row, prefix:prefix + 2].tolist() == [1, 1]
    with pytest.raises(ValueError, match="TrainConfig.target_length is 4; raise it"):
        make_stream(train, 20, 64, 4, 0, 0)


@pytest.mark.slow  # three tiny runs: about 30 s on 2 cores
def test_multi_question_run_validates_per_question_and_resumes(tmp_path, monkeypatch):
    """Per-question validation ROC-AUC (their mean picks the best), questions.json
    beside the best checkpoint, and a run stopped after its step-4 checkpoint
    resumes to the parameters of an uninterrupted run, bit for bit."""
    from fixtures import train_utils
    from seahorse_metrics.scoring.scorer import MultiScorer
    from seahorse_metrics.training import checkpointing, trainer

    config, examples = _multi_question_run(tmp_path, "whole")
    result = trainer.train(config, examples)
    names = ["q1", "q2", "q3", "q4", "q5", "q6"]
    metrics = result.best_metrics
    assert metrics["roc_auc"] == pytest.approx(np.mean([metrics[f"roc_auc_{n}"] for n in names]))
    assert metrics["num_examples"] == 72  # eval_max_examples=64 of each question's 12
    best = MultiScorer.load([result.best_checkpoint], max_input_length=64,
                            bucket_lengths=(64,), batch_size=8)
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


def test_evaluate_reads_a_multi_question_checkpoint_as_one_metric_per_question(
        multi_question_dir, monkeypatch):
    from fixtures import eval_data
    from seahorse_metrics.evaluation import metrics as metrics_lib
    from seahorse_metrics.evaluation import run as run_lib
    from seahorse_metrics.evaluation.benchmarks import Benchmark
    from seahorse_metrics.scoring.scorer import MultiScorer

    bench = Benchmark("true/frank", "true", "frank", "test", tuple(eval_data.rated_pairs(8, 0)))
    settings = ",max_input_length=64"
    q1, q4 = (metrics_lib.build_metric(metrics_lib.parse_metric_spec(
        f"{name}=checkpoint:{multi_question_dir}{settings}"), batch_size=4)
        for name in ("q1", "q4"))
    calls = []
    original = MultiScorer.score
    monkeypatch.setattr(MultiScorer, "score",
                        lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    report = run_lib.evaluate([bench], [q1, q4], run_lib.EvaluationConfig(n_resamples=20))
    assert len(calls) == 1 and q1._scorer is q4._scorer  # one pass for both questions
    expected = q1._scorer.scorer.score([i.premise for i in bench.items],
                                       [i.hypothesis for i in bench.items])
    np.testing.assert_allclose(q4.score_benchmark(bench), expected["q4"], atol=1e-6)
    assert report.result("q4", "true/frank").n == 8
    assert "|q:q4" in q4.provenance()["signature"]
    other = metrics_lib.build_metric(metrics_lib.parse_metric_spec(
        f"mq=checkpoint:{multi_question_dir}{settings}"))
    with pytest.raises(ValueError, match="metric 'mq': a multi-question checkpoint is evaluated "
                                         "as metrics named after its questions"):
        other.score_benchmark(bench)


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
    from fixtures import tiny_data
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare

    prepared = str(tmp_path / "prepared")
    prepare(tiny_data.write_release(str(tmp_path / "release")),
            LocalArticleSource(tiny_data.write_articles(str(tmp_path / "a.jsonl"))), prepared)
    model_gin, short_gin = tmp_path / "model.gin", tmp_path / "short.gin"
    model_gin.write_text(T5X_MODEL_GIN.format(
        vocab=tiny_data.train_tiny_sentencepiece(str(tmp_path / "spm"))))
    short_gin.write_text(T5X_SHORT_RUN_GIN)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([repo] + [p for p in sys.path if p]))
    model_dir = str(tmp_path / "model_dir")
    result = subprocess.run(
        [sys.executable, "-m", "t5x.train", f"--gin_file={model_gin}",
         "--gin_file=gin/t5x/finetune_multi_question.gin", f"--gin_file={short_gin}",
         f"--gin.MODEL_DIR='{model_dir}'", f"--gin.SEAHORSE_DATA_DIR='{prepared}'"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert os.path.isdir(os.path.join(model_dir, "checkpoint_3"))
    fractions = dict(re.findall(r"non_padding_fraction/(loss_weights|decoder_target_tokens)="
                                r"([0-9.]+)", result.stderr))
    # Only the label and EOS of each row weigh: 2 of 16 target positions.
    assert float(fractions["loss_weights"]) == pytest.approx(2 / 16)
    assert float(fractions["decoder_target_tokens"]) > 0.5


def test_multi_question_modes_per_sentence_chunks_and_query_questions(multi_question_dir):
    from seahorse_metrics.scoring.scorer import MultiScorer

    shape = dict(bucket_lengths=(32, 64), max_input_length=64, batch_size=4)
    names = ["q1", "q2", "q3", "q4", "q5", "q6"]
    plain = MultiScorer.load([multi_question_dir], **shape)
    # Per sentence: each sentence scores as the pair (premise, sentence), per question.
    per_sentence = MultiScorer.load([multi_question_dir], per_sentence=True, **shape)
    detailed = per_sentence.score_detailed(PREMISES[:1], ["a cat sat. it looked at a dog."])
    sentences = detailed.sentences[0]
    alone = plain.score(PREMISES[:1] * len(sentences), sentences)
    for name in names:
        np.testing.assert_allclose(detailed.sentence_scores[name][0], alone[name], atol=1e-6)
        assert detailed.scores[name][0] == pytest.approx(min(alone[name]))
    # Chunked premises: inputs that fit score as without chunks; long ones score.
    chunked = MultiScorer.load([multi_question_dir], long_inputs="chunk", **shape)
    short = chunked.score(PREMISES, HYPOTHESES)
    expected = plain.score(PREMISES, HYPOTHESES)
    long_premise = " ".join(PREMISES * 6)
    long_scores = chunked.score([long_premise], ["a cat sat."])
    assert chunked.stats.chunked_examples == 1
    for name in names:
        np.testing.assert_allclose(short[name], expected[name], atol=1e-6)
        assert 0.0 < long_scores[name][0] < 1.0
    # Query-focused summaries: the question goes into the encoder input, for every column.
    asked = plain.score(PREMISES, HYPOTHESES, questions=["what did the cat do?"] * 3)
    assert all(np.abs(asked[name] - expected[name]).max() > 0 for name in names)


def test_serve_scores_each_question_and_a_chosen_few(multi_question_dir, tmp_path):
    from fixtures.serve_process import SHAPE_ARGS, ServerProcess, call
    from seahorse_metrics.scoring.scorer import MultiScorer

    server = ServerProcess(["--checkpoint", f"mq={multi_question_dir}", *SHAPE_ARGS],
                           str(tmp_path / "serve.log"))
    try:
        server.wait_ready()
        pairs = [{"article": p, "summary": h, "id": i}
                 for i, (p, h) in enumerate(zip(PREMISES, HYPOTHESES))]
        status, every, _ = call(server.url + "/v1/score", {"pairs": pairs})
        chosen_status, chosen, _ = call(server.url + "/v1/score",
                                        {"pairs": pairs, "metrics": ["mq_q2", "mq_q5"]})
    finally:
        server.kill()
    assert status == 200 and chosen_status == 200, (every, chosen)
    expected = MultiScorer.load({"mq": multi_question_dir}, max_input_length=128,
                                bucket_lengths=(128,), batch_size=8).score(PREMISES, HYPOTHESES)
    rows, few = every["results"], chosen["results"]
    for name in expected:
        np.testing.assert_allclose([row[name] for row in rows], expected[name], rtol=1e-5)
    assert {key for key in few[0] if key.startswith("mq_")} == {"mq_q2", "mq_q5"}
    np.testing.assert_allclose([row["mq_q5"] for row in few], expected["mq_q5"], rtol=1e-5)
