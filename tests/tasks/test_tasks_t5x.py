"""`seahorse_metrics.tasks.t5x`: the tasks T5X's train.py and eval.py run, and gin/t5x/.

T5X is not installable here, so its evaluation is reproduced with what it
calls: `seqio.Evaluator` with a score function over the cached evaluation
dataset, the score being `EncoderDecoderModel.score_batch` (T5X's score mode:
the summed log-likelihood of the target). Its ROC-AUC must equal
`seahorse-metrics evaluate`'s on the same checkpoint and split.
"""

import importlib
import os
import sys

import numpy as np
import pytest
import seqio

from seahorse_metrics import tasks
from seahorse_metrics.checkpoints import load_checkpoint
from seahorse_metrics.data.vocab import SentencePieceTokenizer, target_token_ids
from seahorse_metrics.model import EncoderDecoderModel

from fixtures import eval_data, paths

REPO_ROOT = paths.REPO
MODULE = "seahorse_metrics.tasks.t5x"
SETTINGS = (
    "SEAHORSE_DATA_DIR",
    "SEAHORSE_MFACE",
    "SEAHORSE_TRUE_DIR",
    "SEAHORSE_VOCABULARY",
    "SEAHORSE_INPUT_LENGTH",
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("t5x_tasks")
    prepared = str(root / "prepared")
    for split, n, seed in (("train", 30, 1), ("validation", 20, 2), ("test", 24, 3)):
        eval_data.write_prepared_split(prepared, n=n, seed=seed, split=split)
    return {
        "prepared": prepared,
        "true": eval_data.write_true_dir(str(root / "true"), names=("mnbm",), n=24),
        "mface": eval_data.write_mface_sheet(str(root / "mface.csv"), n=24),
    }


@pytest.fixture
def clean(monkeypatch):
    """No registration, no gin bindings, no SEAHORSE_* variables; the module unimported."""
    import gin

    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    tasks.unregister()
    gin.clear_config()
    sys.modules.pop(MODULE, None)
    yield monkeypatch
    tasks.unregister()
    gin.clear_config()
    sys.modules.pop(MODULE, None)


def import_t5x_module():
    return importlib.import_module(MODULE)


def seqio_score_fn(model, params, rows=64, length_multiple=128):
    """T5X's score_fn for seqio.Evaluator: (index, log-likelihood of the targets) per example.

    The encoder length is padded to a multiple of `length_multiple` (padding
    is masked), so tiny tasks of as many rows share one compilation.
    """

    def pad(array, shape):
        padded = np.zeros(shape, array.dtype)
        padded[tuple(slice(0, n) for n in array.shape)] = array
        return padded

    def score_fn(dataset):
        results = []
        for indices, features in dataset.batch(rows).as_numpy_iterator():
            length = (
                -(-features["encoder_input_tokens"].shape[1] // length_multiple) * length_multiple
            )
            batch = dict(
                features,
                encoder_input_tokens=pad(features["encoder_input_tokens"], (len(indices), length)),
            )
            scores = np.asarray(model.score_batch(params, batch))
            results.extend(zip(indices.tolist(), scores.tolist()))
        return results

    return score_fn


def evaluator_metrics(task_name, split, model, params):
    evaluator = seqio.Evaluator(
        task_name,
        seqio.EncDecFeatureConverter(pack=False),
        eval_split=split,
        use_memory_cache=False,
        async_compute_metrics=False,
    )
    metrics, outputs = evaluator.evaluate(
        compute_metrics=True, score_fn=seqio_score_fn(model, params)
    )
    return metrics.result(), outputs


@pytest.mark.slow
def test_t5x_evaluation_equals_seahorse_metrics_evaluate(clean, data, tiny_hf_dir, tmp_path):
    from seahorse_metrics.evaluation.run import EvaluationConfig, run_evaluation

    vocab = os.path.join(tiny_hf_dir, "spiece.model")
    clean.setenv("SEAHORSE_DATA_DIR", data["prepared"])
    clean.setenv("SEAHORSE_VOCABULARY", vocab)
    clean.setenv("SEAHORSE_TRUE_DIR", data["true"])
    clean.setenv("SEAHORSE_MFACE", data["mface"])
    module = import_t5x_module()
    assert module.TASK_NAMES == [f"seahorse_q{q}" for q in range(1, 7)] + [
        "mface_quality",
        "mface_attribution",
        "mface_informativeness",
        "true_mnbm",
        "seahorse_all",
    ]

    config, params = load_checkpoint(tiny_hf_dir)
    model = EncoderDecoderModel(config)
    report = run_evaluation(
        [f"seahorse:{data['prepared']}:q4", f"mface:{data['mface']}:q4"],
        [f"q4=checkpoint:{tiny_hf_dir}"],
        str(tmp_path / "report"),
        EvaluationConfig(n_resamples=0),
    )
    # SEAHORSE (Pearson against the 0/1 label) and mFACE (against the rater average).
    for task_name, benchmark in (
        ("seahorse_q4", "seahorse/q4"),
        ("mface_attribution", "mface-all/q4"),
    ):
        metrics, outputs = evaluator_metrics(task_name, "test", model, params)
        expected = report.result("q4", benchmark).statistics
        assert metrics[task_name]["roc_auc"] == pytest.approx(expected["roc_auc"].value, abs=1e-12)
        assert metrics[task_name]["pearson"] == pytest.approx(expected["pearson"].value, abs=1e-5)
        # The scores are log P("1"): exp(score) is the Scorer's P("1").
        probabilities = np.exp(np.asarray(outputs[task_name][seqio.metrics.ModelOutputType.SCORE]))
        np.testing.assert_allclose(probabilities, report.scores[("q4", benchmark)], rtol=1e-4)


def test_evaluation_targets_are_one_and_training_targets_the_labels(clean, data, tiny_hf_dir):
    vocab = os.path.join(tiny_hf_dir, "spiece.model")
    clean.setenv("SEAHORSE_DATA_DIR", data["prepared"])
    clean.setenv("SEAHORSE_VOCABULARY", vocab)
    import_t5x_module()
    tokenizer = SentencePieceTokenizer(vocab)
    one, zero = target_token_ids(tokenizer)
    task = seqio.get_mixture_or_task("seahorse_q2")
    for split in ("validation", "test"):
        examples = list(task.get_dataset(None, split=split, shuffle=False).as_numpy_iterator())
        assert examples and all(list(e["targets"]) == [one] for e in examples)
        assert {int(e["label"]) for e in examples} == {0, 1}
    train = list(
        task.get_dataset(
            {"inputs": 2048, "targets": 4}, split="train", shuffle=False
        ).as_numpy_iterator()
    )
    assert all(list(e["targets"]) == [one if e["label"] else zero, tokenizer.eos_id] for e in train)
    # T5X packs training batches: the metadata features must not get in the way.
    packed = seqio.EncDecFeatureConverter(pack=True)(
        task.get_dataset({"inputs": 2048, "targets": 4}, split="train", shuffle=False),
        {"inputs": 2048, "targets": 4},
    )
    assert "encoder_segment_ids" in next(packed.as_numpy_iterator())
    assert [m.__name__ for m in task.metric_fns] == ["roc_auc", "pearson"]


def test_settings_from_gin_macros_and_t5x_vocabulary(clean, data, tiny_hf_dir):
    import gin

    vocab = os.path.join(tiny_hf_dir, "spiece.model")
    clean.setenv("SEAHORSE_DATA_DIR", "/the/environment/loses/to/the/macro")
    # What T5X's model gin files bind, and ours.
    gin.parse_config(
        [
            "from __gin__ import dynamic_registration",
            "import seqio",
            "VOCABULARY = @seqio.SentencePieceVocabulary()",
            f"seqio.SentencePieceVocabulary.sentencepiece_model_file = '{vocab}'",
            f"SEAHORSE_DATA_DIR = '{data['prepared']}'",
            "SEAHORSE_INPUT_LENGTH = 512",
        ]
    )
    model_vocabulary = gin.query_parameter("VOCABULARY/macro.value").scoped_configurable_fn()
    import_t5x_module()
    registered = tasks.registered_config()
    assert registered.data_dir == os.path.abspath(data["prepared"])
    assert registered.input_length == 512 and registered.eval_targets == "positive"
    # T5X's verify_matching_vocabs: the task vocabulary equals the model's.
    task = seqio.get_mixture_or_task("seahorse_q4")
    assert task.output_features["inputs"].vocabulary == model_vocabulary
    assert task.output_features["targets"].vocabulary == model_vocabulary


def test_missing_data_dir_names_the_macro_and_the_variable(clean, data):
    with pytest.raises(
        ValueError,
        match=r"gin macro SEAHORSE_DATA_DIR.*environment variable "
        r"SEAHORSE_DATA_DIR",
    ):
        import_t5x_module()
    assert MODULE not in sys.modules
    clean.setenv("SEAHORSE_DATA_DIR", data["prepared"])
    clean.setenv("SEAHORSE_INPUT_LENGTH", "2k")
    with pytest.raises(ValueError, match="SEAHORSE_INPUT_LENGTH='2k' is not a whole number"):
        import_t5x_module()
    with pytest.raises(ValueError, match="unknown eval_targets 'all'"):
        tasks.register(data["prepared"], eval_targets="all")


def test_score_metrics_handle_undefined_statistics():
    from seahorse_metrics.tasks import metrics

    one_class = [{"label": 1, "rating": 1.0}] * 3
    assert np.isnan(metrics.roc_auc(one_class, [-0.1, -0.2, -0.3])["roc_auc"])
    assert np.isnan(metrics.pearson(one_class, [-0.1, -0.2, -0.3])["pearson"])
    targets = [
        {"label": 1, "rating": 0.9},
        {"label": 0, "rating": 0.2},
        {"label": 1, "rating": 0.6},
    ]
    assert metrics.roc_auc(targets, np.log([0.8, 0.1, 0.4]))["roc_auc"] == 1.0
    assert metrics.judgment("1", example={"label": 0, "rating": np.nan}, is_target=True) == {
        "label": 0,
        "rating": 0.0,
    }
    assert metrics.judgment("anything", is_target=False) == "anything"


# ------------------------------------------------------------------ gin/t5x
# What gin/t5x/ may name from T5X, each read in T5X's sources
# (t5x/configs/runs/{finetune,eval}.gin, t5x/examples/t5/mt5/*.gin, train.py).
T5X_INCLUDES = {"t5x/configs/runs/finetune.gin", "t5x/configs/runs/eval.gin"}
T5X_IMPORTS = {"__gin__.dynamic_registration", "__main__", "t5x.utils", "t5x.examples.t5.network"}
T5X_MACROS = {
    "MIXTURE_OR_TASK_MODULE",
    "MIXTURE_OR_TASK_NAME",
    "MIXTURE_OR_TASK_SPLIT",
    "USE_CACHED_TASKS",
    "TASK_FEATURE_LENGTHS",
    "TRAIN_STEPS",
    "BATCH_SIZE",
    "DROPOUT_RATE",
    "EVAL_PERIOD",
}
T5X_BINDINGS = {
    ("network.T5Config", "dropout_rate"),
    ("utils.SaveCheckpointConfig", "period"),
    ("train_script.train", "train_eval_dataset_cfg"),
    ("train/utils.DatasetConfig", "pack"),
}
# The task module's own macros (see seahorse_metrics/tasks/t5x.py).
MODULE_MACROS = {"SEAHORSE_DATA_DIR", "SEAHORSE_INPUT_LENGTH"}


def gin_statements(relative_path):
    """The statements of a gin/t5x file with our own includes expanded, in order."""
    from gin import config_parser

    class Delegate(config_parser.ParserDelegate):
        def configurable_reference(self, name, evaluate):
            return ("@", name, evaluate)

        def macro(self, name):
            return ("%", name)

    statements = []
    with open(os.path.join(REPO_ROOT, relative_path), encoding="utf-8") as handle:
        for statement in config_parser.ConfigParser(handle, Delegate()):
            if isinstance(
                statement, config_parser.IncludeStatement
            ) and statement.filename.startswith("gin/"):
                statements += gin_statements(statement.filename)
            else:
                statements.append(statement)
    return statements


@pytest.mark.parametrize(
    "kind, question", [(k, q) for k in ("finetune", "eval") for q in range(1, 7)]
)
def test_gin_t5x_files_name_only_what_t5x_and_the_module_define(kind, question):
    from gin import config_parser

    statements = gin_statements(f"gin/t5x/{kind}_q{question}.gin")
    includes = {s.filename for s in statements if isinstance(s, config_parser.IncludeStatement)}
    assert includes == {f"t5x/configs/runs/{kind}.gin"} and includes <= T5X_INCLUDES
    assert {
        s.module for s in statements if isinstance(s, config_parser.ImportStatement)
    } <= T5X_IMPORTS
    macros, bindings = {}, {}
    for s in statements:
        if isinstance(s, config_parser.BindingStatement):
            if s.arg_name:
                bindings[(s.scope + "/" if s.scope else "") + s.selector, s.arg_name] = s.value
            else:
                macros[s.selector] = s.value  # later bindings win, as in gin
    assert set(macros) <= T5X_MACROS | MODULE_MACROS and set(bindings) <= T5X_BINDINGS
    assert macros["MIXTURE_OR_TASK_MODULE"] == MODULE
    assert macros["MIXTURE_OR_TASK_NAME"] == f"seahorse_q{question}"
    assert macros["SEAHORSE_DATA_DIR"] is None  # the environment variable then
    if kind == "finetune":
        # One macro sets the registration's input length and T5X's feature length.
        assert macros["SEAHORSE_INPUT_LENGTH"] == 2048
        assert macros["TASK_FEATURE_LENGTHS"]["inputs"] == ("%", "SEAHORSE_INPUT_LENGTH")
        assert macros["TRAIN_STEPS"] == 1_005_000 and macros["DROPOUT_RATE"] == 0.1
        assert (
            macros["BATCH_SIZE"] == 128 and bindings["train/utils.DatasetConfig", "pack"] is False
        )
        assert set(bindings) == T5X_BINDINGS
    else:
        assert macros["MIXTURE_OR_TASK_SPLIT"] == "test"


# ------------------------------------------------- the input length with T5X (issue 48 point 21)
def _feature_lengths(lengths=None):
    """Stands in for T5X's `utils.DatasetConfig`, which gets `%TASK_FEATURE_LENGTHS`."""
    return lengths


def _finetune_gin_lengths():
    """The lines of gin/t5x/finetune.gin that set the input length, as T5X parses them."""
    with open(os.path.join(REPO_ROOT, "gin/t5x/finetune.gin"), encoding="utf-8") as handle:
        lines = [
            line
            for line in handle
            if line.startswith(("SEAHORSE_INPUT_LENGTH", "TASK_FEATURE_LENGTHS"))
        ]
    assert len(lines) == 2, lines
    return lines


def _t5x_run(flags):
    """What T5X's train.py does with gin/t5x/finetune.gin and `--gin.` flags: parse the
    file, then the flags, import MIXTURE_OR_TASK_MODULE, and ask the task for its dataset
    at TASK_FEATURE_LENGTHS."""
    import gin

    gin.clear_config()
    tasks.unregister()  # each T5X run is a new process
    sys.modules.pop(MODULE, None)
    gin.parse_config(
        _finetune_gin_lengths()
        + flags
        + ["seahorse_test_feature_lengths.lengths = %TASK_FEATURE_LENGTHS"]
    )
    import_t5x_module()
    lengths = gin.get_configurable("seahorse_test_feature_lengths")()
    return seqio.get_mixture_or_task("seahorse_q4").get_dataset(
        lengths, split="train", shuffle=False
    )


def test_the_input_length_message_names_the_gin_flag_that_works(clean, data, tiny_hf_dir, caplog):
    import gin

    if "seahorse_test_feature_lengths" not in gin.config._REGISTRY:  # pylint: disable=protected-access
        gin.external_configurable(_feature_lengths, "seahorse_test_feature_lengths")
    clean.setenv("SEAHORSE_DATA_DIR", data["prepared"])
    clean.setenv("SEAHORSE_VOCABULARY", os.path.join(tiny_hf_dir, "spiece.model"))
    shorter = ["TASK_FEATURE_LENGTHS = {'inputs': 512, 'targets': 4}"]
    with pytest.raises(ValueError) as refused:
        _t5x_run(shorter)
    message = str(refused.value)
    assert "pass --gin.SEAHORSE_INPUT_LENGTH=512" in message
    assert "environment variable" not in message
    # The environment variable loses to the gin file's own macro: said, not silently ignored.
    clean.setenv("SEAHORSE_INPUT_LENGTH", "512")
    with caplog.at_level("WARNING"), pytest.raises(ValueError, match="SEAHORSE_INPUT_LENGTH=512"):
        _t5x_run(shorter)
    assert (
        "the environment's SEAHORSE_INPUT_LENGTH=512 is not used: the gin macro "
        "SEAHORSE_INPUT_LENGTH is bound to 2048"
    ) in caplog.text
    clean.delenv("SEAHORSE_INPUT_LENGTH")
    # Following the message: the flag sets both the tasks' and T5X's length.
    dataset = _t5x_run(["SEAHORSE_INPUT_LENGTH = 512"])
    assert tasks.registered_config().input_length == 512
    assert max(len(row["inputs"]) for row in dataset.as_numpy_iterator()) <= 512
