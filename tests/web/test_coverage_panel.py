"""The benchmark page's coverage panel (issue 24, item 5) in a real headless Chromium: "not run
yet" with the command, then the CLI starts the study (a job on the live service's worker) and the
page shows the stored table, cell for cell as the API returns it, without overflowing a phone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.cli.service import live_service
from tests.support.tools import missing
from tests.web.test_browser import Watch, browser  # noqa: F401  (the Chromium fixture)

pytestmark = pytest.mark.integration
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pushed(shared_data_dir: Path) -> Iterator[Any]:
    gpqa = shared_data_dir / "gpqa.npz"
    if not gpqa.exists():
        missing(f"{gpqa} not found (set BENCHSLICE_SHARED_DATA)")
    with live_service() as svc:
        env = svc.client_env()
        cmd = [sys.executable, "-m", "app.cli", "push", "--create", "--benchmark", "gpqa"]
        push = subprocess.run(
            [*cmd, str(gpqa)], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
        )
        assert push.returncode == 0, push.stdout + push.stderr
        yield svc


def _cli(svc: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=svc.client_env(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_cli_prints_the_source_floor_refusal_and_the_warning(
    pushed: Any, shared_data_dir: Path
) -> None:
    with np.load(shared_data_dir / "gpqa.npz", allow_pickle=False) as npz:
        names = npz["models"].tolist()
    base = ("subset", "create", "--benchmark", "gpqa", "--size", "25", "--seed", "3")
    few = _cli(pushed, *base, "--method", "dpp", "--source-models", ",".join(names[:5]))
    assert few.returncode == 2, few.stdout + few.stderr
    assert "dpp needs at least 20 source models with full results, got 5" in few.stderr
    assert "0.756" in few.stderr and few.stdout == ""
    warned = _cli(pushed, *base, "--method", "dpp", "--source-models", ",".join(names[:20]))
    assert warned.returncode == 0, warned.stdout + warned.stderr
    assert "warning (few_source_models): the dpp selector was fit on 20" in warned.stderr
    assert warned.stdout.strip()  # the subset id, alone on stdout


def test_panel_says_not_run_then_shows_the_cli_started_study(browser: Any, pushed: Any) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 360, "height": 900})
    page = context.new_page()
    watch = Watch(page)
    url = f"{pushed.url}/ui/benchmarks/gpqa"
    assert page.goto(url, wait_until="load").status == 200
    panel = page.locator("section#coverage")
    assert "Not run yet: benchslice benchmarks coverage gpqa --start" in panel.inner_text()
    none = _cli(pushed, "benchmarks", "coverage", "gpqa")
    assert none.returncode != 0 and "no coverage study" in (none.stdout + none.stderr)

    run = _cli(
        pushed,
        *("benchmarks", "coverage", "gpqa", "--start", "--methods", "random,anchor_points"),
        *("--sizes", "25", "--repeats", "1", "--seed", "11"),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "low 20 %" in run.stdout and "high 20 %" in run.stdout and "seed 11" in run.stdout
    as_json = _cli(pushed, "benchmarks", "coverage", "gpqa", "--json")
    body = json.loads(as_json.stdout)
    api = httpx.get(f"{pushed.url}/v1/benchmarks/gpqa/coverage", timeout=30).json()
    assert body == api and api["seed"] == 11 and api["n_models"] == 420
    assert (api["n_sources"], api["n_targets"]) == (315, 105)

    assert page.goto(url, wait_until="load").status == 200
    text = panel.inner_text()
    assert "420 models with full results" in text and "seed 11" in text
    rows = panel.locator("tbody tr")
    assert rows.count() == len(api["rows"]) > 0
    for i, r in enumerate(api["rows"]):
        cells = rows.nth(i).locator("td").all_inner_texts()
        assert cells[:4] == [r["method"], r["estimator"], r["interval"] or "", str(r["n"])]
        for cell, key in zip(
            cells[4:7], ("coverage", "coverage_low", "coverage_high"), strict=True
        ):
            assert cell.split()[0] == f"{r[key]:.3f}"
            assert ("low" in cell) == (r[key] < 0.93)
        assert cells[7] == f"{100 * r['mean_width']:.1f}"
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= 360, f"the benchmark page overflows a phone: scrollWidth {scroll}"
    assert watch.problems == [], watch.problems
    context.close()
