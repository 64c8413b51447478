"""Tests that kill the surviving mutants of ``app/core/scoring/score_models.py`` (issue 17, ``make mutation``).

Small hand-built selections reach every branch of :func:`score_models` in milliseconds. Each test
asserts values against an independent computation: scipy's exact binomial, Beta, Student and
hypergeometric quantiles, Wilson bounds as roots of the score-test quadratic, the stratified
variance written out stratum by stratum, the reference calibration recomputed with loops over
the grid, a one-dimensional IRT ability solved with ``brentq``, and the subset size for a gap by
summing the multivariate hypergeometric pmf. Mutants that cannot change any result are listed with
a reason in ``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import re
from math import comb

import numpy as np
import pytest
from scipy import optimize, stats

from app.core.estimation.bounded import betting_interval
from app.core.estimation.intervals import ReferenceCalibration
from app.core.results import Selection
from app.core.scoring.reference import model_assisted
from app.core.scoring.score_models import (
    DEFAULT_SMALL_N,
    MEASURED_CAVEATS,
    score_models,
    size_needed_for_gap,
)
from tests.support.calibration_oracle import apply_oracle as _apply_oracle
from tests.support.calibration_oracle import calibration_oracle as _calibration_oracle

NOT_CALIBRATED = "not a probability sample: interval not calibrated (give reference models)"


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


def _sel(method, indices, weights=None, estimator="mean", fitted=None) -> Selection:
    idx = np.asarray(indices, dtype=np.int64)
    w = np.full(idx.size, 1.0 / idx.size) if weights is None else np.asarray(weights, float)
    return Selection(
        method=method,
        indices=idx,
        weights=w,
        estimator=estimator,
        estimate_on="correct",
        signal="correct",
        n_requested=idx.size,
        n_candidates=100,
        seed=0,
        fitted=fitted or {},
    )


def _wilson(p, n_eff, z):
    """Roots in q of ``(p - q)^2 = z^2 q (1 - q) / n_eff``, clipped to [0, 1]."""
    c = z * z / n_eff
    roots = np.roots([1.0 + c, -(2.0 * p + c), p * p])
    return max(0.0, float(min(roots.real))), min(1.0, float(max(roots.real)))


def _z(level):
    return stats.norm.isf((1 - level) / 2)


# -- size_needed_for_gap ----------------------------------------------------------------------------
def _p_order(h, lw, big_n, n):
    """P(more of the h items than of the lw items in a uniform n-subset), by summing the pmf."""
    rest = big_n - h - lw
    total = 0
    for a in range(min(h, n) + 1):
        for b in range(min(lw, n - a) + 1):
            if a > b and n - a - b <= rest:
                total += comb(h, a) * comb(lw, b) * comb(rest, n - a - b)
    return total / comb(big_n, n)


def _size_oracle(n10, n01, n_shared, big_n, prob):
    hi, lo = max(n10, n01), min(n10, n01)
    s = big_n / n_shared
    h = min(big_n, round(hi * s))
    lw = min(big_n - h, round(lo * s))
    for n in range(1, big_n + 1):
        if _p_order(h, lw, big_n, n) >= prob:
            return n
    return big_n


@pytest.mark.parametrize(
    ("n10", "n01", "n_shared", "big_n", "prob"),
    [
        (6, 2, 20, 40, 0.8),
        (2, 6, 20, 40, 0.8),  # the order of the counts does not matter
        (3, 1, 10, 30, 0.7),
        (5, 0, 16, 16, 0.9),
        (9, 4, 25, 60, 0.8),
        (1, 0, 3, 7, 0.5),
        (2, 1, 12, 12, 0.95),
        (5, 1, 6, 9, 0.8),  # round(7.5) + round(1.5) = 10 > N: the other count is capped at N - h
        (9, 5, 14, 21, 0.7),
        (1, 0, 8, 8, 0.99),  # reached only at n = N, the last grid point
        (2, 0, 9, 30, 0.97),
    ],
)
def test_size_needed_for_gap_matches_a_pmf_sum(n10, n01, n_shared, big_n, prob) -> None:
    assert size_needed_for_gap(n10, n01, n_shared, big_n, prob) == _size_oracle(
        n10, n01, n_shared, big_n, prob
    )


def test_size_needed_for_gap_default_probability_is_0_8() -> None:
    assert size_needed_for_gap(7, 3, 30, 50) == _size_oracle(7, 3, 30, 50, 0.8)
    assert size_needed_for_gap(7, 3, 30, 50) != _size_oracle(7, 3, 30, 50, 0.9)


def test_size_needed_for_gap_saturated_counts() -> None:
    """All shared items discordant one way: the scaled count is capped at N."""
    assert size_needed_for_gap(4, 0, 4, 9, 0.8) == 1
    assert size_needed_for_gap(3, 1, 4, 9, 0.8) == _size_oracle(3, 1, 4, 9, 0.8)


def test_size_needed_for_gap_equal_counts_is_none() -> None:
    assert size_needed_for_gap(0, 0, 5, 10) is None
    assert size_needed_for_gap(3, 3, 8, 10) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 0, 0, 10), "n_shared: expected 1 <= n_shared <= n_population"),
        ((0, 0, 11, 10), "n_shared: expected 1 <= n_shared <= n_population"),
        ((-1, 0, 5, 10), "n10: discordant counts must fit in n_shared"),
        ((6, 0, 5, 10), "n10: discordant counts must fit in n_shared"),
        ((0, -1, 5, 10), "n10: discordant counts must fit in n_shared"),
        ((0, 6, 5, 10), "n10: discordant counts must fit in n_shared"),
        ((3, 3, 5, 10), "n10: discordant counts must fit in n_shared"),
    ],
)
def test_size_needed_for_gap_validation(args, message) -> None:
    with pytest.raises(ValueError, match=_exact(message)):
        size_needed_for_gap(*args)


def test_size_needed_for_gap_boundary_counts_are_valid() -> None:
    assert size_needed_for_gap(5, 0, 5, 5) == 1
    assert size_needed_for_gap(0, 5, 5, 5) == 1
    assert size_needed_for_gap(1, 1, 1 + 1, 2) is None  # n10 + n01 = n_shared, n_shared = N


# -- score_models: input checks ---------------------------------------------------------------------
def test_score_models_refuses_bad_shapes_and_options() -> None:
    sel = _sel("random", [0, 1, 2])
    with pytest.raises(
        ValueError, match=_exact("correct: expected shape (n_models, 3), got (2, 4)")
    ):
        score_models(sel, np.zeros((2, 4)), 10)
    with pytest.raises(
        ValueError, match=_exact("correct: expected shape (n_models, 3), got (1, 1, 3)")
    ):
        score_models(sel, np.zeros((1, 1, 3)), 10)
    message = (
        "small_n: expected one of ('wilson_fpc', 'clopper_pearson', 'jeffreys', "
        "'hypergeometric', 'jeffreys_fpc'), got 'wald'"
    )
    with pytest.raises(ValueError, match=_exact(message)):
        score_models(sel, np.zeros((1, 3)), 10, small_n="wald")
    message = "reference_correct: expected shape (n_models, 10)"
    with pytest.raises(ValueError, match=_exact(message)):
        score_models(sel, np.zeros((1, 3)), 10, reference_correct=np.zeros((20, 9)))
    with pytest.raises(ValueError, match=_exact(message)):
        score_models(sel, np.zeros((1, 3)), 10, reference_correct=np.zeros(10))
    with pytest.raises(ValueError, match="confidence: expected a level in"):
        score_models(sel, np.zeros((1, 3)), 10, level=1.0)


# -- probability designs ----------------------------------------------------------------------------
Y01 = np.array(
    [
        [1, 0, 1, 1, 0, 1, 0, 0],
        [1, 1, 1, 1, 1, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0, 0, 0],
    ],
    float,
)


def _small_n_oracle(method, s, k, big_n, level):
    if method == "clopper_pearson":
        ci = stats.binomtest(s, k).proportion_ci(level, method="exact")
        return ci.low, ci.high
    a = 1 - level
    if method == "jeffreys":
        return stats.beta.ppf(a / 2, s + 0.5, k - s + 0.5), stats.beta.isf(
            a / 2, s + 0.5, k - s + 0.5
        )
    if method == "jeffreys_fpc":  # Beta quantiles at n / f, boundary-modified, feasible range
        f = (big_n - k) / (big_n - 1)
        ke, ne = s / f, k / f
        lo = 0.0 if s == 0 else stats.beta.ppf(a / 2, ke + 0.5, ne - ke + 0.5)
        hi = 1.0 if s == k else stats.beta.isf(a / 2, ke + 0.5, ne - ke + 0.5)
        lo, hi = max(lo, s / big_n), min(hi, (s + big_n - k) / big_n)
        exact = _small_n_oracle("hypergeometric", s, k, big_n, level)
        if s == 0:  # no item right: the exact upper end
            hi = max(hi, exact[1])
        if s == k:
            lo = min(lo, exact[0])
        return lo, hi
    if method == "hypergeometric":
        lo = hi = None
        for t in range(big_n + 1):
            if lo is None and stats.hypergeom.sf(s - 1, big_n, t, k) > a / 2:
                lo = t
            if stats.hypergeom.cdf(s, big_n, t, k) > a / 2:
                hi = t
        return lo / big_n, hi / big_n
    f = (big_n - k) / (big_n - 1)
    return _wilson(s / k, k / f, _z(level))


@pytest.mark.parametrize(
    "method", ["wilson_fpc", "clopper_pearson", "jeffreys", "hypergeometric", "jeffreys_fpc"]
)
def test_unweighted_01_random_subset_gets_the_small_n_interval(method) -> None:
    sel = _sel("random", [3, 5, 8, 9, 13, 17, 20, 21])
    (b,) = score_models(sel, Y01, 30, small_n=method, level=0.9)
    assert b.estimator == "mean" and b.basis == "design" and b.interval == method
    assert b.confidence == 0.9 and b.note is None and b.available
    f = 22 / 29
    for i, s in enumerate((4, 8, 0, 1)):
        lo, hi = _small_n_oracle(method, s, 8, 30, 0.9)
        assert (b.ci_low[i], b.ci_high[i]) == pytest.approx((lo, hi), abs=1e-10)
        assert b.value[i] == pytest.approx(s / 8, abs=1e-15)
        assert b.raw_value[i] == pytest.approx(s / 8, abs=1e-15)
        assert b.se[i] == pytest.approx(np.sqrt(f * (s / 8) * (1 - s / 8) / 8), abs=1e-15)


def test_default_small_n_and_level() -> None:
    """The default is Jeffreys at the FPC size since issue 24 (Wilson's weakest fifth covered
    0.921-0.929 at n = 25 on the SYNTHETIC weak family; bench/RESULTS.md)."""
    assert DEFAULT_SMALL_N == "jeffreys_fpc"
    sel = _sel("random", [0, 2, 4, 6, 8, 10, 12, 14])
    (b,) = score_models(sel, Y01[0], 30)  # one model as a 1-d array
    assert b.value.shape == (1,)
    assert b.interval == "jeffreys_fpc" and b.confidence == 0.95
    lo, hi = _small_n_oracle("jeffreys_fpc", 4, 8, 30, 0.95)
    assert (b.ci_low[0], b.ci_high[0]) == pytest.approx((lo, hi), abs=1e-12)


def _strat_var(y, pi, strata, big_n):
    var = 0.0
    for lab in np.unique(strata):
        m = strata == lab
        n_h, big_n_h = m.sum(), (1 / pi[m]).sum()
        s2 = np.var(y[m], ddof=1) if n_h > 1 else np.var(y, ddof=1)
        var += big_n_h**2 * max(0.0, 1 - n_h / big_n_h) * s2 / n_h
    return var / big_n**2


def _strat_beta(value, se, q, z, succ, k, big_n, level):
    """0/1 rows: Jeffreys at the effective size ``p (1 - p) / se^2 (z / q)^2`` (Korn & Graubard),
    clipped to the accuracies still possible after the sample."""
    a = 1 - level
    ne = value * (1 - value) / se**2 * (z / q) ** 2
    ke = value * ne
    lo = stats.beta.ppf(a / 2, ke + 0.5, ne - ke + 0.5)
    hi = stats.beta.isf(a / 2, ke + 0.5, ne - ke + 0.5)
    return max(lo, succ / big_n), min(hi, (succ + big_n - k) / big_n)


def test_weighted_design_gets_the_stratified_ht_interval() -> None:
    """Stratified SRS (3 of 10, 5 of 30): value sum w y, stratified variance, t with n - H df."""
    idx = np.r_[0, 3, 7, 10, 16, 22, 28, 35]
    w = np.r_[np.full(3, 10 / (40 * 3)), np.full(5, 30 / (40 * 5))]
    pi = np.r_[np.full(3, 0.3), np.full(5, 5 / 30)]
    strata = np.r_[0, 0, 0, 1, 1, 1, 1, 1]
    y = np.array([[1, 0, 1, 1, 0, 1, 0, 1], [0.5, 0.2, 0.9, 0.4, 0.4, 1.0, 0.0, 0.3]])
    sel = _sel("subtask_stratified", idx, w)
    (b,) = score_models(sel, y, 40, level=0.8, estimators=("weighted_mean",))
    # row 1 is graded: since issue 35 its t-interval is widened to the betting one (named)
    assert b.interval == "stratified_ht_betting" and b.basis == "design" and b.confidence == 0.8
    (b01,) = score_models(sel, y[:1], 40, level=0.8, estimators=("weighted_mean",))
    assert b01.interval == "stratified_ht"  # 0/1 results alone: unchanged
    assert b01.ci_low[0] == pytest.approx(b.ci_low[0], abs=1e-12)
    assert b01.ci_high[0] == pytest.approx(b.ci_high[0], abs=1e-12)
    q = stats.t.ppf(0.9, 8 - 2)
    n_w = w.sum() ** 2 / (w**2).sum()
    for i in range(2):
        value = float(np.sum(w * y[i]))
        se = np.sqrt(_strat_var(y[i], pi, strata, 40))
        lo, hi = max(0.0, value - q * se), min(1.0, value + q * se)
        if i == 0:  # 0/1 with 3 < SPARSE_STRATIFIED wrong: the hull with Wilson at Kish's size
            lo, hi = _strat_beta(value, se, q, _z(0.8), y[i].sum(), 8, 40, 0.8)
            wlo, whi = _wilson(value, n_w / (32 / 39), _z(0.8))
            lo, hi = min(lo, wlo), max(hi, whi)
        assert b.value[i] == pytest.approx(value, abs=1e-14)
        assert b.se[i] == pytest.approx(se, rel=1e-12)
        if i == 0:
            assert b.ci_low[i] == pytest.approx(lo, abs=1e-12)
            assert b.ci_high[i] == pytest.approx(hi, abs=1e-12)
        else:  # the t-interval, widened to the betting interval at the design effect
            wlo, whi = _widened(y[i], value, se, lo, hi, 40, 0.8)
            assert b.ci_low[i] == pytest.approx(wlo, abs=1e-12)
            assert b.ci_high[i] == pytest.approx(whi, abs=1e-12)


def _widened(row, value, se, lo, hi, big_n, level):
    """Issue 35's graded stratified interval: the t-interval ``[lo, hi]`` widened to contain
    the betting interval of the unweighted row, recentred and scaled by the design effect."""
    k = row.size
    blo, bhi = betting_interval(row, big_n, confidence=level)
    deff = se / np.sqrt((1 - k / big_n) * row.var(ddof=1) / k)
    wlo = max(0.0, value - (row.mean() - blo[0]) * deff)
    whi = min(1.0, value + (bhi[0] - row.mean()) * deff)
    return min(lo, wlo), max(hi, whi)


def test_stratified_interval_uses_stored_probabilities_and_one_df_floor() -> None:
    """Three strata of one item each: the pooled variance, and ``max(n - H, 1) = 1`` df."""
    idx = np.array([1, 4, 9])
    pi = np.array([0.1, 0.2, 0.25])
    w = 1 / (12 * pi)
    y = np.array([[0.2, 0.9, 0.5]])
    sel = _sel(
        "confidence_stratified",
        idx,
        w,
        estimator="horvitz_thompson",
        fitted={"inclusion_probability": pi},
    )
    (b,) = score_models(sel, y, 12, level=0.6)
    assert b.estimator == "horvitz_thompson" and b.interval == "stratified_ht_betting"
    se = np.sqrt(_strat_var(y[0], pi, np.arange(3), 12))
    value = float(w @ y[0])
    q = stats.t.ppf(0.8, 1)
    assert b.se[0] == pytest.approx(se, rel=1e-12)
    lo, hi = max(0.0, value - q * se), min(1.0, value + q * se)  # graded: widened since issue 35
    assert (b.ci_low[0], b.ci_high[0]) == pytest.approx(
        _widened(y[0], value, se, lo, hi, 12, 0.6), abs=1e-12
    )


def test_uniform_non_binary_design_is_stratified_with_one_stratum() -> None:
    sel = _sel("random", [0, 1, 2, 3, 4])
    y = np.array([[0.2, 0.4, 0.9, 0.5, 0.6]])
    (b,) = score_models(sel, y, 20, level=0.9)
    se = np.sqrt((1 - 5 / 20) * np.var(y[0], ddof=1) / 5)
    # graded scores on a uniform random subset: the betting interval since issue 35 (the
    # t-interval 0.52 -+ t SE before); the design SE is unchanged
    assert b.interval == "betting_fpc"
    assert b.se[0] == pytest.approx(se, rel=1e-12)
    blo, bhi = betting_interval(y, 20, confidence=0.9)
    assert (b.ci_low[0], b.ci_high[0]) == pytest.approx((blo[0], bhi[0]), abs=1e-12)


def test_stratified_zero_variance_falls_back_to_kish_wilson() -> None:
    """Equal results in every stratum: se = 0, the bounds are Wilson at Kish's size."""
    idx = np.array([0, 1, 5, 6, 7])
    w = np.r_[np.full(2, 4 / (20 * 2)), np.full(3, 16 / (20 * 3))]
    y = np.array([[1, 1, 1, 1, 1], [1.0, 1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
    sel = _sel("subtask_stratified", idx, w)
    (b,) = score_models(sel, y, 20, level=0.9, estimators=("weighted_mean",))
    n_w = w.sum() ** 2 / (w**2).sum()
    f = 15 / 19
    for i in (0, 2):
        assert b.se[i] == 0.0
        lo, hi = _wilson(min(1.0, float(w @ y[i])), n_w / f, _z(0.9))
        assert (b.ci_low[i], b.ci_high[i]) == pytest.approx((lo, hi), abs=1e-12)
    # model 1 has within-stratum variance 0 too (1, 1 | 0, 0, 0)
    assert b.se[1] == 0.0
    lo, hi = _wilson(float(w @ y[1]), n_w / f, _z(0.9))
    assert (b.ci_low[1], b.ci_high[1]) == pytest.approx((lo, hi), abs=1e-12)


def test_stratified_zero_variance_only_for_the_models_without_it() -> None:
    idx = np.array([0, 1, 2, 3])
    w = np.array([0.1, 0.2, 0.3, 0.4])
    y = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0, 0.0]])
    sel = _sel("subtask_stratified", idx, w)
    (b,) = score_models(sel, y, 40, estimators=("weighted_mean",))
    assert b.se[0] == 0.0 and b.se[1] > 0
    pi = 1 / (40 * w)
    se1 = np.sqrt(_strat_var(y[1], pi, np.arange(4), 40))
    q = stats.t.ppf(0.975, 1)
    v1 = float(w @ y[1])
    assert b.se[1] == pytest.approx(se1, rel=1e-12)
    # 0/1 row: Jeffreys at the effective size, here limited by the feasible range [2, 38] / 40
    lo, hi = _strat_beta(v1, se1, q, _z(0.95), 2, 4, 40, 0.95)
    assert (lo, hi) == pytest.approx((0.05, 0.95), abs=1e-12)
    assert (b.ci_low[1], b.ci_high[1]) == pytest.approx((lo, hi), abs=1e-12)


