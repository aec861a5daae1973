"""The calibration part of the report: tables, reliability diagrams, JSON.

`report.py` draws what this module lays out: tables as (title, header,
rows, caption) with rows of strings, figures as base64 PNGs, and the
`calibration` / `calibration_results` entries of report.json.
"""

from __future__ import annotations

import base64
import io
from typing import Optional

from seahorse_metrics.evaluation.results import EvaluationReport

_MISSING = "–"


def _interval(estimate) -> str:
    if estimate.value is None:
        return _MISSING
    text = f"{estimate.value:.3f}"
    if estimate.ci_low is not None and estimate.ci_high is not None:
        text += f" [{estimate.ci_low:.3f}, {estimate.ci_high:.3f}]"
    return text


def _calibrated_benchmarks(report: EvaluationReport) -> list:
    names = {benchmark for _, benchmark in report.calibration_cells}
    return [b for b in report.benchmarks if b.name in names]


def _parameters(calibration_map) -> str:
    parameters = calibration_map.parameters
    if calibration_map.method == "temperature":
        return f"T = {parameters['temperature']:.3f}"
    if calibration_map.method == "platt":
        return f"a = {parameters['slope']:.3f}, b = {parameters['intercept']:.3f}"
    return f"{len(parameters['x'])} knots"


def calibration_tables(report: EvaluationReport) -> list[tuple]:
    """(title, header, rows, caption) of the maps, the ECE and the Brier score."""
    calibration = report.calibration
    if calibration is None or not calibration.metrics:
        return []
    maps = (
        "Calibration maps",
        ["metric", "method", "fitted on", "n", "parameters"],
        [
            [
                name,
                m.method,
                "; ".join(calibration.fitted_on.get(name, [])) or _MISSING,
                str(m.n),
                _parameters(m),
            ]
            for name, m in calibration.metrics.items()
        ],
        "Fitted on the labelled items of the dev benchmark(s); written to "
        "calibration.json (`score --calibration`, `Scorer.load(..., calibration=)`).",
    )
    benchmarks = _calibrated_benchmarks(report)
    if not benchmarks:
        return [maps]
    header = ["metric"] + [f"{b.name} (n={len(b)})" for b in benchmarks]
    ece_rows, brier_rows = [], []
    for name in calibration.metrics:
        cells = [report.calibration_cells.get((name, b.name)) for b in benchmarks]
        ece_rows.append(
            [name]
            + [
                f"{_interval(c.ece['before'])} → {_interval(c.ece['after'])}" if c else _MISSING
                for c in cells
            ]
        )
        brier_rows.append(
            [name]
            + [
                f"{c.brier['before']:.3f} → {c.brier['after']:.3f}" if c else _MISSING
                for c in cells
            ]
        )
    confidence = f"{report.config.confidence:.0%}"
    return [
        maps,
        (
            "Expected calibration error (equal-mass bins), before → after calibration",
            header,
            ece_rows,
            f"ECE over 10 equal-mass bins (lower is better) with {confidence} "
            "bias-corrected bootstrap "
            "intervals; reliability diagrams in report.html.",
        ),
        (
            "Brier score, before → after calibration",
            header,
            brier_rows,
            "Mean squared difference between score and 0/1 label (lower is better).",
        ),
    ]


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def reliability_figure(report: EvaluationReport, benchmark) -> Optional[tuple[str, str, str]]:
    """(kind, alt text, base64 PNG) of the reliability diagram of every
    calibrated metric on `benchmark`, before (dashed) and after (solid)."""
    cells = [
        (index, report.calibration_cells.get((metric.name, benchmark.name)))
        for index, metric in enumerate(report.metrics)
    ]
    cells = [(index, cell) for index, cell in cells if cell is not None]
    if not cells:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0, 4.6), dpi=90)
    FigureCanvasAgg(figure)
    figure.subplots_adjust(left=0.13, right=0.97, bottom=0.11, top=0.92)
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1)
    for index, cell in cells:
        colour = f"C{index % 10}"  # The metric's colour in report.py's figures.
        for when, style in (("before", "--"), ("after", "-")):
            points = cell.reliability[when]
            axes.plot(
                points["mean_score"],
                points["positive_rate"],
                color=colour,
                linestyle=style,
                marker="o",
                markersize=3,
                linewidth=1.2,
                label=f"{cell.metric} {when} (ECE equal-mass {cell.ece[when].value:.3f})",
            )
    axes.set(
        xlim=(-0.02, 1.02),
        ylim=(-0.02, 1.02),
        xlabel="mean score in bin (equal mass)",
        ylabel="share of yes",
        title=f"Recalibration: {benchmark.name}",
    )
    axes.legend(loc="upper left", fontsize="x-small")
    return (
        "recalibration",
        f"Reliability before and after calibration: {benchmark.name}",
        _png(figure),
    )


def calibration_dict(report: EvaluationReport) -> dict:
    """The report.json entries: the maps (`calibration`, readable by
    `read_calibration`) and the before/after numbers per cell."""
    return {
        "calibration": report.calibration.to_dict() if report.calibration else None,
        "calibration_results": [cell.to_dict() for cell in report.calibration_cells.values()],
    }
