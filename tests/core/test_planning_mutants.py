"""Planning (verdicts, plans, recommendations) against independent oracles.

Written against the surviving mutants of ``app/core/reliability/planning.py``: hand-built agreement curves whose
log-n interpolation is computed in closed form here, brute-force enumeration of every subset
(uniform and subtask-stratified) on an 8-item benchmark, and brute-force scans over every size.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from app.core.reliability.exact import exact_agreement, stratified_order_probabilities
from app.core.reliability.planning import (
    _crossing,
    _mdad_at,
    _smallest_n_stratified,
    curve_probability,
    plan,
    recommend,
    verdict,
)
from app.core.results import AgreementCurve, MDADResult

# -- an 8-item benchmark small enough to enumerate every subset ------------------------------------

TINY = np.array(
    [
        [1, 1, 1, 1, 1, 0, 0, 0],  # A: 5/8
        [1, 0, 0, 0, 0, 1, 1, 0],  # B: 3/8
        [0, 1, 0, 1, 0, 1, 0, 1],  # C: 4/8
        [1, 1, 0, 0, 1, 1, 0, 0],  # D: 4/8
    ]
)
SUBTASKS = np.array(["x"] * 4 + ["y"] * 4)


def _oriented(ya, yb, counts: tuple[int, int, int]) -> tuple[Fraction, Fraction, Fraction]:
    """(same, tie, reversed) from (X>Y, X=Y, X<Y) counts; A leads when the full accuracies tie."""
    g, e, lt = counts
    tot = g + e + lt
    if sum(ya) >= sum(yb):
        return Fraction(g, tot), Fraction(e, tot), Fraction(lt, tot)
    return Fraction(lt, tot), Fraction(e, tot), Fraction(g, tot)


def brute_random(ya, yb, n: int) -> tuple[Fraction, Fraction, Fraction]:
    """P(same / tie / reversed order) over all C(N, n) subsets."""
    d = [int(x) - int(y) for x, y in zip(ya, yb, strict=True)]
    cnt = [0, 0, 0]
    for s in itertools.combinations(range(len(d)), n):
        t = sum(d[i] for i in s)
        cnt[0 if t > 0 else 1 if t == 0 else 2] += 1
    return _oriented(ya, yb, tuple(cnt))


def brute_stratified(ya, yb, labels, n: int) -> tuple[Fraction, Fraction, Fraction]:
    """Equal allocation, the ``n mod K`` extra items in a uniformly random set of subtasks."""
    d = [int(x) - int(y) for x, y in zip(ya, yb, strict=True)]
    labs = sorted(set(labels))
    groups = [[i for i, lab in enumerate(labels) if lab == h] for h in labs]
    base, r = divmod(n, len(labs))
    extras = list(itertools.combinations(range(len(labs)), r))
    acc = [Fraction(0)] * 3
    for ex in extras:
        per = [list(itertools.combinations(g, base + (h in ex))) for h, g in enumerate(groups)]
        total = math.prod(len(p) for p in per) * len(extras)
        for pick in itertools.product(*per):
            t = sum(d[i] for s in pick for i in s)
            acc[0 if t > 0 else 1 if t == 0 else 2] += Fraction(1, total)
    g, e, lt = acc
    if sum(ya) >= sum(yb):
        return g, e, lt
    return lt, e, g


def first_reaching(probs, threshold) -> int | None:
    """Smallest n (1-based) whose probability reaches ``threshold``: a plain scan."""
    return next((n for n, p in enumerate(probs, start=1) if p >= threshold), None)


# -- hand-built agreement curves -------------------------------------------------------------------

EDGES = [0.0, 0.1, 0.2, 0.3]


def _curve(fitted, tie, low=None, high=None, p_same=None) -> AgreementCurve:
    raw = np.asarray(fitted if p_same is None else p_same, dtype=float)
    return AgreementCurve(
        gaps=np.array(EDGES),
        gap_upper=np.array([*EDGES[1:], 1.0]),
        n_pairs=np.ones(len(EDGES)),
        p_same=raw,
        p_tie=np.asarray(tie, dtype=float),
        p_reversed=1.0 - raw - np.asarray(tie, dtype=float),
        fitted=np.asarray(fitted, dtype=float),
        band_low=None if low is None else np.asarray(low, dtype=float),
        band_high=None if high is None else np.asarray(high, dtype=float),
    )


def _res(method, n, curve, mdad, mode="robust") -> MDADResult:
    return MDADResult(
        method=method, n=n, split="seen", mode=mode, mdad=mdad, ci_low=mdad, ci_high=mdad,
        threshold=0.8, reached=mdad is not None, max_gap=0.5, mean_agreement=0.7, curve=curve,
    )  # fmt: skip


F10 = [0.35, 0.45, 0.60, 0.85]
T10 = [0.40, 0.30, 0.20, 0.05]
L10 = [0.25, 0.35, 0.50, 0.75]
H10 = [0.45, 0.55, 0.70, 0.95]
F40 = [0.50, 0.70, 0.90, 0.97]
T40 = [0.30, 0.15, 0.05, 0.01]
L40 = [0.40, 0.60, 0.80, 0.90]
H40 = [0.60, 0.80, 0.95, 0.99]
F160 = [0.60, 0.85, 0.99, 1.00]
T160 = [0.20, 0.10, 0.01, 0.00]


def _method_results(method="other", mdads=(0.2, 0.1, 0.05), mode="robust"):
    """Curves at 160, 10, 40 (deliberately unsorted); bands at 10 and 40 only."""
    return [
        _res(method, 160, _curve(F160, T160), mdads[2], mode),
        _res(method, 10, _curve(F10, T10, L10, H10, p_same=[0.3, 0.45, 0.55, 0.8]), mdads[0], mode),
        _res(method, 40, _curve(F40, T40, L40, H40), mdads[1], mode),
    ]


def _decoy(method="decoy"):
    """Another method's curves at the same sizes: all zeros, so any mix-up shows."""
    z = [0.0] * 4
    return [_res(method, n, _curve(z, z, z, z), 0.45) for n in (10, 40, 160)]


