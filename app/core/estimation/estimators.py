"""Estimators: turn a model's results on a selection into a full-benchmark estimate.

Each estimator is a function ``(selection, correct, confidence) -> ndarray (n_models,)`` where
``correct``/``confidence`` are (n_models, selection.size) in ``selection.indices`` order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.core.estimation import irt_estimates as _irt
from app.core.results import Selection

EstimatorFn = Callable[[Selection, np.ndarray, np.ndarray | None], np.ndarray]


def _linear(selection: Selection, values: np.ndarray) -> np.ndarray:
    return values @ selection.weights


def weighted_mean(
    selection: Selection, correct: np.ndarray, confidence: np.ndarray | None
) -> np.ndarray:
    """``sum_i w_i y_i`` with the selection's weights (plain mean when weights are uniform)."""
    return _linear(selection, correct)


def weighted_confidence(
    selection: Selection, correct: np.ndarray, confidence: np.ndarray | None
) -> np.ndarray:
    """``sum_i w_i p_i`` on the gold-option probability (Anchor Points' paper estimator, §3.5)."""
    if confidence is None:
        raise ValueError("confidence: this estimator reads gold-option probabilities; none given")
    return _linear(selection, confidence)


ESTIMATORS: dict[str, EstimatorFn] = {
    "mean": weighted_mean,
    "weighted_mean": weighted_mean,
    "horvitz_thompson": weighted_mean,
    "weighted_confidence": weighted_confidence,
    "irt": weighted_mean,  # tinyBenchmarks' anchor-weighted mean (paper §3.6)
    "p_irt": _irt.p_irt,
    "gp_irt": _irt.gp_irt,
}


def _as_2d(name: str, values, k: int) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != k:
        raise ValueError(f"{name}: expected shape (n_models, {k}), got {np.shape(values)}")
    if not np.all(np.isfinite(arr)) or arr.min(initial=0) < 0 or arr.max(initial=0) > 1:
        raise ValueError(f"{name}: values must be finite and in [0, 1]")
    return arr


def estimate(
    selection: Selection, correct, confidence=None, *, estimator: str | None = None
) -> np.ndarray:
    """Apply a registered estimator; see the module docstring for shapes."""
    name = estimator or selection.estimator
    try:
        fn = ESTIMATORS[name]
    except KeyError:
        raise ValueError(
            f"estimator: unknown estimator {name!r}; choose from {sorted(ESTIMATORS)}"
        ) from None
    y = _as_2d("correct", correct, selection.size)
    p = None if confidence is None else _as_2d("confidence", confidence, selection.size)
    return fn(selection, y, p)


__all__ = ["ESTIMATORS", "estimate"]
