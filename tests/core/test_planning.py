"""Verdicts and plans: exact for random, curve-based otherwise."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.core.reliability.exact import exact_agreement, pair_probability, smallest_n
from app.core.reliability.mdad import analyze_protocol
from app.core.reliability.planning import _crossing, curve_probability, plan, recommend, verdict
from app.core.reliability.protocol import run_protocol
from app.core.results import MDADResult


@pytest.fixture(scope="module")
def small_bench(gpqa):
    return gpqa["correct"][:60, :120]


def test_verdict_random_is_exact(small_bench) -> None:
    c = small_bench
    v = verdict(c, 3, 7, 30)
    p = pair_probability(c, 3, 7, 30)
    assert v.basis == "exact" and v.p_same == float(p.p_greater)
    assert v.p_same + v.p_tie + v.p_reversed == pytest.approx(1.0)
    assert v.gap == pytest.approx(c[3].mean() - c[7].mean())
    assert v.mdad == exact_agreement(c, 30).mdad
    assert v.distinguishable == (v.p_same >= 0.8)
    assert v.n_needed == smallest_n(c, 3, 7, 0.8)


def test_verdict_stratified_exact(small_bench) -> None:
    c = small_bench
    sub = np.repeat(["x", "y"], 60)
    v = verdict(c, 3, 7, 30, method="subtask_stratified", subtasks=sub)
    assert v.basis == "exact_stratified" and 0 <= v.p_same <= 1
    if v.n_needed is not None:
        assert verdict(c, 3, 7, v.n_needed, method="subtask_stratified", subtasks=sub).p_same >= 0.8


def test_plan_random_exact(small_bench) -> None:
    c = small_bench
    pl = plan(0.06, correct=c)
    assert pl.basis == "exact" and pl.n is not None
    assert exact_agreement(c, pl.n).curve.at(0.06) >= 0.8
    assert exact_agreement(c, pl.n - 1).curve.at(0.06) < 0.8


def test_crossing_log_interpolation() -> None:
    sizes = np.array([10, 100])
    assert _crossing(sizes, np.array([0.6, 1.0]), 0.8) == int(np.ceil(np.sqrt(1000) - 1e-9))
    assert _crossing(sizes, np.array([0.9, 1.0]), 0.8) == 10
    assert _crossing(sizes, np.array([0.1, 0.2]), 0.8) is None


def test_curve_based_verdict_and_plan(gpqa) -> None:
    res = run_protocol(
        gpqa["correct"], ("random",), (25, 100), runs=8, n_sources=50, n_targets=40, seed=1
    )
    cells = analyze_protocol(res, mode="robust", splits=("seen",))
    c = gpqa["correct"]
    v = verdict(
        c, 0, 1, 50, method="other", results=[dataclasses.replace(x, method="other") for x in cells]
    )
    p25, p100 = (float(x.curve.at(abs(v.gap))) for x in cells)
    assert min(p25, p100) - 1e-12 <= v.p_same <= max(p25, p100) + 1e-12
    assert v.basis == "robust_curve" and v.ci_low <= v.ci_high
    same, tie, rev, lo, hi = curve_probability(cells, 0.05, 25)
    assert same + tie + rev == pytest.approx(1.0) and lo <= hi
    assert same == pytest.approx(float(cells[0].curve.at(0.05)))
    pl = plan(0.05, "random", results=cells)
    assert pl.basis == "robust_curve" and list(pl.sizes) == [25, 100]
    with pytest.raises(ValueError, match="results"):
        verdict(c, 0, 1, 50, method="dpp")


# --- the analysis' recommendation (pure; no database) ---------------------------------------------


def _cell(method: str, n: int, mdad: float | None, lo=None, hi=None, split="seen") -> MDADResult:
    return MDADResult(
        method=method, n=n, split=split, mode="robust", mdad=mdad, ci_low=lo, ci_high=hi,
        threshold=0.8, reached=mdad is not None, max_gap=0.5, mean_agreement=0.7,
    )  # fmt: skip


def test_recommendation_known_answers() -> None:
    cells = [
        _cell("random", 10, None),
        _cell("anchor_points", 10, 0.09, 0.06, 0.12),
        _cell("random", 25, 0.08),
        _cell("anchor_points", 25, 0.05, 0.03, 0.07),
        _cell("random", 100, 0.03),
        _cell("anchor_points", 100, 0.025, 0.02, None),
        _cell("random", 250, 0.02),
        _cell("anchor_points", 250, 0.02, 0.015, 0.025),
        _cell("random", 250, 0.001, split="unseen"),  # other splits are ignored
    ]
    rec = recommend(
        cells, ["random", "anchor_points"], [250, 10, 100, 25], gap=0.025, threshold=0.8
    )
    assert rec.smallest_n == {"random": 250, "anchor_points": 100}
    vs = {r.n: r for r in rec.random_vs_best or []}
    assert [r.n for r in rec.random_vs_best] == [10, 25, 100, 250]
    assert vs[10].best_method == "anchor_points" and vs[10].random_within_ci is False
    assert vs[10].random_mdad is None
    assert vs[25].random_within_ci is False  # 0.08 > 0.07
    assert vs[100].random_within_ci is True  # open upper CI end
    assert vs[250].best_method == "random" and vs[250].random_within_ci is True  # tie: first
    none = recommend([_cell("dpp", 10, None)], ["dpp"], [10], gap=0.1, threshold=0.8)
    assert none.smallest_n == {"dpp": None} and none.random_vs_best is None
    nothing = recommend(
        [_cell("random", 10, None), _cell("dpp", 10, None)], ["random", "dpp"], [10], gap=0.1,
        threshold=0.8,
    )  # fmt: skip
    assert nothing.random_vs_best[0].best_method is None


def test_recommendation_matches_a_brute_force_scan() -> None:
    """200 random tables (3 methods x 4 sizes, some unreached) against a direct scan."""
    rng = np.random.default_rng(7)
    methods, sizes = ["random", "dpp", "anchor_points"], [10, 25, 50, 100]
    for _ in range(200):
        values = rng.choice([np.nan, 0.02, 0.05, 0.08, 0.11], size=(3, 4))
        highs = rng.choice([np.nan, 0.03, 0.06, 0.09], size=(3, 4))
        cells = [
            _cell(m, n, None if np.isnan(v) else float(v), None,
                  None if np.isnan(h) else float(v + h))
            for m, row, hrow in zip(methods, values, highs, strict=True)
            for n, v, h in zip(sizes, row, hrow, strict=True)
        ]  # fmt: skip
        gap = float(rng.choice([0.02, 0.05, 0.1]))
        rec = recommend(cells, methods, sizes, gap=gap, threshold=0.8)
        for i, m in enumerate(methods):
            want = next((n for n, v in zip(sizes, values[i], strict=True) if v <= gap), None)
            assert rec.smallest_n[m] == want
        for j, row in enumerate(rec.random_vs_best):
            col = np.where(np.isnan(values[:, j]), np.inf, values[:, j])
            if np.isinf(col).all():
                assert row.best_method is None and row.random_within_ci is None
                continue
            b = min(range(3), key=lambda i: (col[i], i))
            assert row.best_method == methods[b]
            hi = None if np.isnan(highs[b, j]) else values[b, j] + highs[b, j]
            r = col[0]
            assert row.random_within_ci == (
                (hi is None and np.isfinite(r)) or (hi is not None and r <= hi + 1e-12)
            )
