"""`seahorse-metrics export`: Hugging Face and T5X directories others can load.

The HF export is loaded by transformers and scored against our model; the
T5X export is read the way T5X's `checkpoints.load_t5x_checkpoint` reads a
checkpoint (msgpack, then each relative TensorStore spec with its chunks and
compressor dropped); both round-trip through our loader bit for bit.
"""

import json
import os

import numpy as np
import pytest

from seahorse_metrics.checkpoints import load_checkpoint
from seahorse_metrics.checkpoints.export import chunk_shape, export_checkpoint
from seahorse_metrics.checkpoints.params import flatten
from seahorse_metrics.cli import main
from seahorse_metrics.data.inputs import encode_pair
from seahorse_metrics.data.vocab import SentencePieceTokenizer
from seahorse_metrics.model import EncoderDecoderModel

from fixtures import scoring_reference as ref
from fixtures import tiny_model

BEST_STEP = 40


def make_run(directory, config, params, vocab_path):
    """A training run's MODEL_DIR whose best/ is `params` at BEST_STEP, as the trainer keeps it."""
    from seahorse_metrics.training.checkpointing import BestCheckpoint

    BestCheckpoint(os.path.join(directory, "best"), vocab_path).save(
        BEST_STEP, config, params, {"roc_auc": 0.75}
    )
    return directory


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_hf_dir, tiny_vocab_path):
    config, params = load_checkpoint(tiny_hf_dir)
    return make_run(str(tmp_path_factory.mktemp("run")), config, params, tiny_vocab_path)


def assert_same_params(path, expected_dir):
    config, params = load_checkpoint(path)
    expected_config, expected = load_checkpoint(expected_dir)
    assert config == expected_config
    flat, expected_flat = flatten(params), flatten(expected)
    assert set(flat) == set(expected_flat)
    for name, value in expected_flat.items():
        assert flat[name].dtype == value.dtype
        np.testing.assert_array_equal(flat[name], value, err_msg=name)  # bit for bit


def first_step_log_p1(config, params, vocab_path, hf_model):
    """log P("1") at the first decoder step of a padded batch: ours (JAX) and the
    transformers model's, float32."""
    import torch

    tokenizer = SentencePieceTokenizer(vocab_path)
    one, _ = ref.target_ids(vocab_path)
    rows = [
        encode_pair(tokenizer, p, h, 2048, "summary_first").ids
        for p, h in zip(*ref.random_pairs(5, seed=11))
    ]
    ids = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
    ours = np.log(
        np.asarray(EncoderDecoderModel(config).first_token_probs(params, ids, [one]))[:, 0]
    )
    with torch.no_grad():
        input_ids = torch.from_numpy(ids).long()
        logits = hf_model(
            input_ids=input_ids,
            attention_mask=(input_ids != 0).long(),
            decoder_input_ids=torch.zeros((len(rows), 1), dtype=torch.long),
        ).logits
    theirs = torch.log_softmax(logits[:, 0].float(), -1)[:, one].numpy()
    return ours, theirs


