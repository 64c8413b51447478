"""Design-based estimates of a full-benchmark mean from a (possibly weighted) subset.

Complements :mod:`app.core.estimation.stats` (plain means on uniform random subsets) with the weighted
analogues used for weighted / Horvitz-Thompson subsets (Kish's effective size, the linearised
variance of a weighted mean, Wilson bounds at Kish's size), and the inclusion probabilities of
probability subsets. :mod:`app.core.scoring.score_models` builds every estimate of a subset on these.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

from app.core.estimation.stats import (
    fpc,
    normal_paired_comparison,
    wilson_bounds,
    wilson_center_half,
)
from app.core.results import Estimate, PairedComparison, Selection

#: Selectors whose subsets are probability samples with known inclusion probabilities.
PROBABILITY_DESIGNS = frozenset({"random", "subtask_stratified", "confidence_stratified"})
#: Estimators linear in the item results: scored design-based on probability subsets.
LINEAR_ESTIMATORS = frozenset({"mean", "weighted_mean", "horvitz_thompson", "irt"})


def normal_quantile(confidence: float) -> float:
    """Two-sided standard-normal quantile ``z = Phi^{-1}(1/2 + confidence/2)``.

    Raises ``ValueError`` unless ``0 < confidence < 1``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: expected a level in (0, 1), got {confidence}")
    return float(_st.norm.ppf(0.5 + confidence / 2.0))


