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
from typing import Iterable, Optional, Sequence


from seahorse_metrics import __version__
from seahorse_metrics.evaluation import stats
from seahorse_metrics.evaluation import report_calibration
from seahorse_metrics.evaluation.browser import BROWSER_CSS, BROWSER_JS, render_browser
from seahorse_metrics.evaluation.results import TUNED_STATISTIC, EvaluationReport
from seahorse_metrics.scoring.output import write_files_atomically

REPORT_FORMAT = "seahorse-metrics-report/1"
STAT_LABELS = {
    "pearson": "ρ", "roc_auc": "ROC", "spearman": "Spearman", "kendall": "Kendall τ",
    "accuracy": "acc", "balanced_accuracy": "bal. acc", "system_pearson": "system ρ",
    TUNED_STATISTIC: "bal. acc (tuned)",
}
_MISSING = "–"
_FAMILY_TITLES = {
    "seahorse": "SEAHORSE", "mface-5lang": "mFACE, 5 languages shared with SEAHORSE",
    "mface-all": "mFACE, all languages", "true": "TRUE", "ratings": "Ratings files",
    "aggrefact": "LLM-AggreFact", "summac": "SummaC",
}


@dataclasses.dataclass
class Cell:
    text: str
    bold: bool = False
    mark: str = ""  # significance marker, drawn after the (bold) text


@dataclasses.dataclass
class Table:
    """A table both renderers draw: header labels and rows of cells."""

    title: str
    header: list
    rows: list
    caption: Optional[str] = None


# ---------------------------------------------------------------------------
# Tables.


def _fmt(value: Optional[float]) -> str:
    return _MISSING if value is None else f"{value:.3f}"


def _fmt_ci(estimate: stats.Estimate) -> str:
    if estimate.value is None:
        return _MISSING
    if estimate.ci_low is None:
        return _fmt(estimate.value)
    return f"{estimate.value:.3f} [{estimate.ci_low:.3f}, {estimate.ci_high:.3f}]"


def _families(report: EvaluationReport) -> dict:
    families: dict = {}
    for benchmark in report.benchmarks:
        families.setdefault(benchmark.family, []).append(benchmark)
    return families


def _estimate(report: EvaluationReport, metric: str, benchmark: str,
              statistic: str) -> Optional[stats.Estimate]:
    return report.results[(metric, benchmark)].statistics.get(statistic)


def _count_label(report: EvaluationReport, benchmark, statistic: str) -> str:
    if statistic == "system_pearson":
        systems = max(e.n for m in report.metrics
                      if (e := _estimate(report, m.name, benchmark.name, statistic)))
        return f"{systems} systems"
    return f"n={len(benchmark)}"


def _significance_marks(report: EvaluationReport) -> dict:
    """(metric, benchmark, statistic) -> marker for significantly better cells."""
    pairs = list(dict.fromkeys((c.metric_a, c.metric_b) for c in report.comparisons))
    marks: dict = {}
    for comparison in report.comparisons:
        index = pairs.index((comparison.metric_a, comparison.metric_b))
        marker = "†" if len(pairs) == 1 else f"†{index + 1}"
        for statistic, test in comparison.tests.items():
            if not test.significant(report.config.alpha):
                continue
            winner = comparison.metric_a if test.delta > 0 else comparison.metric_b
            key = (winner, comparison.benchmark, statistic)
            marks[key] = marks.get(key, "") + marker
    return marks


