"""Benchmark results as data: the records in bench/results/, their schema, their rendering.

Every bench/ script writes a record of its run (`bench/common.py`: `make_record`,
`write_record`); `bench/render_results.py` renders the documentation's benchmark page from
them; the README's headline table quotes one of them.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest

from fixtures import paths

REPO_ROOT = paths.REPO
BENCH = os.path.join(REPO_ROOT, "bench")
sys.path.insert(0, BENCH)

import common  # noqa: E402  (bench/common.py)
import render_results  # noqa: E402  (bench/render_results.py)

# bench/ modules that are helpers of the scripts, not scripts that measure.
HELPERS = {"common.py", "render_results.py", "accelerator_report.py", "accelerator_roles.py"}
# The README's headline table and the record it quotes.
HEADLINE_RECORD = "real-size-mt5-large-host-zen4-2026-11-28.json"
HEADLINE_ROWS = {
    "Hugging Face PyTorch, float32": "hf",
    "seahorse-metrics, JAX float32": "ours",
    "seahorse-metrics, CTranslate2 int8": "ours_ct2_int8",
    "seahorse-metrics, JAX int8": "ours_int8",
}


def test_every_record_in_bench_results_passes_its_schema():
    records = render_results.load_records()
    files = glob.glob(os.path.join(common.RESULTS_DIR, "*"))
    assert len(records) == len([f for f in files if f.endswith(".json")]) >= 40
    assert set(files) - {os.path.join(common.RESULTS_DIR, r["_file"]) for r in records} == {
        os.path.join(common.RESULTS_DIR, "README.md")
    }, "bench/results/ holds files that are neither records nor its README"
    for record in records:
        if record["schema"] == common.RECORD_SCHEMA:
            assert record["date"][:4] == "2026" and record["host"] and record["variants"]


def test_a_record_that_lacks_a_field_is_refused_naming_its_file_and_the_field(tmp_path):
    with open(os.path.join(common.RESULTS_DIR, HEADLINE_RECORD), encoding="utf-8") as handle:
        record = json.load(handle)
    del record["versions"]
    (tmp_path / "broken.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.json.*lacks \['versions'\]"):
        render_results.load_records(str(tmp_path))
    record["versions"], record["variants"]["ours"]["examples_per_s"] = {}, {"fast": True}
    (tmp_path / "broken.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ValueError, match=r"variants\.ours\.examples_per_s"):
        render_results.load_records(str(tmp_path))


def test_write_record_names_the_host_and_date_and_never_overwrites(tmp_path):
    record = common.make_record(
        "score",
        "a test",
        unit="examples/s",
        primary="examples_per_s",
        variants={"ours": {"examples_per_s": 2.0}, "theirs": {"examples_per_s": 1.0}},
        ratios={"ours / theirs": 2.0},
    )
    assert record["host"]["cores"] >= 1 and record["versions"]["python"] == sys.version.split()[0]
    assert record["versions"]["jax"] and record["command"].startswith("python ")
    first = common.write_record(record, str(tmp_path), tag="quick")
    second = common.write_record(record, str(tmp_path), tag="quick")
    assert first != second and second.endswith(f"{record['date'][:10]}-2.json")
    assert os.path.basename(first).startswith("score-quick-")
    assert json.loads(open(second, encoding="utf-8").read()) == record
    assert common.write_record(record, "") is None


def test_a_record_of_an_unknown_benchmark_is_refused():
    record = dict(render_results.load_records()[0], bench="quantum")
    with pytest.raises(ValueError, match="unknown benchmarks \\['quantum'\\]"):
        render_results.render([record])


def test_readme_headline_table_quotes_its_record():
    with open(os.path.join(common.RESULTS_DIR, HEADLINE_RECORD), encoding="utf-8") as handle:
        variants = json.load(handle)["variants"]
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    assert HEADLINE_RECORD[: -len(".json")].rsplit("-", 3)[-3:] == ["2026", "11", "28"]
    hf = variants["hf"]["examples_per_s"]
    for label, name in HEADLINE_ROWS.items():
        row = re.search(rf"^\| {re.escape(label)}[^|]* \| ([\d.]+) \| ([\d.]+)x \|$", readme, re.M)
        assert row, f"README's headline table has no row {label!r}"
        speed = variants[name]["examples_per_s"]
        assert row[1] == f"{speed:.4f}" and row[2] == f"{speed / hf:.2f}", (label, row.groups())


def test_every_bench_script_writes_a_record():
    scripts = sorted(set(os.listdir(BENCH)) - HELPERS)
    scripts = [name for name in scripts if name.endswith(".py")]
    assert len(scripts) >= 10
    for name in scripts:
        with open(os.path.join(BENCH, name), encoding="utf-8") as handle:
            source = handle.read()
        writes = "write_record(" in source
        takes_a_directory = "add_results_argument(parser)" in source or "--results_dir" in source
        assert writes and takes_a_directory, f"bench/{name} writes no record"


def test_a_bench_script_run_writes_a_record_the_page_renders(tiny_hf_dir, tmp_path):
    """bench/int8_agreement.py on a tiny checkpoint and a few of the sample's pairs."""
    pairs = tmp_path / "pairs.jsonl"
    sample = os.path.join(
        REPO_ROOT, "seahorse_metrics", "data", "sample", "qfs", "qfs_sample.jsonl"
    )
    with open(sample, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle][:8]
    pairs.write_text(
        "".join(
            json.dumps({"article": r["premise"], "summary": r["hypothesis"]}) + "\n" for r in rows
        ),
        encoding="utf-8",
    )
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(BENCH, "int8_agreement.py"),
            "--metrics",
            f"tiny={tiny_hf_dir}",
            "--input",
            str(pairs),
            "--results_dir",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (written,) = render_results.load_records(str(results))
    assert written["bench"] == "int8_agreement" and written["source"] == "measured"
    assert written["host"]["flags"] == [f for f in common.cpu_info()["flags"]]
    assert -1.0 <= written["variants"]["tiny"]["spearman"] <= 1.0
    text, plots = render_results.render([written])
    assert written["_file"] in text and not plots  # one variant: a table, no plot
