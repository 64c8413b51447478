"""Tests that kill the surviving mutants of ``app/core/ranking/pairwise.py`` (issue 17, ``make mutation``).

Oracles, all independent of the module: brute-force counting of the 2x2 tables,
``scipy.stats.binomtest`` / ``binom`` / ``hypergeom`` (McNemar and the finite-population
supremum), Holm and Benjamini-Hochberg written out as their step-down / step-up definitions,
scalar closed forms of the Wilson bounds and of Newcombe's method 10 (with its continuity
correction of phi), and a per-pair scalar loop for the weighted normal test. Error messages
are pinned exactly.
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest
from scipy import stats

from app.core.ranking import pairwise
from app.core.ranking.pairwise import (
    adjust_pvalues,
    as_binary,
    as_mask,
    finite_population_pvalues,
    mcnemar_pvalues,
    newcombe,
    pairwise_counts,
    weighted_pair_tests,
    wilson,
)
from tests.support.pairwise_oracles import newcombe as _newcombe
from tests.support.pairwise_oracles import wilson as _wilson

Z95 = float(stats.norm.ppf(0.975))


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


# -- validation ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [[1, 0, 1], [[1, 0, 1]], np.zeros((2, 0)), np.zeros((1, 5)), np.zeros((2, 2, 2))],
)
def test_as_binary_shape_message(bad):
    msg = "correct: expected a 2-d 0/1 array with at least 2 models and 1 item"
    with pytest.raises(ValueError, match=_exact(msg)):
        as_binary(bad)


def test_as_binary_values():
    with pytest.raises(ValueError, match=_exact("correct: expected 0/1 correctness")):
        as_binary([[1, 2], [0, 1]])
    # the smallest valid inputs: 2 models x 1 item, 0/1 ints or bools (returned unchanged)
    for ok in ([[1], [0]], np.array([[True, False], [False, False]])):
        out = as_binary(ok)
        assert np.array_equal(out, np.asarray(ok))
        assert out.dtype == np.asarray(ok).dtype


def test_as_mask_rules():
    assert as_mask(None, (2, 3)) is None
    assert as_mask(np.ones((2, 3), dtype=bool), (2, 3)) is None  # complete -> no mask
    assert as_mask([[1, 1, 1], [1, 1, 1]], (2, 3)) is None
    got = as_mask([[1, 0, 1], [0, 1, 1]], (2, 3))
    assert got.dtype == np.bool_
    assert got.tolist() == [[True, False, True], [False, True, True]]
    got = as_mask(np.array([[True, False], [True, True]]), (2, 2))
    assert got.tolist() == [[True, False], [True, True]]
    with pytest.raises(
        ValueError,
        match=_exact("coverage: expected a boolean mask of shape (2, 3), got (3, 2)"),
    ):
        as_mask(np.ones((3, 2), dtype=bool), (2, 3))
    with pytest.raises(ValueError, match=_exact("coverage: expected a boolean mask")):
        as_mask([[1, 2, 1], [1, 1, 1]], (2, 3))
    with pytest.raises(ValueError, match=_exact("coverage: model rows [1, 2] have no results")):
        as_mask([[1, 0], [0, 0], [0, 0]], (3, 2))


# -- counts -------------------------------------------------------------------------------------
def _brute_counts(c, mask):
    m = c.shape[0]
    out = np.zeros((5, m, m), dtype=np.int64)
    for i in range(m):
        for j in range(m):
            both = mask[i] & mask[j]
            a, b = c[i][both], c[j][both]
            out[:, i, j] = (
                np.sum((a == 1) & (b == 1)),
                np.sum((a == 1) & (b == 0)),
                np.sum((a == 0) & (b == 1)),
                np.sum((a == 0) & (b == 0)),
                both.sum(),
            )
    return out


@pytest.mark.parametrize("f32_limit", [2**24, 1, 7])
@pytest.mark.parametrize("masked", [False, True])
def test_pairwise_counts_brute_force(monkeypatch, f32_limit, masked):
    """Every 2x2 cell against counting, in the float32 and the float64 product paths."""
    monkeypatch.setattr(pairwise, "_EXACT_F32", f32_limit)
    rng = np.random.default_rng(31)
    c = (rng.random((6, 7)) < 0.5).astype(np.uint8)
    mask = rng.random(c.shape) < 0.7 if masked else np.ones(c.shape, dtype=bool)
    mask[:, 0] = True
    pc = pairwise_counts(c, coverage=mask if masked else None)
    want = _brute_counts(c, mask)
    for got, w in zip((pc.n11, pc.n10, pc.n01, pc.n00, pc.n_shared), want, strict=True):
        assert got.dtype == np.int64
        assert np.array_equal(got, w)
    # without an explicit mask the same counts
    if not masked:
        pc2 = pairwise_counts(c.astype(bool))
        assert np.array_equal(pc2.n10, want[1]) and np.array_equal(pc2.n_shared, want[4])


# -- McNemar ------------------------------------------------------------------------------------
def test_mcnemar_equals_binomtest_and_mid_p_definition():
    for x in range(0, 13):
        for y in range(0, 13):
            k = x + y
            p = mcnemar_pvalues(x, y)
            want = stats.binomtest(x, k, 0.5).pvalue if k else 1.0
            assert float(p) == pytest.approx(want, rel=1e-12, abs=1e-300), (x, y)
            pm = mcnemar_pvalues(x, y, mid_p=True)
            lo = min(x, y)
            want_mid = (
                1.0
                if x == y
                else min(1.0, 2 * stats.binom.cdf(lo, k, 0.5) - stats.binom.pmf(lo, k, 0.5))
            )
            assert float(pm) == pytest.approx(want_mid, rel=1e-12, abs=1e-300), (x, y)
    got = mcnemar_pvalues(np.array([[0, 3], [5, 1]]), np.array([[0, 3], [0, 4]]))
    assert got.shape == (2, 2) and got.dtype == np.float64
    assert got[0, 0] == 1.0 and got[0, 1] == 1.0
    assert got[1, 0] == pytest.approx(2 * 0.5**5)
    assert got[1, 1] == pytest.approx(stats.binomtest(1, 5, 0.5).pvalue)


# -- finite population --------------------------------------------------------------------------
@functools.cache
def _fp_oracle(x, y, n, n_pop, mid_p):
    k, lo = x + y, min(x, y)
    if k == 0 or x == y:
        return 1.0
    best = 0.0
    for d in range(k, n_pop - n + k + 1):
        if d % 2:
            continue
        t = 2 * stats.hypergeom.cdf(lo, d, d // 2, k)
        if mid_p:
            t -= stats.hypergeom.pmf(lo, d, d // 2, k)
        best = max(best, t)
    return min(1.0, best)


@pytest.mark.parametrize("chunk", [4_000_000, 1, 5, 23])
@pytest.mark.parametrize(("n", "n_pop"), [(9, 20), (6, 7), (10, 31), (1, 4)])
def test_finite_population_equals_hypergeom_supremum(monkeypatch, chunk, n, n_pop):
    """sup over even D in [k, N - n + k] of the doubled hypergeometric tail, also when the
    nuisance range is cut into many blocks (a small ``_FP_CHUNK``)."""
    monkeypatch.setattr(pairwise, "_FP_CHUNK", chunk)
    xs, ys = np.meshgrid(np.arange(n + 1), np.arange(n + 1))
    keep = (xs + ys) <= n
    xs, ys = xs[keep], ys[keep]
    for mid_p in (False, True):
        got = finite_population_pvalues(xs, ys, n, n_pop, mid_p=mid_p)
        assert got.shape == xs.shape
        for x, y, p in zip(xs, ys, got, strict=True):
            want = _fp_oracle(int(x), int(y), n, n_pop, mid_p)
            assert p == pytest.approx(want, abs=1e-12), (x, y, mid_p)


def test_finite_population_shapes_and_errors():
    got = finite_population_pvalues(np.array([[3], [0]]), np.array([1, 2]), 5, 12)
    assert got.shape == (2, 2)
    for (i, j), p in np.ndenumerate(got):
        x, y = [[3], [0]][i][0], [1, 2][j]
        assert p == pytest.approx(_fp_oracle(x, y, 5, 12, False), abs=1e-12)
    # scalar counts
    assert float(finite_population_pvalues(4, 0, 4, 4)) == 0.0
    assert float(finite_population_pvalues(2, 2, 4, 4)) == 1.0
    with pytest.raises(ValueError, match=_exact("n_population: expected N >= n = 5, got 4")):
        finite_population_pvalues(1, 0, 5, 4)
    with pytest.raises(ValueError, match=_exact("n_population: expected N >= n = 0, got 4")):
        finite_population_pvalues(0, 0, 0, 4)
    with pytest.raises(ValueError, match=_exact("n10: discordant counts exceed the subset size")):
        finite_population_pvalues([3, 1], [3, 0], 5, 9)
    # k == n is allowed
    assert float(finite_population_pvalues(5, 0, 5, 9)) == pytest.approx(
        _fp_oracle(5, 0, 5, 9, False), abs=1e-12
    )


# -- Holm / BH ----------------------------------------------------------------------------------
def _holm(p):
    k = len(p)
    order = sorted(range(k), key=lambda i: (p[i], i))
    out = [0.0] * k
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        out[i] = running
    return out


def _bh(p):
    k = len(p)
    order = sorted(range(k), key=lambda i: (p[i], i))
    out = [0.0] * k
    running = 1.0
    for rank in range(k - 1, -1, -1):
        i = order[rank]
        running = min(running, min(1.0, k * p[i] / (rank + 1)))
        out[i] = running
    return out


@pytest.mark.parametrize(
    "p",
    [
        [0.01, 0.04, 0.03, 0.005],
        [0.2, 0.01, 0.2, 0.6, 0.02],
        [0.5],
        [0.03, 0.03],
        [0.9, 0.001, 0.04, 0.04, 0.3, 0.012],
        [0.0, 1.0, 0.4],
    ],
)
def test_adjust_pvalues_hand_coded(p):
    np.testing.assert_allclose(adjust_pvalues(p, "holm"), _holm(p), rtol=1e-15, atol=0)
    np.testing.assert_allclose(adjust_pvalues(p), _holm(p), rtol=1e-15, atol=0)
    np.testing.assert_allclose(adjust_pvalues(p, "bh"), _bh(p), rtol=1e-15, atol=0)
    got = adjust_pvalues(np.asarray(p), "none")
    assert np.array_equal(got, p) and got.dtype == np.float64


def test_adjust_pvalues_known_numbers_and_errors():
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.06
    assert adjust_pvalues([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx(
        [0.03, 0.06, 0.06, 0.02]
    )
    # BH: 4 * p / rank = 0.02, 0.02, 0.04, 0.04 for ranks 1..4, then running minima from the top
    assert adjust_pvalues([0.01, 0.04, 0.03, 0.005], "bh").tolist() == pytest.approx(
        [0.02, 0.04, 0.04, 0.02]
    )
    assert adjust_pvalues([], "holm").shape == (0,)
    p = np.array([0.2, 0.1])
    out = adjust_pvalues(p, "none")
    out[0] = 9.0
    assert p[0] == 0.2  # a copy
    with pytest.raises(ValueError, match=_exact("p_values: expected a 1-d array")):
        adjust_pvalues([[0.1, 0.2]])
    msg = "correction: expected one of ('holm', 'bh', 'none'), got 'bonferroni'"
    with pytest.raises(ValueError, match=_exact(msg)):
        adjust_pvalues([0.1], "bonferroni")


# -- Wilson / Newcombe --------------------------------------------------------------------------


def test_wilson_closed_form():
    for p, n, z in [(0.3, 10, Z95), (0.0, 7, Z95), (1.0, 7, 1.0), (0.55, 200, 2.5), (0.2, 1, 1.3)]:
        lo, hi = wilson(p, n, z)
        assert (float(lo), float(hi)) == pytest.approx(_wilson(p, n, z), rel=1e-13, abs=1e-15)
    lo, hi = wilson(np.array([0.25, 0.6]), np.array([np.inf, np.inf]), Z95)
    assert lo.tolist() == [0.25, 0.6] and hi.tolist() == [0.25, 0.6]


TABLES = [
    (12, 9, 2, 16),  # positive association, continuity-corrected phi
    (5, 1, 8, 3),  # negative association (no correction)
    (30, 1, 1, 0),  # n11 n00 - n10 n01 < 0
    (10, 0, 0, 10),  # phi numerator 100 - 10 > 0
    (1, 0, 0, 1),  # numerator 1 - n/2 = 0
    (0, 7, 0, 0),  # degenerate margins: den = 0 -> phi = 0
    (3, 4, 5, 0),
    (50, 20, 3, 40),
]


@pytest.mark.parametrize("factor", [1.0, 2.5, np.inf])
def test_newcombe_method_10_scalar_oracle(factor):
    t = np.array(TABLES, dtype=np.int64)
    diff, lo, hi = newcombe(t[:, 0], t[:, 1], t[:, 2], t[:, 3], factor, Z95)
    for i, (a, b, c, d) in enumerate(TABLES):
        w = _newcombe(a, b, c, d, factor, Z95)
        assert (diff[i], lo[i], hi[i]) == pytest.approx(w, rel=1e-12, abs=1e-14), TABLES[i]
    if np.isinf(factor):
        np.testing.assert_allclose(lo, diff, atol=1e-15)
        np.testing.assert_allclose(hi, diff, atol=1e-15)


def test_newcombe_all_discordant_extremes_are_clipped():
    diff, lo, hi = newcombe([0], [9], [0], [0], 1.0, 3.5)
    assert diff[0] == 1.0 and hi[0] == 1.0
    assert lo[0] == pytest.approx(_newcombe(0, 9, 0, 0, 1.0, 3.5)[1], rel=1e-12)
    diff, lo, hi = newcombe([0], [0], [9], [0], 1.0, 3.5)
    assert diff[0] == -1.0 and lo[0] == -1.0


# -- weighted normal test -----------------------------------------------------------------------
def _weighted_oracle(y, w, a, b, n_pop, z):
    n = y.shape[1]
    f = (n_pop - n) / (n_pop - 1) if n_pop > 1 else 0.0
    wsum = sum(w)
    w2sum = sum(v * v for v in w)
    acc_a = sum(w[i] * y[a, i] for i in range(n))
    acc_b = sum(w[i] * y[b, i] for i in range(n))
    diff = acc_a - acc_b
    if abs(diff) <= 1e-12 * wsum:
        diff = 0.0
    dbar = diff / wsum
    ss = sum(w[i] ** 2 * ((y[a, i] - y[b, i]) - dbar) ** 2 for i in range(n))
    se = math.sqrt(max(f * ss * (n / (n - 1) if n > 1 else 0.0), 0.0))
    ci = tuple(min(1.0, max(-1.0, v)) for v in (diff - z * se, diff + z * se))
    if diff == 0:
        p = 1.0
    elif se > 0:
        p = 2 * stats.norm.sf(abs(diff / se))
    else:
        p = 0.0
    if se > 0:
        pb = stats.norm.cdf(diff / se)
    else:
        pb = 1.0 if diff > 0 else (0.0 if diff < 0 else 0.5)
    n_kish = wsum**2 / w2sum
    acc_ci = [
        _wilson(min(max(x, 0.0), 1.0), n_kish / f if f > 0 else math.inf, z) for x in (acc_a, acc_b)
    ]
    return diff, ci, p, pb, (acc_a, acc_b), acc_ci


@pytest.mark.parametrize(("n_pop", "z"), [(40, Z95), (13, 1.3), (12, Z95), (1000, 2.2)])
def test_weighted_pair_tests_scalar_oracle(n_pop, z):
    rng = np.random.default_rng(5)
    y = (rng.random((5, 12)) < 0.55).astype(np.float64)
    y[4] = y[3]  # an identical pair: diff 0, p 1, p_better 1/2
    y[2] = 0.0
    y[2, 0] = 1.0
    w = rng.uniform(0.2, 2.0, 12)
    w /= w.sum()
    a, b = np.triu_indices(5, 1)
    acc, lo_acc, hi_acc, diff, ci_lo, ci_hi, p, pb = weighted_pair_tests(y, w, a, b, n_pop, z)
    for k in range(a.size):
        d, ci, pv, pbv, (aa, ab), aci = _weighted_oracle(y, w, a[k], b[k], n_pop, z)
        assert diff[k] == pytest.approx(d, abs=1e-14)
        assert (ci_lo[k], ci_hi[k]) == pytest.approx(ci, rel=1e-10, abs=1e-13)
        assert p[k] == pytest.approx(pv, rel=1e-9, abs=1e-300)
        assert pb[k] == pytest.approx(pbv, rel=1e-10, abs=1e-14)
        assert acc[a[k]] == pytest.approx(aa, rel=1e-13) and acc[b[k]] == pytest.approx(ab)
        assert (lo_acc[a[k]], hi_acc[a[k]]) == pytest.approx(aci[0], rel=1e-12, abs=1e-14)
        assert (lo_acc[b[k]], hi_acc[b[k]]) == pytest.approx(aci[1], rel=1e-12, abs=1e-14)
    assert p[-1] == 1.0 and pb[-1] == 0.5 and diff[-1] == 0.0


def test_weighted_pair_tests_degenerate_designs():
    y = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    w = np.array([0.5, 0.25, 0.25])
    a, b = np.array([0, 1, 0]), np.array([1, 0, 2])
    # n = N: f = 0, every se = 0, p 0 / 1, p_better 1 / 0 / 1/2, zero-width intervals
    acc, lo_acc, hi_acc, diff, ci_lo, ci_hi, p, pb = weighted_pair_tests(y, w, a, b, 3, Z95)
    assert acc.tolist() == [0.75, 0.25, 0.75]
    assert lo_acc.tolist() == [0.75, 0.25, 0.75] and hi_acc.tolist() == [0.75, 0.25, 0.75]
    assert diff.tolist() == [0.5, -0.5, 0.0]
    assert ci_lo.tolist() == [0.5, -0.5, 0.0] and ci_hi.tolist() == [0.5, -0.5, 0.0]
    assert p.tolist() == [0.0, 0.0, 1.0] and pb.tolist() == [1.0, 0.0, 0.5]
    # N = 1 (n = 1): f = 0 as well
    out = weighted_pair_tests(y[:, :1], np.array([1.0]), a, b, 1, Z95)
    assert out[3].tolist() == [1.0, -1.0, 0.0] and out[6].tolist() == [0.0, 0.0, 1.0]
    # n = 1 of N = 5: the n / (n - 1) factor is taken as 0, so se = 0
    out = weighted_pair_tests(y[:, :1], np.array([1.0]), a, b, 5, Z95)
    assert out[6].tolist() == [0.0, 0.0, 1.0] and out[7].tolist() == [1.0, 0.0, 0.5]
    assert out[1][0] == pytest.approx(_wilson(1.0, 1.0, Z95)[0], rel=1e-12)  # f = 4 / 4 = 1


def test_weighted_pair_tests_rounding_of_equal_accuracies():
    # different items, equal weighted accuracy up to rounding: the difference is exactly 0
    w = np.array([0.1, 0.2, 0.3, 0.4]) / 1.0
    y = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])  # 0.1 + 0.2 vs 0.3
    out = weighted_pair_tests(y, w, np.array([0]), np.array([1]), 20, Z95)
    assert out[3][0] == 0.0 and out[6][0] == 1.0
    assert out[7][0] == 0.5 or out[7][0] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "w",
    [np.ones(2), np.array([1.0, np.nan, 1.0]), np.array([1.0, -0.5, 1.0]), np.zeros(3)],
)
def test_weighted_pair_tests_bad_weights(w):
    y = np.zeros((2, 3))
    msg = "weights: expected 3 finite non-negative weights, positive sum"
    with pytest.raises(ValueError, match=_exact(msg)):
        weighted_pair_tests(y, w, np.array([0]), np.array([1]), 10, Z95)


def test_adjust_pvalues_integer_input_is_float():
    for corr in ("none", "holm", "bh"):
        got = adjust_pvalues([0, 1, 1], corr)
        assert got.dtype == np.float64 and got.tolist() == [0.0, 1.0, 1.0]


def test_finite_population_unsigned_and_empty_counts():
    """uint64 counts (cast to int64 first, as documented) and an empty set of pairs."""
    x = np.array([3, 0, 2], dtype=np.uint64)
    y = np.array([1, 4, 2], dtype=np.uint64)
    got = finite_population_pvalues(x, y, 6, 15)
    want = [_fp_oracle(3, 1, 6, 15, False), _fp_oracle(0, 4, 6, 15, False), 1.0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    empty = finite_population_pvalues(
        np.array([], dtype=np.int64), np.array([], dtype=np.int64), 5, 9
    )
    assert empty.shape == (0,)


def test_newcombe_large_counts_and_unit_margins():
    # margins products beyond int64 (~1e20): the counts are taken as float64
    big = 50_000
    diff, lo, hi = newcombe([big], [big + 7000], [big], [big], 1.0, Z95)
    w = _newcombe(big, big + 7000, big, big, 1.0, Z95)
    assert (diff[0], lo[0], hi[0]) == pytest.approx(w, rel=1e-12)
    # all four margins 1 (den = 1): phi = -1 for the table n10 = n01 = 1
    diff, lo, hi = newcombe([0], [1], [1], [0], 1.0, Z95)
    w = _newcombe(0, 1, 1, 0, 1.0, Z95)
    assert (diff[0], lo[0], hi[0]) == pytest.approx(w, rel=1e-12, abs=1e-15)


def test_newcombe_empty_table_is_nan_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diff, lo, hi = newcombe([0, 3], [0, 1], [0, 2], [0, 4], 1.0, Z95)
    assert np.isnan(diff[0]) and np.isnan(lo[0]) and np.isnan(hi[0])
    assert diff[1] == pytest.approx(-0.1)


def test_weighted_pair_tests_two_items_and_clipped_interval():
    # n = 2: se uses the n / (n - 1) = 2 factor; here diff - z se < -1, clipped to -1
    y = np.array([[0.0, 0.0], [1.0, 0.0]])
    w = np.array([0.5, 0.5])
    out = weighted_pair_tests(y, w, np.array([0]), np.array([1]), 1000, Z95)
    d, ci, p, pb, _, _ = _weighted_oracle(y, w, 0, 1, 1000, Z95)
    assert d == -0.5 and ci[0] == -1.0
    assert out[3][0] == -0.5 and out[4][0] == -1.0
    assert out[5][0] == pytest.approx(ci[1], rel=1e-12)
    assert out[6][0] == pytest.approx(p, rel=1e-12) and out[7][0] == pytest.approx(pb, rel=1e-12)


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_weighted_pair_tests_unnormalised_weights(scale):
    """Weights need only a positive sum: Kish's size (Σw)² / Σw², d̄ = Δ / Σw, and the
    accuracies clipped to [0, 1] before the Wilson bounds (Σ w y can exceed 1)."""
    rng = np.random.default_rng(9)
    y = (rng.random((4, 10)) < 0.5).astype(np.float64)
    y[0] = 1.0
    w = rng.uniform(0.2, 2.0, 10)
    w[3] = 0.0  # a zero weight is allowed
    w *= scale / w.sum()
    a, b = np.triu_indices(4, 1)
    acc, lo_acc, hi_acc, diff, ci_lo, ci_hi, p, pb = weighted_pair_tests(y, w, a, b, 50, Z95)
    for k in range(a.size):
        d, ci, pv, pbv, _, aci = _weighted_oracle(y, w, a[k], b[k], 50, Z95)
        assert diff[k] == pytest.approx(d, abs=1e-14)
        assert (ci_lo[k], ci_hi[k]) == pytest.approx(ci, rel=1e-10, abs=1e-13)
        assert p[k] == pytest.approx(pv, rel=1e-9) and pb[k] == pytest.approx(pbv, rel=1e-9)
        assert (lo_acc[a[k]], hi_acc[a[k]]) == pytest.approx(aci[0], rel=1e-12, abs=1e-14)
    assert acc[0] == pytest.approx(scale)


def test_weighted_pair_tests_rounding_threshold_scales_with_the_weight_sum():
    y = np.array([[1.0, 0.0], [0.0, 0.0]])
    one = np.array([1e-12, 1 - 1e-12])
    assert one.sum() == 1.0  # so the difference 1e-12 sits exactly on the threshold
    out = weighted_pair_tests(y, one, np.array([0]), np.array([1]), 100, Z95)
    assert out[3][0] == 0.0 and out[6][0] == 1.0
    two = np.array([1e-12, 2.0])  # threshold 1e-12 * 2: the difference 1e-12 is rounding
    out = weighted_pair_tests(y, two, np.array([0]), np.array([1]), 100, Z95)
    assert out[3][0] == 0.0 and out[6][0] == 1.0


def test_weighted_pair_tests_small_populations():
    y = np.array([[1.0], [0.0]])
    a, b = np.array([0]), np.array([1])
    # n = 1 of N = 2: f = (2 - 1) / (2 - 1) = 1, accuracy interval Wilson at n_kish = 1
    _, lo_acc, hi_acc, *_ = weighted_pair_tests(y, np.array([1.0]), a, b, 2, Z95)
    assert (lo_acc[0], hi_acc[0]) == pytest.approx(_wilson(1.0, 1.0, Z95), rel=1e-12)
    # N = 1: f = 0, zero-width accuracy intervals
    _, lo_acc, hi_acc, *_ = weighted_pair_tests(y, np.array([1.0]), a, b, 1, Z95)
    assert lo_acc.tolist() == [1.0, 0.0] and hi_acc.tolist() == [1.0, 0.0]


def test_weighted_pair_tests_whole_benchmark_emits_no_warnings():
    import warnings

    y = np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    a, b = np.triu_indices(3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = weighted_pair_tests(y, np.full(3, 1 / 3), a, b, 3, Z95)
    assert out[6].tolist() == [1.0, 0.0, 0.0] and out[7].tolist() == [0.5, 1.0, 1.0]


def test_weighted_pair_tests_differences_beyond_one_are_clipped():
    # weights summing to 2: Δ = Σ w (y_a - y_b) = -2 with se = 0 (d - d̄ = 0 on every item);
    # both interval ends are clipped to -1, the difference itself is not
    y = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    out = weighted_pair_tests(y, np.full(4, 0.5), np.array([0, 1]), np.array([1, 0]), 100, Z95)
    assert out[3].tolist() == [-2.0, 2.0]
    assert out[4].tolist() == [-1.0, 1.0] and out[5].tolist() == [-1.0, 1.0]


def test_wilson_at_zero_size_is_nan_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = wilson(np.array([0.5, 0.0]), np.array([0.0, 0.0]), Z95)
    assert np.isnan(lo).all() and np.isnan(hi).all()


def test_weighted_pair_tests_large_integer_weights():
    # integer weights are taken as float64: w * w = 2.5e19 would overflow int64
    y = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]])
    w = np.full(4, 5_000_000_000, dtype=np.int64)
    out = weighted_pair_tests(y, w, np.array([0]), np.array([1]), 40, Z95)
    d, ci, p, pb, _, _ = _weighted_oracle(y, [5e9] * 4, 0, 1, 40, Z95)
    assert out[3][0] == pytest.approx(d) and out[6][0] == pytest.approx(p, rel=1e-9)
    assert out[7][0] == pytest.approx(pb, rel=1e-9) and (out[4][0], out[5][0]) == pytest.approx(ci)