def _value_table(report: EvaluationReport, title: str, benchmarks: Sequence,
                 statistics: Sequence[str], with_ci: bool, marks: dict,
                 caption: Optional[str] = None) -> Optional[Table]:
    columns = [(b, s) for b in benchmarks for s in statistics
               if any(_estimate(report, m.name, b.name, s) for m in report.metrics)]
    if not columns:
        return None
    header = ["Metric"] + [f"{b.column} {STAT_LABELS[s]} ({_count_label(report, b, s)})"
                           for b, s in columns]
    best = {}
    for b, s in columns:
        values = [e.value for m in report.metrics
                  if (e := _estimate(report, m.name, b.name, s)) and e.value is not None]
        best[(b.name, s)] = max(values) if values else None
    rows = []
    for metric in report.metrics:
        estimates = [_estimate(report, metric.name, b.name, s) for b, s in columns]
        if not any(estimates):
            continue  # e.g. no accuracy for a metric without a threshold
        row = [Cell(metric.name)]
        for (b, s), estimate in zip(columns, estimates):
            if estimate is None:
                row.append(Cell(_MISSING))
                continue
            text = _fmt_ci(estimate) if with_ci else _fmt(estimate.value)
            is_best = estimate.value is not None and abs(estimate.value - best[(b.name, s)]) < 1e-12
            row.append(Cell(text, bold=is_best, mark=marks.get((metric.name, b.name, s), "")))
        rows.append(row)
    return Table(title, header, rows, caption)


def _comparison_table(report: EvaluationReport) -> Optional[Table]:
    if not report.comparisons:
        return None
    header = ["Benchmark", "Statistic", "A", "B", "A", "B", "Δ (A−B)", "95% CI", "p",
              "significant"]
    rows = []
    for comparison in report.comparisons:
        for statistic, test in comparison.tests.items():
            interval = (_MISSING if test.ci_low is None
                        else f"[{test.ci_low:.3f}, {test.ci_high:.3f}]")
            significant = test.significant(report.config.alpha)
            rows.append([
                Cell(comparison.benchmark), Cell(STAT_LABELS[statistic]),
                Cell(comparison.metric_a), Cell(comparison.metric_b),
                Cell(_fmt(test.value_a)), Cell(_fmt(test.value_b)), Cell(_fmt(test.delta)),
                Cell(interval),
                Cell(_MISSING if test.p_value is None else f"{test.p_value:.4f}"),
                Cell("yes" if significant else "no", bold=significant),
            ])
    caption = (f"Paired bootstrap tests ({report.config.n_resamples} resamples, shared "
               f"between the two metrics); significant means p < {report.config.alpha}.")
    return Table("Paired comparisons", header, rows, caption)


def _tuned_caption(report: EvaluationReport, with_average: bool = True) -> str:
    thresholds = report.thresholds
    where = (f"read from {thresholds.source}" if thresholds.source
             else f"tuned on {', '.join(thresholds.tuned_on)}")
    scope = ("one per metric" if thresholds.scope == "metric"
             else "one per metric and tuning benchmark of the same name")
    caption = (f"score ≥ the metric's threshold ({scope}, {where}, maximising "
               f"{thresholds.objective}) predicts yes.")
    if with_average:
        caption += (" avg: the mean over the family's benchmarks (as LLM-AggreFact reports), "
                    "its interval from resampling each benchmark on its own.")
    return caption


def _tuned_table(report: EvaluationReport, title: str, family: str, benchmarks: Sequence,
                 marks: dict) -> Optional[Table]:
    """Balanced accuracy at tuned thresholds per benchmark, plus the family average."""
    if report.thresholds is None:
        return None
    table = _value_table(report, title, benchmarks, (TUNED_STATISTIC,), True, marks,
                         _tuned_caption(report))
    averages = {m.name: report.macro[(m.name, family)] for m in report.metrics
                if (m.name, family) in report.macro}
    if table is None or not averages:
        return table
    best = max((e.value for e in averages.values() if e.value is not None), default=None)
    table.header.append(f"avg ({len(benchmarks)} sets)")
    for row in table.rows:
        estimate = averages.get(row[0].text)
        is_best = estimate is not None and estimate.value is not None and best is not None \
            and abs(estimate.value - best) < 1e-12
        row.append(Cell(_fmt_ci(estimate) if estimate else _MISSING, bold=is_best))
    return table


