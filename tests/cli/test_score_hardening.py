"""`seahorse-metrics score` with bad inputs, stale columns, and two runs on one output.

Issue 19's points 1, 3, 4, 5, 6, 8 and 9 as they concern scoring files; the
tiny random model scores (its numbers do not matter, only that every row is
accounted for).
"""

import json
import os
import threading

import pytest

from seahorse_metrics import MultiScorer
from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.evaluation.score_files import read_score_table
from seahorse_metrics.io.locks import LOCK_SUFFIX
from seahorse_metrics.scoring import files
from seahorse_metrics.scoring.job import META_SUFFIX

FAST = {"xla_backend_optimization_level": 0}
ARGS = [
    "--max_input_length",
    "64",
    "--buckets",
    "64",
    "--batch_size",
    "4",
    "--window_size",
    "8",
    "--no_progress",
]


def score(checkpoint, source, output, *extra):
    return cli_main(
        ["score", "--checkpoint", checkpoint, "--input", str(source), "--output", str(output)]
        + ARGS
        + list(extra)
    )


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("error: "), err
    assert "Traceback" not in "\n".join(err)
    return err[-1]


@pytest.fixture(scope="module")
def scorer(tiny_hf_dir):
    return MultiScorer.load(
        {"score": tiny_hf_dir},
        max_input_length=64,
        bucket_lengths=(64,),
        batch_size=4,
        window_size=8,
        compiler_options=FAST,
    )


def write_jsonl(path, records):
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


PAIRS = [
    {"article": f"the fox number {i} jumps over the dog.", "summary": f"fox {i} jumps."}
    for i in range(20)
]


# ---------------------------------------------------------------- point 1
def test_a_stray_quote_in_a_tsv_input_does_not_swallow_rows(tmp_path, tiny_hf_dir):
    source = tmp_path / "in.tsv"
    source.write_text(
        "article\tsummary\n"
        'The fox jumps.\t"A fox, he said.\n'
        "The dog sleeps.\tA dog sleeps.\n"
        'The cat runs.\tIt ran".\n'
        "The owl sees.\tAn owl.\n",
        encoding="utf-8",
    )
    output = tmp_path / "out.tsv"
    assert score(tiny_hf_dir, source, output) == 0
    meta = json.load(open(str(output) + META_SUFFIX))
    assert meta["rows"]["rows"] == meta["rows"]["scored"] == 4
    assert meta["input_table"]["quoting"] == "none" and meta["input_table"]["lines"] == 5
    lines = output.read_text(encoding="utf-8").splitlines()
    # The summary with the quote is written back quoted, so it reads back exactly.
    assert len(lines) == 5 and lines[1].split("\t")[1] == '"""A fox, he said."'


# ---------------------------------------------------------------- point 3
def test_output_columns_are_fresh_and_evaluate_never_reads_an_error_as_a_score(tmp_path, scorer):
    source = write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"article": "a fox.", "summary": "a fox.", "score": 0.5, "error": "old error"},
            {"article": "a dog.", "summary": "", "score": 0.9},
            {"article": "a cat.", "summary": "a cat.", "id": "c"},
        ],
    )
    output = tmp_path / "out.jsonl"
    summary = files.score_file(scorer, str(source), str(output), show_progress=False)
    assert summary["renamed_input_columns"] == {"score": "input_score", "error": "input_error"}
    rows = read_jsonl(output)
    assert rows[0]["score"] != 0.5 and "error" not in rows[0]
    assert rows[0]["input_score"] == 0.5 and rows[0]["input_error"] == "old error"
    assert rows[1]["error"] == "field 'summary' is empty" and "score" not in rows[1]
    assert rows[1]["input_score"] == 0.9
    # The Python API's records the same way.
    records = list(
        scorer.score_records(
            [
                {"article": "a dog.", "summary": "", "score": 0.9},
                {"article": "a fox.", "summary": "a fox.", "error": "old"},
            ]
        )
    )
    assert records[0] == {
        "article": "a dog.",
        "summary": "",
        "input_score": 0.9,
        "error": "field 'summary' is empty",
    }
    assert "error" not in records[1] and records[1]["input_error"] == "old"
    # A scores file whose error rows still carry a score (as old outputs did):
    # the score of a row with an error is never read.
    stale = write_jsonl(
        tmp_path / "stale.jsonl",
        [{"id": "a", "score": 0.5, "error": "field 'summary' is empty"}, {"id": "b", "score": 0.7}],
    )
    table = read_score_table(str(stale))
    assert table.scores[0] != table.scores[0] and table.scores[1] == 0.7  # NaN, then the score


