"""Issue 38, end to end through the CLI and the pages against a live service: a pair reads the
same way in `verdict`, `evaluate` and on both pages, because every surface names its estimand
and a session with a baseline defaults to the verdict's (generalized accuracy).

* The README's close GPQA pair (McNemar p = 0.53): `verdict` says not distinguishable; `evaluate`
  (default) runs all 448 items and does not decide (exit 1); with `--estimand benchmark` it does
  decide, and says that it is about these 448 items.
* A 60-item benchmark (synthetic) where the candidate is one item worse than its baseline: the
  generalized session does not decide; the benchmark one decides `worse` at item 60 (exact)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.cli.conftest import CLI

pytestmark = pytest.mark.integration

CLOSE = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct")


def _evaluate(cli: CLI, bench: str, model: str, baseline: str, answers: Path, row: str, *extra):
    batch = "10" if bench == "sixty" else "64"
    args = ["evaluate", "-b", bench, "-m", model, "--baseline", baseline, "--policy", "random"]
    args += ["--answers", str(answers), "--answers-model", row, "--batch", batch, "--seed", "0"]
    return cli(*args, *extra)


def _session_page(service, sid: str) -> str:
    return httpx.get(f"{service.url}/ui/sessions/{sid}").text


def _cell(page: str, name: str) -> str:
    m = re.search(rf'id="{name}">([^<]*)<', page)
    assert m is not None, name
    import html

    return html.unescape(m.group(1)).strip()


def test_the_close_gpqa_pair_reads_the_same_everywhere(
    cli: CLI, service, gpqa: dict[str, Any]
) -> None:
    a, b = CLOSE
    verdict = cli("verdict", "-b", "gpqa", a, b, "-n", "25")
    assert verdict.code == 1 and verdict.stdout.startswith("NOT distinguishable"), verdict
    assert "estimand: the full-benchmark answer is about generalized accuracy" in verdict.stdout
    pair_page = httpx.get(
        f"{service.url}/ui/benchmarks/gpqa/pair", params={"model_a": a, "model_b": b, "size": 25}
    ).text
    assert "about generalized accuracy: the mean over items like these" in _cell(
        pair_page, "estimand"
    )

    # the default session: generalized, all 448 items, not decided (the verdict's "tied")
    run = _evaluate(cli, "gpqa", "story/close", b, gpqa["path"], a)
    assert run.code == 1, run
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith(" 448 items") and last.endswith("(design, generalized)  exhausted")
    assert "Not decided after 448 of 448 items" in run.stderr
    assert "about generalized accuracy: the mean over items like these" in run.stderr
    sid = re.search(r"session ([0-9a-f-]{36})", run.stderr).group(1)
    s = httpx.get(f"{service.url}/v1/sessions/{sid}").json()
    assert s["estimand"] == "generalized" and s["decision"] == "undecided"
    assert s["difference"]["estimand"] == "generalized"
    assert s["difference"]["lower"] < 0 < s["difference"]["upper"]  # never exact at N
    page = _session_page(service, sid)
    assert _cell(page, "conclusion") == s["conclusion"]
    assert s["conclusion"] in run.stderr

    # asked about these 448 items instead, the session decides and says which accuracy
    bench = _evaluate(cli, "gpqa", "story/close-b", b, gpqa["path"], a, "--estimand", "benchmark")
    assert bench.code == 0, bench
    assert bench.stdout.strip().endswith("(design, benchmark)  decided: better"), bench
    assert "about benchmark accuracy: the mean over these 448 items" in bench.stderr


def _sixty(tmp_path: Path) -> Path:
    """Synthetic: 8 models x 60 items (seeded Bernoulli), plus `story/cand-stored`, the
    baseline's row with one of its right answers made wrong (1.7 points worse, exactly)."""
    rng = np.random.default_rng(38)
    p = np.linspace(0.35, 0.75, 8)[:, None]
    correct = (rng.random((8, 60)) < p).astype(np.uint8)
    cand = correct[4].copy()
    cand[int(np.flatnonzero(cand)[0])] = 0
    models = [f"story/m{k}" for k in range(8)] + ["story/cand-stored"]
    path = tmp_path / "sixty.npz"
    np.savez(
        path,
        correct=np.vstack([correct, cand]),
        models=np.asarray(models),
        item_ids=np.asarray([f"q{i:02d}" for i in range(60)]),
    )
    return path


def test_one_item_of_sixty_does_not_decide(cli: CLI, service, tmp_path: Path) -> None:
    path = _sixty(tmp_path)
    pushed = cli("push", "--create", "--benchmark", "sixty", str(path))
    assert pushed.code == 0, pushed
    base, row = "story/m4", "story/cand-stored"
    board = httpx.get(
        f"{service.url}/v1/benchmarks/sixty/leaderboard", params={"models": f"{base},{row}"}
    ).json()
    assert board["estimand"] == "generalized"
    assert len({r["tier"] for r in board["rows"]}) == 1  # the leaderboard: one tier
    verdict = cli("verdict", "-b", "sixty", row, base, "-n", "30")
    assert verdict.code == 1, verdict

    run = _evaluate(cli, "sixty", "story/cand", base, path, row)
    assert run.code == 1, run  # generalized (the default with a baseline): not decided
    assert run.stdout.strip().splitlines()[-1].endswith("(design, generalized)  exhausted")
    assert "Not decided after 60 of 60 items" in run.stderr
    sid = re.search(r"session ([0-9a-f-]{36})", run.stderr).group(1)
    s = httpx.get(f"{service.url}/v1/sessions/{sid}").json()
    assert _cell(_session_page(service, sid), "conclusion") == s["conclusion"]

    exact = _evaluate(cli, "sixty", "story/cand-b", base, path, row, "--estimand", "benchmark")
    assert exact.code == 3, exact  # decided worse: the regression code of the CI exit table
    last = exact.stdout.strip().splitlines()[-1]
    assert last.startswith("  60 items") and "difference -1.7%" in last, exact
    assert last.endswith("(design, benchmark)  decided: worse")
    assert "about benchmark accuracy: the mean over these 60 items" in exact.stderr