def _lerp(x0, x1, n0, n1, n):
    """Linear interpolation in log n, written out."""
    w = (math.log(n) - math.log(n0)) / (math.log(n1) - math.log(n0))
    return x0 + w * (x1 - x0)


# -- curve_probability -----------------------------------------------------------------------------


@pytest.mark.parametrize("gap", [0.25, -0.25])
def test_curve_probability_interpolates_each_column_in_log_n(gap) -> None:
    res = _method_results()
    for n in (10, 20, 25, 40):
        k = 2  # 0.25 lies in the bin [0.2, 0.3)
        same = _lerp(F10[k], F40[k], 10, 40, n)
        tie = _lerp(T10[k], T40[k], 10, 40, n)
        got = curve_probability(res, gap, n)
        assert got == pytest.approx(
            (same, tie, 1.0 - same - tie, _lerp(L10[k], L40[k], 10, 40, n),
             _lerp(H10[k], H40[k], 10, 40, n)), abs=1e-12
        )  # fmt: skip
    # between 40 and 160 the 160 curve has no band: its CI ends are its fitted value
    got = curve_probability(res, gap, 80)
    assert got[0] == pytest.approx(_lerp(0.90, 0.99, 40, 160, 80), abs=1e-12)
    assert got[1] == pytest.approx(_lerp(0.05, 0.01, 40, 160, 80), abs=1e-12)
    assert got[3] == pytest.approx(_lerp(0.80, 0.99, 40, 160, 80), abs=1e-12)
    assert got[4] == pytest.approx(_lerp(0.95, 0.99, 40, 160, 80), abs=1e-12)
    # outside the evaluated sizes: clamped to the end values
    assert curve_probability(res, gap, 5) == pytest.approx((0.6, 0.2, 0.2, 0.5, 0.7), abs=1e-12)
    assert curve_probability(res, gap, 400) == pytest.approx(
        (0.99, 0.01, 0.0, 0.99, 0.99), abs=1e-12
    )