def _thresholds_table(report: EvaluationReport) -> Optional[Table]:
    thresholds = report.thresholds
    if thresholds is None or not thresholds.metrics:
        return None
    rows = [[Cell(name), Cell(f"{tuned.threshold:.4g}"), Cell(_fmt(tuned.value)),
             Cell(str(tuned.n)),
             Cell(", ".join(f"{b} {t.threshold:.4g}"
                            for b, t in thresholds.per_benchmark.get(name, {}).items()) or _MISSING)]
            for name, tuned in thresholds.metrics.items()]
    return Table("Tuned thresholds", ["Metric", "threshold", f"{thresholds.objective} there",
                                      "n", "per benchmark"], rows,
                 _tuned_caption(report, with_average=False))


# The headline's statistics: the paper's two, and Spearman on continuous ratings.
HEADLINE_STATISTICS = {"roc_auc": "ROC-AUC", "pearson": "Pearson ρ", "spearman": "Spearman ρ"}


def _interval_note(report: EvaluationReport) -> str:
    config = report.config
    if not config.n_resamples:
        return "No intervals (--bootstrap 0)."
    return (f"[low, high]: {config.confidence:.0%} percentile bootstrap intervals, "
            f"{config.n_resamples} resamples, seed {config.seed}.")


def headline_table(report: EvaluationReport) -> Table:
    """Per benchmark and metric: ROC-AUC, Pearson ρ and (on continuous
    ratings) Spearman ρ with intervals; the best of each benchmark in bold,
    significance marks as in the other tables. `evaluate` prints it and the
    reports open with it."""
    marks = _significance_marks(report)
    statistics = [s for s in HEADLINE_STATISTICS
                  if any(s in result.statistics for result in report.results.values())]
    rows = []
    for benchmark in report.benchmarks:
        estimates = {(m.name, s): _estimate(report, m.name, benchmark.name, s)
                     for m in report.metrics for s in statistics}
        best = {s: max((e.value for (_, t), e in estimates.items()
                        if t == s and e is not None and e.value is not None), default=None)
                for s in statistics}
        for metric in report.metrics:
            row = [Cell(benchmark.name), Cell(metric.name),
                   Cell(str(report.results[(metric.name, benchmark.name)].n))]
            for statistic in statistics:
                estimate = estimates[(metric.name, statistic)]
                is_best = (estimate is not None and estimate.value is not None
                           and abs(estimate.value - best[statistic]) < 1e-12)
                row.append(Cell(_fmt_ci(estimate) if estimate else _MISSING, bold=is_best,
                                mark=marks.get((metric.name, benchmark.name, statistic), "")))
            rows.append(row)
    header = ["benchmark", "metric", "n"] + [HEADLINE_STATISTICS[s] for s in statistics]
    return Table("Headline", header, rows,
                 " ".join(_headline_caption(report, "The best of each benchmark in bold.")))


def _headline_caption(report: EvaluationReport, best: str) -> list[str]:
    """The headline's legend, a sentence each; `best` says how the best is marked."""
    caption = ["ROC-AUC against the binary label; ρ between score and rating (Pearson: the 0/1 "
               "label on binary sets, as the paper's ρ).", best, _interval_note(report)]
    if report.comparisons:
        caption.append("† (†k): significantly better than the other metric of a --compare "
                       "pair (paired bootstrap test).")
    return caption + [f"{_MISSING}: not defined or not covered (the report's notes say why)."]


