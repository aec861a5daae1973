"""The Apache Beam scoring pipeline (`score --runner`) on the bundled sample, tiny model.

Runners, as Beam 2.77 behaves here: the FnApiRunner (the Python direct runner;
what `DirectRunner` runs when Prism cannot be fetched) fails the pipeline at
the first failed bundle, without retrying; the BundleBasedDirectRunner retries
a failed bundle (four attempts). Both are tested for rows written exactly once.
"""

import csv
import functools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from seahorse_metrics import MultiScorer
from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.cli import parse_args
from seahorse_metrics.scoring import beam as beam_scoring
from seahorse_metrics.scoring import files
from seahorse_metrics.scoring.job import META_SUFFIX
from seahorse_metrics.scoring.shards import SETTINGS_FILE, SHARDS_SUFFIX

from fixtures import paths
from fixtures.beam_faults import FailOnceHandler
from fixtures.fake_remote_fs import remote

FAST = {"xla_backend_optimization_level": 0}
SCORER = dict(
    max_input_length=256,
    bucket_lengths=(64, 128, 256),
    batch_size=8,
    window_size=64,
    compiler_options=FAST,
)
TWO_WORKERS = [
    "--runner=FnApiRunner",
    "--direct_num_workers=2",
    "--direct_running_mode=multi_processing",
]
IN_PROCESS = ["--runner=FnApiRunner", "--direct_running_mode=in_memory"]
SHARD_SIZES = (128, 64, 100)  # Windows of 64 rows line up with those of the whole file.
TESTS_DIR = paths.TESTS


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return str(path)


def without_row_id(rows):
    return [{k: v for k, v in row.items() if k != beam_scoring.ROW_ID_FIELD} for row in rows]


@pytest.fixture(scope="module")
def sample_rows(tmp_path_factory):
    """The first rows of the bundled sample's validation split, prepared."""
    import seahorse_metrics.data as data_package
    from seahorse_metrics.data.articles import LocalArticleSource
    from seahorse_metrics.data.prepare import prepare

    sample = os.path.join(os.path.dirname(data_package.__file__), "sample", "seahorse")
    out = tmp_path_factory.mktemp("prepared")
    prepare(sample, LocalArticleSource(os.path.join(sample, "articles.jsonl")), str(out))
    return read_jsonl(out / "validation.jsonl")[: sum(SHARD_SIZES)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory, sample_rows):
    """The rows in three input files, part-0.jsonl ... part-2.jsonl."""
    folder = tmp_path_factory.mktemp("inputs")
    paths, start = [], 0
    for index, size in enumerate(SHARD_SIZES):
        paths.append(write_jsonl(folder / f"part-{index}.jsonl", sample_rows[start : start + size]))
        start += size
    return paths


@pytest.fixture(scope="module")
def scorer(tiny_hf_dir):
    """The in-process scorer with the pipeline's settings."""
    return MultiScorer.load({"score": tiny_hf_dir}, **SCORER)


@pytest.fixture(scope="module")
def in_process_rows(tmp_path_factory, scorer, sample_rows):
    """`score`'s output for all the rows as one file."""
    folder = tmp_path_factory.mktemp("in_process")
    output = str(folder / "out.jsonl")
    files.score_file(
        scorer, write_jsonl(folder / "all.jsonl", sample_rows), output, show_progress=False
    )
    return read_jsonl(output)


