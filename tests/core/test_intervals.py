"""Exact small-sample intervals and the model-assisted estimator against independent oracles."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.intervals import (
    calibrate_references,
    clopper_pearson,
    difference_estimate,
    hypergeometric_interval,
    jeffreys,
    proportion_interval,
    reference_calibrated_interval,
)

CASES = [(0, 1), (0, 10), (1, 10), (7, 20), (20, 20), (13, 25), (0, 100), (100, 100), (37, 100)]


@pytest.mark.parametrize(("k", "n"), CASES)
def test_clopper_pearson_matches_scipy(k, n) -> None:
    lo, hi = clopper_pearson(k, n)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert float(lo) == pytest.approx(ref.low, abs=1e-10)
    assert float(hi) == pytest.approx(ref.high, abs=1e-10)
    assert hi - lo > 0  # never zero width, also at 0 % and 100 %


@pytest.mark.parametrize(("k", "n"), CASES)
def test_jeffreys_is_the_beta_posterior_quantiles(k, n) -> None:
    lo, hi = jeffreys(k, n, confidence=0.9)
    assert float(lo) == pytest.approx(stats.beta.ppf(0.05, k + 0.5, n - k + 0.5), abs=1e-12)
    assert float(hi) == pytest.approx(stats.beta.ppf(0.95, k + 0.5, n - k + 0.5), abs=1e-12)
    assert hi - lo > 0


def test_vectorised_equals_scalar() -> None:
    k = np.array([0, 3, 9, 10])
    lo, hi = clopper_pearson(k, 10)
    for j, kk in enumerate(k):
        assert (lo[j], hi[j]) == tuple(float(v) for v in clopper_pearson(int(kk), 10))


def _brute_hypergeometric(k, n, big_n, alpha=0.05):
    """Scan every population total T with scipy's pmf summed by hand."""
    ok = []
    for t in range(big_n + 1):
        support = np.arange(0, n + 1)
        pmf = stats.hypergeom.pmf(support, big_n, t, n)
        upper = pmf[support >= k].sum()
        lower = pmf[support <= k].sum()
        ok.append((upper > alpha / 2, lower > alpha / 2))
    ok = np.array(ok)
    return np.flatnonzero(ok[:, 0])[0] / big_n, np.flatnonzero(ok[:, 1])[-1] / big_n


@pytest.mark.parametrize(("k", "n", "big_n"), [(0, 5, 30), (3, 10, 40), (10, 10, 40), (7, 25, 60)])
def test_hypergeometric_interval_brute_force(k, n, big_n) -> None:
    lo, hi = hypergeometric_interval(k, n, big_n)
    blo, bhi = _brute_hypergeometric(k, n, big_n)
    assert float(lo) == pytest.approx(blo, abs=1e-12)
    assert float(hi) == pytest.approx(bhi, abs=1e-12)
    assert k / big_n - 1e-12 <= lo < hi <= (k + big_n - n) / big_n + 1e-12


def test_hypergeometric_covers_every_population_total() -> None:
    """Exact coverage (sum of pmf over covered k) >= 95 % for every T (n = 12 of N = 30)."""
    big_n, n = 30, 12
    ks = np.arange(n + 1)
    lo, hi = hypergeometric_interval(ks, n, big_n)
    for t in range(big_n + 1):
        pmf = stats.hypergeom.pmf(ks, big_n, t, n)
        covered = (lo <= t / big_n + 1e-12) & (t / big_n - 1e-12 <= hi)
        assert pmf[covered].sum() >= 0.95 - 1e-12


def test_hypergeometric_collapses_at_full_census() -> None:
    lo, hi = hypergeometric_interval(17, 40, 40)
    assert float(lo) == float(hi) == pytest.approx(17 / 40)


def test_proportion_interval_wilson_matches_stats() -> None:
    from app.core.estimation.stats import wilson_interval

    ref = wilson_interval(7, 25, n_population=448)
    lo, hi = proportion_interval(7, 25, method="wilson_fpc", n_population=448)
    assert (float(lo), float(hi)) == pytest.approx((ref.ci_low, ref.ci_high), abs=1e-12)


