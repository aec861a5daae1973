"""Tests of the seqio tasks over prepared SEAHORSE data, mFACE, TRUE and ratings files."""

import os

import numpy as np
import pytest
import seqio

from seahorse_metrics import tasks
from seahorse_metrics.data import seahorse
from seahorse_metrics.data.articles import LocalArticleSource
from seahorse_metrics.data.inputs import encode_pair, format_input
from seahorse_metrics.data.prepare import prepare
from seahorse_metrics.data.vocab import SentencePieceTokenizer

from fixtures import tiny_data, train_utils

LONG = 1024  # Longer than any tiny input: nothing is truncated.
LENGTHS = {"inputs": LONG, "targets": 2}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    release = tiny_data.write_release(str(root / "release"))
    prepared = str(root / "prepared")
    prepare(release, LocalArticleSource(tiny_data.write_articles(str(root / "a.jsonl"))), prepared)
    true_dir = root / "true"
    true_dir.mkdir()
    tiny_data.write_true_csv(str(true_dir / "frank_valid_download.csv"))
    tiny_data.write_true_csv(str(true_dir / "qags_xsum_download.csv"))
    return {
        "prepared": prepared,
        "vocab": tiny_data.train_tiny_sentencepiece(str(root / "spm")),
        "mface": tiny_data.write_mface(str(root / "mface.csv")),
        "true": str(true_dir),
        "ratings": tiny_data.write_jsonl(str(root / "squality.jsonl"), tiny_data.RATINGS_ROWS),
    }


@pytest.fixture(autouse=True)
def _empty_registry():
    """Every test starts from an empty registry, whatever ran before it."""
    tasks.unregister()
    yield


@pytest.fixture
def registered(data):
    names = tasks.register(data["prepared"], vocabulary=data["vocab"], input_length=LONG, seed=5)
    yield names
    tasks.unregister()


def _decode(task, ids):
    return task.output_features["inputs"].vocabulary.decode([int(i) for i in ids])


def test_seahorse_q4_examples_match_the_source_rows(registered, data):
    assert registered == [f"seahorse_q{q}" for q in range(1, 7)] + ["seahorse_all"]
    task = seqio.get_mixture_or_task("seahorse_q4")
    for split in seahorse.SPLITS:
        examples = list(task.get_dataset(LENGTHS, split=split, shuffle=False).as_numpy_iterator())
        assert len(examples) == tiny_data.yes_no_counts(4, split)
        records = [
            r
            for r in seahorse.iter_prepared(os.path.join(data["prepared"], f"{split}.jsonl"))
            if r["q4"] is not None
        ]
        for example, record in zip(examples, records):
            assert _decode(task, example["inputs"]) == format_input(
                record["article"], record["summary"]
            )
            assert example["inputs"][-1] == 1  # EOS
            assert _decode(task, example["targets"]) == ("1" if record["q4"] else "0")
            assert (
                example["id"].decode() == f"{record['gem_id']}|{record['system']}|{record['line']}"
            )
            assert example["lang"].decode() == record["lang"]
            assert example["source"].decode() == record["source"]
            assert example["system"].decode() == record["system"]
            assert example["label"] == int(record["q4"]) and example["rating"] == float(
                record["q4"]
            )
            assert example["question"] == 4 and example["truncated"] == 0


def test_every_question_counts_its_yes_no_ratings(registered):
    for question in range(1, 7):
        for split in seahorse.SPLITS:
            assert len(
                tasks.examples_for_task(f"seahorse_q{question}", split)
            ) == tiny_data.yes_no_counts(question, split)


def test_fast_path_equals_the_seqio_dataset(registered):
    task = seqio.get_mixture_or_task("seahorse_q1")
    from_seqio = list(task.get_dataset(LENGTHS, split="train", shuffle=False).as_numpy_iterator())
    fast = tasks.examples_for_task("seahorse_q1", "train")
    assert [e["id"].decode() for e in from_seqio] == [e["id"] for e in fast]
    for a, b in zip(from_seqio, fast):
        np.testing.assert_array_equal(a["inputs"], b["inputs"])
        np.testing.assert_array_equal(a["targets"], b["targets"])


def test_shuffling_is_deterministic_given_a_seed(registered):
    task = seqio.get_mixture_or_task("seahorse_q1")

    def order(seed, epochs=1):
        ds = task.get_dataset(LENGTHS, split="train", shuffle=True, seed=seed, num_epochs=epochs)
        return [e["id"].decode() for e in ds.as_numpy_iterator()]

    assert order(3) == order(3)
    assert sorted(order(3)) == sorted(order(None))
    assert order(None) == order(5)  # The registration seed is the default.
    orders = {tuple(order(seed)) for seed in range(4)}
    assert len(orders) > 1
    two_epochs = order(3, epochs=2)
    assert sorted(two_epochs[:5]) == sorted(two_epochs[5:])
    assert two_epochs == order(3, epochs=2)


