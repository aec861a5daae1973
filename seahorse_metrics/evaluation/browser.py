"""The per-example browser of report.html: one table of items per benchmark.

Each benchmark gets a table of its items (article excerpt that expands to the
full text, summary, question when there is one, the human label or rating,
every metric's score, language and system), sortable by any column (click
its header) and filterable by language, by system and by "metric and humans
disagree": the metric's decision (`score >= threshold`, at its tuned
threshold when thresholds were tuned, else at its accuracy threshold)
differs from the human label.

Everything is inline (the rows as JSON, the script, the styles): the page
needs no network. Each browser sits in a closed `<details>` and its table is
built when it is first opened, so the page opens on its tables and plots.
A benchmark with more items than `browser_rows` shows a sample of that many, drawn with the
run's seed and stratified by language and label (or rating quartile), so every group keeps
its share; the page states the cap and how the sample was drawn. Each article is stored once
however many summaries share it, and cut at `MAX_ARTICLE_CHARS` characters
(the cut is marked).
"""

from __future__ import annotations

import html
import json
from typing import Optional, Sequence

import numpy as np

from seahorse_metrics.evaluation.results import EvaluationReport

MAX_ARTICLE_CHARS = 10_000
EXCERPT_CHARS = 240

BROWSER_CSS = """
.browser .controls { display: flex; flex-wrap: wrap; gap: 1em; align-items: center;
  margin: 0.5em 0; font-size: 0.9em; }
.browser table.items { width: 100%; table-layout: fixed; }
.browser table.items td { text-align: left; vertical-align: top; overflow-wrap: anywhere; }
.browser table.items td.num { text-align: right; }
.browser table.items td.disagree { background: #fde2e2; }
.browser th[data-col] { cursor: pointer; user-select: none; text-align: left; }
.browser th[data-col="id"] { width: 7em; }
.browser th[data-col="article"] { width: 30%; }
.browser th[data-col="summary"], .browser th[data-col="question"] { width: 16%; }
.browser th.sorted-asc::after { content: " \\25B2"; }
.browser th.sorted-desc::after { content: " \\25BC"; }
.browser details summary { cursor: pointer; }
.browser .full { white-space: pre-wrap; margin-top: 0.3em; }
.browser .cap { font-size: 0.85em; color: #555; }
details.browser-toggle > summary { cursor: pointer; font-weight: 600; margin: 0.8em 0; }
"""

# Renders every section.browser from its embedded JSON; no external resources.
BROWSER_JS = r"""
(function () {
  "use strict";
  function cellText(row, column) {
    var value = row[column.key];
    if (value === null || value === undefined) { return "\u2013"; }
    if (column.type === "number") { return Number(value).toFixed(3); }
    if (column.type === "label") { return value ? "yes" : "no"; }
    return String(value);
  }
  function compare(column, dir) {
    return function (a, b) {
      var x = a[column.key], y = b[column.key];
      if (x === null || x === undefined) { return (y === null || y === undefined) ? 0 : 1; }
      if (y === null || y === undefined) { return -1; }
      if (column.type === "text") { return dir * String(x).localeCompare(String(y)); }
      return dir * (Number(x) - Number(y));
    };
  }
  function init(section) {
    var data = JSON.parse(section.querySelector("script.browser-data").textContent);
    var tbody = section.querySelector("tbody");
    var headers = Array.prototype.slice.call(section.querySelectorAll("th[data-col]"));
    var selects = Array.prototype.slice.call(section.querySelectorAll("select[data-filter]"));
    var count = section.querySelector(".count");
    var state = {column: null, dir: 1};
    function visible(row) {
      return selects.every(function (select) {
        var wanted = select.value, field = select.getAttribute("data-filter");
        if (wanted === "") { return true; }
        if (field === "disagree") {
          if (wanted === "*") { return row.disagree.some(function (d) { return d === true; }); }
          return row.disagree[Number(wanted)] === true;
        }
        return String(row[field]) === wanted;
      });
    }
    function articleCell(td, row) {
      var text = data.articles[row.article];
      var details = document.createElement("details");
      var summary = document.createElement("summary");
      summary.textContent =
        text.length > data.excerpt ? text.slice(0, data.excerpt) + "\u2026" : text;
      var full = document.createElement("div");
      full.className = "full";
      full.textContent = text;
      details.appendChild(summary);
      details.appendChild(full);
      td.appendChild(details);
    }
    function makeRow(row) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-id", row.id);
      data.columns.forEach(function (column) {
        var td = document.createElement("td");
        td.setAttribute("data-col", column.key);
        if (column.type === "article") { articleCell(td, row); }
        else { td.textContent = cellText(row, column); }
        if (column.type === "number") { td.className = "num"; }
        if (column.metric !== undefined && row.disagree[column.metric] === true) {
          td.className += " disagree";
        }
        tr.appendChild(td);
      });
      return tr;
    }
    function render() {
      var rows = data.rows.filter(visible);
      if (state.column !== null) { rows.sort(compare(state.column, state.dir)); }
      while (tbody.firstChild) { tbody.removeChild(tbody.firstChild); }
      var fragment = document.createDocumentFragment();
      rows.forEach(function (row) { fragment.appendChild(makeRow(row)); });
      tbody.appendChild(fragment);
      count.textContent = rows.length + " of " + data.rows.length + " rows shown";
    }
    headers.forEach(function (th) {
      th.addEventListener("click", function () {
        var column = data.columns.filter(
          function (c) { return c.key === th.getAttribute("data-col"); })[0];
        state.dir = (state.column === column) ? -state.dir : 1;
        state.column = column;
        headers.forEach(function (other) { other.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(state.dir > 0 ? "sorted-asc" : "sorted-desc");
        render();
      });
    });
    selects.forEach(function (select) { select.addEventListener("change", render); });
    render();
  }
  // A browser is built when its <details> is first opened: a closed one
  // costs the page no rows (and a report of many benchmarks stays short).
  Array.prototype.forEach.call(document.querySelectorAll("section.browser"), function (section) {
    var toggle = section.parentNode;
    if (toggle.tagName !== "DETAILS" || toggle.open) { init(section); return; }
    toggle.addEventListener("toggle", function opened() {
      if (!toggle.open) { return; }
      toggle.removeEventListener("toggle", opened);
      init(section);
    });
  });
})();
"""


