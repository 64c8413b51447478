"""A uniform random :class:`~app.core.results.Selection` for engine tests of interval rules."""

from __future__ import annotations

import numpy as np

from app.core.results import Selection


def random_selection(k: int, n_items: int, seed: int) -> Selection:
    """``k`` of ``n_items`` positions drawn uniformly (sorted), equal weights, the ``mean``
    estimator on correctness, as the ``random`` selector returns them."""
    idx = np.sort(np.random.default_rng(seed).choice(n_items, k, replace=False))
    return Selection(
        method="random",
        indices=idx,
        weights=np.full(k, 1.0 / k),
        estimator="mean",
        estimate_on="correct",
        signal="correct",
        n_requested=k,
        n_candidates=n_items,
        seed=seed,
        fitted={},
    )
