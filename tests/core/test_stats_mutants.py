"""Tests that kill the surviving mutants of ``app/core/estimation/stats.py`` (issue 17, ``make mutation``).

Each test asserts values against an independent computation (scipy, a closed form, brute force, or
a slow bootstrap that replays the same random stream), or the exact ``ValueError`` message naming
the field at fault. Boundary tests sit on the boundary value (``confidence = 0``, ``n = 1``,
``index = N``...). Mutants that cannot change any result are listed with a reason in
``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.stats import (
    clustered_se,
    compare_to_baseline,
    dirichlet_p_better,
    fpc,
    mcnemar_exact,
    mcnemar_exact_counts,
    normal_paired_comparison,
    paired_bootstrap,
    paired_outcomes,
    repeated_samples_estimate,
    score_subset,
    wilson_bounds,
    wilson_interval,
)


def _exact(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for exactly this message."""
    return "^" + re.escape(message) + "$"


# -- confidence levels ------------------------------------------------------------------------------
@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.2])
def test_confidence_outside_open_unit_interval_is_refused(confidence) -> None:
    message = f"confidence: expected a level in (0, 1), got {confidence}"
    with pytest.raises(ValueError, match=_exact(message)):
        wilson_interval(3, 10, confidence=confidence)


def test_confidence_reaches_the_interval_of_score_subset() -> None:
    y = np.array([1, 1, 0, 1, 0, 1, 1, 1, 0, 1])
    est = score_subset(y, 50, confidence=0.8)
    z = stats.norm.ppf(0.9)
    lo, hi = _wilson_fpc_roots(7, 10, 50, z)
    assert est.confidence == 0.8
    assert (est.ci_low, est.ci_high) == pytest.approx((lo, hi), rel=1e-12)


# -- finite-population correction -------------------------------------------------------------------
def test_fpc_small_populations() -> None:
    """``(N - n) / (N - 1)`` at its smallest populations: N = 2 is not degenerate, N = 1 is."""
    assert fpc(1, 2) == 1.0
    assert fpc(2, 2) == 0.0
    assert fpc(1, 1) == 0.0
    assert fpc(0, 1) == 0.0
    assert fpc(2, 3) == pytest.approx(0.5)
    with pytest.raises(
        ValueError, match=_exact("n_population: 4 is smaller than the sample size 5")
    ):
        fpc(5, 4)


# -- Wilson -----------------------------------------------------------------------------------------
def _wilson_fpc_roots(k: int, n: int, n_pop: int | None, z: float) -> tuple[float, float]:
    """Roots in p of ``(p̂ - p)^2 = z^2 f p (1 - p) / n`` (the score-test inversion), coded apart."""
    f = 1.0 if n_pop is None else (n_pop - n) / (n_pop - 1)
    c = z * z * f / n
    ph = k / n
    # (1 + c) p^2 - (2 p̂ + c) p + p̂^2 = 0
    roots = np.roots([1.0 + c, -(2.0 * ph + c), ph * ph])
    return float(min(roots.real)), float(max(roots.real))


def test_wilson_upper_bound_never_exceeds_one() -> None:
    """At p = 1 the upper root is exactly 1; rounding gives 1 + 2e-16 here, which must be clipped."""
    z = float(stats.norm.ppf(0.9))
    n_eff = 6 / 0.3
    denom = 1.0 + z * z / n_eff
    raw = (1.0 + z * z / (2 * n_eff)) / denom + z / denom * np.sqrt(z * z / (4 * n_eff * n_eff))
    assert raw > 1.0  # the case really rounds past 1
    lo, hi = wilson_bounds(1.0, 6, 0.3, z)
    assert hi == 1.0
    assert lo == pytest.approx(_wilson_fpc_roots(6, 6, None, z * np.sqrt(0.3))[0], rel=1e-12)