def sample_rows(benchmark, cap: int, seed: int) -> np.ndarray:
    """Item indices to show: all of them up to `cap`, else a stratified sample.

    Strata are (language, label) or (language, rating quartile); each gets
    its share of `cap` (at least one item), drawn without replacement with
    `numpy.random.default_rng(seed)`. Indices come back in benchmark order.
    """
    n = len(benchmark)
    if n <= cap:
        return np.arange(n)
    if benchmark.has_labels:
        groups = benchmark.labels.astype(int)
    else:
        groups = np.searchsorted(
            np.quantile(benchmark.ratings, [0.25, 0.5, 0.75]), benchmark.ratings, side="right"
        )
    strata: dict = {}
    for index, (item, group) in enumerate(zip(benchmark.items, groups)):
        strata.setdefault((item.lang or "", int(group)), []).append(index)
    rng = np.random.default_rng(seed)
    quota = {key: max(1, int(round(cap * len(members) / n))) for key, members in strata.items()}
    while sum(quota.values()) > cap:  # rounding up can overshoot: trim the largest strata
        largest = max(quota, key=lambda key: (quota[key], key))
        quota[largest] -= 1
    chosen = [
        rng.choice(members, size=min(quota[key], len(members)), replace=False)
        for key, members in sorted(strata.items())
        if quota[key] > 0
    ]
    return np.sort(np.concatenate(chosen))


def _decision_thresholds(report: EvaluationReport, benchmark) -> list[Optional[float]]:
    """Per metric, the threshold its decisions are made at here (None: none)."""
    thresholds = []
    for metric in report.metrics:
        result = report.results[(metric.name, benchmark.name)]
        tuned = result.tuned_threshold
        thresholds.append(
            tuned if tuned is not None else (metric.threshold if result.applicable else None)
        )
    return thresholds


def _columns(
    report: EvaluationReport, benchmark, rows: list[dict], thresholds: Sequence[Optional[float]]
) -> list[dict]:
    columns = [
        {"key": "id", "label": "id", "type": "text"},
        {"key": "article", "label": "article", "type": "article"},
        {"key": "summary", "label": "summary", "type": "text"},
    ]
    if any(row["question"] for row in rows):
        columns.append({"key": "question", "label": "question", "type": "text"})
    if benchmark.has_labels:
        columns.append({"key": "label", "label": "human", "type": "label"})
    if benchmark.continuous or not benchmark.has_labels:
        columns.append({"key": "rating", "label": "rating", "type": "number"})
    for position, (metric, threshold) in enumerate(zip(report.metrics, thresholds)):
        label = metric.name + ("" if threshold is None else f" (≥{threshold:.3g})")
        columns.append(
            {"key": f"score{position}", "label": label, "type": "number", "metric": position}
        )
    for field in ("lang", "system"):
        if any(row[field] for row in rows):
            columns.append({"key": field, "label": field, "type": "text"})
    return columns


