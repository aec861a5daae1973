"""The tables of the meta-evaluation report, as both renderers draw them.

`report.py` renders what this module lays out as Markdown, HTML and (the
headline) plain text: a `Table` is a title, a header and rows of `Cell`s
(text, bold for the best value, a significance mark). The headline table
(`headline_table`) opens both reports and is what `evaluate` prints;
`marks_legend` says what every mark of the report means; `report_tables`
are the paper-style tables per benchmark family, then thresholds,
calibration and paired tests; `breakdown_tables` split one benchmark by
language, source, system and subset.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from seahorse_metrics import stats
from seahorse_metrics.evaluation import report_calibration
from seahorse_metrics.evaluation.results import TUNED_STATISTIC, EvaluationReport

STAT_LABELS = {
    "pearson": "ρ",
    "roc_auc": "ROC",
    "spearman": "Spearman",
    "kendall": "Kendall τ",
    "accuracy": "acc",
    "balanced_accuracy": "bal. acc",
    "system_pearson": "system ρ",
    TUNED_STATISTIC: "bal. acc (tuned)",
}
MISSING = "–"  # an undefined value, or a benchmark a metric does not cover
_FAMILY_TITLES = {
    "seahorse": "SEAHORSE",
    "mface-5lang": "mFACE, 5 languages shared with SEAHORSE",
    "mface-all": "mFACE, all languages",
    "true": "TRUE",
    "ratings": "Ratings files",
    "aggrefact": "LLM-AggreFact",
    "summac": "SummaC",
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
    return MISSING if value is None else f"{value:.3f}"


def _fmt_ci(estimate: stats.Estimate) -> str:
    if estimate.value is None:
        return MISSING
    if estimate.ci_low is None:
        return _fmt(estimate.value)
    return f"{estimate.value:.3f} [{estimate.ci_low:.3f}, {estimate.ci_high:.3f}]"


def _families(report: EvaluationReport) -> dict:
    families: dict = {}
    for benchmark in report.benchmarks:
        families.setdefault(benchmark.family, []).append(benchmark)
    return families


def _estimate(
    report: EvaluationReport, metric: str, benchmark: str, statistic: str
) -> Optional[stats.Estimate]:
    return report.results[(metric, benchmark)].statistics.get(statistic)


def _count_label(report: EvaluationReport, benchmark, statistic: str) -> str:
    if statistic == "system_pearson":
        systems = max(
            e.n
            for m in report.metrics
            if (e := _estimate(report, m.name, benchmark.name, statistic))
        )
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


def _value_table(
    report: EvaluationReport,
    title: str,
    benchmarks: Sequence,
    statistics: Sequence[str],
    with_ci: bool,
    marks: dict,
    caption: Optional[str] = None,
) -> Optional[Table]:
    columns = [
        (b, s)
        for b in benchmarks
        for s in statistics
        if any(_estimate(report, m.name, b.name, s) for m in report.metrics)
    ]
    if not columns:
        return None
    header = ["Metric"] + [
        f"{b.column} {STAT_LABELS[s]} ({_count_label(report, b, s)})" for b, s in columns
    ]
    best = {}
    for b, s in columns:
        values = [
            e.value
            for m in report.metrics
            if (e := _estimate(report, m.name, b.name, s)) and e.value is not None
        ]
        best[(b.name, s)] = max(values) if values else None
    rows = []
    for metric in report.metrics:
        estimates = [_estimate(report, metric.name, b.name, s) for b, s in columns]
        if not any(estimates):
            continue  # e.g. no accuracy for a metric without a threshold
        row = [Cell(metric.name)]
        for (b, s), estimate in zip(columns, estimates):
            if estimate is None:
                row.append(Cell(MISSING))
                continue
            text = _fmt_ci(estimate) if with_ci else _fmt(estimate.value)
            is_best = estimate.value is not None and abs(estimate.value - best[(b.name, s)]) < 1e-12
            row.append(Cell(text, bold=is_best, mark=marks.get((metric.name, b.name, s), "")))
        rows.append(row)
    return Table(title, header, rows, caption)


def _comparison_table(report: EvaluationReport) -> Optional[Table]:
    if not report.comparisons:
        return None
    header = ["Benchmark", "Statistic", "A", "B", "A", "B", "Δ (A−B)", "95% CI", "p", "significant"]
    rows = []
    for comparison in report.comparisons:
        for statistic, test in comparison.tests.items():
            interval = (
                MISSING if test.ci_low is None else f"[{test.ci_low:.3f}, {test.ci_high:.3f}]"
            )
            significant = test.significant(report.config.alpha)
            rows.append(
                [
                    Cell(comparison.benchmark),
                    Cell(STAT_LABELS[statistic]),
                    Cell(comparison.metric_a),
                    Cell(comparison.metric_b),
                    Cell(_fmt(test.value_a)),
                    Cell(_fmt(test.value_b)),
                    Cell(_fmt(test.delta)),
                    Cell(interval),
                    Cell(MISSING if test.p_value is None else f"{test.p_value:.4f}"),
                    Cell("yes" if significant else "no", bold=significant),
                ]
            )
    caption = (
        f"Paired bootstrap tests ({report.config.n_resamples} resamples, shared "
        f"between the two metrics); significant means p < {report.config.alpha}."
    )
    return Table("Paired comparisons", header, rows, caption)


def _tuned_caption(report: EvaluationReport, with_average: bool = True) -> str:
    thresholds = report.thresholds
    where = (
        f"read from {thresholds.source}"
        if thresholds.source
        else f"tuned on {', '.join(thresholds.tuned_on)}"
    )
    scope = (
        "one per metric"
        if thresholds.scope == "metric"
        else "one per metric and tuning benchmark of the same name"
    )
    caption = (
        f"score ≥ the metric's threshold ({scope}, {where}, maximising "
        f"{thresholds.objective}) predicts yes."
    )
    if with_average:
        caption += (
            " avg: the mean over the family's benchmarks (as LLM-AggreFact reports), "
            "its interval from resampling each benchmark on its own."
        )
    return caption


def _tuned_table(
    report: EvaluationReport, title: str, family: str, benchmarks: Sequence, marks: dict
) -> Optional[Table]:
    """Balanced accuracy at tuned thresholds per benchmark, plus the family average."""
    if report.thresholds is None:
        return None
    table = _value_table(
        report, title, benchmarks, (TUNED_STATISTIC,), True, marks, _tuned_caption(report)
    )
    averages = {
        m.name: report.macro[(m.name, family)]
        for m in report.metrics
        if (m.name, family) in report.macro
    }
    if table is None or not averages:
        return table
    best = max((e.value for e in averages.values() if e.value is not None), default=None)
    table.header.append(f"avg ({len(benchmarks)} sets)")
    for row in table.rows:
        estimate = averages.get(row[0].text)
        is_best = (
            estimate is not None
            and estimate.value is not None
            and best is not None
            and abs(estimate.value - best) < 1e-12
        )
        row.append(Cell(_fmt_ci(estimate) if estimate else MISSING, bold=is_best))
    return table


def _thresholds_table(report: EvaluationReport) -> Optional[Table]:
    thresholds = report.thresholds
    if thresholds is None or not thresholds.metrics:
        return None
    rows = [
        [
            Cell(name),
            Cell(f"{tuned.threshold:.4g}"),
            Cell(_fmt(tuned.value)),
            Cell(str(tuned.n)),
            Cell(
                ", ".join(
                    f"{b} {t.threshold:.4g}"
                    for b, t in thresholds.per_benchmark.get(name, {}).items()
                )
                or MISSING
            ),
        ]
        for name, tuned in thresholds.metrics.items()
    ]
    return Table(
        "Tuned thresholds",
        ["Metric", "threshold", f"{thresholds.objective} there", "n", "per benchmark"],
        rows,
        _tuned_caption(report, with_average=False),
    )


# The headline's statistics: the paper's two, and Spearman on continuous ratings.
HEADLINE_STATISTICS = {"roc_auc": "ROC-AUC", "pearson": "Pearson ρ", "spearman": "Spearman ρ"}


def _interval_note(report: EvaluationReport) -> str:
    config = report.config
    if not config.n_resamples:
        return "No intervals (--bootstrap 0)."
    return (
        f"[low, high]: {config.confidence:.0%} percentile bootstrap intervals, "
        f"{config.n_resamples} resamples, seed {config.seed}."
    )


def headline_table(report: EvaluationReport) -> Table:
    """Per benchmark and metric: ROC-AUC, Pearson ρ and (on continuous
    ratings) Spearman ρ with intervals; the best of each benchmark in bold,
    significance marks as in the other tables. `evaluate` prints it and the
    reports open with it."""
    marks = _significance_marks(report)
    statistics = [
        s
        for s in HEADLINE_STATISTICS
        if any(s in result.statistics for result in report.results.values())
    ]
    rows = []
    for benchmark in report.benchmarks:
        estimates = {
            (m.name, s): _estimate(report, m.name, benchmark.name, s)
            for m in report.metrics
            for s in statistics
        }
        best = {
            s: max(
                (
                    e.value
                    for (_, t), e in estimates.items()
                    if t == s and e is not None and e.value is not None
                ),
                default=None,
            )
            for s in statistics
        }
        for metric in report.metrics:
            row = [
                Cell(benchmark.name),
                Cell(metric.name),
                Cell(str(report.results[(metric.name, benchmark.name)].n)),
            ]
            for statistic in statistics:
                estimate = estimates[(metric.name, statistic)]
                is_best = (
                    estimate is not None
                    and estimate.value is not None
                    and abs(estimate.value - best[statistic]) < 1e-12
                )
                row.append(
                    Cell(
                        _fmt_ci(estimate) if estimate else MISSING,
                        bold=is_best,
                        mark=marks.get((metric.name, benchmark.name, statistic), ""),
                    )
                )
            rows.append(row)
    header = ["benchmark", "metric", "n"] + [HEADLINE_STATISTICS[s] for s in statistics]
    return Table(
        "Headline",
        header,
        rows,
        " ".join(_headline_caption(report, "The best of each benchmark in bold.")),
    )


def _headline_caption(report: EvaluationReport, best: str) -> list[str]:
    """The headline's legend, a sentence each; `best` says how the best is marked."""
    caption = [
        "ROC-AUC against the binary label; ρ between score and rating (Pearson: the 0/1 "
        "label on binary sets, as the paper's ρ).",
        best,
        _interval_note(report),
    ]
    if report.comparisons:
        caption.append(
            "† (†k): significantly better than the other metric of a --compare "
            "pair (paired bootstrap test)."
        )
    return caption + [f"{MISSING}: not defined or not covered (the report's notes say why)."]


