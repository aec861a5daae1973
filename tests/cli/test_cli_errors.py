"""Every subcommand reports a user error as one line and exit status 2.

The traceback appears only with `--debug`. The cases are the ones a new user
meets: missing files and directories, bad specs, bad gin files.
"""

import pytest

from seahorse_metrics.cli import main

from fixtures import paths


def run(capsys, argv):
    status = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in err
    return status, lines


CASES = {
    "prepare": (
        [
            "prepare",
            "--release_dir",
            "{tmp}/no_release",
            "--articles",
            "{tmp}/a.jsonl",
            "--output_dir",
            "{tmp}/out",
        ],
        "no_release/train.tsv: missing release split",
    ),
    "train": (
        ["train", "--gin_file", "gin/runs/no_such_run.gin"],
        "Gin file 'gin/runs/no_such_run.gin' not found",
    ),
    "score": (
        [
            "score",
            "--checkpoint",
            "{tmp}/no_checkpoint",
            "--input",
            "{tmp}/in.jsonl",
            "--output",
            "{tmp}/out.jsonl",
        ],
        "--input {tmp}/in.jsonl: file not found",
    ),
    "evaluate": (
        [
            "evaluate",
            "--benchmark",
            "seahorse:{tmp}/prepared:q9",
            "--metric",
            "baseline:length",
            "--output",
            "{tmp}/report",
        ],
        "bad benchmark spec 'seahorse:{tmp}/prepared:q9': unknown question q9",
    ),
}


@pytest.mark.parametrize("command", sorted(CASES))
def test_user_errors_are_one_line_and_exit_2(command, tmp_path, capsys):
    argv, message = CASES[command]
    argv = [a.format(tmp=tmp_path) for a in argv]
    status, lines = run(capsys, argv)
    assert status == 2 and len(lines) == 1, lines
    assert message.format(tmp=tmp_path) in lines[0]
    # --debug, before or after the subcommand: the exception with its traceback.
    for debug_argv in (["--debug"] + argv, argv + ["--debug"]):
        with pytest.raises((ValueError, OSError)):
            main(debug_argv)


def test_evaluate_names_a_missing_checkpoint(tmp_path, capsys):
    status, lines = run(
        capsys,
        [
            "evaluate",
            "--benchmark",
            "true:seahorse_metrics/data/sample/true",
            "--metric",
            f"checkpoint:{tmp_path}/no_such_checkpoint",
            "--output",
            str(tmp_path / "report"),
        ],
    )
    assert status == 2
    assert lines == [
        f"error: metric no_such_checkpoint: checkpoint {tmp_path}/no_such_checkpoint not found"
    ]


THRESHOLDS_FILE = (
    '{{"format": "seahorse-metrics-thresholds/1", "metrics": {{"q4": {{"threshold": {value}}}}}}}'
)


@pytest.mark.parametrize(
    "value, message",
    [
        ("nan", "got nan"),
        ("1.5", "got 1.5"),
        ("-0.1", "got -0.1"),
        ('file:"0.5"', "expected an object with a numeric 'threshold', got '0.5'"),
        ("file:1.5", "the threshold of 'q4' must be a number in [0, 1]"),
    ],
)
def test_thresholds_outside_0_1_or_strings_are_refused_up_front(value, message, tmp_path, capsys):
    """Issue 29 point 10: score and evaluate refuse them before reading anything else."""
    if value.startswith("file:"):
        path = tmp_path / "thresholds.json"
        path.write_text(THRESHOLDS_FILE.format(value=value[len("file:") :]))
        value = str(path)
    (tmp_path / "in.jsonl").write_text('{"article": "a b", "summary": "a"}\n')
    status, lines = run(
        capsys,
        [
            "score",
            "--checkpoint",
            f"q4={tmp_path}/no_checkpoint",
            "--input",
            str(tmp_path / "in.jsonl"),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--threshold",
            value,
        ],
    )
    assert status == 2 and len(lines) == 1 and message in lines[0], lines
    if value.startswith(str(tmp_path)):
        return  # evaluate reads tuned thresholds (any finite value) with --thresholds
    status, lines = run(
        capsys,
        [
            "evaluate",
            "--benchmark",
            "true:seahorse_metrics/data/sample/true",
            "--metric",
            f"checkpoint:{tmp_path}/no_checkpoint",
            "--threshold",
            value,
            "--output",
            str(tmp_path / "report"),
        ],
    )
    assert status == 2 and lines == [
        f"error: --threshold must be a number in [0, 1] (scores are probabilities; "
        f"a score at or above it counts as yes), got {float(value)!r}"
    ]
    assert not (tmp_path / "report").exists()


