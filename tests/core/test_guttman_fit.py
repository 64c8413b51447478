"""Issue 38: person misfit off IRT subsets, by normed Guttman errors (SYNTHETIC, small).

``guttman_errors`` against a brute-force count over every item pair (0/1, graded, tied item
means); ``guttman_misfit`` flags a model that gets the sources' easy items wrong and the hard
ones right, and about ``1 - GUTTMAN_QUANTILE`` of fresh models from the sources' own population.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.core.scoring.support import (
    GUTTMAN_QUANTILE,
    guttman_errors,
    guttman_misfit,
    score_outside,
    unsupported,
)
from app.core.selectors import make_selector


def _brute(row: np.ndarray, p: np.ndarray) -> float:
    errors = spread = 0.0
    for i, j in itertools.combinations(range(row.size), 2):
        spread += abs(row[i] - row[j])
        if p[i] > p[j]:  # i easier: an error when the harder j scores higher
            errors += max(0.0, row[j] - row[i])
        elif p[j] > p[i]:
            errors += max(0.0, row[i] - row[j])
    return errors / spread if spread else 0.0


@pytest.mark.parametrize("graded", [False, True])
def test_guttman_errors_match_the_pair_count(graded: bool) -> None:
    rng = np.random.default_rng(5)
    y = rng.random((6, 9)) if graded else (rng.random((6, 9)) < 0.5).astype(float)
    y[0] = 1.0  # a constant row: no pair, G* = 0
    p = np.round(rng.random(9), 1)  # ties in the item means make no pair
    p[:3] = 0.5
    got = guttman_errors(y, p)
    assert got == pytest.approx([_brute(r, p) for r in y])
    assert got[0] == 0.0 and np.all((got >= 0) & (got <= 1))


def test_on_0_1_results_g_star_is_errors_over_s_times_k_minus_s() -> None:
    p = np.array([0.9, 0.7, 0.5, 0.3, 0.1])  # easiest first
    y = np.array([[0, 1, 1, 0, 1], [1, 1, 1, 0, 0], [0, 0, 0, 1, 1]], dtype=float)
    # row 0: s = 3, errors (easy wrong, harder right): item0 x {1, 2, 4}, item3 x {4} = 4
    assert guttman_errors(y, p) == pytest.approx([4 / 6, 0.0, 1.0])


def _population(rng, m: int, k: int = 60) -> np.ndarray:
    theta = rng.normal(0, 1, m)
    b = np.linspace(-2, 2, k)
    prob = 1 / (1 + np.exp(-(1.5 * theta[:, None] - b[None, :])))
    return (rng.random(prob.shape) < prob).astype(float)


def test_misfit_flags_a_reversed_model_and_few_fitting_ones() -> None:
    shares = []
    for seed in range(10):  # the limit's own noise (300 sources) averaged over 10 populations
        rng = np.random.default_rng([11, seed])
        sources, fresh = _population(rng, 300), _population(rng, 1000)
        flagged, _, limit = guttman_misfit(fresh, sources)
        shares.append(flagged.mean())
    # leave-one-out limit: about 1 - GUTTMAN_QUANTILE of fitting models (in-sample: about 5 %)
    assert abs(np.mean(shares) - (1 - GUTTMAN_QUANTILE)) < 0.007
    reversed_model = (sources.mean(axis=0) < 0.5).astype(float)[None, :]  # hard right, easy wrong
    hit, g_rev, _ = guttman_misfit(reversed_model, sources)
    assert hit[0] and g_rev[0] > limit > 0
    none, _, nan_limit = guttman_misfit(fresh[:3], sources[:1])  # one source: no limit
    assert not none.any() and np.isnan(nan_limit)


def test_unsupported_adds_the_guttman_check_off_irt_subsets() -> None:
    rng = np.random.default_rng(12)
    sources = _population(rng, 200)
    sel = make_selector("anchor_points").fit(sources).select(20, rng=3)
    ref = sources[:, sel.indices]
    w = np.asarray(sel.weights)
    y = np.zeros((1, 20))
    y[0, np.argsort(ref.mean(axis=0))[: round(float(ref.mean()) * 20)]] = 1.0  # hardest right
    assert not score_outside(y @ w, ref @ w)[0][0]  # an ordinary subset score
    assert unsupported(sel, y, ref)[0]
    best_fitting = ref[[np.argmin(guttman_errors(ref, ref.mean(axis=0)))]]
    assert not unsupported(sel, best_fitting, ref)[0]
