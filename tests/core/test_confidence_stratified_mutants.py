"""Mutation-driven tests for ``app.core.selectors.confidence_stratified``.

Oracles: the §3.3 design worked by hand on tiny strata (allocation ``round_half_even(n N_h / N)``,
fill from the unselected items, paper and exact inclusion probabilities from the docstring's
closed forms).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors import make_selector
from app.core.selectors.confidence_stratified import stratified_design

STRATA = np.repeat(np.arange(5), [1, 1, 1, 1, 6])  # N = 10


@pytest.mark.parametrize("exact", [False, True])
def test_fill_design_by_hand(exact):
    """n = 3: n N_h / N = 0.3 (x4), 1.8 -> n_h = 0, 0, 0, 0, 2; one fill item from the 8 left.

    paper: pi = 2/6 in stratum 4, n/N = 3/10 for a fill item from strata 0-3.
    exact: pi = n_h/N_h + (1 - n_h/N_h) * 1/8 -> 1/8 in strata 0-3, 1/3 + 2/3 * 1/8 = 5/12.
    """
    for seed in range(30):
        pos, pi = stratified_design(STRATA, 3, np.random.default_rng(seed), exact=exact)
        assert pos.dtype == np.int64 and pos.shape == (3,) and np.unique(pos).size == 3
        assert (STRATA[pos[:2]] == 4).all() and pos[0] < pos[1]
        fill_stratum = STRATA[pos[2]]
        if exact:
            expected = [5 / 12, 5 / 12, 1 / 8 if fill_stratum < 4 else 5 / 12]
        else:
            expected = [1 / 3, 1 / 3, 0.3 if fill_stratum < 4 else 1 / 3]
        np.testing.assert_allclose(pi, expected, rtol=1e-15)


def test_exact_without_fill_is_the_stratum_fraction():
    strata = np.repeat([0, 1], [3, 7])  # n = 4: 1.2 -> 1, 2.8 -> 3, m = n: no fill
    pos, pi = stratified_design(strata, 4, np.random.default_rng(0), exact=True)
    np.testing.assert_array_equal(np.bincount(strata[pos]), [1, 3])
    np.testing.assert_allclose(pi, np.where(strata[pos] == 0, 1 / 3, 3 / 7), rtol=1e-15)


@pytest.mark.parametrize("exact", [False, True])
def test_whole_pool_has_inclusion_one(exact):
    pos, pi = stratified_design(STRATA, 10, np.random.default_rng(1), exact=exact)
    np.testing.assert_array_equal(np.sort(pos), np.arange(10))
    np.testing.assert_array_equal(pi, 1.0)


def test_default_inclusion_is_paper_and_weights_are_ht():
    proxy = np.repeat([0.1, 0.5, 0.9], [2, 3, 5])
    sel = make_selector("confidence_stratified")
    assert sel.params == {"inclusion": "paper"}
    sel.fit(np.vstack([proxy, proxy]))
    s = sel.select(5, rng=0)  # n_h = round(1), round(1.5), round(2.5) = 1, 2, 2 (half to even)
    pi = s.fitted["inclusion_probability"]
    np.testing.assert_array_equal(np.bincount((proxy[s.indices] * 2.5).astype(int)), [1, 2, 2])
    expected = np.select([proxy[s.indices] < 0.3, proxy[s.indices] < 0.7], [1 / 2, 2 / 3], 2 / 5)
    np.testing.assert_allclose(pi, expected, rtol=1e-15)
    np.testing.assert_allclose(s.weights, 1 / (10 * pi), rtol=1e-15)


def test_two_distinct_values_make_two_strata_and_labels_are_int64():
    from app.core.selectors.confidence_stratified import confidence_strata

    two = confidence_strata(np.array([0.9, 0.2, 0.9, 0.2, 0.2]))
    assert two.dtype == np.int64
    np.testing.assert_array_equal(two, [1, 0, 1, 0, 0])  # ordered by the stratum's mean
    one = confidence_strata(np.full(5, 0.3))
    assert one.dtype == np.int64
    np.testing.assert_array_equal(one, 0)


def test_strata_are_scikit_learns_seeded_kmeans_ordered_by_mean():
    from sklearn.cluster import KMeans

    from app.core.selectors.confidence_stratified import confidence_strata

    # uniform proxies have many k-means local optima: the partition is the one of seed 42
    for seed in range(3):
        proxy = np.random.default_rng(seed).random(60)
        ref = KMeans(n_clusters=10, random_state=42, n_init="auto").fit_predict(proxy[:, None])
        means = np.array([proxy[ref == c].mean() for c in range(10)])
        rank = np.argsort(np.argsort(means))
        np.testing.assert_array_equal(confidence_strata(proxy), rank[ref])
    # ordered by mean, not by total: 20 items at 0.1 (sum 2.0) below one item at 0.9
    proxy = np.array([0.1] * 20 + [0.9])
    np.testing.assert_array_equal(confidence_strata(proxy), [0] * 20 + [1])


def test_stratum_allocation_is_int64():
    from app.core.selectors.confidence_stratified import stratum_allocation

    out = stratum_allocation(np.array([3, 7]), 4)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [1, 3])


def test_fill_items_are_distinct():
    """n = 4 of 20 (eight singleton strata and one of 12): n_h = 0 (x8) and round(2.4) = 2, so two
    fill items are drawn from the 18 unselected ones, without replacement."""
    strata = np.repeat(np.arange(9), [1] * 8 + [12])
    for seed in range(150):
        pos, _ = stratified_design(strata, 4, np.random.default_rng(seed))
        assert pos.shape == (4,) and np.unique(pos).size == 4