def test_hf_export_of_model_dir_best_scores_identically_in_transformers(
    run_dir, tmp_path, tiny_vocab_path, capsys
):
    import transformers

    output = str(tmp_path / "q4-hf")
    assert main(["export", "--checkpoint", run_dir, "--to", "hf", "--output", output]) == 0
    assert "wrote" in capsys.readouterr().out
    assert sorted(os.listdir(output)) == [
        "config.json",
        "model.safetensors",
        "seahorse_export.json",
        "spiece.model",
    ]
    assert_same_params(output, os.path.join(run_dir, "best"))
    model, info = transformers.MT5ForConditionalGeneration.from_pretrained(
        output, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    config, params = load_checkpoint(output)
    ours, theirs = first_step_log_p1(config, params, tiny_vocab_path, model.eval())
    assert np.abs(ours - theirs).max() < 1e-5, np.abs(ours - theirs).max()


def test_hf_export_of_a_t5_v1_0_model(tmp_path, tiny_vocab_path):
    import transformers

    hf_model = tiny_model.build_hf_model(tiny_model.tiny_t5_v1_0_config(), model_type="t5", seed=4)
    source = tiny_model.save_hf_model(hf_model, str(tmp_path / "nli"), vocab_path=tiny_vocab_path)
    output = str(tmp_path / "nli-export")
    export_checkpoint(source, "hf", output)
    with open(os.path.join(output, "config.json")) as handle:
        written = json.load(handle)
    assert written["architectures"] == ["T5ForConditionalGeneration"]
    assert written["feed_forward_proj"] == "relu" and written["tie_word_embeddings"] is True
    assert_same_params(output, source)
    model, info = transformers.T5ForConditionalGeneration.from_pretrained(
        output, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    config, params = load_checkpoint(output)
    ours, theirs = first_step_log_p1(config, params, tiny_vocab_path, model.eval())
    assert np.abs(ours - theirs).max() < 1e-5


def test_t5x_export_reads_the_t5x_way_and_round_trips(run_dir, tmp_path):
    import tensorstore as ts
    from flax import serialization

    output = str(tmp_path / "q4-t5x")
    assert (
        main(
            [
                "export",
                "--checkpoint",
                os.path.join(run_dir, "best"),
                "--to",
                "t5x",
                "--output",
                output,
            ]
        )
        == 0
    )
    assert sorted(os.listdir(output)) == [
        f"checkpoint_{BEST_STEP}",
        "seahorse_export.json",
        "spiece.model",
    ]
    step_dir = os.path.join(output, f"checkpoint_{BEST_STEP}")
    with open(os.path.join(step_dir, "checkpoint"), "rb") as handle:
        contents = serialization.msgpack_restore(handle.read())
    assert contents["version"] == 3
    assert int(contents["optimizer"]["state"]["step"]) == BEST_STEP
    _, expected = load_checkpoint(os.path.join(run_dir, "best"))
    expected = flatten(expected)
    specs = {}

    def collect(tree, prefix):
        for key, value in tree.items():
            if isinstance(value, dict) and not {"driver", "kvstore", "metadata"} <= set(value):
                collect(value, f"{prefix}{key}/")
            else:
                specs[prefix + key] = value

    collect(contents["optimizer"]["target"], "")
    assert set(specs) == set(expected)
    for name, spec in specs.items():
        # T5X's _read_ts: drop chunks and compressor, make the path absolute, open, read.
        assert spec["kvstore"] == {"driver": "file", "path": "target." + name.replace("/", ".")}
        assert spec["metadata"]["compressor"] == {"id": "gzip"}
        assert list(spec["metadata"]["shape"]) == list(expected[name].shape)
        del spec["metadata"]["chunks"], spec["metadata"]["compressor"]
        spec["kvstore"]["path"] = os.path.join(step_dir, spec["kvstore"]["path"])
        array = ts.open(spec, open=True).result().read().result()
        np.testing.assert_array_equal(array, expected[name], err_msg=name)
    assert_same_params(output, os.path.join(run_dir, "best"))
    from seahorse_metrics import Scorer

    assert Scorer.load(output).score(["a b c"], ["a b"]).shape == (1,)


def test_chunks_tile_the_array_under_64_mib():
    assert chunk_shape((32, 64), 4) == [32, 64]
    chunks = chunk_shape((250112, 4096), 4)  # mT5-XXL's embedding
    assert np.prod(chunks) * 4 <= 64 * 2**20
    assert all(size % chunk == 0 for size, chunk in zip((250112, 4096), chunks))
    assert chunk_shape((7, 0), 4) == [7, 1]


def test_overwrite_replaces_only_a_previous_export(run_dir, tmp_path):
    output = tmp_path / "taken"
    output.mkdir()
    (output / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_checkpoint(run_dir, "hf", str(output))
    with pytest.raises(FileExistsError, match="no previous export"):
        export_checkpoint(run_dir, "hf", str(output), overwrite=True)
    assert os.listdir(output) == ["notes.txt"] and (output / "notes.txt").read_text() == "keep me"

    previous = tmp_path / "previous"
    previous.mkdir()  # an empty directory needs no --overwrite
    export_checkpoint(run_dir, "t5x", str(previous), step=3)
    with open(previous / "seahorse_export.json") as handle:
        marker = json.load(handle)
    assert marker["files"] == ["checkpoint_3", "spiece.model"] and marker["format"] == "t5x"
    (previous / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"other files \(notes.txt\)"):
        export_checkpoint(run_dir, "t5x", str(previous), overwrite=True, step=7)
    assert (previous / "notes.txt").read_text() == "mine"
    os.remove(previous / "notes.txt")
    export_checkpoint(run_dir, "t5x", str(previous), overwrite=True, step=7)
    assert sorted(os.listdir(previous)) == ["checkpoint_7", "seahorse_export.json", "spiece.model"]

    with pytest.raises(ValueError, match="overlaps the checkpoint"):
        export_checkpoint(run_dir, "hf", os.path.join(run_dir, "best", "hf"))
    with pytest.raises(ValueError, match="unknown export format"):
        export_checkpoint(run_dir, "onnx", str(tmp_path / "x"))
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no staging left
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".lock")]


def test_overwrite_never_replaces_the_current_directory_or_its_parents(
    run_dir, tmp_path, monkeypatch, capsys
):
    project = tmp_path / "project"
    (project / "runs" / "q4").mkdir(parents=True)
    (project / "train.py").write_text("print('mine')")
    before = sorted(str(path) for path in tmp_path.rglob("*"))
    monkeypatch.chdir(project)
    assert (
        main(["export", "--checkpoint", run_dir, "--to", "hf", "--output", ".", "--overwrite"]) == 2
    )
    assert "current directory" in capsys.readouterr().err
    monkeypatch.chdir(project / "runs" / "q4")
    assert (
        main(["export", "--checkpoint", run_dir, "--to", "hf", "--output", "../..", "--overwrite"])
        == 2
    )
    assert "one of its parents" in capsys.readouterr().err
    assert sorted(str(path) for path in tmp_path.rglob("*")) == before


def test_next_export_removes_what_killed_exports_left_and_says_so(run_dir, tmp_path, capsys):
    output = tmp_path / "q4-hf"
    # What kill -9 leaves: a staging directory mid-write, and one from mid-swap.
    staging = tmp_path / ".q4-hf.export-k1ll3d"
    staging.mkdir()
    (staging / "model.safetensors").write_bytes(b"\0" * 1000)
    retired = tmp_path / ".q4-hf.old-k1ll3d"
    (retired / "output").mkdir(parents=True)
    unrelated = tmp_path / ".other.export-abcdef"
    unrelated.mkdir()
    assert main(["export", "--checkpoint", run_dir, "--to", "hf", "--output", str(output)]) == 0
    out = capsys.readouterr().out
    assert f"removed {staging} (left by an interrupted export)" in out
    assert f"removed {retired}" in out
    assert sorted(os.listdir(tmp_path)) == [".other.export-abcdef", "q4-hf"]


def test_sigterm_stops_an_export_and_removes_its_staging(run_dir, tmp_path, monkeypatch):
    import signal

    from seahorse_metrics.checkpoints import hf

    original = hf.export_hf

    def write_then_sigterm(directory, *args, **kwargs):
        original(directory, *args, **kwargs)
        assert os.listdir(directory)  # the staging directory holds a finished export
        os.kill(os.getpid(), signal.SIGTERM)

    def outside_export(signum, frame):  # a SIGTERM the export let through (not pytest's death)
        raise RuntimeError("SIGTERM was not handled by the export")

    monkeypatch.setattr(hf, "export_hf", write_then_sigterm)
    handler = signal.signal(signal.SIGTERM, outside_export)
    try:
        with pytest.raises(SystemExit) as stopped:
            export_checkpoint(run_dir, "hf", str(tmp_path / "q4-hf"))
        assert signal.getsignal(signal.SIGTERM) is outside_export
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert os.listdir(tmp_path) == []  # no output, no staging, no lock


def test_export_honours_the_umask(run_dir, tmp_path):
    previous = os.umask(0o022)
    try:
        export_checkpoint(run_dir, "hf", str(tmp_path / "hf"))
        export_checkpoint(run_dir, "t5x", str(tmp_path / "t5x"))
    finally:
        os.umask(previous)
    modes = {}
    for root in ("hf", "t5x"):
        for directory, _, files in os.walk(tmp_path / root):
            modes[directory] = os.stat(directory).st_mode & 0o777
            modes.update(
                {
                    os.path.join(directory, name): os.stat(os.path.join(directory, name)).st_mode
                    & 0o777
                    for name in files
                }
            )
    directories = {path for path in modes if os.path.isdir(path)}
    assert len(directories) > 3 and len(modes) > len(directories) + 5
    assert {modes[path] for path in directories} == {0o755}, modes
    assert {mode for path, mode in modes.items() if path not in directories} == {0o644}, modes


def test_an_interrupted_export_leaves_the_output_as_it_was(run_dir, tmp_path, monkeypatch):
    from seahorse_metrics.checkpoints import export

    output = tmp_path / "previous"
    export_checkpoint(run_dir, "t5x", str(output), step=3)
    before = sorted(os.listdir(output))

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "_write_zarr", fail)
    with pytest.raises(KeyboardInterrupt):
        export_checkpoint(run_dir, "t5x", str(output), overwrite=True, step=9)
    assert sorted(os.listdir(output)) == before
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]


def test_a_training_run_is_scored_and_evaluated_by_its_best_checkpoint(run_dir, tmp_path):
    """A MODEL_DIR (no checkpoint itself) means its best/ to the Scorer and to
    `evaluate --metric checkpoint:`, as to export above."""
    from seahorse_metrics import MultiScorer
    from seahorse_metrics.evaluation.metrics import CheckpointMetric, parse_metric_spec

    best = os.path.join(run_dir, "best")
    scorer = MultiScorer.load([run_dir, best])
    assert set(scorer.checkpoints) == {f"score_{os.path.basename(run_dir)}", "score_best"}
    assert set(scorer.checkpoints.values()) == {best}
    scores = scorer.score(["a b c d e", "f g h"], ["a b", "x y"])
    np.testing.assert_array_equal(*scores.values())
    assert CheckpointMetric(parse_metric_spec(f"checkpoint:{run_dir}"), None).path == best
    # A directory that is neither a checkpoint nor a run is still named as such.
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        MultiScorer.load([str(tmp_path)])
