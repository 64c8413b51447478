"""Exact order probabilities for random subsets: enumeration, simulation, symmetry."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.core.reliability.exact import (
    discordant_counts,
    exact_agreement,
    order_probabilities,
    pair_probability,
    smallest_n,
    stratified_order_probabilities,
)
from app.core.selectors import make_selector


def _enumerate(a: np.ndarray, b: np.ndarray, n: int) -> tuple[float, float, float]:
    g = e = l_ = 0
    for sub in itertools.combinations(range(a.size), n):
        d = a[list(sub)].sum() - b[list(sub)].sum()
        g, e, l_ = g + (d > 0), e + (d == 0), l_ + (d < 0)
    total = g + e + l_
    return g / total, e / total, l_ / total


@pytest.mark.parametrize("n", [1, 2, 4, 6, 9, 10])
def test_matches_full_enumeration(n) -> None:
    a = np.array([1, 1, 1, 0, 0, 1, 0, 1, 1, 0])
    b = np.array([0, 1, 0, 1, 0, 0, 1, 1, 0, 0])
    n10, n01 = discordant_counts(np.stack([a, b]), 0, 1)
    p = order_probabilities(n10, n01, 10, n)
    np.testing.assert_allclose([p.p_greater, p.p_equal, p.p_less], _enumerate(a, b, n), atol=1e-12)


def test_non_monotone_small_case_from_docstring() -> None:
    p = order_probabilities(2, 1, 3, [1, 2]).p_greater
    np.testing.assert_allclose(p, [2 / 3, 1 / 3], atol=1e-14)


def test_sums_to_one_and_symmetry(gpqa) -> None:
    rng = np.random.default_rng(0)
    n10 = rng.integers(0, 150, 200)
    n01 = rng.integers(0, 150, 200)
    n = rng.integers(1, 449, 200)
    p = order_probabilities(n10, n01, 448, n)
    np.testing.assert_allclose(p.p_greater + p.p_equal + p.p_less, 1.0, atol=1e-10)
    q = order_probabilities(n01, n10, 448, n)
    np.testing.assert_allclose(q.p_greater, p.p_less, atol=1e-12)
    np.testing.assert_allclose(q.p_equal, p.p_equal, atol=1e-12)
    np.testing.assert_allclose(
        order_probabilities(n10, n10, 448, n).p_greater,
        order_probabilities(n10, n10, 448, n).p_less,
        atol=1e-12,
    )
    full = order_probabilities(n10, n01, 448, 448)
    np.testing.assert_array_equal(full.p_greater, (n10 > n01).astype(float))


@pytest.mark.parametrize(
    ("a", "b", "n"), [(0, 1, 10), (5, 77, 25), (100, 200, 50), (3, 4, 100), (10, 300, 200)]
)
def test_exact_vs_simulated_counts_gpqa(gpqa, a, b, n) -> None:
    c = gpqa["correct"]
    n10, n01 = discordant_counts(c, a, b)
    rng = np.random.default_rng(1000 + a)
    draws = rng.multivariate_hypergeometric(
        [int(n10), int(n01), 448 - int(n10) - int(n01)], n, size=100_000
    )
    d = draws[:, 0] - draws[:, 1]
    p = order_probabilities(n10, n01, 448, n)
    assert abs(float(p.p_greater) - (d > 0).mean()) < 0.005
    assert abs(float(p.p_equal) - (d == 0).mean()) < 0.005
    assert abs(float(p.p_less) - (d < 0).mean()) < 0.005


def test_exact_vs_item_level_simulation(gpqa) -> None:
    c = gpqa["correct"].astype(np.int64)
    a, b, n = 3, 4, 25
    rng = np.random.default_rng(7)
    subsets = np.argsort(rng.random((20_000, 448)), axis=1)[:, :n]
    d = c[a][subsets].sum(1) - c[b][subsets].sum(1)
    p = pair_probability(c, a, b, n)  # oriented: A (row 3) leads on the full benchmark
    assert c[a].mean() > c[b].mean()
    assert abs(float(p.p_greater) - (d > 0).mean()) < 0.01  # 20k draws: SE <= 0.35 points
    assert abs(float(p.p_equal) - (d == 0).mean()) < 0.01


def test_stratified_single_stratum_equals_unstratified(gpqa) -> None:
    c = gpqa["correct"]
    p1 = stratified_order_probabilities(c[5], c[77], np.full(448, "x"), 25)
    n10, n01 = discordant_counts(c, 5, 77)
    p2 = order_probabilities(n10, n01, 448, 25)
    np.testing.assert_allclose(
        [p1.p_greater, p1.p_equal, p1.p_less], [p2.p_greater, p2.p_equal, p2.p_less], atol=1e-11
    )


def test_stratified_matches_the_selector(gpqa) -> None:
    c = gpqa["correct"].astype(np.int64)
    sub = np.repeat(np.array(["s0", "s1", "s2"]), [100, 148, 200])
    a, b, n = 3, 4, 20  # 20 = 3 * 6 + 2 leftovers over a random pair of strata
    exact = stratified_order_probabilities(c[a], c[b], sub, n)
    np.testing.assert_allclose(exact.p_greater + exact.p_equal + exact.p_less, 1.0, atol=1e-11)
    sel = make_selector("subtask_stratified").fit(c[:2], subtasks=sub)
    rng = np.random.default_rng(3)
    d = np.array(
        [
            (lambda idx: c[a, idx].sum() - c[b, idx].sum())(sel.select(n, rng=rng).indices)
            for _ in range(20_000)
        ]
    )
    assert abs(float(exact.p_greater) - (d > 0).mean()) < 0.01
    assert abs(float(exact.p_equal) - (d == 0).mean()) < 0.01


def test_smallest_n_is_first_reaching(gpqa) -> None:
    c = gpqa["correct"]
    n = smallest_n(c, 5, 77, 0.8)
    p = pair_probability(c, 5, 77, [n - 1, n]).p_greater
    assert p[1] >= 0.8 > p[0]
    identical = np.flatnonzero((c == c[0]).all(axis=1))
    if identical.size > 1:
        assert smallest_n(c, int(identical[0]), int(identical[1])) is None


def test_exact_agreement_curve(gpqa) -> None:
    c = gpqa["correct"][:80]
    small = exact_agreement(c, 25)
    large = exact_agreement(c, 200)
    assert small.mode == "exact" and small.n_pairs == 80 * 79 // 2
    assert large.mdad < small.mdad
    assert large.mean_agreement > small.mean_agreement
    assert np.all(np.diff(small.curve.fitted) >= -1e-12)
    np.testing.assert_allclose(small.curve.n_pairs.sum(), 80 * 79 // 2)
    full = exact_agreement(c, 448)
    np.testing.assert_allclose(full.curve.p_same[1:], 1.0)  # every nonzero gap is recovered


def test_non_binary_rejected() -> None:
    with pytest.raises(ValueError, match="correct"):
        exact_agreement(np.full((3, 4), 0.5), 2)