def test_wilson_interval_fields_and_se() -> None:
    est = wilson_interval(7, 20, n_population=60, confidence=0.9)
    f = 40 / 59
    assert est.value == 0.35
    assert est.se == pytest.approx(np.sqrt(f * 0.35 * 0.65 / 20), rel=1e-12)
    assert est.n == 20 and isinstance(est.n, int)
    assert est.n_population == 60
    assert est.confidence == 0.9
    assert est.method == "wilson_fpc"
    z = stats.norm.ppf(0.95)
    assert (est.ci_low, est.ci_high) == pytest.approx(_wilson_fpc_roots(7, 20, 60, z), rel=1e-12)
    plain = wilson_interval(7, 20)
    assert plain.se == pytest.approx(np.sqrt(0.35 * 0.65 / 20), rel=1e-12)
    assert plain.n_population is None and plain.method == "wilson" and plain.confidence == 0.95


@pytest.mark.parametrize("n", [0, True, -3])
def test_wilson_interval_refuses_a_bad_n(n) -> None:
    with pytest.raises(ValueError, match=_exact(f"n: expected a positive count, got {n}")):
        wilson_interval(0, n)


@pytest.mark.parametrize("successes", [-1, 11])
def test_wilson_interval_refuses_bad_successes(successes) -> None:
    message = f"successes: expected 0 <= successes <= n, got {successes}"
    with pytest.raises(ValueError, match=_exact(message)):
        wilson_interval(successes, 10)


# -- McNemar ----------------------------------------------------------------------------------------
def test_mcnemar_exact_counts_both_discordant_cells() -> None:
    a = np.array([1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1])
    b = np.array([0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 0])
    n10 = sum(1 for x, y in zip(a, b, strict=True) if x == 1 and y == 0)
    n01 = sum(1 for x, y in zip(a, b, strict=True) if x == 0 and y == 1)
    assert (n10, n01) == (3, 5)
    p, m10, m01 = mcnemar_exact(a, b)
    assert (m10, m01) == (3, 5)
    # two-sided exact binomial by enumeration: sum of outcomes no more likely than the observed one
    pmf = stats.binom.pmf(np.arange(9), 8, 0.5)
    assert p == pytest.approx(pmf[pmf <= pmf[3] * (1 + 1e-9)].sum(), rel=1e-12)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (np.array([1, 0, 1]), np.array([1, 0, 1, 0])),
        (np.ones((2, 3)), np.zeros((2, 3))),
    ],
)
def test_mcnemar_exact_refuses_misaligned_input(a, b) -> None:
    message = "correct_b: expected a 1-d array aligned with correct_a"
    with pytest.raises(ValueError, match=_exact(message)):
        mcnemar_exact(a, b)


# -- paired bootstrap -------------------------------------------------------------------------------
def _slow_bootstrap(d: np.ndarray, n_boot: int, confidence: float, seed: int) -> tuple:
    """Replays the documented draw (multinomial counts, one resample at a time) on the same stream."""
    n = d.shape[0]
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_boot)
    means = np.array([np.repeat(d, row).mean() for row in counts])
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return lo, hi, means.std(ddof=1)


def test_paired_bootstrap_equals_slow_reference_with_default_n_boot() -> None:
    rng = np.random.default_rng(11)
    a = rng.integers(0, 2, 40).astype(float)
    b = rng.integers(0, 2, 40).astype(float)
    est = paired_bootstrap(a, b, rng=7)
    lo, hi, se = _slow_bootstrap(a - b, 2000, 0.95, 7)
    assert (est.ci_low, est.ci_high, est.se) == pytest.approx((lo, hi, se), rel=1e-12, abs=1e-15)
    assert est.value == pytest.approx((a - b).mean())
    assert est.n == 40 and est.n_population is None
    assert est.method == "paired_bootstrap" and est.confidence == 0.95
    est90 = paired_bootstrap(a, b, n_boot=500, confidence=0.9, rng=7)
    lo90, hi90, se90 = _slow_bootstrap(a - b, 500, 0.9, 7)
    assert est90.confidence == 0.9
    assert (est90.ci_low, est90.ci_high, est90.se) == pytest.approx((lo90, hi90, se90), rel=1e-12)


