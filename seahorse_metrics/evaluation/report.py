"""Writes an `EvaluationReport` as report.json, report.md and report.html.

- report.json: every number (value, percentile interval, n, resamples, note)
  for every metric, benchmark, statistic, breakdown group and paired test.
- report.md: the headline table (`headline_table`, which `evaluate` also
  prints: per benchmark and metric, ROC-AUC and rho with intervals, the
  best of each benchmark marked), what every mark means (`marks_legend`),
  then tables laid out like the SEAHORSE paper's: metrics as rows, one
  table per benchmark family, for each benchmark a rho (Pearson) and a ROC
  (ROC-AUC) column, n in the header, the best value of a column in bold;
  then the same with 95% intervals, accuracies, rank and system-level
  correlations, paired tests and notes on everything undefined.
- report.html: self-contained (inline CSS and script, PNG figures embedded
  as base64): the headline, then the plots (ROC curves of all metrics per
  benchmark, reliability plots), the marks, the same tables, breakdowns by
  language, source dataset, summarization system and model-only vs
  reference-only subsets, and a per-example browser of each benchmark
  (`browser.py`, built when opened).
- thresholds.json, when thresholds were tuned in this run (also in
  report.json); `evaluate --thresholds` and `score --threshold` read it.
- calibration.json, when calibration maps were fitted in this run (also in
  report.json); `score --calibration` reads it. ECE, Brier score and
  reliability diagrams before/after: `report_calibration.py`.

A cell marked `†` (or `†k` for the k-th `--compare` pair) is significantly
better (paired bootstrap, p < alpha) than the other metric of the pair; both
reports say so, and what every other mark means, before their tables. The
files are written together (`write_files_atomically`): all are replaced, or
none.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import html
import io
import json
import os
import re
from typing import Iterable, Sequence

from seahorse_metrics import __version__, stats
from seahorse_metrics.evaluation import report_calibration
from seahorse_metrics.evaluation.browser import BROWSER_CSS, BROWSER_JS, render_browser
from seahorse_metrics.evaluation.report_tables import (
    MISSING,
    Cell,
    Table,
    breakdown_tables,
    headline_table,
    marks_legend,
    report_notes,
    report_tables,
)
from seahorse_metrics.evaluation.results import EvaluationReport
from seahorse_metrics.io.atomic import write_files_atomically

REPORT_FORMAT = "seahorse-metrics-report/1"
# ---------------------------------------------------------------------------
# Markdown.


def _md(text: str) -> str:
    """`text` for Markdown outside code: names (of metrics, benchmarks) may hold
    `<script>` or `<img onerror=...>`, which Markdown would pass on as HTML."""
    return html.escape(str(text), quote=False)


def _md_code(text: str) -> str:
    """`text` as a Markdown code span (where HTML is literal), fenced by more
    backticks than it holds in a row."""
    text = str(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def render_markdown_table(table: Table) -> str:
    def cell(c: Cell) -> str:
        text = _md(c.text).replace("|", "\\|")
        return (f"**{text}**" if c.bold and c.text != MISSING else text) + _md(c.mark)

    lines = [f"### {_md(table.title)}", ""]
    if table.caption:
        lines += [_md(table.caption), ""]
    lines.append("| " + " | ".join(_md(h).replace("|", "\\|") for h in table.header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(table.header) - 1)) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def _run_lines(report: EvaluationReport) -> list[list[tuple[str, bool]]]:
    """Lines describing metrics and benchmarks, as (text, is_code) fragments."""
    metrics = [("Metrics: ", False)]
    for index, metric in enumerate(report.metrics):
        metrics += [
            (", " if index else "", False),
            (metric.name, True),
            (" = ", False),
            (metric.spec.text, True),
        ]
    lines = [metrics] + [
        _provenance_line(report, metric)
        for metric in report.metrics
        if (report.provenance.get(metric.name) or {}).get("signature")
    ]
    for b in report.benchmarks:
        summary = b.summary()
        counts = (
            f", {summary['n_positive']} yes / {summary['n_negative']} no" if b.has_labels else ""
        )
        lines.append([(b.name, True), (f": {b.description}; n = {len(b)}{counts}", False)])
    return lines


def _provenance_line(report: EvaluationReport, metric) -> list[tuple[str, bool]]:
    """ "NAME signature: ..." and, for int8, its self-check on this host."""
    found = report.provenance[metric.name]
    line = [(metric.name, True), (" signature: ", False), (found["signature"], True)]
    check = found.get("int8_check") or {}
    if "spearman" in check:
        line.append(
            (
                f"; int8 against float32 on this host: Spearman {check['spearman']:.4f}, "
                f'largest |log P("1") difference| {check["max_abs_log_p1_diff"]:.3f} '
                f"({check['pairs']} probe pairs)",
                False,
            )
        )
    elif check:
        line.append((f"; int8 self-check skipped: {check.get('skipped')}", False))
    return line


def _markdown_line(fragments) -> str:
    return "- " + "".join(_md_code(text) if code else _md(text) for text, code in fragments)


def _html_line(fragments) -> str:
    return (
        "<li>"
        + "".join(
            f"<code>{html.escape(text)}</code>" if code else html.escape(text)
            for text, code in fragments
        )
        + "</li>"
    )


def render_markdown(report: EvaluationReport) -> str:
    """report.md contents."""
    parts = [
        "# Meta-evaluation report\n",
        f"seahorse-metrics {__version__}. " + _md(_config_line(report)) + "\n",
        render_markdown_table(headline_table(report)),
        "### Marks\n\n" + "\n".join(f"- {_md(line)}" for line in marks_legend(report)) + "\n",
        "### Metrics and benchmarks\n\n"
        + "\n".join(_markdown_line(line) for line in _run_lines(report))
        + "\n",
    ]
    parts += [render_markdown_table(t) for t in report_tables(report)]
    notes = report_notes(report)
    if notes:
        parts.append("### Notes\n\n" + "\n".join(f"- {_md(n)}" for n in notes) + "\n")
    parts.append(
        "Breakdowns by language, source, system and model/reference subsets, "
        "ROC curves and calibration plots: see report.html; every number with "
        "its interval and n: report.json.\n"
    )
    return "\n".join(parts)


def _config_line(report: EvaluationReport) -> str:
    c = report.config
    return (
        f"Bootstrap: {c.n_resamples} resamples, {c.confidence:.0%} percentile "
        f"intervals, seed {c.seed}; accuracy threshold {c.threshold}; "
        f"paired tests at alpha {c.alpha}."
    )


# ---------------------------------------------------------------------------
# Figures.


def _figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0, 4.6), dpi=90)
    FigureCanvasAgg(figure)
    # Fixed margins: a tight bounding box would draw every figure twice.
    figure.subplots_adjust(left=0.13, right=0.97, bottom=0.11, top=0.92)
    return figure


def _png_base64(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def roc_plot(benchmark, curves: Sequence[tuple]) -> str:
    """PNG (base64) of ROC curves: `curves` holds (metric, colour, fpr, tpr, auc)."""
    figure = _figure()
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1)
    for name, colour, fpr, tpr, auc in curves:
        axes.plot(fpr, tpr, color=colour, linewidth=1.5, label=f"{name} (AUC {auc:.3f})")
    axes.set(
        xlim=(-0.01, 1.01),
        ylim=(-0.01, 1.01),
        xlabel="false positive rate",
        ylabel="true positive rate",
        title=f"ROC: {benchmark.name} (n={len(benchmark)})",
    )
    axes.legend(loc="lower right", fontsize="small")
    return _png_base64(figure)


def calibration_plot(benchmark, curves: Sequence[tuple]) -> str:
    """PNG (base64) of reliability diagrams: `curves` holds (metric, colour, Calibration)."""
    figure = _figure()
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1)
    for name, colour, calibration in curves:
        axes.plot(
            calibration.mean_score,
            calibration.positive_rate,
            color=colour,
            marker="o",
            markersize=3,
            linewidth=1.2,
            label=f"{name} (ECE equal-width {calibration.ece_equal_width:.3f})",
        )
    axes.set(
        xlim=(-0.02, 1.02),
        ylim=(-0.02, 1.02),
        xlabel="mean score in bin",
        ylabel="share of yes",
        title=f"Calibration: {benchmark.name}",
    )
    axes.legend(loc="upper left", fontsize="small")
    return _png_base64(figure)


def _figures(report: EvaluationReport, benchmark) -> list[tuple[str, str, str]]:
    """(kind, alt text, base64 PNG) for one benchmark."""
    if not benchmark.has_labels:
        return []
    curves, calibrations = [], []
    for index, metric in enumerate(report.metrics):
        colour = f"C{index % 10}"  # one colour per metric across all figures
        result = report.results[(metric.name, benchmark.name)]
        auc = result.statistics.get("roc_auc")
        if auc is None or auc.value is None:
            continue
        valid = result.valid
        scores = report.scores[(metric.name, benchmark.name)][valid]
        fpr, tpr, _ = stats.roc_curve(benchmark.labels[valid], scores)
        curves.append((metric.name, colour, fpr, tpr, auc.value))
        if result.calibration is not None:
            calibrations.append((metric.name, colour, result.calibration))
    figures = []
    if curves:
        figures.append(("roc", f"ROC curves: {benchmark.name}", roc_plot(benchmark, curves)))
    if calibrations:
        figures.append(
            (
                "calibration",
                f"Calibration: {benchmark.name}",
                calibration_plot(benchmark, calibrations),
            )
        )
    recalibration = report_calibration.reliability_figure(report, benchmark)
    return figures + ([recalibration] if recalibration else [])


# ---------------------------------------------------------------------------
# HTML.

_CSS = (
    """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f2f2f2; }