# -- model-assisted ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(8)
    n_pop = 120
    ref = (rng.random((25, n_pop)) < np.linspace(0.1, 0.95, n_pop)).astype(float)
    idx = np.sort(rng.choice(n_pop, 50, replace=False))
    y = (rng.random((3, 50)) < 0.6).astype(float)
    return ref, idx, y, n_pop


def test_model_assisted_is_appended_from_fifty_items(big) -> None:
    ref, idx, y, n_pop = big
    sel = _sel("random", idx)
    out = score_models(sel, y, n_pop, reference_correct=ref, level=0.9)
    assert [b.estimator for b in out] == ["mean", "model_assisted"]
    want = model_assisted(sel, y, n_pop, ref, level=0.9)
    ma = out[1]
    assert ma.confidence == 0.9
    for field in ("value", "ci_low", "ci_high", "se"):
        np.testing.assert_allclose(getattr(ma, field), getattr(want, field), rtol=1e-14)
    small = _sel("random", idx[:49])
    assert [b.estimator for b in score_models(small, y[:, :49], n_pop, reference_correct=ref)] == [
        "mean"
    ]


def test_model_assisted_only_once_after_all_estimators(big) -> None:
    ref, idx, y, n_pop = big
    sel = _sel("random", idx)
    out = score_models(sel, y, n_pop, reference_correct=ref, estimators=("mean", "weighted_mean"))
    assert [b.estimator for b in out] == ["mean", "weighted_mean", "model_assisted"]