def test_curve_probability_picks_the_bin_of_the_gap() -> None:
    res = _method_results()
    # at an evaluated size the values are the bin's own: first bin, bin edge, last bin, beyond
    for gap, k in ((0.0, 0), (0.01, 0), (0.1, 1), (0.2, 2), (0.29, 2), (0.3, 3), (0.5, 3)):
        same, tie, rev, lo, hi = curve_probability(res, gap, 10)
        assert (same, tie, lo, hi) == pytest.approx((F10[k], T10[k], L10[k], H10[k]), abs=1e-15)
        assert rev == pytest.approx(max(0.0, 1.0 - F10[k] - T10[k]), abs=1e-15)
        same, tie, rev, lo, hi = curve_probability(res, gap, 160)
        assert (same, tie, lo, hi) == pytest.approx((F160[k], T160[k], F160[k], F160[k]), abs=1e-15)


def test_curve_probability_edge_cases() -> None:
    # p_same + p_tie above 1 (fitted same vs raw tie): reversed clipped at 0
    over = [_res("m", 10, _curve([0.9] * 4, [0.2] * 4), None)]
    assert curve_probability(over, 0.15, 10) == pytest.approx((0.9, 0.2, 0.0, 0.9, 0.9))
    # a curve whose first edge is above 0: smaller gaps use the first bin (as curve.at does)
    late = AgreementCurve(
        gaps=np.array([0.02, 0.1]), gap_upper=np.array([0.1, 1.0]), n_pairs=np.ones(2),
        p_same=np.array([0.5, 0.9]), p_tie=np.array([0.3, 0.05]), p_reversed=np.array([0.2, 0.05]),
    )  # fmt: skip
    r = [_res("m", 10, late, None)]
    assert curve_probability(r, 0.0, 10) == pytest.approx((0.5, 0.3, 0.2, 0.5, 0.5))
    # a gap exactly 1e-12 below an edge belongs to the edge's bin (curve.at's rule)
    edge = 0.25 + 1e-12
    tight = AgreementCurve(
        gaps=np.array([0.0, edge]), gap_upper=np.array([edge, 1.0]), n_pairs=np.ones(2),
        p_same=np.array([0.5, 0.9]), p_tie=np.array([0.3, 0.05]), p_reversed=np.array([0.2, 0.05]),
    )  # fmt: skip
    r = [_res("m", 10, tight, None)]
    assert float(tight.at(0.25)) == 0.9
    assert curve_probability(r, 0.25, 10) == pytest.approx((0.9, 0.05, 0.05, 0.9, 0.9))


# -- _crossing and _mdad_at ------------------------------------------------------------------------


def test_crossing_closed_forms() -> None:
    # log-linear crossing n* = exp(l0 + frac (l1 - l0)), rounded up
    assert _crossing(np.array([10, 1000]), np.array([0.0, 1.0]), 0.5) == 100  # 10^2 exactly
    assert _crossing(np.array([10, 100, 1000]), np.array([0.2, 0.6, 1.0]), 0.8) == math.ceil(
        100 * math.sqrt(10)
    )
    assert _crossing(np.array([10, 100, 1000]), np.array([0.6, 1.0, 1.0]), 0.8) == math.ceil(
        10 * math.sqrt(10)
    )
    assert _crossing(np.array([10, 40]), np.array([0.5, 0.9]), 0.6) == math.ceil(10 * 4**0.25)
    assert _crossing(np.array([20, 50]), np.array([0.2, 0.9]), 0.4) == math.ceil(
        20 * 2.5 ** (2 / 7)
    )
    # reaching the threshold exactly counts
    assert _crossing(np.array([10, 100]), np.array([0.5, 0.8]), 0.8) == 100
    assert _crossing(np.array([10, 100]), np.array([0.8, 0.9]), 0.8) == 10
    assert _crossing(np.array([10, 100, 1000]), np.array([0.9, 0.95, 1.0]), 0.8) == 10
    assert _crossing(np.array([10, 100, 1000]), np.array([0.1, 0.2, 0.3]), 0.8) is None


