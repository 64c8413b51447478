"""Is a scored model inside what a subset's source models support? (issue 38, statistics-next §10)

Model-based estimates borrow strength from the source models; three signs that a target lies
outside what they support, each computed from the subset results and the stored sources only:

* **a subset score no source reached**: the subset estimate ``y . w`` outside
  ``[min, max]`` of the sources' own subset estimates (every subset);
* **ability beyond every source's**: the IRT ability (tinyBenchmarks' stored item bank) outside
  the sources' ``[theta_min, theta_max]`` on some dimension;
* **person misfit**: the standardized log-likelihood ``l_z`` of the target's anchor responses
  below :data:`PERSON_FIT_LIMIT` (Drasgow, Levine & Williams 1985: ``l_z`` is approximately
  standard normal for a model the IRT fit describes, so -2 flags about 2 % of fitting models).

Vectorised over targets; the service (:func:`app.services.selection.scoring.population_shift`)
and the extrapolation-split study (``bench/bench_extrapolation.py``) call the same functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.core.estimation.irt_estimates import item_bank
from app.core.results import Selection

PERSON_FIT_LIMIT = -2.0


def score_outside(subset_values, source_values) -> tuple[np.ndarray, float, float]:
    """``(outside, lo, hi)``: which subset estimates (m,) fall outside the sources' range."""
    v = np.asarray(subset_values, dtype=np.float64)
    ref = np.asarray(source_values, dtype=np.float64)
    if ref.size == 0:
        return np.zeros(v.shape, dtype=bool), float("nan"), float("nan")
    lo, hi = float(ref.min()), float(ref.max())
    return (v < lo) | (v > hi), lo, hi


@dataclass(frozen=True)
class IrtSupport:
    """IRT checks of ``m`` targets on a tinyBenchmarks subset.

    Attributes
    ----------
    theta : ndarray, shape (m, D)
    lz : ndarray, shape (m,)
    outside : ndarray of bool, shape (m, D)
        Ability outside the sources' range on that dimension.
    misfit : ndarray of bool, shape (m,)
    theta_min, theta_max : ndarray, shape (D,)
    """

    theta: np.ndarray
    lz: np.ndarray
    outside: np.ndarray
    misfit: np.ndarray
    theta_min: np.ndarray
    theta_max: np.ndarray

    @property
    def flagged(self) -> np.ndarray:
        return self.outside.any(axis=1) | self.misfit


def irt_support(selection: Selection, y) -> IrtSupport | None:
    """The IRT checks for ``y`` (m, k) subset results, or None when the subset has no item bank."""
    if selection.method != "tiny_benchmarks" or "irt_a" not in selection.fitted:
        return None
    f = selection.fitted
    bank = item_bank(selection)
    anchors = np.asarray(f["anchor_candidate_positions"], dtype=np.int64)
    resp = np.atleast_2d(np.asarray(y, dtype=np.float64))
    ability = bank.score(resp, anchors, prior=float(f["ability_prior"]))
    lz = np.asarray(bank.person_fit(resp, ability.theta, anchors), dtype=np.float64)
    lo = np.asarray(f["theta_min"], dtype=np.float64)
    hi = np.asarray(f["theta_max"], dtype=np.float64)
    theta = np.asarray(ability.theta, dtype=np.float64)
    return IrtSupport(
        theta=theta,
        lz=lz,
        outside=(theta < lo) | (theta > hi),
        misfit=lz < PERSON_FIT_LIMIT,
        theta_min=lo,
        theta_max=hi,
    )


def unsupported(selection: Selection, y, source_subset_values) -> np.ndarray:
    """(m,) bool: any of the three signs (the service's ``population_shift.flagged``)."""
    resp = np.atleast_2d(np.asarray(y, dtype=np.float64))
    out, _, _ = score_outside(resp @ np.asarray(selection.weights), source_subset_values)
    irt = irt_support(selection, resp)
    return out if irt is None else out | irt.flagged


__all__ = ["PERSON_FIT_LIMIT", "IrtSupport", "irt_support", "score_outside", "unsupported"]