def headline_text(report: EvaluationReport) -> str:
    """The headline table as plain text for a terminal (best marked `*`)."""
    table = headline_table(report)
    text = [[c.text + (" *" if c.bold else "") + (f" {c.mark}" if c.mark else "")
             for c in row] for row in table.rows]
    widths = [max(len(line[i]) for line in [table.header] + text)
              for i in range(len(table.header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
             for line in [table.header] + text]
    return "\n".join(lines + _headline_caption(report, "* best on its benchmark."))


def marks_legend(report: EvaluationReport) -> list[str]:
    """What every mark of the report means, one line each (report.md and
    report.html say it before their tables)."""
    config = report.config
    legend = ["Bold: the best value of its column (in the headline, of its benchmark).",
              _interval_note(report),
              f"{_MISSING}: a value that is not defined or a benchmark the metric does not "
              "cover; the notes at the end of the tables say why.",
              "n=…: the items (or, for system-level ρ, the systems) behind a column."]
    pairs = list(dict.fromkeys((c.metric_a, c.metric_b) for c in report.comparisons))
    if pairs:
        names = ("†" if len(pairs) == 1 else "†k (the k-th pair)")
        listed = "; ".join(f"{'†' if len(pairs) == 1 else f'†{k}'}: {a} vs {b}"
                           for k, (a, b) in enumerate(pairs, start=1))
        legend.append(f"{names}: significantly better than the other metric of a --compare "
                      f"pair on that benchmark and statistic (paired bootstrap test, p < "
                      f"{config.alpha}); {listed}. The paired comparisons table gives Δ and p.")
    if report.calibration_cells:
        legend.append("ECE before → after calibration; its interval is bias-corrected: the "
                      "bootstrap percentiles shifted down by the resamples' mean excess over "
                      "the estimate (resampling repeats items, which only adds to an error).")
    if config.browser_rows:
        legend.append("In the example browsers: (≥t) after a metric is the threshold its "
                      "decisions are made at; a shaded score disagrees with the human label.")
    return legend


def report_tables(report: EvaluationReport) -> list[Table]:
    """The tables of report.md and report.html, in order."""
    marks = _significance_marks(report)
    tables = []
    ci_note = (f"{report.config.confidence:.0%} percentile bootstrap intervals, "
               f"{report.config.n_resamples} resamples, seed {report.config.seed}.")
    for family, benchmarks in _families(report).items():
        name = _FAMILY_TITLES.get(family, family)
        tables.append(_value_table(
            report, name, benchmarks, ("pearson", "roc_auc"), False, marks,
            "ρ: Pearson between score and rating (0/1 label on binary sets). "
            "ROC: ROC-AUC. Best per column in bold."))
        tables.append(_value_table(report, f"{name}: with intervals", benchmarks,
                                   ("pearson", "roc_auc"), True, marks, ci_note))
        tables.append(_value_table(report, f"{name}: rank correlations", benchmarks,
                                   ("spearman", "kendall"), True, marks, ci_note))
        tables.append(_value_table(
            report, f"{name}: accuracy at threshold", benchmarks,
            ("accuracy", "balanced_accuracy"), True, marks,
            f"score ≥ {report.config.threshold} predicts yes; only metrics with a "
            "decision threshold."))
        tables.append(_tuned_table(report, f"{name}: balanced accuracy at tuned thresholds",
                                   family, benchmarks, marks))
        tables.append(_value_table(
            report, f"{name}: system level", benchmarks, ("system_pearson",), True, marks,
            "Pearson between the mean score and the mean rating per summarization system; "
            "intervals resample items within each system."))
    tables.append(_thresholds_table(report))
    tables += [Table(title, header, [[Cell(text) for text in row] for row in rows], caption)
               for title, header, rows, caption in report_calibration.calibration_tables(report)]
    tables.append(_comparison_table(report))
    return [t for t in tables if t is not None]


def report_notes(report: EvaluationReport) -> list[str]:
    """One line per undefined value, left-out resample or uncovered cell."""
    notes = []
    for (metric, benchmark), result in report.results.items():
        if result.note:
            notes.append(f"{metric} on {benchmark}: {result.note}")
        for statistic, estimate in result.statistics.items():
            if estimate.note:
                notes.append(f"{metric} on {benchmark}, {statistic}: {estimate.note}")
    return notes


def breakdown_tables(report: EvaluationReport, benchmark) -> list[Table]:
    """Per-field breakdown tables of one benchmark (rows: groups)."""
    tables = []
    for field in report.config.breakdowns:
        groups: dict = {}
        for metric in report.metrics:
            result = report.results[(metric.name, benchmark.name)]
            for group, by_stat in result.breakdowns.get(field, {}).items():
                groups.setdefault(group, {})[metric.name] = by_stat
        if not groups:
            continue
        statistics = [s for s in ("pearson", "roc_auc")
                      if any(s in by_stat for g in groups.values() for by_stat in g.values())]
        # Only metrics that cover this benchmark get columns.
        metrics = [m for m in report.metrics if any(m.name in g for g in groups.values())]
        header = [field, "n"] + [f"{m.name} {STAT_LABELS[s]}" for m in metrics
                                 for s in statistics]
        rows = []
        for group, per_metric in groups.items():
            n = max(e.n for by_stat in per_metric.values() for e in by_stat.values())
            row = [Cell(group), Cell(str(n))]
            for metric in metrics:
                for statistic in statistics:
                    estimate = per_metric.get(metric.name, {}).get(statistic)
                    row.append(Cell(_fmt_ci(estimate) if estimate else _MISSING))
            rows.append(row)
        title = {"subset": "model-only vs reference-only"}.get(field, f"by {field}")
        tables.append(Table(f"{benchmark.name}: {title}", header, rows))
    return tables


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
        return (f"**{text}**" if c.bold and c.text != _MISSING else text) + _md(c.mark)

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
        metrics += [(", " if index else "", False), (metric.name, True), (" = ", False),
                    (metric.spec.text, True)]
    lines = [metrics]
    for b in report.benchmarks:
        summary = b.summary()
        counts = (f", {summary['n_positive']} yes / {summary['n_negative']} no"
                  if b.has_labels else "")
        lines.append([(b.name, True), (f": {b.description}; n = {len(b)}{counts}", False)])
    return lines


def _markdown_line(fragments) -> str:
    return "- " + "".join(_md_code(text) if code else _md(text) for text, code in fragments)


def _html_line(fragments) -> str:
    return "<li>" + "".join(f"<code>{html.escape(text)}</code>" if code else html.escape(text)
                            for text, code in fragments) + "</li>"


def render_markdown(report: EvaluationReport) -> str:
    """report.md contents."""
    parts = ["# Meta-evaluation report\n",
             f"seahorse-metrics {__version__}. " + _md(_config_line(report)) + "\n",
             render_markdown_table(headline_table(report)),
             "### Marks\n\n" + "\n".join(f"- {_md(line)}" for line in marks_legend(report))
             + "\n",
             "### Metrics and benchmarks\n\n"
             + "\n".join(_markdown_line(line) for line in _run_lines(report)) + "\n"]
    parts += [render_markdown_table(t) for t in report_tables(report)]
    notes = report_notes(report)
    if notes:
        parts.append("### Notes\n\n" + "\n".join(f"- {_md(n)}" for n in notes) + "\n")
    parts.append("Breakdowns by language, source, system and model/reference subsets, "
                 "ROC curves and calibration plots: see report.html; every number with "
                 "its interval and n: report.json.\n")
    return "\n".join(parts)


def _config_line(report: EvaluationReport) -> str:
    c = report.config
    return (f"Bootstrap: {c.n_resamples} resamples, {c.confidence:.0%} percentile "
            f"intervals, seed {c.seed}; accuracy threshold {c.threshold}; "
            f"paired tests at alpha {c.alpha}.")


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
    axes.set(xlim=(-0.01, 1.01), ylim=(-0.01, 1.01), xlabel="false positive rate",
             ylabel="true positive rate", title=f"ROC: {benchmark.name} (n={len(benchmark)})")
    axes.legend(loc="lower right", fontsize="small")
    return _png_base64(figure)


def calibration_plot(benchmark, curves: Sequence[tuple]) -> str:
    """PNG (base64) of reliability diagrams: `curves` holds (metric, colour, Calibration)."""
    figure = _figure()
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1)
    for name, colour, calibration in curves:
        axes.plot(calibration.mean_score, calibration.positive_rate, color=colour, marker="o",
                  markersize=3, linewidth=1.2, label=f"{name} (ECE {calibration.ece:.3f})")
    axes.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="mean score in bin",
             ylabel="share of yes", title=f"Calibration: {benchmark.name}")
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
        figures.append(("calibration", f"Calibration: {benchmark.name}",
                        calibration_plot(benchmark, calibrations)))
    recalibration = report_calibration.reliability_figure(report, benchmark)
    return figures + ([recalibration] if recalibration else [])


