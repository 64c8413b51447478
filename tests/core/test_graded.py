"""Graded scores, pass@k and the graded verdict / leaderboard engines (issue 35), against brute
force, scipy and the exact 0/1 answers. SYNTHETIC data throughout."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.bounded import betting_interval, pass_at_k, sign_flip_test
from app.core.ranking.graded import graded_leaderboard
from app.core.ranking.leaderboard import adjust_pvalues, rank_intervals, tiers
from app.core.reliability.exact import exact_agreement, pair_probability
from app.core.reliability.graded import simulated_agreement, simulated_order, simulated_verdict


def _graded(rng, m, n, quarters=True):
    """Models x items: mass at 0 and 1 plus a continuum, model strength shifting the scores."""
    ability = rng.normal(0, 0.15, (m, 1))
    y = np.clip(rng.beta(0.6, 0.6, (m, n)) + ability, 0, 1)
    return np.round(y * 4) / 4 if quarters else y


# --- pass@k -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_pass_at_k_equals_the_share_of_k_subsets_with_a_correct_sample(n):
    for c in range(n + 1):
        samples = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)


def test_pass_at_k_is_vectorised_and_checks_its_counts():
    got = pass_at_k(np.array([10, 10, 4]), np.array([0, 3, 4]), 2)
    assert got == pytest.approx([0.0, 1 - math.comb(7, 2) / math.comb(10, 2), 1.0])
    assert pass_at_k(20, 5, 1) == pytest.approx(0.25)  # pass@1 is the mean
    for bad in ((3, 4, 1), (3, 1, 4), (3, 1.5, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)
    with pytest.raises(ValueError):
        pass_at_k(5, 1, 0)


# --- sign-flip test ---------------------------------------------------------------------------


def _brute_sign_flip(d):
    d = np.asarray(d, float)
    obs = abs(d.sum())
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=d.size)))
    return float(np.mean(np.abs(signs @ d) >= obs - 1e-9))


@pytest.mark.parametrize("seed", range(6))
def test_exact_sign_flip_equals_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    d = np.round(rng.uniform(-1, 1, 11) * 4) / 4  # quarters: many ties in |sum|
    got = sign_flip_test(d)
    assert got.method == "exact" and got.mc_error == 0.0
    assert got.p_value == pytest.approx(_brute_sign_flip(d[d != 0]), abs=1e-12)


def test_exact_sign_flip_matches_scipy_permutation_test():
    rng = np.random.default_rng(3)
    d = rng.uniform(-1, 1, 14)
    res = stats.permutation_test(
        (d,), lambda x: np.abs(x.sum()), permutation_type="samples", n_resamples=np.inf,
        alternative="greater",
    )  # fmt: skip
    assert sign_flip_test(d).p_value == pytest.approx(res.pvalue, abs=1e-12)


def test_monte_carlo_sign_flip_reports_seed_and_error_and_agrees_with_exact():
    rng = np.random.default_rng(5)
    d = rng.uniform(-0.6, 0.8, 24)
    exact = sign_flip_test(d)
    mc = sign_flip_test(d, max_exact=10, n_resamples=40_000, seed=7)
    assert mc.method == "monte_carlo" and mc.seed == 7 and mc.n_resamples == 40_000
    assert mc.mc_error > 0
    assert abs(mc.p_value - exact.p_value) < 4 * mc.mc_error + 1e-4
    assert sign_flip_test(d, max_exact=10, seed=7) == sign_flip_test(d, max_exact=10, seed=7)


def test_sign_flip_edges():
    assert sign_flip_test(np.zeros(30)).p_value == 1.0
    assert sign_flip_test(np.array([0.5] * 8)).p_value == pytest.approx(2 / 256)
    with pytest.raises(ValueError):
        sign_flip_test(np.array([1.5]))


# --- betting interval -------------------------------------------------------------------------


def test_betting_interval_covers_on_graded_populations_and_shrinks_with_n():
    rng = np.random.default_rng(11)
    big_n = 300
    pop = np.clip(rng.beta(0.5, 0.5, big_n), 0, 1)
    pop[:60], pop[60:100] = 0.0, 1.0
    mu = pop.mean()
    widths = []
    for n in (25, 100):
        x = np.stack([pop[rng.choice(big_n, n, replace=False)] for _ in range(150)])
        lo, hi = betting_interval(x, big_n)
        assert np.mean((lo <= mu) & (mu <= hi)) >= 0.93
        assert np.all(lo <= x.mean(1)) and np.all(x.mean(1) <= hi)
        widths.append(float(np.mean(hi - lo)))
    assert widths[1] < 0.6 * widths[0]


def test_betting_interval_with_the_whole_population_is_tight():
    rng = np.random.default_rng(2)
    pop = rng.uniform(0, 1, 60)
    lo, hi = betting_interval(pop, 60)
    assert lo[0] <= pop.mean() <= hi[0] and hi[0] - lo[0] < 0.01


def test_betting_interval_on_skewed_judge_like_scores_covers():
    rng = np.random.default_rng(4)
    big_n = 400
    pop = np.where(rng.random(big_n) < 0.7, 0.0, rng.beta(0.7, 4.0, big_n))  # most near 0
    mu = pop.mean()
    x = np.stack([pop[rng.choice(big_n, 25, replace=False)] for _ in range(150)])
    lo, hi = betting_interval(x, big_n)
    assert np.mean((lo <= mu) & (mu <= hi)) >= 0.93


# --- simulated verdicts -----------------------------------------------------------------------


def test_simulated_order_matches_the_exact_hypergeometric_answer_on_01_data():
    rng = np.random.default_rng(8)
    c = (rng.random((2, 120)) < np.array([[0.62], [0.55]])).astype(np.uint8)
    exact = pair_probability(c, 0, 1, 30)
    sim = simulated_order(c[0], c[1], 30, n_draws=8000)
    assert abs(sim.p_same - float(exact.p_greater)) < 4 * sim.mc_error
    assert abs(sim.p_tie - float(exact.p_equal)) < 0.03


def test_simulated_agreement_mdad_is_close_to_the_exact_one_on_01_data():
    rng = np.random.default_rng(9)
    c = (rng.random((12, 150)) < rng.uniform(0.3, 0.8, (12, 1))).astype(np.uint8)
    exact = exact_agreement(c, 40)
    sim = simulated_agreement(c, 40, n_draws=4000)
    assert sim.mode == "simulated" and sim.seed is not None and sim.n_runs == 4000
    assert sim.n_pairs == exact.n_pairs
    assert abs(sim.mean_agreement - exact.mean_agreement) < 0.01
    assert exact.mdad is not None and sim.mdad is not None
    assert abs(sim.mdad - exact.mdad) <= 0.02


def test_simulated_verdict_on_graded_scores():
    rng = np.random.default_rng(10)
    y = _graded(rng, 6, 40)
    v, order = simulated_verdict(y, 0, 1, 20)
    assert v.basis == "simulated" and v.ci_low <= v.p_same <= v.ci_high
    assert v.gap == pytest.approx(y[0].mean() - y[1].mean())
    assert 0 < order.mc_error < 0.01
    full, _ = simulated_verdict(y, 0, 1, 40)  # the whole benchmark orders it like itself
    assert full.p_same == 1.0 or y[0].mean() == y[1].mean()
    if v.n_needed is not None:
        at, _ = simulated_verdict(y, 0, 1, v.n_needed)
        assert at.p_same >= v.threshold


# --- graded leaderboard -----------------------------------------------------------------------


@pytest.mark.parametrize("correction", ["holm", "bh", "none"])
def test_graded_leaderboard_equals_pairwise_ttests_and_the_tier_rules(correction):
    rng = np.random.default_rng(12)
    y = _graded(rng, 14, 40)
    board = graded_leaderboard(y, correction=correction)
    i, j = np.triu_indices(14, 1)
    ref = np.array([stats.ttest_rel(y[a], y[b]).pvalue for a, b in zip(i, j, strict=True)])
    adj = adjust_pvalues(ref, correction)
    pairs = board.pairs
    assert np.abs(pairs.p_value - ref).max() < 1e-5
    assert np.abs(pairs.p_adjusted - adj).max() < 1e-5
    np.testing.assert_array_equal(pairs.significant, adj <= 0.05)
    acc = y.mean(axis=1)
    better = np.zeros((14, 14), dtype=bool)
    sig = adj <= 0.05
    better[i[sig & (acc[i] > acc[j])], j[sig & (acc[i] > acc[j])]] = True
    better[j[sig & (acc[j] > acc[i])], i[sig & (acc[j] > acc[i])]] = True
    lo, hi = rank_intervals(better)
    order = np.lexsort((np.arange(14), -acc))
    r = board.rows
    np.testing.assert_array_equal(r.model, order)
    np.testing.assert_array_equal(r.rank_low, lo[order])
    np.testing.assert_array_equal(r.rank_high, hi[order])
    np.testing.assert_array_equal(r.tier, tiers(order, better)[order])


def test_graded_leaderboard_blocks_give_the_same_board(monkeypatch):
    import app.core.ranking.graded as graded

    rng = np.random.default_rng(13)
    y = _graded(rng, 40, 30, quarters=False)
    whole = graded_leaderboard(y)
    monkeypatch.setattr(graded, "_BLOCK_CELLS", 7 * 40)  # blocks of 7 rows
    blocked = graded_leaderboard(y)
    for f in ("rank_low", "rank_high", "tier", "model"):
        np.testing.assert_array_equal(getattr(whole.rows, f), getattr(blocked.rows, f))
    np.testing.assert_allclose(whole.pairs.p_adjusted, blocked.pairs.p_adjusted, atol=1e-6)


def test_graded_leaderboard_identical_and_shifted_models():
    y = np.tile(np.linspace(0.1, 0.8, 20), (3, 1))
    y[2] = np.minimum(1.0, y[2] + 0.1)  # every item higher: a certain difference
    board = graded_leaderboard(y)
    p = board.pairs
    assert p.p_value[0] == 1.0 and not p.significant[0]  # identical
    assert p.p_value[1] == 0.0 and p.significant[1]
    assert board.rows.model[0] == 2 and board.rows.tier[0] == 1 and board.n_tiers == 2


# --- subset intervals chosen by the data --------------------------------------------------------


def _sel(method, idx, w):
    from app.core.results import Selection

    return Selection(
        method=method, indices=idx, weights=w, estimator="mean", estimate_on="correct",
        signal="correct", n_requested=idx.size, n_candidates=idx.size, seed=0,
    )  # fmt: skip


def test_score_models_picks_betting_for_graded_rows_and_keeps_01_intervals():
    from app.core.scoring.score_models import score_models

    rng = np.random.default_rng(14)
    big_n, n = 200, 25
    idx = np.sort(rng.choice(big_n, n, replace=False))
    sel = _sel("random", idx, np.full(n, 1 / n))
    graded = np.round(rng.uniform(0, 1, (2, n)) * 4) / 4
    binary = (rng.random((2, n)) < 0.6).astype(float)
    (g,) = score_models(sel, graded, big_n, estimators=("mean",))
    (b,) = score_models(sel, binary, big_n, estimators=("mean",))
    lo, hi = betting_interval(graded, big_n)
    assert g.interval == "betting_fpc"
    np.testing.assert_allclose(g.ci_low, lo)
    np.testing.assert_allclose(g.ci_high, hi)
    assert b.interval == "jeffreys_fpc"  # 0/1 data: today's interval
    (mixed,) = score_models(sel, np.vstack([graded[:1], binary[:1]]), big_n, estimators=("mean",))
    assert mixed.ci_low[0] == pytest.approx(lo[0]) and mixed.ci_low[1] == pytest.approx(b.ci_low[0])


def test_stratified_graded_interval_contains_the_t_interval_and_the_rescaled_betting_one():
    from app.core.scoring.score_models import score_models

    rng = np.random.default_rng(15)
    big_n = 200
    strata = np.repeat(np.arange(4), [80, 60, 40, 20])
    idx = np.concatenate(
        [rng.choice(np.flatnonzero(strata == h), 8, replace=False) for h in range(4)]
    )
    w = np.bincount(strata)[strata[idx]] / (big_n * 8)
    sel = _sel("subtask_stratified", idx, w)
    y = np.round(rng.uniform(0, 1, (3, idx.size)) * 4) / 4
    (g,) = score_models(sel, y, big_n, estimators=("mean",))
    (b,) = score_models(sel, (y > 0.5).astype(float), big_n, estimators=("mean",))
    assert g.interval == "stratified_ht_betting" and b.interval == "stratified_ht"
    assert np.all(g.ci_low <= g.value) and np.all(g.value <= g.ci_high)
    assert np.all(g.ci_high - g.ci_low >= 2 * 1.9 * g.se)  # at least the t-interval's width


# --- curve-based verdicts on graded scores ----------------------------------------------------


def test_curve_based_verdict_reads_graded_curves_at_the_graded_gap():
    """A method answered from an analysis' curves (run on the same graded matrix) takes graded
    rows: the pair enters only through its graded gap; the exact methods still need 0/1."""
    from app.core.reliability.mdad import analyze_protocol
    from app.core.reliability.planning import curve_probability, verdict
    from app.core.reliability.protocol import run_protocol

    rng = np.random.default_rng(11)
    y = _graded(rng, 40, 80)
    res = run_protocol(
        y, ("tiny_benchmarks",), (10, 20), runs=3, n_sources=20, n_targets=15, seed=3
    )
    cells = analyze_protocol(res, mode="robust", splits=("seen",))
    a, b = int(np.argmax(y.mean(axis=1))), int(np.argmin(y.mean(axis=1)))
    v = verdict(y, a, b, 15, method="tiny_benchmarks", results=cells)
    gap = y[a].mean() - y[b].mean()
    assert v.basis == "robust_curve" and v.gap == pytest.approx(gap)
    same, tie, rev, _, _ = curve_probability(cells, gap, 15)
    assert (v.p_same, v.p_tie, v.p_reversed) == pytest.approx((same, tie, rev))
    p10, p20 = (float(c.curve.at(gap)) for c in cells)
    assert min(p10, p20) - 1e-12 <= v.p_same <= max(p10, p20) + 1e-12
    with pytest.raises(ValueError, match="0/1"):
        verdict(y, a, b, 15)  # random is exact: hypergeometric, 0/1 only
    with pytest.raises(ValueError, match=r"scores in \[0, 1\]"):
        verdict(y * 2, a, b, 15, method="tiny_benchmarks", results=cells)
