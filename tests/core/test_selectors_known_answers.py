"""Known answers for the stratified, confidence-stratified and DPP selectors (paper §3.2-§3.4)."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors import make_selector
from app.core.selectors.confidence_stratified import (
    confidence_strata,
    stratified_design,
    stratum_allocation,
)
from app.core.selectors.dpp import (
    dpp_features,
    multi_indices,
    projection_basis,
    sample_projection_dpp,
)
from app.core.selectors.subtask_stratified import equal_allocation, proportional_allocation


def _subtask_selector(sizes, allocation, *, labels="abcdefghij", candidates=None):
    subtasks = np.repeat(np.array(list(labels[: len(sizes)])), sizes)
    correct = np.zeros((2, subtasks.shape[0]))
    correct[0, ::3] = 1.0
    sel = make_selector("subtask_stratified", allocation=allocation)
    return sel.fit(correct, subtasks=subtasks, candidates=candidates), subtasks


# Monte Carlo size: 30,000 draws give a frequency SE of 0.0027 at p = 1/3; the 0.011 window (4 SE)
# still fails a probability 2 points off (0.313 or 0.353) with probability > 0.999.
DRAWS = 30_000
TOLERANCE = 0.011


def _counts_per_subtask(selection, subtasks, labels):
    return np.array([(subtasks[selection.indices] == lab).sum() for lab in labels])


# --------------------------------------------------------------------------- subtask, equal
def test_equal_allocation_by_hand():
    rng = np.random.default_rng(0)
    counts = np.array([equal_allocation(10, 3, rng) for _ in range(DRAWS)])
    assert (np.sort(counts, axis=1) == [3, 3, 4]).all()
    # the single leftover goes to each subtask with probability 1/3
    freq = (counts == 4).mean(axis=0)
    assert np.all(np.abs(freq - 1 / 3) < TOLERANCE)
    two = np.array([equal_allocation(2, 3, np.random.default_rng(s)) for s in range(50)])
    assert (np.sort(two, axis=1) == [0, 1, 1]).all()  # distinct subtasks
    np.testing.assert_array_equal(equal_allocation(12, 4, np.random.default_rng(0)), [3, 3, 3, 3])


def test_equal_selection_counts_per_subtask_and_plain_mean():
    selector, subtasks = _subtask_selector([15, 10, 5], "equal")
    sel = selector.select(10, rng=4)
    counts = _counts_per_subtask(sel, subtasks, "abc")
    assert sorted(counts.tolist()) == [3, 3, 4]
    assert sel.estimator == "mean"
    np.testing.assert_allclose(sel.weights, 0.1)


def test_equal_counts_only_subtasks_present_in_candidates():
    candidates = np.arange(25)  # subtasks a (15) and b (10); c has no candidate
    selector, subtasks = _subtask_selector([15, 10, 5], "equal", candidates=candidates)
    sel = selector.select(4, rng=0)
    np.testing.assert_array_equal(_counts_per_subtask(sel, subtasks, "abc"), [2, 2, 0])


def test_equal_raises_when_a_subtask_is_too_small():
    selector, _ = _subtask_selector([15, 10, 5], "equal")
    assert selector.select(15, rng=0).size == 15  # 5 each: c is exhausted exactly
    with pytest.raises(ValueError, match=r"^n: .*'c'"):
        selector.select(18, rng=0)


# --------------------------------------------------------------------- subtask, proportional
def test_proportional_allocation_by_hand():
    rng = np.random.default_rng(0)
    # quotas 3.5, 2.1, 1.4 -> floors 3, 2, 1, one leftover to the largest remainder (0.5)
    np.testing.assert_array_equal(
        proportional_allocation(7, np.array([50, 30, 20]), rng), [4, 2, 1]
    )
    # quotas 6.6, 3.96, 2.64 (remainders 0.6, 0.96, 0.64) -> floors 6, 3, 2, two leftovers
    np.testing.assert_array_equal(
        proportional_allocation(13, np.array([50, 30, 20]), rng), [6, 4, 3]
    )
    np.testing.assert_array_equal(
        proportional_allocation(100, np.array([50, 30, 20]), rng), [50, 30, 20]
    )


def test_proportional_ties_are_broken_uniformly():
    sizes = np.array([10, 10, 10])
    rng = np.random.default_rng(1)
    counts = np.array([proportional_allocation(4, sizes, rng) for _ in range(DRAWS)])
    assert (counts.sum(axis=1) == 4).all() and (np.sort(counts, axis=1) == [1, 1, 2]).all()
    freq = (counts == 2).mean(axis=0)
    assert np.all(np.abs(freq - 1 / 3) < TOLERANCE)


def test_proportional_weights_give_the_item_weighted_mean():
    selector, subtasks = _subtask_selector([50, 30, 20], "proportional")
    sel = selector.select(7, rng=1)
    counts = _counts_per_subtask(sel, subtasks, "abc")
    np.testing.assert_array_equal(counts, [4, 2, 1])
    per_subtask = {"a": 0.5 / 4, "b": 0.3 / 2, "c": 0.2 / 1}
    expected = np.array([per_subtask[s] for s in subtasks[sel.indices]])
    np.testing.assert_allclose(sel.weights, expected)
    assert sel.estimator == "weighted_mean"
    # the estimate is the size-weighted mean of the per-subtask sample means
    y = (np.arange(100)[sel.indices] % 2).astype(float)[None, :]
    sub_means = [y[0, subtasks[sel.indices] == s].mean() for s in "abc"]
    est = selector.estimate(sel, y)
    assert est[0] == pytest.approx(0.5 * sub_means[0] + 0.3 * sub_means[1] + 0.2 * sub_means[2])


def test_proportional_renormalises_when_subtasks_are_unrepresented():
    selector, subtasks = _subtask_selector([10, 10, 10], "proportional")
    sel = selector.select(2, rng=0)
    assert sorted(_counts_per_subtask(sel, subtasks, "abc").tolist()) == [0, 1, 1]
    np.testing.assert_allclose(sel.weights, [0.5, 0.5])


def test_paper_proportional_gives_equal_mass_per_subtask():
    selector, subtasks = _subtask_selector([50, 30, 20], "paper_proportional")
    draws = 3000
    first = np.array([subtasks[selector.select(1, rng=s).indices[0]] for s in range(draws)])
    freq = np.array([(first == s).sum() for s in "abc"])
    se = np.sqrt(draws * (1 / 3) * (2 / 3))
    assert np.all(np.abs(freq - draws / 3) < 4 * se)
    sel = selector.select(20, rng=0)
    assert sel.estimator == "mean" and np.unique(sel.indices).size == 20


@pytest.mark.parametrize(
    ("method", "params", "arg"),
    [
        ("subtask_stratified", {"allocation": "bogus"}, "allocation"),
        ("confidence_stratified", {"inclusion": "bogus"}, "inclusion"),
        ("dpp", {"weighting": "bogus"}, "weighting"),
        ("dpp", {"pca_seed": -1}, "pca_seed"),
    ],
)
def test_bad_parameters_name_the_parameter(method, params, arg):
    with pytest.raises(ValueError, match=arg):
        make_selector(method, **params).fit(np.eye(6)[:4])


# ------------------------------------------------------------------- confidence-stratified
TOY_SIZES = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 15])  # N = 60


def _toy_proxy():
    jitter = np.random.default_rng(0).uniform(-0.005, 0.005, TOY_SIZES.sum())
    return np.repeat(np.linspace(0.05, 0.95, 10), TOY_SIZES) + jitter


def _toy_selector(inclusion="paper"):
    proxy = _toy_proxy()
    confidence = np.vstack([proxy, proxy])  # mean source confidence == proxy
    correct = (confidence > 0.5).astype(float)
    sel = make_selector("confidence_stratified", inclusion=inclusion)
    return sel.fit(correct, confidence=confidence)


def test_kmeans_strata_recover_separated_groups():
    strata = confidence_strata(_toy_proxy())
    np.testing.assert_array_equal(strata, np.repeat(np.arange(10), TOY_SIZES))


def test_strata_with_fewer_distinct_values_than_ten():
    proxy = np.repeat([0.2, 0.5, 0.9], [4, 3, 5])
    np.testing.assert_array_equal(confidence_strata(proxy), np.repeat([0, 1, 2], [4, 3, 5]))
    np.testing.assert_array_equal(confidence_strata(np.full(7, 0.3)), np.zeros(7))
    selector = make_selector("confidence_stratified").fit(np.vstack([proxy, proxy]))
    sel = selector.select(6, rng=0)
    assert sel.size >= 6 and np.unique(sel.indices).size == sel.size


def test_confidence_allocation_by_hand_with_fill():
    # n N_h / N = N_h / 6 = 1/6, 1/3, 1/2, 2/3, 5/6, 1, 7/6, 4/3, 3/2, 5/2; half-to-even
    np.testing.assert_array_equal(stratum_allocation(TOY_SIZES, 10), [0, 0, 0, 1, 1, 1, 1, 1, 2, 2])
    selector = _toy_selector()
    strata = np.repeat(np.arange(10), TOY_SIZES)
    for seed in range(20):
        sel = selector.select(10, rng=seed)
        assert sel.size == 10
        stratified, fill = sel.indices[:9], sel.indices[9]
        np.testing.assert_array_equal(
            np.bincount(strata[stratified], minlength=10), [0, 0, 0, 1, 1, 1, 1, 1, 2, 2]
        )
        assert fill not in stratified
        pi = sel.fitted["inclusion_probability"]
        np.testing.assert_allclose(
            pi[:9], (np.array([1, 1, 1, 1, 1, 2, 2]) / TOY_SIZES[3:])[strata[stratified] - 3]
        )
        h = strata[fill]
        expected_fill_pi = 10 / 60 if h < 3 else [1, 1, 1, 1, 1, 2, 2][h - 3] / TOY_SIZES[h]
        assert pi[9] == pytest.approx(expected_fill_pi)
        np.testing.assert_allclose(sel.weights, 1 / (60 * pi))


def test_confidence_allocation_by_hand_with_overflow():
    # n = 19: 19 N_h / 60 rounds to 0 1 1 1 2 2 2 3 3 5 (sum 20): 20 items, no trimming
    np.testing.assert_array_equal(stratum_allocation(TOY_SIZES, 19), [0, 1, 1, 1, 2, 2, 2, 3, 3, 5])
    sel = _toy_selector().select(19, rng=0)
    assert sel.size == 20 and sel.n_requested == 19
    strata = np.repeat(np.arange(10), TOY_SIZES)
    np.testing.assert_array_equal(
        np.bincount(strata[sel.indices], minlength=10), [0, 1, 1, 1, 2, 2, 2, 3, 3, 5]
    )


def _ht_draws(selector, y, n, draws):
    estimates = np.empty(draws)
    for s in range(draws):
        sel = selector.select(n, rng=s)
        estimates[s] = selector.estimate(sel, y[:, sel.indices])[0]
    return estimates


@pytest.mark.parametrize(("inclusion", "n"), [("paper", 31), ("exact", 10)])
def test_horvitz_thompson_unbiased(inclusion, n):
    """10^4 draws: mean estimate within 3 standard errors of the truth.

    ``paper`` at n = 31: every stratum gets n_h >= 1 and sum n_h = 33 >= n (no fill), so the
    paper's pi are the true inclusion probabilities. ``exact`` at n = 10 exercises the fill.
    """
    strata = np.repeat(np.arange(10), TOY_SIZES)
    y = ((np.arange(60) * 7 % 11 < 4) | (strata >= 8)).astype(float)[None, :]
    estimates = _ht_draws(_toy_selector(inclusion), y, n, 10_000)
    se = estimates.std(ddof=1) / np.sqrt(estimates.size)
    assert abs(estimates.mean() - y.mean()) < 3 * se


def test_paper_inclusion_with_fill_has_its_analytic_bias():
    """With fill, the paper's pi are not the true ones: E[HT] = (1/N) sum_i y_i pi_i / pi_paper_i."""
    strata = np.repeat(np.arange(10), TOY_SIZES)
    y = (strata >= 8).astype(float)  # 24 of 60 items right
    n_h = stratum_allocation(TOY_SIZES, 10)
    frac = n_h / TOY_SIZES
    true_pi = (frac + (1 - frac) * 1 / (60 - 9))[strata]
    paper_pi = np.where(frac > 0, frac, 10 / 60)[strata]
    expected = (y * true_pi / paper_pi).sum() / 60
    rng = np.random.default_rng(1)
    draws = 10_000
    estimates = np.empty(draws)
    for s in range(draws):
        pos, pi = stratified_design(strata, 10, rng)
        estimates[s] = (y[pos] / pi).sum() / 60
    se = estimates.std(ddof=1) / np.sqrt(draws)
    assert abs(estimates.mean() - expected) < 3 * se
    assert expected > y.mean() + 10 * se  # the bias is real, not noise


