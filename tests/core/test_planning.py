"""Verdicts and plans: exact for random, curve-based otherwise."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.core.exact import exact_agreement, pair_probability, smallest_n
from app.core.mdad import analyze_protocol
from app.core.planning import _crossing, curve_probability, plan, verdict
from app.core.protocol import run_protocol


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
