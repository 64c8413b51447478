"""Pinned numbers: every interval level and point statistic against an independent computation.

Each test here was written against a bug that once survived the whole suite (issue "Tests that
catch wrong numbers"): the planted change is named in the test's docstring, and the test fails on it.
"""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.stats import paired_bootstrap, wilson_bounds, wilson_interval
from app.core.reliability.exact import (
    exact_agreement,
    order_probabilities,
    stratified_order_probabilities,
)
from app.core.reliability.mdad import mdad_paper, mdad_robust
from app.core.scoring.score_models import size_needed_for_gap


# -- stratified exact probabilities -----------------------------------------------------------------
def _brute_stratified(ya: np.ndarray, yb: np.ndarray, subtasks: np.ndarray, n: int) -> np.ndarray:
    """P(D > 0), P(D = 0), P(D < 0) by enumerating every allocation and every item combination."""
    labels = sorted(set(subtasks.tolist()))
    k = len(labels)
    base, r = divmod(n, k)
    members = [np.flatnonzero(subtasks == s) for s in labels]
    out = np.zeros(3)
    for extra in itertools.combinations(range(k), r):
        sizes = [base + (h in extra) for h in range(k)]
        per_stratum = [list(itertools.combinations(members[h], sizes[h])) for h in range(k)]
        total = 0
        counts = np.zeros(3)
        for choice in itertools.product(*per_stratum):
            idx = np.fromiter(itertools.chain.from_iterable(choice), dtype=np.int64)
            d = int(ya[idx].sum()) - int(yb[idx].sum())
            counts[0 if d > 0 else 1 if d == 0 else 2] += 1
            total += 1
        out += counts / total
    return out / comb(k, r)


@pytest.mark.parametrize(("k", "per", "n"), [(4, 3, 6), (5, 3, 7), (4, 4, 10), (6, 2, 8)])
def test_stratified_probabilities_match_brute_force_when_binomial_k_r_differs_from_k(
    k: int, per: int, n: int
) -> None:
    """Planted bug: leftovers normalised by K instead of C(K, r) (they coincide only at K=3, r=2)."""
    r = n % k
    assert comb(k, r) != k
    rng = np.random.default_rng(k * 100 + n)
    ya = rng.integers(0, 2, k * per)
    yb = rng.integers(0, 2, k * per)
    subtasks = np.repeat([f"s{h}" for h in range(k)], per)
    got = stratified_order_probabilities(ya, yb, subtasks, n)
    probs = np.array([got.p_greater, got.p_equal, got.p_less], dtype=float)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(probs, _brute_stratified(ya, yb, subtasks, n), atol=1e-12)


# -- exact benchmark-wide agreement curve: floor binning ---------------------------------------------
def test_exact_agreement_bins_by_floor_of_the_gap() -> None:
    """Planted bug: bins by ceiling instead of floor (the GPQA plan moved from 247 to 309 items)."""
    rng = np.random.default_rng(3)
    c = (rng.random((12, 37)) < 0.5).astype(np.uint8)  # N = 37: gaps are never on a bin edge
    res = exact_agreement(c, 10)
    i, j = np.triu_indices(12, 1)
    acc = c.mean(axis=1)
    gap = np.abs(acc[i] - acc[j])
    keys = np.floor(gap * 200 + 1e-9).astype(int)
    uniq, counts = np.unique(keys, return_counts=True)
    np.testing.assert_allclose(res.curve.gaps, uniq / 200)
    np.testing.assert_allclose(res.curve.n_pairs, counts)
    np.testing.assert_allclose(res.curve.gap_upper, (uniq + 1) / 200)
    # each bin's P(same) is the mean over its pairs of the exact P(leader ahead on the subset)
    n10 = c @ (1 - c).T
    hi, lo = np.maximum(n10[i, j], n10[j, i]), np.minimum(n10[i, j], n10[j, i])
    p = order_probabilities(hi, lo, 37, 10).p_greater
    expected = np.array([p[keys == k].mean() for k in uniq])
    np.testing.assert_allclose(res.curve.p_same, expected, rtol=1e-12)