@pytest.fixture
def worker_env(monkeypatch, tmp_path_factory):
    """Beam's worker processes import the test fixtures, and share compiled programs."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", TESTS_DIR + (os.pathsep + path if path else ""))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "jax"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def score(shards, output, checkpoint, pipeline_args, name="score", **kwargs):
    pattern = os.path.join(os.path.dirname(shards[0]), "part-*.jsonl")
    return beam_scoring.score_files(
        [pattern],
        str(output),
        {name: checkpoint},
        scorer_options=SCORER,
        pipeline_args=pipeline_args,
        show_progress=False,
        **kwargs,
    )


def check_merged(output, shards, in_process_rows):
    """Every row once, in input order, with the in-process scores bit for bit."""
    rows = read_jsonl(output)
    assert without_row_id(rows) == in_process_rows  # float32 values as their shortest decimals
    np.testing.assert_array_equal(
        np.float32([r["score"] for r in rows]), np.float32([r["score"] for r in in_process_rows])
    )
    expected_ids = [
        f"{path}:{line}" for path, size in zip(shards, SHARD_SIZES) for line in range(1, size + 1)
    ]
    assert [r[beam_scoring.ROW_ID_FIELD] for r in rows] == expected_ids


@pytest.mark.slow
def test_two_workers_three_shards_equal_score_row_for_row(
    tmp_path, tiny_hf_dir, shards, in_process_rows, worker_env
):
    output = tmp_path / "scores.jsonl"
    meta = score(shards, output, tiny_hf_dir, TWO_WORKERS, merge=True)

    check_merged(output, shards, in_process_rows)
    rows = meta["rows"]
    assert rows["rows"] == sum(SHARD_SIZES) == rows["scored"] + rows["bad"]
    assert rows["bad"] == rows["resumed"] == 0 and 0 < rows["truncated"] < rows["rows"]
    assert [(i["path"], i["rows"], i["windows"]) for i in meta["inputs"]] == [
        (path, size, -(-size // 64)) for path, size in zip(shards, SHARD_SIZES)
    ]
    assert meta["this_run"]["scored"] == rows["rows"]
    counters = meta["this_run"]["counters"]
    assert counters["rows"] == counters["scored"] == rows["rows"]
    assert counters["load_model_latency_milli_secs"]["count"] == 2  # once per worker
    assert meta["stats"]["truncation"]["truncated"] == rows["truncated"]
    assert meta["settings"]["metrics"] == ["score"]
    # One shard per window, each with its window's rows.
    written = sorted(os.listdir(str(output) + SHARDS_SUFFIX))
    assert [n for n in written if n.endswith(".jsonl")] == [
        "00000-000000.jsonl",
        "00000-000001.jsonl",
        "00001-000000.jsonl",
        "00002-000000.jsonl",
        "00002-000001.jsonl",
    ]
    assert not [n for n in written if ".tmp-" in n]


@pytest.mark.slow
def test_two_workers_score_a_multi_question_metric_as_in_process(
    tmp_path, multi_question_dir, shards, sample_rows, worker_env
):
    """One multi-question checkpoint on two Beam workers: six named columns per row, each
    bit for bit what the in-process scorer writes for the whole file."""
    folder = tmp_path / "in_process"
    folder.mkdir()
    scorer = MultiScorer.load({"mq": multi_question_dir}, **SCORER)
    files.score_file(
        scorer,
        write_jsonl(folder / "all.jsonl", sample_rows),
        str(folder / "out.jsonl"),
        show_progress=False,
    )
    expected = read_jsonl(folder / "out.jsonl")
    output = tmp_path / "scores.jsonl"
    meta = score(shards, output, multi_question_dir, TWO_WORKERS, name="mq", merge=True)
    rows = read_jsonl(output)
    columns = [f"mq_q{question}" for question in range(1, 7)]
    assert meta["settings"]["metrics"] == columns == scorer.names
    assert without_row_id(rows) == expected
    for column in columns:
        np.testing.assert_array_equal(
            np.float32([r[column] for r in rows]), np.float32([r[column] for r in expected])
        )
    assert len({r["mq_q1"] for r in rows}) > 1 and rows[0]["mq_q1"] != rows[0]["mq_q6"]
    assert meta["this_run"]["counters"]["load_model_latency_milli_secs"]["count"] == 2


@pytest.mark.slow
def test_failed_bundle_fails_the_run_and_the_rerun_resumes(
    tmp_path, tiny_hf_dir, shards, in_process_rows, worker_env
):
    output = tmp_path / "scores.jsonl"
    marker = tmp_path / "failed"
    failing = functools.partial(FailOnceHandler, window=(2, 1), marker=str(marker))
    with pytest.raises(Exception, match="injected failure"):
        score(shards, output, tiny_hf_dir, TWO_WORKERS, make_handler=failing)
    assert marker.exists()
    shard_dir = str(output) + SHARDS_SUFFIX
    assert not os.path.exists(os.path.join(shard_dir, "00002-000001.jsonl"))
    assert not os.path.exists(str(output) + META_SUFFIX)
    kept = [n for n in os.listdir(shard_dir) if n.endswith(".jsonl")]

    meta = score(shards, output, tiny_hf_dir, TWO_WORKERS, merge=True, make_handler=failing)
    check_merged(output, shards, in_process_rows)
    rows = meta["rows"]
    assert rows["rows"] == rows["scored"] == sum(SHARD_SIZES)
    assert rows["resumed"] == sum(len(read_jsonl(os.path.join(shard_dir, n))) for n in kept)
    assert meta["this_run"]["scored"] == rows["rows"] - rows["resumed"]
    assert meta["this_run"]["counters"]["rows"] == meta["this_run"]["scored"]


def test_retried_bundle_writes_its_rows_once(tmp_path, tiny_hf_dir, shards, in_process_rows):
    output = tmp_path / "scores.jsonl"
    marker = tmp_path / "failed"
    failing = functools.partial(FailOnceHandler, window=(0, 1), marker=str(marker))
    meta = score(
        shards,
        output,
        tiny_hf_dir,
        ["--runner=BundleBasedDirectRunner"],
        merge=True,
        make_handler=failing,
    )
    assert marker.exists()  # the first attempt failed; Beam retried the bundle
    check_merged(output, shards, in_process_rows)
    assert meta["rows"]["rows"] == meta["rows"]["scored"] == sum(SHARD_SIZES)
    assert meta["rows"]["resumed"] == 0


def test_inputs_checkpoint_and_output_on_another_filesystem(
    tmp_path, tiny_hf_dir, shards, in_process_rows
):
    """As on Cloud Storage: nothing is opened as a local path, the checkpoint
    is copied to the worker, shards and output are written through Beam."""
    output = tmp_path / "scores.jsonl"
    pattern = remote(os.path.join(os.path.dirname(shards[0]), "part-*.jsonl"))
    meta = beam_scoring.score_files(
        [pattern],
        remote(str(output)),
        {"score": remote(tiny_hf_dir)},
        scorer_options=SCORER,
        pipeline_args=IN_PROCESS,
        merge=True,
        show_progress=False,
    )
    rows = read_jsonl(output)
    assert without_row_id(rows) == in_process_rows
    assert rows[0][beam_scoring.ROW_ID_FIELD] == f"{remote(shards[0])}:1"
    assert meta["rows"]["rows"] == len(rows) and meta["merged"] == remote(str(output))
    assert meta["settings"]["checkpoints"]["score"] != remote(tiny_hf_dir)  # a local copy


BAD_JSONL = [
    # A column named like the output's: kept as input_score, said in the meta (issue 48 point 19).
    json.dumps({"article": "the fox jumps over the dog.", "summary": "a fox jumps.", "score": 0.5}),
    json.dumps({"article": "no summary here"}),
    "{not json",
    json.dumps({"article": "numbers", "summary": 42}),
    json.dumps(["a", "list"]),
]
BAD_CSV = (
    "article,summary,lang\n"
    "the fox jumps over the dog.,a fox jumps.,en\n"
    "too,many,cells,here\n"
    "an article,,en\n"
    'another article,"a summary, quoted",de\n'
)


def test_bad_rows_are_kept_with_their_error_as_score_keeps_them(tmp_path, tiny_hf_dir, scorer):
    bad_jsonl = tmp_path / "in" / "a.jsonl"
    bad_jsonl.parent.mkdir()
    bad_jsonl.write_text("\n".join(BAD_JSONL) + "\n", encoding="utf-8")
    bad_csv = tmp_path / "in" / "b.csv"
    bad_csv.write_text(BAD_CSV, encoding="utf-8")
    output = tmp_path / "out.jsonl"
    meta = beam_scoring.score_files(
        [str(bad_jsonl), str(bad_csv)],
        str(output),
        {"score": tiny_hf_dir},
        scorer_options=SCORER,
        pipeline_args=IN_PROCESS,
        merge=True,
        show_progress=False,
    )
    rows = read_jsonl(output)
    expected = []
    for source in (bad_jsonl, bad_csv):
        files.score_file(
            scorer, str(source), str(tmp_path / f"{source.name}.jsonl"), show_progress=False
        )
        expected += read_jsonl(tmp_path / f"{source.name}.jsonl")
    assert without_row_id(rows) == expected
    errors = [(r[beam_scoring.ROW_ID_FIELD], r["error"]) for r in rows if "error" in r]
    assert errors == [
        (f"{bad_jsonl}:2", "missing field 'summary'"),
        (f"{bad_jsonl}:3", "invalid JSON (Expecting property name enclosed in double quotes)"),
        (f"{bad_jsonl}:4", "field 'summary' is not text (got int)"),
        (f"{bad_jsonl}:5", "expected a JSON object, got list"),
        (f"{bad_csv}:3", "4 columns, the header has 3"),
        (f"{bad_csv}:4", "field 'summary' is empty"),
    ]
    assert meta["rows"]["rows"] == 9 and meta["rows"]["bad"] == 6 and meta["rows"]["scored"] == 3
    assert [(f"{b['file']}:{b['line']}", b["error"]) for b in meta["bad_rows"]] == errors
    assert rows[0]["input_score"] == 0.5 and rows[0]["score"] != 0.5
    assert meta["renamed_input_columns"] == {"score": "input_score"}


def test_id_field_and_csv_merge_of_windows_with_other_columns(tmp_path, tiny_hf_dir):
    pair = {"article": "the fox jumps over the dog.", "summary": "a fox jumps."}
    source = tmp_path / "ids.jsonl"
    source.write_text(
        "\n".join(
            [
                json.dumps(dict(pair, id="a")),
                json.dumps(dict(pair, id="b")),
                json.dumps(dict(pair, id="c", extra=1)),
                json.dumps(pair),  # no id
                "{not json",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    options = dict(SCORER, window_size=2)  # three windows with different columns
    output = tmp_path / "out.csv"
    meta = beam_scoring.score_files(
        [str(source)],
        str(output),
        {"score": tiny_hf_dir},
        scorer_options=options,
        id_field="id",
        pipeline_args=IN_PROCESS,
        merge=True,
        show_progress=False,
    )
    expected = tmp_path / "score.csv"
    files.score_file(
        MultiScorer.load({"score": tiny_hf_dir}, **options),
        str(source),
        str(expected),
        show_progress=False,
    )
    with open(expected, encoding="utf-8") as a, open(output, encoding="utf-8") as b:
        expected_reader, reader = csv.DictReader(a), csv.DictReader(b)
        expected_rows, rows = list(expected_reader), list(reader)
        assert (
            [c for c in reader.fieldnames if c != beam_scoring.ROW_ID_FIELD]
            == expected_reader.fieldnames
            == ["article", "summary", "id", "extra", "score", "error"]
        )
    assert [r.pop(beam_scoring.ROW_ID_FIELD) for r in rows] == [
        "",
        "",
        "",
        f"{source}:4",
        f"{source}:5",
    ]
    assert rows[3].pop("error") == "missing field 'id' (the rows' id)"
    assert expected_rows[3].pop("error") == "" and expected_rows[3].pop("score")
    assert rows[3].pop("score") == ""
    assert rows == expected_rows
    assert meta["rows"]["bad"] == 2 and meta["id_field"] == "id"
    assert sorted(n for n in os.listdir(str(output) + SHARDS_SUFFIX) if n.endswith(".csv")) == [
        f"00000-00000{w}.csv" for w in range(3)
    ]

    clash = tmp_path / "clash.jsonl"
    clash.write_text(json.dumps(dict(pair, row_id=7)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="clash.jsonl:1: the input has a 'row_id' field"):
        beam_scoring.score_files(
            [str(clash)],
            str(tmp_path / "clash_out.jsonl"),
            {"score": tiny_hf_dir},
            scorer_options=SCORER,
            pipeline_args=IN_PROCESS,
            show_progress=False,
        )


def test_duplicate_ids_are_refused_as_evaluate_refuses_them(tmp_path, tiny_hf_dir):
    """Issue 29 point 10: `score --id_field` with an id on two rows (across input files too)."""
    pair = {"article": "the fox jumps over the dog.", "summary": "a fox jumps."}
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps(dict(pair, id=i)) + "\n" for i in ("a", "b")))
    second.write_text("".join(json.dumps(dict(pair, id=i)) + "\n" for i in ("c", "a")))
    with pytest.raises(
        ValueError,
        match=r"--id_field 'id': 2 rows have the id 'a' \(.*first"
        r".jsonl:1, .*second.jsonl:2\); evaluate refuses",
    ):
        beam_scoring.score_files(
            [str(first), str(second)],
            str(tmp_path / "out.jsonl"),
            {"score": tiny_hf_dir},
            scorer_options=SCORER,
            id_field="id",
            pipeline_args=IN_PROCESS,
            show_progress=False,
        )


def test_undecodable_input_follows_the_policy_of_score(tmp_path, tiny_hf_dir, scorer):
    source = tmp_path / "latin1.jsonl"
    source.write_bytes(
        json.dumps(
            {"article": "caf\u00e9 au lait", "summary": "a caf\u00e9"}, ensure_ascii=False
        ).encode("latin-1")
        + b"\n"
    )
    output = tmp_path / "out.jsonl"
    run = functools.partial(
        beam_scoring.score_files,
        [str(source)],
        str(output),
        {"score": tiny_hf_dir},
        scorer_options=SCORER,
        pipeline_args=IN_PROCESS,
        merge=True,
        show_progress=False,
    )
    try:
        files.score_file(scorer, str(source), str(tmp_path / "score.jsonl"), show_progress=False)
    except ValueError as error:  # `score` stops, naming the file and line: so does the pipeline
        assert str(source) in str(error)
        with pytest.raises(ValueError) as raised:
            run()
        assert str(raised.value).startswith(str(error))
    else:  # `score` keeps the row: so does the pipeline, with the same fields
        run()
        assert without_row_id(read_jsonl(output)) == read_jsonl(tmp_path / "score.jsonl")


def test_reruns_check_inputs_options_and_earlier_shards(tmp_path, tiny_hf_dir, shards):
    output = str(tmp_path / "scores.jsonl")
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        beam_scoring.score_files([str(tmp_path / "none-*.jsonl")], output, {"q": tiny_hf_dir})
    with pytest.raises(ValueError, match="--temp_locaton"):
        beam_scoring.score_files(
            shards, output, {"q": tiny_hf_dir}, pipeline_args=["--temp_locaton=/tmp"]
        )
    with pytest.raises(ValueError, match="unsupported file type"):
        beam_scoring.score_files(shards, str(tmp_path / "scores.parquet"), {"q": tiny_hf_dir})
    shard_dir = tmp_path / ("scores.jsonl" + SHARDS_SUFFIX)
    shard_dir.mkdir()
    (shard_dir / SETTINGS_FILE).write_text(json.dumps({"inputs": []}))
    with pytest.raises(ValueError, match="another input or other settings"):
        beam_scoring.score_files(shards, output, {"q": tiny_hf_dir}, pipeline_args=IN_PROCESS)
    (tmp_path / "scores.jsonl").write_text("{}\n")
    # The Python API names its keyword (the command line its flag: tests/cli/test_cli_errors.py).
    with pytest.raises(ValueError, match="overwrite=True"):
        beam_scoring.score_files(shards, output, {"q": tiny_hf_dir}, pipeline_args=IN_PROCESS)


def test_cli_runner_writes_what_score_writes(tmp_path, tiny_hf_dir, shards, caplog, capsys):
    shape = [
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
    source = shards[1]
    expected = str(tmp_path / "score.csv")
    assert (
        cli_main(
            ["score", "--checkpoint", tiny_hf_dir, "--input", source, "--output", expected] + shape
        )
        == 0
    )
    output = str(tmp_path / "beam.csv")
    command = [
        "score",
        "--checkpoint",
        tiny_hf_dir,
        "--input",
        source,
        "--output",
        output,
        "--runner",
        "DirectRunner",
        "--merge",
        "--direct_running_mode=in_memory",
    ] + shape
    assert cli_main(command) == 0
    with open(expected, encoding="utf-8") as a, open(output, encoding="utf-8") as b:
        expected_rows, rows = list(csv.DictReader(a)), list(csv.DictReader(b))
    assert [r.pop(beam_scoring.ROW_ID_FIELD) for r in rows] == [
        f"{source}:{line}" for line in range(1, len(expected_rows) + 1)
    ]
    assert rows == expected_rows
    meta = json.load(open(output + META_SUFFIX))
    assert meta["rows"]["rows"] == len(rows) and meta["merged"] == output
    with caplog.at_level("INFO"):
        assert cli_main(command) == 0
    assert "nothing to score" in caplog.text

    args = parse_args(command + ["--project", "my-project", "--temp_location=gs://b/tmp"])
    assert args.pipeline_args == [
        "--direct_running_mode=in_memory",
        "--project",
        "my-project",
        "--temp_location=gs://b/tmp",
    ]
    with pytest.raises(SystemExit):  # Beam options without --runner are refused as before
        parse_args(
            [
                "score",
                "--checkpoint",
                tiny_hf_dir,
                "--input",
                source,
                "--output",
                output,
                "--project",
                "my-project",
            ]
        )
    # Several inputs without --runner: one line naming what needs the pipeline, status 2.
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                tiny_hf_dir,
                "--input",
                source,
                "--input",
                source,
                "--output",
                str(tmp_path / "two.jsonl"),
            ]
        )
        == 2
    )
    assert "need --runner" in capsys.readouterr().err


def test_cli_runner_with_questions_threshold_and_calibration_writes_what_score_writes(
    tmp_path, tiny_hf_dir
):
    """Issue 45 point 3: `--calibration` with `--runner` (refused before) adds
    the calibrated column through the one place every runner applies it."""
    from seahorse_metrics.calibration.maps import CalibrationMap, CalibrationSet

    platt = CalibrationMap("platt", {"slope": 0.5, "intercept": 0.3})
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps(CalibrationSet("platt", {}, {"score": platt}).to_dict()))
    pairs = [
        ("the fox jumps over the dog.", "a fox jumps."),
        ("a cat sat on the mat.", "a dog sat."),
    ]
    questions = ("what does the fox do?", "who sat down?", "where?")
    rows = [{"article": a, "summary": h, "question": q} for a, h in pairs for q in questions]
    source = write_jsonl(tmp_path / "qfs.jsonl", rows)
    shape = [
        "--max_input_length",
        "256",
        "--buckets",
        "64,128,256",
        "--batch_size",
        "8",
        "--window_size",
        "64",
        "--no_progress",
        "--question_field",
        "question",
        "--threshold",
        "0.002",
        "--calibration",
        str(calibration),
    ]
    expected = str(tmp_path / "score.jsonl")
    assert (
        cli_main(
            ["score", "--checkpoint", tiny_hf_dir, "--input", source, "--output", expected] + shape
        )
        == 0
    )
    output = str(tmp_path / "beam.jsonl")
    assert (
        cli_main(
            [
                "score",
                "--checkpoint",
                tiny_hf_dir,
                "--input",
                source,
                "--output",
                output,
                "--runner",
                "DirectRunner",
                "--merge",
                "--direct_running_mode=in_memory",
            ]
            + shape
        )
        == 0
    )
    expected_rows = read_jsonl(expected)
    assert without_row_id(read_jsonl(output)) == expected_rows
    assert [r["score_decision"] for r in expected_rows] == [
        "yes" if r["score"] >= 0.002 else "no" for r in expected_rows
    ]
    np.testing.assert_allclose(
        [r["score_calibrated"] for r in expected_rows],
        platt.apply([r["score"] for r in expected_rows]),
        rtol=1e-12,
    )
    meta = json.loads(open(output + ".meta.json", encoding="utf-8").read())
    assert meta["calibration"] == {"score": platt.to_dict()}
    # The question is part of the input: one pair scores differently under each question.
    for start in range(0, len(rows), len(questions)):
        assert len({r["score"] for r in expected_rows[start : start + len(questions)]}) > 1


def test_a_pipeline_run_where_every_row_failed_exits_non_zero(tmp_path, tiny_hf_dir, capsys):
    source = write_jsonl(
        tmp_path / "bad.jsonl", [{"article": "a text", "abstract": "no summary"}] * 3
    )
    command = [
        "score",
        "--checkpoint",
        tiny_hf_dir,
        "--input",
        source,
        "--output",
        str(tmp_path / "out.jsonl"),
        "--runner",
        "DirectRunner",
        "--direct_running_mode=in_memory",
        "--max_input_length",
        "64",
        "--buckets",
        "64",
        "--no_progress",
    ]
    assert cli_main(command) == 2
    assert "none of the 3 rows could be scored" in capsys.readouterr().err


def test_dataflow_script_adds_dataflow_options_that_beam_knows(tmp_path):
    shim = tmp_path / "python"  # Stands in for the interpreter: parses what it is given.
    shim.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent("""\
        import json, sys
        from seahorse_metrics.cli import parse_args
        from seahorse_metrics.scoring.beam import check_pipeline_args
        assert sys.argv[1:3] == ["-m", "seahorse_metrics"], sys.argv
        args = parse_args(sys.argv[3:])
        check_pipeline_args(args.pipeline_args)
        print(json.dumps({"runner": args.runner, "input": args.input, "merge": args.merge,
                          "pipeline_args": args.pipeline_args}))
        """)
    )
    shim.chmod(0o755)
    script = os.path.join(os.path.dirname(TESTS_DIR), "launch", "beam_dataflow.sh")
    command = [
        script,
        "--checkpoint",
        "q4=gs://b/q4",
        "--input",
        "gs://b/in/*.jsonl",
        "--output",
        "gs://b/out.jsonl",
        "--merge",
    ]
    env = dict(
        os.environ,
        PYTHON=str(shim),
        PROJECT="p",
        REGION="us-central1",
        BUCKET="gs://b",
        IMAGE="img",
    )
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed["runner"] == "DataflowRunner" and parsed["merge"]
    assert parsed["input"] == ["gs://b/in/*.jsonl"]
    assert {
        "--project=p",
        "--temp_location=gs://b/tmp",
        "--sdk_container_image=img",
        "--number_of_worker_harness_threads=1",
    } <= set(parsed["pipeline_args"])
    del env["BUCKET"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "set BUCKET" in result.stderr


def _children(pid):
    """PIDs of the processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_beam_workers_stop_soon_after_score_is_killed(tmp_path, tiny_hf_dir, worker_env):
    """Issue 29 point 8: kill -9 of `score --runner DirectRunner` (two multi_processing
    workers) leaves no worker scoring on; the shards written stay whole."""
    import signal
    import time

    rows = [
        {
            "article": f"the fox number {i} jumps over the lazy dog, again and again.",
            "summary": f"fox {i} jumps.",
        }
        for i in range(6000)
    ]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    output = tmp_path / "out.jsonl"
    shard_dir = str(output) + SHARDS_SUFFIX
    command = [
        sys.executable,
        "-m",
        "seahorse_metrics",
        "score",
        "--checkpoint",
        tiny_hf_dir,
        "--input",
        str(source),
        "--output",
        str(output),
        "--runner",
        "DirectRunner",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
        "--max_input_length",
        "64",
        "--buckets",
        "64",
        "--batch_size",
        "8",
        "--window_size",
        "16",
        "--no_progress",
    ]
    # Killed, Beam leaves its (empty) beam-pipeline-temp* folder behind: in tmp_path.
    env = dict(os.environ, TMPDIR=str(tmp_path))
    with open(tmp_path / "stderr.txt", "w") as stderr:
        launcher = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    workers = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and launcher.poll() is None:
            written = os.listdir(shard_dir) if os.path.isdir(shard_dir) else []
            if len([n for n in written if n.endswith(".counts.json")]) >= 4:
                break
            time.sleep(0.2)
        assert launcher.poll() is None, (tmp_path / "stderr.txt").read_text()[-3000:]
        workers = _children(launcher.pid)
        assert len(workers) >= 2, workers
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=60)
        # Following their launcher, workers stop within a second on a quiet machine; on
        # their own, Beam's workers notice the broken connection after ~4 s with this tiny
        # model (much later while a large model scores a long bundle).
        deadline = time.monotonic() + 3
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if _alive(pid)], "workers outlived the launcher by 3 s"
        finished = len([n for n in os.listdir(shard_dir) if n.endswith(".counts.json")])
        assert finished < len(rows) // 16  # killed mid-run
        for name in os.listdir(shard_dir):
            if name.endswith(".jsonl"):
                assert len(read_jsonl(os.path.join(shard_dir, name))) == 16, name
    finally:
        launcher.kill()
        launcher.wait(timeout=60)
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