# ---------------------------------------------------------------- point 4
def test_undecodable_input_stops_with_its_line_unless_the_encoding_is_given(
    tmp_path, tiny_hf_dir, capsys
):
    source = tmp_path / "latin1.csv"
    source.write_bytes("article,summary\nA fox.,A fox.\nUn café.,Le café.\n".encode("latin-1"))
    output = tmp_path / "out.csv"
    assert score(tiny_hf_dir, source, output) == 2
    assert "latin1.csv:3: not valid utf-8 text" in error_line(capsys)
    assert not output.exists()
    assert score(tiny_hf_dir, source, output, "--encoding", "latin-1") == 0
    assert "Le café." in output.read_text(encoding="utf-8")
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(PAIRS[0]).encode() + b"\n")
    assert score(tiny_hf_dir, bom, tmp_path / "bom_out.jsonl") == 0


# ---------------------------------------------------------------- points 5 and 6
def test_user_errors_are_one_line_with_what_to_do(tmp_path, tiny_hf_dir, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert score(tiny_hf_dir, empty, tmp_path / "o.csv") == 2
    assert "empty.csv: empty file; expected a header row" in error_line(capsys)

    header_only = tmp_path / "header.csv"
    header_only.write_text("article,summary\n")
    assert score(tiny_hf_dir, header_only, tmp_path / "o.csv") == 2
    assert "no data rows" in error_line(capsys)

    wrong = tmp_path / "wrong.csv"
    wrong.write_text("doc,text\nA fox.,A fox.\n")
    assert score(tiny_hf_dir, wrong, tmp_path / "o.csv") == 2
    line = error_line(capsys)
    assert "no 'article' or 'summary' column (columns: doc, text)" in line
    assert "--premise_field and --hypothesis_field" in line
    assert not (tmp_path / "o.csv").exists()

    source = write_jsonl(tmp_path / "in.jsonl", PAIRS[:2])
    assert score(tiny_hf_dir, source, source) == 2
    assert "is the input file" in error_line(capsys)
    assert score(str(tmp_path / "no_such_dir"), source, tmp_path / "o.jsonl") == 2
    line = error_line(capsys)
    assert "checkpoint directory" in line and "no_such_dir does not exist" in line
    assert "vocab" not in line

    damaged = tmp_path / "damaged"
    os.makedirs(damaged)
    for name in os.listdir(tiny_hf_dir):
        with open(os.path.join(tiny_hf_dir, name), "rb") as handle:
            data = handle.read()
        if name == "model.safetensors":
            data = data[: len(data) // 2]
        (damaged / name).write_bytes(data)
    assert score(str(damaged), source, tmp_path / "o.jsonl") == 2
    assert "model.safetensors" in error_line(capsys)
    with pytest.raises(Exception):  # --debug: the traceback, not one line
        score(str(damaged), source, tmp_path / "o.jsonl", "--debug")


def test_a_run_where_every_row_failed_exits_non_zero(tmp_path, tiny_hf_dir, capsys):
    source = write_jsonl(
        tmp_path / "in.jsonl", [{"article": "a", "summary": ""}, {"article": "", "summary": "b"}]
    )
    output = tmp_path / "out.jsonl"
    assert score(tiny_hf_dir, source, output) == 2
    line = error_line(capsys)
    assert "none of the 2 rows could be scored (line 1: field 'summary' is empty)" in line
    assert [r["error"] for r in read_jsonl(output)] == [
        "field 'summary' is empty",
        "field 'article' is empty",
    ]


# ---------------------------------------------------------------- point 8
def test_a_second_run_on_the_same_output_refuses_naming_the_first(
    tmp_path, scorer, tiny_hf_dir, capsys, monkeypatch
):
    source = write_jsonl(tmp_path / "in.jsonl", PAIRS)
    output = tmp_path / "out.jsonl"
    started, release = threading.Event(), threading.Event()
    run = scorer.run

    def paused_run(*args, **kwargs):
        for index, group in enumerate(run(*args, **kwargs)):
            yield group
            if index == 0:
                started.set()
                assert release.wait(120)

    monkeypatch.setattr(scorer, "run", paused_run)
    first = threading.Thread(
        target=files.score_file,
        args=(scorer, str(source), str(output)),
        kwargs={"show_progress": False},
    )
    first.start()
    try:
        assert started.wait(120)
        assert score(tiny_hf_dir, source, output) == 2
        line = error_line(capsys)
        assert "out.jsonl is being written by another run" in line
        assert f"PID {os.getpid()}" in line
    finally:
        release.set()
        first.join()
    rows = read_jsonl(output)
    assert [r["summary"] for r in rows] == [p["summary"] for p in PAIRS]
    assert not os.path.exists(str(output) + LOCK_SUFFIX)


def test_the_partial_file_is_read_by_records(tmp_path, scorer, monkeypatch):
    """Lines another writer appended meanwhile cannot misplace this run's rows."""
    source = write_jsonl(tmp_path / "in.jsonl", PAIRS)
    reference = tmp_path / "reference.jsonl"
    files.score_file(scorer, str(source), str(reference), show_progress=False)
    output = tmp_path / "out.jsonl"
    partial = str(output) + files.PARTIAL_SUFFIX
    run = scorer.run

    def run_with_a_second_writer(*args, **kwargs):
        for index, group in enumerate(run(*args, **kwargs)):
            yield group
            with open(partial, "rb") as handle:
                first_record = handle.readlines()[1]
            with open(partial, "ab") as other:  # what a second process appends
                other.write(first_record)

    monkeypatch.setattr(scorer, "run", run_with_a_second_writer)
    files.score_file(scorer, str(source), str(output), show_progress=False)
    assert output.read_bytes() == reference.read_bytes()


# ---------------------------------------------------------------- point 9
def test_a_json_array_input_and_a_duplicated_header(tmp_path, tiny_hf_dir, capsys):
    source = tmp_path / "in.json"
    source.write_text(json.dumps(PAIRS[:3], indent=2), encoding="utf-8")
    output = tmp_path / "out.json"
    assert score(tiny_hf_dir, source, output) == 0
    rows = json.loads(output.read_text(encoding="utf-8"))
    assert [r["summary"] for r in rows] == [p["summary"] for p in PAIRS[:3]]
    assert all(isinstance(r["score"], float) for r in rows)
    duplicated = tmp_path / "dup.csv"
    duplicated.write_text("article,summary,summary\nA fox.,one,two\n")
    assert score(tiny_hf_dir, duplicated, tmp_path / "dup_out.csv") == 2
    assert "dup.csv:1: columns 2 and 3 both have 'summary' in the header" in error_line(capsys)


# ---------------------------------------------------------------- issue 29 point 4
LONG_SUMMARY = " ".join(
    f"the summary goes on about fox {i} and its many friends." for i in range(12)
)


def test_a_summary_crowding_out_the_article_is_an_error_or_cut_and_flagged(
    tmp_path, scorer, tiny_hf_dir
):
    """Never `premise: hypothesis: <cut summary>` in silence: an error by default (also with
    --long_inputs chunk), or with --long_summaries cut the article's quarter and a flag."""
    from seahorse_metrics.data.inputs import SummaryTooLongError

    rows = [
        {"article": "the fox jumps over the dog. " * 8, "summary": LONG_SUMMARY},
        {"article": "a cat sleeps on the warm mat all day. " * 8, "summary": LONG_SUMMARY},
        PAIRS[0],
    ]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    for extra in ([], ["--long_inputs", "chunk"]):
        output = tmp_path / f"default{len(extra)}.jsonl"
        assert score(tiny_hf_dir, source, output, *extra) == 0
        written = read_jsonl(output)
        for row in written[:2]:
            assert "score" not in row and "ignore the article" in row["error"], row
            assert "--long_summaries cut" in row["error"]
        assert "error" not in written[2] and "summary_cut" not in written[2]
        meta = json.load(open(str(output) + META_SUFFIX))
        assert meta["rows"]["bad"] == 2 and meta["rows"]["scored"] == 1

    output = tmp_path / "cut.csv"
    assert score(tiny_hf_dir, source, output, "--long_summaries", "cut") == 0
    written = read_score_rows(output)
    assert [row["summary_cut"] for row in written] == ["True", "True", "False"]
    assert written[0]["score"] != written[1]["score"]  # the articles differ, and count
    assert "error" not in written[0] or not written[0]["error"]

    with pytest.raises(SummaryTooLongError, match="pair 1: the summary takes"):
        scorer.score([PAIRS[0]["article"], rows[0]["article"]], [PAIRS[0]["summary"], LONG_SUMMARY])


def read_score_rows(path):
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------- issue 29 point 10
def test_gzip_and_standard_streams_in_and_out(tmp_path, tiny_hf_dir, monkeypatch, caplog):
    """`.jsonl.gz`/`.csv.gz` inputs and outputs; `-` for standard input (kept beside the
    output, so the same command resumes) and standard output (in the input's format)."""
    import csv
    import gzip
    import io
    import sys

    source = write_jsonl(tmp_path / "in.jsonl", PAIRS[:6])
    assert score(tiny_hf_dir, source, tmp_path / "plain.csv") == 0
    expected = (tmp_path / "plain.csv").read_text(encoding="utf-8")
    packed = tmp_path / "in.jsonl.gz"
    packed.write_bytes(gzip.compress(source.read_bytes()))
    assert score(tiny_hf_dir, packed, tmp_path / "out.csv.gz") == 0
    assert gzip.decompress((tmp_path / "out.csv.gz").read_bytes()).decode() == expected
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]

    stdin = io.TextIOWrapper(io.BytesIO(source.read_bytes()))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert score(tiny_hf_dir, "-", tmp_path / "from_stdin.csv") == 0
    assert (tmp_path / "from_stdin.csv").read_text(encoding="utf-8") == expected
    assert (tmp_path / "from_stdin.csv.stdin.jsonl").read_bytes() == source.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source.read_bytes())))
    with caplog.at_level("INFO"):
        assert score(tiny_hf_dir, "-", tmp_path / "from_stdin.csv") == 0
    assert "nothing to do" in caplog.text  # the same input: the finished run is recognised

    stdout = io.TextIOWrapper(io.BytesIO())
    monkeypatch.setattr(sys, "stdout", stdout)
    csv_source = tmp_path / "in.csv"
    csv_source.write_text(expected, encoding="utf-8")
    assert score(tiny_hf_dir, csv_source, "-") == 0
    rows = list(csv.DictReader(io.StringIO(stdout.buffer.getvalue().decode())))
    assert [row["input_score"] for row in rows] == [
        row["score"] for row in csv.DictReader(io.StringIO(expected))
    ]
    assert [row["score"] for row in rows] == [row["input_score"] for row in rows]