def test_model_assisted_needs_a_linear_first_estimator_and_01_results(big) -> None:
    ref, idx, y, n_pop = big
    sel = _sel("random", idx)
    conf = np.clip(y * 0.8 + 0.1, 0, 1)
    out = score_models(
        sel,
        y,
        n_pop,
        reference_correct=ref,
        confidence_values=conf,
        estimators=("weighted_confidence", "mean"),
    )
    assert [b.estimator for b in out] == ["weighted_confidence", "mean"]
    out = score_models(sel, conf, n_pop, reference_correct=ref)
    assert [b.estimator for b in out] == ["mean"]
    # not for non-probability subsets either
    dpp = _sel("dpp", idx)
    assert "model_assisted" not in [
        b.estimator for b in score_models(dpp, y, n_pop, reference_correct=ref)
    ]


# -- non-probability subsets without references -----------------------------------------------------
def test_uncalibrated_uniform_01_subset_is_wilson_fpc_with_a_warning() -> None:
    sel = _sel("dpp", [0, 2, 4, 6, 8, 10, 12, 14])
    out = score_models(sel, Y01, 30, level=0.9)
    assert [b.estimator for b in out] == ["mean", "weighted_mean"]
    f = 22 / 29
    for b in out:
        assert b.basis == "model" and b.interval == "wilson_kish_fpc" and b.note == NOT_CALIBRATED
        assert b.confidence == 0.9
        for i, s in enumerate((4, 8, 0, 1)):
            lo, hi = _wilson(s / 8, 8 / f, _z(0.9))
            assert (b.ci_low[i], b.ci_high[i]) == pytest.approx((lo, hi), abs=1e-12)
            assert b.se[i] == pytest.approx(np.sqrt(f * (s / 8) * (1 - s / 8) / 7), abs=1e-14)