def test_feature_converter_drops_metadata(registered):
    task = seqio.get_mixture_or_task("seahorse_q4")
    ds = task.get_dataset(LENGTHS, split="validation", shuffle=False)
    converted = seqio.EncDecFeatureConverter(pack=False)(ds, LENGTHS)
    batch = next(converted.as_numpy_iterator())
    assert set(batch) == {
        "encoder_input_tokens",
        "decoder_target_tokens",
        "decoder_input_tokens",
        "decoder_loss_weights",
    }
    assert batch["encoder_input_tokens"].shape == (LONG,)


def test_mixture(registered):
    mixture = seqio.get_mixture_or_task("seahorse_all")
    assert sorted(t.name for t in mixture.tasks) == [f"seahorse_q{q}" for q in range(1, 7)]
    rates = {t.name: mixture.get_rate(t) for t in mixture.tasks}
    assert rates == {
        f"seahorse_q{q}": float(tiny_data.yes_no_counts(q, "train")) for q in range(1, 7)
    }
    # A mixture keeps only inputs/targets unless told to pass the metadata through.
    dataset = mixture.get_dataset(
        LENGTHS,
        split="validation",
        shuffle=False,
        num_epochs=1,
        passthrough_features=tasks.METADATA_FEATURES,
    )
    examples = list(dataset.take(50).as_numpy_iterator())
    assert examples and {int(e["question"]) for e in examples} <= set(range(1, 7))
    assert set(examples[0]) == {"inputs", "targets", *tasks.METADATA_FEATURES}


def test_registration_is_idempotent_and_refuses_conflicts(registered, data):
    assert (
        tasks.register(data["prepared"], vocabulary=data["vocab"], input_length=LONG, seed=5)
        == registered
    )
    with pytest.raises(ValueError, match="different arguments"):
        tasks.register(data["prepared"], vocabulary=data["vocab"], input_length=512, seed=5)
    assert tasks.registered_config().input_length == LONG


def test_a_registration_without_seqio_reads_the_same_examples_and_adds_seqio_later(data):
    """What the trainer registers: the package's readers only, nothing in seqio's
    registries until a later `register` asks for it (the same names, the mixture's
    tasks in seqio's order)."""
    from seahorse_metrics.training import data as training_data

    names = tasks.register(
        data["prepared"], vocabulary=data["vocab"], input_length=LONG, seed=5, with_seqio=False
    )
    assert names == [f"seahorse_q{q}" for q in range(1, 7)] + ["seahorse_all"]
    assert "seahorse_q1" not in seqio.TaskRegistry.names()
    assert tasks.task_names_of("seahorse_q4") == ("seahorse_q4",)
    assert tasks.task_names_of("seahorse_q9") is None
    without = training_data.read_task_split("seahorse_all", "train", LONG, 2)
    assert tasks.register(data["prepared"], vocabulary=data["vocab"], input_length=LONG, seed=5)
    mixture = seqio.get_mixture_or_task("seahorse_all")
    assert tasks.task_names_of("seahorse_all") == tuple(t.name for t in mixture.tasks)
    with_seqio = training_data.read_task_split("seahorse_all", "train", LONG, 2)
    assert without.ids == with_seqio.ids and len(without.ids) == sum(
        tiny_data.yes_no_counts(q, "train") for q in range(1, 7)
    )
    tasks.unregister()
    assert "seahorse_q1" not in seqio.TaskRegistry.names()


def test_reading_an_unknown_task_or_a_missing_split_names_it(data):
    """Without seqio's registries, a misspelt task or a split the task lacks is refused
    by name, as through seqio."""
    from seahorse_metrics.training import data as training_data

    names = tasks.register(
        None, vocabulary=data["vocab"], input_length=LONG, true_dir=data["true"], with_seqio=False
    )
    with pytest.raises(ValueError, match=r"Unknown seqio task or mixture 'seahorse_q9'"):
        training_data.read_task_split("seahorse_q9", "train", LONG, 2)
    with pytest.raises(ValueError, match=rf"Task {names[0]} has no 'train' split"):
        training_data.read_task_split(names[0], "train", LONG, 2)
    assert len(training_data.read_task_split(names[0], "test", LONG, 2).ids) > 0