def kish_n_eff(weights) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` (``n`` for uniform weights)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or (w < 0).any() or w.sum() <= 0:
        raise ValueError("weights: expected non-negative weights with a positive sum")
    return float(w.sum() ** 2 / np.sum(w**2))


def weighted_estimate(values, weights, n_population: int, *, confidence: float = 0.95) -> Estimate:
    """Linear estimate ``sum_i w_i v_i`` of a full-benchmark mean with a Wilson-type interval.

    Parameters
    ----------
    values : array_like, shape (k,)
        Per-item scores in [0, 1] on the subset's items.
    weights : array_like, shape (k,)
        The subset's estimator coefficients (mean-type: sum to 1; Horvitz-Thompson:
        ``1 / (N pi_i)``).
    n_population : int
        ``N``, the benchmark's size.
    confidence : float

    Returns
    -------
    Estimate
        ``value = sum w v`` (clipped to [0, 1] only for the interval); ``method =
        "wilson_kish_fpc"``.

    Notes
    -----
    The weighted analogue of :func:`app.core.estimation.stats.wilson_interval`: the Wilson score interval
    for ``p = clip(value, 0, 1)`` at Kish's effective size ``n_w = (sum w)^2 / sum w^2``, deflated
    by the finite-population correction ``f = (N - k) / (N - 1)`` (``n_eff = n_w / f``):

    ``center = (p + z^2 / (2 n_eff)) / (1 + z^2 / n_eff)``,
    ``half = z / (1 + z^2 / n_eff) sqrt(p (1 - p) / n_eff + z^2 / (4 n_eff^2))``.

    With uniform weights ``1/k`` it equals the plain Wilson-FPC interval. ``se`` is
    ``sqrt(f * sum_i w_i^2 (v_i - v_w)^2 * k / (k - 1)) / sum w`` with ``v_w`` the normalised
    weighted mean (the linearised variance of a weighted mean; 0 when ``k = 1`` or ``k = N``).
    It treats the design as a with-equal-probability sample reweighted, which is approximate for
    clustered (Anchor Points, tinyBenchmarks) and stratified (HT) designs.
    """
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if v.ndim != 1 or v.shape != w.shape or v.size == 0:
        raise ValueError("weights: expected one weight per value")
    if not np.all(np.isfinite(v)) or v.min() < 0 or v.max() > 1:
        raise ValueError("values: expected finite scores in [0, 1]")
    k = v.shape[0]
    n_w = kish_n_eff(w)
    f = fpc(k, n_population)
    value = float(w @ v)
    p = min(1.0, max(0.0, value))
    z = normal_quantile(confidence)
    vw = float(w @ v / w.sum())
    var = f * float(np.sum(w**2 * (v - vw) ** 2)) * (k / (k - 1) if k > 1 else 0.0) / w.sum() ** 2
    lo, hi = wilson_bounds(p, n_w, f, z)
    return Estimate(
        value=value,
        ci_low=float(lo),
        ci_high=float(hi),
        se=float(np.sqrt(max(var, 0.0))),
        n=k,
        n_population=int(n_population),
        method="wilson_kish_fpc",
        confidence=confidence,
    )


def weighted_paired_comparison(new_values, baseline_full, indices, weights) -> PairedComparison:
    """P(a model known on a weighted subset beats a baseline known on every item).

    Parameters
    ----------
    new_values : array_like of {0, 1}, shape (k,)
        The new model's results on ``indices``.
    baseline_full : array_like of {0, 1}, shape (N,)
    indices : array_like of int, shape (k,)
        Distinct item positions.
    weights : array_like, shape (k,)
        The subset's estimator coefficients.

    Returns
    -------
    PairedComparison
        ``mean_diff`` is the subset's estimate of the full-benchmark difference,
        ``sum_i w_i (y_i - b_i) / sum_i w_i``.

    Notes
    -----
    With ``d_i = y_i - b_i``, ``d_w = sum w d / sum w`` and ``f = (N - k) / (N - 1)``:
    ``SE^2 = f * k / (k - 1) * sum_i w_i^2 (d_i - d_w)^2 / (sum w)^2`` and
    ``P(better) = Phi(d_w / SE)`` (the sign of ``d_w`` when ``SE = 0``). For uniform weights this
    is exactly :func:`app.core.estimation.stats.compare_to_baseline`. The exact McNemar test on the shared
    items is unweighted.
    """
    y = np.asarray(new_values, dtype=np.float64)
    base = np.asarray(baseline_full, dtype=np.float64)
    idx = np.asarray(indices, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    if y.ndim != 1 or idx.shape != y.shape or w.shape != y.shape or y.size == 0:
        raise ValueError("indices: expected one item position and weight per result")
    if base.ndim != 1 or idx.min() < 0 or idx.max() >= base.shape[0]:
        raise ValueError("indices: positions must lie within the baseline's items")
    if np.unique(idx).shape[0] != idx.shape[0]:
        raise ValueError("indices: positions must be distinct")
    kish_n_eff(w)
    k, n_pop = y.shape[0], base.shape[0]
    d = y - base[idx]
    mean = float(w @ d / w.sum())
    ss = float(np.sum(w**2 * (d - mean) ** 2)) / w.sum() ** 2
    se = float(np.sqrt(fpc(k, n_pop) * ss * k / (k - 1))) if k > 1 else 0.0
    return normal_paired_comparison(y, base[idx], mean, se, n_pop)


def design_inclusion(selection: Selection, n_population: int) -> tuple[np.ndarray, np.ndarray]:
    """Inclusion probabilities and stratum labels of a probability subset's items.

    Returns
    -------
    pi : ndarray, shape (k,)
        ``fitted["inclusion_probability"]`` when stored, else ``1 / (N w_i)`` (the weights of
        stratified SRS subsets are ``N_h / (N n_h)``; uniform weights give ``n / N``).
    strata : ndarray of int, shape (k,)
        Items grouped by equal ``pi`` (strata with the same sampling fraction are collapsed,
        which can only overstate the variance of a stratified design).
    """
    w = np.asarray(selection.weights, dtype=np.float64)
    if "inclusion_probability" in selection.fitted:
        pi = np.asarray(selection.fitted["inclusion_probability"], dtype=np.float64)
    else:
        pi = np.clip(1.0 / (n_population * w / w.sum()), 0.0, 1.0)
    _, strata = np.unique(np.round(pi, 12), return_inverse=True)
    return pi, strata.ravel()


def weighted_se(y: np.ndarray, w: np.ndarray, n_population: int) -> np.ndarray:
    """Vectorised ``weighted_estimate(...).se`` (linearised SE of a weighted mean, with FPC).

    Parameters
    ----------
    y : ndarray, shape (m, k)
        Per-item scores of ``m`` models on the subset's items.
    w : ndarray, shape (k,)
        The subset's weights.
    n_population : int

    Returns
    -------
    ndarray, shape (m,)
        ``sqrt(f k / (k - 1) sum_i w_i^2 (y_i - y_w)^2) / sum w`` (0 when ``k < 2``).
    """
    k = w.shape[0]
    if k < 2:
        return np.zeros(y.shape[0])
    vw = y @ w / w.sum()
    ss = ((y - vw[:, None]) ** 2) @ (w**2)
    return np.sqrt(fpc(k, n_population) * ss * k / (k - 1)) / w.sum()


def kish_wilson_bounds(values: np.ndarray, w: np.ndarray, n_population: int, z: float):
    """Vectorised :func:`weighted_estimate` bounds (Wilson at Kish's n with the FPC).

    Parameters
    ----------
    values : ndarray, shape (m,)
        Point estimates (clipped to [0, 1]).
    w : ndarray, shape (k,)
        The subset's weights.
    n_population : int
    z : float
        Normal quantile (:func:`normal_quantile`).

    Returns
    -------
    lo, hi : ndarray, shape (m,)
        Degenerate at the value when ``k = N`` (no sampling error).
    """
    k = w.shape[0]
    n_w = kish_n_eff(w)
    f = fpc(k, n_population)
    p = np.clip(values, 0.0, 1.0)
    if f == 0.0:
        return p, p
    center, half = wilson_center_half(p, n_w / f, z)
    return np.maximum(0.0, center - half), np.minimum(1.0, center + half)


__all__ = [
    "LINEAR_ESTIMATORS",
    "PROBABILITY_DESIGNS",
    "design_inclusion",
    "kish_n_eff",
    "kish_wilson_bounds",
    "normal_quantile",
    "weighted_estimate",
    "weighted_paired_comparison",
    "weighted_se",
]
