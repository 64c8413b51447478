"""Rounding edges of ``app.core.ranking.pairwise``: the clips, guards and exact-arithmetic switch.

Each case below was found by an exhaustive search (all 2x2 tables up to 60 items, levels 80-99 %,
finite-population factors 1-3.7) for the inputs where the unclipped floating-point formula leaves
its mathematical range by one ulp: the Wilson and Newcombe bounds (exact values 0, 1 and -1), the
mid-p McNemar p-value at ``n10 = n01`` (exactly 1 by symmetry), the finite-population p-value
(the doubled tail of a symmetric law at ``lo = (k - 1) / 2`` is exactly 1). The oracle is the
mathematical value; the tests pin that the engine returns it exactly, so a p-value never reads
1.0000000000000002 and an interval never starts below -1.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from app.core.ranking.pairwise import (
    finite_population_pvalues,
    mcnemar_pvalues,
    newcombe,
    pairwise_counts,
    wilson,
)

Z80 = float(norm.ppf(0.90))
Z99 = float(norm.ppf(0.995))


def test_wilson_bounds_are_exactly_zero_and_one_at_the_edges():
    # unclipped: -1.4e-17 (x = 0) and 1 + 1e-16 (x = n) at these sizes
    lo, _ = wilson(0.0, 2 * 3.7, Z80)
    _, hi = wilson(1.0, 8 * 3.7, Z80)
    assert lo == 0.0
    assert hi == 1.0


def test_newcombe_bounds_are_exactly_minus_one_and_one_at_the_edges():
    # all 4 items only B right (p1 = 0, p2 = 1): the difference is -1 and its lower bound too
    diff, lo, _ = newcombe(0, 0, 4, 0, 1.0, Z99)
    assert diff == -1.0 and lo == -1.0
    diff, _, hi = newcombe(0, 4, 0, 0, 1.0, Z99)
    assert diff == 1.0 and hi == 1.0


def test_mid_p_mcnemar_is_exactly_one_for_equal_discordant_counts():
    # 2 F(k/2) - f(k/2) = 1 by symmetry; in floating point it is 1 - 1e-16 for these counts
    counts = np.array([1, 6, 11, 17])
    np.testing.assert_array_equal(mcnemar_pvalues(counts, counts, mid_p=True), 1.0)


def test_mcnemar_is_exactly_one_when_the_counts_differ_by_one():
    # 2 F((k - 1) / 2) = 1 by symmetry for odd k; 1 + 2e-16 in floating point for these k
    k = np.array([15, 47, 55, 61, 65])
    np.testing.assert_array_equal(mcnemar_pvalues((k - 1) // 2, (k + 1) // 2), 1.0)


def test_finite_population_pvalue_never_exceeds_one():
    # k = 1, lo = 0: the doubled tail is exactly 1 (1 + 2e-16 unclipped)
    assert finite_population_pvalues(0, 1, 5, 20) == 1.0
    k = np.arange(1, 10, 2)
    p = finite_population_pvalues((k - 1) // 2, (k + 1) // 2, 9, 50)
    np.testing.assert_array_equal(p, 1.0)


def test_counts_are_exact_beyond_float32_integers():
    """From 2^24 items the products switch to float64: float32 cannot hold 2^24 + 1."""
    n = 2**24 + 1
    correct = np.ones((2, n), dtype=bool)
    correct[1, -1] = False
    counts = pairwise_counts(correct)
    np.testing.assert_array_equal(counts.n11, [[n, n - 1], [n - 1, n - 1]])
    np.testing.assert_array_equal(counts.n10, [[0, 1], [0, 0]])
    np.testing.assert_array_equal(counts.n00, [[0, 0], [0, 1]])
