"""`scoring.files`: a run reads its input once, and writes its output from the
partial file (`scoring.partial`), which carries each row as it was read."""

import json
import os

import pytest

from seahorse_metrics import MultiScorer
from seahorse_metrics.data import tables
from seahorse_metrics.scoring import files
from seahorse_metrics.scoring.partial import PARTIAL_SUFFIX

PAIRS = [
    {"id": i, "article": f"the fox number {i} jumps over the dog.", "summary": f"fox {i} jumps."}
    for i in range(20)
]


@pytest.fixture(scope="module")
def scorer(tiny_hf_dir):
    return MultiScorer.load(
        {"score": tiny_hf_dir},
        max_input_length=64,
        bucket_lengths=(64,),
        batch_size=4,
        window_size=8,
    )


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def jsonl(records):
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def reads(monkeypatch):
    """The paths `tables.iter_table` reads, one entry per read."""
    seen = []
    real = tables.iter_table

    def counting(path, **kwargs):
        seen.append(os.fspath(path))
        return real(path, **kwargs)

    monkeypatch.setattr(tables, "iter_table", counting)
    return seen


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_run_and_a_resumed_run_read_the_input_once(tmp_path, scorer, reads, monkeypatch, kind):
    if kind == "jsonl":
        source = write(tmp_path / "in.jsonl", jsonl(PAIRS))
    else:
        source = write(
            tmp_path / "in.csv",
            "id,article,summary\n"
            + "".join(f"{p['id']},{p['article']},{p['summary']}\n" for p in PAIRS),
        )
    reference = str(tmp_path / f"reference.{kind}")
    files.score_file(scorer, source, reference, show_progress=False)
    assert reads == [source]

    output = str(tmp_path / f"out.{kind}")
    run = scorer.run

    def stop_after_two_batches(*args, **kwargs):
        for index, group in enumerate(run(*args, **kwargs)):
            if index == 2:
                raise KeyboardInterrupt
            yield group

    monkeypatch.setattr(scorer, "run", stop_after_two_batches)
    with pytest.raises(KeyboardInterrupt):
        files.score_file(scorer, source, output, show_progress=False)
    monkeypatch.setattr(scorer, "run", run)
    reads.clear()
    meta = files.score_file(scorer, source, output, show_progress=False)
    assert reads == [source]
    assert meta["rows"]["resumed"] == 8 and meta["rows"]["rows"] == 20
    with open(reference, "rb") as one, open(output, "rb") as other:
        assert one.read() == other.read()


def test_a_misnamed_column_is_refused_before_scoring_and_leaves_nothing(
    tmp_path, scorer, monkeypatch
):
    source = write(
        tmp_path / "in.jsonl",
        jsonl([{"text": p["article"], "summary": p["summary"]} for p in PAIRS]),
    )

    def run(windows, *args):
        for examples in windows:
            assert not examples, "a row reached the model"
            yield []

    monkeypatch.setattr(scorer, "run", run)
    output = str(tmp_path / "out.jsonl")
    with pytest.raises(
        ValueError,
        match=r"no 'article' field in any of the first 8 rows "
        r"\(columns: text, summary\)",
    ):
        files.score_file(scorer, source, output, show_progress=False)
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]


def test_a_partial_file_of_the_older_format_is_refused_by_name(tmp_path, scorer):
    source = write(tmp_path / "in.jsonl", jsonl(PAIRS[:4]))
    output = str(tmp_path / "out.jsonl")
    files.score_file(scorer, source, output, show_progress=False)
    meta = json.load(open(output + ".meta.json"))
    os.remove(output)
    with open(output + PARTIAL_SUFFIX, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"partial": meta["fingerprint"]}) + "\n")
        handle.write(json.dumps({"row": 0, "line": 1, "score": 0.5}) + "\n")
    with pytest.raises(
        ValueError,
        match=r"out.jsonl.partial.jsonl was written by an older "
        r"version .* pass overwrite=True",
    ):
        files.score_file(scorer, source, output, show_progress=False)
    files.score_file(scorer, source, output, show_progress=False, overwrite=True)
    assert len(open(output).readlines()) == 4


def test_the_row_estimate_follows_the_bytes_read(tmp_path):
    source = write(tmp_path / "in.jsonl", jsonl(PAIRS))
    job = files.job_lib.resolve_job(
        [source],
        str(tmp_path / "out.jsonl"),
        {"score": "x"},
        options=files.ScoringOptions(window_size=4),
    )
    reading = files.InputPass(job)
    assert reading.estimated_rows() is None
    rows = reading.rows()
    for _ in range(5):
        next(rows)
    assert 15 <= reading.estimated_rows() <= 25  # rows of about equal length
    list(rows)
    assert reading.estimated_rows() == 20 and reading.scan().num_rows == 20
