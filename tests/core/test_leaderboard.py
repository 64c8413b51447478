"""Known answers for the leaderboard engine (app.core.ranking.leaderboard); no server needed.

Oracles: scipy's exact binomial test, statsmodels' ``multipletests``, brute-force counting,
scipy's hypergeometric distribution, the existing scalar scorers in app.core.estimation.stats/scoring, and
simulations whose sizes are stated next to their bounds.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from app.core.estimation.stats import compare_to_baseline, wilson_interval
from app.core.ranking.leaderboard import (
    adjust_pvalues,
    finite_population_pvalues,
    leaderboard,
    leaderboard_for_selection,
    mcnemar_pvalues,
    pairwise_counts,
    rank_intervals,
    tiers,
)
from app.core.scoring.score_models import weighted_estimate, weighted_paired_comparison
from app.core.selectors import make_selector

ALPHA = 0.05


def _synthetic(rng, m=40, n=60):
    """Models of varied skill on items of varied difficulty (SYNTHETIC)."""
    skill = rng.uniform(-1.5, 1.5, m)[:, None]
    diff = rng.normal(0.0, 1.0, n)[None, :]
    return (rng.random((m, n)) < 1 / (1 + np.exp(-(skill - diff)))).astype(np.uint8)


def _pair_index(m, a, b):
    """Position of pair (a < b) in np.triu_indices(m, 1) order."""
    return a * m - a * (a + 1) // 2 + (b - a - 1)


# ------------------------------------------------------------------------------ p-values
@pytest.mark.parametrize("source", ["gpqa", "synthetic"])
def test_pvalues_equal_scipy_binomtest_on_200_random_pairs(gpqa, source):
    rng = np.random.default_rng(14)
    c = gpqa["correct"] if source == "gpqa" else _synthetic(rng)
    lb = leaderboard(c)
    pick = rng.choice(lb.pairs.a.size, 200, replace=False)
    for i in pick:
        a, b = int(lb.pairs.a[i]), int(lb.pairs.b[i])
        n10 = int(np.sum((c[a] == 1) & (c[b] == 0)))
        n01 = int(np.sum((c[a] == 0) & (c[b] == 1)))
        assert (lb.pairs.n10[i], lb.pairs.n01[i]) == (n10, n01)
        want = stats.binomtest(n10, n10 + n01, 0.5).pvalue if n10 + n01 else 1.0
        assert lb.pairs.p_value[i] == pytest.approx(want, rel=1e-9, abs=1e-300)
        assert lb.pairs.p_better[i] == pytest.approx(stats.beta.sf(0.5, 1 + n10, 1 + n01))
        assert lb.pairs.difference[i] == pytest.approx((n10 - n01) / c.shape[1])


def test_mid_p_matches_its_definition():
    n10, n01 = np.meshgrid(np.arange(0, 25), np.arange(0, 25))
    got = mcnemar_pvalues(n10.ravel(), n01.ravel(), mid_p=True)
    for x, y, p in zip(n10.ravel(), n01.ravel(), got, strict=True):
        k = x + y
        pmf = stats.binom.pmf(np.arange(k + 1), k, 0.5)
        lo = min(x, y)  # doubled one-sided mid-p (Fagerland et al. 2013): 1 when x = y
        want = 1.0 if x == y else min(1.0, 2 * (pmf[:lo].sum() + 0.5 * pmf[lo]))
        assert p == pytest.approx(want, abs=1e-12), (x, y)
    assert (got <= mcnemar_pvalues(n10.ravel(), n01.ravel()) + 1e-15).all()


def test_pairwise_counts_equal_brute_force_with_coverage():
    rng = np.random.default_rng(3)
    c = _synthetic(rng, m=9, n=50)
    mask = rng.random(c.shape) < 0.8
    mask[4, :] = False
    mask[4, :5] = True
    mask[5, :] = False
    mask[5, 45:] = True  # rows 4 and 5 share no item
    pc = pairwise_counts(c, coverage=mask)
    for i in range(9):
        for j in range(9):
            both = mask[i] & mask[j]
            ci, cj = c[i][both], c[j][both]
            assert pc.n11[i, j] == np.sum((ci == 1) & (cj == 1))
            assert pc.n10[i, j] == np.sum((ci == 1) & (cj == 0))
            assert pc.n01[i, j] == np.sum((ci == 0) & (cj == 1))
            assert pc.n00[i, j] == np.sum((ci == 0) & (cj == 0))
            assert pc.n_shared[i, j] == both.sum()
    lb = leaderboard(c, coverage=mask)
    assert lb.unshared_pairs.tolist() == [[4, 5]]
    k = _pair_index(9, 4, 5)
    assert lb.pairs.p_value[k] == 1.0 and np.isnan(lb.pairs.difference[k])
    assert (lb.rows.rank_low <= lb.rows.rank).all() and (lb.rows.rank <= lb.rows.rank_high).all()
    row = {int(mdl): i for i, mdl in enumerate(lb.rows.model)}
    for mdl in range(9):
        assert lb.rows.accuracy[row[mdl]] == pytest.approx(c[mdl][mask[mdl]].mean())


# ------------------------------------------------------------------------------ multiplicity
@pytest.mark.parametrize(("ours", "theirs"), [("holm", "holm"), ("bh", "fdr_bh")])
def test_corrections_equal_statsmodels_multipletests(gpqa, ours, theirs):
    rng = np.random.default_rng(5)
    p_gpqa = leaderboard(gpqa["correct"]).pairs.p_value
    p_synth = np.r_[rng.random(300) ** 3, np.full(20, 0.01), np.ones(10), 0.0]
    for p in (p_gpqa, rng.permutation(p_synth)):
        want = multipletests(p, alpha=ALPHA, method=theirs)[1]
        np.testing.assert_allclose(adjust_pvalues(p, ours), want, rtol=1e-12, atol=1e-15)
        rej = multipletests(p, alpha=ALPHA, method=theirs)[0]
        assert np.array_equal(adjust_pvalues(p, ours) <= ALPHA, rej)
    lb = leaderboard(gpqa["correct"], correction=ours)
    np.testing.assert_allclose(
        lb.pairs.p_adjusted, multipletests(lb.pairs.p_value, method=theirs)[1], rtol=1e-12
    )


# ------------------------------------------------------------------------------ ranks / tiers
def test_rank_intervals_contain_point_rank(gpqa):
    rng = np.random.default_rng(7)
    c = gpqa["correct"]
    boards = [
        leaderboard(c),
        leaderboard(c, correction="bh"),
        leaderboard(c, population="benchmark"),
    ]
    for n in (25, 100):
        idx = rng.choice(c.shape[1], n, replace=False)
        boards.append(leaderboard(c[:, idx], population="benchmark", n_population=c.shape[1]))
    boards.append(leaderboard(np.repeat(_synthetic(rng, m=10, n=30), 3, axis=0)))  # ties
    for lb in boards:
        r = lb.rows
        assert (r.rank_low <= r.rank).all() and (r.rank <= r.rank_high).all()
        assert (r.rank_low >= 1).all() and (r.rank_high <= r.model.size).all()
        assert np.all(np.diff(r.accuracy) <= 0) and r.tier[0] == 1
        # the tier rule: each tier's first model is significantly better than every later tier
        sig = {
            (int(a), int(b))
            for a, b in zip(
                lb.pairs.a[lb.pairs.significant], lb.pairs.b[lb.pairs.significant], strict=True
            )
        }
        for t in range(1, lb.n_tiers + 1):
            head = int(r.model[np.argmax(r.tier == t)])
            for later in r.model[r.tier > t]:
                assert (min(head, later), max(head, later)) in sig


def test_point_rank_ties_share_best_rank():
    c = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 0], [1, 0, 0, 0]])
    lb = leaderboard(c)
    assert lb.rows.model.tolist() == [1, 0, 2, 3]
    assert lb.rows.rank.tolist() == [1, 2, 2, 4]


def test_identical_models_form_one_tier():
    rng = np.random.default_rng(1)
    row = (rng.random(300) < 0.6).astype(np.uint8)
    lb = leaderboard(np.tile(row, (6, 1)))
    assert lb.n_tiers == 1 and (lb.rows.tier == 1).all()
    assert (lb.pairs.p_value == 1.0).all() and (lb.pairs.difference == 0).all()
    assert (lb.rows.rank_low == 1).all() and (lb.rows.rank_high == 6).all()
    lbb = leaderboard(np.tile(row, (6, 1)), population="benchmark")
    assert lbb.n_tiers == 1 and (lbb.pairs.p_value == 1.0).all()


def test_tiers_and_rank_intervals_from_a_known_ordering():
    # 0 > 2 > 1 (significant), 1 ~ 3: tiers {0}, {2}, {1, 3}
    better = np.zeros((4, 4), dtype=bool)
    better[0, [1, 2, 3]] = True
    better[2, [1, 3]] = True
    assert tiers([0, 2, 1, 3], better).tolist() == [1, 3, 2, 3]
    lo, hi = rank_intervals(better)
    assert lo.tolist() == [1, 3, 2, 3] and hi.tolist() == [1, 4, 2, 4]


def test_clear_separation_gives_separate_tiers():
    n = 400
    c = np.zeros((3, n), dtype=np.uint8)
    c[0, :360] = 1
    c[1, :200] = 1
    c[2, :40] = 1
    lb = leaderboard(c)
    assert lb.n_tiers == 3 and lb.rows.rank_low.tolist() == [1, 2, 3]
    assert lb.rows.rank_high.tolist() == [1, 2, 3]


# ------------------------------------------------------------------------------ error control
def test_family_wise_error_when_all_models_are_equal():
    """m = 8 exchangeable models (i.i.d. draws given item difficulty), N = 120, R = 1000 runs.

    Bound: share <= alpha + 3 * sqrt(alpha (1 - alpha) / R) = 0.05 + 0.021. A procedure whose true
    FWER were 0.09 fails this with probability > 0.99 (its share's SE is 0.009). The same runs
    without correction must exceed 0.2 (28 tests; shows the test can fail).
    """
    rng = np.random.default_rng(20261201)
    m, n, runs = 8, 120, 1000
    q = rng.uniform(0.1, 0.9, n)
    holm = none = 0
    for _ in range(runs):
        c = (rng.random((m, n)) < q).astype(np.uint8)
        holm += leaderboard(c).pairs.significant.any()
        none += leaderboard(c, correction="none").pairs.significant.any()
    bound = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert holm / runs <= bound, holm / runs
    assert none / runs > 0.2, none / runs


def test_family_wise_error_of_subset_tests_when_full_benchmark_differences_are_zero():
    """Full benchmark: N = 200, m = 8 models with exactly 100 correct each (all Δ = 0). R = 600
    uniform subsets of n = 60 (and 150). Bound alpha + 3 SE = 0.05 + 0.027."""
    rng = np.random.default_rng(99)
    n_pop, m, runs = 200, 8, 600
    base = np.r_[np.ones(100), np.zeros(100)].astype(np.uint8)
    full = np.stack([rng.permutation(base) for _ in range(m)])
    bound = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / runs)
    for n in (60, 150):
        hits = 0
        for _ in range(runs):
            idx = rng.choice(n_pop, n, replace=False)
            lb = leaderboard(full[:, idx], population="benchmark", n_population=n_pop)
            hits += lb.pairs.significant.any()
        assert hits / runs <= bound, (n, hits / runs)


def test_newcombe_interval_covers_the_paired_difference():
    """R = 2000 two-model samples of N = 40, p10 = .15, p01 = .05: coverage of the 95% interval
    >= 0.93 (SE ~ 0.005)."""
    rng = np.random.default_rng(11)
    p = np.array([0.5, 0.15, 0.05, 0.30])  # n11, n10, n01, n00
    cells = rng.choice(4, size=(2000, 40), p=p)
    a = np.isin(cells, (0, 1)).astype(np.uint8)
    b = np.isin(cells, (0, 2)).astype(np.uint8)
    hit = 0
    for i in range(2000):
        lb = leaderboard(np.stack([a[i], b[i]]))
        hit += lb.pairs.ci_low[0] <= 0.10 <= lb.pairs.ci_high[0]
    assert hit / 2000 >= 0.93


# ------------------------------------------------------------------------------ subset mode
def test_finite_population_pvalues_equal_scipy_hypergeom_supremum():
    n_pop, n = 40, 16
    xs, ys = np.meshgrid(np.arange(0, 12), np.arange(0, 12))
    xs, ys = xs.ravel(), ys.ravel()
    keep = xs + ys <= n
    xs, ys = xs[keep], ys[keep]
    got = finite_population_pvalues(xs, ys, n, n_pop)
    got_mid = finite_population_pvalues(xs, ys, n, n_pop, mid_p=True)
    for x, y, p, pm in zip(xs, ys, got, got_mid, strict=True):
        k, lo = x + y, min(x, y)
        if k == 0 or x == y:
            assert p == 1.0
            continue
        ds = [d for d in range(k, n_pop - n + k + 1) if d % 2 == 0]
        tails = [2 * stats.hypergeom.cdf(lo, d, d // 2, k) for d in ds]
        mids = [t - stats.hypergeom.pmf(lo, d, d // 2, k) for t, d in zip(tails, ds, strict=True)]
        assert p == pytest.approx(min(1.0, max(tails, default=0.0)), abs=1e-12), (x, y)
        assert pm == pytest.approx(min(1.0, max(mids, default=0.0)), abs=1e-12), (x, y)
    # at n = N the difference is known: p = 0 unless the discordances balance
    full = finite_population_pvalues(xs, ys, 30, 30)
    assert np.array_equal(full, np.where(xs == ys, 1.0, 0.0))


def test_subset_at_n_equal_N_reduces_to_the_full_benchmark(gpqa):
    c = gpqa["correct"][:60]
    n_pop = c.shape[1]
    perm = np.random.default_rng(2).permutation(n_pop)
    full = leaderboard(c, population="benchmark")
    sub = leaderboard(c[:, perm], population="benchmark", n_population=n_pop)
    wtd = leaderboard(
        c[:, perm], population="benchmark", n_population=n_pop, weights=np.full(n_pop, 1 / n_pop)
    )
    acc = c.mean(axis=1)
    for lb in (full, sub, wtd):
        assert lb.design in ("full", "weighted")
        np.testing.assert_allclose(lb.rows.accuracy, acc[lb.rows.model], atol=1e-12)
        np.testing.assert_allclose(lb.rows.ci_low, lb.rows.accuracy, atol=1e-12)
        np.testing.assert_allclose(lb.rows.ci_high, lb.rows.accuracy, atol=1e-12)
        true = acc[lb.pairs.a] - acc[lb.pairs.b]
        np.testing.assert_allclose(lb.pairs.difference, true, atol=1e-12)
        np.testing.assert_allclose(lb.pairs.ci_low, true, atol=1e-12)
        np.testing.assert_allclose(lb.pairs.ci_high, true, atol=1e-12)
        assert np.array_equal(lb.pairs.p_value, np.where(np.isclose(true, 0), 1.0, 0.0))
        assert np.array_equal(lb.pairs.significant, ~np.isclose(true, 0))
        assert np.array_equal(
            lb.pairs.p_better, np.where(true > 0, 1.0, np.where(true < 0, 0, 0.5))
        )
    assert np.array_equal(full.rows.tier, sub.rows.tier)
    assert np.array_equal(full.rows.rank_low, sub.rows.rank_low)


def test_small_subset_gives_wider_tiers_than_all_items(gpqa):
    c = gpqa["correct"]
    idx = np.random.default_rng(25).choice(c.shape[1], 25, replace=False)
    small = leaderboard(c[:, idx], population="benchmark", n_population=c.shape[1])
    full_items = leaderboard(c)
    full_known = leaderboard(c, population="benchmark")
    for big in (full_items, full_known):
        assert small.n_tiers <= big.n_tiers
        assert (small.rows.tier == 1).sum() >= (big.rows.tier == 1).sum()
        assert (small.rows.rank_high - small.rows.rank_low).mean() > (
            big.rows.rank_high - big.rows.rank_low
        ).mean()
    assert small.n_tiers < full_known.n_tiers


def test_subset_scores_equal_the_scalar_scorers(gpqa):
    c = gpqa["correct"][:30]
    n_pop = c.shape[1]
    idx = np.random.default_rng(4).choice(n_pop, 80, replace=False)
    lb = leaderboard(c[:, idx], population="benchmark", n_population=n_pop, alpha=0.1)
    row = {int(mdl): i for i, mdl in enumerate(lb.rows.model)}
    for mdl in (0, 7, 29):
        est = wilson_interval(int(c[mdl, idx].sum()), 80, n_population=n_pop, confidence=0.9)
        i = row[mdl]
        assert (lb.rows.ci_low[i], lb.rows.ci_high[i]) == pytest.approx((est.ci_low, est.ci_high))
    for a, b in ((0, 7), (3, 29)):
        k = _pair_index(30, a, b)
        want = compare_to_baseline(c[a, idx], c[b], idx)
        assert lb.pairs.difference[k] == pytest.approx(want.mean_diff)
        assert lb.pairs.p_better[k] == pytest.approx(want.p_better)
    items = leaderboard(c[:, idx], alpha=0.1)
    i = {int(mdl): j for j, mdl in enumerate(items.rows.model)}[7]
    est = wilson_interval(int(c[7, idx].sum()), 80, confidence=0.9)
    assert (items.rows.ci_low[i], items.rows.ci_high[i]) == pytest.approx((est.ci_low, est.ci_high))


def test_weighted_design_equals_scalar_weighted_scorers(gpqa):
    c = gpqa["correct"][:20]
    n_pop = c.shape[1]
    rng = np.random.default_rng(8)
    idx = rng.choice(n_pop, 50, replace=False)
    w = rng.uniform(0.5, 2.0, 50)
    w /= w.sum()
    lb = leaderboard(c[:, idx], population="benchmark", n_population=n_pop, weights=w)
    assert lb.design == "weighted"
    row = {int(mdl): i for i, mdl in enumerate(lb.rows.model)}
    for mdl in (2, 11):
        est = weighted_estimate(c[mdl, idx], w, n_pop)
        i = row[mdl]
        assert lb.rows.accuracy[i] == pytest.approx(est.value)
        assert (lb.rows.ci_low[i], lb.rows.ci_high[i]) == pytest.approx((est.ci_low, est.ci_high))
    for a, b in ((2, 11), (0, 19), (5, 6)):
        k = _pair_index(20, a, b)
        want = weighted_paired_comparison(c[a, idx], c[b], idx, w)
        assert lb.pairs.difference[k] == pytest.approx(want.mean_diff)
        assert lb.pairs.p_better[k] == pytest.approx(want.p_better)
        z = want.mean_diff / want.se
        assert lb.pairs.p_value[k] == pytest.approx(2 * stats.norm.sf(abs(z)))


def test_leaderboard_for_selection_uses_the_design(gpqa):
    c = gpqa["correct"]
    sel = make_selector("random").fit(c[:50]).select(40, rng=3)
    lb = leaderboard_for_selection(c[:, sel.indices], sel, c.shape[1])
    assert lb.design == "uniform" and lb.population == "benchmark"
    assert "hypergeometric" in lb.method and "Holm" in lb.method and "0.05" in lb.method
    explicit = leaderboard(c[:, sel.indices], population="benchmark", n_population=c.shape[1])
    np.testing.assert_array_equal(lb.pairs.p_value, explicit.pairs.p_value)
    anchor = make_selector("anchor_points").fit(c[:100]).select(30, rng=1)
    lbw = leaderboard_for_selection(c[:, anchor.indices], anchor)
    assert lbw.design == "weighted" and lbw.n_population == c.shape[1]
    np.testing.assert_allclose(
        lbw.rows.accuracy, (c[:, anchor.indices] @ anchor.weights)[lbw.rows.model]
    )


# ------------------------------------------------------------------------------ hygiene
def test_inputs_unchanged_and_results_read_only(gpqa):
    c = gpqa["correct"][:50, :100].copy()
    mask = np.ones_like(c, dtype=bool)
    mask[3, :10] = False
    c0, m0 = c.copy(), mask.copy()
    c.setflags(write=False)
    mask.setflags(write=False)
    lb = leaderboard(c, coverage=mask)
    w = np.full(100, 0.01)
    w.setflags(write=False)
    leaderboard(c, population="benchmark", n_population=448, weights=w)
    leaderboard(c, population="benchmark", n_population=448)
    assert np.array_equal(c, c0) and np.array_equal(mask, m0) and (w == 0.01).all()
    with pytest.raises(ValueError):
        lb.rows.accuracy[0] = 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"correct": [[1, 0, 1]]}, "correct"),
        ({"correct": [[1, 2], [0, 1]]}, "correct"),
        ({"correction": "bonferroni"}, "correction"),
        ({"population": "world"}, "population"),
        ({"alpha": 1.5}, "alpha"),
        ({"coverage": [[True, True], [False, False]]}, "coverage"),
        ({"population": "benchmark", "n_population": 1}, "n_population"),
        ({"population": "benchmark", "weights": [1.0]}, "weights"),
        ({"n_population": 10}, "n_population"),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    args = {"correct": [[1, 0], [0, 1]], **kwargs}
    with pytest.raises(ValueError, match=field):
        leaderboard(args.pop("correct"), **args)
