"""Error-controlled fixed designs (app.core.sequential.fixed_designs) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binom

from app.core.sequential.fixed_designs import (
    _rejection_bounds,
    binomial_test_sizes,
    mcnemar_test_sizes,
)


@pytest.mark.parametrize("p0", [0.5, 0.2, 0.33, 0.9])
def test_rejection_bounds_are_the_equal_tailed_exact_test(p0):
    for n in range(1, 60):
        lo, hi = _rejection_bounds(n, p0, 0.05)
        ks = np.arange(n + 1)
        low_ok = binom.cdf(ks, n, p0) <= 0.025
        high_ok = binom.sf(ks - 1, n, p0) <= 0.025
        assert lo == (ks[low_ok].max() if low_ok.any() else -1)
        assert hi == (ks[high_ok].min() if high_ok.any() else n + 1)


def _power_by_enumeration(pop: np.ndarray, n: int, reject) -> float:
    """Share of all n-subsets of ``pop`` on which ``reject(subset)`` holds (exact WoR power)."""
    hits = [reject(pop[list(c)]) for c in itertools.combinations(range(pop.size), n)]
    return float(np.mean(hits))


def _first(powers, target):
    return next((n for n, p in enumerate(powers, 1) if p >= target - 1e-12), np.nan)


def test_binomial_sizes_match_enumeration_of_all_subsets():
    big_n, k, p0 = 12, 7, 0.1
    pop = np.array([1] * k + [0] * (big_n - k))

    def reject(sub):
        lo, hi = _rejection_bounds(sub.size, p0, 0.05)
        return sub.sum() <= lo or sub.sum() >= hi

    powers = [_power_by_enumeration(pop, n, reject) for n in range(1, big_n + 1)]
    for target in (0.5, 0.8, 0.9):
        got = binomial_test_sizes([k], [p0], big_n, power=target)[0]
        assert got == _first(powers, target)


def test_mcnemar_sizes_match_enumeration_of_all_subsets():
    big_n, n10, n01 = 14, 8, 1
    pop = np.array([1] * n10 + [-1] * n01 + [0] * (big_n - n10 - n01))

    def reject(sub):
        j = int((sub != 0).sum())
        lo, hi = _rejection_bounds(j, 0.5, 0.05)
        x10 = int((sub == 1).sum())
        return x10 <= lo or x10 >= hi

    powers = [_power_by_enumeration(pop, n, reject) for n in range(1, big_n + 1)]
    assert powers[-1] == 1.0 and powers[9] > 0.2  # the test can reach the targets below
    for target in (0.2, 0.4, 0.8):
        got = mcnemar_test_sizes([n10], [n01], big_n, power=target)
        assert got[0] == _first(powers, target)
    # a tied pair never reaches any power; vectorised over pairs (and chunks) as one by one
    ties = mcnemar_test_sizes([3, n10, 5], [3, n01, 5], big_n, power=0.5, chunk=1)
    assert np.isnan(ties[0]) and np.isnan(ties[2]) and ties[1] == _first(powers, 0.5)


def test_sizes_on_gpqa_pairs_grow_as_the_gap_shrinks(gpqa):
    c = gpqa["correct"].astype(np.int64)
    acc = c.mean(1)
    order = np.argsort(acc)
    top, mid, low = order[-1], order[len(order) // 2], order[0]
    succ = c[[top, top, mid]].sum(1)
    base = acc[[low, mid, low]]
    n80 = binomial_test_sizes(succ, base, c.shape[1], power=0.8)
    n90 = binomial_test_sizes(succ, base, c.shape[1], power=0.9)
    assert n80[0] < n80[1] < n80[2]  # gaps 24.6, 16.7 and 7.8 points
    assert np.all((n90 >= n80) | np.isnan(n90))
    with pytest.raises(ValueError, match="alpha"):
        binomial_test_sizes(succ, base, c.shape[1], power=1.0)