def test_paired_bootstrap_in_several_memory_chunks_equals_slow_reference() -> None:
    """n = 2500 items: chunks of 800 resamples, the last one partial (n_boot = 1000)."""
    rng = np.random.default_rng(12)
    a = rng.integers(0, 2, 2500).astype(float)
    b = rng.integers(0, 2, 2500).astype(float)
    est = paired_bootstrap(a, b, n_boot=1000, rng=3)
    lo, hi, se = _slow_bootstrap(a - b, 1000, 0.95, 3)
    assert (est.ci_low, est.ci_high, est.se) == pytest.approx((lo, hi, se), rel=1e-12)


def test_paired_bootstrap_single_item_and_numeric_text() -> None:
    one = paired_bootstrap([1.0], [0.0], n_boot=50, rng=1)
    assert (one.value, one.ci_low, one.ci_high, one.se) == (1.0, 1.0, 1.0, 0.0)
    # inputs are coerced to float: numbers read as text (a CSV column) give the same estimate
    a, b = [1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 1, 1]
    ref = paired_bootstrap(a, b, n_boot=200, rng=4)
    assert paired_bootstrap([str(v) for v in a], b, n_boot=200, rng=4) == ref
    assert paired_bootstrap(a, [str(v) for v in b], n_boot=200, rng=4) == ref


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([], []),
        ([1.0, 0.0], [1.0, 0.0, 1.0]),
        (np.ones((2, 2)), np.zeros((2, 2))),
    ],
)
def test_paired_bootstrap_refuses_bad_shapes(a, b) -> None:
    message = "values_b: expected a non-empty 1-d array aligned with values_a"
    with pytest.raises(ValueError, match=_exact(message)):
        paired_bootstrap(a, b, n_boot=10, rng=0)


# -- clustered SE -----------------------------------------------------------------------------------
def test_clustered_se_single_value_and_text_numbers() -> None:
    assert clustered_se([0.7], ["a"]) == 0.0
    x = [1, 0, 1, 1, 0, 0, 1]
    g = [0, 0, 1, 1, 2, 2, 2]
    xs = np.array(x, dtype=float)
    r = xs - xs.mean()
    by_hand = np.sqrt(sum(r[np.array(g) == c].sum() ** 2 for c in (0, 1, 2))) / 7
    assert clustered_se(x, g) == pytest.approx(by_hand, rel=1e-12)
    assert clustered_se([str(v) for v in x], g) == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(
    ("x", "c"),
    [
        ([], []),
        ([1.0, 0.0, 1.0], [0, 1]),
        (np.ones((2, 2)), np.zeros((2, 2))),
    ],
)
def test_clustered_se_refuses_bad_shapes(x, c) -> None:
    with pytest.raises(ValueError, match=_exact("clusters: expected a label per value")):
        clustered_se(x, c)


# -- score_subset -----------------------------------------------------------------------------------
def test_score_subset_single_item_and_text_numbers() -> None:
    one = score_subset([1], 10)
    assert one.value == 1.0 and one.n == 1 and one.n_population == 10
    z = stats.norm.ppf(0.975)
    assert (one.ci_low, one.ci_high) == pytest.approx(_wilson_fpc_roots(1, 1, 10, z), rel=1e-12)
    assert score_subset(["1", "0", "1"], 10) == score_subset([1, 0, 1], 10)


@pytest.mark.parametrize(
    "y",
    [[], [0.5, 1.0], np.ones((2, 3)), [1, 2, 0]],
)
def test_score_subset_refuses_non_binary_or_bad_shape(y) -> None:
    message = "correct_subset: expected a non-empty 1-d array of 0/1"
    with pytest.raises(ValueError, match=_exact(message)):
        score_subset(y, 100)


