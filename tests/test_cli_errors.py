"""Every subcommand reports a user error as one line and exit status 2.

The traceback appears only with `--debug`. The cases are the ones a new user
meets: missing files and directories, bad specs, bad gin files.
"""
import pytest

from seahorse_metrics.cli import main


def run(capsys, argv):
    status = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in err
    return status, lines


CASES = {
    "prepare": (["prepare", "--release_dir", "{tmp}/no_release", "--articles", "{tmp}/a.jsonl",
                 "--output_dir", "{tmp}/out"], "no_release/train.tsv: missing release split"),
    "train": (["train", "--gin_file", "gin/runs/no_such_run.gin"],
              "Gin file 'gin/runs/no_such_run.gin' not found"),
    "score": (["score", "--checkpoint", "{tmp}/no_checkpoint", "--input", "{tmp}/in.jsonl",
               "--output", "{tmp}/out.jsonl"], "--input {tmp}/in.jsonl: file not found"),
    "evaluate": (["evaluate", "--benchmark", "seahorse:{tmp}/prepared:q9", "--metric",
                  "baseline:length", "--output", "{tmp}/report"],
                 "bad benchmark spec 'seahorse:{tmp}/prepared:q9': unknown question q9"),
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
    status, lines = run(capsys, ["evaluate", "--benchmark", "true:seahorse_metrics/data/sample/true",
                                 "--metric", f"checkpoint:{tmp_path}/no_such_checkpoint",
                                 "--output", str(tmp_path / "report")])
    assert status == 2
    assert lines == [f"error: metric no_such_checkpoint: checkpoint {tmp_path}/no_such_checkpoint "
                     "not found"]
