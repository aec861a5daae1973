"""The README's and the documentation's commands work: `run` blocks run, `parse` blocks parse.

README.md and every page of docs/ mark each fenced block with an HTML comment on the line
before it: `<!-- readme: run -->` (executed, README first, then the pages in the order of
mkdocs.yml's navigation, in one bash session in an empty directory outside the repository,
as a newcomer following along in one terminal would), or `<!-- readme: parse -->` (needs
downloads or a cluster: every `seahorse-metrics` command goes through the real argument
parser, every repository file it names must exist, and launch scripts get their arguments
parsed as the trainer's; T5X's own `python -m t5x.train|t5x.eval` commands may name only this
repository's gin files and T5X's own that `T5X_GIN_FILES` lists, with literal `--gin.` values;
a BibTeX block must be one well-formed entry).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
DOCS = os.path.join(REPO_ROOT, "docs")
# T5X's own gin files the documentation may name (read in google-research/t5x).
T5X_GIN_FILES = {"t5x/configs/runs/finetune.gin", "t5x/configs/runs/eval.gin"} | {
    f"t5x/examples/t5/mt5/{size}.gin" for size in ("small", "base", "large", "xl", "xxl")
}
T5X_SCRIPTS = ("t5x.train", "t5x.eval")
# Programs a parse block may run besides seahorse-metrics, launch/ scripts and bench/ scripts.
OTHER_COMMANDS = ("git", "pip", "gsutil", "mkdocs", "ruff")
_BLOCK = re.compile(r"(?:<!-- readme: (run|parse) -->\n)?```(\w*)\n(.*?)```", re.S)
# The bound: the README is the front door, the manual is docs/.
README_MAX_LINES = 250


def nav_pages(nav=None) -> list[str]:
    """The documentation's pages in mkdocs.yml's navigation order (paths under docs/)."""
    if nav is None:
        with open(os.path.join(REPO_ROOT, "mkdocs.yml"), encoding="utf-8") as handle:
            nav = yaml.safe_load(handle)["nav"]
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def documents() -> list[str]:
    """README.md, then every documentation page in navigation order."""
    return [README] + [os.path.join(DOCS, page) for page in nav_pages()]


def blocks(path: str) -> list[tuple[str, str, str, int]]:
    """(mark or '', language, body, line) of every fenced block of `path`, in order."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return [
        (match[1] or "", match[2], match[3], text.count("\n", 0, match.start()) + 1)
        for match in _BLOCK.finditer(text)
    ]


