"""A checkpoint is known by its content: a replaced one is refused on resume
(issue 29 point 1), in this process and in the Beam pipeline, and evaluate's
score cache keys on it too."""

import json
import os
import shutil

import pytest

from seahorse_metrics import MultiScorer

from fixtures import tiny_model

FAST = {"xla_backend_optimization_level": 0}
SCORER = dict(
    max_input_length=64, bucket_lengths=(64,), batch_size=4, window_size=8, compiler_options=FAST
)
ROWS = [
    {"article": "The cat sat on the mat all day.", "summary": "A cat sat."},
    {"article": "Rain fell over the city at night.", "summary": "It rained."},
    {"article": "", "summary": "Nothing to read."},
]


@pytest.fixture(scope="module")
def other_weights(tmp_path_factory, tiny_vocab_path):
    """model.safetensors of another tiny model (same config, so the same size)."""
    directory = tiny_model.save_hf_model(
        tiny_model.build_hf_model(seed=1),
        str(tmp_path_factory.mktemp("other")),
        vocab_path=tiny_vocab_path,
    )
    return os.path.join(directory, "model.safetensors")


def replace_weights(checkpoint, other_weights):
    """Replaces the checkpoint's weights by another model's, keeping size and times."""
    target = os.path.join(checkpoint, "model.safetensors")
    before = os.stat(target)
    assert os.path.getsize(other_weights) == before.st_size
    shutil.copyfile(other_weights, target)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return str(path)


def test_digest_changes_with_content_and_is_cached_outside_the_checkpoint(
    tmp_path, tiny_hf_dir, other_weights, monkeypatch
):
    from seahorse_metrics.checkpoints import content

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user_cache"))
    checkpoint = shutil.copytree(tiny_hf_dir, tmp_path / "ck")
    listing = sorted(os.listdir(checkpoint))
    first = content.content_digest(str(checkpoint))
    assert first.startswith("sha256:") and os.path.isfile(content.cache_path(str(checkpoint)))
    assert content.cache_path(str(checkpoint)).startswith(str(tmp_path / "user_cache"))
    assert sorted(os.listdir(checkpoint)) == listing  # Issue 48 point 8: nothing written there.
    assert content.content_digest(shutil.copytree(checkpoint, tmp_path / "copy")) == first
    hashed = []
    monkeypatch.setattr(
        content,
        "_file_hash",
        lambda path, real=content._file_hash: hashed.append(path) or real(path),
    )
    assert content.content_digest(str(checkpoint)) == first and not hashed  # From the cache.
    replace_weights(str(checkpoint), other_weights)
    assert content.content_digest(str(checkpoint)) != first
    assert [os.path.basename(p) for p in hashed] == ["model.safetensors"]
    # An earlier version's cache in the directory is no part of the digest.
    (checkpoint / content.LEGACY_CACHE_FILE).write_text("{}")
    hashed.clear()
    assert content.content_digest(str(checkpoint)) != first and not hashed
    # Where the cache cannot be written, the digest is computed all the same.
    os.remove(content.cache_path(str(checkpoint)))
    monkeypatch.setattr(
        content,
        "write_json_atomically",
        lambda *a, **kw: (_ for _ in ()).throw(PermissionError(13, "Permission denied")),
    )
    assert content.content_digest(str(checkpoint)) == content.content_digest(str(checkpoint))
    assert not os.path.exists(content.cache_path(str(checkpoint)))