# -- normal_paired_comparison -----------------------------------------------------------------------
@pytest.mark.parametrize(("mean_diff", "expected"), [(0.1, 1.0), (-0.1, 0.0), (0.0, 0.5)])
def test_normal_paired_comparison_zero_se_follows_the_sign(mean_diff, expected) -> None:
    new = np.array([1, 0, 1, 1])
    base = np.array([0, 0, 1, 1])
    cmp = normal_paired_comparison(new, base, mean_diff, 0.0, 30)
    assert cmp.p_better == expected
    assert cmp.n_shared == 4 and cmp.n_population == 30
    assert (cmp.n_new_only, cmp.n_baseline_only) == (1, 0)


def test_normal_paired_comparison_positive_se() -> None:
    new = np.array([1, 0, 1, 1, 0])
    base = np.array([0, 1, 1, 0, 0])
    cmp = normal_paired_comparison(new, base, 0.04, 0.03, 25)
    assert cmp.p_better == pytest.approx(stats.norm.cdf(0.04 / 0.03), rel=1e-12)
    assert cmp.n_shared == 5 and cmp.n_population == 25
    assert cmp.mcnemar_p == pytest.approx(stats.binomtest(2, 3, 0.5).pvalue)


# -- compare_to_baseline ----------------------------------------------------------------------------
def _srs_se(d: np.ndarray, n_pop: int) -> float:
    n = d.shape[0]
    s2 = ((d - d.mean()) ** 2).sum() / (n - 1)
    return float(np.sqrt(s2 / n * (n_pop - n) / (n_pop - 1)))


def test_compare_to_baseline_two_items_uses_the_sample_sd() -> None:
    base = np.array([0, 1, 0, 1, 1, 0, 0, 1, 0, 0])
    idx = np.array([2, 5])
    new = np.array([1, 0])  # d = (1, 0)
    cmp = compare_to_baseline(new, base, idx)
    se = _srs_se(np.array([1.0, 0.0]), 10)
    assert cmp.se == pytest.approx(se, rel=1e-12)
    assert cmp.p_better == pytest.approx(stats.norm.cdf(0.5 / se), rel=1e-12)
    assert cmp.n_population == 10 and cmp.n_shared == 2


@pytest.mark.parametrize(("new", "expected"), [(1, 1.0), (0, 0.0)])
def test_compare_to_baseline_one_item_has_zero_se(new, expected) -> None:
    base = np.array([0, 1, 1, 0, 1])
    idx = [4] if new == 0 else [0]
    cmp = compare_to_baseline([new], base, idx)
    assert cmp.se == 0.0
    assert cmp.p_better == expected
    assert cmp.n_population == 5 and cmp.n_shared == 1


def test_compare_to_baseline_coerces_inputs() -> None:
    """Float item positions (read from JSON) and numbers as text give the same comparison."""
    base = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    new = [1, 1, 0, 1]
    idx = [0, 3, 5, 6]
    ref = compare_to_baseline(new, base, idx)
    d = np.array([1, 1, 0, 1], dtype=float) - base[idx]
    assert ref.mean_diff == pytest.approx(d.mean()) and ref.se == pytest.approx(_srs_se(d, 8))
    assert compare_to_baseline(new, base, [float(i) for i in idx]) == ref
    assert compare_to_baseline([str(v) for v in new], base, idx) == ref
    assert compare_to_baseline(new, [str(v) for v in base], idx) == ref


