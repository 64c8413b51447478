"""Fast paths of the engine against their direct (slow) definitions."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors.dpp import multi_indices, projection_basis


@pytest.mark.parametrize("n", [1, 7, 60, 300])
def test_dpp_basis_is_the_qr_of_the_entrywise_vandermonde_bit_for_bit(n):
    """The power table + gather builds exactly ``V[i, j] = prod_r x_ir ** alpha_jr``."""
    x = np.random.default_rng(n).uniform(-0.99, 0.99, (700, 4))
    alpha = multi_indices(n, 4)
    vander = np.ones((x.shape[0], n))
    for r in range(4):
        vander *= x[:, r : r + 1] ** alpha[:, r]
    q_direct, _ = np.linalg.qr(vander, mode="reduced")
    np.testing.assert_array_equal(projection_basis(x, n), q_direct)
