"""`seahorse-metrics score` end to end on the bundled sample with a tiny model."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from seahorse_metrics import MultiScorer, Scorer
from seahorse_metrics.calibration.maps import CalibrationMap
from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.scoring import files
from seahorse_metrics.scoring.job import META_SUFFIX

SHAPE_ARGS = [
    "--max_input_length",
    "256",
    "--buckets",
    "64,128,256",
    "--batch_size",
    "8",
    "--window_size",
    "64",
    "--no_progress",
]


@pytest.fixture(scope="module")
def sample_split(tmp_path_factory):
    """The bundled SEAHORSE sample's validation split, prepared (article/summary/lang)."""
    import seahorse_metrics.data as data_package
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare

    sample = os.path.join(os.path.dirname(data_package.__file__), "sample", "seahorse")
    out = tmp_path_factory.mktemp("prepared")
    prepare(sample, LocalArticleSource(os.path.join(sample, "articles.jsonl")), str(out))
    return str(out / "validation.jsonl")


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def subprocess_env(cache_dir):
    # Later processes load the compiled programs from the persistent cache.
    return dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        USE_TF="0",
        JAX_COMPILATION_CACHE_DIR=str(cache_dir),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )


def cli_command(checkpoint, input_path, output_path):
    return [
        sys.executable,
        "-m",
        "seahorse_metrics",
        "score",
        "--checkpoint",
        checkpoint,
        "--input",
        input_path,
        "--output",
        output_path,
    ] + SHAPE_ARGS


def wait_for_lines(path, count, process, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path, "rb") as handle:
                if handle.read().count(b"\n") >= count:
                    return
        assert process.poll() is None, "the run finished before it could be killed"
        time.sleep(0.02)
    raise TimeoutError(f"{path} did not reach {count} lines")