def test_mdad_at_interpolates_between_evaluated_sizes() -> None:
    res = _method_results(mdads=(0.2, 0.1, 0.05))
    assert _mdad_at(res, 10) == 0.2 and _mdad_at(res, 40) == 0.1 and _mdad_at(res, 160) == 0.05
    assert _mdad_at(res, 20) == pytest.approx(0.15, abs=1e-12)
    assert _mdad_at(res, 80) == pytest.approx(0.075, abs=1e-12)
    assert _mdad_at(res, 13) == pytest.approx(_lerp(0.2, 0.1, 10, 40, 13), abs=1e-12)
    for n in (1, 9, 161, 1000):
        assert _mdad_at(res, n) is None
    first_missing = _method_results(mdads=(None, 0.1, 0.05))
    assert _mdad_at(first_missing, 20) is None
    assert _mdad_at(first_missing, 80) == pytest.approx(0.075, abs=1e-12)
    middle_missing = _method_results(mdads=(0.2, None, 0.05))
    assert _mdad_at(middle_missing, 20) is None and _mdad_at(middle_missing, 80) is None
    assert _mdad_at(middle_missing, 40) is None
    last_missing = _method_results(mdads=(0.2, 0.1, None))
    assert _mdad_at(last_missing, 20) == pytest.approx(0.15, abs=1e-12)
    assert _mdad_at(last_missing, 80) is None


def test_sorted_results_errors_name_the_problem() -> None:
    res = _method_results()
    with pytest.raises(ValueError, match=r"^results: no agreement curves for method 'nope'$"):
        verdict(TINY, 0, 1, 4, method="nope", results=res)
    bare = [MDADResult("m", 10, "seen", "robust", 0.1, 0.1, 0.1, 0.8, True, 0.5, 0.7)]
    with pytest.raises(ValueError, match=r"^results: every result needs its agreement curve$"):
        curve_probability(bare, 0.1, 10)
    with pytest.raises(ValueError, match=r"^results: expected one curve per size \(filter by"):
        curve_probability(res + res[:1], 0.1, 10)


# -- verdict ---------------------------------------------------------------------------------------


def test_verdict_random_matches_enumeration_of_every_subset() -> None:
    for a, b in ((0, 1), (1, 0), (1, 2), (2, 3), (0, 3)):
        for n in (1, 2, 3, 5, 8):
            v = verdict(TINY, a, b, n, threshold=0.7, mdad=0.123)
            same, tie, rev = brute_random(TINY[a], TINY[b], n)
            assert (v.p_same, v.p_tie, v.p_reversed) == pytest.approx(
                (float(same), float(tie), float(rev)), abs=1e-12
            )
            assert v.ci_low == v.p_same and v.ci_high == v.p_same
            assert v.distinguishable == (same >= Fraction(7, 10))
            assert (v.model_a, v.model_b, v.n, v.method, v.basis) == (a, b, n, "random", "exact")
            assert v.gap == pytest.approx((TINY[a].sum() - TINY[b].sum()) / 8, abs=1e-15)
            assert v.mdad == 0.123 and v.threshold == 0.7  # a given MDAD is kept
        probs = [brute_random(TINY[a], TINY[b], n)[0] for n in range(1, 9)]
        tied = TINY[a].sum() == TINY[b].sum()
        want = None if tied else first_reaching(probs, Fraction(7, 10))
        assert verdict(TINY, a, b, 1, threshold=0.7).n_needed == want
    # types of the record's fields
    v = verdict(TINY, np.int64(0), np.int64(1), np.int64(3))
    assert type(v.model_a) is int and type(v.model_b) is int and type(v.n) is int
    assert type(v.ci_low) is float and type(v.threshold) is float and v.threshold == 0.8


def test_verdict_random_mdad_at_the_given_threshold(gpqa) -> None:
    c = gpqa["correct"][:40, :80]
    at_07 = exact_agreement(c, 20, threshold=0.7).mdad
    assert at_07 is not None and at_07 != exact_agreement(c, 20).mdad
    v = verdict(c, 3, 7, 20, threshold=0.7)
    assert v.mdad == at_07 and v.threshold == 0.7
    assert verdict(c, 3, 7, 20).mdad == exact_agreement(c, 20).mdad


