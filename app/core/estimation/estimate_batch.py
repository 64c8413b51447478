"""One estimator's estimates for a batch of scored models: what :func:`app.core.scoring.score_models.score_models`
returns (and :func:`app.core.scoring.reference.model_assisted`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: What an estimate's validity rests on (:attr:`EstimateBatch.basis`).
BASES = ("design", "model", "model-assisted")


@dataclass(frozen=True)
class EstimateBatch:
    """One estimator's estimates for ``m`` scored models (arrays of shape ``(m,)``).

    Attributes
    ----------
    estimator : str
        Estimator name (``"mean"``, ``"p_irt"``...).
    value, ci_low, ci_high, se : ndarray of float64
        Point estimate, interval and standard error (NaN when unavailable).
    raw_value : ndarray of float64
        The estimator's own value before a calibration shifted it (equal to ``value`` otherwise).
    interval : str or None
        How the interval was computed (``"wilson_fpc"``, ``"hypergeometric"``,
        ``"stratified_ht"``, ``"reference_calibrated"``...).
    basis : str
        ``"design"`` (probability sample, valid whatever the models), ``"model"`` (relies on a
        model of the items or of the reference population) or ``"model-assisted"``.
    confidence : float
    available : bool
    note : str or None
        Why an estimate is unavailable, or a warning about its interval.
    """

    estimator: str
    value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    se: np.ndarray
    raw_value: np.ndarray
    interval: str | None
    basis: str
    confidence: float = 0.95
    available: bool = True
    note: str | None = None

    def row(self, i: int = 0) -> dict:
        """Model ``i``'s estimate as plain Python values (what a service serialises)."""

        def f(x):
            v = float(x[i])
            return None if not np.isfinite(v) else v

        return {
            "estimator": self.estimator,
            "value": f(self.value),
            "raw_value": f(self.raw_value),
            "ci_low": f(self.ci_low),
            "ci_high": f(self.ci_high),
            "se": f(self.se),
            "interval": self.interval,
            "basis": self.basis,
            "confidence": self.confidence,
            "available": self.available,
            "note": self.note,
        }


def make_batch(name, value, lo, hi, se, interval, basis, confidence, raw=None, note=None):
    """An available :class:`EstimateBatch` from array-likes (``raw`` defaults to ``value``)."""
    v = np.asarray(value, dtype=np.float64)
    return EstimateBatch(
        estimator=name,
        value=v,
        ci_low=np.asarray(lo, dtype=np.float64),
        ci_high=np.asarray(hi, dtype=np.float64),
        se=np.asarray(se, dtype=np.float64),
        raw_value=v if raw is None else np.asarray(raw, dtype=np.float64),
        interval=interval,
        basis=basis,
        confidence=confidence,
        note=note,
    )


def unavailable_batch(name: str, m: int, note: str, confidence: float, value=None) -> EstimateBatch:
    """An estimate without interval: NaN everywhere, or only the point ``value`` when given
    (then still ``available``); basis ``model``, ``note`` says why."""
    nan = np.full(m, np.nan)
    v = nan if value is None else np.asarray(value, dtype=np.float64)
    return EstimateBatch(
        estimator=name,
        value=v,
        ci_low=nan,
        ci_high=nan,
        se=nan,
        raw_value=v,
        interval=None,
        basis="model",
        confidence=confidence,
        available=value is not None,
        note=note,
    )


__all__ = ["BASES", "EstimateBatch", "make_batch", "unavailable_batch"]
