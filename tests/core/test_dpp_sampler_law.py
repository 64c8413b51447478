"""The projection-DPP samplers draw from the right law: closed-form inclusion probabilities.

For the projection DPP with kernel ``K = Q Q^T`` the marginal inclusion probability of item ``i``
is ``K_ii`` and the pair inclusion probability ``K_ii K_jj - K_ij^2`` (Hough et al. 2006). Both
samplers (chain rule and phased rejection) are run 6,000 times on a 10-item, rank-4 kernel; each
frequency must lie within 4.5 binomial standard errors of its closed form (SE <= 0.65 points at
6,000 draws, so an error of 3 points in any of the 10 + 45 frequencies is detected; a correct
sampler exceeds 4.5 SE in one of 55 frequencies with probability < 4e-4, and the seed is fixed).
Samples must be ``rank`` distinct items.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors.dpp import _exact_step, sample_projection_dpp

DRAWS = 6000


def _kernel():
    q, _ = np.linalg.qr(
        np.random.default_rng(11).standard_normal((10, 4)) * np.linspace(0.3, 2, 10)[:, None]
    )
    return q


@pytest.mark.parametrize("method", ["chain", "phased"])
def test_inclusion_probabilities_match_the_kernel(method):
    q = _kernel()
    k = q @ q.T
    rng = np.random.default_rng(2024)
    hits = np.zeros((10, 10))
    for _ in range(DRAWS):
        s = sample_projection_dpp(q, rng, method=method)
        assert s.shape == (4,) and np.unique(s).size == 4 and s.min() >= 0 and s.max() < 10
        ind = np.zeros(10)
        ind[s] = 1.0
        hits += np.outer(ind, ind)
    freq = hits / DRAWS
    want = np.outer(np.diag(k), np.diag(k)) - k * k
    np.fill_diagonal(want, np.diag(k))
    se = np.sqrt(np.maximum(want * (1 - want), 1e-4) / DRAWS)
    assert np.max(np.abs(freq - want) / se) < 4.5


def test_exact_step_reaches_the_last_item():
    """Residual norms 1, 2, 3 (nothing drawn yet): item i is drawn with probability (i + 1) / 6."""

    basis = np.diag(np.sqrt([1.0, 2.0, 3.0]))
    rng = np.random.default_rng(9)
    draws = np.array(
        [_exact_step(basis, np.empty((0, 3)), np.zeros(3, dtype=bool), rng)[0] for _ in range(3000)]
    )
    freq = np.bincount(draws, minlength=3) / 3000
    want = np.array([1.0, 2.0, 3.0]) / 6.0
    assert np.all(np.abs(freq - want) < 4.5 * np.sqrt(want * (1 - want) / 3000))
