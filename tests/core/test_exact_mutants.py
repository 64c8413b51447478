"""Tests that kill the surviving mutants of ``app/core/reliability/exact.py`` (issue 17, ``make mutation``).

Each test asserts values against an independent computation: the hypergeometric chain
``X ~ Hypergeom(N, n10, n)``, ``Y | X ~ Hypergeom(N - n10, n01, n - X)`` summed with scipy, full
enumeration of subsets, or the exact ``ValueError`` message naming the field at fault. Mutants
that cannot change any result are listed with a reason in ``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import itertools
import re
from math import comb

import numpy as np
import pytest
from scipy import stats

import app.core.reliability.exact as exact_module
from app.core.reliability.exact import (
    as_binary,
    discordant_counts,
    exact_agreement,
    order_probabilities,
    pair_probability,
    smallest_n,
    stratified_order_probabilities,
)


def _exact(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for exactly this message."""
    return "^" + re.escape(message) + "$"


def _scipy_order(n10: int, n01: int, n_items: int, n: int) -> tuple[float, float, float]:
    """P(X > Y), P(X = Y), P(X < Y) from scipy's hypergeometric pmf/cdf (the chain rule above)."""
    x = np.arange(0, min(n10, n) + 1)
    x = x[n - x <= n_items - n10]
    px = stats.hypergeom.pmf(x, n_items, n10, n)
    if n10 == n_items:  # scipy has no Hypergeom over an empty population: Y = 0
        return float(px[x > 0].sum()), float(px[x == 0].sum()), 0.0
    gt = float(np.sum(px * stats.hypergeom.cdf(x - 1, n_items - n10, n01, n - x)))
    eq = float(np.sum(px * stats.hypergeom.pmf(x, n_items - n10, n01, n - x)))
    lt = float(np.sum(px * stats.hypergeom.sf(x, n_items - n10, n01, n - x)))
    return gt, eq, lt


def _check_against_scipy(n10, n01, n_items: int, n, atol: float = 1e-11) -> None:
    got = order_probabilities(n10, n01, n_items, n)
    ref = np.array(
        [
            _scipy_order(int(a), int(b), n_items, int(m))
            for a, b, m in zip(*np.broadcast_arrays(n10, n01, n), strict=True)
        ]
    )
    np.testing.assert_allclose(got.p_greater, ref[:, 0], atol=atol)
    np.testing.assert_allclose(got.p_equal, ref[:, 1], atol=atol)
    np.testing.assert_allclose(got.p_less, ref[:, 2], atol=atol)


# -- order probabilities against scipy -------------------------------------------------------------
def test_every_triple_of_a_small_benchmark_matches_scipy() -> None:
    """N = 13: every (n10, n01) with n10 + n01 <= N at every n, flipped (n > N/2) or not."""
    n_items = 13
    triples = [
        (a, b, m)
        for a in range(n_items + 1)
        for b in range(n_items + 1 - a)
        for m in range(1, n_items + 1)
    ]
    n10, n01, n = (np.array(v) for v in zip(*triples, strict=True))
    _check_against_scipy(n10, n01, n_items, n)


def test_gpqa_sized_triples_match_scipy() -> None:
    rng = np.random.default_rng(21)
    n10 = rng.integers(0, 200, 250)
    n01 = rng.integers(0, 200, 250)
    n = rng.integers(1, 449, 250)
    _check_against_scipy(n10, n01, 448, n)


def test_large_windows_split_into_memory_chunks_match_scipy() -> None:
    """N = 6000 near n = N / 2: windows of ~300 x 300, so the triples span several chunks."""
    rng = np.random.default_rng(22)
    n10 = rng.integers(1500, 2500, 40)
    n01 = rng.integers(1500, 2500, 40)
    n10[:3], n01[:3] = [2000, 2000, 2001], [2000, 2001, 2000]  # near-ties: p_equal matters
    n = rng.integers(2700, 3300, 40)
    _check_against_scipy(n10, n01, 6000, n, atol=1e-10)