# -- paper MDAD: the band is a 95 % percentile bootstrap ---------------------------------------------
def test_paper_mdad_interval_is_the_95_percent_band() -> None:
    """Planted bug: the paper MDAD interval at 90 % instead of 95 %.

    Four 100-pair bins with agreement 0.72, 0.75, 0.80, 0.92. The bootstrap mean of a bin is
    Binomial(100, p) / 100, so with many resamples its 97.5 % quantile is scipy's binom.ppf: bin 0's
    is 0.81 (>= 0.8, so b_u = bin 0) while its 95 % quantile is 0.79 (a 90 % band gives b_u = bin 1).
    """
    a = np.array([72, 75, 80, 92])
    m = np.full(4, 100)
    upper_975 = stats.binom.ppf(0.975, 100, a / 100) / 100
    upper_95 = stats.binom.ppf(0.95, 100, a / 100) / 100
    lower_025 = stats.binom.ppf(0.025, 100, a / 100) / 100
    assert upper_975[0] >= 0.8 > upper_95[0]  # the construction separates the two levels
    b_u = np.flatnonzero(upper_975 >= 0.8)[0] / 200
    b_l = np.flatnonzero(lower_025 >= 0.8)[0] / 200
    mdad_expected = 2 / 200
    half = max(mdad_expected - b_u, b_l - mdad_expected)
    assert half == pytest.approx(0.01)  # set by b_u: a 90 % band would give 0.005
    mdad, lo, hi, reached = mdad_paper(m, a, n_boot=40_000, rng=np.random.default_rng(0))
    assert reached
    assert mdad == pytest.approx(mdad_expected)
    assert (lo, hi) == pytest.approx((mdad_expected - half, mdad_expected + half))


# -- robust MDAD: monotone fit, 95 % runs bootstrap that can draw every run --------------------------
def _robust_counts() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """10 runs, two bins. Bin 1 always agrees. In bin 0 the LAST run has 12 agreeing pairs and the
    nine others one disagreeing pair each, so a resample's pooled bin-0 agreement reaches 0.8 iff
    it draws the last run at least 3 times: P = P(Binomial(10, 0.1) >= 3) = 0.0702."""
    runs = 10
    pairs = np.zeros((runs, 2))
    same = np.zeros((runs, 2))
    pairs[:, 0], pairs[-1, 0], same[-1, 0] = 1, 12, 12
    pairs[:, 1] = same[:, 1] = 20
    return pairs, same, np.zeros_like(pairs)


def test_robust_mdad_interval_is_95_percent_over_all_runs() -> None:
    """Planted bugs: the robust interval at 10/90 %; a runs bootstrap that never draws the last run.

    The bootstrap MDAD is 0 with probability 0.0702 (above 2.5 %, below 10 %), else 0.005: a 95 %
    interval is [0, 0.005]; a 10/90 % one, or one never drawing the last run, is [0.005, 0.005].
    """
    assert stats.binom.sf(2, 10, 0.1) == pytest.approx(0.0702, abs=1e-4)
    pairs, same, tie = _robust_counts()
    mdad, lo, hi, _ = mdad_robust(
        pairs, same, tie, min_pairs=1, n_boot=20_000, rng=np.random.default_rng(1)
    )
    assert mdad == pytest.approx(0.005)  # pooled bin 0: 12 / 21 < 0.8
    assert (lo, hi) == (0.0, pytest.approx(0.005))


