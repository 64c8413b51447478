"""Paired 2x2 counts of every model pair and their tests: McNemar, finite-population, multiplicity.

The vectorised per-pair statistics under :func:`app.core.ranking.leaderboard.leaderboard`, which
re-exports the public names it had before this module was split off (:class:`PairCounts`,
:func:`pairwise_counts`, :func:`mcnemar_pvalues`, :func:`finite_population_pvalues`,
:func:`adjust_pvalues`, ``CORRECTIONS``).

* :func:`pairwise_counts`: all ``m (m - 1) / 2`` paired tables from matrix products
  (``n11 = Y Yᵀ``; ``n10``, ``n01`` from row sums), memory ``O(m² + m N)``.
* :func:`mcnemar_pvalues`: exact McNemar test (the items are a sample from an item population).
* :func:`finite_population_pvalues`: exact conditional hypergeometric test of the full-benchmark
  difference from a uniform random subset; :func:`weighted_pair_tests`: the normal
  (Horvitz-Thompson-style) test for a weighted subset.
* :func:`adjust_pvalues`: Holm or Benjamini-Hochberg multiplicity correction.
* :func:`wilson`, :func:`newcombe`: Wilson bounds and Newcombe's paired-difference interval.
* :func:`as_binary`, :func:`as_mask`: validation of the 0/1 results and the coverage mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as _st
from scipy.special import gammaln

__all__ = [
    "CORRECTIONS",
    "PairCounts",
    "adjust_pvalues",
    "as_binary",
    "as_mask",
    "finite_population_pvalues",
    "mcnemar_pvalues",
    "newcombe",
    "pairwise_counts",
    "weighted_pair_tests",
    "wilson",
]

CORRECTIONS = ("holm", "bh", "none")
Correction = Literal["holm", "bh", "none"]

_EXACT_F32 = 2**24  # integer sums below this are exact in float32 accumulation
_FP_CHUNK = 4_000_000  # elements per block of the finite-population p-value table


@dataclass(frozen=True)
class PairCounts:
    """Paired 2x2 counts of every model pair, as ``(m, m)`` matrices.

    Attributes
    ----------
    n11, n10, n01, n00 : ndarray of int64, shape (m, m)
        Items both / only row / only column / neither model got right, over the items both
        models have (``n10 = n01.T``).
    n_shared : ndarray of int64, shape (m, m)
        Items both models have (``N`` everywhere without a coverage mask).
    """

    n11: np.ndarray
    n10: np.ndarray
    n01: np.ndarray
    n00: np.ndarray
    n_shared: np.ndarray


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
def as_binary(correct) -> np.ndarray:
    c = np.asarray(correct)
    if c.ndim != 2 or c.shape[0] < 2 or c.shape[1] < 1:
        raise ValueError("correct: expected a 2-d 0/1 array with at least 2 models and 1 item")
    if c.dtype != np.bool_ and not np.isin(c, (0, 1)).all():
        raise ValueError("correct: expected 0/1 correctness")
    return c


def as_mask(coverage, shape) -> np.ndarray | None:
    if coverage is None:
        return None
    mask = np.asarray(coverage)
    if mask.shape != shape:
        raise ValueError(f"coverage: expected a boolean mask of shape {shape}, got {mask.shape}")
    if mask.dtype != np.bool_:
        if not np.isin(mask, (0, 1)).all():
            raise ValueError("coverage: expected a boolean mask")
        mask = mask.astype(bool)
    if mask.all():
        return None
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(f"coverage: model rows {empty.tolist()} have no results")
    return mask


# ---------------------------------------------------------------------------------------------
# counts
# ---------------------------------------------------------------------------------------------
def pairwise_counts(correct, *, coverage=None) -> PairCounts:
    """Paired 2x2 counts of all model pairs from matrix products.

    Parameters
    ----------
    correct : array_like of {0, 1} or bool, shape (m, N)
    coverage : array_like of bool, shape (m, N), optional
        Which results exist; pairs are counted on the items both models have.

    Returns
    -------
    PairCounts

    Notes
    -----
    With ``Y`` the 0/1 matrix (zeroed where not covered) and ``M`` the coverage mask:
    ``n11 = Y Yᵀ``, ``s = Y Mᵀ`` (row model's correct count on items the column model has),
    ``n10 = s - n11``, ``n01 = sᵀ - n11``, ``n_shared = M Mᵀ``,
    ``n00 = n_shared - n11 - n10 - n01``. Without a mask ``s`` is the row sums and
    ``n_shared = N``, so a single product suffices. Products run in float32 (exact: every
    partial sum is an integer below 2²⁴) or float64 when ``N >= 2²⁴``; memory is
    ``O(m² + m N)``.
    """
    c = as_binary(correct)
    m, n = c.shape
    mask = as_mask(coverage, c.shape)
    dtype = np.float32 if n < _EXACT_F32 else np.float64
    y = c.astype(dtype)
    if mask is not None:
        y *= mask
    n11 = np.rint(y @ y.T).astype(np.int64)
    if mask is None:
        s = np.rint(y.sum(axis=1, dtype=np.float64)).astype(np.int64)
        n10 = s[:, None] - n11
        n_shared = np.full((m, m), n, dtype=np.int64)
    else:
        mk = mask.astype(dtype)
        n10 = np.rint(y @ mk.T).astype(np.int64) - n11
        n_shared = np.rint(mk @ mk.T).astype(np.int64)
    n01 = n10.T.copy()
    n00 = n_shared - n11 - n10 - n01
    return PairCounts(n11=n11, n10=n10, n01=n01, n00=n00, n_shared=n_shared)


# ---------------------------------------------------------------------------------------------
# p-values
# ---------------------------------------------------------------------------------------------
def mcnemar_pvalues(n10, n01, *, mid_p: bool = False) -> np.ndarray:
    """Exact two-sided McNemar p-values, vectorised.

    Parameters
    ----------
    n10, n01 : array_like of int
        Discordant counts (broadcast together).
    mid_p : bool
        Return the mid-p value (Lancaster 1961) instead.

    Returns
    -------
    ndarray of float64
        ``min(1, 2 F(min(n10, n01)))`` with ``F`` the Binomial(``n10 + n01``, ½) cdf; this equals
        ``scipy.stats.binomtest(n10, n10 + n01, 0.5).pvalue`` (the distribution is symmetric, so
        the "probabilities no larger than observed" rule is the doubled tail). 1 when there are
        no discordant items. Mid-p: the doubled one-sided mid-p ``min(1, 2 F(lo) - f(lo))``
        with ``f`` the pmf and ``lo = min(n10, n01)`` (1 when ``n10 = n01``).

    References
    ----------
    McNemar (1947), Psychometrika 12:153. Fagerland, Lydersen & Laake (2013), BMC Med Res
    Methodol 13:91 (the mid-p McNemar test).
    """
    n10 = np.asarray(n10, dtype=np.int64)
    n01 = np.asarray(n01, dtype=np.int64)
    k = n10 + n01
    lo = np.minimum(n10, n01)
    tail = 2.0 * _st.binom.cdf(lo, k, 0.5)
    if mid_p:
        tail = tail - _st.binom.pmf(lo, k, 0.5)
    p = np.minimum(1.0, tail)
    return np.where((k == 0) | (2 * lo == k), 1.0, p)


def finite_population_pvalues(
    n10, n01, n: int, n_population: int, *, mid_p: bool = False
) -> np.ndarray:
    """Exact conditional test of ``H0: full-benchmark difference = 0`` from a uniform subset.

    Parameters
    ----------
    n10, n01 : array_like of int
        Discordant counts of each pair on a uniform random subset of ``n`` items.
    n : int
        Subset size.
    n_population : int
        Benchmark size ``N >= n``.
    mid_p : bool
        Use mid-p tails (not guaranteed to be valid; less conservative).

    Returns
    -------
    ndarray of float64
        Two-sided p-values, same shape as the broadcast counts.

    Notes
    -----
    Let the full benchmark have ``D10`` / ``D01`` items only A / only B gets right,
    ``D = D10 + D01``. Given the number ``k = x + y`` of discordant items in the subset
    (``x = n10``, ``y = n01``), the subset's discordant items are a uniform random ``k``-subset of
    the ``D`` discordant items, so exactly ``x | k ~ Hypergeom(D, D10, k)``. Under
    ``H0: Δ = 0`` (``D10 = D01 = D / 2``) this is symmetric about ``k / 2`` and the two-sided
    p-value for known ``D`` is ``p_D = min(1, 2 P(X <= min(x, y)))``. ``D`` is unknown but must
    be even and lie in ``[k, N - n + k]``; the reported p-value is ``sup_D p_D`` over that range,
    so it is valid for every ``D`` (``P(p <= a | H0) <= a`` exactly, conditionally on ``k``; no
    approximation). As ``D -> ∞`` ``p_D`` tends to the binomial McNemar p-value, so for
    ``n << N`` the test is close to McNemar, and it sharpens as ``n -> N``: at ``n = N`` the
    range is ``{k}`` and ``p = 1`` if ``x = y`` else ``0`` (the difference is known).

    Numerically ``p_D`` was non-decreasing in ``D`` in every case checked (all ``k < 60``,
    ``lo < k / 2``, ``D`` up to ``k + 400``), so the supremum is usually attained at the largest
    feasible ``D``; the engine does not rely on that and evaluates the whole range.

    Cost: ``O(K · L · (N - n) / 2)`` with ``K`` distinct observed ``k`` and ``L`` the largest
    ``min(x, y)`` (at most ``n² (N - n) / 8``), in blocks of bounded memory; p-values are
    looked up per pair from that table.
    """
    x = np.asarray(n10, dtype=np.int64)
    y = np.asarray(n01, dtype=np.int64)
    x, y = np.broadcast_arrays(x, y)
    if not 0 < n <= n_population:
        raise ValueError(f"n_population: expected N >= n = {n}, got {n_population}")
    k = x + y
    lo = np.minimum(x, y)
    if k.size and k.max() > n:
        raise ValueError("n10: discordant counts exceed the subset size")
    ks, k_inv = np.unique(k.ravel(), return_inverse=True)
    n_lo = int(lo.max()) + 1 if lo.size else 1
    spare = n_population - n
    n_d = spare // 2 + 1  # even D in [k, k + spare]: at most this many
    d0 = ks + (ks % 2)  # smallest even D >= k
    lf = gammaln(np.arange(n_population + 2, dtype=np.float64) + 1.0)
    grid = np.arange(n_lo)
    best = np.zeros((ks.size, n_lo))
    rows_per_block = max(1, _FP_CHUNK // max(1, ks.size * n_lo))
    for start in range(0, n_d, rows_per_block):  # blocks over the nuisance D, not over pairs
        j = np.arange(start, min(n_d, start + rows_per_block))
        d = d0[:, None] + 2 * j[None, :]  # (K, J)
        ok = d <= (ks + spare)[:, None]
        d = np.where(ok, d, d0[:, None])
        h = d // 2
        kk = ks[:, None, None]
        xx = grid[None, None, :]
        hh = h[:, :, None]
        valid = (xx <= hh) & (kk - xx <= hh) & (xx <= kk)
        xv = np.where(valid, xx, 0)
        yv = np.where(valid, kk - xx, 0)
        logp = (
            lf[hh]
            - lf[xv]
            - lf[hh - xv]
            + lf[hh]
            - lf[yv]
            - lf[hh - yv]
            - (lf[d] - lf[kk[:, :, 0]] - lf[d - kk[:, :, 0]])[:, :, None]
        )
        pmf = np.where(valid, np.exp(logp), 0.0)
        tail = 2.0 * np.cumsum(pmf, axis=2)
        if mid_p:
            tail -= pmf
        tail = np.where(ok[:, :, None], tail, 0.0)
        np.maximum(best, tail.max(axis=1), out=best)
    p = np.minimum(1.0, best[k_inv.reshape(k.shape), lo])
    return np.where((k == 0) | (2 * lo == k), 1.0, p)


def adjust_pvalues(p_values, correction: str = "holm") -> np.ndarray:
    """Multiplicity-adjusted p-values (Holm or Benjamini-Hochberg), vectorised.

    Parameters
    ----------
    p_values : array_like of float, shape (k,)
    correction : {"holm", "bh", "none"}

    Returns
    -------
    ndarray of float64, shape (k,)
        Equal to ``statsmodels.stats.multitest.multipletests(p, method="holm" | "fdr_bh")[1]``.

    Notes
    -----
    With ``p₍₁₎ <= ... <= p₍ₖ₎``: Holm ``p̃₍ⱼ₎ = max_{i<=j} min(1, (k - i + 1) p₍ᵢ₎)``
    (family-wise error); BH ``p̃₍ⱼ₎ = min_{i>=j} min(1, k p₍ᵢ₎ / i)`` (false discovery rate).

    References
    ----------
    Holm (1979), Scand J Stat 6:65. Benjamini & Hochberg (1995), JRSS B 57:289.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError("p_values: expected a 1-d array")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction: expected one of {CORRECTIONS}, got {correction!r}")
    k = p.shape[0]
    if correction == "none" or k == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    ps = p[order]
    i = np.arange(1, k + 1)
    if correction == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (k - i + 1) * ps))
    else:
        adj = np.minimum.accumulate(np.minimum(1.0, k * ps / i)[::-1])[::-1]
    out = np.empty(k)
    out[order] = adj
    return out


