"""Scoring statistics against scipy and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.stats import (
    clustered_se,
    compare_to_baseline,
    mcnemar_exact,
    paired_bootstrap,
    score_subset,
    wilson_interval,
)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (7, 20), (20, 20), (130, 448)])
def test_wilson_matches_scipy(k, n) -> None:
    ours = wilson_interval(k, n)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert ours.ci_low == pytest.approx(ref.low, abs=1e-12)
    assert ours.ci_high == pytest.approx(ref.high, abs=1e-12)
    assert ours.value == k / n and ours.method == "wilson"


def test_wilson_finite_population_correction() -> None:
    plain = wilson_interval(7, 20)
    fpc = wilson_interval(7, 20, n_population=40)
    huge = wilson_interval(7, 20, n_population=10**9)
    assert fpc.ci_high - fpc.ci_low < plain.ci_high - plain.ci_low
    assert huge.ci_low == pytest.approx(plain.ci_low, abs=1e-7)
    census = wilson_interval(7, 20, n_population=20)
    assert census.ci_low == census.ci_high == 0.35 and census.se == 0.0
    # effective sample size n / f: FPC interval equals the plain Wilson formula at n_eff
    f = (40 - 20) / 39
    n_eff = 20 / f
    z = stats.norm.ppf(0.975)
    center = (0.35 + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    assert (fpc.ci_low + fpc.ci_high) / 2 == pytest.approx(center)
    with pytest.raises(ValueError, match="n_population"):
        wilson_interval(7, 20, n_population=10)


def test_mcnemar_exact_known_answers() -> None:
    a = np.array([1] * 10 + [0] * 5 + [1] * 3)
    b = np.array([0] * 10 + [0] * 5 + [1] * 3)
    p, n10, n01 = mcnemar_exact(a, b)
    assert (n10, n01) == (10, 0) and p == pytest.approx(2 * 0.5**10)
    p2, *_ = mcnemar_exact(b, b)
    assert p2 == 1.0
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 2, 100), rng.integers(0, 2, 100)
    p3, m10, m01 = mcnemar_exact(x, y)
    assert p3 == pytest.approx(stats.binomtest(m10, m10 + m01, 0.5).pvalue)


def test_paired_bootstrap_reproducible_and_centered() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 300).astype(float)
    b = rng.integers(0, 2, 300).astype(float)
    r1 = paired_bootstrap(a, b, n_boot=3000, rng=5)
    r2 = paired_bootstrap(a, b, n_boot=3000, rng=5)
    assert r1 == r2
    assert r1.value == pytest.approx((a - b).mean())
    assert r1.ci_low < r1.value < r1.ci_high
    analytic = (a - b).std(ddof=1) / np.sqrt(300)
    assert r1.se == pytest.approx(analytic, rel=0.1)


def test_clustered_se_closed_forms() -> None:
    x = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    singles = clustered_se(x, np.arange(6))
    assert singles == pytest.approx(np.sqrt(((x - x.mean()) ** 2).sum()) / 6)
    assert clustered_se(x, np.zeros(6)) == pytest.approx(0.0, abs=1e-15)
    clusters = np.array(["a", "a", "b", "b", "c", "c"])
    resid = x - x.mean()
    by_hand = np.sqrt(sum(resid[clusters == g].sum() ** 2 for g in "abc")) / 6
    assert clustered_se(x, clusters) == pytest.approx(by_hand)
    # Miller's form: SE_CLT^2 + cross terms within clusters
    cross = sum(
        resid[i] * resid[j]
        for i in range(6)
        for j in range(6)
        if i != j and clusters[i] == clusters[j]
    )
    assert clustered_se(x, clusters) ** 2 == pytest.approx(singles**2 + cross / 36)


def test_score_subset_and_compare_to_baseline() -> None:
    est = score_subset(np.array([1, 0, 1, 1]), 100)
    assert est.value == 0.75 and est.method == "wilson_fpc"
    base = np.array([1, 0] * 50)
    same = compare_to_baseline(base[:40], base, np.arange(40))
    assert same.p_better == 0.5 and same.mean_diff == 0.0 and same.mcnemar_p == 1.0
    better = np.ones(40)
    cmp = compare_to_baseline(better, base, np.arange(40))
    assert cmp.p_better > 0.99 and cmp.n_new_only == 20 and cmp.n_baseline_only == 0
    se = np.std(better - base[:40], ddof=1) / np.sqrt(40) * np.sqrt(60 / 99)
    assert cmp.se == pytest.approx(se)
    assert cmp.p_better == pytest.approx(stats.norm.cdf(0.5 / se))
    with pytest.raises(ValueError, match="indices"):
        compare_to_baseline(better, base, np.zeros(40, dtype=int))


# -- issue 13: pairs, repeated samples ------------------------------------------------------------
from app.core.estimation.stats import (  # noqa: E402
    dirichlet_p_better,
    mcnemar_exact_counts,
    paired_outcomes,
    repeated_samples_estimate,
)


def test_dirichlet_p_better_equals_monte_carlo() -> None:
    """P(p10 > p01) under Dirichlet(1 + n) by 200,000 draws (MC SE ~0.001)."""
    n = np.array([30, 12, 7, 51])
    draws = np.random.default_rng(0).dirichlet(1 + n, size=200_000)
    mc = np.mean(draws[:, 1] > draws[:, 2])
    assert float(dirichlet_p_better(12, 7)) == pytest.approx(mc, abs=0.005)
    assert float(dirichlet_p_better(5, 5)) == pytest.approx(0.5)


@pytest.mark.parametrize(("n10", "n01"), [(0, 0), (3, 9), (9, 3), (20, 21), (0, 6)])
def test_mcnemar_counts_match_binomtest(n10, n01) -> None:
    ref = 1.0 if n10 + n01 == 0 else stats.binomtest(n10, n10 + n01, 0.5).pvalue
    assert float(mcnemar_exact_counts(n10, n01)) == pytest.approx(ref, abs=1e-12)


def test_paired_outcomes_undecidable_below_k() -> None:
    a = np.array([1, 1, 0, 0, 1, 1, 0, 1])
    b = np.array([1, 0, 0, 1, 1, 0, 0, 1])
    po = paired_outcomes(a, b, min_discordant=4)
    assert (po.n11, po.n10, po.n01, po.n00) == (3, 2, 1, 2)
    assert po.undecidable and po.status == "undecidable"
    assert paired_outcomes(a, b, min_discordant=3).status == "decidable"
    assert po.mcnemar_p == pytest.approx(mcnemar_exact(a, b)[0])


def test_repeated_samples_split_by_simulation() -> None:
    """Items with true means q_i, K = 4 Bernoulli samples: the SE of the mean over 4,000
    simulated runs matches sqrt((Var(q) + E[q(1 - q)] / K) / n) within 5 %, and the plug-in SE
    and the variance split estimate their targets."""
    rng = np.random.default_rng(2)
    n, k, runs = 200, 4, 4000
    q = rng.beta(2, 3, n)
    xbar = rng.binomial(k, q, size=(runs, n)) / k
    theory = np.sqrt((q.var() + np.mean(q * (1 - q)) / k) / n)
    sims_q = rng.beta(2, 3, (runs, n))
    xbar_full = rng.binomial(k, sims_q) / k  # items themselves resampled (infinite population)
    assert xbar_full.mean(axis=1).std() == pytest.approx(theory, rel=0.05)
    est = repeated_samples_estimate(xbar[0], k)
    assert est.se == pytest.approx(theory, rel=0.15)
    assert est.var_items == pytest.approx(q.var(), rel=0.35)
    assert est.mean_within == pytest.approx(np.mean(q * (1 - q)), rel=0.1)
    assert est.se_for(n, k) == pytest.approx(theory, rel=0.15)
    with pytest.raises(ValueError, match="scores"):
        repeated_samples_estimate([0.5, 1.2], 2)