# --------------------------------------------------------------------------------------- DPP
def test_multi_indices_by_hand():
    np.testing.assert_array_equal(
        multi_indices(6, 2), [[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [1, 2]]
    )
    np.testing.assert_array_equal(multi_indices(4, 1), [[0], [1], [2], [3]])
    big = multi_indices(1000, 4)
    assert big.shape == (1000, 4) and np.unique(big, axis=0).shape[0] == 1000
    assert (np.diff(big.max(axis=1)) >= 0).all()  # layers in order
    assert (big[:16].max(axis=1) <= 1).all() and big[16].max() == 2


def _kernel(n_items, rank, seed=3):
    rng = np.random.default_rng(seed)
    scale = np.linspace(0.2, 2, n_items)[:, None]
    q, _ = np.linalg.qr(rng.normal(size=(n_items, rank)) * scale)
    return q


@pytest.mark.parametrize("method", ["chain", "phased"])
@pytest.mark.parametrize(("n_items", "rank"), [(8, 3), (30, 12)])
def test_projection_dpp_inclusion_frequencies_match_the_kernel(method, n_items, rank):
    """5,000 samples per case (20,000 in all): first- and second-order inclusion match K."""
    q = _kernel(n_items, rank)
    k = q @ q.T
    rng = np.random.default_rng(0)
    draws = 5_000
    samples = np.array([sample_projection_dpp(q, rng, method=method) for _ in range(draws)])
    assert samples.shape == (draws, rank)
    ordered = np.sort(samples, axis=1)
    assert (ordered[:, 1:] != ordered[:, :-1]).all()  # exactly rank-many distinct items
    member = np.zeros((draws, n_items))
    np.put_along_axis(member, samples, 1.0, axis=1)
    freq = member.mean(axis=0)
    p = np.diag(k)
    np.testing.assert_array_less(np.abs(freq - p), 4 * np.sqrt(p * (1 - p) / draws) + 1e-12)
    # second-order inclusion: P(i, j in A) = K_ii K_jj - K_ij^2
    pair = member.T @ member / draws
    p2 = np.outer(p, p) - k**2
    iu = np.triu_indices(n_items, 1)
    tol = 4 * np.sqrt(np.clip(p2[iu] * (1 - p2[iu]), 1e-12, None) / draws) + 1e-9
    np.testing.assert_array_less(np.abs(pair[iu] - p2[iu]), tol)


@pytest.mark.parametrize("method", ["chain", "phased"])
def test_projection_dpp_never_picks_zero_probability_items(method):
    q = np.zeros((6, 2))
    q[[1, 4], [0, 1]] = 1.0
    rng = np.random.default_rng(0)
    for _ in range(50):
        assert sorted(sample_projection_dpp(q, rng, method=method).tolist()) == [1, 4]


def test_projection_dpp_large_rank_is_a_permutation_of_distinct_items():
    q = _kernel(400, 200)
    for method in ("chain", "phased"):
        s = sample_projection_dpp(q, np.random.default_rng(1), method=method)
        assert s.shape == (200,) and np.unique(s).size == 200
    with pytest.raises(ValueError, match="method"):
        sample_projection_dpp(q, np.random.default_rng(1), method="bogus")


def test_dpp_features_trim_and_rescale(gpqa):
    features = gpqa["correct"][:300, :224].T.astype(float)
    kept, x = dpp_features(features, seed=0)
    assert x.shape == (kept.shape[0], 4)
    # per component at most ceil(0.01 (N - 1)) = 3 items fall strictly outside each quantile
    assert 224 - 4 * 2 * 3 <= kept.shape[0] < 224
    np.testing.assert_allclose(x.min(axis=0), -0.99)
    np.testing.assert_allclose(x.max(axis=0), 0.99)
    q = projection_basis(x, 50)
    np.testing.assert_allclose(q.T @ q, np.eye(50), atol=1e-10)


def test_dpp_sampler_weights_and_too_large_n(gpqa):
    correct = gpqa["correct"][:300, :224].astype(float)
    selector = make_selector("dpp", weighting="sampler").fit(correct)
    n_kept = selector.kept_.shape[0]
    sel = selector.select(25, rng=0)
    pos = np.searchsorted(selector.kept_, sel.indices)
    q = projection_basis(selector.features_, 25)
    w = (1 / n_kept) / np.einsum("ij,ij->i", q[pos], q[pos])
    np.testing.assert_allclose(sel.weights, w / w.sum())
    assert sel.estimator == "weighted_mean"
    with pytest.raises(ValueError, match=r"^n: "):
        selector.select(n_kept + 1, rng=0)


# ------------------------------------------------------------------------------------ GPQA
CASES = [
    ("subtask_stratified", {"allocation": "equal"}),
    ("subtask_stratified", {"allocation": "proportional"}),
    ("subtask_stratified", {"allocation": "paper_proportional"}),
    ("confidence_stratified", {"inclusion": "paper"}),
    ("confidence_stratified", {"inclusion": "exact"}),
    ("dpp", {"weighting": "mean"}),
    ("dpp", {"weighting": "sampler"}),
]


@pytest.mark.parametrize(("method", "params"), CASES)
def test_gpqa_paper_protocol_sizes(gpqa, method, params):
    """300 source models, 50 targets, the seen half (224 items), n = 10..200 (paper §1.3)."""
    rng = np.random.default_rng(2026)
    correct = gpqa["correct"].astype(float)
    models = rng.permutation(correct.shape[0])
    targets, sources = models[:50], models[50:350]
    seen = np.sort(rng.permutation(correct.shape[1])[:224])
    selector = make_selector(method, **params).fit(correct[sources], candidates=seen)
    truth = correct[np.ix_(targets, seen)].mean(axis=1)
    errors = {}
    for n in (10, 25, 50, 100, 200):
        maes = []
        for seed in range(3):
            sel = selector.select(n, rng=seed)
            assert sel.size >= n if method == "confidence_stratified" else sel.size == n
            assert np.isin(sel.indices, seen).all() and np.unique(sel.indices).size == sel.size
            assert sel.signal == ("none" if method == "subtask_stratified" else "correct")
            est = selector.estimate(sel, correct[np.ix_(targets, sel.indices)])
            assert np.isfinite(est).all()
            maes.append(np.abs(est - truth).mean())
        errors[n] = np.mean(maes)
    assert errors[200] < errors[10]
    assert errors[200] < 0.03