@pytest.mark.parametrize(
    ("new", "idx", "message"),
    [
        ([], [], "indices: expected one item position per result of the new model"),
        ([1, 0], [0, 1, 2], "indices: expected one item position per result of the new model"),
        ([1, 0, 1], [0, 1], "indices: expected one item position per result of the new model"),
        ([1, 0], [0, 6], "indices: positions must lie within the baseline's items"),
        ([1, 0], [0, 7], "indices: positions must lie within the baseline's items"),
        ([1, 0], [-1, 2], "indices: positions must lie within the baseline's items"),
        ([1, 0], [2, 2], "indices: positions must be distinct"),
    ],
)
def test_compare_to_baseline_refuses_bad_indices(new, idx, message) -> None:
    base = np.array([0, 1, 1, 0, 1, 0])
    with pytest.raises(ValueError, match=_exact(message)):
        compare_to_baseline(new, base, idx)


# -- dirichlet_p_better / mcnemar_exact_counts (issue 13) ------------------------------------------
def _beta_sf_half(n10: int, n01: int) -> float:
    """``P(Beta(1 + n10, 1 + n01) > 1/2) = P(Binomial(n10 + n01 + 1, 1/2) <= n10)`` (integer case)."""
    return float(stats.binom.cdf(n10, n10 + n01 + 1, 0.5))


@pytest.mark.parametrize(("n10", "n01"), [(0, 3), (4, 0), (0, 0), (7, 2), (1, 1)])
def test_dirichlet_p_better_closed_form_including_zero_counts(n10, n01) -> None:
    assert float(dirichlet_p_better(n10, n01)) == pytest.approx(_beta_sf_half(n10, n01), rel=1e-12)


def test_dirichlet_p_better_vectorised_and_text_numbers() -> None:
    got = dirichlet_p_better(["3", "0"], [1, 5])
    assert got == pytest.approx([_beta_sf_half(3, 1), _beta_sf_half(0, 5)], rel=1e-12)
    got = dirichlet_p_better([3, 0], ["1", "5"])
    assert got == pytest.approx([_beta_sf_half(3, 1), _beta_sf_half(0, 5)], rel=1e-12)


@pytest.mark.parametrize(("n10", "n01"), [(-1, 2), (2, -1), ([3, -2], [1, 1])])
def test_dirichlet_p_better_refuses_negative_counts(n10, n01) -> None:
    with pytest.raises(ValueError, match=_exact("n10: discordant counts must be non-negative")):
        dirichlet_p_better(n10, n01)


def test_mcnemar_exact_counts_equal_cells_and_text_numbers() -> None:
    """n10 = n01: twice the binomial cdf exceeds 1 and the p-value is capped at exactly 1."""
    assert 2 * stats.binom.cdf(3, 6, 0.5) > 1.0
    assert float(mcnemar_exact_counts(3, 3)) == 1.0
    ref = stats.binomtest(2, 9, 0.5).pvalue
    assert float(mcnemar_exact_counts("2", 7)) == pytest.approx(ref, rel=1e-12)
    assert float(mcnemar_exact_counts(2, "7")) == pytest.approx(ref, rel=1e-12)


# -- paired_outcomes --------------------------------------------------------------------------------
def test_paired_outcomes_all_cells_and_fields() -> None:
    a = np.array([1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0])
    b = np.array([0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0])
    cells = {(x, y): 0 for x in (0, 1) for y in (0, 1)}
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        cells[(x, y)] += 1
    po = paired_outcomes(a, b, min_discordant=0)
    assert (
        (po.n11, po.n10, po.n01, po.n00)
        == (
            cells[(1, 1)],
            cells[(1, 0)],
            cells[(0, 1)],
            cells[(0, 0)],
        )
        == (2, 3, 5, 2)
    )
    assert po.p_a_better == pytest.approx(_beta_sf_half(3, 5), rel=1e-12)
    assert po.mcnemar_p == pytest.approx(stats.binomtest(3, 8, 0.5).pvalue, rel=1e-12)
    assert po.min_discordant == 0 and po.status == "decidable"


