"""Tests that kill the surviving mutants of ``app/core/estimation/weighted.py`` (issue 17, ``make mutation``).

Each test asserts values against an independent computation: the Wilson bounds as the roots of
the score-test quadratic, the linearised variance written out item by item, normal quantiles and
CDFs from scipy, exact McNemar from a binomial test, or the exact ``ValueError`` message. Mutants
that cannot change any result are listed with a reason in ``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.weighted import (
    LINEAR_ESTIMATORS,
    PROBABILITY_DESIGNS,
    design_inclusion,
    kish_n_eff,
    kish_wilson_bounds,
    normal_quantile,
    weighted_estimate,
    weighted_paired_comparison,
    weighted_se,
)
from app.core.results import Selection


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


def _wilson_roots(p: float, n_eff: float, z: float) -> tuple[float, float]:
    """Roots in q of ``(p - q)^2 = z^2 q (1 - q) / n_eff`` (the score-test inversion), clipped."""
    c = z * z / n_eff
    roots = np.roots([1.0 + c, -(2.0 * p + c), p * p])
    return max(0.0, float(min(roots.real))), min(1.0, float(max(roots.real)))


def _lin_se(v, w, n_pop):
    """``sqrt(f k/(k-1) sum w^2 (v - v_w)^2) / sum w``, item by item."""
    k = len(v)
    if k < 2:
        return 0.0
    sw = sum(w)
    vw = sum(wi * vi for wi, vi in zip(w, v, strict=True)) / sw
    ss = sum(wi * wi * (vi - vw) ** 2 for wi, vi in zip(w, v, strict=True))
    f = (n_pop - k) / (n_pop - 1)
    return float(np.sqrt(f * ss * k / (k - 1)) / sw)


def test_constants() -> None:
    assert PROBABILITY_DESIGNS == {"random", "subtask_stratified", "confidence_stratified"}
    assert LINEAR_ESTIMATORS == {"mean", "weighted_mean", "horvitz_thompson", "irt"}


# -- normal_quantile --------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0.5, 0.8, 0.95, 0.999])
def test_normal_quantile_matches_scipy(level) -> None:
    assert normal_quantile(level) == pytest.approx(stats.norm.isf((1 - level) / 2), rel=1e-12)


@pytest.mark.parametrize("level", [0.0, 1.0, -0.1, 1.2])
def test_normal_quantile_refuses_levels_outside_0_1(level) -> None:
    with pytest.raises(
        ValueError, match=_exact(f"confidence: expected a level in (0, 1), got {level}")
    ):
        normal_quantile(level)


# -- kish_n_eff -------------------------------------------------------------------------------------
def test_kish_n_eff_values() -> None:
    assert kish_n_eff([0.25] * 4) == pytest.approx(4.0, rel=1e-15)
    assert kish_n_eff([1.0, 3.0]) == pytest.approx(16.0 / 10.0, rel=1e-15)
    assert kish_n_eff([0.0, 2.0, 0.0]) == pytest.approx(1.0, rel=1e-15)  # zero weights allowed
    assert isinstance(kish_n_eff([1.0, 1.0]), float)


@pytest.mark.parametrize("weights", [[], [[0.5, 0.5]], [0.5, -0.1, 0.6], [0.0, 0.0], [-1.0, -2.0]])
def test_kish_n_eff_refuses_bad_weights(weights) -> None:
    message = "weights: expected non-negative weights with a positive sum"
    with pytest.raises(ValueError, match=_exact(message)):
        kish_n_eff(weights)


# -- weighted_estimate ------------------------------------------------------------------------------
@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_weighted_estimate_values(confidence) -> None:
    v = np.array([1.0, 0.0, 1.0, 0.5, 1.0, 0.25])
    w = np.array([0.1, 0.3, 0.05, 0.2, 0.15, 0.2])
    n_pop = 40
    est = weighted_estimate(v, w, n_pop, confidence=confidence)
    value = sum(w * v)
    n_w = w.sum() ** 2 / (w**2).sum()
    f = (n_pop - 6) / (n_pop - 1)
    z = stats.norm.isf((1 - confidence) / 2)
    lo, hi = _wilson_roots(value, n_w / f, z)
    assert est.value == pytest.approx(value, rel=1e-14)
    assert (est.ci_low, est.ci_high) == pytest.approx((lo, hi), rel=1e-10)
    assert est.se == pytest.approx(_lin_se(v, w, n_pop), rel=1e-12)
    assert est.n == 6 and est.n_population == 40
    assert est.method == "wilson_kish_fpc" and est.confidence == confidence


def test_weighted_estimate_default_level_and_unnormalised_weights() -> None:
    """Horvitz-Thompson weights need not sum to 1: se divides by ``sum w``."""
    v = np.array([1.0, 0.0, 1.0, 1.0])
    w = np.array([0.2, 0.2, 0.3, 0.4])  # sums to 1.1
    est = weighted_estimate(v, w, 10)
    assert est.confidence == 0.95
    assert est.value == pytest.approx(0.9, rel=1e-14)
    assert est.se == pytest.approx(_lin_se(v, w, 10), rel=1e-12)
    n_w = 1.1**2 / 0.33
    lo, hi = _wilson_roots(0.9, n_w / (6 / 9), stats.norm.isf(0.025))
    assert (est.ci_low, est.ci_high) == pytest.approx((lo, hi), rel=1e-10)


def test_weighted_estimate_clips_the_value_only_for_the_interval() -> None:
    v = np.array([1.0, 1.0, 1.0])
    w = np.array([0.5, 0.4, 0.3])  # HT weights: value 1.2
    est = weighted_estimate(v, w, 30)
    assert est.value == pytest.approx(1.2, rel=1e-14)
    n_w = 1.2**2 / 0.5
    lo, hi = _wilson_roots(1.0, n_w / (27 / 29), stats.norm.isf(0.025))
    assert hi == 1.0
    assert (est.ci_low, est.ci_high) == pytest.approx((lo, hi), rel=1e-10)
    assert est.se == 0.0


def test_weighted_estimate_one_item_and_census() -> None:
    one = weighted_estimate([0.7], [1.0], 20)
    assert one.se == 0.0 and one.value == pytest.approx(0.7)
    lo, hi = _wilson_roots(0.7, 1.0, stats.norm.isf(0.025))
    assert (one.ci_low, one.ci_high) == pytest.approx((lo, hi), rel=1e-10)
    census = weighted_estimate([1.0, 0.0, 1.0], [0.2, 0.5, 0.3], 3)
    assert census.se == 0.0
    assert census.ci_low == census.ci_high == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("values", "weights", "message"),
    [
        ([[1.0, 0.0]], [[0.5, 0.5]], "weights: expected one weight per value"),
        ([1.0, 0.0], [0.5, 0.3, 0.2], "weights: expected one weight per value"),
        ([], [], "weights: expected one weight per value"),
        ([1.0, np.nan], [0.5, 0.5], "values: expected finite scores in [0, 1]"),
        ([1.0, -0.01], [0.5, 0.5], "values: expected finite scores in [0, 1]"),
        ([1.01, 0.0], [0.5, 0.5], "values: expected finite scores in [0, 1]"),
    ],
)
def test_weighted_estimate_refuses_bad_input(values, weights, message) -> None:
    with pytest.raises(ValueError, match=_exact(message)):
        weighted_estimate(values, weights, 10)


def test_weighted_estimate_accepts_the_ends_of_the_unit_interval() -> None:
    est = weighted_estimate([0.0, 1.0], [0.5, 0.5], 10)
    assert est.value == pytest.approx(0.5)


# -- weighted_paired_comparison ---------------------------------------------------------------------
def test_weighted_paired_comparison_values() -> None:
    base = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1], float)
    idx = np.array([0, 1, 3, 4, 6, 9, 10])
    y = np.array([1, 1, 0, 1, 1, 1, 0], float)
    w = np.array([0.1, 0.2, 0.1, 0.15, 0.15, 0.2, 0.1])
    pc = weighted_paired_comparison(y, base, idx, w)
    d = y - base[idx]
    mean = float(np.sum(w * d) / w.sum())
    se = _lin_se(d, w, 12)
    n10 = int(np.sum((y == 1) & (base[idx] == 0)))
    n01 = int(np.sum((y == 0) & (base[idx] == 1)))
    assert pc.mean_diff == pytest.approx(mean, rel=1e-13)
    assert pc.se == pytest.approx(se, rel=1e-12)
    assert pc.p_better == pytest.approx(stats.norm.cdf(mean / se), rel=1e-12)
    assert (pc.n_new_only, pc.n_baseline_only) == (n10, n01) == (3, 2)
    assert pc.mcnemar_p == pytest.approx(stats.binomtest(3, 5).pvalue, rel=1e-12)
    assert pc.n_shared == 7 and pc.n_population == 12


def test_weighted_paired_comparison_unnormalised_weights_and_one_item() -> None:
    base = np.array([0, 1, 1, 0, 1], float)
    idx = np.array([4, 0, 2])
    y = np.array([1.0, 1.0, 0.0])
    w = np.array([1.0, 2.0, 3.0])
    pc = weighted_paired_comparison(y, base, idx, w)
    d = y - base[idx]  # [0, 1, -1]
    assert pc.mean_diff == pytest.approx(-1.0 / 6.0, rel=1e-13)
    assert pc.se == pytest.approx(_lin_se(d, w, 5), rel=1e-12)
    single = weighted_paired_comparison([1.0], base, [0], [0.5])
    assert single.se == 0.0 and single.mean_diff == 1.0 and single.p_better == 1.0


@pytest.mark.parametrize(
    ("y", "idx", "w", "message"),
    [
        (
            [[1.0, 0.0]],
            [[0, 1]],
            [[0.5, 0.5]],
            "indices: expected one item position and weight per result",
        ),
        (
            [1.0, 0.0],
            [0, 1, 2],
            [0.5, 0.5],
            "indices: expected one item position and weight per result",
        ),
        (
            [1.0, 0.0],
            [0, 1],
            [0.5, 0.3, 0.2],
            "indices: expected one item position and weight per result",
        ),
        ([], [], [], "indices: expected one item position and weight per result"),
        (
            [1.0, 0.0],
            [-1, 1],
            [0.5, 0.5],
            "indices: positions must lie within the baseline's items",
        ),
        ([1.0, 0.0], [0, 5], [0.5, 0.5], "indices: positions must lie within the baseline's items"),
        ([1.0, 0.0], [2, 2], [0.5, 0.5], "indices: positions must be distinct"),
        (
            [1.0, 0.0],
            [0, 1],
            [0.5, -0.5],
            "weights: expected non-negative weights with a positive sum",
        ),
    ],
)
def test_weighted_paired_comparison_refuses_bad_input(y, idx, w, message) -> None:
    base = np.array([1, 0, 1, 1, 0], float)
    with pytest.raises(ValueError, match=_exact(message)):
        weighted_paired_comparison(y, base, idx, w)


def test_weighted_paired_comparison_refuses_a_2d_baseline() -> None:
    message = "indices: positions must lie within the baseline's items"
    with pytest.raises(ValueError, match=_exact(message)):
        weighted_paired_comparison([1.0], np.ones((2, 3)), [0], [1.0])


def test_weighted_paired_comparison_last_item_is_in_range() -> None:
    base = np.array([1, 0, 1, 1, 0], float)
    pc = weighted_paired_comparison([1.0, 1.0], base, [0, 4], [0.5, 0.5])
    assert pc.mean_diff == pytest.approx(0.5)


# -- design_inclusion -------------------------------------------------------------------------------
def _sel(indices, weights, fitted=None, method="subtask_stratified") -> Selection:
    idx = np.asarray(indices)
    return Selection(
        method=method,
        indices=idx,
        weights=np.asarray(weights, float),
        estimator="mean",
        estimate_on="correct",
        signal="correct",
        n_requested=idx.size,
        n_candidates=100,
        seed=0,
        fitted=fitted or {},
    )


def test_design_inclusion_from_weights() -> None:
    """Stratified SRS weights ``N_h / (N n_h)`` give ``pi = n_h / N_h``; groups by equal pi."""
    # strata: 2 of 10 (pi 0.2), 3 of 6 (pi 0.5), 1 of 4 (pi 0.25); N = 20
    w = np.array([10 / 40, 10 / 40, 6 / 60, 6 / 60, 6 / 60, 4 / 20])
    pi, strata = design_inclusion(_sel(np.arange(6), w), 20)
    np.testing.assert_allclose(pi, [0.2, 0.2, 0.5, 0.5, 0.5, 0.25], rtol=1e-12)
    assert strata.tolist() == [0, 0, 2, 2, 2, 1]
    assert strata.ndim == 1


def test_design_inclusion_normalises_weights_and_clips_at_one() -> None:
    w = np.array([2.0, 2.0, 4.0])  # normalised 0.25, 0.25, 0.5; N = 3 -> pi = 4/3 -> 1
    pi, strata = design_inclusion(_sel([0, 1, 2], w), 3)
    np.testing.assert_allclose(pi, [1.0, 1.0, 2.0 / 3.0], rtol=1e-12)
    assert strata.tolist() == [1, 1, 0]


def test_design_inclusion_prefers_stored_probabilities() -> None:
    stored = np.array([0.3, 0.3, 0.7, 0.3 + 4e-13])
    sel = _sel(np.arange(4), [0.25] * 4, {"inclusion_probability": stored})
    pi, strata = design_inclusion(sel, 8)
    np.testing.assert_array_equal(pi, stored)
    assert strata.tolist() == [0, 0, 1, 0]  # equal to 12 decimals: one stratum


# -- weighted_se ------------------------------------------------------------------------------------
def test_weighted_se_matches_the_item_by_item_formula() -> None:
    y = np.array([[1, 0, 1, 1, 0], [0.2, 0.9, 0.4, 0.4, 1.0], [1, 1, 1, 1, 1]], float)
    w = np.array([0.3, 0.1, 0.2, 0.25, 0.35])
    got = weighted_se(y, w, 17)
    want = [_lin_se(row, w, 17) for row in y]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_weighted_se_two_items_and_one_item() -> None:
    y = np.array([[1.0, 0.0], [0.0, 0.0]])
    w = np.array([0.5, 0.5])
    np.testing.assert_allclose(weighted_se(y, w, 9), [_lin_se([1, 0], w, 9), 0.0], rtol=1e-12)
    assert weighted_se(y, w, 9)[0] > 0
    np.testing.assert_array_equal(weighted_se(np.array([[1.0], [0.0]]), np.array([1.0]), 9), [0, 0])


# -- kish_wilson_bounds -----------------------------------------------------------------------------
def test_kish_wilson_bounds_match_weighted_estimate_roots() -> None:
    w = np.array([0.1, 0.3, 0.2, 0.4])
    vals = np.array([0.0, 0.35, 0.8, 1.0, 1.3, -0.2])
    z = stats.norm.isf(0.05)
    lo, hi = kish_wilson_bounds(vals, w, 25, z)
    n_eff = (1.0 / 0.3) / (21 / 24)
    for v, a, b in zip(vals, lo, hi, strict=True):
        want = _wilson_roots(min(1.0, max(0.0, v)), n_eff, z)
        assert (a, b) == pytest.approx(want, rel=1e-10, abs=1e-15)


def test_kish_wilson_bounds_census_is_degenerate() -> None:
    w = np.array([0.5, 0.25, 0.25])
    lo, hi = kish_wilson_bounds(np.array([0.4, 1.2]), w, 3, 1.96)
    np.testing.assert_array_equal(lo, [0.4, 1.0])
    np.testing.assert_array_equal(hi, [0.4, 1.0])


def test_kish_wilson_upper_bound_at_one_is_exactly_one() -> None:
    """At p = 1 the Wilson upper root is 1 exactly; centre + half rounds to 1 + 2^-52 for k = 5
    uniform weights of N = 100 at level 0.8, which the clip removes."""
    z = stats.norm.isf(0.1)
    lo, hi = kish_wilson_bounds(np.array([1.0, 1.0]), np.full(5, 0.2), 100, z)
    np.testing.assert_array_equal(hi, [1.0, 1.0])
    want = _wilson_roots(1.0, 5 / (95 / 99), z)[0]
    np.testing.assert_allclose(lo, [want, want], rtol=1e-12)


def test_design_inclusion_strata_differ_beyond_twelve_decimals() -> None:
    stored = np.array([0.3, 0.3 + 6e-13, 0.3 + 4e-13])
    sel = _sel(np.arange(3), [1 / 3] * 3, {"inclusion_probability": stored})
    _, strata = design_inclusion(sel, 8)
    assert strata.tolist() == [0, 1, 0]


def test_two_items_have_a_standard_error() -> None:
    """k = 2 is the smallest subset with a variance: ``k / (k - 1) = 2``."""
    est = weighted_estimate([0.0, 1.0], [0.25, 0.75], 10)
    assert est.se == pytest.approx(_lin_se([0.0, 1.0], [0.25, 0.75], 10), rel=1e-12)
    assert est.se > 0
    base = np.array([1, 0, 1, 1, 0], float)
    pc = weighted_paired_comparison([1.0, 0.0], base, [1, 2], [0.25, 0.75])
    d = [1.0, -1.0]
    assert pc.se == pytest.approx(_lin_se(d, [0.25, 0.75], 5), rel=1e-12)
    assert pc.se > 0
    assert pc.p_better == pytest.approx(stats.norm.cdf(-0.5 / pc.se), rel=1e-12)


def test_weighted_estimate_population_is_an_int() -> None:
    est = weighted_estimate([1.0, 0.0, 1.0], [0.2, 0.3, 0.5], 12.0)
    assert type(est.n_population) is int and est.n_population == 12
    assert type(est.n) is int and est.n == 3


def test_one_item_has_exactly_zero_se_even_when_the_mean_rounds() -> None:
    """k = 1: w v / w rounds to 0.6999999999999998 for w = 0.1, v = 0.7, so only the
    ``k / (k - 1) -> 0`` factor makes the SE exactly 0."""
    est = weighted_estimate([0.7], [0.1], 20)
    assert est.se == 0.0
    assert est.value == pytest.approx(0.07)


def test_design_inclusion_returns_float_probabilities() -> None:
    sel = _sel(np.arange(2), [0.5, 0.5], {"inclusion_probability": np.array([1, 1])})
    pi, strata = design_inclusion(sel, 2)
    assert pi.dtype == np.float64
    np.testing.assert_array_equal(pi, [1.0, 1.0])
    assert strata.tolist() == [0, 0]