def test_broadcast_shapes_and_duplicates() -> None:
    n10 = np.array([[3], [5]])
    n01 = np.array([1, 2, 3])
    got = order_probabilities(n10, n01, 12, 4)
    assert got.p_greater.shape == got.p_equal.shape == got.p_less.shape == (2, 3)
    for i, j in itertools.product(range(2), range(3)):
        ref = _scipy_order(int(n10[i, 0]), int(n01[j]), 12, 4)
        assert got.p_greater[i, j] == pytest.approx(ref[0], abs=1e-13)
        assert got.p_equal[i, j] == pytest.approx(ref[1], abs=1e-13)
        assert got.p_less[i, j] == pytest.approx(ref[2], abs=1e-13)
    empty = order_probabilities(np.zeros(0, int), np.zeros(0, int), 10, 3)
    assert empty.p_greater.shape == empty.p_equal.shape == empty.p_less.shape == (0,)


def test_boundaries_of_the_inputs_are_accepted() -> None:
    """n10 + n01 = N, n = N, n = 1 and N = 1 are valid."""
    full = order_probabilities([6, 0, 3], [4, 0, 7], 10, 10)
    np.testing.assert_array_equal(full.p_greater, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(full.p_equal, [0.0, 1.0, 0.0])
    _check_against_scipy(np.array([6, 0, 10]), np.array([4, 10, 0]), 10, np.array([1, 3, 7]))
    one = order_probabilities(1, 0, 1, 1)
    assert (float(one.p_greater), float(one.p_equal), float(one.p_less)) == (1.0, 0.0, 0.0)


# -- validation messages ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_items", [0, -3])
def test_order_probabilities_refuses_an_empty_benchmark(n_items) -> None:
    with pytest.raises(ValueError, match=_exact("n_items: must be positive")):
        order_probabilities(0, 0, n_items, 1)


@pytest.mark.parametrize(("n10", "n01"), [(-1, 0), (0, -1), (6, 5), (11, 0)])
def test_order_probabilities_refuses_impossible_counts(n10, n01) -> None:
    message = "n10: counts must satisfy 0 <= n10, n01 and n10 + n01 <= n_items"
    with pytest.raises(ValueError, match=_exact(message)):
        order_probabilities(n10, n01, 10, 3)


@pytest.mark.parametrize("n", [-1, 0, 11, 20])
def test_order_probabilities_refuses_a_subset_size_outside_the_benchmark(n) -> None:
    with pytest.raises(ValueError, match=_exact("n: subset sizes must lie in [1, 10]")):
        order_probabilities(3, 2, 10, n)


@pytest.mark.parametrize(
    "correct", [np.zeros(5), np.zeros((2, 3, 4)), np.zeros((0, 4)), np.zeros((3, 0)), [[]]]
)
def test_as_binary_refuses_a_non_matrix(correct) -> None:
    message = "correct: expected a non-empty 2-d array (models x items)"
    with pytest.raises(ValueError, match=_exact(message)):
        as_binary(correct)


@pytest.mark.parametrize("value", [2, -1, 0.5, np.nan])
def test_as_binary_refuses_non_binary_values(value) -> None:
    c = np.zeros((2, 3))
    c[1, 2] = value
    with pytest.raises(
        ValueError, match=_exact("correct: exact probabilities need 0/1 correctness")
    ):
        as_binary(c)


def test_as_binary_returns_int64_of_the_same_values() -> None:
    c = np.array([[True, False], [False, True]])
    got = as_binary(c)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [[1, 0], [0, 1]])


# -- discordant counts and orientation -------------------------------------------------------------
def test_discordant_counts_of_uint8_rows_and_pair_arrays() -> None:
    rng = np.random.default_rng(23)
    c = rng.integers(0, 2, (5, 17)).astype(np.uint8)
    a, b = np.array([0, 1, 4]), np.array([2, 3, 0])
    n10, n01 = discordant_counts(c, a, b)
    ref10 = [
        sum(int(c[i, t]) == 1 and int(c[j, t]) == 0 for t in range(17))
        for i, j in zip(a, b, strict=True)
    ]
    ref01 = [
        sum(int(c[i, t]) == 0 and int(c[j, t]) == 1 for t in range(17))
        for i, j in zip(a, b, strict=True)
    ]
    np.testing.assert_array_equal(n10, ref10)
    np.testing.assert_array_equal(n01, ref01)


def _enumerate(a: np.ndarray, b: np.ndarray, n: int) -> tuple[float, float, float]:
    g = e = l_ = 0
    for sub in itertools.combinations(range(a.size), n):
        d = int(a[list(sub)].sum()) - int(b[list(sub)].sum())
        g, e, l_ = g + (d > 0), e + (d == 0), l_ + (d < 0)
    total = g + e + l_
    return g / total, e / total, l_ / total