def test_an_output_directory_is_refused_before_scoring(tmp_path, tiny_hf_dir, capsys, monkeypatch):
    from seahorse_metrics.scoring import scorer as scorer_module

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(scorer_module.MultiScorer, "load", never)
    source = write_jsonl(tmp_path / "in.jsonl", PAIRS[:2])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        assert score(tiny_hf_dir, source, tmp_path / "out", *extra) == 2
        message = error_line(capsys)
        assert f"--output {tmp_path / 'out'} is a directory" in message, message
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_a_full_disk_names_the_file_and_leaves_no_temporary_then_resumes(
    tmp_path, tiny_hf_dir, capsys, monkeypatch
):
    import errno

    source = write_jsonl(tmp_path / "in.jsonl", PAIRS[:6])
    output = tmp_path / "out.jsonl"
    real_fsync = os.fsync

    def disk_full_for_temporaries(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", disk_full_for_temporaries)
    assert score(tiny_hf_dir, source, output) == 2
    message = error_line(capsys)
    assert f"No space left on device while writing {output}" in message, message
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "out.jsonl.partial.jsonl"]
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert score(tiny_hf_dir, source, output) == 0
    assert len(read_jsonl(output)) == 6


def test_score_file_refuses_a_threshold_outside_0_1(tmp_path, scorer):
    """Issue 29 point 10, for the Python API: 1.5 would mark every row "no"."""
    source = write_jsonl(tmp_path / "in.jsonl", PAIRS[:2])
    for threshold in (1.5, -0.5, float("nan"), "0.5"):
        with pytest.raises(ValueError, match=r"must be a number in \[0, 1\]"):
            files.score_file(
                scorer,
                str(source),
                str(tmp_path / "out.jsonl"),
                thresholds={"score": threshold},
                show_progress=False,
            )
    assert not (tmp_path / "out.jsonl").exists()


