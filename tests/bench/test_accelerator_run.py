"""bench/accelerator.py --tiny: the prepared accelerator run, every part end to
end on CPU with tiny models derived from the real presets, so that it is known
to work before a GPU is at hand.

On CPU the "does not fit" part cannot fail at run time: XLA:CPU enforces no
memory cap (JAX's memory fraction is a GPU allocator's). What is checked
there is the prediction the device run tests: the budget is set between
the planned need of one and of two microbatches, the search calls the
unsplit step not fitting, and the child compiles that very program and
finds its need over the cap. On a GPU the same child runs it under the cap
and must meet the runtime's out-of-memory error (`is_out_of_memory`, tested
below on the error XLA raises).
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from fixtures import paths

REPO = paths.REPO
sys.path.insert(0, os.path.join(REPO, "bench"))

from accelerator_report import check_record  # noqa: E402
from accelerator_roles import is_out_of_memory  # noqa: E402

TRAIN_PARTS = ("train_mt5_large", "train_mt5_xl", "anchor_mt5_large_32_8")
SCORE_PARTS = (
    "score_mt5_xxl_int8_cap24GB",
    "score_mt5_large_bfloat16",
    "score_mt5_large_int8",
    "score_mt5_xl_bfloat16",
    "score_mt5_xl_int8",
)


def device_image_env() -> dict:
    """This environment with what a bare JAX accelerator image lacks hidden
    (tests/fixtures/device_image/sitecustomize.py), children included."""
    hider = os.path.join(REPO, "tests", "fixtures", "device_image")
    path = os.pathsep.join(p for p in (hider, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=path)
    env.pop("OUT", None)
    return env


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_hf_dir):
    """The --tiny run with a tiny checkpoint as the demo's metrics (q1 as
    Hugging Face saves it, q2 as our trainer does, as the demo's are), on
    what a bare JAX accelerator image holds."""
    from seahorse_metrics.checkpoints import load_checkpoint, save_checkpoint

    root = tmp_path_factory.mktemp("accelerator")
    shutil.copytree(tiny_hf_dir, root / "metrics" / "q1" / "best")
    ours = save_checkpoint(str(root / "metrics" / "q2" / "best"), *load_checkpoint(tiny_hf_dir))
    shutil.copy(os.path.join(tiny_hf_dir, "spiece.model"), ours)
    env = device_image_env()
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "bench", "accelerator.py"),
            "--tiny",
            "--metrics_dir",
            str(root / "metrics"),
            "--results_dir",
            str(root / "results"),
            "--out",
            str(root / "out"),
            "--budget_s",
            "1500",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1700,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with open(root / "out" / "accelerator.json", encoding="utf-8") as handle:
        record = json.load(handle)
    return record, done.stdout, root


@pytest.mark.slow
def test_tiny_run_measures_every_part_and_writes_its_record(tiny_run):
    record, printed, root = tiny_run
    check_record(record)
    assert record["schema"] == "seahorse-metrics/accelerator-run/1" and record["mode"] == "tiny"
    assert record["device"]["platform"] == "cpu" and record["versions"]["jax"]
    (dated,) = os.listdir(root / "results")
    with open(root / "results" / dated, encoding="utf-8") as handle:
        assert json.load(handle) == record
    parts = record["parts"]
    for name in (
        ("probe",)
        + TRAIN_PARTS
        + SCORE_PARTS
        + ("numerics", "numerics_cpu_reference", "cpu_plan_training", "cpu_plan_anchor")
    ):
        assert parts[name]["status"] == "ok", (name, parts[name])
    for name in TRAIN_PARTS:
        part = parts[name]
        fit = part["fit"]
        assert part["plan_source"] == fit["source"] == "CPU-compiler estimate"
        assert part["planned_bytes"] <= fit["budget_bytes"]  # plan --fit's choice fits
        assert len(part["step_s"]) == record["shapes"]["steps"] and part["examples_per_s"] > 0
        # XLA:CPU compiled the same program for the CPU plan: the same figure.
        assert part["cpu_planned_bytes"] == part["planned_bytes"]
    xxl = parts["score_mt5_xxl_int8_cap24GB"]
    assert xxl["cap_bytes"] == 24 * 10**9 and xxl["cap_enforced"] is False
    compared = parts["numerics"]["against_cpu_float32"]
    assert set(compared) == {"float32", "bfloat16"} and set(compared["float32"]) == {"q1", "q2"}
    # XLA:CPU float32 against itself is the same program: no difference.
    assert all(v["max_abs_delta_log_p"] == 0.0 for v in compared["float32"].values())
    assert "numerics against XLA:CPU float32" in printed and "anchor: NVIDIA JAX-Toolbox" in printed


@pytest.mark.slow
def test_tiny_run_setting_that_does_not_fit_is_planned_over_the_cap(tiny_run):
    record, printed, _ = tiny_run
    nofit, xl = record["parts"]["does_not_fit"], record["parts"]["train_mt5_xl"]
    setting = {key: nofit["setting"][key] for key in ("remat", "microbatches")}
    refused = [
        t
        for t in xl["fit"]["trials"]
        if not t["fits"] and {"remat": t["remat"], "microbatches": t["microbatches"]} == setting
    ]
    assert refused, (setting, xl["fit"]["trials"])
    assert setting != xl["setting"]
    assert nofit["cap_bytes"] == xl["fit"]["budget_bytes"]
    assert (
        nofit["predicted_bytes"] > nofit["cap_bytes"]
        and nofit["planned_bytes"] > nofit["cap_bytes"]
    )
    assert nofit["status"] == "not run" and "no memory cap" in nofit["note"]
    goal = next(g for g in record["goals"] if "does not fit" in g["goal"])
    assert goal["met"] is None  # nothing ran that could fail
    assert "does not fit: " in printed


def test_the_device_image_hides_what_the_run_must_not_need():
    """The hiding the tiny run runs under is in force (else its test proves nothing)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.util, jax.numpy;"
            "assert importlib.util.find_spec('tensorflow') is None; import gin",
        ],
        env=device_image_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "ModuleNotFoundError: import of gin halted" in done.stderr


def test_out_of_memory_is_told_from_other_errors():
    gpu = RuntimeError(
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 85899345920 bytes."
    )
    assert is_out_of_memory(gpu)
    assert not is_out_of_memory(ValueError("INVALID_ARGUMENT: shapes do not match"))


def test_a_record_missing_a_field_is_refused():
    with pytest.raises(ValueError, match=r"the record lacks \['schema'"):
        check_record({"date": "2026-11-28"})