def test_verdict_distinguishable_at_exactly_the_threshold() -> None:
    # n = 8 = N: the subset is the benchmark, P(same) = 1 exactly
    v = verdict(TINY, 0, 1, 8, method="subtask_stratified", subtasks=SUBTASKS, threshold=1.0)
    assert v.p_same == 1.0 and v.distinguishable is True


def test_verdict_validates_its_arguments() -> None:
    for bad in (-1, 4):
        with pytest.raises(ValueError, match=r"^a: model row must lie in \[0, 4\)$"):
            verdict(TINY, bad, 1, 3)
        with pytest.raises(ValueError, match=r"^b: model row must lie in \[0, 4\)$"):
            verdict(TINY, 1, bad, 3)
    with pytest.raises(ValueError, match=r"^b: must differ from a$"):
        verdict(TINY, 2, 2, 3)
    for bad in (0, 9):
        with pytest.raises(ValueError, match=r"^n: expected 1 <= n <= 8$"):
            verdict(TINY, 0, 1, bad)
    # the extremes are valid
    assert verdict(TINY, 0, 3, 1, mdad=0.1).n == 1 and verdict(TINY, 3, 0, 8, mdad=0.1).n == 8
    with pytest.raises(ValueError, match=r"^results: method 'dpp' needs its robust agreement"):
        verdict(TINY, 0, 1, 3, method="dpp")
    with pytest.raises(ValueError, match=r"^results: method 'subtask_stratified' needs"):
        verdict(TINY, 0, 1, 3, method="subtask_stratified")  # no subtasks: curve-based


def test_verdict_stratified_matches_enumeration() -> None:
    for a, b in ((0, 1), (1, 2), (2, 1), (0, 3), (2, 3)):
        for n in (1, 2, 3, 5, 7):
            v = verdict(TINY, a, b, n, method="subtask_stratified", subtasks=SUBTASKS, mdad=0.3)
            same, tie, rev = brute_stratified(TINY[a], TINY[b], list(SUBTASKS), n)
            assert (v.p_same, v.p_tie, v.p_reversed) == pytest.approx(
                (float(same), float(tie), float(rev)), abs=1e-12
            )
            assert v.ci_low == v.p_same == v.ci_high and v.basis == "exact_stratified"
            assert v.mdad == 0.3 and v.method == "subtask_stratified"
    # stratification changes the answer: P(same) at n = 2 is 7/16 (uniform subsets: 1/2)
    v = verdict(TINY, 0, 1, 2, method="subtask_stratified", subtasks=SUBTASKS)
    assert v.p_same == pytest.approx(7 / 16, abs=1e-12) and v.mdad is None


@pytest.mark.parametrize(
    ("a", "b", "threshold"),
    [(0, 1, 0.7), (0, 1, 0.45), (0, 1, 0.8), (1, 0, 0.7), (1, 2, 0.55), (2, 1, 0.55), (0, 3, 0.7)],
)
def test_verdict_stratified_n_needed_is_the_first_size_reaching(a, b, threshold) -> None:
    probs = [brute_stratified(TINY[a], TINY[b], list(SUBTASKS), n)[0] for n in range(1, 9)]
    want = first_reaching(probs, Fraction(threshold))
    v = verdict(TINY, a, b, 4, method="subtask_stratified", subtasks=SUBTASKS, threshold=threshold)
    assert v.n_needed == want and type(v.n_needed) is int


