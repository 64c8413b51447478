"""``benchslice benchmarks items`` on a live service with GPQA pushed, and the offline
``benchslice coverage`` on the real matrix, against the engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core.items.health import item_health
from app.core.scoring.coverage import coverage_study
from tests.cli.conftest import CLI, HELD_OUT, run_cli

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _stored(gpqa: dict[str, Any]) -> np.ndarray:
    with np.load(gpqa["path"]) as data:
        keep = [i for i, m in enumerate(data["models"].tolist()) if m != HELD_OUT]
        return data["correct"][keep].astype(float)


def test_items_flagged_json_equals_the_engine(cli: CLI, gpqa: dict[str, Any]) -> None:
    run = cli("benchmarks", "items", "gpqa", "--flagged", "--json")
    assert run.code == 0, run
    body = run.json()
    h = item_health(_stored(gpqa))
    assert [r["position"] for r in body["items"]] == np.flatnonzero(h.flagged()).tolist()
    assert body["next_cursor"] is None and body["summary"] == {
        **h.summary(),
        "irt": False,
        "irt_dims": None,
    } | {"effective_informative": pytest.approx(h.summary()["effective_informative"])}
    # GPQA: the 3 items every model gets wrong and the 2 every model gets right
    constant = [r for r in body["items"] if r["flags"] == ["constant"]]
    assert sorted({r["accuracy"] for r in constant}) == [0.0, 1.0] and len(constant) >= 5


def test_items_table_with_one_flag(cli: CLI, gpqa: dict[str, Any]) -> None:
    run = cli("benchmarks", "items", "gpqa", "--flag", "constant")
    assert run.code == 0, run
    lines = run.stdout.splitlines()
    h = item_health(_stored(gpqa))
    n_const = int(h.flags["constant"].sum())
    assert lines[0].startswith(f"448 items, {h.n_models} models; flagged {int(h.flagged().sum())}")
    assert "no IRT fit stored" in lines[0]
    rows = [ln for ln in lines[1:] if ln.strip().endswith("constant")]
    assert len(rows) == n_const
    bad = cli("benchmarks", "items", "gpqa", "--flag", "wrong_key")
    assert bad.code != 0 and "flag" in bad.stderr


def test_coverage_json_equals_the_engine(gpqa_path: Path) -> None:
    args = [
        "coverage",
        "--matrix",
        str(gpqa_path),
        "--methods",
        "random,dpp",
        "--sizes",
        "25",
        "--repeats",
        "2",
        "--targets",
        "30",
        "--seed",
        "0",
        "--json",
    ]
    run = run_cli(None, *args)
    assert run.code == 0, run
    assert run.stdout.strip().count("\n") == 0  # exactly one JSON document
    body = json.loads(run.stdout)
    with np.load(gpqa_path) as data:
        engine = coverage_study(
            data["correct"],
            ["random", "dpp"],
            [25],
            repeats=2,
            n_targets=30,
            subtasks=data["subtasks"],
            seed=0,
        )
    assert body["params"]["repeats"] == 2 and body["params"]["n_targets"] == 30
    assert len(body["rows"]) == len(engine.rows)
    keys = ("method", "estimator", "interval", "basis", "n", "cases")
    for got, want in zip(body["rows"], engine.rows, strict=True):
        assert tuple(got[k] for k in keys) == tuple(getattr(want, k) for k in keys)
        assert got["coverage"] == pytest.approx(want.coverage, abs=1e-12)
        assert got["mean_width"] == pytest.approx(want.mean_width, abs=1e-12)
    by = {(r["method"], r["interval"]): r for r in body["rows"]}
    assert by[("random", "jeffreys_fpc")]["basis"] == "design"
    assert by[("dpp", "reference_calibrated")]["basis"] == "model"


def test_coverage_table_and_bad_method(gpqa_path: Path) -> None:
    base = [sys.executable, "-m", "app.cli", "coverage", "--matrix", str(gpqa_path)]
    ok = subprocess.run(
        [*base, "--methods", "random", "--sizes", "25", "--repeats", "1", "--targets", "20"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr
    assert "| method | estimator | interval | basis | n | coverage (SE)" in ok.stdout
    assert "| random | mean | jeffreys_fpc | design | 25 |" in ok.stdout
    bad = subprocess.run(
        [*base, "--methods", "nope"], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert bad.returncode == 2 and "--methods" in bad.stderr


def test_verdict_paired_and_plan_significance(cli: CLI, gpqa: dict[str, Any]) -> None:
    from scipy import stats as st

    with np.load(gpqa["path"]) as data:
        names = [m for m in data["models"].tolist() if m != HELD_OUT]
    y = _stored(gpqa)
    by_name = dict(zip(sorted(names), y[np.argsort(names)], strict=True))
    a, b = sorted(names)[:2]
    run = cli("verdict", "-b", "gpqa", a, b, "-n", "25", "--json", "--min-discordant", "5")
    assert run.code in (0, 1), run
    p = run.json()["paired"]
    ya, yb = by_name[a].astype(bool), by_name[b].astype(bool)
    n10, n01 = int((ya & ~yb).sum()), int((~ya & yb).sum())
    assert (p["n10"], p["n01"], p["min_discordant"]) == (n10, n01, 5)
    assert p["mcnemar_p"] == pytest.approx(st.binomtest(n10, n10 + n01).pvalue, rel=1e-9)
    text = cli("verdict", "-b", "gpqa", a, b, "-n", "25")
    assert f"only A {n10}, only B {n01}" in text.stdout and "Dirichlet" in text.stdout
    plan = cli("plan", "-b", "gpqa", "--gap", "0.05", "--pair", a, b, "--json")
    assert plan.code == 0, plan
    sig = plan.json()["significance"]
    p10, p01 = n10 / 448, n01 / 448
    omega2 = p10 + p01 - (p10 - p01) ** 2
    z = st.norm.ppf(0.975) + st.norm.ppf(0.8)
    n = z * z * omega2 / 0.05**2
    assert sig["source"] == "pair" and sig["n"] == int(np.ceil(n / (1 + (n - 1) / 448) - 1e-9))
    plain = cli("plan", "-b", "gpqa", "--gap", "0.05")
    assert "significance (paired test" in plain.stdout and "typical" in plain.stdout


def test_score_interval_option_and_basis_column(
    cli: CLI, gpqa: dict[str, Any], tmp_path: Path
) -> None:
    from scipy import stats as st

    made = cli("subset", "create", "-b", "gpqa", "-n", "40", "--seed", "5", "--exclude", "constant")
    assert made.code == 0, made
    assert "excluded items flagged constant" in made.stderr
    shown = cli("subset", "get", made.stdout.strip(), "-f", "json")
    assert shown.code == 0, shown
    sub = shown.json()
    assert sub["provenance"]["exclude"] == ["constant"]
    constant = np.flatnonzero(item_health(_stored(gpqa)).flags["constant"])
    assert not {i["position"] for i in sub["items"]} & set(constant.tolist())
    with np.load(gpqa["path"]) as data:
        row = data["correct"][data["models"].tolist().index(HELD_OUT)]
    path = tmp_path / "held.csv"
    path.write_text(
        "item_id,correct\n"
        + "".join(f"{i['item_id']},{int(row[i['position']])}\n" for i in sub["items"])
    )
    run = cli("score", sub["id"], "--model", "x", str(path), "--interval", "jeffreys", "--json")
    assert run.code == 0, run
    (est,) = [e for e in run.json()["estimates"] if e["estimator"] == "mean"]
    k = int(row[[i["position"] for i in sub["items"]]].sum())
    assert est["interval"] == "jeffreys" and est["basis"] == "design"
    assert est["ci_low"] == pytest.approx(st.beta.ppf(0.025, k + 0.5, 40 - k + 0.5))
    table = cli("score", sub["id"], "--model", "y", str(path))
    assert table.code == 0 and "basis" in table.stdout and "design" in table.stdout
    bad = cli("score", sub["id"], "--model", "z", str(path), "--interval", "wald")
    assert bad.code == 2 and "interval" in bad.stderr
