"""``guaranteed_size`` (issue 39): the DPP's trimming never keeps fewer items than the bound a
request is checked against, on data of many shapes (synthetic: continuous, 0/1, heavy-tailed,
few sources, thousands of items)."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors.dpp import MAX_COMPONENTS, dpp_features, guaranteed_size


@pytest.mark.parametrize("n_items", [9, 10, 40, 101, 448, 1000, 3001])
@pytest.mark.parametrize("kind", ["normal", "binary", "cauchy"])
def test_the_trimming_keeps_at_least_the_guaranteed_size(n_items: int, kind: str) -> None:
    rng = np.random.default_rng(n_items)
    for n_sources in (1, 3, 12, 60):
        if kind == "normal":
            x = rng.normal(size=(n_items, n_sources))
        elif kind == "binary":
            x = (rng.random((n_items, n_sources)) < 0.6).astype(float)
        else:
            x = rng.standard_cauchy(size=(n_items, n_sources))
        kept, _ = dpp_features(x, seed=0)
        assert kept.size >= guaranteed_size(n_items), (n_items, n_sources, kind, kept.size)


def test_the_bound_is_the_closed_form() -> None:
    assert guaranteed_size(0) == 0
    assert guaranteed_size(40) == 40 - 2 * MAX_COMPONENTS * 1  # floor(0.39) + 1 = 1 per side
    assert guaranteed_size(448) == 448 - 2 * MAX_COMPONENTS * 5  # floor(4.47) + 1
    assert guaranteed_size(101) == 101 - 2 * MAX_COMPONENTS * 2  # floor(1.0) + 1
    assert guaranteed_size(5) == 0
