"""Uniform random selection (paper §3.1)."""

from __future__ import annotations

import numpy as np

from app.core._validation import ResultsData
from app.core.selectors.base import Chosen, Selector


class RandomSelector(Selector):
    """Draw ``n`` distinct candidates uniformly; estimate with the plain mean.

    Source models are not used. Cost: O(n_candidates) per selection.
    """

    name = "random"
    estimators = ("mean",)
    uses_sources = False

    def _select(self, data: ResultsData, n: int, rng: np.random.Generator) -> Chosen:
        picked = rng.choice(data.candidates, size=n, replace=False)
        return Chosen(indices=picked, weights=np.full(n, 1.0 / n))
