"""The browser view in a real headless Chromium (Debian's ``chromium`` driven by Playwright)
against a live service (``make run``'s launcher) holding the real GPQA matrix.

Every page loads with no console error, no failed request and no response >= 400, and fits a
360-px viewport without horizontal scrolling; the pair form answers the README's close pair; the
analysis plots carry one line per method; with keys on, the login flow works and a missing key is
refused. Writes the README's two screenshots to docs/screenshots/.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.service import live_service, thread_server
from tests.support.tools import missing
from tests.web.live_data import ANALYSIS, CLOSE_PAIR, LiveGPQA, seed_gpqa

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO_ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
WIDTHS = (1280, 360)


def _chromium() -> str:
    path = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if path is None:
        missing("Debian's chromium is not installed (`apt-get install chromium`; .ci/run does)")
    return path  # type: ignore[return-value]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable)
        yield b
        b.close()


@pytest.fixture(scope="module")
def live(shared_data_dir: Path) -> Iterator[tuple[str, LiveGPQA]]:
    gpqa = shared_data_dir / "gpqa.npz"
    if not gpqa.exists():
        missing(f"{gpqa} not found (set BENCHSLICE_SHARED_DATA)")
    with live_service() as svc:
        # `make run` prints the view's URL next to the API's
        assert any(f"browser view:     {svc.url}/ui/" in line for line in svc.lines), svc.log
        yield svc.url, seed_gpqa(svc.url, svc.client_env(), gpqa, REPO_ROOT)


class Watch:
    """Console errors, uncaught page errors, failed requests and 4xx/5xx responses of a page."""

    def __init__(self, page: Any) -> None:
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _failed(self, r: Any) -> None:
        # Chromium fetches the favicon after the load event and aborts that fetch when the test
        # navigates on (net::ERR_ABORTED, a CI flake): not the page's fault. A favicon that is
        # missing or broken is still caught, as an HTTP >= 400 response.
        if r.url.endswith("/favicon.svg") and "ERR_ABORTED" in str(r.failure):
            return
        self.problems.append(f"failed: {r.url} {r.failure}")

    def _console(self, msg: Any) -> None:
        if msg.type in ("error", "warning"):
            self.problems.append(f"console {msg.type}: {msg.text}")

    def _response(self, r: Any) -> None:
        if r.status >= 400:
            self.problems.append(f"HTTP {r.status}: {r.url}")


def test_every_page_loads_clean_at_1280_and_360(browser: Any, live) -> None:
    base, data = live
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shots = {("analysis", 1280), ("pair", 360), ("gate", 360)}
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        watch = Watch(page)
        for name, url in data.pages().items():
            response = page.goto(base + url, wait_until="load")
            assert response is not None and response.status == 200, (name, width)
            assert page.locator("main h1").count() == 1, name
            scroll = page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width, f"{name} overflows at {width}px: scrollWidth {scroll}"
            assert watch.problems == [], (name, width, watch.problems)
            if (name, width) in shots:
                page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"))
        context.close()
    for name, width in shots:
        assert (SCREENSHOTS / f"{name}-{width}.png").stat().st_size > 10_000


def test_pair_form_answers_the_readme_close_pair(browser: Any, live) -> None:
    base, data = live
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    watch = Watch(page)
    page.goto(f"{base}/ui/benchmarks/{data.benchmark}/pair")
    page.fill("#model_a", CLOSE_PAIR[0])
    page.fill("#model_b", CLOSE_PAIR[1])
    page.fill("#size", "25")
    with page.expect_navigation():
        page.click("form.stack button[type=submit]")
    assert page.inner_text("#verdict h2") == "NOT distinguishable"
    assert page.inner_text("#p-same") == "0.51"
    sentence = page.inner_text("#verdict .sentence")
    assert "gap 2.2 pts" in sentence
    answers = page.locator("#answers li").all_inner_texts()
    assert answers[0].startswith("Full benchmark (448 items): not significantly different")
    assert "with P = 0.51" in answers[1]
    assert answers[2].startswith("Next: no subset can")
    assert page.locator('#verdict figure.wide svg g.series[data-series="pair"]').count() == 1
    assert watch.problems == []
    # a bad size: a 4xx page with the form and a clear message, not an error trace
    response = page.goto(
        f"{base}/ui/benchmarks/{data.benchmark}/pair?model_a={CLOSE_PAIR[0]}"
        f"&model_b={CLOSE_PAIR[1]}&size=9999"
    )
    assert response is not None and response.status == 422
    assert "out of range" in page.inner_text("#verdict-error")
    page.close()


def test_analysis_plots_have_one_line_per_method(browser: Any, live) -> None:
    base, data = live
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/ui/analyses/{data.analysis_id}")
    for figure in ("#mdad-plot", "#agreement-plot"):
        assert page.locator(f"{figure} svg").count() == 1
        series = page.locator(f"{figure} svg g.series")
        assert series.evaluate_all("gs => gs.map(g => g.dataset.series)") == ANALYSIS["methods"]
        # each series is one drawn line (a path with a stroke and no fill)
        for k in range(series.count()):
            path = series.nth(k).locator("path").first
            assert path.get_attribute("fill") == "none" and path.get_attribute("stroke")
        box = page.locator(f"{figure} svg").bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 150
    page.close()


def test_login_flow_with_keys_on(browser: Any) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from app.services.access.keys import create_key

    with thread_server(auth_enabled=True) as (base, db_url):
        engine = create_engine(db_url)
        with Session(engine) as session:
            _, key = create_key(session, "browser", ["read"])
            session.commit()
        engine.dispose()
        context = browser.new_context(viewport={"width": 360, "height": 800})
        page = context.new_page()
        response = page.goto(f"{base}/ui/")
        assert response is not None and response.status == 401  # no key: refused
        assert page.locator("#key").count() == 1
        page.fill("#key", "bsk_0000_wrong")
        with page.expect_navigation():
            page.click("form.stack button[type=submit]")
        assert "invalid" in page.inner_text("p.error")
        assert page.locator("#key").input_value() == ""  # the key is not echoed back
        page.fill("#key", key)
        with page.expect_navigation():
            page.click("form.stack button[type=submit]")
        assert page.url == f"{base}/ui/" and page.inner_text("main h1") == "Benchmarks"
        assert key not in page.content()
        cookie = next(c for c in context.cookies() if c["name"] == "benchslice_session")
        assert key not in cookie["value"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
        # a fresh browser without the cookie is refused again
        other = browser.new_context()
        response = other.new_page().goto(f"{base}/ui/")
        assert response is not None and response.status == 401
        other.close()
        context.close()


# the columns a phone must show without sideways scrolling, per page and table (issue 28)
DECISIVE = {
    "benchmark": ("table.models", ("Rank", "Model", "Accuracy", "Tier")),
    "session": ("table.history", ("Batch", "Items", "Decision")),
    "analysis": ("#mdad-table table", ("Method", "n", "MDAD")),
    "gate": ("table.gate", ("Benchmark", "State", "Difference")),
}


def test_decisive_columns_fit_a_phone(browser: Any, live) -> None:
    """At 360 px the decisive columns of each wide table are inside the viewport with the
    table scrolled to its start, and a visible cue says more columns follow."""
    base, data = live
    context = browser.new_context(viewport={"width": 360, "height": 800})
    page = context.new_page()
    urls = data.pages()
    for name, (table, columns) in DECISIVE.items():
        page.goto(base + urls[name], wait_until="load")
        heads = page.locator(f"{table} thead th")
        labels = [t.strip().split(" ")[0] for t in heads.all_inner_texts()]
        assert labels[: len(columns)] == list(columns), (name, labels)
        for k in range(len(columns)):
            box = heads.nth(k).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 360, (
                name,
                columns[k],
                box,
            )
        cue = page.locator(f"{table}").locator("xpath=../preceding-sibling::p[@class='cue'][1]")
        assert cue.count() == 1 and cue.is_visible(), name
        assert page.evaluate("document.documentElement.scrollWidth") <= 360, name
    # at desktop width the cue is not shown
    wide = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    wide.goto(base + urls["benchmark"], wait_until="load")
    assert not wide.locator("p.cue").first.is_visible()
    context.close()


SMALLEST_TEXT = """() => {
  const out = [];
  for (const svg of document.querySelectorAll("svg.plot")) {
    const box = svg.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;  // the variant for the other width
    const ratio = box.width / svg.viewBox.baseVal.width;
    for (const g of svg.querySelectorAll("g[transform*='scale(']")) {
      if (!g.querySelector("use")) continue;
      const m = /scale\\(([0-9.e-]+)/.exec(g.getAttribute("transform"));
      if (m) out.push(parseFloat(m[1]) * 100 * ratio);  // matplotlib: glyph scale = pt / 100
    }
  }
  return out;
}"""


def test_chart_text_is_readable_on_a_phone(browser: Any, live) -> None:
    """Every figure's text is drawn at >= 11 px at 360 px (the page shows the phone variant),
    and the desktop figures at 1280 px keep >= 10 px."""
    base, data = live
    for width, floor in ((360, 11.0), (1280, 10.0)):
        context = browser.new_context(viewport={"width": width, "height": 800})
        page = context.new_page()
        for name in ("benchmark", "pair", "analysis", "session"):
            page.goto(base + data.pages()[name], wait_until="load")
            sizes = page.evaluate(SMALLEST_TEXT)
            assert sizes, (name, width)
            assert min(sizes) >= floor, (name, width, round(min(sizes), 2))
        context.close()