caption { caption-side: bottom; font-size: 0.85em; color: #555; text-align: left; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figures img { border: 1px solid #ddd; max-width: 100%; }
.notes li { font-size: 0.9em; }
"""
    + BROWSER_CSS
)


def render_html_table(table: Table, heading: str = "h3") -> str:
    def cell(tag: str, c: Cell) -> str:
        text = html.escape(c.text)
        mark = f"<sup>{html.escape(c.mark)}</sup>" if c.mark else ""
        return f"<{tag}>{'<b>' + text + '</b>' if c.bold else text}{mark}</{tag}>"

    parts = [f"<{heading}>{html.escape(table.title)}</{heading}>", "<table>"]
    if table.caption:
        parts.append(f"<caption>{html.escape(table.caption)}</caption>")
    parts.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in table.header) + "</tr>")
    parts += ["<tr>" + "".join(cell("td", c) for c in row) + "</tr>" for row in table.rows]
    parts.append("</table>")
    return "\n".join(parts)


def _plots(report: EvaluationReport) -> list[str]:
    """Every benchmark's figures, in one block near the top of the page."""
    images = [
        f'<img class="{kind}" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
        for benchmark in report.benchmarks
        for kind, alt, data in _figures(report, benchmark)
    ]
    if not images:
        return []
    return [
        "<h2>Plots</h2>",
        "<p>ROC curves of every metric per labelled benchmark, reliability diagrams of "
        "the metrics whose scores are probabilities (mean score against the share of yes, "
        "per bin; the dotted diagonal is perfect calibration), and before/after "
        "recalibration when maps were fitted. One colour per metric throughout. Two "
        "expected calibration errors (ECE: the count-weighted mean gap between mean score "
        "and share of yes per bin) appear: the reliability diagrams of raw scores give "
        'the ECE over 10 equal-width bins of [0, 1] ("ECE equal-width"); the '
        "calibration tables and the before/after diagrams give it over 10 equal-mass "
        "bins (the same number of items each, so sparse score ranges make no noisy "
        "bin).</p>",
        '<div class="figures">' + "".join(images) + "</div>",
    ]


def render_html(report: EvaluationReport) -> str:
    """report.html contents: self-contained, no external resources.

    In order: the headline table, the plots, what each mark means, the
    metrics and benchmarks, every table, the notes, and per benchmark its
    breakdowns and example browser (rendered when opened).
    """
    body = [
        "<h1>Meta-evaluation report</h1>",
        f"<p>seahorse-metrics {html.escape(__version__)}. {html.escape(_config_line(report))}</p>",
        render_html_table(headline_table(report), "h2"),
    ]
    body += _plots(report)
    body += [
        '<h2>Marks</h2><ul class="legend">'
        + "".join(f"<li>{html.escape(line)}</li>" for line in marks_legend(report))
        + "</ul>",
        "<h2>Metrics and benchmarks</h2>",
        "<ul>" + "".join(_html_line(line) for line in _run_lines(report)) + "</ul>",
        "<h2>Results</h2>",
    ]
    body += [render_html_table(t) for t in report_tables(report)]
    notes = report_notes(report)
    if notes:
        body.append(
            '<h3>Notes</h3><ul class="notes">'
            + "".join(f"<li>{html.escape(n)}</li>" for n in notes)
            + "</ul>"
        )
    body.append("<h2>Per benchmark</h2>")
    for benchmark in report.benchmarks:
        body.append(f'<h3 id="{html.escape(benchmark.name)}">{html.escape(benchmark.name)}</h3>')
        body.append(f"<p>{html.escape(benchmark.description)}</p>")
        body += [render_html_table(t, "h4") for t in breakdown_tables(report, benchmark)]
        body.append(render_browser(report, benchmark))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>seahorse-metrics meta-evaluation</title>\n"
        f"<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{BROWSER_JS}</script>\n</body>\n</html>\n"
    )