def test_stratified_n_needed_edge_cases() -> None:
    # tied accuracies can never be ordered
    assert verdict(TINY, 2, 3, 4, method="subtask_stratified", subtasks=SUBTASKS).n_needed is None
    # one subtask: P(same) is 2/3, 1/3, 1 at n = 1, 2, 3 (not monotone)
    c = np.array([[1, 1, 0], [0, 0, 1]])
    one = np.array(["s"] * 3)
    assert _smallest_n_stratified(c, 0, 1, one, 0.6) == 1
    assert _smallest_n_stratified(c, 1, 0, one, 0.6) == 1
    assert _smallest_n_stratified(c, 0, 1, one, 1.0) == 3  # P = 1 exactly at n = N
    # unequal subtasks: equal allocation fits only up to 2 * 2 items; P(same) at 4 is below 0.9
    labels = np.array(["x", "x", "y", "y", "y", "y", "y", "y"])
    probs = [brute_stratified(TINY[0], TINY[1], list(labels), n)[0] for n in range(1, 5)]
    assert max(probs) < Fraction(9, 10)
    assert _smallest_n_stratified(TINY, 0, 1, labels, 0.9) is None
    assert _smallest_n_stratified(TINY, 0, 1, labels, 0.55) == first_reaching(
        probs, Fraction(11, 20)
    )
    assert _smallest_n_stratified(TINY, 0, 1, labels, 0.55) == 2


def test_verdict_stratified_mdad_from_results() -> None:
    res = _method_results("subtask_stratified", mdads=(0.2, 0.1, 0.05))
    c = np.tile(TINY, (1, 20))  # 160 items, 40 per... subtasks below
    sub = np.repeat(["p", "q", "r", "s"], 40)
    v = verdict(c, 0, 1, 20, method="subtask_stratified", subtasks=sub, results=res)
    assert v.mdad == pytest.approx(0.15, abs=1e-12) and v.basis == "exact_stratified"
    assert (
        verdict(c, 0, 1, 20, method="subtask_stratified", subtasks=sub, results=res, mdad=0.01).mdad
        == 0.01
    )


def test_verdict_curve_based_closed_form() -> None:
    # A vs B on TINY repeated to 160 items: gap 0.25, in the bin [0.2, 0.3) of the curves
    res = _method_results("other", mdads=(0.2, 0.1, 0.05)) + _decoy()
    big = np.tile(TINY, (1, 20))
    v = verdict(big, 0, 1, 20, method="other", results=res, threshold=0.8)
    same, tie = _lerp(0.60, 0.90, 10, 40, 20), _lerp(0.20, 0.05, 10, 40, 20)
    assert v.gap == 0.25 and v.basis == "robust_curve" and v.method == "other"
    assert (v.p_same, v.p_tie, v.p_reversed) == pytest.approx(
        (same, tie, 1 - same - tie), abs=1e-12
    )
    assert (v.ci_low, v.ci_high) == pytest.approx(
        (_lerp(0.5, 0.8, 10, 40, 20), _lerp(0.7, 0.95, 10, 40, 20)), abs=1e-12
    )
    assert v.mdad == pytest.approx(0.15, abs=1e-12)
    # curve values at 0.25 by size: 0.60, 0.90, 0.99 -> crossing of 0.8 between 10 and 40
    assert v.n_needed == math.ceil(10 * 4 ** (2 / 3))
    assert v.distinguishable is False and v.threshold == 0.8
    # at an evaluated size the value is exact: reaching the threshold exactly is distinguishable
    v40 = verdict(big, 1, 0, 40, method="other", results=res, threshold=0.9)
    assert v40.gap == -0.25 and v40.p_same == 0.9 and v40.distinguishable is True
    assert v40.n_needed == 40 and v40.mdad == 0.1
    assert verdict(big, 0, 1, 40, method="other", results=res, mdad=0.07).mdad == 0.07
    assert verdict(big, 0, 1, 20, method="other", results=res, threshold=0.995).n_needed is None
    # subtasks with a curve-based method: still the curves
    vs = verdict(big, 0, 1, 20, method="other", results=res, subtasks=np.repeat(["x", "y"], 80))
    assert vs.basis == "robust_curve" and vs.p_same == pytest.approx(same, abs=1e-12)


# -- plan ------------------------------------------------------------------------------------------


