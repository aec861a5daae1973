"""Hugging Face hub ids as checkpoints, resolved offline from a hand-built hub cache.

No model can be downloaded here, so the cache is laid out by hand the way
huggingface_hub keeps it (`HF_HOME/hub/models--org--name/refs/main` naming a
commit, `snapshots/<commit>/` holding the files) and read with
`HF_HUB_OFFLINE=1`. The hub settings are environment variables huggingface_hub
reads once, so each case runs in a child process with its own environment.
"""

import json
import os
import shutil

import numpy as np
import pytest

from fixtures import eval_data
from fixtures.train_utils import child_env, run_python

REPO_ID = "google/seahorse-tiny-q4"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def build_hub_cache(hf_home: str, repo_id: str, model_dir: str, commit: str = COMMIT) -> str:
    """Puts `model_dir`'s files in a huggingface_hub cache under `hf_home`; returns the snapshot."""
    repo_dir = os.path.join(hf_home, "hub", "models--" + repo_id.replace("/", "--"))
    snapshot = os.path.join(repo_dir, "snapshots", commit)
    shutil.copytree(model_dir, snapshot)
    os.makedirs(os.path.join(repo_dir, "refs"))
    with open(os.path.join(repo_dir, "refs", "main"), "w") as handle:
        handle.write(commit)
    return snapshot


@pytest.fixture(scope="module")
def hub(tmp_path_factory, tiny_hf_dir):
    root = tmp_path_factory.mktemp("hub")
    hf_home = str(root / "hf_home")
    snapshot = build_hub_cache(hf_home, REPO_ID, tiny_hf_dir)
    prepared = eval_data.write_prepared_split(str(root / "prepared"), n=24)
    return {"root": root, "hf_home": hf_home, "snapshot": snapshot, "prepared": prepared}


_ENTRY_POINTS = """
import json, sys
from seahorse_metrics import Scorer
from seahorse_metrics.cli import main
from seahorse_metrics.data.seahorse import iter_prepared

repo, prepared, root = sys.argv[1:4]
records = list(iter_prepared(prepared + "/test.jsonl"))
scores = Scorer.load(repo).score([r["article"] for r in records], [r["summary"] for r in records])
main(["score", "--checkpoint", "q4=" + repo, "--input", prepared + "/test.jsonl",
      "--output", root + "/scored.jsonl", "--no_progress"])
main(["evaluate", "--benchmark", "seahorse:" + prepared + ":q4", "--metric",
      "q4=checkpoint:" + repo, "--bootstrap", "0", "--output", root + "/report"])
print(json.dumps({"scores": scores.tolist()}))
"""


def test_scorer_score_and_evaluate_load_a_hub_id_offline(hub, tiny_hf_dir):
    from seahorse_metrics import Scorer, stats
    from seahorse_metrics.data.seahorse import iter_prepared

    env = child_env(extra={"HF_HOME": hub["hf_home"], "HF_HUB_OFFLINE": "1"})
    env.pop("HF_HUB_CACHE", None)
    result = run_python(["-c", _ENTRY_POINTS, REPO_ID, hub["prepared"], str(hub["root"])], env)
    from_hub = np.asarray(json.loads(result.stdout.strip().splitlines()[-1])["scores"])

    records = list(iter_prepared(os.path.join(hub["prepared"], "test.jsonl")))
    expected = Scorer.load(tiny_hf_dir).score(
        [r["article"] for r in records], [r["summary"] for r in records]
    )
    np.testing.assert_allclose(from_hub, expected, rtol=1e-6)
    with open(hub["root"] / "scored.jsonl") as handle:
        scored = [json.loads(line)["q4"] for line in handle]
    np.testing.assert_allclose(scored, expected, rtol=1e-6)
    with open(hub["root"] / "report" / "report.json") as handle:
        report = json.load(handle)
    cell = [r for r in report["results"] if r["metric"] == "q4"][0]
    labels = [r["q4"] for r in records if r["q4"] is not None]
    kept = np.asarray([s for s, r in zip(expected, records) if r["q4"] is not None])
    assert cell["statistics"]["roc_auc"]["value"] == pytest.approx(stats.roc_auc(labels, kept))


_RESOLVE = """
import sys
from seahorse_metrics.checkpoints.hub import resolve_checkpoint
try:
    resolve_checkpoint(sys.argv[1])
except FileNotFoundError as error:
    print("FileNotFoundError:", error)
"""


@pytest.mark.parametrize(
    "hub_env",
    [
        {"HF_HUB_OFFLINE": "1"},
        # Online, but the hub does not answer (a closed port).
        {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"},
    ],
)
def test_an_id_neither_local_nor_cached_is_a_clear_error(hub, hub_env):
    env = child_env(extra=dict(hub_env, HF_HOME=hub["hf_home"]))
    result = run_python(["-c", _RESOLVE, "google/seahorse-xxl-q9"], env, timeout=120)
    message = result.stdout
    assert (
        "FileNotFoundError: google/seahorse-xxl-q9 is neither a local directory nor a "
        "Hugging Face hub id in the cache" in message
    )
    assert os.path.join(hub["hf_home"], "hub") in message
    assert ("HF_HUB_OFFLINE is set" in message) == (hub_env["HF_HUB_OFFLINE"] == "1")


def test_local_paths_are_never_taken_for_hub_ids(tmp_path, monkeypatch):
    from seahorse_metrics.checkpoints.hub import is_hub_id, resolve_checkpoint

    monkeypatch.chdir(tmp_path)
    os.makedirs("runs/q4")
    assert resolve_checkpoint("runs/q4") == "runs/q4"
    assert not is_hub_id("runs/q4") and not is_hub_id("runs/q4/best") and not is_hub_id("/abs/q4")
    assert is_hub_id("google/seahorse-large-q4") and is_hub_id("google/seahorse-large-q4@main")


def test_a_mistyped_local_path_is_a_missing_directory_not_a_hub_id(tmp_path, monkeypatch, capsys):
    """Issue 48 point 18: `--checkpoint runs/q5`, where runs/ exists, said
    "download the model while online: huggingface-cli download runs/q5"."""
    from seahorse_metrics.checkpoints import hub
    from seahorse_metrics.cli import main as cli_main

    def no_hub(*args, **kwargs):
        raise AssertionError("a local path was sent to the hub")

    monkeypatch.setattr(hub, "_snapshot", no_hub)
    monkeypatch.chdir(tmp_path)
    os.makedirs("runs/q4")
    assert not hub.is_hub_id("runs/q5") and hub.resolve_checkpoint("runs/q5") == "runs/q5"
    assert hub.is_hub_id("google/seahorse-large-q4")  # no google/ directory here
    source = tmp_path / "in.jsonl"
    source.write_text('{"article": "a fox.", "summary": "a fox."}\n')
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                "runs/q5",
                "--input",
                str(source),
                "--output",
                str(tmp_path / "out.jsonl"),
                "--no_progress",
            ]
        )
        == 2
    )
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: ") and "runs/q5 does not exist" in line, line
    assert "huggingface" not in line and "hub" not in line, line