def test_an_input_that_is_no_regular_file_says_what_it_is(tmp_path, capsys):
    """Issue 29 point 10: not "file not found" for a directory, a FIFO or a device."""
    import os

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    (tmp_path / "dir.jsonl").mkdir()
    for path, said in (
        (tmp_path / "dir.jsonl", "is a directory"),
        (fifo, "is a named pipe (FIFO), which can be read only once"),
        ("/dev/null", "is a character device"),
        (tmp_path / "none.jsonl", "file not found"),
    ):
        status, lines = run(
            capsys,
            [
                "score",
                "--checkpoint",
                str(tmp_path / "ck"),
                "--input",
                str(path),
                "--output",
                str(tmp_path / "out.jsonl"),
            ],
        )
        assert status == 2 and len(lines) == 1 and f"--input {path}" in lines[0], lines
        assert said in lines[0], lines


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--cpu_devices", "0"], "--cpu_devices must be at least 1, got 0"),
        (["--cpu_devices", "2", "--engine", "ctranslate2"], "--cpu_devices is the jax engine's"),
        (["--cpu_devices", "3"], "--cpu_devices must be set before JAX starts its backends"),
        (
            ["--cpu_devices", "2", "--runner", "DirectRunner"],
            "--cpu_devices is for scoring in this process",
        ),
    ],
)
def test_cpu_devices_is_refused_where_it_cannot_apply(
    extra, message, tmp_path, capsys, monkeypatch
):
    import jax

    jax.devices()  # this test process's backends have started
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    (tmp_path / "in.jsonl").write_text('{"article": "a", "summary": "b"}\n')
    status, lines = run(
        capsys,
        [
            "score",
            "--checkpoint",
            str(tmp_path / "none"),
            "--input",
            str(tmp_path / "in.jsonl"),
            "--output",
            str(tmp_path / "out.jsonl"),
        ]
        + extra,
    )
    assert status == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "out.jsonl").exists()


def test_cpu_devices_agrees_with_xla_flags_or_says_which(monkeypatch):
    import os

    from seahorse_metrics.model.partitioning import split_host_cpu

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    split_host_cpu(4)  # the same count: nothing to do
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=4"
    with pytest.raises(
        ValueError, match="XLA_FLAGS already has --xla_force_host_platform_device_count=4"
    ):
        split_host_cpu(2)


@pytest.mark.parametrize("vocab_size", [2**40, 10**12])
def test_a_config_claiming_a_vocabulary_beyond_int32_is_one_line(
    vocab_size, tmp_path, capsys, tiny_hf_dir
):
    """Issue 48 point 7: an OverflowError traceback from JAX in score, evaluate and export."""
    import json
    import shutil

    checkpoint = shutil.copytree(tiny_hf_dir, tmp_path / "claims")
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps(dict(config, vocab_size=vocab_size)))
    source = tmp_path / "in.jsonl"
    source.write_text('{"article": "a fox.", "summary": "a fox."}\n')
    commands = [
        [
            "score",
            "--checkpoint",
            str(checkpoint),
            "--input",
            str(source),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--no_progress",
        ],
        [
            "evaluate",
            "--benchmark",
            "true:seahorse_metrics/data/sample/true",
            "--metric",
            f"checkpoint:{checkpoint}",
            "--output",
            str(tmp_path / "report"),
        ],
        [
            "export",
            "--checkpoint",
            str(checkpoint),
            "--to",
            "hf",
            "--output",
            str(tmp_path / "exported"),
        ],
    ]
    for argv in commands:
        status, lines = run(capsys, argv)
        assert status == 2 and len(lines) == 1, (argv[0], lines)
        assert (
            f"vocab_size must be 1 to 2147483647 (ids and indices are int32), got {vocab_size}"
            in lines[0]
        ), lines
        assert len(lines[0]) < 250, lines