# ------------------------------------------------------- issue 48 point 1
LONE_SURROGATE_LINE = '{"article": "a plant grows.", "summary": "A plant \\ud800 here."}\n'


def test_a_lone_surrogate_is_its_rows_error_and_a_resume_goes_on(
    tmp_path, tiny_hf_dir, capsys, monkeypatch
):
    import errno

    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps(PAIRS[0]) + "\n" + LONE_SURROGATE_LINE + json.dumps(PAIRS[1]) + "\n",
        encoding="utf-8",
    )
    output = tmp_path / "out.jsonl"
    real_fsync = os.fsync

    def disk_full_for_temporaries(fd):  # every row reaches the partial file, not the output
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", disk_full_for_temporaries)
    assert score(tiny_hf_dir, source, output) == 2
    assert "No space left" in error_line(capsys)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert score(tiny_hf_dir, source, output) == 0  # the resume reads the bad row's entry
    rows = read_jsonl(output)
    assert "score" in rows[0] and "score" in rows[2]
    assert rows[1]["summary"] == "A plant \ud800 here."  # read back exactly as it was given
    assert rows[1]["error"] == (
        "field 'summary' holds a lone surrogate U+D800 at character 8, which is no Unicode text"
    )
    meta = json.load(open(str(output) + META_SUFFIX))
    assert meta["rows"]["scored"] == 2 and meta["rows"]["bad"] == 1
    as_csv = tmp_path / "out.csv"
    assert score(tiny_hf_dir, source, as_csv) == 0
    assert "A plant \\ud800 here." in as_csv.read_text(encoding="utf-8").splitlines()[2]


def test_the_python_api_names_the_pair_with_a_lone_surrogate(scorer):
    with pytest.raises(ValueError, match="pair 1: the hypothesis holds a lone surrogate U\\+DC00"):
        scorer.score(["a fox.", "a dog."], ["a fox.", "a \udc00 dog."])
    records = list(
        scorer.score_records(
            [{"article": "a", "summary": "b \ud83d"}, {"article": "a fox.", "summary": "a fox."}]
        )
    )
    assert "lone surrogate" in records[0]["error"] and "score" in records[1]