def test_plan_from_curves() -> None:
    res = _method_results("other", mdads=(0.2, None, 0.05)) + _decoy()
    pl = plan(0.25, "other", 0.8, results=res)
    assert pl.n == math.ceil(10 * 4 ** (2 / 3)) and pl.basis == "robust_curve"
    assert (pl.gap, pl.method, pl.probability) == (0.25, "other", 0.8)
    assert pl.sizes.tolist() == [10, 40, 160]
    np.testing.assert_array_equal(pl.mdads, [0.2, np.nan, 0.05])
    # a gap in the bin [0.1, 0.2): 0.45, 0.70, 0.85 -> crossing of 0.75 between 40 and 160
    assert plan(0.15, "other", 0.75, results=res).n == math.ceil(40 * 4 ** (1 / 3))
    assert plan(0.15, "other", 0.9, results=res).n is None
    exact = [
        _res("random", n, _curve(f, t), m, mode="exact")
        for n, f, t, m in ((10, F10, T10, 0.2), (40, F40, T40, 0.1))
    ]
    assert plan(0.25, "random", 0.8, results=exact).basis == "exact"
    mixed = [*exact, _res("random", 160, _curve(F160, T160), 0.05)]
    assert plan(0.25, "random", 0.8, results=mixed).basis == "robust_curve"


def test_plan_validates_its_arguments() -> None:
    for bad in (0.0, -0.1):
        with pytest.raises(ValueError, match=r"^gap: expected a positive accuracy difference"):
            plan(bad, correct=TINY)
    assert plan(0.5, "other", 0.8, results=_method_results()).n == 10  # large gaps are fine
    msg = r"^results: planning for this method needs its agreement curves$"
    with pytest.raises(ValueError, match=msg):
        plan(0.1, "dpp", correct=TINY)
    with pytest.raises(ValueError, match=msg):
        plan(0.1)


@pytest.fixture(scope="module")
def bench40(gpqa):
    c = gpqa["correct"][:30, :40]
    curves = {
        p: [exact_agreement(c, n, threshold=p) for n in range(1, 41)] for p in (0.3, 0.7, 0.8, 1.0)
    }
    return c, curves


@pytest.mark.parametrize(
    ("probability", "gap"),
    [(0.7, 0.05), (0.7, 0.1), (0.7, 0.3), (0.8, 0.1), (0.8, 0.2), (1.0, 0.05), (0.3, 0.25)],
)
def test_plan_exact_is_the_first_size_reaching(bench40, probability, gap) -> None:
    """Against a scan of the exact curve at every size 1..40 (30 GPQA models x 40 items)."""
    c, curves = bench40
    scan = first_reaching([float(r.curve.at(gap)) for r in curves[probability]], probability)
    assert scan is not None
    for sizes in (None, [40], [3, 7], np.array([25, 5, 12], dtype=np.int32)):
        pl = plan(gap, probability=probability, correct=c, sizes=sizes)
        grid = (
            np.unique(np.geomspace(10, 40, 10).round()).astype(int)
            if sizes is None
            else np.unique(sizes)
        )
        reached = [
            n for n in grid if float(curves[probability][n - 1].curve.at(gap)) >= probability
        ]
        assert pl.n == (scan if reached else None)
        assert pl.n is None or type(pl.n) is int
        assert pl.sizes.dtype == np.int64 and pl.sizes.tolist() == grid.tolist()
        want = [curves[probability][n - 1].mdad for n in grid]
        np.testing.assert_array_equal(pl.mdads, [np.nan if m is None else m for m in want])
        assert (pl.gap, pl.method, pl.probability, pl.basis) == (
            gap,
            "random",
            probability,
            "exact",
        )


def test_plan_default_grid(bench40) -> None:
    c, _ = bench40
    sizes = plan(0.2, correct=c).sizes
    assert sizes[0] == 10 and sizes[-1] == 40 and len(sizes) == 10
    ratios = sizes[1:] / sizes[:-1]
    assert np.all(np.abs(np.log(ratios) - math.log(4) / 9) < 0.1)  # geometric
    # fewer than 10 items: the grid is the benchmark size alone
    assert plan(0.2, correct=TINY).sizes.tolist() == [8]


# -- recommend -------------------------------------------------------------------------------------


def _cell(method, n, mdad, hi=None, reached=None, split="seen") -> MDADResult:
    return MDADResult(
        method=method, n=n, split=split, mode="robust", mdad=mdad, ci_low=None, ci_high=hi,
        threshold=0.8, reached=(mdad is not None) if reached is None else reached, max_gap=0.5,
        mean_agreement=0.7,
    )  # fmt: skip