def test_uncalibrated_weighted_subset_is_wilson_at_kish_size() -> None:
    w = np.array([0.05, 0.1, 0.2, 0.15, 0.1, 0.2, 0.1, 0.1])
    sel = _sel("anchor_points", np.arange(8) * 3, w, estimator="weighted_mean")
    out = score_models(sel, Y01, 30, level=0.9, estimators=("weighted_mean",))
    (b,) = out
    n_w = 1 / (w**2).sum()
    f = 22 / 29
    for i in range(4):
        v = float(w @ Y01[i])
        lo, hi = _wilson(v, n_w / f, _z(0.9))
        assert b.value[i] == pytest.approx(v, abs=1e-14)
        assert (b.ci_low[i], b.ci_high[i]) == pytest.approx((lo, hi), abs=1e-12)
        vw = v
        se = np.sqrt(f * np.sum(w**2 * (Y01[i] - vw) ** 2) * 8 / 7)
        assert b.se[i] == pytest.approx(se, abs=1e-14)
    assert b.note == NOT_CALIBRATED


def test_confidence_estimator_on_a_random_subset_is_kish_wilson_without_note() -> None:
    """weighted_confidence reads gold-option probabilities: never the 0/1 Wilson on their sums."""
    sel = _sel("random", [0, 1, 2, 3, 4, 5, 6, 7])
    conf = np.array([[0.9, 0.2, 0.7, 0.8, 0.3, 0.6, 0.2, 0.35]])
    (b,) = score_models(
        sel, Y01[:1], 30, confidence_values=conf, estimators=("weighted_confidence",)
    )
    p = float(conf.mean())
    lo, hi = _wilson(p, 8 / (22 / 29), _z(0.95))
    assert b.value[0] == pytest.approx(p, abs=1e-15)
    assert (b.ci_low[0], b.ci_high[0]) == pytest.approx((lo, hi), abs=1e-12)
    assert b.note is None and b.interval == "wilson_kish_fpc" and b.basis == "model"
    se = np.sqrt((22 / 29) * np.sum((conf[0] - p) ** 2 / 64) * 8 / 7)
    assert b.se[0] == pytest.approx(se, abs=1e-14)


