"""Is a scored model inside what a subset's source models support? (issue 38, statistics-next §10)

Model-based estimates borrow strength from the source models; three signs that a target lies
outside what they support, each computed from the subset results and the stored sources only:

* **a subset score no source reached**: the subset estimate ``y . w`` outside
  ``[min, max]`` of the sources' own subset estimates (every subset);
* **ability beyond every source's**: the IRT ability (tinyBenchmarks' stored item bank) outside
  the sources' ``[theta_min, theta_max]`` on some dimension;
* **person misfit**: on a subset with an IRT item bank, the standardized log-likelihood ``l_z``
  of the target's anchor responses below :data:`PERSON_FIT_LIMIT` (Drasgow, Levine & Williams
  1985: ``l_z`` is approximately standard normal for a model the IRT fit describes, so -2 flags
  about 2 % of fitting models); on every other subset, the normed Guttman errors ``G*`` of the
  target's subset results (Meijer 1994; items ordered by the sources' mean score) above the
  :data:`GUTTMAN_QUANTILE` quantile of the sources' own ``G*``: a model that gets the items the
  sources find easy wrong and the hard ones right, which a weighting learned from the sources
  misreads (measured: ``bench/RESULTS.md``, "Closing runs III").

Vectorised over targets; the service (:func:`app.services.selection.scoring.population_shift`)
and the extrapolation-split study (``bench/bench_extrapolation.py``) call the same functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.core.estimation.irt_estimates import item_bank
from app.core.results import Selection

PERSON_FIT_LIMIT = -2.0
GUTTMAN_QUANTILE = 0.98
_PAIR_BUDGET = 4_000_000  # floats per block of targets x items x items


def guttman_errors(y, item_means) -> np.ndarray:
    """Normed Guttman errors ``G*`` of each row of ``y`` (m, k) against the item order of
    ``item_means`` (k,).

    A Guttman error is a pair of items where the easier one (higher mean) scores lower than the
    harder one; on scores in [0, 1] a pair counts ``max(0, y_hard - y_easy)``, which is the
    classical count on 0/1 results. ``G*`` divides by the row's total pairwise spread
    ``sum_{i<j} |y_i - y_j|`` (on 0/1 results ``s (k - s)``, the most errors ``s`` right answers
    can make), so it lies in [0, 1]; a constant row has ``G* = 0``. Items of equal mean make no
    pair.

    Parameters
    ----------
    y : array_like, shape (m, k)
    item_means : array_like, shape (k,) or (m, k)
        One item order for every row, or one per row (a source scored against the others).

    Returns
    -------
    ndarray, shape (m,)

    Notes
    -----
    O(m k^2) time; targets are processed in blocks of at most ``4e6 / k^2`` rows so memory stays
    bounded whatever ``m``.
    """
    resp = np.atleast_2d(np.asarray(y, dtype=np.float64))
    m, k = resp.shape
    p = np.broadcast_to(np.asarray(item_means, dtype=np.float64), (m, k))
    out = np.zeros(m)
    block = max(1, _PAIR_BUDGET // max(1, k * k))
    for start in range(0, m, block):  # bounded-memory blocks, not a loop per model
        r, q = resp[start : start + block], p[start : start + block]
        easier = q[:, :, None] > q[:, None, :]  # [m, i, j]: item i easier than item j
        diff = r[:, None, :] - r[:, :, None]  # [m, i, j] = y_j - y_i
        errors = np.where(easier, np.maximum(diff, 0.0), 0.0).sum(axis=(1, 2))
        spread = np.abs(diff).sum(axis=(1, 2)) / 2.0
        out[start : start + block] = np.divide(
            errors, spread, out=np.zeros_like(errors), where=spread > 0
        )
    return out


def guttman_limit(source_results) -> float:
    """The :data:`GUTTMAN_QUANTILE` quantile of the sources' own ``G*`` (``source_results``
    (r, k)); NaN with fewer than 2 sources.

    Each source is scored against the item means of the *other* sources (leave one out): scored
    against means it helped make, a source looks more orderly than a new model from the same
    population, and the limit would flag more than ``1 - GUTTMAN_QUANTILE`` of such models."""
    ref = np.atleast_2d(np.asarray(source_results, dtype=np.float64))
    r = ref.shape[0]
    if r < 2:
        return float("nan")
    loo_means = (ref.sum(axis=0)[None, :] - ref) / (r - 1)
    return float(np.quantile(guttman_errors(ref, loo_means), GUTTMAN_QUANTILE))


def guttman_misfit(y, source_results, limit: float | None = None):
    """``(misfit, g_star, limit)``: which rows of ``y`` (m, k) have more Guttman errors than
    :data:`GUTTMAN_QUANTILE` of the sources (``source_results`` (r, k), on the same items);
    ``limit``: :func:`guttman_limit` of the same sources when already known (a cache)."""
    ref = np.atleast_2d(np.asarray(source_results, dtype=np.float64))
    g = guttman_errors(y, ref.mean(axis=0))
    limit = guttman_limit(ref) if limit is None else float(limit)
    return g > limit, g, limit  # NaN limit (< 2 sources): nothing flagged


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


def unsupported(selection: Selection, y, source_subset_results) -> np.ndarray:
    """(m,) bool: any of the three signs (the service's ``population_shift.flagged``);
    ``source_subset_results`` (r, k): the sources' results on the subset's items."""
    resp = np.atleast_2d(np.asarray(y, dtype=np.float64))
    ref = np.atleast_2d(np.asarray(source_subset_results, dtype=np.float64))
    w = np.asarray(selection.weights)
    out, _, _ = score_outside(resp @ w, ref @ w)
    irt = irt_support(selection, resp)
    if irt is not None:
        return out | irt.flagged
    return out | guttman_misfit(resp, ref)[0]


__all__ = [
    "GUTTMAN_QUANTILE",
    "PERSON_FIT_LIMIT",
    "IrtSupport",
    "guttman_errors",
    "guttman_limit",
    "guttman_misfit",
    "irt_support",
    "score_outside",
    "unsupported",
]