# ---------------------------------------------------------------------------
# JSON and writing.


def report_dict(report: EvaluationReport) -> dict:
    """report.json contents (no NaN anywhere: undefined values are null + note)."""
    return {
        "format": REPORT_FORMAT,
        "version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "config": dataclasses.asdict(report.config),
        "benchmarks": [b.summary() for b in report.benchmarks],
        "metrics": [
            {
                "name": m.name,
                "spec": m.spec.text,
                "kind": m.spec.kind,
                "threshold": m.threshold,
                **(report.provenance.get(m.name) or {}),
            }
            for m in report.metrics
        ],
        "results": [result.to_dict() for result in report.results.values()],
        "comparisons": [c.to_dict() for c in report.comparisons],
        "scoring": report.scoring,
        "thresholds": report.thresholds.to_dict() if report.thresholds else None,
        "macro_averages": [
            dict(metric=metric, family=family, **estimate.to_dict())
            for (metric, family), estimate in report.macro.items()
        ],
        **report_calibration.calibration_dict(report),
    }


def write_report(report: EvaluationReport, output_dir: str) -> dict[str, str]:
    """Writes report.json, report.md and report.html (and thresholds.json /
    calibration.json when tuned / fitted in this run); returns their paths.

    All of them are rendered first and replace the earlier ones together
    (`write_files_atomically`): a failure, e.g. a full disk, names the file
    and leaves the directory as it was.
    """
    paths = {name: os.path.join(output_dir, f"report.{name}") for name in ("json", "md", "html")}
    texts = {}
    if report.thresholds is not None and report.thresholds.source is None:
        paths["thresholds"] = os.path.join(output_dir, "thresholds.json")
        texts["thresholds"] = json.dumps(report.thresholds.to_dict(), indent=1) + "\n"
    if report.calibration is not None and report.calibration.source is None:
        paths["calibration"] = os.path.join(output_dir, "calibration.json")
        texts["calibration"] = json.dumps(report.calibration.to_dict(), indent=1) + "\n"
    texts["json"] = (
        json.dumps(report_dict(report), indent=1, allow_nan=False, ensure_ascii=False) + "\n"
    )
    texts["md"] = render_markdown(report)
    texts["html"] = render_html(report)
    write_files_atomically(
        {paths[name]: functools.partial(_write_text, text) for name, text in texts.items()},
        "no report file was replaced: free some space and run again",
    )
    return paths


def _write_text(text: str, handle) -> None:
    handle.write(text)


def iter_estimates(report_json: dict) -> Iterable[tuple[str, str, str, dict]]:
    """(metric, benchmark, statistic, estimate dict) of a loaded report.json."""
    for result in report_json["results"]:
        for statistic, estimate in result["statistics"].items():
            yield result["metric"], result["benchmark"], statistic, estimate