def test_paired_outcomes_single_item_and_zero_threshold() -> None:
    po = paired_outcomes([1], [1], min_discordant=0)
    assert (po.n11, po.n10, po.n01, po.n00) == (1, 0, 0, 0)
    assert po.status == "decidable" and po.p_a_better == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([], [], "correct_b: expected a non-empty 1-d array aligned with correct_a"),
        ([1, 0], [1, 0, 1], "correct_b: expected a non-empty 1-d array aligned with correct_a"),
        (
            np.ones((2, 2)),
            np.ones((2, 2)),
            "correct_b: expected a non-empty 1-d array aligned with correct_a",
        ),
        ([1, 0, 2], [1, 0, 1], "correct_a: expected 0/1 results"),
        ([1, 0, 1], [1, 0, 2], "correct_b: expected 0/1 results"),
    ],
)
def test_paired_outcomes_refuses_bad_input(a, b, message) -> None:
    with pytest.raises(ValueError, match=_exact(message)):
        paired_outcomes(a, b)


@pytest.mark.parametrize("k", [-1, True])
def test_paired_outcomes_refuses_a_bad_threshold(k) -> None:
    with pytest.raises(ValueError, match=_exact("min_discordant: expected a non-negative count")):
        paired_outcomes([1, 0], [0, 0], min_discordant=k)


# -- repeated_samples_estimate ----------------------------------------------------------------------
def _repeated_reference(x, k, s2, n_pop, confidence):
    """The documented estimator, coded apart: Miller (2024) variance split with the FPC on Var(x)."""
    x = np.array(x, dtype=float)
    n = x.size
    mean = x.sum() / n
    var_xbar = ((x - mean) ** 2).sum() / (n - 1) if n > 1 else 0.0
    within = float(np.mean(s2))
    var_items = max(0.0, var_xbar - within / k)
    if n_pop is None:
        se = np.sqrt(var_xbar / n)
    else:
        se = np.sqrt((n_pop - n) / n_pop * var_items / n + within / (k * n))
    z = stats.norm.ppf(0.5 + confidence / 2)
    return mean, max(0.0, mean - z * se), min(1.0, mean + z * se), se, var_items, within


def _check_repeated(est, ref, n, k, confidence) -> None:
    value, lo, hi, se, var_items, within = ref
    got = (est.value, est.ci_low, est.ci_high, est.se, est.var_items, est.mean_within)
    assert got == pytest.approx((value, lo, hi, se, var_items, within), rel=1e-12, abs=1e-15)
    assert (est.n, est.k, est.confidence) == (n, k, confidence)


def test_repeated_samples_estimate_all_fields() -> None:
    x = [0.2, 0.6, 1.0, 0.4, 0.8, 0.0, 0.6]
    s2 = [5 / 4 * v * (1 - v) for v in x]
    est = repeated_samples_estimate(x, 5, confidence=0.9)
    ref = _repeated_reference(x, 5, s2, None, 0.9)
    assert 0.0 < ref[1] < ref[2] < 1.0  # the interval is not clipped here
    _check_repeated(est, ref, 7, 5, 0.9)
    default = repeated_samples_estimate(x, 5)
    assert default.confidence == 0.95
    _check_repeated(default, _repeated_reference(x, 5, s2, None, 0.95), 7, 5, 0.95)


def test_repeated_samples_estimate_with_population_and_given_variances() -> None:
    x = [0.0, 0.25, 1.0, 0.5, 0.75, 1.0, 0.0, 0.25]
    s2 = [0.0, 0.2, 0.05, 0.3, 0.25, 0.0, 0.1, 0.25]
    est = repeated_samples_estimate(x, 4, within_variance=s2, n_population=40)
    ref = _repeated_reference(x, 4, s2, 40, 0.95)
    assert ref[4] > 0 and ref[5] > 0  # both parts of the variance are at work
    _check_repeated(est, ref, 8, 4, 0.95)
    text = repeated_samples_estimate(
        [str(v) for v in x], 4, within_variance=[str(v) for v in s2], n_population=40
    )
    assert text == est
    # N = n: only the within-item part is left
    whole = repeated_samples_estimate(x, 4, within_variance=s2, n_population=8)
    assert whole.se == pytest.approx(np.sqrt(np.mean(s2) / (4 * 8)), rel=1e-12)