def test_training_reads_the_sample_without_importing_tensorflow(tmp_path):
    """`seahorse-metrics train` on prepared data starts without seqio and TensorFlow."""
    script = (
        "import sys\n"
        "from fixtures import train_utils\n"
        "train_utils.cache_sample(sys.argv[1])\n"
        "print(sorted(m for m in ('seqio', 'tensorflow') if m in sys.modules))\n"
    )
    done = train_utils.run_python(
        ["-c", script, str(tmp_path)], train_utils.child_env_with_cache(str(tmp_path / "xla"))
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_shorter_sequence_length_is_refused(registered):
    task = seqio.get_mixture_or_task("seahorse_q4")
    with pytest.raises(ValueError, match="input_length=1024"):
        task.get_dataset({"inputs": 64, "targets": 2}, split="train", shuffle=False)
    # With T5X (TASK_FEATURE_LENGTHS), the error names the variable to set too.
    with pytest.raises(ValueError, match="SEAHORSE_INPUT_LENGTH=64"):
        task.get_dataset({"inputs": 64, "targets": 2}, split="train", shuffle=False)


@pytest.mark.parametrize("truncation", ["summary_first", "joint"])
def test_truncation_modes_and_length_report(data, truncation):
    input_length = 40
    tasks.register(
        data["prepared"], vocabulary=data["vocab"], input_length=input_length, truncation=truncation
    )
    try:
        tokenizer = SentencePieceTokenizer(data["vocab"])
        examples = tasks.examples_for_task("seahorse_q4", "validation")
        records = [
            r
            for r in seahorse.iter_prepared(os.path.join(data["prepared"], "validation.jsonl"))
            if r["q4"] is not None
        ]
        for example, record in zip(examples, records):
            expected = encode_pair(
                tokenizer, record["article"], record["summary"], input_length, truncation
            )
            assert example["inputs"].tolist() == expected.ids
            assert example["truncated"] == int(expected.truncated)
            if truncation == "summary_first":
                assert tokenizer.decode(expected.ids).endswith(" hypothesis: " + record["summary"])
        report = tasks.length_report("seahorse_q4", "validation")["splits"]["validation"]
        assert report["count"] == len(examples) and report["truncated"] == sum(
            e["truncated"] for e in examples
        )
        assert report["truncated"] > 0
        assert set(report["by_language"]) == {r["lang"] for r in records}
        if truncation == "joint":
            assert report["hypothesis_cut"] == report["truncated"]
    finally:
        tasks.unregister()


def test_mface_true_and_ratings_tasks(data):
    names = tasks.register(
        None,
        vocabulary=data["vocab"],
        input_length=LONG,
        mface_path=data["mface"],
        true_dir=data["true"],
        ratings_files={
            "squality": {"path": data["ratings"], "threshold": 50},
            "raw": data["ratings"],
        },
    )
    try:
        assert names == [
            "mface_quality",
            "mface_attribution",
            "mface_informativeness",
            "true_frank",
            "true_qags_x",
            "ratings_raw",
            "ratings_squality",
        ]
        attribution = tasks.examples_for_task("mface_attribution", "test")
        assert [e["label"] for e in attribution] == [1, 0, 0, 1]
        assert np.isclose(attribution[0]["rating"], 2 / 3)
        assert [e["lang"] for e in attribution] == ["en", "es", "zh-Hans", "vi"]
        assert attribution[0]["question"] == 4
        assert tasks.examples_for_task("mface_informativeness", "test")[0]["question"] == 6

        task = seqio.get_mixture_or_task("true_frank")
        frank = list(task.get_dataset(LENGTHS, split="test", shuffle=False).as_numpy_iterator())
        assert [int(e["label"]) for e in frank] == [1, 0, 1]
        assert _decode(task, frank[1]["inputs"]) == format_input(*tiny_data.TRUE_ROWS[1][:2])
        assert [e["system"].decode() for e in frank] == ["bart", "pegasus", "bart"]

        squality = tasks.examples_for_task("ratings_squality", "test")
        assert [(e["label"], e["rating"]) for e in squality] == [(1, 87.0), (0, 12.0), (1, 55.0)]
        with pytest.raises(ValueError, match="no binary label"):
            tasks.examples_for_task("ratings_raw", "test")
        with pytest.raises(ValueError, match="unknown task"):
            tasks.examples_for_task("seahorse_q4", "test")
    finally:
        tasks.unregister()


def test_registration_errors(data, tmp_path):
    with pytest.raises(FileNotFoundError, match="seahorse-metrics prepare"):
        tasks.register(str(tmp_path), vocabulary=data["vocab"])
    with pytest.raises(ValueError, match="truncation"):
        tasks.register(data["prepared"], vocabulary=data["vocab"], truncation="middle")
    with pytest.raises(FileNotFoundError, match="no_such.model"):
        tasks.register(data["prepared"], vocabulary=str(tmp_path / "no_such.model"))
    with pytest.raises(ValueError, match="nothing to register"):
        tasks.register(None, vocabulary=data["vocab"])
    assert tasks.registered_config() is None
    with pytest.raises(ValueError, match="register"):
        tasks.examples_for_task("seahorse_q4", "test")


def test_seqio_vocabulary_object_and_path_agree(data):
    from seahorse_metrics.data.vocab import seqio_vocabulary

    vocabulary = seqio_vocabulary(data["vocab"])
    tokenizer = SentencePieceTokenizer(data["vocab"])
    text = format_input(
        tiny_data.ARTICLES["xsum-validation-101"], "Heavy rain flooded the town centre."
    )
    assert list(vocabulary.encode(text)) == tokenizer.encode(text)
    assert vocabulary.eos_id == tokenizer.eos_id and vocabulary.vocab_size == tokenizer.vocab_size
    names = tasks.register(data["prepared"], vocabulary=vocabulary, input_length=LONG)
    try:
        assert (
            seqio.get_mixture_or_task("seahorse_q2").output_features["inputs"].vocabulary
            is vocabulary
        )
        assert tasks.registered_config().vocab_path == data["vocab"]
        assert len(tasks.examples_for_task("seahorse_q2", "test")) == tiny_data.yes_no_counts(
            2, "test"
        )
    finally:
        tasks.unregister()
    assert "seahorse_q2" not in seqio.TaskRegistry.names() and names