def test_a_read_only_checkpoint_is_scored_and_exported_over_an_export(
    tmp_path, tiny_hf_dir, monkeypatch
):
    """Issue 48 point 8: `score` wrote .seahorse_content.json into the checkpoint
    directory, after which `export --overwrite` refused to replace that export."""
    from seahorse_metrics.checkpoints import content
    from seahorse_metrics.checkpoints.export import export_checkpoint
    from seahorse_metrics.cli import main as cli_main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user_cache"))
    exported = tmp_path / "exported"
    export_checkpoint(tiny_hf_dir, "hf", str(exported))
    listing = sorted(os.listdir(exported))
    source = write_jsonl(tmp_path / "in.jsonl", ROWS[:2])
    shape = ["--max_input_length", "64", "--buckets", "64", "--no_progress"]
    os.chmod(exported, 0o555)  # Read-only (root may still write: the listing is checked too).
    try:
        assert (
            cli_main(
                [
                    "score",
                    "--checkpoint",
                    str(exported),
                    "--input",
                    source,
                    "--output",
                    str(tmp_path / "out.jsonl"),
                ]
                + shape
            )
            == 0
        )
    finally:
        os.chmod(exported, 0o755)
    assert sorted(os.listdir(exported)) == listing
    export_checkpoint(tiny_hf_dir, "hf", str(exported), overwrite=True)
    # An export an earlier version's `score` left its cache in is replaced too.
    (exported / content.LEGACY_CACHE_FILE).write_text("{}")
    export_checkpoint(tiny_hf_dir, "hf", str(exported), overwrite=True)
    assert sorted(os.listdir(exported)) == listing


def test_score_refuses_a_finished_output_of_a_replaced_checkpoint(
    tmp_path, tiny_hf_dir, other_weights
):
    from seahorse_metrics.scoring.files import PARTIAL_SUFFIX, score_file

    checkpoint = str(shutil.copytree(tiny_hf_dir, tmp_path / "ck"))
    source = write_jsonl(tmp_path / "in.jsonl", ROWS)
    output = str(tmp_path / "out.jsonl")
    meta = score_file(
        MultiScorer.load({"q": checkpoint}, **SCORER), source, output, show_progress=False
    )
    assert meta["rows"]["scored"] == 2
    replace_weights(checkpoint, other_weights)
    replaced = MultiScorer.load({"q": checkpoint}, **SCORER)
    with pytest.raises(ValueError, match="checkpoint at the same path has changed"):
        score_file(replaced, source, output, show_progress=False)
    # An interrupted run's partial file is refused the same way.
    os.remove(output)
    with open(output + PARTIAL_SUFFIX, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"partial": meta["fingerprint"]}) + "\n")
    with pytest.raises(ValueError, match="other settings"):
        score_file(replaced, source, output, show_progress=False)
    assert (
        score_file(replaced, source, output, overwrite=True, show_progress=False)["rows"]["scored"]
        == 2
    )


def test_beam_refuses_shards_of_a_replaced_checkpoint(tmp_path, tiny_hf_dir, other_weights):
    from seahorse_metrics.scoring import beam as beam_scoring

    checkpoint = str(shutil.copytree(tiny_hf_dir, tmp_path / "ck"))
    source = write_jsonl(tmp_path / "in.jsonl", ROWS)
    output = str(tmp_path / "out.jsonl")
    run = dict(
        scorer_options=SCORER,
        show_progress=False,
        pipeline_args=["--runner=FnApiRunner", "--direct_running_mode=in_memory"],
    )
    meta = beam_scoring.score_files([source], output, {"q": checkpoint}, **run)
    assert meta["rows"] == {
        "rows": 3,
        "scored": 2,
        "bad": 1,
        "truncated": 0,
        "chunked": 0,
        "resumed": 0,
    }
    replace_weights(checkpoint, other_weights)
    with pytest.raises(ValueError, match="checkpoint at the same path has changed"):
        beam_scoring.score_files([source], output, {"q": checkpoint}, **run)
    # Shards of an unfinished run (settings.json, no metadata) are refused too.
    os.remove(output + ".meta.json")
    with pytest.raises(ValueError, match="shards was written for another input"):
        beam_scoring.score_files([source], output, {"q": checkpoint}, **run)


def test_evaluate_cache_keys_on_the_checkpoint_content(tmp_path, tiny_hf_dir, other_weights):
    from seahorse_metrics.evaluation.metrics import build_metric, parse_metric_spec

    checkpoint = str(shutil.copytree(tiny_hf_dir, tmp_path / "ck"))
    spec = parse_metric_spec(f"q=checkpoint:{checkpoint}")
    before = build_metric(spec).fingerprint()
    assert build_metric(spec).fingerprint() == before
    replace_weights(checkpoint, other_weights)
    assert build_metric(spec).fingerprint() != before