def test_confidence_estimator_without_confidences_is_unavailable() -> None:
    sel = _sel("anchor_points", [0, 1, 2], [0.2, 0.3, 0.5], estimator="weighted_confidence")
    out = score_models(sel, np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), 10, level=0.8)
    assert [b.estimator for b in out] == ["weighted_confidence", "weighted_mean"]
    u = out[0]
    assert not u.available and u.interval is None and u.basis == "model"
    assert u.note == "needs confidences (probability on the gold answer) in the upload"
    assert u.confidence == 0.8 and u.value.shape == (2,) and np.isnan(u.value).all()
    assert out[1].value == pytest.approx([0.7, 0.5])


def test_failing_estimator_is_reported_and_the_others_go_on() -> None:
    sel = _sel("dpp", [0, 1, 2], [0.2, 0.3, 0.5])
    out = score_models(
        sel, np.array([[1.0, 0.0, 1.0]]), 10, estimators=("nope", "weighted_mean"), level=0.8
    )
    assert [b.estimator for b in out] == ["nope", "weighted_mean"]
    assert out[0].confidence == 0.8 and out[0].interval is None
    assert not out[0].available and out[0].note.startswith("estimator: unknown estimator 'nope'")
    assert out[1].available and out[1].value[0] == pytest.approx(0.7)


def test_unknown_method_scores_its_own_estimator() -> None:
    sel = _sel("hand_picked", [0, 1, 2], [0.2, 0.3, 0.5], estimator="weighted_mean")
    out = score_models(sel, np.array([[1.0, 0.0, 1.0]]), 10)
    assert [b.estimator for b in out] == ["weighted_mean"]
    assert out[0].note == NOT_CALIBRATED


# -- reference-calibrated intervals -----------------------------------------------------------------
@pytest.fixture(scope="module")
def calib():
    rng = np.random.default_rng(31)
    n_pop = 30
    ref = (rng.random((20, n_pop)) < rng.uniform(0.2, 0.9, (20, 1))).astype(float)
    rconf = np.clip(ref * 0.6 + rng.random((20, n_pop)) * 0.4, 0, 1)
    idx = np.array([1, 5, 8, 12, 17, 21, 25, 29])
    w = np.array([0.1, 0.15, 0.1, 0.2, 0.05, 0.15, 0.1, 0.15])
    y = (rng.random((3, 8)) < 0.5).astype(float)
    conf = np.clip(y * 0.5 + rng.random((3, 8)) * 0.5, 0, 1)
    return ref, rconf, idx, w, y, conf, n_pop


def _check_calibrated(b, raw, r_est, truth, level, inflation, hull=True):
    grid, bb, s, q = _calibration_oracle(r_est, truth, level, inflation)
    value, lo0, hi0, se = _apply_oracle(raw, grid, bb, s, q, 0.001)
    # near the references' edge (raw among their lowest / highest 10 %) the hull with the
    # interval re-centred on the raw value (issue 38)
    edge = hull & ((raw <= np.quantile(r_est, 0.1)) | (raw >= np.quantile(r_est, 0.9)))
    lo = np.where(edge, np.minimum(lo0, np.clip(raw - (value - lo0), 0, 1)), lo0)
    hi = np.where(edge, np.maximum(hi0, np.clip(raw + (hi0 - value), 0, 1)), hi0)
    assert b.interval == "reference_calibrated" and b.basis == "model"
    np.testing.assert_allclose(b.raw_value, raw, atol=1e-14)
    np.testing.assert_allclose(b.value, value, atol=1e-12)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-12)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-12)
    np.testing.assert_allclose(b.se, se, atol=1e-12)


def test_calibrated_with_twenty_references(calib) -> None:
    ref, _, idx, w, y, _, n_pop = calib
    sel = _sel("dpp", idx, w)
    out = score_models(
        sel,
        y,
        n_pop,
        reference_correct=ref,
        level=0.9,
        inflation=1.3,
        estimators=("weighted_mean",),
    )
    (b,) = out
    assert b.note == MEASURED_CAVEATS[("dpp", "weighted_mean")] and b.confidence == 0.9
    assert "0.99-1.00 at n = 25-100" in b.note  # the measured cells beyond the sources, said
    _check_calibrated(b, y @ w, ref[:, idx] @ w, ref.mean(axis=1), 0.9, 1.3)


def test_calibrated_default_inflation(calib) -> None:
    ref, _, idx, w, y, _, n_pop = calib
    sel = _sel("dpp", idx, w)
    (b,) = score_models(sel, y, n_pop, reference_correct=ref, estimators=("weighted_mean",))
    _check_calibrated(b, y @ w, ref[:, idx] @ w, ref.mean(axis=1), 0.95, 1.1)


def test_nineteen_references_or_calibrate_false_are_not_calibrated(calib) -> None:
    ref, _, idx, w, y, _, n_pop = calib
    sel = _sel("dpp", idx, w)
    for kw in ({"reference_correct": ref[:19]}, {"reference_correct": ref, "calibrate": False}):
        (b,) = score_models(sel, y, n_pop, estimators=("weighted_mean",), **kw)
        assert b.interval == "wilson_kish_fpc" and b.note == NOT_CALIBRATED


def test_calibrated_with_given_reference_values(calib) -> None:
    ref, _, idx, w, y, _, n_pop = calib
    sel = _sel("dpp", idx, w)
    given = ref[:, idx] @ w + np.linspace(-0.04, 0.04, 20)
    (b,) = score_models(
        sel,
        y,
        n_pop,
        reference_correct=ref,
        estimators=("weighted_mean",),
        reference_values={"weighted_mean": given, "mean": np.zeros(20)},
    )
    _check_calibrated(b, y @ w, given, ref.mean(axis=1), 0.95, 1.1)
    # values for another estimator only: the estimator is run on the references
    (c,) = score_models(
        sel,
        y,
        n_pop,
        reference_correct=ref,
        estimators=("weighted_mean",),
        reference_values={"mean": given},
    )
    _check_calibrated(c, y @ w, ref[:, idx] @ w, ref.mean(axis=1), 0.95, 1.1)