def _rows(
    report: EvaluationReport, benchmark, indices: np.ndarray, thresholds: Sequence[Optional[float]]
) -> tuple[list[dict], list[str]]:
    """The JSON rows of the shown items, and the distinct articles they point to."""
    articles: dict = {}
    scores = [report.scores.get((m.name, benchmark.name)) for m in report.metrics]
    rows = []
    for index in indices.tolist():
        item = benchmark.items[index]
        text = item.premise
        if len(text) > MAX_ARTICLE_CHARS:
            text = (
                text[:MAX_ARTICLE_CHARS]
                + f" [… {len(item.premise) - MAX_ARTICLE_CHARS} more characters]"
            )
        row = {
            "id": item.id,
            "article": articles.setdefault(text, len(articles)),
            "summary": item.hypothesis,
            "question": item.question,
            "label": item.label,
            "rating": float(benchmark.ratings[index]),
            "lang": item.lang,
            "system": item.system,
            "disagree": [],
        }
        for position, (values, threshold) in enumerate(zip(scores, thresholds)):
            value = (
                None if values is None or not np.isfinite(values[index]) else float(values[index])
            )
            row[f"score{position}"] = value
            row["disagree"].append(
                None
                if value is None or threshold is None or item.label is None
                else (value >= threshold) != item.label
            )
        rows.append(row)
    return rows, list(articles)


def _select(field: str, label: str, options: Sequence[tuple[str, str]]) -> str:
    choices = "".join(
        f'<option value="{html.escape(value)}">{html.escape(text)}</option>'
        for value, text in options
    )
    return (
        f'<label>{html.escape(label)} <select data-filter="{field}">'
        f'<option value="">all</option>{choices}</select></label>'
    )


def _controls(
    report: EvaluationReport,
    rows: list[dict],
    thresholds: Sequence[Optional[float]],
    has_labels: bool,
) -> str:
    controls = []
    for field in ("lang", "system"):
        values = sorted({row[field] for row in rows if row[field]})
        if len(values) > 1:
            controls.append(
                _select(field, "language" if field == "lang" else field, [(v, v) for v in values])
            )
    disagreeing = [
        (str(position), metric.name)
        for position, (metric, threshold) in enumerate(zip(report.metrics, thresholds))
        if threshold is not None
    ]
    if has_labels and disagreeing:
        controls.append(
            _select("disagree", "metric and humans disagree", [("*", "any metric")] + disagreeing)
        )
    return '<div class="controls">' + "".join(controls) + '<span class="count"></span></div>'


def _cap_note(report: EvaluationReport, benchmark, shown: int) -> str:
    if shown == len(benchmark):
        return f"All {len(benchmark)} items."
    return (
        f"Showing {shown} of {len(benchmark)} items (the cap is "
        f"{report.config.browser_rows} per benchmark): a random sample, stratified by "
        f"language and {'label' if benchmark.has_labels else 'rating quartile'}, seed "
        f"{report.config.seed}. report.json and OUTPUT/cache hold every item's scores."
    )


def render_browser(report: EvaluationReport, benchmark) -> str:
    """The browser section of one benchmark (empty when `browser_rows` is 0)."""
    if report.config.browser_rows == 0 or not len(benchmark):
        return ""
    indices = sample_rows(benchmark, report.config.browser_rows, report.config.seed)
    thresholds = _decision_thresholds(report, benchmark)
    rows, articles = _rows(report, benchmark, indices, thresholds)
    columns = _columns(report, benchmark, rows, thresholds)
    payload = json.dumps(
        {"columns": columns, "rows": rows, "articles": articles, "excerpt": EXCERPT_CHARS},
        ensure_ascii=False,
        allow_nan=False,
    )
    # Inside <script>, "</" could close the element: JSON allows "<" escaped.
    payload = payload.replace("<", "\\u003c")
    header = "".join(
        f'<th data-col="{html.escape(c["key"])}">{html.escape(c["label"])}</th>' for c in columns
    )
    name = html.escape(benchmark.name)
    return (
        f'<details class="browser-toggle" data-benchmark="{name}">'
        f"<summary>Examples: {name} ({len(rows)} items; open to browse)</summary>"
        f'<section class="browser" data-benchmark="{name}">'
        f'<p class="cap">{html.escape(_cap_note(report, benchmark, len(rows)))} Click a '
        "column header to sort; an article expands to its full text; a score the humans "
        "disagree with is shaded; (≥t) after a metric is the threshold its decisions are "
        "made at.</p>"
        + _controls(report, rows, thresholds, benchmark.has_labels)
        + f'<table class="items"><thead><tr>{header}</tr></thead><tbody></tbody></table>'
        f'<script type="application/json" class="browser-data">{payload}</script></section>'
        "</details>"
    )
