"""Scoring a model known only on a (possibly weighted) subset: intervals and baseline comparisons.

Complements :mod:`app.core.stats` (plain means on uniform random subsets) with the weighted
analogues used for weighted / Horvitz-Thompson subsets, and the subset size needed to order a
pair at an observed gap.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

from app.core.exact import order_probabilities
from app.core.results import Estimate, PairedComparison
from app.core.stats import fpc, normal_paired_comparison, wilson_bounds


def _z(confidence: float) -> float:
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
    The weighted analogue of :func:`app.core.stats.wilson_interval`: the Wilson score interval
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
    z = _z(confidence)
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
    is exactly :func:`app.core.stats.compare_to_baseline`. The exact McNemar test on the shared
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


def size_needed_for_gap(
    n10: int, n01: int, n_shared: int, n_population: int, probability: float = 0.8
) -> int | None:
    """Smallest random-subset size ordering a pair correctly with ``probability``, extrapolated
    from the discordant counts observed on ``n_shared`` items.

    Parameters
    ----------
    n10, n01 : int
        Shared items only the leader / only the other model gets right.
    n_shared : int
        Items both were observed on.
    n_population : int
        ``N``, the benchmark's size.
    probability : float

    Returns
    -------
    int or None
        ``None`` when ``n10 == n01`` (no observed gap to detect). At most ``N`` (the full
        benchmark orders the pair by definition).

    Notes
    -----
    The pair's full-benchmark discordant counts are taken as ``round(N n10 / k)`` and
    ``round(N n01 / k)`` (the observed rates scaled to the benchmark); the exact multivariate
    hypergeometric P(same order) (:func:`app.core.exact.order_probabilities`) is evaluated on a
    geometric grid of sizes, then on every size between the first grid point reaching
    ``probability`` and its predecessor (as :func:`app.core.exact.smallest_n`).
    """
    if n_shared < 1 or n_population < n_shared:
        raise ValueError("n_shared: expected 1 <= n_shared <= n_population")
    if not 0 <= n10 <= n_shared or not 0 <= n01 <= n_shared or n10 + n01 > n_shared:
        raise ValueError("n10: discordant counts must fit in n_shared")
    hi, lo = max(n10, n01), min(n10, n01)
    if hi == lo:
        return None
    scale = n_population / n_shared
    h = min(n_population, round(hi * scale))
    lw = min(n_population - h, round(lo * scale))
    if h <= lw:
        return None
    grid = np.unique(np.geomspace(1, n_population, 48).round().astype(np.int64))
    p = order_probabilities(h, lw, n_population, grid).p_greater
    ok = np.flatnonzero(p >= probability)
    if ok.size == 0:  # pragma: no cover - n = N always orders the pair
        return n_population
    first = int(ok[0])
    low = 1 if first == 0 else int(grid[first - 1]) + 1
    cand = np.arange(low, int(grid[first]) + 1)
    p_c = order_probabilities(h, lw, n_population, cand).p_greater
    return int(cand[np.flatnonzero(p_c >= probability)[0]])


__all__ = ["kish_n_eff", "size_needed_for_gap", "weighted_estimate", "weighted_paired_comparison"]