@pytest.mark.parametrize(("first", "second"), [(0, 1), (1, 0), (0, 2), (2, 0)])
def test_pair_probability_is_oriented_to_the_full_benchmark_leader(first, second) -> None:
    """Rows 0 and 1 differ (row 1 leads); rows 0 and 2 have equal accuracy (first row leads)."""
    c = np.array(
        [
            [1, 0, 0, 1, 0, 1, 0, 0, 1],
            [1, 1, 0, 1, 1, 0, 1, 0, 1],
            [0, 1, 1, 0, 0, 1, 0, 1, 0],
        ]
    )
    for n in (2, 5):
        got = pair_probability(c, first, second, n)
        acc = c.mean(axis=1)
        lead, lag = (first, second) if acc[first] >= acc[second] else (second, first)
        g, e, l_ = _enumerate(c[lead], c[lag], n)
        assert float(got.p_greater) == pytest.approx(g, abs=1e-13)
        assert float(got.p_equal) == pytest.approx(e, abs=1e-13)
        assert float(got.p_less) == pytest.approx(l_, abs=1e-13)


def test_pair_probability_with_subtasks_is_the_stratified_one() -> None:
    c = np.array([[1, 0, 1, 1, 0, 1, 0, 0], [0, 1, 1, 0, 1, 1, 1, 0]])
    sub = np.array(["a", "a", "b", "b", "c", "c", "d", "d"])
    got = pair_probability(c, 0, 1, 6, subtasks=sub)  # row 1 leads: oriented so
    ref = stratified_order_probabilities(c[1], c[0], sub, 6)
    assert float(got.p_greater) == pytest.approx(float(ref.p_greater), abs=1e-14)
    assert float(got.p_less) == pytest.approx(float(ref.p_less), abs=1e-14)
    assert float(got.p_equal) == pytest.approx(float(ref.p_equal), abs=1e-14)


# -- smallest n ------------------------------------------------------------------------------------
def _brute_smallest_n(n10: int, n01: int, n_items: int, probability: float) -> int:
    """First n in 1..N after the last n with P(same order) below ``probability`` (docstring)."""
    hi, lo = max(n10, n01), min(n10, n01)
    p = np.array([_scipy_order(hi, lo, n_items, m)[0] for m in range(1, n_items + 1)])
    below = np.flatnonzero(p < probability)
    return 1 if below.size == 0 else int(below[-1]) + 2


def _matrix(n10: int, n01: int, n_items: int) -> np.ndarray:
    a = np.zeros(n_items, int)
    b = np.zeros(n_items, int)
    a[:n10] = 1
    b[n10 : n10 + n01] = 1
    return np.stack([a, b])


@pytest.mark.parametrize(
    ("n10", "n01", "n_items", "probability", "n_grid"),
    [
        (30, 20, 120, 0.8, 48),
        (20, 30, 120, 0.8, 48),
        (30, 20, 120, 0.6, 5),
        (9, 1, 60, 0.5, 48),
        (40, 0, 90, 0.9, 3),
        (12, 7, 200, 0.95, 10),
    ],
)
def test_smallest_n_matches_a_brute_force_scan(n10, n01, n_items, probability, n_grid) -> None:
    c = _matrix(n10, n01, n_items)
    got = smallest_n(c, 0, 1, probability, n_grid=n_grid)
    hi, lo = max(n10, n01), min(n10, n01)
    p = np.array([_scipy_order(hi, lo, n_items, m)[0] for m in range(1, n_items + 1)])
    assert p[got - 1] >= probability
    assert got == _brute_smallest_n(n10, n01, n_items, probability)


def test_smallest_n_default_probability_is_the_threshold() -> None:
    c = _matrix(30, 20, 120)
    assert smallest_n(c, 0, 1) == _brute_smallest_n(30, 20, 120, 0.8)
    assert smallest_n(c, 1, 0) == smallest_n(c, 0, 1)


def test_smallest_n_first_size_and_unreachable_target() -> None:
    """A certain order at n = 1 gives 1; a target above 1 is never met and gives N."""
    c = _matrix(5, 0, 5)  # A is right on every item, B on none
    assert smallest_n(c, 0, 1, 0.99) == 1
    c = _matrix(30, 20, 120)
    assert smallest_n(c, 0, 1, 1.5) == 120
    assert smallest_n(_matrix(4, 4, 20), 0, 1) is None