def test_anchor_points_weighted_mean_carries_the_measured_caveat(calib) -> None:
    ref, rconf, idx, w, y, conf, n_pop = calib
    sel = _sel("anchor_points", idx, w, estimator="weighted_mean")
    out = score_models(
        sel, y, n_pop, confidence_values=conf, reference_correct=ref, reference_confidence=rconf
    )
    assert [b.estimator for b in out] == ["weighted_confidence", "weighted_mean"]
    assert out[1].note == MEASURED_CAVEATS[("anchor_points", "weighted_mean")]
    assert "0.927" in out[1].note
    assert out[0].note is None
    # weighted_confidence is calibrated on the references' confidences
    # weighted_confidence is calibrated on confidences: no edge hull
    _check_calibrated(out[0], conf @ w, rconf[:, idx] @ w, rconf.mean(axis=1), 0.95, 1.1, False)
    _check_calibrated(out[1], y @ w, ref[:, idx] @ w, ref.mean(axis=1), 0.95, 1.1)


def test_confidence_estimator_without_reference_confidences_is_not_calibrated(calib) -> None:
    ref, _, idx, w, y, conf, n_pop = calib
    sel = _sel("anchor_points", idx, w, estimator="weighted_mean")
    out = score_models(sel, y, n_pop, confidence_values=conf, reference_correct=ref)
    assert out[0].interval == "wilson_kish_fpc" and out[0].note == NOT_CALIBRATED
    n_w = 1 / (w**2).sum()
    lo, hi = _wilson(float(conf[0] @ w), n_w / (22 / 29), _z(0.95))
    assert (out[0].ci_low[0], out[0].ci_high[0]) == pytest.approx((lo, hi), abs=1e-12)
    assert out[1].interval == "reference_calibrated"


def _hand_calibration(level, inflation):
    grid = np.linspace(0.0, 1.0, 11)
    return ReferenceCalibration(
        grid=grid,
        bias=np.full(11, 0.02),
        spread=np.full(11, 0.05),
        quantile=np.full(11, 1.5),
        grid_step=0.1,
        confidence=level,
        inflation=inflation,
    )


def test_given_calibrations_are_used_at_their_level_and_inflation(calib) -> None:
    ref, _, idx, w, y, _, n_pop = calib
    sel = _sel("dpp", idx, w)
    cal = _hand_calibration(0.9, 1.1)
    # preferred over the references when both are given
    (b,) = score_models(
        sel,
        y,
        n_pop,
        level=0.9,
        reference_correct=ref,
        calibrations={"weighted_mean": cal},
        estimators=("weighted_mean",),
    )
    value, lo, hi, se = _apply_oracle(y @ w, cal.grid, cal.bias, cal.spread, cal.quantile, 0.1)
    np.testing.assert_allclose(b.value, value, atol=1e-12)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-12)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-12)
    np.testing.assert_allclose(b.se, se, atol=1e-12)
    assert b.interval == "reference_calibrated"


def test_given_calibrations_at_another_level_or_inflation_are_ignored(calib) -> None:
    ref, _, idx, w, y, _, n_pop = calib
    sel = _sel("dpp", idx, w)
    for cal in (_hand_calibration(0.95, 1.1), _hand_calibration(0.9, 1.2)):
        (b,) = score_models(
            sel,
            y,
            n_pop,
            level=0.9,
            calibrations={"weighted_mean": cal},
            estimators=("weighted_mean",),
        )
        assert b.interval == "wilson_kish_fpc"
        (c,) = score_models(
            sel,
            y,
            n_pop,
            level=0.9,
            calibrations={"weighted_mean": cal},
            reference_correct=ref,
            estimators=("weighted_mean",),
        )
        _check_calibrated(c, y @ w, ref[:, idx] @ w, ref.mean(axis=1), 0.9, 1.1)
    (d,) = score_models(
        sel,
        y,
        n_pop,
        level=0.9,
        calibrate=False,
        estimators=("weighted_mean",),
        calibrations={"weighted_mean": _hand_calibration(0.9, 1.1)},
    )
    assert d.interval == "wilson_kish_fpc"
    (e,) = score_models(
        sel,
        y,
        n_pop,
        level=0.9,
        estimators=("weighted_mean",),
        calibrations={"mean": _hand_calibration(0.9, 1.1)},
    )
    assert e.interval == "wilson_kish_fpc"


# -- p-IRT / gp-IRT delta-method SEs ----------------------------------------------------------------
A = np.array([0.8, 1.2, 1.5, 0.6, 1.0, 2.0, 0.9, 1.1, 1.3, 0.7])
B = np.array([-1.0, 0.3, 0.5, -0.2, 1.2, 0.0, -0.6, 0.8, 0.1, -0.4])


def _tiny(anchors, prior=1.0, lambda_gp=0.3):
    anchors = np.asarray(anchors)
    fitted = {
        "irt_a": A[:, None],
        "irt_b": B,
        "irt_form": np.array(0),
        "anchor_candidate_positions": anchors,
        "ability_prior": np.array(prior),
    }
    if lambda_gp is not None:
        fitted["lambda_gp"] = np.array(lambda_gp)
    w = np.linspace(1.0, 2.0, anchors.size)
    return _sel("tiny_benchmarks", anchors * 4 + 1, w / w.sum(), estimator="irt", fitted=fitted)


def _irt_oracle(y, anchors, prior):
    """MAP ability (brentq on the score), its variance, and the non-anchor accuracy's SE."""
    a, b = A[anchors], B[anchors]
    rest = np.setdiff1d(np.arange(A.size), anchors)

    def grad(t):
        return float(np.sum((1 / (1 + np.exp(-(a * t - b))) - y) * a) + t / prior**2)

    t = optimize.brentq(grad, -30, 30, xtol=1e-14)
    p = 1 / (1 + np.exp(-(a * t - b)))
    var = 1 / (np.sum(p * (1 - p) * a * a) + 1 / prior**2)
    if rest.size == 0:
        return 1.0, y.mean(), 0.0
    pr = 1 / (1 + np.exp(-(A[rest] * t - B[rest])))
    g = np.mean(pr * (1 - pr) * A[rest])
    lam = anchors.size / A.size
    return lam, lam * y.mean() + (1 - lam) * pr.mean(), (1 - lam) * abs(g) * np.sqrt(var)


