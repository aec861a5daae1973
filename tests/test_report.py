"""Report files: Markdown tables like the paper's, JSON numbers, self-contained HTML."""
import base64
import re
import html.parser
import io
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from fixtures import eval_data
from seahorse_metrics.evaluation import report as report_lib
from seahorse_metrics.evaluation import run as run_lib
from seahorse_metrics.evaluation import stats
from seahorse_metrics.evaluation.benchmarks import Benchmark


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A report of three metrics on a binary, a continuous and a one-class benchmark."""
    binary = Benchmark("seahorse/q4", "seahorse", "q4", "binary set",
                       tuple(eval_data.rated_pairs(120, 0, prefix="b")))
    continuous = Benchmark("ratings/sq", "ratings", "sq", "continuous set",
                           tuple(eval_data.rated_pairs(60, 1, prefix="c", continuous=True)))
    one_class_items = [eval_data.RatedPair(**{**item.__dict__, "label": True, "rating": 1.0})
                       for item in eval_data.rated_pairs(30, 2, prefix="o")]
    one_class = Benchmark("true/frank", "true", "frank", "all consistent",
                          tuple(one_class_items))
    benchmarks = [binary, continuous, one_class]
    rng = np.random.default_rng(3)
    good, noise = {}, {}
    for bench in benchmarks:
        for item, rating in zip(bench.items, bench.ratings):
            good[item.id] = float(np.clip(rating / bench.ratings.max() * 0.6
                                          + rng.uniform(0, 0.4), 0, 1))
            noise[item.id] = float(rng.uniform())
    metrics = [eval_data.fixed_scores_metric("good", good),
               eval_data.fixed_scores_metric("noise", noise),
               eval_data.word_overlap_metric("overlap", threshold=None)]
    config = run_lib.EvaluationConfig(n_resamples=200)
    report = run_lib.evaluate(benchmarks, metrics, config, compare=[("good", "noise")])
    output = tmp_path_factory.mktemp("report")
    paths = report_lib.write_report(report, str(output))
    return report, paths


def _table(markdown: str, title: str) -> list[list[str]]:
    lines = markdown.splitlines()
    start = lines.index(f"### {title}")
    rows = [line for line in lines[start:] if line.startswith("|")]
    table = []
    for line in rows:
        table.append([cell.strip() for cell in line.strip("|").split(" | ")])
        following = lines[lines.index(line) + 1] if lines.index(line) + 1 < len(lines) else ""
        if not following.startswith("|"):
            break
    return table


def test_markdown_main_table_has_metric_rows_and_question_columns(written):
    report, paths = written
    markdown = open(paths["md"], encoding="utf-8").read()
    table = _table(markdown, "SEAHORSE")
    assert table[0] == ["Metric", "q4 ρ (n=120)", "q4 ROC (n=120)"]
    assert [row[0] for row in table[2:]] == ["good", "noise", "overlap"]
    result = report.result("good", "seahorse/q4").statistics
    good_row = table[2]
    # The best metric is bold, and significantly better than "noise" (marked †).
    assert good_row[1] == f"**{result['pearson'].value:.3f}**†"
    assert good_row[2] == f"**{result['roc_auc'].value:.3f}**†"
    noise_auc = report.result("noise", "seahorse/q4").statistics["roc_auc"].value
    assert table[3][2] == f"{noise_auc:.3f}"


def test_markdown_intervals_accuracy_rank_and_comparison_tables(written):
    report, paths = written
    markdown = open(paths["md"], encoding="utf-8").read()
    auc = report.result("good", "seahorse/q4").statistics["roc_auc"]
    intervals = _table(markdown, "SEAHORSE: with intervals")
    assert f"{auc.value:.3f} [{auc.ci_low:.3f}, {auc.ci_high:.3f}]" in intervals[2][2]
    accuracy = _table(markdown, "SEAHORSE: accuracy at threshold")
    # "overlap" has no threshold: no accuracy row.
    assert [row[0] for row in accuracy[2:]] == ["good", "noise"]
    ranks = _table(markdown, "Ratings files: rank correlations")
    assert ranks[0] == ["Metric", "sq Spearman (n=60)", "sq Kendall τ (n=60)"]
    comparisons = _table(markdown, "Paired comparisons")
    assert comparisons[0][:4] == ["Benchmark", "Statistic", "A", "B"]
    significant = [row for row in comparisons[2:] if row[0] == "seahorse/q4"]
    assert {row[1] for row in significant} == {"ROC", "ρ"}
    assert all(row[-1] == "**yes**" for row in significant)


def test_markdown_notes_explain_undefined_values(written):
    _, paths = written
    markdown = open(paths["md"], encoding="utf-8").read()
    notes = markdown[markdown.index("### Notes"):]
    assert ("good on true/frank, roc_auc: undefined: only one class in the labels "
            "(30 positive of 30)") in notes
    assert not re.search(r"\bnan\b", markdown, re.IGNORECASE)


def test_json_has_every_number_with_interval_and_n(written):
    report, paths = written

    def refuse(constant):
        raise AssertionError(f"non-finite {constant} in report.json")

    data = json.loads(open(paths["json"], encoding="utf-8").read(), parse_constant=refuse)
    assert data["format"] == report_lib.REPORT_FORMAT
    assert [b["name"] for b in data["benchmarks"]] == ["seahorse/q4", "ratings/sq", "true/frank"]
    for metric, benchmark, statistic, estimate in report_lib.iter_estimates(data):
        assert {"value", "ci_low", "ci_high", "n", "n_resamples", "note"} <= set(estimate)
        assert estimate["n"] > 0
        if estimate["value"] is None:
            assert estimate["note"].startswith("undefined")
        expected = report.result(metric, benchmark).statistics[statistic]
        assert estimate["value"] == expected.value
    cell = next(r for r in data["results"]
                if r["metric"] == "good" and r["benchmark"] == "seahorse/q4")
    languages = cell["breakdowns"]["lang"]
    assert set(languages) == {"de", "en", "es"}
    assert set(cell["breakdowns"]["subset"]) == {"model", "reference"}
    assert sum(g["pearson"]["n"] for g in languages.values()) == 120
    reference = cell["breakdowns"]["subset"]["reference"]["roc_auc"]
    items = report.benchmarks[0].items
    mask = np.array([i.system == "reference" for i in items])
    scores = report.scores[("good", "seahorse/q4")]
    assert reference["value"] == pytest.approx(
        stats.roc_auc(report.benchmarks[0].labels[mask], scores[mask]))
    assert cell["calibration"]["ece"] >= 0
    assert data["comparisons"][0]["tests"]["roc_auc"]["p_value"] < 0.05


class _Collector(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))


def test_html_is_self_contained_with_decodable_roc_and_calibration_pngs(written):
    import matplotlib.image

    report, paths = written
    text = open(paths["html"], encoding="utf-8").read()
    parser = _Collector()
    parser.feed(text)
    assert "script" not in parser.tags and "link" not in parser.tags
    assert "http://" not in text and "https://" not in text
    roc = [img for img in parser.images if img.get("class") == "roc"]
    calibration = [img for img in parser.images if img.get("class") == "calibration"]
    # ROC curves for every labelled benchmark with a defined AUC (not the one-class set).
    assert [img["alt"] for img in roc] == ["ROC curves: seahorse/q4"]
    assert [img["alt"] for img in calibration] == ["Calibration: seahorse/q4"]
    for img in roc + calibration:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        png = base64.b64decode(img["src"][len(prefix):], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = matplotlib.image.imread(io.BytesIO(png), format="png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 200
        assert pixels.std() > 0.05  # not a blank image
    for heading in ("seahorse/q4: by lang", "seahorse/q4: by source", "seahorse/q4: by system",
                    "seahorse/q4: model-only vs reference-only"):
        assert f"<h4>{heading}</h4>" in text
    assert "<sup>†</sup>" in text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install "
                    "chromium); test_html_is_self_contained... checks the HTML without it")
def test_report_html_opens_in_headless_chromium(written, tmp_path):
    _, paths = written
    screenshot = tmp_path / "report.png"
    completed = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--enable-logging=stderr", "--v=0",
         f"--screenshot={screenshot}", "--window-size=1200,2400",
         "file://" + os.path.abspath(paths["html"])],
        capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    console_errors = [line for line in completed.stderr.splitlines()
                      if "CONSOLE" in line or "Uncaught" in line or "net::ERR" in line]
    assert not console_errors, console_errors
    assert screenshot.stat().st_size > 20_000
