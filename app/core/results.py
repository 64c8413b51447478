"""Frozen result types returned by the engine, each carrying its provenance."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Selection:
    """A fixed micro-benchmark chosen by a selector.

    Attributes
    ----------
    method : str
        Registry name of the selector (``"random"``, ``"anchor_points"``...).
    indices : ndarray of int64, shape (k,)
        Selected item positions in the benchmark's item order (distinct). ``k`` may differ from
        the requested ``n`` only where the method says so (confidence-stratified overflow).
    weights : ndarray of float64, shape (k,)
        Coefficients of the method's default *linear* estimator, aligned with ``indices``:
        ``estimate = sum(weights * y[indices])``. For mean-type estimators they are >= 0 and sum
        to 1; for Horvitz-Thompson they are ``1 / (N * pi_i)``.
    estimator : str
        Name of the default estimator (see :mod:`app.core.estimators`).
    estimate_on : str
        ``"correct"`` or ``"confidence"``: which per-item signal the default estimator reads.
    signal : str
        Which source signal drove the selection: ``"confidence"`` or ``"correct"`` (the fallback
        used when no confidences were supplied).
    n_requested : int
    n_candidates : int
        Size of the candidate pool the subset was drawn from.
    seed : int or None
        Seed the selection's randomness flowed from (``None`` only when the caller passed a
        ``Generator``).
    params : Mapping
        The selector's parameters, as given.
    fitted : Mapping[str, ndarray]
        Fitted state needed by non-linear estimators (e.g. IRT item parameters for p-IRT), so a
        stored selection can score new models without refitting.
    """

    method: str
    indices: np.ndarray
    weights: np.ndarray
    estimator: str
    estimate_on: str
    signal: str
    n_requested: int
    n_candidates: int
    seed: int | None
    params: Mapping[str, Any] = field(default_factory=dict)
    fitted: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", _freeze(np.asarray(self.indices, dtype=np.int64)))
        object.__setattr__(self, "weights", _freeze(np.asarray(self.weights, dtype=np.float64)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(
            self, "fitted", MappingProxyType({k: _freeze(v) for k, v in dict(self.fitted).items()})
        )
        if self.indices.shape != self.weights.shape:
            raise ValueError("weights: must align with indices")

    @property
    def size(self) -> int:
        return int(self.indices.shape[0])
