"""Mutation-driven tests for ``app.core.selectors.random`` (uniform draw without replacement).

Oracles: the definition (``n`` distinct candidates, weight ``1/n`` each) and, for uniformity,
the exact inclusion probability ``n / N`` of simple random sampling checked by frequency.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors import make_selector

N_ITEMS = 20
CANDIDATES = np.arange(1, N_ITEMS, 2)  # 10 odd positions


def _fitted():
    correct = (np.arange(3 * N_ITEMS).reshape(3, N_ITEMS) % 3 == 0).astype(float)
    return make_selector("random").fit(correct, candidates=CANDIDATES)


@pytest.mark.parametrize("seed", range(5))
def test_full_pool_is_every_candidate_once(seed):
    """n = N: the draw without replacement is a permutation of the pool (a draw with
    replacement repeats an item with probability 1 - 10!/10^10 > 0.999)."""
    sel = _fitted().select(CANDIDATES.size, rng=seed)
    np.testing.assert_array_equal(np.sort(sel.indices), CANDIDATES)
    np.testing.assert_array_equal(sel.weights, np.full(10, 0.1))


def test_weights_are_exactly_one_over_n():
    sel = _fitted().select(4, rng=1)
    assert sel.indices.shape == (4,)
    np.testing.assert_array_equal(sel.weights, [0.25, 0.25, 0.25, 0.25])
    assert sel.estimator == "mean" and sel.signal == "none"


def test_inclusion_frequencies_are_n_over_pool():
    """2,000 draws of 3 of 10: each candidate in with probability 0.3 (SE 0.010; 5 SE window)."""
    sel = _fitted()
    draws = 2_000
    hits = np.zeros(N_ITEMS)
    for s in range(draws):
        chosen = sel.select(3, rng=s).indices
        assert np.unique(chosen).size == 3
        hits[chosen] += 1
    freq = hits / draws
    assert freq[::2].sum() == 0  # never outside the pool
    np.testing.assert_array_less(np.abs(freq[CANDIDATES] - 0.3), 5 * np.sqrt(0.21 / draws))
