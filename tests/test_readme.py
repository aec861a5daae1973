"""The README's commands work: `run` blocks run on the sample, `parse` blocks parse.

README.md marks each fenced block with an HTML comment on the line before it:
`<!-- readme: run -->` (executed in order, in a scratch directory that sees
the repository's `seahorse_metrics/` and `gin/`), or `<!-- readme: parse -->`
(needs downloads or a cluster: every `seahorse-metrics` command goes through
the real argument parser, every repository file it names must exist, and
launch scripts get their arguments parsed as the trainer's; T5X's own
`python -m t5x.train|t5x.eval` commands may name only this repository's gin
files and T5X's own that `T5X_GIN_FILES` lists, with literal `--gin.` values).
"""
from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys

from fixtures.compile_speed import as_users_compile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
# T5X's own gin files the README may name (read in google-research/t5x).
T5X_GIN_FILES = {"t5x/configs/runs/finetune.gin", "t5x/configs/runs/eval.gin"} | {
    f"t5x/examples/t5/mt5/{size}.gin" for size in ("small", "base", "large", "xl", "xxl")}
T5X_SCRIPTS = ("t5x.train", "t5x.eval")
_BLOCK = re.compile(r"(?:<!-- readme: (run|parse) -->\n)?```(\w*)\n(.*?)```", re.S)


def readme_blocks() -> list[tuple[str, str, str]]:
    """(mark or '', language, body) of every fenced block, in order."""
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    return [(mark or "", language, body) for mark, language, body in _BLOCK.findall(text)]


def shell_commands(body: str) -> list[list[str]]:
    """The commands of a shell block: continuation lines joined, comments and
    `&&` chains split, leading VAR=value assignments dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    commands = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            words = shlex.split(part)
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words.pop(0)
            if words:
                commands.append(words)
    return commands


def test_readme_starts_with_the_two_setup_commands():
    mark, language, body = readme_blocks()[0]
    with open(README, encoding="utf-8") as handle:
        assert handle.readline().startswith("```")
    commands = [line.split("#")[0].strip() for line in body.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_every_other_code_block_is_marked():
    unmarked = [body[:60] for mark, _, body in readme_blocks()[1:] if not mark]
    assert not unmarked, f"README blocks without a <!-- readme: run|parse --> mark: {unmarked}"


def _check_repository_paths(words: list[str]) -> None:
    for word in words:
        value = word.split("=", 1)[-1]
        for candidate in (word, value):
            if candidate.startswith(("gin/", "launch/", "bench/", "demo_data/")):
                assert os.path.exists(os.path.join(REPO_ROOT, candidate)), \
                    f"README names {candidate}, which is not in the repository"


def _parse_cli(arguments: list[str]) -> None:
    from seahorse_metrics.cli import parse_args

    try:
        args = parse_args(arguments)
    except SystemExit as error:  # argparse's way of rejecting a command line
        raise AssertionError(f"`seahorse-metrics {' '.join(arguments)}` does not parse") from error
    if getattr(args, "runner", None):  # The Beam pipeline options must be Beam's.
        from seahorse_metrics.scoring.beam import check_pipeline_args

        check_pipeline_args(args.pipeline_args)


def _check_t5x_command(words: list[str]) -> None:
    """A `python -m t5x.train|eval` line: known gin files, gin values that are literals."""
    gin_files = [word.split("=", 1)[1] for word in words[3:] if word.startswith("--gin_file=")]
    assert gin_files, words
    for path in gin_files:
        assert os.path.isfile(os.path.join(REPO_ROOT, path)) or path in T5X_GIN_FILES, \
            f"README names the gin file {path}, neither in the repository nor T5X's known ones"
    for word in words[3:]:
        if word.startswith("--gin."):
            ast.literal_eval(word.split("=", 1)[1])  # gin parses values as Python literals
        else:
            assert word.startswith("--gin_file="), f"unchecked T5X flag {word}"


def test_parse_blocks_use_real_commands_and_files():
    checked = 0
    for mark, language, body in readme_blocks():
        if mark != "parse":
            continue
        assert language == "sh", body[:60]
        for words in shell_commands(body):
            _check_repository_paths(words)
            if words[0] == "sbatch":
                words = words[next(i for i, w in enumerate(words) if w.startswith("launch/")):]
            if words[0] == "seahorse-metrics":
                _parse_cli(words[1:])
            elif words[0].startswith("launch/"):
                assert os.access(os.path.join(REPO_ROOT, words[0]), os.X_OK), words[0]
                # launch/beam_* scripts take `score`'s arguments, the others the trainer's.
                command = "score" if os.path.basename(words[0]).startswith("beam_") else "train"
                _parse_cli([command, *words[1:]])
            elif words[:2] == ["python", "-m"] and words[2] in T5X_SCRIPTS:
                _check_t5x_command(words)
            elif words[0] == "python":
                assert words[1].startswith("bench/"), words
            else:
                assert words[0] in ("git", "pip", "gsutil"), f"unchecked README command {words}"
            checked += 1
    assert checked >= 10


def test_every_subcommand_is_documented_with_its_help():
    from seahorse_metrics.cli import SUBCOMMANDS

    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    for name in SUBCOMMANDS:
        assert f"seahorse-metrics {name} " in text, name
        result = subprocess.run([sys.executable, "-m", "seahorse_metrics", name, "--help"],
                                capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
        assert result.returncode == 0, result.stderr
        assert "usage: seahorse-metrics " + name in result.stdout


def test_run_blocks_work_on_the_sample(tmp_path):
    """Runs the `run` blocks in README order, as a newcomer would."""
    for name in ("seahorse_metrics", "gin"):
        os.symlink(os.path.join(REPO_ROOT, name), tmp_path / name)
    env = as_users_compile(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    ran = 0
    for mark, language, body in readme_blocks():
        if mark != "run":
            continue
        if language == "sh":
            command = ["bash", "-euo", "pipefail", "-c", body]
        else:
            assert language == "python", language
            command = [sys.executable, "-c", body]
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, f"README block failed:\n{body}\n{result.stderr[-3000:]}"
        ran += 1
    assert ran >= 3
    assert (tmp_path / "scores" / "test.jsonl").is_file()
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "seahorse/q4" in report and "true/frank" in report


def test_readme_score_commands_name_no_metric_like_a_column_of_their_input():
    """Issue 48 point 19: `--checkpoint q4=...` on a prepared split (which
    holds the human label `q4`) renamed the labels to `input_q4` in every
    example that scored one."""
    import dataclasses

    from seahorse_metrics.data.prepare import prepared_record
    from seahorse_metrics.data.seahorse import SeahorseRow

    fields = {field.name: None for field in dataclasses.fields(SeahorseRow)}
    fields["ratings"] = (None,) * 6
    prepared_columns = set(prepared_record(SeahorseRow(**fields), "", "test"))
    scored = 0
    lines = [line.strip() for mark, language, body in readme_blocks() if mark and language == "sh"
             for line in re.sub(r"\\\n\s*", " ", body).splitlines()]
    for line in lines:
        words = shlex.split(line.split(" #", 1)[0]) if line.startswith("seahorse-metrics") else []
        if words[:2] != ["seahorse-metrics", "score"] or not any(
                word.startswith("prepared/") for word in words):
            continue
        scored += 1
        names = [spec.split("=", 1)[0] for flag, spec in zip(words, words[1:])
                 if flag == "--checkpoint" and "=" in spec]
        assert names and not prepared_columns & set(names), words
    assert scored >= 4