def test_recommend_every_field() -> None:
    cells = [
        _cell("random", 10, None),
        _cell("dpp", 10, None),
        _cell("random", 20, 0.09),
        _cell("dpp", 20, 0.06, hi=0.09),  # random exactly at the upper end: within
        _cell("random", 40, 0.05 + 1e-12),  # exactly gap + 1e-12: counts as reaching 0.05
        _cell("dpp", 40, 0.04, hi=0.05),  # random at ci_high + 1e-12: within
        _cell("random", 80, 0.03),
        _cell("dpp", 80, 0.02, hi=0.03 - 2e-12),  # beyond the tolerance: not within
        _cell("dpp", 80, 0.001, split="unseen"),
    ]
    rec = recommend(cells, ["random", "dpp"], [80, 40, 10, 20], gap=0.05, threshold=0.8)
    assert rec.gap == 0.05 and rec.threshold == 0.8 and type(rec.threshold) is float
    assert rec.smallest_n == {"random": 40, "dpp": 40}
    rows = rec.random_vs_best
    assert [tuple(vars(r).values()) for r in rows] == [
        (10, None, None, None, None, None),  # nothing reached at 10: no best, row kept
        (20, "dpp", 0.06, 0.09, 0.09, True),
        (40, "dpp", 0.04, 0.05, 0.05 + 1e-12, True),
        (80, "dpp", 0.02, 0.03 - 2e-12, 0.03, False),
    ]
    gap_minus = recommend(cells, ["random", "dpp"], [20, 40], gap=0.06 - 1e-12, threshold=0.7)
    assert gap_minus.smallest_n == {"random": 40, "dpp": 20} and gap_minus.threshold == 0.7


def test_recommend_unreached_cells_count_as_infinite() -> None:
    # paper-style sentinel: an MDAD value on a cell that did not reach the threshold
    cells = [_cell("random", 10, 0.01, reached=False), _cell("dpp", 10, 0.03, hi=0.04)]
    rec = recommend(cells, ["random", "dpp"], [10], gap=0.05, threshold=0.8)
    assert rec.smallest_n == {"random": None, "dpp": 10}
    (row,) = rec.random_vs_best
    assert (row.best_method, row.random_mdad, row.random_within_ci) == ("dpp", None, False)
    # open upper CI end: within whenever random's MDAD is finite
    cells = [_cell("random", 10, 0.08), _cell("dpp", 10, 0.03, hi=None)]
    (row,) = recommend(cells, ["dpp", "random"], [10], gap=0.05, threshold=0.8).random_vs_best
    assert (row.best_method, row.random_mdad, row.random_within_ci) == ("dpp", 0.08, True)


def test_recommend_without_methods() -> None:
    rec = recommend([], [], [10, 20], gap=0.05, threshold=0.8)
    assert rec.smallest_n == {} and rec.random_vs_best is None


def test_stratified_n_needed_on_a_strictly_increasing_curve(gpqa) -> None:
    """120 GPQA items in two made-up subtasks of 60 (so sizes up to 120 are allocatable): where
    P(same) rises strictly with n, n_needed is n* for any threshold in (P(n* - 1), P(n*)]."""
    c = gpqa["correct"][:, :120].astype(np.int64)
    sub = np.repeat(["p", "q"], 60)
    a, b = 348, 168
    assert (c[a] * (1 - c[b])).sum() > ((1 - c[a]) * c[b]).sum()  # A leads: P(same) = P(D > 0)
    p = [float(stratified_order_probabilities(c[a], c[b], sub, n).p_greater) for n in range(1, 121)]
    assert all(x < y for x, y in itertools.pairwise(p))
    for target in (2, 31, 40, 42, 45, 47, 48, 77, 100, 119):
        for threshold in ((p[target - 2] + p[target - 1]) / 2, p[target - 1]):
            assert _smallest_n_stratified(c, a, b, sub, threshold) == target
    v = verdict(c, b, a, 10, method="subtask_stratified", subtasks=sub, threshold=p[44])
    assert v.n_needed == 45