def all_blocks() -> list[tuple[str, str, str, str, int]]:
    """(document, mark, language, body, line) across README.md and the pages."""
    return [
        (os.path.relpath(path, REPO_ROOT), *block) for path in documents() for block in blocks(path)
    ]


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
    _, language, body, _ = blocks(README)[0]
    with open(README, encoding="utf-8") as handle:
        assert handle.readline().startswith("```")
    commands = [line.split("#")[0].strip() for line in body.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_is_a_front_door_not_a_manual():
    with open(README, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:2] == ["## Install", "## Quick start"], headings


def test_every_page_is_in_the_navigation():
    on_disk = {
        os.path.relpath(os.path.join(folder, name), DOCS)
        for folder, _, names in os.walk(DOCS)
        for name in names
        if name.endswith(".md")
    }
    assert on_disk == set(nav_pages()), on_disk ^ set(nav_pages())


def test_every_other_code_block_is_marked():
    unmarked = [
        f"{document}:{line}"
        for index, (document, mark, _, _, line) in enumerate(all_blocks())
        if index and not mark
    ]
    assert not unmarked, f"code blocks without a <!-- readme: run|parse --> mark: {unmarked}"


def _check_repository_paths(words: list[str]) -> None:
    for word in words:
        value = word.split("=", 1)[-1]
        for candidate in (word, value):
            if candidate.startswith(("gin/", "launch/", "bench/", "demo_data/", "docs/")):
                assert os.path.exists(os.path.join(REPO_ROOT, candidate)), (
                    f"the documentation names {candidate}, which is not in the repository"
                )


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
        assert os.path.isfile(os.path.join(REPO_ROOT, path)) or path in T5X_GIN_FILES, (
            f"the documentation names the gin file {path}, neither here nor T5X's known ones"
        )
    for word in words[3:]:
        if word.startswith("--gin."):
            ast.literal_eval(word.split("=", 1)[1])  # gin parses values as Python literals
        else:
            assert word.startswith("--gin_file="), f"unchecked T5X flag {word}"


def _check_shell_command(words: list[str]) -> None:
    _check_repository_paths(words)
    if words[0] == "sbatch":
        words = words[next(i for i, w in enumerate(words) if w.startswith("launch/")) :]
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
    elif words[0] == "make":
        _check_make_command(words[1:])
    else:
        assert words[0] in OTHER_COMMANDS, f"unchecked command {words}"


def _check_make_command(words: list[str]) -> None:
    """`make [NAME=value ...] target ...`: the Makefile's own targets and `?=` variables."""
    with open(os.path.join(REPO_ROOT, "Makefile"), encoding="utf-8") as handle:
        makefile = handle.read()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    variables = set(re.findall(r"^(\w+) \?=", makefile, re.M))
    for word in words:
        if "=" in word:
            assert word.split("=", 1)[0] in variables, f"make: no variable {word}"
        else:
            assert word in targets, f"make: no target {word}"


def _check_bibtex(body: str) -> None:
    """One `@type{key, field = {...}, ...}` entry, braces balanced, with its key fields."""
    assert re.match(r"@\w+\{[\w:-]+,", body.strip()), body[:60]
    depth = 0
    for character in body:
        depth += {"{": 1, "}": -1}.get(character, 0)
        assert depth >= 0, "a BibTeX brace closes before it opens"
    assert depth == 0, "unbalanced braces in the BibTeX entry"
    for field in ("title", "author", "year"):
        assert re.search(rf"^\s*{field}\s*=", body, re.M), f"the BibTeX entry lacks {field}"


def test_parse_blocks_use_real_commands_and_files():
    checked = 0
    for document, mark, language, body, line in all_blocks():
        if mark != "parse":
            continue
        if language == "bibtex":
            _check_bibtex(body)
            checked += 1
            continue
        assert language == "sh", f"{document}:{line}: a parse block must be sh or bibtex"
        for words in shell_commands(body):
            _check_shell_command(words)
            checked += 1
    assert checked >= 40


def test_every_subcommand_is_documented_with_its_help(capsys):
    """(`main` runs in this process: the `seahorse-metrics` entry point itself runs in child
    processes in the run blocks and in the wheel test.)"""
    from seahorse_metrics.cli import SUBCOMMANDS, main

    text = ""
    for path in documents():
        with open(path, encoding="utf-8") as handle:
            text += handle.read()
    for name in SUBCOMMANDS:
        assert f"seahorse-metrics {name} " in text, name
        with pytest.raises(SystemExit) as exited:
            main([name, "--help"])
        assert exited.value.code == 0, name
        assert "usage: seahorse-metrics " + name in capsys.readouterr().out


def session_script(run_blocks: list[tuple[str, str, str, int]]) -> str:
    """One bash script of the run blocks: each announces itself on stderr first, and
    a Python block runs as `python -` with its body on standard input."""
    parts = ["set -euo pipefail"]
    for index, (document, language, body, line) in enumerate(run_blocks):
        parts.append(f"echo '### block {index}: {document}:{line}' >&2")
        if language == "sh":
            parts.append(body)
        else:
            assert language == "python", f"{document}:{line}: run blocks are sh or python"
            parts.append(f"python - <<'SEAHORSE_BLOCK_{index}'\n{body}SEAHORSE_BLOCK_{index}")
    return "\n".join(parts) + "\n"


def test_run_blocks_work_on_the_sample_from_any_directory(tmp_path):
    """Runs the `run` blocks in order, in one shell, in an empty directory that is not
    the repository's: the Quick start and the guides work from wherever the user is."""
    run_blocks = [
        (document, language, body, line)
        for document, mark, language, body, line in all_blocks()
        if mark == "run"
    ]
    assert len(run_blocks) >= 10 and run_blocks[0][0] == "README.md"
    # The suite's XLA level (compile_speed): what is tested is the documentation's commands;
    # test_demo.py runs the main job at the users' level.
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)  # the repository is found as installed, not from here
    result = subprocess.run(
        ["bash", "-c", session_script(run_blocks)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=880,
    )
    started = re.findall(r"^### block (\d+): (.*)$", result.stderr, re.M)
    assert result.returncode == 0, (
        f"the block at {started[-1][1] if started else '?'} failed:\n{result.stderr[-4000:]}"
    )
    assert len(started) == len(run_blocks)
    assert (tmp_path / "scores" / "test.jsonl").is_file()
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "seahorse/q4" in report and "true/frank" in report
    calibrated = (tmp_path / "scores" / "test_calibrated.jsonl").read_text(encoding="utf-8")
    assert {"q4_score_calibrated", "q4_score_decision"} <= set(
        json.loads(calibrated.split("\n")[0])
    )


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
    lines = [
        line.strip()
        for _, mark, language, body, _ in all_blocks()
        if mark and language == "sh"
        for line in re.sub(r"\\\n\s*", " ", body).splitlines()
    ]
    for line in lines:
        words = shlex.split(line.split(" #", 1)[0]) if line.startswith("seahorse-metrics") else []
        if words[:2] != ["seahorse-metrics", "score"] or not any(
            word.startswith("prepared/") for word in words
        ):
            continue
        scored += 1
        names = [
            spec.split("=", 1)[0]
            for flag, spec in zip(words, words[1:])
            if flag == "--checkpoint" and "=" in spec
        ]
        assert names and not prepared_columns & set(names), words
    assert scored >= 3  # the pages score prepared splits in three places (README, guides)