def test_difference_estimator_unbiased_with_wrong_predictions() -> None:
    """Monte Carlo over 20,000 SRS draws: |mean error| < 4 SE of the Monte Carlo mean, while
    the predictions alone are off by 0.15; the variance formula matches the empirical one."""
    rng = np.random.default_rng(3)
    big_n, n, draws = 400, 40, 20_000
    y = (rng.random(big_n) < np.linspace(0.1, 0.9, big_n)).astype(float)
    yhat = np.clip(np.linspace(0.1, 0.9, big_n)[::-1] * 0.6 + 0.25, 0, 1)  # badly wrong
    assert abs(yhat.mean() - y.mean()) > 0.1 or np.corrcoef(y, yhat)[0, 1] < 0
    idx = np.argsort(rng.random((draws, big_n)), axis=1)[:, :n]
    resid = (y - yhat)[idx]
    value, se = difference_estimate(
        resid, np.full(draws, yhat.mean()), np.full(n, n / big_n), big_n
    )
    err = value - y.mean()
    mc_se = err.std(ddof=1) / np.sqrt(draws)
    assert abs(err.mean()) < 4 * mc_se  # detects a bias of ~0.0015 (4 x 0.00037)
    assert np.mean(se**2) == pytest.approx(err.var(), rel=0.05)


def test_difference_estimator_stratified_variance() -> None:
    """Stratified SRS: the formula equals the closed-form sum over strata."""
    big_n = 100
    pi = np.r_[np.full(4, 4 / 40), np.full(6, 6 / 60)]  # strata of 40 and 60, n_h = 4, 6
    e = np.arange(10, dtype=float)[None, :] / 10
    strata = np.r_[np.zeros(4), np.ones(6)]
    value, se = difference_estimate(e, np.zeros(1), pi, big_n, strata=strata)
    var = (
        40**2 * (1 - 4 / 40) * e[0, :4].var(ddof=1) / 4
        + 60**2 * (1 - 6 / 60) * e[0, 4:].var(ddof=1) / 6
    ) / big_n**2
    assert float(se[0]) ** 2 == pytest.approx(var, rel=1e-12)
    assert float(value[0]) == pytest.approx((e[0, :4].sum() * 10 + e[0, 4:].sum() * 10) / big_n)


def test_reference_calibrated_interval_removes_bias() -> None:
    """Simulated biased estimator (est = truth + 0.05 + N(0, 0.02)): calibrated coverage ~95 %."""
    rng = np.random.default_rng(0)
    truth_r = rng.uniform(0.2, 0.6, 400)
    est_r = truth_r + 0.05 + rng.normal(0, 0.02, 400)
    truth = rng.uniform(0.25, 0.55, 2000)
    est = truth + 0.05 + rng.normal(0, 0.02, 2000)
    value, lo, hi, se = reference_calibrated_interval(est, est_r, truth_r)
    cover = np.mean((lo <= truth) & (truth <= hi))
    assert 0.93 <= cover <= 0.975
    assert abs(np.mean(value - truth)) < 0.003
    assert np.median(se) == pytest.approx(0.02, rel=0.15)


@pytest.mark.parametrize("grid_step", [0.001, 0.01, 0.3, 0.0007, 0.25])
def test_reference_grid_runs_from_zero_to_exactly_one(grid_step):
    """The candidate accuracies are 0, step, 2 step, ... below 1, then 1 itself, whatever the step."""
    truth = np.linspace(0.2, 0.8, 40)
    cal = calibrate_references(truth + 0.01, truth, grid_step=grid_step)
    n_below = int(np.ceil(1.0 / grid_step - 1e-9))
    expected = np.append(np.arange(n_below) * grid_step, 1.0)
    np.testing.assert_allclose(cal.grid, expected, rtol=0, atol=1e-12)
    assert cal.grid[0] == 0.0 and cal.grid[-1] == 1.0
    assert np.all(np.diff(cal.grid) > 0)