# ------------------------------------------------------- mistyped flags (issue 48 point 13)
def _mistyped_flag_case(command):
    """A real flag of `command`, and it with one letter dropped."""
    from seahorse_metrics.cli import build_parser

    subparser = next(
        action for action in build_parser()._actions if action.dest == "command"
    ).choices[command]
    flag = max(
        (
            option
            for action in subparser._actions
            for option in action.option_strings
            if option.startswith("--") and option not in ("--help", "--debug")
        ),
        key=len,
    )
    return flag, flag[:4] + flag[5:]


@pytest.mark.parametrize(
    "command", ["prepare", "train", "score", "evaluate", "export", "plan", "distill", "serve"]
)
def test_a_mistyped_flag_is_named_with_the_closest_one_and_the_subcommand_usage(command, capsys):
    flag, mistyped = _mistyped_flag_case(command)
    with pytest.raises(SystemExit) as exited:
        main([command, mistyped, "x"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"usage: seahorse-metrics {command} " in err, err
    assert f"unrecognized argument {mistyped} (did you mean {flag}?)" in err, err
    assert "the following arguments are required" not in err, err


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["score", "--chekpoint", "ck", "--input", "in.jsonl", "--output", "out.jsonl"],
            "unrecognized argument --chekpoint (did you mean --checkpoint?)",
        ),
        (
            [
                "score",
                "--checkpoint",
                "ck",
                "--input",
                "in.jsonl",
                "--output",
                "out.jsonl",
                "--per_sentense",
            ],
            "unrecognized argument --per_sentense (did you mean --per_sentence?)",
        ),
        (
            [
                "score",
                "--checkpoint",
                "ck",
                "--input",
                "in.jsonl",
                "--output",
                "out.jsonl",
                "--per_sentense",
                "--zzz=1",
            ],
            "unrecognized arguments --per_sentense (did you mean --per_sentence?), --zzz",
        ),
        (
            ["train", "--gin_file", "g.gin", "--gin.MODEL_DIR=runs", "--gin_bindngs", "x"],
            "unrecognized argument --gin_bindngs (did you mean --gin_bindings?)",
        ),
        (
            [
                "score",
                "--checkpoint",
                "ck",
                "--input",
                "in.jsonl",
                "--output",
                "out.jsonl",
                "extra",
            ],
            "unrecognized argument extra",
        ),
    ],
)
def test_the_probe_s_mistyped_flags(argv, said, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert f"usage: seahorse-metrics {argv[0]} " in err and said in err, err
    assert "usage: seahorse-metrics [-h]" not in err, err


def test_beam_options_still_pass_with_runner():
    from seahorse_metrics.cli import parse_args

    args = parse_args(
        [
            "score",
            "--checkpoint",
            "ck",
            "--input",
            "in.jsonl",
            "--output",
            "out.jsonl",
            "--runner",
            "DirectRunner",
            "--direct_num_workers=2",
        ]
    )
    assert args.pipeline_args == ["--direct_num_workers=2"]
    # An abbreviation argparse accepts is no unknown flag.
    args = parse_args(
        [
            "score",
            "--checkpoint",
            "ck",
            "--input",
            "in.jsonl",
            "--output",
            "out.jsonl",
            "--per_sent",
        ]
    )
    assert args.per_sentence and args.pipeline_args == []


# ------------------------------------ options named as flags on the command line (point 14)
def _score_argv(tmp_path, checkpoint, *extra, rows='{"article": "a b c", "summary": "a b"}\n'):
    (tmp_path / "in.jsonl").write_text(rows)
    return [
        "score",
        "--checkpoint",
        checkpoint,
        "--input",
        str(tmp_path / "in.jsonl"),
        "--output",
        str(tmp_path / "out.jsonl"),
        "--no_progress",
        *extra,
    ]


def _one_line(capsys, argv):
    status, lines = run(capsys, argv)
    assert status == 2 and len(lines) == 1, lines
    return lines[0]


def _assert_flags_only(line, *flags):
    import re

    for flag in flags:
        assert flag in line, line
    # A library keyword: `name=` right after a word character or "(", outside a spec.
    assert not re.search(r"(?<![\w:,-])[a-z_]+=(?:[\s,)]|True|False|\.\.\.)", line), line
    assert "Scorer.load" not in line, line


@pytest.mark.parametrize(
    "extra, flags",
    [
        (["--max_input_length", "1"], ["--max_input_length must be >= 2"]),
        (["--chunk_overlap", "-1"], ["--chunk_overlap must be >= 0"]),
        (["--batch_size", "0"], ["--batch_size must be >= 1"]),
        (["--window_size", "0"], ["--window_size must be >= 1"]),
        (["--buckets", "0,64"], ["--buckets: bucket lengths must be positive"]),
        (
            ["--sentence_aggregate", "share@x"],
            ["--sentence_aggregate must be min, mean or share@T"],
        ),
    ],
)
def test_bad_scoring_options_are_named_as_flags(extra, flags, tmp_path, capsys, tiny_hf_dir):
    line = _one_line(capsys, _score_argv(tmp_path, tiny_hf_dir, *extra))
    _assert_flags_only(line, *flags)


def test_the_python_api_names_the_same_options_as_keywords():
    from seahorse_metrics.scoring.units import InputSettings

    with pytest.raises(ValueError, match=r"^max_input_length must be >= 2"):
        InputSettings(max_input_length=1)


def test_a_missing_column_and_a_rerun_name_flags_only(tmp_path, capsys, tiny_hf_dir):
    line = _one_line(
        capsys, _score_argv(tmp_path, tiny_hf_dir, rows='{"text": "a b c", "sum": "a b"}\n')
    )
    _assert_flags_only(line, "--premise_field and --hypothesis_field", "--question_field")
    (tmp_path / "out.jsonl").write_text("{}\n")  # an output no run of these settings wrote
    line = _one_line(capsys, _score_argv(tmp_path, tiny_hf_dir))
    _assert_flags_only(line, "pass --overwrite to start over")


def test_a_malformed_release_names_lenient_only(tmp_path, capsys):
    from fixtures import tiny_data

    release = tiny_data.write_release(str(tmp_path / "release"))
    with open(tmp_path / "release" / "validation.tsv", "a", encoding="utf-8") as handle:
        handle.write("xsum-validation-1\ten-US\tbroken row\n")
    articles = tiny_data.write_articles(str(tmp_path / "a.jsonl"))
    line = _one_line(
        capsys,
        [
            "prepare",
            "--release_dir",
            release,
            "--articles",
            articles,
            "--output_dir",
            str(tmp_path / "out"),
        ],
    )
    _assert_flags_only(line, "--lenient")
    assert "strict" not in line, line


def test_a_ratings_file_without_a_field_names_the_spec_options(tmp_path, capsys):
    (tmp_path / "r.jsonl").write_text('{"premise": "a b", "summary": "a", "rating": 1}\n')
    line = _one_line(
        capsys,
        [
            "evaluate",
            "--benchmark",
            f"ratings:{tmp_path}/r.jsonl",
            "--metric",
            "baseline:length",
            "--output",
            str(tmp_path / "rep"),
        ],
    )
    _assert_flags_only(line, "ratings:FILE:premise=F,hypothesis=F,rating=F,id=F")


def test_evaluate_options_are_named_as_its_flags(tmp_path, capsys):
    base = [
        "evaluate",
        "--benchmark",
        "true:seahorse_metrics/data/sample/true",
        "--metric",
        "baseline:length",
        "--output",
        str(tmp_path / "rep"),
    ]
    _assert_flags_only(
        _one_line(capsys, base + ["--browser_rows", "-1"]), "--browser_rows must be >= 0"
    )
    # A metric spec's option is no flag of evaluate: named as the spec names it.
    line = _one_line(
        capsys,
        [
            "evaluate",
            "--benchmark",
            "true:seahorse_metrics/data/sample/true",
            "--metric",
            f"checkpoint:{tmp_path}/none,max_input_length=1",
            "--output",
            str(tmp_path / "rep"),
        ],
    )
    assert "--max_input_length" not in line, line


def test_a_t5x_checkpoint_without_vocabulary_names_vocab_flag(tmp_path, capsys, tiny_hf_dir):
    from seahorse_metrics.checkpoints import load_checkpoint

    from fixtures import tiny_model

    _, params = load_checkpoint(tiny_hf_dir)
    step_dir = tiny_model.write_t5x_checkpoint(str(tmp_path / "t5x"), params, step=1)
    line = _one_line(capsys, _score_argv(tmp_path, step_dir))
    _assert_flags_only(line, "--vocab PATH")
    with pytest.raises(FileNotFoundError, match=r"vocab=PATH"):
        from seahorse_metrics import Scorer

        Scorer.load(step_dir)


def test_beam_messages_name_flags_inside_a_command():
    from seahorse_metrics import option_names
    from seahorse_metrics.scoring import job

    assert "overwrite=True" in str(job.refuse_other_settings("out.jsonl", None))
    with option_names.for_command(["--overwrite", "--id_field"]):
        _assert_flags_only(str(job.refuse_other_settings("out.jsonl", None)), "--overwrite")


def test_no_message_pairs_a_flag_with_its_keyword():
    """The probe's "(premise_field=, hypothesis_field=)" and "--overwrite (overwrite=True)"."""
    import pathlib
    import re

    pattern = re.compile(r"--\w+[^\"\n]{0,40}\((?:\w+=[^)]*,?\s*)+\)|strict=False; CLI")
    root = pathlib.Path(paths.REPO) / "seahorse_metrics"
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        if "engines" not in path.parts  # the lead's (reported)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


@pytest.mark.parametrize(
    "extra, said",
    [
        (
            ["--scan_layers"],
            "--scan_layers is the jax engine's; drop it with the ctranslate2 engine, "
            "or score with --engine jax",
        ),
        (["--packing"], "--packing is the jax engine's"),
        (["--mesh", "data=1"], "--mesh is the jax engine's"),
        (
            ["--dtype", "bfloat16"],
            "--dtype bfloat16 is the jax engine's; the ctranslate2 engine "
            "computes in float32, or int8 with --quantize int8",
        ),
    ],
)
def test_what_only_the_jax_engine_does_is_refused_naming_flags(
    extra, said, tmp_path, capsys, tiny_hf_dir
):
    pytest.importorskip("ctranslate2")
    source = tmp_path / "in.jsonl"
    source.write_text('{"article": "a fox.", "summary": "a fox."}\n')
    status, lines = run(
        capsys,
        [
            "score",
            "--checkpoint",
            tiny_hf_dir,
            "--input",
            str(source),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--engine",
            "ctranslate2",
            *extra,
        ],
    )
    assert status == 2 and len(lines) == 1 and said in lines[0], lines
    assert "=True" not in lines[0] and "'int8'" not in lines[0]