@pytest.mark.slow
def test_resume_after_kill_writes_the_same_file(tmp_path, tiny_hf_dir, sample_split):
    env = subprocess_env(tmp_path / "jax_cache")
    full = str(tmp_path / "full.jsonl")
    done = subprocess.run(
        cli_command(tiny_hf_dir, sample_split, full),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    resumed = str(tmp_path / "resumed.jsonl")
    process = subprocess.Popen(
        cli_command(tiny_hf_dir, sample_split, resumed),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_lines(resumed + files.PARTIAL_SUFFIX, 1 + 3 * 8, process)  # header + 3 batches
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not os.path.exists(resumed)
    with open(resumed + files.PARTIAL_SUFFIX, "ab") as handle:
        handle.write(b'{"row": 999, "scores": {"sco')  # a torn last line, as a kill can leave
    done = subprocess.run(
        cli_command(tiny_hf_dir, sample_split, resumed),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming" in done.stderr and "incomplete last line" in done.stderr

    with open(full, "rb") as a, open(resumed, "rb") as b:
        assert a.read() == b.read()
    assert not os.path.exists(resumed + files.PARTIAL_SUFFIX)
    meta = json.load(open(resumed + META_SUFFIX))
    assert 24 <= meta["rows"]["resumed"] < meta["rows"]["rows"] == 1000
    assert meta["rows"]["truncated"] > 0 and meta["settings"]["normalize"] == "full"
    rows = read_jsonl(full)
    assert [r["gem_id"] for r in rows] == [r["gem_id"] for r in read_jsonl(sample_split)]
    assert all(0 < r["score"] < 1 for r in rows)


def _data_parallel(meta):
    """The `data_parallel` figure anywhere in an OUTPUT.meta.json."""
    if isinstance(meta, dict):
        if "data_parallel" in meta:
            return meta["data_parallel"]
        found = [_data_parallel(value) for value in meta.values()]
        return next((f for f in found if f is not None), None)
    return None


def test_cpu_devices_split_every_batch_with_the_same_scores(tmp_path, tiny_hf_dir, sample_split):
    """`--cpu_devices 2` in a fresh process: two XLA:CPU devices score halves
    of each batch; the scores are the single device's."""
    subset = tmp_path / "subset.jsonl"
    subset.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in read_jsonl(sample_split)[:40])
    )
    env = subprocess_env(tmp_path / "jax_cache")
    env.pop("XLA_FLAGS", None)
    scores = {}
    for devices in (1, 2):
        output = str(tmp_path / f"devices{devices}.jsonl")
        done = subprocess.run(
            cli_command(tiny_hf_dir, str(subset), output) + ["--cpu_devices", str(devices)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        meta = json.load(open(output + META_SUFFIX))
        assert _data_parallel(meta) == devices
        scores[devices] = [row["score"] for row in read_jsonl(output)]
    assert len(scores[2]) == 40
    np.testing.assert_allclose(scores[2], scores[1], rtol=1e-5, atol=1e-9)


class Interrupted(Exception):
    pass


def test_interrupted_run_resumes_to_the_same_file(tmp_path, tiny_hf_dir, sample_split, monkeypatch):
    subset = tmp_path / "subset.jsonl"
    subset.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in read_jsonl(sample_split)[:150])
    )
    multi = MultiScorer.load(
        {"q4": tiny_hf_dir},
        max_input_length=256,
        bucket_lengths=(64, 128, 256),
        window_size=64,
        batch_size=8,
    )
    files.score_file(multi, str(subset), str(tmp_path / "full.jsonl"), show_progress=False)

    output = str(tmp_path / "out.jsonl")
    run = multi.run

    def interrupted_run(*args, **kwargs):
        for index, group in enumerate(run(*args, **kwargs)):
            if index == 10:  # in the second window
                raise Interrupted
            yield group

    monkeypatch.setattr(multi, "run", interrupted_run)
    with pytest.raises(Interrupted):
        files.score_file(multi, str(subset), output, show_progress=False)
    monkeypatch.undo()
    assert not os.path.exists(output) and os.path.exists(output + files.PARTIAL_SUFFIX)
    other = MultiScorer.load(
        {"q4": tiny_hf_dir},
        max_input_length=256,
        normalize="pair",
        bucket_lengths=(64, 128, 256),
        window_size=64,
        batch_size=8,
    )
    with pytest.raises(ValueError, match="other settings"):
        files.score_file(other, str(subset), output, show_progress=False)
    summary = files.score_file(multi, str(subset), output, show_progress=False)
    assert 64 <= summary["rows"]["resumed"] < 150
    assert summary["this_run"]["scored"] == 150 - summary["rows"]["resumed"]
    with open(tmp_path / "full.jsonl", "rb") as a, open(output, "rb") as b:
        assert a.read() == b.read()


def test_scores_match_the_python_api_and_rerun_is_a_no_op(
    tmp_path, tiny_hf_dir, sample_split, caplog, capsys
):
    subset = tmp_path / "subset.jsonl"
    records = read_jsonl(sample_split)[:40]
    subset.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    output = str(tmp_path / "out.jsonl")
    args = ["score", "--checkpoint", tiny_hf_dir, "--input", str(subset), "--output", output]
    assert cli_main(args + SHAPE_ARGS) == 0
    scorer = Scorer.load(
        tiny_hf_dir, max_input_length=256, bucket_lengths=(64, 128, 256), window_size=64
    )
    expected = scorer.score(
        [r["article"] for r in records], [r["summary"] for r in records], batch_size=8
    )
    rows = read_jsonl(output)
    assert [{k: v for k, v in r.items() if k != "score"} for r in rows] == records
    # The float32 scores, written as their shortest decimals.
    np.testing.assert_array_equal(np.asarray([r["score"] for r in rows], np.float32), expected)
    first = open(output, "rb").read()
    with caplog.at_level("INFO"):
        assert cli_main(args + SHAPE_ARGS) == 0
    assert "nothing to do" in caplog.text and open(output, "rb").read() == first
    assert cli_main(args + SHAPE_ARGS[:-3] + ["--window_size", "32", "--normalize", "pair"]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert cli_main(args + SHAPE_ARGS + ["--normalize", "pair", "--overwrite"]) == 0
    meta = json.load(open(output + META_SUFFIX))
    assert meta["settings"]["normalize"] == "pair"
    pair = Scorer.load(
        tiny_hf_dir,
        max_input_length=256,
        bucket_lengths=(64, 128, 256),
        window_size=64,
        normalize="pair",
    )
    expected = pair.score(
        [r["article"] for r in records], [r["summary"] for r in records], batch_size=8
    )
    np.testing.assert_array_equal(
        np.asarray([r["score"] for r in read_jsonl(output)], np.float32), expected
    )


def test_bad_rows_are_reported_with_their_line_and_kept(tmp_path, tiny_hf_dir, caplog):
    good = {"article": "the fox jumps over the dog.", "summary": "a fox jumps."}
    lines = [
        json.dumps(good),
        json.dumps({"article": "no summary here"}),
        json.dumps({"article": "   ", "summary": "blank article"}),
        "",
        json.dumps({"article": "numbers", "summary": 42}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps(dict(good, id=7)),
    ]
    source = tmp_path / "bad.jsonl"
    source.write_text("\n".join(lines) + "\n")
    output = str(tmp_path / "not" / "yet" / "bad_out.jsonl")  # parents are created
    with caplog.at_level("WARNING"):
        assert (
            cli_main(
                ["score", "--checkpoint", tiny_hf_dir, "--input", str(source), "--output", output]
                + SHAPE_ARGS
            )
            == 0
        )
    rows = read_jsonl(output)
    assert len(rows) == 7  # every data row, the blank line is not one
    assert [("score" in r, "error" in r) for r in rows] == [
        (True, False),
        (False, True),
        (False, True),
        (False, True),
        (False, True),
        (False, True),
        (True, False),
    ]
    assert rows[1]["error"] == "missing field 'summary'"
    assert rows[2]["error"] == "field 'article' is empty"
    assert rows[3]["error"] == "field 'summary' is not text (got int)"
    assert rows[4]["error"].startswith("invalid JSON")
    assert rows[5]["error"] == "expected a JSON object, got list"
    assert rows[6]["id"] == 7 and rows[0]["score"] == rows[6]["score"]
    for line in (2, 3, 5, 6, 7):
        assert f"bad.jsonl:{line}:" in caplog.text
    meta = json.load(open(output + META_SUFFIX))
    assert meta["rows"]["bad"] == 5 and meta["rows"]["scored"] == 2
    assert [b["line"] for b in meta["bad_rows"]] == [2, 3, 5, 6, 7]


def test_csv_in_tsv_out_with_several_checkpoints_and_sentences(
    tmp_path, tiny_hf_dir, tiny_vocab_path
):
    from fixtures import tiny_model

    second = tiny_model.save_hf_model(
        tiny_model.build_hf_model(seed=3), str(tmp_path / "q6"), vocab_path=tiny_vocab_path
    )
    source = tmp_path / "in.csv"
    with open(source, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["doc", "text", "lang"])
        writer.writerow(["the fox jumps over the dog.", "A fox jumps. It is brown!", "en"])
        writer.writerow(["a long day, with\nnew lines", "It rained.", "en"])
        writer.writerow(["only two", "cells"])
        writer.writerow(["", "empty doc", "de"])
    output = str(tmp_path / "out.tsv")
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                f"q4={tiny_hf_dir}",
                "--checkpoint",
                f"q6={second}",
                "--input",
                str(source),
                "--output",
                output,
                "--premise_field",
                "doc",
                "--hypothesis_field",
                "text",
                "--per_sentence",
            ]
            + SHAPE_ARGS
        )
        == 0
    )
    with open(output, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert list(rows[0]) == [
        "doc",
        "text",
        "lang",
        "q4",
        "q6",
        "q4_sentences",
        "q6_sentences",
        "sentences",
        "error",
    ]
    assert rows[1]["doc"] == "a long day, with\nnew lines"
    assert json.loads(rows[0]["sentences"]) == ["A fox jumps.", "It is brown!"]
    assert len(json.loads(rows[0]["q4_sentences"])) == 2
    assert float(rows[0]["q4"]) == min(json.loads(rows[0]["q4_sentences"]))
    assert rows[0]["q4"] != rows[0]["q6"]
    assert rows[2]["error"] == "2 columns, the header has 3"
    assert rows[3]["error"] == "field 'doc' is empty" and rows[3]["q4"] == ""
    multi = MultiScorer.load(
        {"q4": tiny_hf_dir, "q6": second},
        max_input_length=256,
        bucket_lengths=(64, 128, 256),
        window_size=64,
        per_sentence=True,
    )
    expected = multi.score(
        ["the fox jumps over the dog."], ["A fox jumps. It is brown!"], batch_size=8
    )
    assert float(rows[0]["q6"]) == pytest.approx(float(expected["q6"][0]), rel=1e-6)


@pytest.mark.slow
def test_memory_stays_flat_as_rows_grow(tmp_path, tiny_hf_dir):
    """`score_file` streams: 6x the rows, the same Python heap, calibrated
    columns included (issue 48 point 12: `score --calibration` had read the
    whole output into memory).

    Measured with tracemalloc (every Python and numpy allocation, exactly and
    deterministically) after a warm-up run has compiled the batch shapes. The
    process's peak RSS is no use here: batch buffers and malloc arenas move it
    by +-60 MiB from run to run (measured), while holding 12k rows and their
    scores would cost the Python heap some 12 MiB.
    """
    import tracemalloc

    def write(path, count):
        with open(path, "w", encoding="utf-8") as handle:
            for i in range(count):
                handle.write(
                    json.dumps(
                        {
                            "id": i,
                            "article": f"article {i} says {i % 97} things",
                            "summary": f"it says {i % 89}",
                        }
                    )
                    + "\n"
                )
        return str(path)

    scorer = MultiScorer.load(
        {"score": tiny_hf_dir},
        max_input_length=64,
        bucket_lengths=(32, 64),
        batch_size=256,
        max_batch_tokens=8192,
        window_size=1024,
    )
    calibration = {"score": CalibrationMap("platt", {"slope": 0.5, "intercept": 0.3})}
    small = write(tmp_path / "small.jsonl", 2_000)
    files.score_file(
        scorer, small, str(tmp_path / "warm_up.jsonl"), show_progress=False, calibration=calibration
    )
    peaks = {}
    for name, path in (("small", small), ("large", write(tmp_path / "large.jsonl", 12_000))):
        tracemalloc.start()
        try:
            files.score_file(
                scorer,
                path,
                str(tmp_path / f"{name}_out.jsonl"),
                show_progress=False,
                calibration=calibration,
            )
            peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
    # The partial file's row index grows by 9 bytes a row (0.1 MiB here); holding
    # the 10k more rows and their scores would cost some 10 MiB. The small run
    # holds two windows (1,024 rows each), as the large one does at its peak.
    assert peaks["large"] - peaks["small"] < 2.0, peaks
    with open(tmp_path / "large_out.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    assert len(rows) == 12_000
    assert all(
        row["score_calibrated"]
        == pytest.approx(calibration["score"].apply(np.array([row["score"]]))[0], abs=1e-6)
        for row in rows[:100]
    )