# ---------------------------------------------------------------------------
# HTML.

_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f2f2f2; }
caption { caption-side: bottom; font-size: 0.85em; color: #555; text-align: left; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figures img { border: 1px solid #ddd; max-width: 100%; }
.notes li { font-size: 0.9em; }
""" + BROWSER_CSS


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
    images = [f"<img class=\"{kind}\" alt=\"{html.escape(alt)}\" "
              f"src=\"data:image/png;base64,{data}\">"
              for benchmark in report.benchmarks for kind, alt, data in _figures(report, benchmark)]
    if not images:
        return []
    return ["<h2>Plots</h2>",
            "<p>ROC curves of every metric per labelled benchmark, reliability diagrams of "
            "the metrics whose scores are probabilities (mean score against the share of yes, "
            "per bin; the dotted diagonal is perfect calibration), and before/after "
            "recalibration when maps were fitted. One colour per metric throughout.</p>",
            "<div class=\"figures\">" + "".join(images) + "</div>"]


def render_html(report: EvaluationReport) -> str:
    """report.html contents: self-contained, no external resources.

    In order: the headline table, the plots, what each mark means, the
    metrics and benchmarks, every table, the notes, and per benchmark its
    breakdowns and example browser (rendered when opened).
    """
    body = ["<h1>Meta-evaluation report</h1>",
            f"<p>seahorse-metrics {html.escape(__version__)}. "
            f"{html.escape(_config_line(report))}</p>",
            render_html_table(headline_table(report), "h2")]
    body += _plots(report)
    body += ["<h2>Marks</h2><ul class=\"legend\">"
             + "".join(f"<li>{html.escape(line)}</li>" for line in marks_legend(report))
             + "</ul>",
             "<h2>Metrics and benchmarks</h2>",
             "<ul>" + "".join(_html_line(line) for line in _run_lines(report)) + "</ul>",
             "<h2>Results</h2>"]
    body += [render_html_table(t) for t in report_tables(report)]
    notes = report_notes(report)
    if notes:
        body.append("<h3>Notes</h3><ul class=\"notes\">"
                    + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    body.append("<h2>Per benchmark</h2>")
    for benchmark in report.benchmarks:
        body.append(f"<h3 id=\"{html.escape(benchmark.name)}\">{html.escape(benchmark.name)}"
                    "</h3>")
        body.append(f"<p>{html.escape(benchmark.description)}</p>")
        body += [render_html_table(t, "h4") for t in breakdown_tables(report, benchmark)]
        body.append(render_browser(report, benchmark))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>seahorse-metrics meta-evaluation</title>\n"
            f"<style>{_CSS}</style>\n</head>\n<body>\n" + "\n".join(body)
            + f"\n<script>{BROWSER_JS}</script>\n</body>\n</html>\n")


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
        "metrics": [{"name": m.name, "spec": m.spec.text, "kind": m.spec.kind,
                     "threshold": m.threshold} for m in report.metrics],
        "results": [result.to_dict() for result in report.results.values()],
        "comparisons": [c.to_dict() for c in report.comparisons],
        "scoring": report.scoring,
        "thresholds": report.thresholds.to_dict() if report.thresholds else None,
        "macro_averages": [dict(metric=metric, family=family, **estimate.to_dict())
                           for (metric, family), estimate in report.macro.items()],
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
    texts["json"] = json.dumps(report_dict(report), indent=1, allow_nan=False,
                               ensure_ascii=False) + "\n"
    texts["md"] = render_markdown(report)
    texts["html"] = render_html(report)
    write_files_atomically({paths[name]: functools.partial(_write_text, text)
                            for name, text in texts.items()},
                           "no report file was replaced: free some space and run again")
    return paths


def _write_text(text: str, handle) -> None:
    handle.write(text)


def iter_estimates(report_json: dict) -> Iterable[tuple[str, str, str, dict]]:
    """(metric, benchmark, statistic, estimate dict) of a loaded report.json."""
    for result in report_json["results"]:
        for statistic, estimate in result["statistics"].items():
            yield result["metric"], result["benchmark"], statistic, estimate
