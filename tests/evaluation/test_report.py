"""Report files: Markdown tables like the paper's, JSON numbers, self-contained HTML."""

import base64
import html.parser
import io
import json
import os
import re
import shutil

import numpy as np
import pytest

from seahorse_metrics import stats
from seahorse_metrics.evaluation import report as report_lib
from seahorse_metrics.evaluation import run as run_lib
from seahorse_metrics.evaluation.benchmarks import Benchmark

from fixtures import eval_data


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A report of three metrics on a binary, a continuous and a one-class benchmark."""
    binary = Benchmark(
        "seahorse/q4",
        "seahorse",
        "q4",
        "binary set",
        tuple(eval_data.rated_pairs(120, 0, prefix="b")),
    )
    continuous = Benchmark(
        "ratings/sq",
        "ratings",
        "sq",
        "continuous set",
        tuple(eval_data.rated_pairs(60, 1, prefix="c", continuous=True)),
    )
    one_class_items = [
        eval_data.RatedPair(**{**item.__dict__, "label": True, "rating": 1.0})
        for item in eval_data.rated_pairs(30, 2, prefix="o")
    ]
    one_class = Benchmark("true/frank", "true", "frank", "all consistent", tuple(one_class_items))
    benchmarks = [binary, continuous, one_class]
    rng = np.random.default_rng(3)
    good, noise = {}, {}
    for bench in benchmarks:
        for item, rating in zip(bench.items, bench.ratings):
            good[item.id] = float(
                np.clip(rating / bench.ratings.max() * 0.6 + rng.uniform(0, 0.4), 0, 1)
            )
            noise[item.id] = float(rng.uniform())
    metrics = [
        eval_data.fixed_scores_metric("good", good),
        eval_data.fixed_scores_metric("noise", noise),
        eval_data.word_overlap_metric("overlap", threshold=None),
    ]
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
    notes = markdown[markdown.index("### Notes") :]
    assert (
        "good on true/frank, roc_auc: undefined: only one class in the labels (30 positive of 30)"
    ) in notes
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
    cell = next(
        r for r in data["results"] if r["metric"] == "good" and r["benchmark"] == "seahorse/q4"
    )
    languages = cell["breakdowns"]["lang"]
    assert set(languages) == {"de", "en", "es"}
    assert set(cell["breakdowns"]["subset"]) == {"model", "reference"}
    assert sum(g["pearson"]["n"] for g in languages.values()) == 120
    reference = cell["breakdowns"]["subset"]["reference"]["roc_auc"]
    items = report.benchmarks[0].items
    mask = np.array([i.system == "reference" for i in items])
    scores = report.scores[("good", "seahorse/q4")]
    assert reference["value"] == pytest.approx(
        stats.roc_auc(report.benchmarks[0].labels[mask], scores[mask])
    )
    assert cell["calibration"]["ece_equal_width"] >= 0
    assert data["comparisons"][0]["tests"]["roc_auc"]["p_value"] < 0.05


class _Collector(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.tags, self.scripts = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))
        if tag == "script":
            self.scripts.append(dict(attrs))


def test_html_is_self_contained_with_decodable_roc_and_calibration_pngs(written):
    import matplotlib.image

    report, paths = written
    text = open(paths["html"], encoding="utf-8").read()
    parser = _Collector()
    parser.feed(text)
    # Scripts are inline (the example browser); nothing is fetched.
    assert parser.scripts and not any("src" in script for script in parser.scripts)
    assert "link" not in parser.tags and "iframe" not in parser.tags
    assert "http://" not in text and "https://" not in text and "//cdn" not in text
    roc = [img for img in parser.images if img.get("class") == "roc"]
    calibration = [img for img in parser.images if img.get("class") == "calibration"]
    # ROC curves for every labelled benchmark with a defined AUC (not the one-class set).
    assert [img["alt"] for img in roc] == ["ROC curves: seahorse/q4"]
    assert [img["alt"] for img in calibration] == ["Calibration: seahorse/q4"]
    for img in roc + calibration:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        png = base64.b64decode(img["src"][len(prefix) :], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = matplotlib.image.imread(io.BytesIO(png), format="png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 200
        assert pixels.std() > 0.05  # not a blank image
    for heading in (
        "seahorse/q4: by lang",
        "seahorse/q4: by source",
        "seahorse/q4: by system",
        "seahorse/q4: model-only vs reference-only",
    ):
        assert f"<h4>{heading}</h4>" in text
    assert "<sup>†</sup>" in text


# The browser test runs in a real headless Chromium (.ci/run installs Debian's
# chromium and chromium-driver when they are missing).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
_TABLE_JS = """
const section = document.querySelector(`section.browser[data-benchmark="${arguments[0]}"]`);
return {
  cap: section.querySelector('.cap').textContent,
  count: section.querySelector('.count').textContent,
  rows: Array.from(section.querySelectorAll('tbody tr')).map(tr => ({
    id: tr.getAttribute('data-id'),
    cells: Object.fromEntries(Array.from(tr.children).map(
      td => [td.getAttribute('data-col'), td.textContent])),
    shaded: Array.from(tr.children).filter(td => td.classList.contains('disagree'))
      .map(td => td.getAttribute('data-col')),
  })),
};
"""


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM and CHROMEDRIVER, (
        "the browser test needs Debian's chromium and chromium-driver: apt-get install -y "
        "chromium chromium-driver (.ci/run installs them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1100",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_report_browser_sorts_filters_and_states_its_cap_in_chromium(written, chromium, tmp_path):
    import dataclasses

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from seahorse_metrics.evaluation import browser

    report, _ = written
    # 120 items, a cap of 80: the page shows a stratified sample and says so.
    capped = dataclasses.replace(report, config=dataclasses.replace(report.config, browser_rows=80))
    paths = report_lib.write_report(capped, str(tmp_path / "report"))
    chromium.get("file://" + os.path.abspath(paths["html"]))
    benchmark = report.benchmarks[0]
    # Closed, a browser has built no rows; opening it builds them.
    assert chromium.execute_script(_TABLE_JS, benchmark.name)["rows"] == []
    chromium.find_element(
        By.CSS_SELECTOR, f'details.browser-toggle[data-benchmark="{benchmark.name}"] > summary'
    ).click()
    WebDriverWait(chromium, 30).until(  # the toggle event comes after the click
        lambda driver: driver.execute_script(_TABLE_JS, benchmark.name)["rows"]
    )
    shown = browser.sample_rows(benchmark, 80, report.config.seed)
    items = {benchmark.items[i].id: (benchmark.items[i], i) for i in shown}
    good = report.scores[("good", benchmark.name)]
    page = chromium.execute_script(_TABLE_JS, benchmark.name)
    assert "Showing 80 of 120 items (the cap is 80 per benchmark)" in page["cap"]
    assert page["count"] == "80 of 80 rows shown"
    assert [row["id"] for row in page["rows"]] == [benchmark.items[i].id for i in shown]
    first = page["rows"][0]
    assert first["cells"]["summary"] == items[first["id"]][0].hypothesis
    assert first["cells"]["label"] == ("yes" if items[first["id"]][0].label else "no")

    # Sort by the "good" metric: ascending, then descending on a second click.
    section = chromium.find_element(
        By.CSS_SELECTOR, f'section.browser[data-benchmark="{benchmark.name}"]'
    )
    header = section.find_element(By.CSS_SELECTOR, 'th[data-col="score0"]')
    assert header.text.startswith("good")
    header.click()
    values = [
        float(row["cells"]["score0"])
        for row in chromium.execute_script(_TABLE_JS, benchmark.name)["rows"]
    ]
    assert values == sorted(values) and len(values) == 80
    assert values == sorted(round(good[i], 3) for i in shown)
    header.click()
    values = [
        float(row["cells"]["score0"])
        for row in chromium.execute_script(_TABLE_JS, benchmark.name)["rows"]
    ]
    assert values == sorted(values, reverse=True)

    # Filter: German items on which "noise" (threshold 0.5) and the humans disagree.
    noise = report.scores[("noise", benchmark.name)]
    Select(section.find_element(By.CSS_SELECTOR, 'select[data-filter="lang"]')).select_by_value(
        "de"
    )
    Select(section.find_element(By.CSS_SELECTOR, 'select[data-filter="disagree"]')).select_by_value(
        "1"
    )
    page = chromium.execute_script(_TABLE_JS, benchmark.name)
    expected = {
        item_id
        for item_id, (item, i) in items.items()
        if item.lang == "de" and (noise[i] >= 0.5) != item.label
    }
    assert 3 <= len(expected) < 27 and {row["id"] for row in page["rows"]} == expected
    assert page["count"] == f"{len(expected)} of 80 rows shown"
    assert all(row["cells"]["lang"] == "de" and "score1" in row["shaded"] for row in page["rows"])
    # An article excerpt expands to the full text.
    row = section.find_element(By.CSS_SELECTOR, "tbody tr")
    row.find_element(By.CSS_SELECTOR, "details summary").click()
    full = row.find_element(By.CSS_SELECTOR, "details .full")
    assert full.is_displayed() and full.text == items[row.get_attribute("data-id")][0].premise
    chromium.execute_script("arguments[0].scrollIntoView()", section)
    screenshot = tmp_path / "browser-filtered.png"
    assert chromium.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 20_000
    errors = [entry for entry in chromium.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def test_browser_sample_keeps_each_language_and_label_share():
    from seahorse_metrics.evaluation import browser

    items = eval_data.rated_pairs(3000, 7, prefix="big")
    benchmark = Benchmark("ratings/big", "ratings", "big", "large", tuple(items))
    shown = browser.sample_rows(benchmark, 300, seed=0)
    assert len(shown) == 300 and len(set(shown.tolist())) == 300
    assert list(shown) == sorted(shown)
    assert np.array_equal(shown, browser.sample_rows(benchmark, 300, seed=0))
    for lang in {i.lang for i in items}:
        for label in (True, False):
            share = np.mean([i.lang == lang and i.label == label for i in items])
            picked = sum(items[k].lang == lang and items[k].label == label for k in shown)
            assert abs(picked - 300 * share) <= 1.5
    assert np.array_equal(browser.sample_rows(benchmark, 5000, seed=0), np.arange(3000))


def test_markdown_passes_on_no_html_from_metric_and_benchmark_names(tmp_path):
    """Issue 29 point 10: names are text in report.md as they are in report.html."""
    from markdown_it import MarkdownIt

    hostile_benchmark = "<img src=x onerror=alert(1)>"
    hostile_metric = "<script>alert(2)</script>"
    bench = Benchmark(
        hostile_benchmark,
        "ratings",
        "<b>bold</b>",
        "set <i>with</i> tags",
        tuple(eval_data.rated_pairs(40, 0, prefix="h")),
    )
    scores = {item.id: float(index % 7) / 7 for index, item in enumerate(bench.items)}
    metrics = [
        eval_data.fixed_scores_metric(hostile_metric, scores),
        eval_data.fixed_scores_metric("`tick`<u>", scores),
    ]
    report = run_lib.evaluate([bench], metrics, run_lib.EvaluationConfig(n_resamples=20))
    markdown = report_lib.write_report(report, str(tmp_path))["md"]
    with open(markdown, encoding="utf-8") as handle:
        rendered = MarkdownIt("commonmark").render(handle.read())  # raw HTML allowed

    class Tags(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.text = set(), []

        def handle_starttag(self, tag, attrs):
            self.tags.add(tag)

        def handle_data(self, data):
            self.text.append(data)

    parsed = Tags()
    parsed.feed(rendered)
    assert not parsed.tags & {"img", "script", "b", "i", "u"}, parsed.tags
    text = "".join(parsed.text)
    for name in (hostile_benchmark, hostile_metric, "`tick`<u>", "set <i>with</i> tags"):
        assert name in text  # shown as written


class _FullDisk:
    """A file handle on a full disk: every write fails with ENOSPC."""

    def __init__(self, handle):
        self._handle = handle

    def write(self, data):
        import errno

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


def test_a_full_disk_names_the_file_and_leaves_the_reports_as_they_were(
    written, tmp_path, monkeypatch
):
    """Issue 48 point 10: ENOSPC while report.html is written."""
    import builtins

    report, _ = written
    real_open = builtins.open

    def open_on_a_full_disk(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        full = any(c in mode for c in "wax") and "report.html" in os.fspath(file)
        return _FullDisk(handle) if full else handle

    output = tmp_path / "report"
    with monkeypatch.context() as patched:
        patched.setattr(builtins, "open", open_on_a_full_disk)
        with pytest.raises(
            OSError,
            match=rf"No space left on device while writing "
            rf"{re.escape(str(output / 'report.html'))}",
        ):
            report_lib.write_report(report, str(output))
    assert os.listdir(output) == []  # no report.md or report.json without report.html
    # Over an earlier report: it stays whole, all three files as they were.
    paths = report_lib.write_report(report, str(output))
    before = {path: open(path, "rb").read() for path in paths.values()}
    with monkeypatch.context() as patched:
        patched.setattr(builtins, "open", open_on_a_full_disk)
        with pytest.raises(OSError, match="report.html"):
            report_lib.write_report(report, str(output))
    assert {path: open(path, "rb").read() for path in paths.values()} == before
    assert sorted(os.listdir(output)) == ["report.html", "report.json", "report.md"]


def test_html_opens_with_the_headline_and_plots_and_explains_every_mark(written):
    """Issue 48 point 23: the headline and plots first, every mark explained,
    the example browsers closed until opened."""
    report, paths = written
    text = open(paths["html"], encoding="utf-8").read()
    order = [
        text.index(marker)
        for marker in (
            "<h2>Headline</h2>",
            '<img class="roc"',
            "<h2>Marks</h2>",
            "<h2>Results</h2>",
            '<details class="browser-toggle"',
        )
    ]
    assert order == sorted(order)
    headline = text[order[0] : order[1]]
    # Per benchmark, the best of each statistic in bold and the † of the --compare pair.
    good_row = re.search(r"<tr><td>seahorse/q4</td><td>good</td>.*?</tr>", headline).group(0)
    assert good_row.count("<b>") == 2 and "<sup>†</sup>" in good_row
    items = re.findall(r"<li>(.*?)</li>", text[order[2] : order[3]])
    legend = [html_unescape(item) for item in items]
    explained = {line.split(":")[0] for line in legend}
    assert {"Bold", "[low, high]", "–", "n=…", "†"} <= explained, legend
    assert any("†: good vs noise" in line for line in legend)
    assert any("(≥t)" in line for line in legend)
    # Every mark a table uses is one the legend explains.
    used = set(re.findall(r"<sup>(.*?)</sup>", text))
    assert used == {"†"}
    # Browsers: closed, their rows built by the script when opened.
    assert text.count('<details class="browser-toggle"') == len(report.benchmarks)
    assert "<details open" not in text and '"toggle"' in text
    markdown = open(paths["md"], encoding="utf-8").read()
    assert (
        markdown.index("### Headline")
        < markdown.index("### Marks")
        < markdown.index("### SEAHORSE\n")
    )
    assert "†: good vs noise" in markdown


def html_unescape(text: str) -> str:
    import html as html_lib

    return html_lib.unescape(re.sub("<[^>]+>", "", text))