def test_irt_delta_method_ses_without_references() -> None:
    anchors = np.array([0, 2, 5, 7])
    sel = _tiny(anchors, prior=1.5, lambda_gp=0.3)
    y = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    out = score_models(sel, y, 40, level=0.9)
    assert [b.estimator for b in out] == ["irt", "p_irt", "gp_irt"]
    z = _z(0.9)
    w = sel.weights
    for i in range(2):
        _, p_val, p_se = _irt_oracle(y[i], anchors, 1.5)
        pb = out[1]
        assert pb.interval == "irt_ability_delta_method" and pb.basis == "model"
        assert pb.confidence == 0.9 and out[2].confidence == 0.9
        assert pb.note == NOT_CALIBRATED
        assert pb.value[i] == pytest.approx(p_val, abs=1e-8)
        assert pb.se[i] == pytest.approx(p_se, rel=1e-6)
        assert pb.ci_low[i] == pytest.approx(max(0.0, p_val - z * p_se), abs=1e-7)
        assert pb.ci_high[i] == pytest.approx(min(1.0, p_val + z * p_se), abs=1e-7)
        irt = float(w @ y[i])
        lin = np.sqrt((36 / 39) * np.sum(w**2 * (y[i] - irt) ** 2) * 4 / 3)
        gp_val = 0.3 * irt + 0.7 * p_val
        gp_se = np.hypot(0.3 * lin, 0.7 * p_se)
        gb = out[2]
        assert gb.interval == "irt_ability_delta_method"
        assert gb.value[i] == pytest.approx(gp_val, abs=1e-8)
        assert gb.se[i] == pytest.approx(gp_se, rel=1e-6)
        assert gb.ci_low[i] == pytest.approx(max(0.0, gp_val - z * gp_se), abs=1e-7)
        assert gb.ci_high[i] == pytest.approx(min(1.0, gp_val + z * gp_se), abs=1e-7)


def test_irt_delta_all_candidates_anchored_has_only_the_linear_part() -> None:
    anchors = np.arange(10)
    sel = _tiny(anchors, lambda_gp=0.4)
    y = np.array([[1, 0, 1, 1, 0, 1, 1, 0, 0, 1]], float)
    out = score_models(sel, y, 50, estimators=("p_irt", "gp_irt"))
    assert out[0].se[0] == 0.0
    w = sel.weights
    irt = float(w @ y[0])
    lin = np.sqrt((40 / 49) * np.sum(w**2 * (y[0] - irt) ** 2) * 10 / 9)
    assert out[1].se[0] == pytest.approx(0.4 * lin, rel=1e-12)


def test_irt_estimators_unavailable_without_their_fitted_state() -> None:
    sel = _tiny([0, 2, 5], lambda_gp=None)
    out = score_models(sel, np.array([[1.0, 0.0, 1.0]]), 40)
    assert [b.available for b in out] == [True, True, False]
    assert out[2].note.startswith("estimator: gp_irt needs a selection calibrated")


def test_irt_bounds_are_clipped_to_the_unit_interval() -> None:
    """At level 0.999 the delta-method bounds of an all-right / all-wrong model leave [0, 1]."""
    anchors = np.array([0, 2, 5, 7])
    sel = _tiny(anchors, prior=1.5, lambda_gp=0.3)
    y = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    out = score_models(sel, y, 40, level=0.999, estimators=("p_irt",))
    z = _z(0.999)
    (b,) = out
    _, v0, s0 = _irt_oracle(y[0], anchors, 1.5)
    _, v1, s1 = _irt_oracle(y[1], anchors, 1.5)
    assert v0 + z * s0 > 1.0 and v1 - z * s1 < 0.0  # the clips bind
    assert b.ci_high[0] == 1.0 and b.ci_low[1] == 0.0
    assert b.ci_low[0] == pytest.approx(v0 - z * s0, abs=1e-7)
    assert b.ci_high[1] == pytest.approx(v1 + z * s1, abs=1e-7)


def test_stratified_bounds_are_clipped_to_the_unit_interval() -> None:
    """Three single-item strata: one degree of freedom, t = 12.7 at 95 %, bounds clip to [0, 1]."""
    idx = np.array([1, 4, 9])
    pi = np.array([0.1, 0.2, 0.25])
    w = 1 / (12 * pi)
    y = np.array([[0.9, 1.0, 0.0]])
    sel = _sel(
        "confidence_stratified",
        idx,
        w,
        estimator="horvitz_thompson",
        fitted={"inclusion_probability": pi},
    )
    (b,) = score_models(sel, y, 12)
    value = float(w @ y[0])
    se = np.sqrt(_strat_var(y[0], pi, np.arange(3), 12))
    q = stats.t.ppf(0.975, 1)
    assert value - q * se < 0.0 and value + q * se > 1.0
    assert (b.ci_low[0], b.ci_high[0]) == (0.0, 1.0)


def test_uncalibrated_uniform_non_binary_subset_is_wilson_at_kish_size() -> None:
    sel = _sel("dpp", [0, 1, 2, 3, 4])
    y = np.array([[0.2, 0.4, 0.9, 0.5, 0.6]])
    (b,) = score_models(sel, y, 20, estimators=("mean",))
    lo, hi = _wilson(0.52, 5 / (15 / 19), _z(0.95))
    assert (b.ci_low[0], b.ci_high[0]) == pytest.approx((lo, hi), abs=1e-12)
    assert b.interval == "wilson_kish_fpc"


def test_one_model_confidences_as_a_1d_array() -> None:
    sel = _sel("anchor_points", [0, 1, 2], [0.2, 0.3, 0.5], estimator="weighted_confidence")
    out = score_models(sel, [1.0, 0.0, 1.0], 10, confidence_values=[0.9, 0.2, 0.6])
    assert out[0].available and out[0].value == pytest.approx([0.18 + 0.06 + 0.3])


def test_irt_delta_accepts_anchor_positions_stored_as_floats() -> None:
    """A stored selection may carry its anchor positions as floats (e.g. after a JSON round
    trip): the SEs are those of the integer positions."""
    anchors = np.array([0, 2, 5, 7])
    y = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    sel = _tiny(anchors, prior=1.5)
    fitted = dict(sel.fitted)
    fitted["anchor_candidate_positions"] = anchors.astype(np.float64)
    as_float = _sel("tiny_benchmarks", sel.indices, sel.weights, estimator="irt", fitted=fitted)
    out = score_models(as_float, y, 40, estimators=("p_irt",))
    assert out[0].available and out[0].interval == "irt_ability_delta_method"
    for i in range(2):
        _, p_val, p_se = _irt_oracle(y[i], anchors, 1.5)
        assert out[0].value[i] == pytest.approx(p_val, abs=1e-8)
        assert out[0].se[i] == pytest.approx(p_se, rel=1e-6)