# -- stratified ------------------------------------------------------------------------------------
def _brute_stratified(ya, yb, subtasks, n) -> np.ndarray:
    labels = sorted(set(subtasks.tolist()))
    k = len(labels)
    base, r = divmod(n, k)
    members = [np.flatnonzero(subtasks == s) for s in labels]
    out = np.zeros(3)
    for extra in itertools.combinations(range(k), r):
        sizes = [base + (h in extra) for h in range(k)]
        counts = np.zeros(3)
        total = 0
        for choice in itertools.product(
            *[itertools.combinations(members[h], sizes[h]) for h in range(k)]
        ):
            idx = list(itertools.chain.from_iterable(choice))
            d = int(ya[idx].sum()) - int(yb[idx].sum())
            counts[0 if d > 0 else 1 if d == 0 else 2] += 1
            total += 1
        out += counts / total
    return out / comb(k, r)


@pytest.mark.parametrize(
    ("sizes", "n"), [((3, 3, 3), 3), ((4, 2, 3), 5), ((2, 3, 4, 3), 7), ((5, 4), 1), ((3, 3), 6)]
)
def test_stratified_matches_brute_force_with_unequal_strata(sizes, n) -> None:
    rng = np.random.default_rng(sum(sizes) * 10 + n)
    total = sum(sizes)
    ya = rng.integers(0, 2, total)
    yb = rng.integers(0, 2, total)
    subtasks = np.repeat([f"s{h}" for h in range(len(sizes))], sizes)
    order = rng.permutation(total)  # strata interleaved, not contiguous
    ya, yb, subtasks = ya[order], yb[order], subtasks[order]
    got = stratified_order_probabilities(ya, yb, subtasks, n)
    np.testing.assert_allclose(
        [float(got.p_greater), float(got.p_equal), float(got.p_less)],
        _brute_stratified(ya, yb, subtasks, n),
        atol=1e-12,
    )


def test_stratified_refuses_mismatched_arrays() -> None:
    message = "subtasks: expected 1-d arrays of equal length"
    for ya, yb, st in [
        (np.zeros(4), np.zeros(5), np.array(list("aabb"))),
        (np.zeros(4), np.zeros(4), np.array(list("aab"))),
        (np.zeros((2, 2)), np.zeros((2, 2)), np.array([["a", "b"], ["a", "b"]])),
    ]:
        with pytest.raises(ValueError, match=_exact(message)):
            stratified_order_probabilities(ya, yb, st, 2)


@pytest.mark.parametrize(("n", "sizes"), [(7, [2, 3]), (5, [2, 4]), (6, [2, 3])])
def test_stratified_refuses_an_allocation_that_does_not_fit(n, sizes) -> None:
    """5 items over strata of 2 and 4: base 2 fits, but one stratum of size 2 cannot take 3...
    only when it must (n = 5 = 2 * 2 + 1 leaves one leftover for a random stratum)."""
    subtasks = np.repeat(["a", "b"], sizes)
    y = np.zeros(sum(sizes), int)
    message = f"n: {n} items cannot be allocated equally over subtasks of sizes {sizes}"
    with pytest.raises(ValueError, match=_exact(message)):
        stratified_order_probabilities(y, y, subtasks, n)


