"""Tests that kill the surviving mutants of ``app/core/ranking/leaderboard.py`` (issue 17, ``make mutation``).

Every field of small leaderboards is checked against an independent per-pair scalar computation:
brute-force 2x2 counts, ``scipy.stats.binomtest`` (McNemar), ``scipy.stats.beta.sf`` (P(better)
in items mode; the engine uses ``scipy.special.bdtr``, pinned here against ``beta.sf``),
``scipy.stats.hypergeom`` (the finite-population supremum), the Wilson and Newcombe (method 10)
closed forms, Holm / BH written out step by step, and the rank / tier rules applied by loops.
Error messages and the ``method`` statement are pinned exactly.
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import special, stats

from app.core.ranking.leaderboard import (
    leaderboard,
    leaderboard_for_selection,
    rank_intervals,
    tiers,
)
from tests.support.pairwise_oracles import newcombe as _newcombe
from tests.support.pairwise_oracles import wilson as _wilson


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


def _holm(p):
    k = len(p)
    order = sorted(range(k), key=lambda i: (p[i], i))
    out, running = [0.0] * k, 0.0
    for r, i in enumerate(order):
        running = max(running, min(1.0, (k - r) * p[i]))
        out[i] = running
    return out


def _bh(p):
    k = len(p)
    order = sorted(range(k), key=lambda i: (p[i], i))
    out, running = [0.0] * k, 1.0
    for r in range(k - 1, -1, -1):
        running = min(running, min(1.0, k * p[order[r]] / (r + 1)))
        out[order[r]] = running
    return out


def _fp_sup(x, y, n, n_pop, mid_p):
    k, lo = x + y, min(x, y)
    if k == 0 or x == y:
        return 1.0
    best = 0.0
    for d in range(k, n_pop - n + k + 1, 1):
        if d % 2 == 0:
            t = 2 * stats.hypergeom.cdf(lo, d, d // 2, k)
            if mid_p:
                t -= stats.hypergeom.pmf(lo, d, d // 2, k)
            best = max(best, t)
    return min(1.0, best)


def _ranks_and_tiers(acc, better):
    """Competition ranks, rank intervals and tiers by plain loops."""
    m = len(acc)
    order = sorted(range(m), key=lambda i: (-acc[i], i))
    rank = [1 + sum(acc[j] > acc[i] for j in range(m)) for i in range(m)]
    lo = [1 + sum(better[j][i] for j in range(m)) for i in range(m)]
    hi = [m - sum(better[i][j] for j in range(m)) for i in range(m)]
    tier, left, t = [0] * m, list(order), 0
    while left:
        t += 1
        head = left[0]
        stay = []
        for j in left:
            if better[head][j]:
                stay.append(j)
            else:
                tier[j] = t
        left = stay
    return order, rank, lo, hi, tier


def _check_board(lb, c, *, alpha, correction, p_fn, pb_fn, factor, acc_n, mask=None):
    """Every field of ``lb`` against the scalar oracles."""
    m, n = c.shape
    z = stats.norm.ppf(1 - alpha / 2)
    mask = np.ones(c.shape, dtype=bool) if mask is None else mask
    pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
    assert lb.pairs.a.tolist() == [a for a, _ in pairs]
    assert lb.pairs.b.tolist() == [b for _, b in pairs]
    ps, diffs, unshared = [], [], []
    for k, (a, b) in enumerate(pairs):
        both = mask[a] & mask[b]
        x, y = c[a][both], c[b][both]
        n11, n10 = int(np.sum((x == 1) & (y == 1))), int(np.sum((x == 1) & (y == 0)))
        n01, n00 = int(np.sum((x == 0) & (y == 1))), int(np.sum((x == 0) & (y == 0)))
        assert (lb.pairs.n10[k], lb.pairs.n01[k], lb.pairs.n_shared[k]) == (n10, n01, both.sum())
        if both.sum() == 0:
            unshared.append([a, b])
            assert np.isnan(lb.pairs.difference[k]) and np.isnan(lb.pairs.ci_low[k])
            assert np.isnan(lb.pairs.ci_high[k])
            assert lb.pairs.p_value[k] == 1.0 and lb.pairs.p_better[k] == 0.5
            ps.append(1.0)
            diffs.append(0.0)
            continue
        d, lo, hi = _newcombe(n11, n10, n01, n00, factor, z)
        assert lb.pairs.difference[k] == pytest.approx(d, abs=1e-14), (a, b)
        assert lb.pairs.ci_low[k] == pytest.approx(lo, rel=1e-10, abs=1e-13), (a, b)
        assert lb.pairs.ci_high[k] == pytest.approx(hi, rel=1e-10, abs=1e-13), (a, b)
        p = p_fn(n10, n01)
        assert lb.pairs.p_value[k] == pytest.approx(p, rel=1e-10, abs=1e-300), (a, b)
        assert lb.pairs.p_better[k] == pytest.approx(pb_fn(n10, n01), rel=1e-10, abs=1e-15)
        ps.append(p)
        diffs.append(d)
    assert lb.unshared_pairs.tolist() == unshared
    assert lb.unshared_pairs.shape == (len(unshared), 2)
    adj = {"holm": _holm, "bh": _bh, "none": list}[correction](ps)
    np.testing.assert_allclose(lb.pairs.p_adjusted, adj, rtol=1e-10, atol=1e-300)
    sig = [q <= alpha for q in adj]
    assert lb.pairs.significant.tolist() == sig
    better = [[False] * m for _ in range(m)]
    for (a, b), s, d in zip(pairs, sig, diffs, strict=True):
        if s and d > 0:
            better[a][b] = True
        if s and d < 0:
            better[b][a] = True
    acc = [c[i][mask[i]].mean() for i in range(m)]
    order, rank, rlo, rhi, tier = _ranks_and_tiers(acc, better)
    rlo = [min(r, q) for r, q in zip(rlo, rank, strict=True)]
    rhi = [max(r, q) for r, q in zip(rhi, rank, strict=True)]
    r = lb.rows
    assert r.model.tolist() == order
    assert r.accuracy.tolist() == pytest.approx([acc[i] for i in order], abs=1e-15)
    for j, i in enumerate(order):
        lo, hi = _wilson(acc[i], acc_n(int(mask[i].sum())), z)
        assert (r.ci_low[j], r.ci_high[j]) == pytest.approx((lo, hi), rel=1e-12, abs=1e-14)
    assert r.rank.tolist() == [rank[i] for i in order]
    assert r.rank_low.tolist() == [rlo[i] for i in order]
    assert r.rank_high.tolist() == [rhi[i] for i in order]
    assert r.tier.tolist() == [tier[i] for i in order]
    assert r.n_items.tolist() == [int(mask[i].sum()) for i in order]
    assert lb.n_tiers == max(tier)
    assert lb.n_items == n and lb.alpha == alpha and lb.correction == correction
    for arr in (*vars(r).values(), *vars(lb.pairs).values(), lb.unshared_pairs):
        assert not arr.flags.writeable and arr.flags.c_contiguous
    for arr in (r.model, r.rank, r.rank_low, r.rank_high, r.tier, r.n_items, lb.pairs.a):
        assert arr.dtype == np.int64
    assert lb.pairs.p_better.dtype == np.float64 and lb.pairs.significant.dtype == np.bool_


def _mcnemar(x, y):
    return stats.binomtest(x, x + y, 0.5).pvalue if x + y else 1.0


def _mid(x, y):
    k, lo = x + y, min(x, y)
    if x == y:
        return 1.0
    return min(1.0, 2 * stats.binom.cdf(lo, k, 0.5) - stats.binom.pmf(lo, k, 0.5))


def _beta_sf(x, y):
    return stats.beta.sf(0.5, 1 + x, 1 + y)


def _matrix(seed, m, n, spread=0.35):
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.5 + spread, 0.5 - spread, m)[:, None]
    return (rng.random((m, n)) < skill).astype(np.uint8)


# -- P(better): bdtr == beta.sf ------------------------------------------------------------------
def test_bdtr_form_equals_beta_sf():
    """P(Beta(1 + x, 1 + y) > 1/2) = P(Binomial(x + y + 1, 1/2) <= x), the identity the engine
    uses; pinned against ``scipy.stats.beta.sf`` on a grid of counts."""
    x, y = np.meshgrid(np.arange(0, 60), np.arange(0, 60))
    np.testing.assert_allclose(
        special.bdtr(x, x + y + 1, 0.5), stats.beta.sf(0.5, 1 + x, 1 + y), rtol=1e-12, atol=1e-300
    )


# -- items mode ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("alpha", "correction", "mid_p"),
    [(0.2, "holm", False), (0.05, "bh", True), (0.3, "none", False), (0.01, "holm", True)],
)
def test_items_board_every_field(alpha, correction, mid_p):
    c = _matrix(3, 7, 40)
    c[5] = c[4]  # a tie in accuracy (ranks shared, order by input position)
    c[6, :] = 0
    c[6, :3] = 1
    lb = leaderboard(c, alpha=alpha, correction=correction, mid_p=mid_p)
    _check_board(
        lb,
        c,
        alpha=alpha,
        correction=correction,
        p_fn=_mid if mid_p else _mcnemar,
        pb_fn=_beta_sf,
        factor=1.0,
        acc_n=float,
    )
    assert lb.population == "items" and lb.design == "full" and lb.mid_p is mid_p
    assert lb.n_population is None
    assert lb.n_tiers > 1


def test_items_board_with_coverage_gaps_and_widened_ranks():
    """Model 1 beats model 0 on the 30 items they share (20 to 0) but has the lower accuracy over
    its own items (20/30 < 70/100); model 2 shares no item with model 1."""
    n = 100
    c = np.zeros((3, n), dtype=np.uint8)
    mask = np.zeros((3, n), dtype=bool)
    c[0, :70] = 1
    mask[0] = True
    c[1, 80:] = 1
    mask[1, 70:] = True
    c[2, :20] = 1
    mask[2, :40] = True
    lb = leaderboard(c, coverage=mask, alpha=0.05)
    _check_board(
        lb,
        c,
        alpha=0.05,
        correction="holm",
        p_fn=_mcnemar,
        pb_fn=_beta_sf,
        factor=1.0,
        acc_n=float,
        mask=mask,
    )
    assert lb.unshared_pairs.tolist() == [[1, 2]]
    row = {int(x): i for i, x in enumerate(lb.rows.model)}
    # widened: without it model 0 (point rank 1, one model significantly better) gets [2, 2]
    assert (lb.rows.rank_low[row[0]], lb.rows.rank_high[row[0]]) == (1, 2)
    assert (lb.rows.rank_low[row[1]], lb.rows.rank_high[row[1]]) == (1, 2)
    # an all-True mask is the same as none
    full = leaderboard(c, coverage=np.ones_like(mask))
    assert full.unshared_pairs.shape == (0, 2)
    assert full.rows.n_items.tolist() == [n, n, n]


# -- benchmark mode -----------------------------------------------------------------------------
@pytest.mark.parametrize(("n_pop", "mid_p", "alpha"), [(60, False, 0.1), (31, True, 0.2)])
def test_uniform_subset_board_every_field(n_pop, mid_p, alpha):
    c = _matrix(8, 6, 30)
    n = c.shape[1]
    f = (n_pop - n) / (n_pop - 1)

    def p_better(x, y):
        dbar = (x - y) / n
        se = math.sqrt(f * ((x + y) - n * dbar**2) / (n - 1) / n)
        if se > 0:
            return stats.norm.cdf(dbar / se)
        return 1.0 if dbar > 0 else (0.0 if dbar < 0 else 0.5)

    lb = leaderboard(c, population="benchmark", n_population=n_pop, alpha=alpha, mid_p=mid_p)
    _check_board(
        lb,
        c,
        alpha=alpha,
        correction="holm",
        p_fn=lambda x, y: _fp_sup(x, y, n, n_pop, mid_p),
        pb_fn=p_better,
        factor=1 / f,
        acc_n=lambda k: k / f,
    )
    assert lb.design == "uniform" and lb.population == "benchmark" and lb.n_population == n_pop


def test_full_benchmark_board_is_exact():
    c = _matrix(4, 5, 12)
    c[3] = c[2]
    for kwargs in ({}, {"n_population": 12}):
        lb = leaderboard(c, population="benchmark", alpha=0.1, **kwargs)
        _check_board(
            lb,
            c,
            alpha=0.1,
            correction="holm",
            p_fn=lambda x, y: 1.0 if x == y else 0.0,
            pb_fn=lambda x, y: 1.0 if x > y else (0.0 if x < y else 0.5),
            factor=math.inf,
            acc_n=lambda k: math.inf,
        )
        assert lb.design == "full" and lb.n_population == 12


def test_single_item_benchmark():
    # n = N = 1: f is taken as 0 (no division by N - 1 = 0), every difference known exactly
    lb = leaderboard([[1], [0], [1]], population="benchmark")
    assert lb.pairs.p_value.tolist() == [0.0, 1.0, 0.0]
    assert lb.pairs.p_better.tolist() == [1.0, 0.5, 0.0]
    assert lb.rows.ci_low.tolist() == [1.0, 1.0, 0.0]
    # n = 1 of N = 3: a one-item subset, var_d is taken as 0
    lb = leaderboard([[1], [0]], population="benchmark", n_population=3)
    assert lb.design == "uniform"
    assert lb.pairs.p_better.tolist() == [1.0]
    assert lb.pairs.p_value[0] == pytest.approx(_fp_sup(1, 0, 1, 3, False))


def _weighted_oracle(y, w, a, b, n_pop, z):
    n = y.shape[1]
    f = (n_pop - n) / (n_pop - 1) if n_pop > 1 else 0.0
    wsum = sum(w)
    diff = sum(w[i] * (y[a, i] - y[b, i]) for i in range(n))
    if abs(diff) <= 1e-12 * wsum:
        diff = 0.0
    dbar = diff / wsum
    ss = sum(w[i] ** 2 * ((y[a, i] - y[b, i]) - dbar) ** 2 for i in range(n))
    se = math.sqrt(max(f * ss * n / (n - 1), 0.0))
    if se > 0:
        p, pb = 2 * stats.norm.sf(abs(diff / se)), stats.norm.cdf(diff / se)
    else:
        p, pb = (1.0 if diff == 0 else 0.0), (1.0 if diff > 0 else (0.0 if diff < 0 else 0.5))
    if diff == 0:
        p = 1.0
    return diff, (max(-1.0, diff - z * se), min(1.0, diff + z * se)), p, pb


@pytest.mark.parametrize("correction", ["bh", "holm"])
def test_weighted_board_every_field(correction):
    c = _matrix(6, 6, 20)
    c[5] = c[4]
    rng = np.random.default_rng(2)
    w = rng.uniform(0.5, 2.0, 20)
    w /= w.sum()
    n_pop, alpha = 90, 0.15
    z = stats.norm.ppf(1 - alpha / 2)
    lb = leaderboard(
        c, population="benchmark", n_population=n_pop, weights=w, alpha=alpha, correction=correction
    )
    assert lb.design == "weighted" and lb.n_population == n_pop
    f = (n_pop - 20) / (n_pop - 1)
    n_kish = 1.0 / np.sum(w * w)
    acc = c @ w
    ps, diffs = [], []
    for k, (a, b) in enumerate(zip(lb.pairs.a, lb.pairs.b, strict=True)):
        d, ci, p, pb = _weighted_oracle(c.astype(float), w, a, b, n_pop, z)
        assert lb.pairs.difference[k] == pytest.approx(d, abs=1e-14)
        assert (lb.pairs.ci_low[k], lb.pairs.ci_high[k]) == pytest.approx(ci, rel=1e-10)
        assert lb.pairs.p_value[k] == pytest.approx(p, rel=1e-9)
        assert lb.pairs.p_better[k] == pytest.approx(pb, rel=1e-9, abs=1e-15)
        ps.append(p)
        diffs.append(d)
    adj = {"holm": _holm, "bh": _bh}[correction](ps)
    np.testing.assert_allclose(lb.pairs.p_adjusted, adj, rtol=1e-9)
    order = sorted(range(6), key=lambda i: (-acc[i], i))
    assert lb.rows.model.tolist() == order
    for j, i in enumerate(order):
        lo, hi = _wilson(acc[i], n_kish / f, z)
        assert (lb.rows.ci_low[j], lb.rows.ci_high[j]) == pytest.approx((lo, hi), rel=1e-10)
    better = [[False] * 6 for _ in range(6)]
    for (a, b), q, d in zip(zip(lb.pairs.a, lb.pairs.b, strict=True), adj, diffs, strict=True):
        if q <= alpha and d != 0:
            better[a if d > 0 else b][b if d > 0 else a] = True
    _, _, rlo, rhi, tier = _ranks_and_tiers(list(acc), better)
    assert lb.rows.rank_low.tolist() == [rlo[i] for i in order]
    assert lb.rows.rank_high.tolist() == [rhi[i] for i in order]
    assert lb.rows.tier.tolist() == [tier[i] for i in order]


# -- leaderboard_for_selection ------------------------------------------------------------------
def test_leaderboard_for_selection_passes_everything_through():
    c = _matrix(9, 5, 16)
    rand = SimpleNamespace(method="random", n_candidates=40, weights=np.full(16, 1 / 16))
    lb = leaderboard_for_selection(c, rand)
    assert lb.design == "uniform" and lb.n_population == 40
    assert lb.alpha == 0.05 and lb.correction == "holm" and lb.mid_p is False
    want = [
        _fp_sup(int(x), int(y), 16, 40, False)
        for x, y in zip(lb.pairs.n10, lb.pairs.n01, strict=True)
    ]
    np.testing.assert_allclose(lb.pairs.p_value, want, rtol=1e-10)
    lb = leaderboard_for_selection(c, rand, 20, alpha=0.2, correction="bh", mid_p=True)
    assert lb.n_population == 20 and lb.alpha == 0.2 and lb.correction == "bh" and lb.mid_p
    want = [
        _fp_sup(int(x), int(y), 16, 20, True)
        for x, y in zip(lb.pairs.n10, lb.pairs.n01, strict=True)
    ]
    np.testing.assert_allclose(lb.pairs.p_value, want, rtol=1e-10)
    np.testing.assert_allclose(lb.pairs.p_adjusted, _bh(want), rtol=1e-10)
    w = np.linspace(1, 2, 16)
    w /= w.sum()
    other = SimpleNamespace(method="anchor_points", n_candidates=50, weights=list(w))
    lb = leaderboard_for_selection(c, other)
    assert lb.design == "weighted" and lb.n_population == 50
    np.testing.assert_allclose(lb.rows.accuracy, (c @ w)[lb.rows.model], rtol=1e-12)


# -- rank intervals and tiers -------------------------------------------------------------------
def test_rank_intervals_and_tiers_brute_force():
    rng = np.random.default_rng(12)
    for _ in range(30):
        m = int(rng.integers(1, 8))
        acc = rng.permutation(m) / m
        better = (acc[:, None] > acc[None, :]) & (rng.random((m, m)) < 0.5)
        order, _, lo, hi, tier = _ranks_and_tiers(list(acc), better.tolist())
        got_lo, got_hi = rank_intervals(better.astype(np.uint8))
        assert got_lo.tolist() == lo and got_hi.tolist() == hi
        assert got_lo.dtype == np.int64 and got_hi.dtype == np.int64
        got = tiers(order, better)
        assert got.tolist() == tier and got.dtype == np.int64


# -- validation and the method statement --------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 0.0}, "alpha: expected a level in (0, 1), got 0.0"),
        ({"alpha": 1.0}, "alpha: expected a level in (0, 1), got 1.0"),
        (
            {"correction": "bonf"},
            "correction: expected one of ('holm', 'bh', 'none'), got 'bonf'",
        ),
        (
            {"population": "world"},
            "population: expected one of ('items', 'benchmark'), got 'world'",
        ),
        ({"n_population": 5}, "n_population: only used with population='benchmark'"),
        ({"weights": [0.5, 0.5]}, "n_population: only used with population='benchmark'"),
        (
            {"population": "benchmark", "coverage": [[1, 0], [1, 1]]},
            "coverage: population='benchmark' needs complete results",
        ),
        (
            {"population": "benchmark", "n_population": 1},
            "n_population: 1 is smaller than the 2 items given",
        ),
    ],
)
def test_bad_input_exact_messages(kwargs, message):
    with pytest.raises(ValueError, match=_exact(message)):
        leaderboard([[1, 0], [0, 1]], **kwargs)


def test_alpha_just_inside_the_bounds():
    for alpha in (1e-9, 0.999):
        assert leaderboard([[1, 0], [0, 1]], alpha=alpha).alpha == alpha


def test_method_statements():
    c = [[1, 0, 1], [0, 1, 1]]
    tail = (
        "Rank: by accuracy, ties share the best rank. Rank interval: [1 + #significantly better, "
        "m - #significantly worse], {simult}. Tiers: sort by accuracy; a tier is the best "
        "unassigned model plus every unassigned model not significantly worse than it. "
        "Intervals at {pct}%."
    )
    items = leaderboard(c, alpha=0.1, mid_p=True).method
    assert items == (
        "Pairs: exact two-sided McNemar test (mid-p) on the items both models have; the 3 items "
        "are treated as a sample from a population of items; difference interval: Newcombe score "
        "(method 10); accuracy interval: Wilson; P(better) = P(Beta(1+n10, 1+n01) > 1/2). "
        "Multiplicity: Holm (family-wise error rate), alpha = 0.1; a pair is significant when "
        "its adjusted p-value <= 0.1. " + tail.format(simult="simultaneous (family-wise)", pct=90)
    )
    weighted = leaderboard(
        c, population="benchmark", n_population=10, weights=[0.2, 0.3, 0.5], correction="bh"
    ).method
    assert weighted == (
        "Pairs: normal test of the full-benchmark difference (N = 10) from a weighted subset of 3 "
        "items (Horvitz-Thompson-style weighted difference, linearised variance with "
        "finite-population correction; approximate); accuracy interval: Wilson at Kish's "
        "effective size with FPC. Multiplicity: Benjamini-Hochberg (false discovery rate), "
        "alpha = 0.05; a pair is significant when its adjusted p-value <= 0.05. "
        + tail.format(simult="not simultaneous (no family-wise control)", pct=95)
    )
    uniform = leaderboard(c, population="benchmark", n_population=10, correction="none").method
    assert uniform == (
        "Pairs: exact conditional hypergeometric test of the full-benchmark difference (N = 10) "
        "from a uniform random subset of 3 items (supremum over the unknown number of discordant "
        "items); difference interval: Newcombe with FPC-deflated Wilson components "
        "(approximate); accuracy interval: Wilson with FPC. Multiplicity: no multiplicity "
        "correction, alpha = 0.05; a pair is significant when its adjusted p-value <= 0.05. "
        + tail.format(simult="not simultaneous (no family-wise control)", pct=95)
    )
    assert (
        "hypergeometric test (mid-p) of"
        in leaderboard(c, population="benchmark", n_population=10, mid_p=True).method
    )
    full = leaderboard(c, population="benchmark", alpha=0.2).method
    assert full == (
        "Pairs: all 3 benchmark items seen: full-benchmark differences are known exactly "
        "(p = 0 if two models differ, 1 if not; zero-width intervals). Multiplicity: Holm "
        "(family-wise error rate), alpha = 0.2; a pair is significant when its adjusted p-value "
        "<= 0.2. " + tail.format(simult="simultaneous (family-wise)", pct=80)
    )


def test_tiny_subsets_of_a_benchmark():
    # n = 1 of N = 2: f = (2 - 1) / (2 - 1) = 1, so the accuracy interval is Wilson at n = 1
    z = stats.norm.ppf(0.975)
    lb = leaderboard([[1], [0]], population="benchmark", n_population=2)
    assert (lb.rows.ci_low[0], lb.rows.ci_high[0]) == pytest.approx(_wilson(1.0, 1.0, z))
    assert (lb.rows.ci_low[1], lb.rows.ci_high[1]) == pytest.approx(_wilson(0.0, 1.0, z))
    assert lb.pairs.p_better.tolist() == [1.0]  # one item: var_d is taken as 0
    # n = 2 of N = 5: f = 3 / 4, var_d = ((x + y) - n dbar^2) / (n - 1)
    c = [[1, 1], [0, 1], [0, 0]]
    lb = leaderboard(c, population="benchmark", n_population=5)
    f = 3 / 4
    for k, (x, y) in enumerate([(1, 0), (2, 0), (1, 0)]):
        dbar = (x - y) / 2
        se = math.sqrt(f * ((x + y) - 2 * dbar**2) / 1 / 2)
        want = stats.norm.cdf(dbar / se) if se > 0 else 1.0
        assert lb.pairs.p_better[k] == pytest.approx(want, rel=1e-12)
        assert lb.pairs.p_value[k] == pytest.approx(_fp_sup(x, y, 2, 5, False), rel=1e-12)


def test_significance_at_exactly_alpha_and_int_dtypes():
    # one pair, n10 = 0, n01 = 2: McNemar p = 2 * 0.25 = 0.5 exactly; significant at alpha = 0.5
    lb = leaderboard([[0, 0], [1, 1]], alpha=0.5)
    assert lb.pairs.p_value.tolist() == [0.5] and lb.pairs.p_adjusted.tolist() == [0.5]
    assert lb.pairs.significant.tolist() == [True]
    assert lb.rows.tier.tolist() == [1, 2]
    # unshared pairs are int64 row positions
    c = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 1, 1]])
    mask = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]], dtype=bool)
    lb = leaderboard(c, coverage=mask)
    assert lb.unshared_pairs.tolist() == [[0, 1]] and lb.unshared_pairs.dtype == np.int64


def test_one_item_subset_emits_no_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lb = leaderboard([[1], [0], [1]], population="benchmark", n_population=4)
    assert lb.pairs.p_better.tolist() == [1.0, 0.5, 0.0]


def test_tiers_accept_a_0_1_matrix():
    better = [[0, 1, 1, 1], [0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0]]
    assert tiers([0, 2, 1, 3], better).tolist() == [1, 3, 2, 3]
    assert tiers([0, 2, 1, 3], np.array(better, dtype=np.uint8)).tolist() == [1, 3, 2, 3]