def test_irt_delta_all_anchored_se_has_one_entry_per_model() -> None:
    sel = _tiny(np.arange(10), lambda_gp=0.4)
    y = np.array([[1, 0, 1, 1, 0, 1, 1, 0, 0, 1], [0, 0, 1, 1, 0, 1, 0, 0, 0, 1]], float)
    out = score_models(sel, y, 50, estimators=("p_irt", "gp_irt"))
    assert out[0].se.shape == (2,) and out[1].se.shape == (2,)
    np.testing.assert_array_equal(out[0].se, [0.0, 0.0])


def test_size_needed_for_gap_from_a_single_shared_item() -> None:
    """n_shared = 1 is valid: the one discordant item scales to all N, so one item suffices."""
    assert size_needed_for_gap(1, 0, 1, 5) == _size_oracle(1, 0, 1, 5, 0.8) == 1
    assert size_needed_for_gap(0, 1, 1, 1) == 1


def test_size_needed_for_gap_probability_one_is_reachable() -> None:
    """Every shared item discordant one way (h = N, lw = 0): P(order) = 1 exactly from n = 1."""
    assert _p_order(4, 0, 4, 1) == 1.0
    assert size_needed_for_gap(4, 0, 4, 4, 1.0) == 1


def test_size_needed_for_gap_refines_below_the_last_grid_point() -> None:
    """Only the last grid size (N = 60) reaches 0.9995, but 59 already does: the sizes between
    the last two grid points (55, 60) are searched one by one."""
    assert _p_order(2, 0, 60, 58) < 0.9995 <= _p_order(2, 0, 60, 59)
    assert _p_order(2, 0, 60, 55) < 0.9995
    assert size_needed_for_gap(2, 0, 60, 60, 0.9995) == _size_oracle(2, 0, 60, 60, 0.9995) == 59


def test_calibration_runs_each_estimator_on_the_references() -> None:
    """p-IRT calibrated on 20 references: the error law is that of p-IRT on them (solved here by
    brentq), not of the selection's default estimator (the anchor-weighted mean)."""
    anchors = np.array([0, 2, 5, 7])
    sel = _tiny(anchors, prior=1.5)
    rng = np.random.default_rng(12)
    ref = (rng.random((20, 40)) < rng.uniform(0.2, 0.9, (20, 1))).astype(float)
    y = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    (b,) = score_models(sel, y, 40, reference_correct=ref, estimators=("p_irt",))
    r_est = np.array([_irt_oracle(row[sel.indices], anchors, 1.5)[1] for row in ref])
    raw = np.array([_irt_oracle(row, anchors, 1.5)[1] for row in y])
    grid, bb, s, q = _calibration_oracle(r_est, ref.mean(axis=1), 0.95, 1.1)
    value, lo, hi, se = _apply_oracle(raw, grid, bb, s, q, 0.001)
    assert b.interval == "reference_calibrated"
    np.testing.assert_allclose(b.se, se, atol=1e-6)
    np.testing.assert_allclose(b.raw_value, raw, atol=1e-8)
    np.testing.assert_allclose(b.value, value, atol=1e-6)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-6)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-6)


def test_irt_delta_failure_keeps_the_point_estimate() -> None:
    """All candidates anchored: p-IRT is the plain mean (no ability needed), but the delta-method
    SE scores the ability and a non-positive prior is refused: the estimate is served without
    interval, with the reason, and the next estimator is still scored."""
    sel = _tiny(np.arange(10), prior=0.0, lambda_gp=0.4)
    y = np.array([[1, 0, 1, 1, 0, 1, 1, 0, 0, 1], [0, 0, 1, 1, 0, 1, 0, 0, 0, 1]], float)
    out = score_models(sel, y, 50, level=0.8, estimators=("p_irt", "gp_irt"))
    assert [b.estimator for b in out] == ["p_irt", "gp_irt"]
    w = sel.weights
    want = {"p_irt": y.mean(axis=1), "gp_irt": 0.4 * (y @ w) + 0.6 * y.mean(axis=1)}
    for b in out:
        assert b.available and b.interval is None and b.basis == "model"
        assert b.note == "prior: must be a positive standard deviation"
        assert b.confidence == 0.8
        np.testing.assert_allclose(b.value, want[b.estimator], atol=1e-12)
        assert b.se.shape == (2,) and np.isnan(b.se).all() and np.isnan(b.ci_low).all()


def _pair_matrix(h, lw, n_items):
    c = np.zeros((2, n_items), dtype=np.uint8)
    c[0, :h] = 1
    c[1, h : h + lw] = 1
    return c


@pytest.mark.parametrize(
    ("h", "lw", "n_items", "prob", "want"),
    [(13, 12, 26, 0.6, 24), (17, 15, 35, 0.8, 32), (21, 20, 41, 0.6, 33)],
)
def test_size_needed_for_gap_follows_smallest_n_where_p_is_not_monotone(
    h, lw, n_items, prob, want
) -> None:
    """P(order) is not monotone in n for near ties (parity), so the answer depends on the search:
    on the full benchmark it is exact.smallest_n's (48-point geometric grid, then every size
    between the first grid point reaching ``prob`` and its predecessor)."""
    from app.core.reliability.exact import smallest_n

    sizes = range(1, n_items + 1)
    p = [_p_order(h, lw, n_items, n) for n in sizes]
    assert any(p[i + 1] < p[i] for i in range(n_items - 1))  # not monotone
    # the documented search, with exact pmf sums
    grid = np.unique(np.geomspace(1, n_items, 48).round().astype(int))
    first = next(i for i, g in enumerate(grid) if p[g - 1] >= prob)
    low = 1 if first == 0 else int(grid[first - 1]) + 1
    searched = next(n for n in range(low, int(grid[first]) + 1) if p[n - 1] >= prob)
    assert searched == want
    assert smallest_n(_pair_matrix(h, lw, n_items), 0, 1, prob) == want
    assert size_needed_for_gap(h, lw, n_items, n_items, prob) == want