# ---------------------------------------------------------------------------------------------
# intervals
# ---------------------------------------------------------------------------------------------
def wilson(p, n_eff, z):
    """Vectorised Wilson bounds at effective size ``n_eff`` (``inf`` -> zero width)."""
    p = np.asarray(p, dtype=np.float64)
    n_eff = np.asarray(n_eff, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(np.isinf(n_eff), 0.0, 1.0 / n_eff)
        denom = 1.0 + z * z * inv
        center = (p + z * z * inv / 2.0) / denom
        half = z / denom * np.sqrt(np.maximum(p * (1.0 - p) * inv + z * z * inv * inv / 4.0, 0))
    return np.clip(center - half, 0.0, 1.0), np.clip(center + half, 0.0, 1.0)


def newcombe(n11, n10, n01, n00, n_eff_factor, z):
    """Newcombe (1998) method-10 score interval for a paired difference of proportions.

    ``n_eff_factor`` multiplies the sample size of the Wilson components (``1 / f`` with the
    finite-population correction ``f``; ``inf`` when the whole population was seen).
    """
    n11, n10, n01, n00 = (np.asarray(a, dtype=np.float64) for a in (n11, n10, n01, n00))
    nn = n11 + n10 + n01 + n00
    with np.errstate(divide="ignore", invalid="ignore"):
        p1 = (n11 + n10) / nn
        p2 = (n11 + n01) / nn
        l1, u1 = wilson(p1, nn * n_eff_factor, z)
        l2, u2 = wilson(p2, nn * n_eff_factor, z)
        cross = n11 * n00 - n10 * n01
        cross = np.where(cross > 0, np.maximum(cross - nn / 2.0, 0.0), cross)
        den = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
        phi = np.where(den > 0, cross / np.sqrt(np.where(den > 0, den, 1.0)), 0.0)
        diff = p1 - p2
        d1, e1 = p1 - l1, u1 - p1
        d2, e2 = p2 - l2, u2 - p2
        lo = diff - np.sqrt(np.maximum(d1 * d1 - 2 * phi * d1 * e2 + e2 * e2, 0.0))
        hi = diff + np.sqrt(np.maximum(e1 * e1 - 2 * phi * e1 * d2 + d2 * d2, 0.0))
    return diff, np.clip(lo, -1.0, 1.0), np.clip(hi, -1.0, 1.0)


def weighted_pair_tests(y, weights, a, b, n_population: int, z: float):
    """Normal tests of full-benchmark differences of every pair from a weighted item subset.

    Parameters
    ----------
    y : ndarray of float64, shape (m, n)
        0/1 results of the ``m`` models on the ``n`` subset items.
    weights : array_like, shape (n,)
        The subset design's linear estimator coefficients (``Selection.weights``):
        non-negative, finite, with a positive sum; accuracies are ``Σ_i w_i y_i``.
    a, b : ndarray of int, shape (k,)
        The compared pairs (row ``a`` vs row ``b``), e.g. ``np.triu_indices(m, 1)``.
    n_population : int
        ``N``, the size of the full benchmark (``N >= n``).
    z : float
        Normal quantile of the two-sided intervals.

    Returns
    -------
    acc, acc_low, acc_high : ndarray, shape (m,)
        Weighted accuracies ``Σ_i w_i y_i`` and their Wilson bounds at Kish's effective size
        ``(Σ w)² / Σ w²`` divided by the finite-population factor ``f``.
    difference, ci_low, ci_high : ndarray, shape (k,)
        ``Δ = acc_a - acc_b`` (0 when within rounding of ``Σ w y``) and ``Δ ∓ z se``, clipped
        to [-1, 1].
    p_value, p_better : ndarray, shape (k,)
        Two-sided normal p-value of ``Δ / se`` (1 when ``Δ = 0``) and ``Φ(Δ / se)`` (1, 0 or ½
        when ``se = 0``).

    Notes
    -----
    Horvitz-Thompson-style weighted difference with a linearised variance and the
    finite-population correction ``f = (N - n) / (N - 1)``: with ``d = y_a - y_b`` and
    ``d̄ = Δ / Σ w``, ``se² = f · n / (n - 1) · Σ w² (d - d̄)²``; every ``Σ w² (·)`` term comes
    from matrix products, never a loop over pairs. Approximate (normal).

    Raises
    ------
    ValueError
        If ``weights`` is not ``n`` finite non-negative values with a positive sum.
    """
    n = y.shape[1]
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights: expected {n} finite non-negative weights, positive sum")
    f = (n_population - n) / (n_population - 1) if n_population > 1 else 0.0
    acc = y @ w
    n_kish = w.sum() ** 2 / np.sum(w * w)
    lo_acc, hi_acc = wilson(np.clip(acc, 0, 1), n_kish / f if f > 0 else np.inf, z)
    diff = acc[a] - acc[b]
    diff = np.where(np.abs(diff) <= 1e-12 * w.sum(), 0.0, diff)  # rounding of Σ w y
    # Σ w² (d - d̄)² for every pair from products: d = y_a - y_b.
    wsum = w.sum()
    w2 = w * w
    yw2 = y * w2  # (m, n)
    sq = y @ w2  # Σ w² y_a² = Σ w² y_a (0/1)
    cross = yw2 @ y.T  # Σ w² y_a y_b
    dbar = diff / wsum
    s_dd = sq[a] + sq[b] - 2 * cross[a, b]  # Σ w² d²
    s_d = (y @ w2)[a] - (y @ w2)[b]  # Σ w² d
    ss = s_dd - 2 * dbar * s_d + dbar**2 * np.sum(w2)
    se = np.sqrt(np.maximum(f * ss * (n / (n - 1) if n > 1 else 0.0), 0.0))
    ci_lo = np.clip(diff - z * se, -1, 1)
    ci_hi = np.clip(diff + z * se, -1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        zz = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.sign(diff) * np.inf)
    p_value = np.where(diff == 0, 1.0, 2.0 * _st.norm.sf(np.abs(zz)))
    p_better = np.where(
        se > 0, _st.norm.cdf(zz), np.where(diff > 0, 1.0, np.where(diff < 0, 0.0, 0.5))
    )
    return acc, lo_acc, hi_acc, diff, ci_lo, ci_hi, p_value, p_better
