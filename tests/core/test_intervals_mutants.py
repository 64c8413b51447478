"""Tests that kill the surviving mutants of ``app/core/estimation/intervals.py`` (issue 17, ``make mutation``).

Each test asserts values against an independent computation: scipy's exact binomial interval and
Beta / Student quantiles, the hypergeometric interval by scanning every population total with
summed pmfs, the Wilson bounds as roots of the score-test quadratic, the difference estimator's
variance written out stratum by stratum, and the reference calibration recomputed with plain loops
over the grid. Mutants that cannot change any result are listed with a reason in
``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.intervals import (
    SMALL_N_METHODS,
    ReferenceCalibration,
    calibrate_references,
    clopper_pearson,
    difference_estimate,
    hypergeometric_interval,
    jeffreys,
    proportion_interval,
    reference_calibrated_interval,
)
from tests.support.calibration_oracle import apply_oracle as _apply_oracle
from tests.support.calibration_oracle import calibration_oracle as _calibration_oracle


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


COUNTS_MESSAGE = "successes: expected integer counts 0 <= successes <= n, n >= 1"


# -- levels and counts ------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [clopper_pearson, jeffreys])
@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1])
def test_levels_outside_0_1_are_refused(fn, level) -> None:
    with pytest.raises(
        ValueError, match=_exact(f"confidence: expected a level in (0, 1), got {level}")
    ):
        fn(3, 10, confidence=level)


@pytest.mark.parametrize(("k", "n"), [(1, 0), (-1, 5), (6, 5), (2.5, 5), ([1, 6], 5), (0, 0.5)])
@pytest.mark.parametrize("method", SMALL_N_METHODS)
def test_counts_are_validated(k, n, method) -> None:
    with pytest.raises(ValueError, match=_exact(COUNTS_MESSAGE)):
        proportion_interval(k, n, method=method, n_population=40)


def test_boundary_counts_are_accepted() -> None:
    """``k = 0``, ``k = n`` and ``n = 1`` are valid counts."""
    lo, hi = clopper_pearson([0, 1], 1)
    np.testing.assert_allclose(lo, [0.0, 0.025], rtol=1e-12)
    np.testing.assert_allclose(hi, [0.975, 1.0], rtol=1e-12)


def test_small_n_methods() -> None:
    assert SMALL_N_METHODS == (
        "wilson_fpc",
        "clopper_pearson",
        "jeffreys",
        "hypergeometric",
        "jeffreys_fpc",
    )


# -- Clopper-Pearson and Jeffreys at other levels -----------------------------------------------------
@pytest.mark.parametrize(("k", "n"), [(0, 7), (1, 7), (3, 7), (6, 7), (7, 7), (12, 40)])
@pytest.mark.parametrize("level", [0.8, 0.99])
def test_clopper_pearson_level_matches_scipy(k, n, level) -> None:
    lo, hi = clopper_pearson(k, n, confidence=level)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    assert float(lo) == pytest.approx(ci.low, abs=1e-12)
    assert float(hi) == pytest.approx(ci.high, abs=1e-12)
    via = proportion_interval(k, n, method="clopper_pearson", confidence=level)
    assert (float(via[0]), float(via[1])) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_clopper_pearson_default_level() -> None:
    lo, hi = clopper_pearson(np.array([0, 2, 5]), np.array([5, 5, 5]))
    for j, k in enumerate((0, 2, 5)):
        ci = stats.binomtest(k, 5).proportion_ci(confidence_level=0.95, method="exact")
        assert (lo[j], hi[j]) == pytest.approx((ci.low, ci.high), abs=1e-12)


@pytest.mark.parametrize(("k", "n"), [(0, 7), (3, 7), (7, 7)])
def test_jeffreys_level_and_dispatch(k, n) -> None:
    for level, via in ((0.95, None), (0.7, "proportion_interval")):
        if via is None:
            lo, hi = jeffreys(k, n)
        else:
            lo, hi = proportion_interval(k, n, method="jeffreys", confidence=level)
        a = 1 - level
        assert float(lo) == pytest.approx(stats.beta.ppf(a / 2, k + 0.5, n - k + 0.5), abs=1e-12)
        assert float(hi) == pytest.approx(stats.beta.isf(a / 2, k + 0.5, n - k + 0.5), abs=1e-12)


# -- hypergeometric ---------------------------------------------------------------------------------
def _scan(k, n, big_n, level):
    a = 1 - level
    lo = hi = None
    for t in range(big_n + 1):
        support = np.arange(0, n + 1)
        pmf = stats.hypergeom.pmf(support, big_n, t, n)
        if lo is None and pmf[support >= k].sum() > a / 2:
            lo = t
        if pmf[support <= k].sum() > a / 2:
            hi = t
    return lo / big_n, hi / big_n


@pytest.mark.parametrize(("k", "n", "big_n"), [(0, 4, 12), (1, 4, 12), (4, 4, 12), (5, 9, 20)])
def test_hypergeometric_level_and_dispatch(k, n, big_n) -> None:
    want = _scan(k, n, big_n, 0.8)
    got = proportion_interval(k, n, method="hypergeometric", n_population=big_n, confidence=0.8)
    assert (float(got[0]), float(got[1])) == pytest.approx(want, abs=1e-12)


def test_hypergeometric_keeps_the_input_shape() -> None:
    k = np.array([[0, 2], [3, 4]])
    lo, hi = hypergeometric_interval(k, 4, 10)
    assert lo.shape == hi.shape == (2, 2)
    for (i, j), kk in np.ndenumerate(k):
        assert (lo[i, j], hi[i, j]) == pytest.approx(_scan(int(kk), 4, 10, 0.95), abs=1e-12)


def test_hypergeometric_per_model_sample_sizes() -> None:
    lo, hi = hypergeometric_interval([1, 3], [3, 6], 9)
    for j, (kk, nn) in enumerate(((1, 3), (3, 6))):
        assert (lo[j], hi[j]) == pytest.approx(_scan(kk, nn, 9, 0.95), abs=1e-12)


def test_hypergeometric_sample_may_equal_the_population_not_exceed_it() -> None:
    lo, hi = hypergeometric_interval(3, 6, 6)
    assert float(lo) == float(hi) == 0.5
    with pytest.raises(ValueError, match=_exact("n_population: 5 is smaller than the sample size")):
        hypergeometric_interval(3, 6, 5)


def test_hypergeometric_needs_n_population() -> None:
    message = "n_population: the hypergeometric interval needs N"
    with pytest.raises(ValueError, match=_exact(message)):
        proportion_interval(3, 6, method="hypergeometric")


def test_unknown_method_is_refused() -> None:
    message = f"interval: expected one of {SMALL_N_METHODS}, got 'wald'"
    with pytest.raises(ValueError, match=_exact(message)):
        proportion_interval(3, 6, method="wald")


# -- Wilson (default method) ------------------------------------------------------------------------
def _wilson_roots(k, n, big_n, z):
    f = 1.0 if big_n is None else (big_n - n) / (big_n - 1)
    c = z * z * f / n
    p = k / n
    roots = np.roots([1.0 + c, -(2.0 * p + c), p * p])
    return max(0.0, float(min(roots.real))), min(1.0, float(max(roots.real)))


@pytest.mark.parametrize(("k", "n"), [(0, 9), (4, 9), (9, 9)])
@pytest.mark.parametrize("big_n", [None, 10, 30])
def test_wilson_fpc_is_the_default_and_inverts_the_score_test(k, n, big_n) -> None:
    lo, hi = proportion_interval(k, n, n_population=big_n, confidence=0.9)
    want = _wilson_roots(k, n, big_n, stats.norm.isf(0.05))
    assert (float(lo), float(hi)) == pytest.approx(want, abs=1e-12)
    lo95, hi95 = proportion_interval(k, n, n_population=big_n)
    want95 = _wilson_roots(k, n, big_n, stats.norm.isf(0.025))
    assert (float(lo95), float(hi95)) == pytest.approx(want95, abs=1e-12)


def test_wilson_fpc_census_collapses_to_the_proportion() -> None:
    lo, hi = proportion_interval([0, 3, 7], 7, n_population=7)
    np.testing.assert_array_equal(lo, np.array([0, 3, 7]) / 7)
    np.testing.assert_array_equal(hi, np.array([0, 3, 7]) / 7)
    lo1, hi1 = proportion_interval(1, 1, n_population=1)
    assert float(lo1) == float(hi1) == 1.0


def test_wilson_fpc_population_of_two() -> None:
    """N = 2, n = 1: f = 1/1, the plain Wilson interval at n = 1."""
    lo, hi = proportion_interval(1, 1, n_population=2)
    assert (float(lo), float(hi)) == pytest.approx(
        _wilson_roots(1, 1, None, stats.norm.isf(0.025)), abs=1e-12
    )


# -- difference_estimate ----------------------------------------------------------------------------
def _difference_oracle(e, pred, pi, big_n, strata=None):
    e = np.atleast_2d(np.asarray(e, float))
    labels = np.zeros(e.shape[1]) if strata is None else np.asarray(strata)
    values, ses = [], []
    for i in range(e.shape[0]):
        value = pred[i] + sum(e[i, j] / pi[j] for j in range(e.shape[1])) / big_n
        var = 0.0
        for lab in np.unique(labels):
            members = np.flatnonzero(labels == lab)
            n_h = members.size
            big_n_h = sum(1.0 / pi[j] for j in members)
            if n_h > 1:
                s2 = np.var(e[i, members], ddof=1)
            elif e.shape[1] > 1:
                s2 = np.var(e[i], ddof=1)
            else:
                s2 = 0.0
            var += big_n_h**2 * min(1.0, max(0.0, 1.0 - n_h / big_n_h)) * s2 / n_h
        values.append(value)
        ses.append(np.sqrt(var) / big_n)
    return np.array(values), np.array(ses)


def test_difference_estimate_srs_two_models() -> None:
    e = np.array([[0.3, -0.2, 0.5, 0.1, -0.4], [0.0, 0.2, 0.2, -0.1, 0.6]])
    pred = np.array([0.4, 0.55])
    pi = np.full(5, 5 / 30)
    value, se = difference_estimate(e, pred, pi, 30)
    want_v, want_se = _difference_oracle(e, pred, pi, 30)
    np.testing.assert_allclose(value, want_v, rtol=1e-13)
    np.testing.assert_allclose(se, want_se, rtol=1e-12)
    # the SRS closed form (1 - n/N) s^2 / n
    np.testing.assert_allclose(se**2, (1 - 5 / 30) * e.var(axis=1, ddof=1) / 5, rtol=1e-12)


def test_difference_estimate_single_item_strata_borrow_the_pooled_variance() -> None:
    e = np.array([[0.3, -0.2, 0.5, 0.1, -0.4, 0.25]])
    strata = np.array([7, 7, 3, 5, 5, 9])  # strata 3 and 9 have one sampled item each
    pi = np.array([0.2, 0.2, 0.5, 0.1, 0.1, 0.25])
    value, se = difference_estimate(e, [0.5], pi, 40, strata=strata)
    want_v, want_se = _difference_oracle(e, [0.5], pi, 40, strata)
    np.testing.assert_allclose(value, want_v, rtol=1e-13)
    np.testing.assert_allclose(se, want_se, rtol=1e-12)


def test_difference_estimate_one_item_and_2d_strata() -> None:
    value, se = difference_estimate([[0.4]], [0.3], [0.25], 8)
    assert value[0] == pytest.approx(0.3 + 0.4 / 0.25 / 8, rel=1e-14)
    assert se[0] == 0.0
    e = np.array([[0.1, 0.4, -0.3, 0.2]])
    pi = np.full(4, 0.5)
    value, se = difference_estimate(e, [0.0], pi, 8, strata=np.array([[0, 0, 1, 1]]).T)
    want_v, want_se = _difference_oracle(e, [0.0], pi, 8, [0, 0, 1, 1])
    np.testing.assert_allclose(value, want_v, rtol=1e-13)
    np.testing.assert_allclose(se, want_se, rtol=1e-12)


def test_difference_estimate_census_has_no_variance() -> None:
    e = np.array([[0.1, 0.4, -0.3, 0.2]])
    value, se = difference_estimate(e, [0.2], np.ones(4), 4)
    assert se[0] == 0.0
    assert value[0] == pytest.approx(0.2 + 0.4 / 4, rel=1e-14)


def test_difference_estimate_over_sampled_stratum_is_clipped_at_zero() -> None:
    """A census stratum (pi = 1, so N_h = n_h) adds no variance; the other one does."""
    e = np.array([[0.1, 0.4, -0.3, 0.2]])
    pi = np.array([1.0, 1.0, 0.5, 0.5])
    strata = np.array([0, 0, 1, 1])
    _, se = difference_estimate(e, [0.0], pi, 6, strata=strata)
    want = np.sqrt(4**2 * 0.5 * np.var([-0.3, 0.2], ddof=1) / 2) / 6
    assert se[0] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(
    ("e", "pi"),
    [
        ([[0.1, 0.2]], [0.5, 0.5, 0.5]),
        ([[0.1, 0.2]], [0.5, 0.0]),
        ([[0.1, 0.2]], [0.5, 1.0001]),
        ([[0.1, 0.2]], [-0.5, 0.5]),
    ],
)
def test_difference_estimate_refuses_bad_probabilities(e, pi) -> None:
    message = "inclusion_probability: one probability in (0, 1] per sampled item"
    with pytest.raises(ValueError, match=_exact(message)):
        difference_estimate(e, [0.0], pi, 10)


def test_difference_estimate_accepts_probability_one() -> None:
    value, se = difference_estimate([[0.1, 0.2]], [0.0], [1.0, 1.0], 2)
    assert se[0] == 0.0 and value[0] == pytest.approx(0.15)


# -- reference calibration --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def refs():
    rng = np.random.default_rng(41)
    truth = rng.uniform(0.15, 0.8, 40)
    est = truth + 0.04 * (truth - 0.5) + rng.normal(0, 0.03, 40)
    return est, truth


def test_calibrate_references_defaults(refs) -> None:
    est, truth = refs
    cal = calibrate_references(est, truth)
    grid, b, s, q = _calibration_oracle(est, truth, 0.95, 1.0)
    assert isinstance(cal, ReferenceCalibration)
    np.testing.assert_allclose(cal.grid, grid, atol=1e-12)
    np.testing.assert_allclose(cal.bias, b, atol=1e-12)
    np.testing.assert_allclose(cal.spread, s, rtol=1e-10)
    np.testing.assert_allclose(cal.quantile, q, rtol=1e-10)
    assert (cal.grid_step, cal.confidence, cal.inflation) == (0.001, 0.95, 1.0)
    for arr in (cal.grid, cal.bias, cal.spread, cal.quantile):
        assert not arr.flags.writeable


def test_calibrate_references_parameters(refs) -> None:
    est, truth = refs
    kw = dict(confidence=0.8, inflation=1.4, bandwidth=0.03, grid_step=0.01, min_neighbours=12)
    cal = calibrate_references(est, truth, **kw)
    grid, b, s, q = _calibration_oracle(est, truth, 0.8, 1.4, 0.03, 0.01, 12)
    np.testing.assert_allclose(cal.grid, grid, atol=1e-12)
    np.testing.assert_allclose(cal.bias, b, atol=1e-12)
    np.testing.assert_allclose(cal.spread, s, rtol=1e-10)
    np.testing.assert_allclose(cal.quantile, q, rtol=1e-10)
    assert (cal.grid_step, cal.confidence, cal.inflation) == (0.01, 0.8, 1.4)


def test_calibrate_references_few_models_and_small_bandwidth_floor() -> None:
    """Three references (fewer than min_neighbours: the farthest sets the width) with nearly equal
    truths (Silverman's bandwidth below the 0.01 floor)."""
    truth = np.array([0.5, 0.502, 0.503])
    est = np.array([0.52, 0.5, 0.51])
    cal = calibrate_references(est, truth, grid_step=0.05)
    grid, b, s, q = _calibration_oracle(est, truth, 0.95, 1.0, step=0.05)
    np.testing.assert_allclose(cal.grid, grid, atol=1e-12)
    np.testing.assert_allclose(cal.bias, b, atol=1e-12)
    np.testing.assert_allclose(cal.spread, s, rtol=1e-10)
    np.testing.assert_allclose(cal.quantile, q, rtol=1e-10)


def test_calibrate_references_zero_spread_is_floored() -> None:
    truth = np.array([0.2, 0.4, 0.6, 0.8])
    cal = calibrate_references(truth + 0.05, truth, grid_step=0.1)
    np.testing.assert_allclose(cal.spread, 1e-6, rtol=1e-9)
    np.testing.assert_allclose(cal.bias[:-1], 0.05, atol=1e-12)
    assert cal.bias[-1] == 0.0  # at accuracy 1 an error of +0.05 is impossible: clipped to 0


def test_calibrate_references_flattens_and_validates() -> None:
    truth = np.array([[0.2, 0.4, 0.6]])
    cal = calibrate_references(truth + 0.01, truth.T, grid_step=0.1)
    np.testing.assert_allclose(cal.bias[:-1], 0.01, atol=1e-12)
    assert cal.bias[-1] == 0.0  # at accuracy 1 no estimate in [0, 1] errs upwards
    message = "reference_estimates: expected >= 3 reference models aligned with truth"
    with pytest.raises(ValueError, match=_exact(message)):
        calibrate_references([0.1, 0.2], [0.1, 0.2])
    with pytest.raises(ValueError, match=_exact(message)):
        calibrate_references([0.1, 0.2, 0.3], [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match=_exact("confidence: expected a level in (0, 1), got 1.0")):
        calibrate_references([0.1, 0.2, 0.3], [0.1, 0.2, 0.3], confidence=1.0)


def test_reference_calibrated_interval_inverts_the_error_law(refs) -> None:
    est, truth = refs
    scored = np.array([0.0, 0.12, 0.33, 0.5, 0.71, 0.97, 1.0])
    kw = dict(confidence=0.9, inflation=1.2, bandwidth=0.05, grid_step=0.005, min_neighbours=10)
    got = reference_calibrated_interval(scored, est, truth, **kw)
    grid, b, s, q = _calibration_oracle(est, truth, 0.9, 1.2, 0.05, 0.005, 10)
    want = _apply_oracle(scored, grid, b, s, q, 0.005)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-12)


def test_reference_calibrated_interval_defaults(refs) -> None:
    est, truth = refs
    scored = np.array([[0.3, 0.45], [0.6, 0.8]])
    got = reference_calibrated_interval(scored, est, truth)
    grid, b, s, q = _calibration_oracle(est, truth, 0.95, 1.0)
    want = _apply_oracle(scored, grid, b, s, q, 0.001)
    assert got[0].shape == (4,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-12)


def test_apply_without_any_consistent_accuracy_falls_back_to_the_closest() -> None:
    """A hand-made error law: no grid point within q spreads of the estimate."""
    grid = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    cal = ReferenceCalibration(
        grid=grid,
        bias=np.zeros(5),
        spread=np.full(5, 0.01),
        quantile=np.full(5, 2.0),
        grid_step=0.25,
        confidence=0.95,
        inflation=1.0,
    )
    value, lo, hi, se = cal.apply([0.6, 0.51, 0.26, -0.3, 1.4])
    np.testing.assert_allclose(value, [0.5, 0.5, 0.25, 0.0, 1.0])
    np.testing.assert_allclose(lo, [0.25, 0.25, 0.0, 0.0, 0.75])
    np.testing.assert_allclose(hi, [0.75, 0.75, 0.5, 0.25, 1.0])
    np.testing.assert_allclose(se, 0.01)


def test_apply_uses_each_grid_points_bias_spread_and_quantile() -> None:
    grid = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    cal = ReferenceCalibration(
        grid=grid,
        bias=np.array([0.05, 0.04, 0.03, 0.02, 0.01, 0.0]),
        spread=np.array([0.1, 0.1, 0.05, 0.05, 0.2, 0.2]),
        quantile=np.array([1.0, 1.5, 2.0, 2.0, 1.0, 1.0]),
        grid_step=0.2,
        confidence=0.9,
        inflation=1.0,
    )
    scored = np.array([0.05, 0.33, 0.5, 0.9, 0.62])
    got = cal.apply(scored)
    want = _apply_oracle(scored, grid, cal.bias, cal.spread, cal.quantile, 0.2)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-12)