def test_robust_mdad_reads_the_monotone_fit_not_the_raw_curve() -> None:
    """Planted bug: MDAD from the raw curve. Raw bin 0 is 0.9 (>= 0.8) but bin 1 is 0.5, so the
    pair-weighted isotonic fit pools them at 59/110 = 0.536 and the MDAD is bin 2's gap."""
    pairs = np.array([[10.0, 100.0, 100.0]])
    same = np.array([[9.0, 50.0, 100.0]])
    mdad, _, _, curve = mdad_robust(
        pairs, same, np.zeros_like(pairs), min_pairs=1, n_boot=50, rng=np.random.default_rng(0)
    )
    np.testing.assert_allclose(curve.fitted, [59 / 110, 59 / 110, 1.0])
    assert mdad == pytest.approx(0.01)


# -- Wilson with the finite-population correction ---------------------------------------------------
def _wilson_roots(p: float, n: int, big_n: int, z: float) -> tuple[float, float]:
    """Both roots of (p - x)^2 = z^2 f x (1 - x) / n, f = (N - n) / (N - 1), by numpy.roots."""
    c = z * z * (big_n - n) / (big_n - 1) / n
    roots = np.sort(np.roots([1 + c, -(2 * p + c), p * p]).real)
    return float(roots[0]), float(roots[1])


@pytest.mark.parametrize(
    ("k", "n", "big_n"), [(9, 30, 448), (1, 25, 100), (24, 25, 448), (5, 50, 60)]
)
def test_wilson_fpc_bounds_are_the_quadratic_roots(k: int, n: int, big_n: int) -> None:
    """Planted bug: the FPC dropped from one term of the bound ([0.195, 0.431] -> [0.101, 0.525])."""
    z = stats.norm.ppf(0.975)
    est = wilson_interval(k, n, n_population=big_n)
    lo, hi = _wilson_roots(k / n, n, big_n, z)
    assert (est.ci_low, est.ci_high) == pytest.approx((lo, hi), abs=1e-12)
    f = (big_n - n) / (big_n - 1)
    assert wilson_bounds(k / n, n, f, z) == pytest.approx((lo, hi), abs=1e-12)


# -- paired bootstrap level ---------------------------------------------------------------------------
def test_paired_bootstrap_95_percent_matches_the_normal_limit() -> None:
    """Planted bug: a 90 % interval labelled 95 %. With 400 items the bootstrap distribution of the
    mean difference is close to normal with sd = sd(d) / sqrt(n) (ddof 0): the 95 % half-width is
    1.96 of those, the 90 % one 1.645 (16 % narrower; 40k resamples pin it within ~1 %)."""
    rng = np.random.default_rng(5)
    a = (rng.random(400) < 0.6).astype(float)
    b = (rng.random(400) < 0.5).astype(float)
    d = a - b
    est = paired_bootstrap(a, b, n_boot=40_000, rng=1)
    sd = d.std() / np.sqrt(d.size)
    half = (est.ci_high - est.ci_low) / 2
    assert half == pytest.approx(stats.norm.ppf(0.975) * sd, rel=0.03)
    assert est.confidence == 0.95


# -- size needed: the refinement step ---------------------------------------------------------------
@pytest.mark.parametrize(("n10", "n01", "big_n"), [(60, 30, 448), (40, 28, 448), (90, 20, 1000)])
def test_size_needed_equals_a_brute_force_scan(n10: int, n01: int, big_n: int) -> None:
    """Planted bug: ``size_needed`` returning the coarse grid point (skipping its refinement)."""
    got = size_needed_for_gap(n10, n01, big_n, big_n, 0.8)
    sizes = np.arange(1, big_n + 1)
    p = order_probabilities(n10, n01, big_n, sizes).p_greater
    grid = np.unique(np.geomspace(1, big_n, 48).round().astype(np.int64))
    first_grid = int(grid[np.flatnonzero(p[grid - 1] >= 0.8)[0]])
    prev = int(grid[np.searchsorted(grid, first_grid) - 1]) if first_grid > grid[0] else 0
    expected = prev + 1 + int(np.flatnonzero(p[prev:first_grid] >= 0.8)[0])
    assert got == expected
    assert p[got - 1] >= 0.8
    assert got != first_grid or p[got - 2] < 0.8  # the refinement can land below the grid point
