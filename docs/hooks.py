"""MkDocs hooks: the pages generated at build time, so that they never drift.

* index.md: the README's Install, Quick start and "What makes it different" sections (one
  home: the README), in place of its `<!-- include: README quick start -->` marker, links into
  docs/ made relative to the site.
* reference/cli.md: every subcommand's `--help`, from `seahorse_metrics.cli.build_parser`
  (the parser the command runs), in place of its `<!-- cli-reference -->` marker.
* benchmarks/index.md: the tables and plots of `bench/results/*.json`, rendered by
  `bench/render_results.py`, in place of its `<!-- bench-results -->` marker; the plots are
  added to the site as `benchmarks/plots/*.png`.
"""

from __future__ import annotations

import contextlib
import os
import sys

from mkdocs.structure.files import File

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MARKER = "<!-- include: README quick start -->"
# The README's sections the home page shows, from the first heading to before the second.
README_SECTIONS = ("## Install", "## Documentation")
CLI_MARKER = "<!-- cli-reference -->"
BENCH_MARKER = "<!-- bench-results -->"
# Help is wrapped at this width, whatever the terminal building the site.
HELP_COLUMNS = "100"
_rendered: dict[str, object] = {}


@contextlib.contextmanager
def _columns(width: str):
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def cli_reference() -> str:
    """The top-level help, then each subcommand's, as Markdown sections."""
    from seahorse_metrics.cli import SUBCOMMANDS, build_parser
    from seahorse_metrics.cli.parsing import subcommand_parser

    with _columns(HELP_COLUMNS):
        parser = build_parser()
        sections = ["## seahorse-metrics", "", "```text", parser.format_help().rstrip(), "```"]
        for name in SUBCOMMANDS:
            help_text = subcommand_parser(parser, name).format_help().rstrip()
            sections += ["", f"## {name}", "", "```text", help_text, "```"]
    return "\n".join(sections)


def readme_quick_start() -> str:
    """The README from its Install section to its Documentation section, for the site."""
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    first, last = README_SECTIONS
    start, end = text.index(f"\n{first}\n") + 1, text.index(f"\n{last}\n") + 1
    return text[start:end].replace("](docs/", "](")


def _bench_results() -> tuple[str, dict[str, bytes]]:
    if "bench" not in _rendered:
        sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))
        try:
            import render_results
        finally:
            sys.path.pop(0)
        _rendered["bench"] = render_results.render(render_results.load_records())
    return _rendered["bench"]


def on_files(files, config):
    """Adds the benchmark plots to the site."""
    _rendered.clear()  # `mkdocs serve` rebuilds: read the records again
    _, plots = _bench_results()
    for name, png in plots.items():
        files.append(File.generated(config, f"benchmarks/plots/{name}", content=png))
    return files


def on_page_markdown(markdown, page, config, files):
    """Fills the generated pages' markers."""
    if README_MARKER in markdown:
        markdown = markdown.replace(README_MARKER, readme_quick_start())
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if BENCH_MARKER in markdown:
        markdown = markdown.replace(BENCH_MARKER, _bench_results()[0])
    return markdown