def test_hypergeometric_tail_equal_to_alpha_half_is_rejected() -> None:
    """One draw from N = 4 at level 0.5: ``P(X >= 1; T) = T / 4`` and ``P(X <= 0; T) = 1 - T / 4``
    hit ``alpha / 2 = 1/4`` exactly at T = 1 and T = 3; a tail equal to alpha/2 rejects T."""
    lo, hi = hypergeometric_interval(1, 1, 4, confidence=0.5)
    assert (float(lo), float(hi)) == (0.5, 1.0)
    lo, hi = hypergeometric_interval(0, 1, 4, confidence=0.5)
    assert (float(lo), float(hi)) == (0.0, 0.5)


def test_wilson_without_population_returns_float_arrays() -> None:
    lo, hi = proportion_interval(np.array([0, 3, 7]), 7)
    assert lo.dtype == np.float64 and hi.dtype == np.float64
    want = [_wilson_roots(k, 7, None, stats.norm.isf(0.025)) for k in (0, 3, 7)]
    np.testing.assert_allclose(np.c_[lo, hi], want, atol=1e-12)


def test_wilson_census_does_not_warn() -> None:
    """f = 0 divides by zero inside; the interval is the proportion, without a RuntimeWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = proportion_interval(np.array([2, 5]), 5, n_population=5)
    np.testing.assert_array_equal(lo, [0.4, 1.0])
    np.testing.assert_array_equal(hi, [0.4, 1.0])


def test_wilson_upper_bound_at_all_successes_is_exactly_one() -> None:
    """At k = n the Wilson upper root is 1 exactly; in floating point centre + half can round to
    1 + 2^-52 (n = 20, 24, 33 at level 0.8), which the clip removes."""
    lo, hi = proportion_interval(np.array([20, 24, 33]), np.array([20, 24, 33]), confidence=0.8)
    np.testing.assert_array_equal(hi, [1.0, 1.0, 1.0])
    assert np.all(lo < 1.0)


def test_calibrate_references_default_bandwidth_binds_with_many_references() -> None:
    """200 references and min_neighbours = 5: inside their range Silverman's
    ``1.06 sd(truth) r^(-1/5)`` (sd with ddof = 1) is wider than the 5th-nearest distance."""
    rng = np.random.default_rng(5)
    truth = rng.uniform(0.2, 0.8, 200)
    est = truth + 0.1 * (truth - 0.5) ** 2 + rng.normal(0, 0.02, 200)
    cal = calibrate_references(est, truth, grid_step=0.01, min_neighbours=5)
    grid, b, s, q = _calibration_oracle(est, truth, 0.95, 1.0, step=0.01, min_nb=5)
    h = 1.06 * np.std(truth, ddof=1) * 200 ** (-0.2)
    kth = np.sort(np.abs(0.5 - truth))[4]
    assert kth < h  # the default bandwidth is the one in force at a = 0.5
    np.testing.assert_allclose(cal.grid, grid, atol=1e-12)
    np.testing.assert_allclose(cal.bias, b, atol=1e-12)
    np.testing.assert_allclose(cal.spread, s, rtol=1e-10)
    np.testing.assert_allclose(cal.quantile, q, rtol=1e-10)


@pytest.mark.parametrize("step", [0.38, 0.3, 0.07, 0.001])
def test_calibration_grid_reaches_every_accuracy_within_half_a_step(step) -> None:
    """Every accuracy in [0, 1] lies within ``grid_step / 2`` of a candidate, also for steps
    that do not divide 1 (0.38: candidates up to 0.76 would leave 1.0 uncovered; the last
    candidate is 1.0 itself)."""
    truth = np.array([0.2, 0.4, 0.6, 0.8])
    cal = calibrate_references(truth + 0.01, truth, grid_step=step)
    assert cal.grid[0] == 0.0 and cal.grid[-1] == 1.0  # never a candidate above 1
    np.testing.assert_allclose(np.diff(cal.grid)[:-1], step, rtol=1e-9)
    assert 0 < cal.grid[-1] - cal.grid[-2] <= step + 1e-12
    accs = np.linspace(0.0, 1.0, 1001)
    gap = np.min(np.abs(accs[:, None] - cal.grid[None, :]), axis=1)
    assert gap.max() <= step / 2 + 1e-12


def test_calibrate_references_narrow_kernel_with_fewer_than_two_effective_models() -> None:
    """bandwidth 0.004 and min_neighbours = 1: between two close references the kernel has
    ``1 < n_eff < 2``, where the small-sample factor ``n_eff / (n_eff - 1)`` is large."""
    truth = np.array([0.2, 0.207, 0.5, 0.8, 0.81])
    est = truth + np.array([0.01, -0.02, 0.0, 0.03, -0.01])
    kw = dict(bandwidth=0.004, grid_step=0.001, min_neighbours=1)
    cal = calibrate_references(est, truth, **kw)
    grid, b, s, q = _calibration_oracle(est, truth, 0.95, 1.0, 0.004, 0.001, 1)
    np.testing.assert_allclose(cal.bias, b, atol=1e-12)
    # far from every reference n_eff - 1 is a difference of nearly equal numbers: rtol 1e-6
    np.testing.assert_allclose(cal.spread, s, rtol=1e-6)
    np.testing.assert_allclose(cal.quantile, q, rtol=1e-6)
    # at a = 0.2035, between the two close references, 1 < n_eff <= 2
    j = int(np.argmin(np.abs(grid - 0.2035)))
    assert (
        1.0
        < (np.sum(np.exp(-0.5 * ((grid[j] - truth) / 0.004) ** 2)) ** 2)
        / np.sum(np.exp(-(((grid[j] - truth) / 0.004) ** 2)))
        <= 2.0
    )


def test_difference_estimate_pooled_variance_is_per_model() -> None:
    """Single-item strata borrow each model's own pooled variance (also with only two items)."""
    e = np.array([[0.3, -0.2, 0.5, 0.1, -0.4, 0.25], [0.0, 0.9, -0.6, 0.2, 0.2, -0.1]])
    strata = np.array([7, 7, 3, 5, 5, 9])
    pi = np.array([0.2, 0.2, 0.5, 0.1, 0.1, 0.25])
    value, se = difference_estimate(e, [0.5, 0.4], pi, 40, strata=strata)
    want_v, want_se = _difference_oracle(e, [0.5, 0.4], pi, 40, strata)
    np.testing.assert_allclose(value, want_v, rtol=1e-13)
    np.testing.assert_allclose(se, want_se, rtol=1e-12)
    two = np.array([[0.3, -0.1], [0.6, 0.6]])
    value, se = difference_estimate(two, [0.2, 0.3], [0.25, 0.5], 6, strata=[0, 1])
    want_v, want_se = _difference_oracle(two, [0.2, 0.3], [0.25, 0.5], 6, [0, 1])
    np.testing.assert_allclose(se, want_se, rtol=1e-12)
    assert se[0] > 0 and se[1] == 0.0
