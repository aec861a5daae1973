"""The documentation site builds with warnings as errors, and its pages work in a browser.

`mkdocs build --strict` (mkdocs.yml; docs/hooks.py generates the command reference and the
benchmark page) into a temporary directory, then the built site served on a loopback port and
opened in a real headless Chromium (Debian's chromium and chromedriver, which .ci/run
installs): the navigation leads to every page, the search finds a flag and opens its page, and
every benchmark plot is a loaded image. Screenshots of the three go to the test's temporary
directory (their paths are printed).
"""

from __future__ import annotations

import functools
import html as html_module
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from test_readme import nav_pages

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
# What the search must find, and the page it must lead to.
SEARCH_TERM, SEARCH_PAGE = "packing", "guides/scoring/"

pytestmark = pytest.mark.slow  # the build renders ~40 plots and the API pages: ~20-50 s


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> str:
    site_dir = str(tmp_path_factory.mktemp("site"))
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", site_dir],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return site_dir


def read(site: str, page: str) -> str:
    with open(os.path.join(site, page), encoding="utf-8") as handle:
        return handle.read()


def test_generated_pages_hold_what_they_are_generated_from(site):
    from seahorse_metrics.cli import SUBCOMMANDS

    cli = read(site, "reference/cli/index.html")
    for name in SUBCOMMANDS:
        assert f"usage: seahorse-metrics {name}" in cli, name
    assert "--engine_option" in cli and "--calibrate_on" in cli
    api = read(site, "reference/api/index.html")
    for name in (
        "seahorse_metrics.Scorer",
        "seahorse_metrics.MultiScorer",
        "seahorse_metrics.checkpoints.load_checkpoint",
        "seahorse_metrics.evaluation.run.run_evaluation",
        "seahorse_metrics.RemoteScorer",
        "seahorse_metrics.stats.roc_auc",
    ):
        assert f'id="{name}"' in api, name
    assert "Scorer.load" in api and "Args:" not in api  # Google-style sections are rendered
    home = read(site, "index.html")
    assert 'id="quick-start"' in home and "seahorse-metrics prepare" in text_of(home)
    assert "fonts.googleapis.com" not in home  # nothing from the network


def test_benchmark_page_has_a_section_per_benchmark_and_a_plot_per_record(site):
    """The hook's render of the committed bench/results records (bench/render_results.py)."""
    import matplotlib.image

    sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))
    try:
        import render_results
    finally:
        sys.path.pop(0)
    bench = text_of(read(site, "benchmarks/index.html"))
    for record in render_results.load_records():
        assert f"bench/results/{record['_file']}" in bench, record["_file"]
    for _, heading, _ in render_results.SECTIONS:
        assert heading.replace("`", "") in bench, heading
    plots = os.listdir(os.path.join(site, "benchmarks", "plots"))
    html = read(site, "benchmarks/index.html")
    assert len(plots) >= 30 and all(f'src="plots/{name}"' in html for name in plots)
    for name in plots:
        path = os.path.join(site, "benchmarks", "plots", name)
        height, width, _ = matplotlib.image.imread(path).shape
        assert width >= 600 and height >= 150, name


def text_of(html: str) -> str:
    """The page's text, the code highlighter's spans removed."""
    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on a free loopback port (search needs HTTP, not file://)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # the test's output is the browser's, not the server's
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=site)
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join(10)


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
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def page_url(page: str) -> str:
    """Where MkDocs puts a page (directory URLs): guides/scoring.md -> guides/scoring/."""
    return re.sub(r"index\.md$", "", page) if page.endswith("index.md") else page[:-3] + "/"


def screenshot(driver, path) -> None:
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 20_000
    print(f"screenshot: {path}")


def severe_errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def test_navigation_reaches_every_page(served, chromium, tmp_path):
    from selenium.webdriver.common.by import By

    chromium.get(served)
    screenshot(chromium, tmp_path / "home.png")
    links = chromium.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link[href]")
    targets = {link.get_attribute("href") for link in links}
    expected = {served + page_url(page) for page in nav_pages()}
    assert expected <= targets, expected - targets
    for url in sorted(expected):
        chromium.get(url)
        heading = chromium.find_element(By.CSS_SELECTOR, "article h1").text
        assert heading and "404" not in chromium.title, url
    assert not severe_errors(chromium)


# The hrefs of the links matching a CSS selector that are displayed (laid out), in order.
SHOWN_LINKS = (
    "return Array.from(document.querySelectorAll(arguments[0]))"
    ".filter(a => a.getClientRects().length > 0).map(a => a.href);"
)


def test_search_finds_a_flag_and_opens_its_guide(served, chromium, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    chromium.get(served)
    search = chromium.find_element(By.CSS_SELECTOR, "input.md-search__input")
    search.click()  # as a reader does: the search box opens, then the typed words
    search.send_keys(SEARCH_TERM)
    results = ".md-search-result__item a.md-search-result__link"
    # The result list is rebuilt as each key arrives: the links shown are read in one script
    # (an element found one call earlier may be gone by the next).
    hits = WebDriverWait(chromium, 60).until(lambda d: d.execute_script(SHOWN_LINKS, results))
    screenshot(chromium, tmp_path / "search.png")
    assert any(SEARCH_PAGE in hit for hit in hits), hits
    chromium.get(next(hit for hit in hits if SEARCH_PAGE in hit))
    assert SEARCH_TERM in chromium.find_element(By.CSS_SELECTOR, "article").text
    assert not severe_errors(chromium)


def test_benchmark_plots_load_as_images(served, chromium, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    chromium.get(served + "benchmarks/")
    plots_js = (
        "return Array.from(document.images).filter(i => i.src.includes('/plots/'))"
        ".map(i => [i.src, i.complete, i.naturalWidth, i.naturalHeight])"
    )
    WebDriverWait(chromium, 60).until(
        lambda d: (lambda found: found and all(done for _, done, _, _ in found))(
            d.execute_script(plots_js)
        )
    )
    plots = chromium.execute_script(plots_js)
    assert len(plots) >= 30
    broken = [src for src, _, width, height in plots if width < 600 or height < 150]
    assert not broken, broken
    chromium.execute_script(
        "document.querySelector(`img[src*='plan-fit-h100-8']`).scrollIntoView()"
    )
    screenshot(chromium, tmp_path / "benchmarks.png")
    assert not severe_errors(chromium)