def test_repeated_samples_estimate_clips_the_interval_to_the_unit_range() -> None:
    hi_side = repeated_samples_estimate([1.0, 1.0, 0.5], 2)
    ref = _repeated_reference([1.0, 1.0, 0.5], 2, [0.0, 0.0, 0.5], None, 0.95)
    assert ref[0] + 1.96 * ref[3] > 1.0
    assert hi_side.ci_high == 1.0
    _check_repeated(hi_side, ref, 3, 2, 0.95)
    lo_side = repeated_samples_estimate([0.0, 0.0, 0.5], 2)
    assert lo_side.ci_low == 0.0


@pytest.mark.parametrize("k", [1, 2])
def test_repeated_samples_estimate_small_k(k) -> None:
    x = [0.0, 1.0, 0.5, 1.0] if k == 2 else [0.0, 1.0, 1.0, 1.0]
    s2 = [k / (k - 1) * v * (1 - v) for v in x] if k > 1 else [0.0] * 4
    est = repeated_samples_estimate(x, k)
    _check_repeated(est, _repeated_reference(x, k, s2, None, 0.95), 4, k, 0.95)
    assert est.mean_within == (0.0 if k == 1 else pytest.approx(2 * 0.25 / 4))


@pytest.mark.parametrize("n", [1, 2])
def test_repeated_samples_estimate_one_and_two_items(n) -> None:
    x = [0.75, 0.25][:n]
    est = repeated_samples_estimate(x, 4)
    s2 = [4 / 3 * v * (1 - v) for v in x]
    _check_repeated(est, _repeated_reference(x, 4, s2, None, 0.95), n, 4, 0.95)
    if n == 1:
        assert est.se == 0.0 and est.ci_low == est.ci_high == 0.75


def test_repeated_samples_se_for_accepts_text_numbers() -> None:
    est = repeated_samples_estimate([0.0, 0.25, 1.0, 0.5, 0.75], 4)
    want = np.sqrt((est.var_items + est.mean_within / 8) / 50)
    assert float(est.se_for("50", 8)) == pytest.approx(want, rel=1e-12)
    assert float(est.se_for(50, "8")) == pytest.approx(want, rel=1e-12)


SCORES_MESSAGE = "scores: expected a non-empty 1-d array of per-item scores in [0, 1]"


@pytest.mark.parametrize(
    "x", [[], [0.5, -0.1], [0.5, 1.2], [0.5, float("nan")], np.full((2, 2), 0.5)]
)
def test_repeated_samples_estimate_refuses_bad_scores(x) -> None:
    with pytest.raises(ValueError, match=_exact(SCORES_MESSAGE)):
        repeated_samples_estimate(x, 2)


@pytest.mark.parametrize("k", [0, True, 2.5, -1])
def test_repeated_samples_estimate_refuses_a_bad_k(k) -> None:
    message = f"k: expected a positive number of samples per item, got {k}"
    with pytest.raises(ValueError, match=_exact(message)):
        repeated_samples_estimate([0.5, 0.25], k)


@pytest.mark.parametrize("s2", [[0.1, 0.2, 0.3], [0.1, -0.01]])
def test_repeated_samples_estimate_refuses_bad_within_variance(s2) -> None:
    message = "within_variance: expected one non-negative variance per item"
    with pytest.raises(ValueError, match=_exact(message)):
        repeated_samples_estimate([0.5, 0.25], 2, within_variance=s2)


def test_repeated_samples_estimate_refuses_a_population_below_n() -> None:
    message = "n_population: smaller than the number of items"
    with pytest.raises(ValueError, match=_exact(message)):
        repeated_samples_estimate([0.5, 0.25, 1.0], 2, n_population=2)