# -- benchmark-wide exact curve --------------------------------------------------------------------
def _slow_exact_curve(c: np.ndarray, n: int, bins_per_unit: int = 200):
    n_models, n_items = c.shape
    rows = []
    for i in range(n_models):
        for j in range(i + 1, n_models):
            n10 = int(((c[i] == 1) & (c[j] == 0)).sum())
            n01 = int(((c[i] == 0) & (c[j] == 1)).sum())
            hi, lo = max(n10, n01), min(n10, n01)
            g, e, _ = _scipy_order(hi, lo, n_items, n)
            rows.append(((bins_per_unit * (hi - lo)) // n_items, g, e, (hi - lo) / n_items))
    keys = sorted({r[0] for r in rows})
    pairs = np.array([sum(r[0] == k for r in rows) for k in keys], dtype=float)
    same = np.array([sum(r[1] for r in rows if r[0] == k) for k in keys])
    tie = np.array([sum(r[2] for r in rows if r[0] == k) for k in keys])
    return np.array(keys), pairs, same, tie, rows


@pytest.mark.parametrize(
    ("n", "mode", "threshold", "bins"),
    [(6, "robust", 0.8, 200), (9, "paper", 0.7, 50), (4, "robust", 0.6, 100)],
)
def test_exact_agreement_matches_slow_reference(n, mode, threshold, bins) -> None:
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(31 + n)
    c = (rng.random((9, 23)) < np.linspace(0.2, 0.8, 9)[:, None]).astype(np.uint8)
    res = exact_agreement(c, n, threshold=threshold, mode=mode, bins_per_unit=bins)
    keys, pairs, same, tie, rows = _slow_exact_curve(c, n, bins)
    cv = res.curve
    np.testing.assert_allclose(cv.gaps, keys / bins, rtol=1e-15)
    np.testing.assert_allclose(cv.gap_upper, (keys + 1) / bins, rtol=1e-15)
    np.testing.assert_array_equal(cv.n_pairs, pairs)
    np.testing.assert_allclose(cv.p_same, same / pairs, atol=1e-12)
    np.testing.assert_allclose(cv.p_tie, tie / pairs, atol=1e-12)
    np.testing.assert_allclose(cv.p_reversed, 1 - (same + tie) / pairs, atol=1e-12)
    if mode == "robust":
        values = isotonic_regression(same / pairs, weights=pairs).x
        np.testing.assert_allclose(cv.fitted, values, atol=1e-12)
    else:
        values = same / pairs
        assert cv.fitted is None
    ok = np.flatnonzero(values >= threshold)
    expected = float(keys[ok[0]] / bins) if ok.size else None
    assert res.mdad == (pytest.approx(expected) if expected is not None else None)
    assert res.ci_low == res.mdad and res.ci_high == res.mdad
    assert res.reached == (expected is not None)
    assert (res.method, res.n, res.split, res.mode) == ("random", n, "full", "exact")
    assert (cv.method, cv.n, cv.split, cv.kind) == ("random", n, "full", "exact")
    assert res.threshold == threshold and res.n_pairs == 36
    assert res.max_gap == pytest.approx(max(r[3] for r in rows), abs=1e-15)
    assert cv.max_gap == res.max_gap
    assert res.mean_agreement == pytest.approx(np.mean([r[1] for r in rows]), abs=1e-12)


def test_exact_agreement_not_reached_is_none() -> None:
    c = np.array([[1, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    res = exact_agreement(c, 1)  # P(same order) = 1/10 at the single gap
    assert res.mdad is None and res.ci_low is None and res.ci_high is None and not res.reached
    assert float(res.curve.p_same[0]) == pytest.approx(0.1)


@pytest.mark.parametrize("mode", ["exact", "Robust", ""])
def test_exact_agreement_refuses_an_unknown_mode(mode) -> None:
    with pytest.raises(
        ValueError, match=_exact(f"mode: expected 'robust' or 'paper', got {mode!r}")
    ):
        exact_agreement(np.eye(3, dtype=int), 2, mode=mode)


def test_smallest_n_with_a_certain_order_and_probability_one() -> None:
    """A right on every item, B on none: P(same order) = 1 at every n, so a target of exactly 1 is
    met at n = 1."""
    assert smallest_n(_matrix(5, 0, 5), 0, 1, 1.0) == 1
    # 6 A-only items of 9: a subset misses all of them only while n <= 3 (C(3, n) / C(9, n))
    p = [_scipy_order(6, 0, 9, m)[0] for m in range(1, 10)]
    assert p[3] == 1.0 > p[2]
    assert smallest_n(_matrix(6, 0, 9), 0, 1, 1.0) == 4


def test_exact_agreement_reads_the_fit_and_reaches_with_equality() -> None:
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(50)
    c = (rng.random((14, 31)) < np.linspace(0.3, 0.7, 14)[:, None]).astype(np.uint8)
    base = exact_agreement(c, 5)
    cv = base.curve
    assert cv.n_pairs.dtype == np.float64
    fitted = isotonic_regression(cv.p_same, weights=cv.n_pairs).x
    above = np.flatnonzero(cv.p_same > fitted + 1e-9)
    assert above.size  # the raw curve is not monotone here
    t = float(cv.p_same[above[0]])  # raw reaches t at above[0]; the fit reaches it later
    res = exact_agreement(c, 5, threshold=t)
    first_fit = np.flatnonzero(fitted >= t - 1e-12)
    expected = float(cv.gaps[first_fit[0]]) if first_fit.size else None
    assert res.mdad == expected
    assert res.mdad != float(cv.gaps[np.flatnonzero(cv.p_same >= t)[0]])
    top = float(cv.fitted.max())  # a threshold equal to the fit's maximum is reached
    res = exact_agreement(c, 5, threshold=top)
    assert res.mdad == float(cv.gaps[np.flatnonzero(cv.fitted == top)[0]])


def test_integer_valued_float_counts_give_the_integer_answer() -> None:
    """Counts that arrive as floats (3.0) are the integers they hold, for each argument."""
    ref = order_probabilities(3, 2, 10, 4)
    for args in [
        (3.0, 2, 4),
        (3, 2.0, 4),
        (3, 2, 4.0),
        (np.array([3.0]), np.array([2.0]), np.array([4.0])),
    ]:
        got = order_probabilities(args[0], args[1], 10, args[2])
        assert float(np.ravel(got.p_greater)[0]) == float(ref.p_greater)
        assert float(np.ravel(got.p_equal)[0]) == float(ref.p_equal)


# -- smallest n: the grid-then-scan search; memory chunks ------------------------------------------
# Oracle for the search: its documented definition as a per-size loop (the first geometric-grid
# point reaching the target, then the smallest size after the previous grid point that reaches it),
# with P from the engine's scalar calls (P itself is pinned above against scipy and enumeration).
# Oracle for the chunks: the same probabilities at the default chunk size.
def _scan_oracle(n10, n01, n_items, probability, n_grid=48):
    hi, lo = max(n10, n01), min(n10, n01)
    p = {n: float(order_probabilities(hi, lo, n_items, n).p_greater) for n in range(1, n_items + 1)}
    grid = sorted({round(float(g)) for g in np.geomspace(1, n_items, n_grid)})
    passing = [g for g in grid if p[g] >= probability]
    if not passing:
        return n_items
    g_first = passing[0]
    g_prev = max([g for g in grid if g < g_first], default=0)
    return next(n for n in range(g_prev + 1, g_first + 1) if p[n] >= probability)


CASES = [(60, 9, 3), (60, 20, 12), (80, 14, 5), (120, 30, 21), (45, 6, 1)]


def test_smallest_n_follows_its_documented_scan():
    below_grid_point = 0  # premise: some answers lie strictly between two grid points
    for n_items, n10, n01 in CASES:
        grid = set(np.unique(np.geomspace(1, n_items, 48).round().astype(int)).tolist())
        for probability in (0.55, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99):
            want = _scan_oracle(n10, n01, n_items, probability)
            assert smallest_n(_matrix(n10, n01, n_items), 0, 1, probability) == want
            below_grid_point += (want not in grid) and (want + 1 in grid)
    assert below_grid_point > 0


def test_smallest_n_counts_a_size_that_meets_the_target_exactly():
    """A target equal to an attained probability is met at that size (>=, not >)."""
    n_items, n10, n01 = 60, 9, 3
    grid = set(np.unique(np.geomspace(1, n_items, 48).round().astype(int)).tolist())
    tried = 0
    for n in range(2, n_items):
        if n in grid or n - 1 in grid:
            continue
        target = float(order_probabilities(n10, n01, n_items, np.array([n])).p_greater[0])
        if _scan_oracle(n10, n01, n_items, target) != n:
            continue
        tried += 1
        assert smallest_n(_matrix(n10, n01, n_items), 0, 1, target) == n
    assert tried > 0


@pytest.mark.parametrize("chunk", [1, 7, 50])
def test_tiny_memory_chunks_give_the_same_probabilities(monkeypatch, chunk):
    """One (n10, n01, n) window larger than four chunks is still computed (alone in its chunk)."""
    n10 = np.array([30, 12, 40, 5])
    n01 = np.array([20, 12, 1, 0])
    n = np.array([50, 25, 80, 10])
    want = order_probabilities(n10, n01, 200, n)
    monkeypatch.setattr(exact_module, "_CHUNK_ELEMENTS", chunk)
    got = order_probabilities(n10, n01, 200, n)
    np.testing.assert_allclose(got.p_greater, want.p_greater, rtol=0, atol=1e-14)
    np.testing.assert_allclose(got.p_equal, want.p_equal, rtol=0, atol=1e-14)