def headline_text(report: EvaluationReport) -> str:
    """The headline table as plain text for a terminal (best marked `*`)."""
    table = headline_table(report)
    text = [
        [c.text + (" *" if c.bold else "") + (f" {c.mark}" if c.mark else "") for c in row]
        for row in table.rows
    ]
    widths = [max(len(line[i]) for line in [table.header] + text) for i in range(len(table.header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
        for line in [table.header] + text
    ]
    return "\n".join(lines + _headline_caption(report, "* best on its benchmark."))


def marks_legend(report: EvaluationReport) -> list[str]:
    """What every mark of the report means, one line each (report.md and
    report.html say it before their tables)."""
    config = report.config
    legend = [
        "Bold: the best value of its column (in the headline, of its benchmark).",
        _interval_note(report),
        f"{MISSING}: a value that is not defined or a benchmark the metric does not "
        "cover; the notes at the end of the tables say why.",
        "n=…: the items (or, for system-level ρ, the systems) behind a column.",
    ]
    pairs = list(dict.fromkeys((c.metric_a, c.metric_b) for c in report.comparisons))
    if pairs:
        names = "†" if len(pairs) == 1 else "†k (the k-th pair)"
        listed = "; ".join(
            f"{'†' if len(pairs) == 1 else f'†{k}'}: {a} vs {b}"
            for k, (a, b) in enumerate(pairs, start=1)
        )
        legend.append(
            f"{names}: significantly better than the other metric of a --compare "
            f"pair on that benchmark and statistic (paired bootstrap test, p < "
            f"{config.alpha}); {listed}. The paired comparisons table gives Δ and p."
        )
    if report.calibration_cells:
        legend.append(
            "ECE before → after calibration; its interval is bias-corrected: the "
            "bootstrap percentiles shifted down by the resamples' mean excess over "
            "the estimate (resampling repeats items, which only adds to an error)."
        )
    if config.browser_rows:
        legend.append(
            "In report.html's example browsers: (≥t) after a metric is the "
            "threshold its decisions are made at; a shaded score disagrees with the "
            "human label."
        )
    return legend


def report_tables(report: EvaluationReport) -> list[Table]:
    """The tables of report.md and report.html, in order."""
    marks = _significance_marks(report)
    tables = []
    for family, benchmarks in _families(report).items():
        tables += _family_tables(report, family, benchmarks, marks)
    tables.append(_thresholds_table(report))
    tables += [
        Table(title, header, [[Cell(text) for text in row] for row in rows], caption)
        for title, header, rows, caption in report_calibration.calibration_tables(report)
    ]
    tables.append(_comparison_table(report))
    return [t for t in tables if t is not None]


def _family_tables(
    report: EvaluationReport, family: str, benchmarks: Sequence, marks: dict
) -> list[Optional[Table]]:
    """One family's tables: correlations and ROC-AUC (without, then with
    intervals), rank correlations, accuracy at the threshold and at tuned
    thresholds, and the system level (None: a table with nothing to show)."""
    name = _FAMILY_TITLES.get(family, family)
    ci_note = (
        f"{report.config.confidence:.0%} percentile bootstrap intervals, "
        f"{report.config.n_resamples} resamples, seed {report.config.seed}."
    )
    # (title, statistics, with intervals, caption) of the value tables, in order.
    values = [
        (
            name,
            ("pearson", "roc_auc"),
            False,
            "ρ: Pearson between score and rating (0/1 label on binary sets). "
            "ROC: ROC-AUC. Best per column in bold.",
        ),
        (f"{name}: with intervals", ("pearson", "roc_auc"), True, ci_note),
        (f"{name}: rank correlations", ("spearman", "kendall"), True, ci_note),
        (
            f"{name}: accuracy at threshold",
            ("accuracy", "balanced_accuracy"),
            True,
            f"score ≥ {report.config.threshold} predicts yes; only metrics with a "
            "decision threshold.",
        ),
    ]
    tables = [
        _value_table(report, title, benchmarks, statistics, intervals, marks, caption)
        for title, statistics, intervals, caption in values
    ]
    tables.append(
        _tuned_table(
            report, f"{name}: balanced accuracy at tuned thresholds", family, benchmarks, marks
        )
    )
    tables.append(
        _value_table(
            report,
            f"{name}: system level",
            benchmarks,
            ("system_pearson",),
            True,
            marks,
            "Pearson between the mean score and the mean rating per summarization system; "
            "intervals resample items within each system.",
        )
    )
    return tables


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
        statistics = [
            s
            for s in ("pearson", "roc_auc")
            if any(s in by_stat for g in groups.values() for by_stat in g.values())
        ]
        # Only metrics that cover this benchmark get columns.
        metrics = [m for m in report.metrics if any(m.name in g for g in groups.values())]
        header = [field, "n"] + [f"{m.name} {STAT_LABELS[s]}" for m in metrics for s in statistics]
        rows = []
        for group, per_metric in groups.items():
            n = max(e.n for by_stat in per_metric.values() for e in by_stat.values())
            row = [Cell(group), Cell(str(n))]
            for metric in metrics:
                for statistic in statistics:
                    estimate = per_metric.get(metric.name, {}).get(statistic)
                    row.append(Cell(_fmt_ci(estimate) if estimate else MISSING))
            rows.append(row)
        title = {"subset": "model-only vs reference-only"}.get(field, f"by {field}")
        tables.append(Table(f"{benchmark.name}: {title}", header, rows))
    return tables
