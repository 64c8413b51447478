"""Leaderboards that say which differences are real: all pairwise tests, rank intervals, tiers.

For ``m`` models with 0/1 results on shared items, every one of the ``m (m - 1) / 2`` pairs is
compared at once from matrix products (``n11 = Y Yᵀ``; ``n10``, ``n01`` from row sums), with
memory ``O(m² + m N)``, never ``O(m² N)``. The p-values are corrected for multiplicity (Holm by
default, or Benjamini-Hochberg), and the corrected tests give simultaneous rank intervals and
significance tiers.

Two readings of "which model is better" are supported (``population=``):

``"items"`` (default; the full-benchmark leaderboard)
    The benchmark's items are a sample from a larger population of items; the question is
    whether A beats B on that population. Exact McNemar test (two-sided binomial of ``n10`` in
    ``n10 + n01`` at ½, optionally mid-p), Newcombe's score interval for the paired difference,
    ``P(A > B) = P(Beta(1 + n10, 1 + n01) > ½)``, Wilson intervals for the accuracies.

``"benchmark"`` (micro-benchmark subsets)
    The ``n`` observed items are a subset of a fixed benchmark of ``N = n_population`` items and
    the question is the *full-benchmark* difference ``Δ = (D10 - D01) / N``. For a uniform
    random subset the test is an exact conditional hypergeometric test (see
    :func:`finite_population_pvalues`); for a weighted design a Horvitz-Thompson-style normal
    test. With ``n = N`` the difference is known exactly: its interval has zero width and the
    p-value is 0 (models differ) or 1 (they do not).

Entry points: :func:`leaderboard` (the engine), :func:`leaderboard_for_selection` (a subset
built by a selector), and the vectorised pieces :func:`pairwise_counts`,
:func:`mcnemar_pvalues`, :func:`finite_population_pvalues`, :func:`adjust_pvalues`,
:func:`rank_intervals` and :func:`tiers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as _st
from scipy.special import gammaln

__all__ = [
    "CORRECTIONS",
    "POPULATIONS",
    "Leaderboard",
    "LeaderboardPairs",
    "LeaderboardRows",
    "PairCounts",
    "adjust_pvalues",
    "finite_population_pvalues",
    "leaderboard",
    "leaderboard_for_selection",
    "mcnemar_pvalues",
    "pairwise_counts",
    "rank_intervals",
    "tiers",
]

CORRECTIONS = ("holm", "bh", "none")
POPULATIONS = ("items", "benchmark")
Correction = Literal["holm", "bh", "none"]
Population = Literal["items", "benchmark"]

_EXACT_F32 = 2**24  # integer sums below this are exact in float32 accumulation
_FP_CHUNK = 4_000_000  # elements per block of the finite-population p-value table


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------
def _frozen(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


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


@dataclass(frozen=True)
class LeaderboardRows:
    """One row per model, in leaderboard order (accuracy descending, then input index).

    Attributes
    ----------
    model : ndarray of int64, shape (m,)
        Row position of the model in the input matrix.
    accuracy, ci_low, ci_high : ndarray of float64, shape (m,)
        Accuracy estimate and its interval at level ``1 - alpha``.
    rank : ndarray of int64
        Point rank by accuracy, competition style: tied models share the best rank (1, 2, 2, 4).
    rank_low, rank_high : ndarray of int64
        Rank interval ``[1 + #significantly better, m - #significantly worse]`` (widened to
        contain ``rank`` only in the coverage-mask case, see :func:`leaderboard`).
    tier : ndarray of int64
        Significance tier, 1 = top.
    n_items : ndarray of int64
        Items the model was scored on.
    """

    model: np.ndarray
    accuracy: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    rank: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    tier: np.ndarray
    n_items: np.ndarray


@dataclass(frozen=True)
class LeaderboardPairs:
    """One row per unordered pair ``a < b`` (input row positions), in ``np.triu_indices`` order.

    Attributes
    ----------
    a, b : ndarray of int64, shape (k,)
    n10, n01, n_shared : ndarray of int64
        Items only ``a`` / only ``b`` got right, and items both have (on the subset in subset
        mode).
    difference, ci_low, ci_high : ndarray of float64
        Estimated accuracy difference ``a - b`` (on the shared items; of the full benchmark in
        ``"benchmark"`` mode) and its interval at level ``1 - alpha`` (unadjusted). NaN where
        the pair shares no items.
    p_value, p_adjusted : ndarray of float64
        Two-sided p-value of ``H0: no difference`` and its multiplicity-adjusted value.
    p_better : ndarray of float64
        Probability that ``a`` is better than ``b`` (see :func:`leaderboard`).
    significant : ndarray of bool
        ``p_adjusted <= alpha``.
    """

    a: np.ndarray
    b: np.ndarray
    n10: np.ndarray
    n01: np.ndarray
    n_shared: np.ndarray
    difference: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray
    p_adjusted: np.ndarray
    p_better: np.ndarray
    significant: np.ndarray


@dataclass(frozen=True)
class Leaderboard:
    """A leaderboard with significance: rows, the pairwise table and the rules used.

    Attributes
    ----------
    rows : LeaderboardRows
    pairs : LeaderboardPairs
    alpha : float
    correction : {"holm", "bh", "none"}
    population : {"items", "benchmark"}
    design : {"full", "uniform", "weighted"}
        ``"full"``: every item of the benchmark (or ``"items"`` mode); ``"uniform"``: a uniform
        random subset; ``"weighted"``: a weighted design (normal approximation).
    mid_p : bool
    n_items : int
        Items in the input matrix (columns).
    n_population : int or None
        Benchmark size ``N`` in ``"benchmark"`` mode.
    n_tiers : int
    unshared_pairs : ndarray of int64, shape (u, 2)
        Pairs (input row positions) with no item in common; their tests are ``p = 1``.
    method : str
        Plain-language statement of every rule used (tests, interval, correction, alpha, rank
        and tier rules), for display next to the table.
    """

    rows: LeaderboardRows
    pairs: LeaderboardPairs
    alpha: float
    correction: str
    population: str
    design: str
    mid_p: bool
    n_items: int
    n_population: int | None
    n_tiers: int
    unshared_pairs: np.ndarray
    method: str


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
def _as_binary(correct) -> np.ndarray:
    c = np.asarray(correct)
    if c.ndim != 2 or c.shape[0] < 2 or c.shape[1] < 1:
        raise ValueError("correct: expected a 2-d 0/1 array with at least 2 models and 1 item")
    if c.dtype != np.bool_ and not np.isin(c, (0, 1)).all():
        raise ValueError("correct: expected 0/1 correctness")
    return c


def _as_mask(coverage, shape) -> np.ndarray | None:
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


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha}")
    return a


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
    c = _as_binary(correct)
    m, n = c.shape
    mask = _as_mask(coverage, c.shape)
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
def _wilson(p, n_eff, z):
    """Vectorised Wilson bounds at effective size ``n_eff`` (``inf`` -> zero width)."""
    p = np.asarray(p, dtype=np.float64)
    n_eff = np.asarray(n_eff, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(np.isinf(n_eff), 0.0, 1.0 / n_eff)
        denom = 1.0 + z * z * inv
        center = (p + z * z * inv / 2.0) / denom
        half = z / denom * np.sqrt(np.maximum(p * (1.0 - p) * inv + z * z * inv * inv / 4.0, 0))
    return np.clip(center - half, 0.0, 1.0), np.clip(center + half, 0.0, 1.0)


def _newcombe(n11, n10, n01, n00, n_eff_factor, z):
    """Newcombe (1998) method-10 score interval for a paired difference of proportions.

    ``n_eff_factor`` multiplies the sample size of the Wilson components (``1 / f`` with the
    finite-population correction ``f``; ``inf`` when the whole population was seen).
    """
    n11, n10, n01, n00 = (np.asarray(a, dtype=np.float64) for a in (n11, n10, n01, n00))
    nn = n11 + n10 + n01 + n00
    with np.errstate(divide="ignore", invalid="ignore"):
        p1 = (n11 + n10) / nn
        p2 = (n11 + n01) / nn
        l1, u1 = _wilson(p1, nn * n_eff_factor, z)
        l2, u2 = _wilson(p2, nn * n_eff_factor, z)
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


# ---------------------------------------------------------------------------------------------
# ranks and tiers
# ---------------------------------------------------------------------------------------------
def _better_matrix(m: int, a, b, significant, difference) -> np.ndarray:
    """``B[i, j]`` = model ``i`` is significantly better than model ``j``."""
    better = np.zeros((m, m), dtype=bool)
    sig = np.asarray(significant, dtype=bool)
    dif = np.asarray(difference, dtype=np.float64)
    better[a[sig & (dif > 0)], b[sig & (dif > 0)]] = True
    better[b[sig & (dif < 0)], a[sig & (dif < 0)]] = True
    return better


def rank_intervals(better) -> tuple[np.ndarray, np.ndarray]:
    """Rank intervals from a matrix of significant pairwise orderings.

    Parameters
    ----------
    better : array_like of bool, shape (m, m)
        ``better[i, j]``: model ``i`` was declared significantly better than model ``j``.

    Returns
    -------
    rank_low, rank_high : ndarray of int64, shape (m,)
        ``rank_low[j] = 1 + #{i: better[i, j]}``, ``rank_high[j] = m - #{i: better[j, i]}``.

    Notes
    -----
    If every declared ordering is true, model ``j``'s true rank lies in its interval, for all
    ``j`` at once. So the intervals hold simultaneously with probability at least
    ``1 - P(any false or wrong-sign declaration)``, which a family-wise procedure (Holm) bounds
    by ``alpha`` — see :func:`leaderboard` for the directional caveat.
    """
    b = np.asarray(better, dtype=bool)
    m = b.shape[0]
    return 1 + b.sum(axis=0).astype(np.int64), m - b.sum(axis=1).astype(np.int64)


def tiers(order, better) -> np.ndarray:
    """Significance tiers.

    Parameters
    ----------
    order : array_like of int, shape (m,)
        Models from best to worst point estimate.
    better : array_like of bool, shape (m, m)
        ``better[i, j]``: model ``i`` is significantly better than model ``j``.

    Returns
    -------
    ndarray of int64, shape (m,)
        Tier of each model (by input position), 1 = top.

    Notes
    -----
    Tier 1 is the best model plus every model not significantly worse than it; the rule repeats
    on the models not yet assigned. The loop runs once per tier (vectorised within a tier).
    Tiers need not be monotone in accuracy: a lower-scoring model can join a tier that a
    higher-scoring one misses, when its paired comparison with the tier's head is noisier.
    """
    order = np.asarray(order, dtype=np.int64)
    b = np.asarray(better, dtype=bool)
    tier = np.zeros(b.shape[0], dtype=np.int64)
    left = order.copy()
    t = 0
    while left.size:
        t += 1
        top = left[0]
        join = ~b[top, left]
        tier[left[join]] = t
        left = left[~join]
    return tier


# ---------------------------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------------------------
def leaderboard(
    correct,
    *,
    coverage=None,
    population: Population = "items",
    n_population: int | None = None,
    weights=None,
    alpha: float = 0.05,
    correction: Correction = "holm",
    mid_p: bool = False,
) -> Leaderboard:
    """A leaderboard with pairwise tests, simultaneous rank intervals and significance tiers.

    Parameters
    ----------
    correct : array_like of {0, 1} or bool, shape (m, n)
        Models x items. In ``"benchmark"`` mode, the models' results on the subset's items.
    coverage : array_like of bool, shape (m, n), optional
        Which results exist (``"items"`` mode only). Each pair is compared on the items both
        models have; a model's accuracy uses all its own items. Pairs with no shared item get
        ``p = 1`` and NaN differences and are listed in ``unshared_pairs``; a model with no item
        at all is an error.
    population : {"items", "benchmark"}
        What the comparison generalises to (module docstring). ``"items"``: the items are a
        sample from an item population (McNemar). ``"benchmark"``: the items are (a subset of)
        a fixed benchmark of ``n_population`` items and the full-benchmark difference is tested.
    n_population : int, optional
        ``N`` in ``"benchmark"`` mode (default ``n``: the full benchmark, whose differences are
        then known exactly).
    weights : array_like, shape (n,), optional
        ``"benchmark"`` mode only: the subset design's linear estimator coefficients
        (``Selection.weights``). Omit for a uniform random subset (exact test).
    alpha : float
        Level of the tests, the intervals (``1 - alpha``) and the family (Holm) or FDR (BH).
    correction : {"holm", "bh", "none"}
    mid_p : bool
        Mid-p variants of the exact tests (uniform / items designs).

    Returns
    -------
    Leaderboard

    Notes
    -----
    *Items* (``design="full"``): accuracy ``k / n`` with the Wilson interval; pair difference
    ``(n10 - n01) / n_ab`` with Newcombe's (1998, method 10) score interval, which keeps close
    to nominal coverage at small counts where Wald undercovers; exact McNemar p-value
    (:func:`mcnemar_pvalues`); ``p_better = P(Beta(1 + n10, 1 + n01) > ½)`` (the Dirichlet(1,1,1,1)
    posterior probability that ``p10 > p01``).

    *Benchmark, uniform subset* (``design="uniform"``, or ``"full"`` at ``n = N``): accuracy
    Wilson with finite-population correction ``f = (N - n) / (N - 1)`` (``n_eff = n / f``, as
    :func:`app.core.stats.wilson_interval`); the difference's interval is Newcombe's with
    FPC-deflated Wilson components (an approximation; zero width at ``n = N``); the p-value is
    the exact conditional hypergeometric test of :func:`finite_population_pvalues`;
    ``p_better = Φ(d̄ / SE)``, ``SE² = f s_d² / n`` (as :func:`app.core.stats.compare_to_baseline`;
    the sign of ``d̄`` when ``SE = 0``).

    *Benchmark, weighted design* (``design="weighted"``): accuracy ``Σ w y`` with the
    Kish/FPC Wilson interval of :func:`app.core.scoring.weighted_estimate`; difference
    ``d̂ = Σ w d`` (so it equals the accuracy difference), ``SE² = f k/(k-1) Σ w² (d - d̄_w)²``
    with ``d̄_w = Σ w d / Σ w`` (a linearised with-replacement variance deflated by the FPC —
    approximate for clustered/stratified designs); Wald interval ``d̂ ± z SE`` and two-sided
    normal p-value ``2 Φ(-|d̂| / SE)``; ``p_better = Φ(d̂ / SE)``.

    *Multiplicity*: :func:`adjust_pvalues` over the ``m (m - 1) / 2`` pairs; a pair is
    significant when ``p_adjusted <= alpha``, in the direction of its difference.

    *Ranks*: point rank by accuracy descending, ties sharing the best rank; rank interval
    ``[1 + #significantly better, m - #significantly worse]`` (:func:`rank_intervals`). It always
    contains the point rank when all pairs use the same items (a significantly better model has
    a strictly higher accuracy); with a coverage mask, pair differences use shared items while
    accuracies use each model's own, so the interval is widened to contain the point rank.
    With Holm they are simultaneous: on the event that no true null is rejected and no
    rejection has the wrong sign, every declared ordering is true, hence every model's true
    rank is inside its interval at once; Holm bounds the probability of a false rejection by
    ``alpha``. That Holm's directional decisions also keep wrong-sign declarations within
    ``alpha`` is proven for independent test statistics (Shaffer 1980), not in general for the
    dependent pairwise tests here; the tests below check the family-wise rate under the
    complete null by simulation. With BH or "none" the intervals are not simultaneous.

    *Tiers*: sort by accuracy (ties by input position); tier 1 = the top model and every
    model not significantly worse than it; repeat on the rest (:func:`tiers`).

    References
    ----------
    McNemar (1947). Newcombe (1998), Stat Med 17:2635. Holm (1979). Benjamini & Hochberg (1995).
    Shaffer (1980), Ann Stat 8:1342 (directional errors). Al Mohamad, Goeman & van Zwet (2022),
    "Simultaneous confidence intervals for ranks", arXiv:2212.12612.
    """
    c = _as_binary(correct)
    m, n = c.shape
    alpha = _check_alpha(alpha)
    if correction not in CORRECTIONS:
        raise ValueError(f"correction: expected one of {CORRECTIONS}, got {correction!r}")
    if population not in POPULATIONS:
        raise ValueError(f"population: expected one of {POPULATIONS}, got {population!r}")
    mask = _as_mask(coverage, c.shape)
    z = float(_st.norm.ppf(1.0 - alpha / 2.0))
    if population == "items":
        if n_population is not None or weights is not None:
            raise ValueError("n_population: only used with population='benchmark'")
        design, n_pop = "full", None
    else:
        if mask is not None:
            raise ValueError("coverage: population='benchmark' needs complete results")
        n_pop = n if n_population is None else int(n_population)
        if n_pop < n:
            raise ValueError(f"n_population: {n_pop} is smaller than the {n} items given")
        if weights is not None:
            design = "weighted"
        else:
            design = "uniform" if n_pop > n else "full"

    counts = pairwise_counts(c, coverage=mask)
    a, b = np.triu_indices(m, 1)
    n11, n10, n01, n00 = (x[a, b] for x in (counts.n11, counts.n10, counts.n01, counts.n00))
    nab = counts.n_shared[a, b]

    yf = c.astype(np.float64)
    if mask is not None:
        yf = yf * mask
        n_own = mask.sum(axis=1).astype(np.int64)
    else:
        n_own = np.full(m, n, dtype=np.int64)

    if design == "weighted":
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"weights: expected {n} finite non-negative weights, positive sum")
        f = (n_pop - n) / (n_pop - 1) if n_pop > 1 else 0.0
        acc = yf @ w
        n_kish = w.sum() ** 2 / np.sum(w * w)
        lo_acc, hi_acc = _wilson(np.clip(acc, 0, 1), n_kish / f if f > 0 else np.inf, z)
        diff = acc[a] - acc[b]
        diff = np.where(np.abs(diff) <= 1e-12 * w.sum(), 0.0, diff)  # rounding of Σ w y
        # Σ w² (d - d̄)² for every pair from products: d = y_a - y_b.
        wsum = w.sum()
        w2 = w * w
        yw2 = yf * w2  # (m, n)
        sq = yf @ w2  # Σ w² y_a² = Σ w² y_a (0/1)
        cross = yw2 @ yf.T  # Σ w² y_a y_b
        dbar = diff / wsum
        s_dd = sq[a] + sq[b] - 2 * cross[a, b]  # Σ w² d²
        s_d = (yf @ w2)[a] - (yf @ w2)[b]  # Σ w² d
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
    else:
        k_own = yf.sum(axis=1)
        acc = k_own / n_own
        if population == "items":
            factor = 1.0
            lo_acc, hi_acc = _wilson(acc, n_own, z)
            p_value = mcnemar_pvalues(n10, n01, mid_p=mid_p)
            p_better = _st.beta.sf(0.5, 1.0 + n10, 1.0 + n01)
        else:
            f = (n_pop - n) / (n_pop - 1) if n_pop > 1 else 0.0
            factor = 1.0 / f if f > 0 else np.inf
            lo_acc, hi_acc = _wilson(acc, n * factor, z)
            p_value = finite_population_pvalues(n10, n01, n, n_pop, mid_p=mid_p)
            dbar = (n10 - n01) / n
            var_d = ((n10 + n01) - n * dbar**2) / (n - 1) if n > 1 else np.zeros_like(dbar)
            se = np.sqrt(np.maximum(f * var_d / n, 0.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                p_better = np.where(
                    se > 0,
                    _st.norm.cdf(dbar / np.where(se > 0, se, 1.0)),
                    np.where(dbar > 0, 1.0, np.where(dbar < 0, 0.0, 0.5)),
                )
        diff, ci_lo, ci_hi = _newcombe(n11, n10, n01, n00, factor, z)

    unshared = nab == 0
    if unshared.any():
        diff = np.where(unshared, np.nan, diff)
        ci_lo = np.where(unshared, np.nan, ci_lo)
        ci_hi = np.where(unshared, np.nan, ci_hi)
        p_value = np.where(unshared, 1.0, p_value)
        p_better = np.where(unshared, 0.5, p_better)
    p_adj = adjust_pvalues(p_value, correction)
    significant = p_adj <= alpha

    order = np.lexsort((np.arange(m), -acc))  # accuracy descending, then input position
    sorted_acc = acc[order]
    first = np.r_[True, sorted_acc[1:] != sorted_acc[:-1]]
    rank_sorted = np.maximum.accumulate(np.where(first, np.arange(1, m + 1), 0))
    rank = np.empty(m, dtype=np.int64)
    rank[order] = rank_sorted
    better = _better_matrix(m, a, b, significant, np.nan_to_num(diff))
    r_lo, r_hi = rank_intervals(better)
    if mask is not None:
        r_lo, r_hi = np.minimum(r_lo, rank), np.maximum(r_hi, rank)
    tier = tiers(order, better)

    rows = LeaderboardRows(
        model=_frozen(order),
        accuracy=_frozen(acc[order]),
        ci_low=_frozen(lo_acc[order]),
        ci_high=_frozen(hi_acc[order]),
        rank=_frozen(rank[order]),
        rank_low=_frozen(r_lo[order]),
        rank_high=_frozen(r_hi[order]),
        tier=_frozen(tier[order]),
        n_items=_frozen(n_own[order]),
    )
    pairs = LeaderboardPairs(
        a=_frozen(a.astype(np.int64)),
        b=_frozen(b.astype(np.int64)),
        n10=_frozen(n10),
        n01=_frozen(n01),
        n_shared=_frozen(nab),
        difference=_frozen(diff),
        ci_low=_frozen(ci_lo),
        ci_high=_frozen(ci_hi),
        p_value=_frozen(p_value),
        p_adjusted=_frozen(p_adj),
        p_better=_frozen(np.asarray(p_better, dtype=np.float64)),
        significant=_frozen(significant),
    )
    n_tiers = int(tier.max())
    return Leaderboard(
        rows=rows,
        pairs=pairs,
        alpha=alpha,
        correction=correction,
        population=population,
        design=design,
        mid_p=bool(mid_p),
        n_items=n,
        n_population=n_pop,
        n_tiers=n_tiers,
        unshared_pairs=_frozen(np.column_stack([a[unshared], b[unshared]]).astype(np.int64)),
        method=_describe(design, population, alpha, correction, mid_p, n, n_pop),
    )


def leaderboard_for_selection(
    correct_subset,
    selection,
    n_population: int | None = None,
    *,
    alpha: float = 0.05,
    correction: Correction = "holm",
    mid_p: bool = False,
) -> Leaderboard:
    """Leaderboard of the full-benchmark differences from a subset built by a selector.

    Parameters
    ----------
    correct_subset : array_like of {0, 1}, shape (m, selection.size)
        The models' results on ``selection.indices``, in that order.
    selection : app.core.results.Selection
        A ``"random"`` selection is treated as a uniform random subset (exact test); any other
        method as a weighted design with ``selection.weights`` (normal approximation).
    n_population : int, optional
        Size ``N`` of the pool the subset was drawn from; default ``selection.n_candidates``
        (the benchmark unless the selector was given a candidate pool, in which case the
        inference is about that pool).
    alpha, correction, mid_p
        As :func:`leaderboard`.

    Returns
    -------
    Leaderboard
        ``population="benchmark"``.
    """
    if n_population is None:
        n_population = int(selection.n_candidates)
    weights = None if selection.method == "random" else np.asarray(selection.weights)
    return leaderboard(
        correct_subset,
        population="benchmark",
        n_population=n_population,
        weights=weights,
        alpha=alpha,
        correction=correction,
        mid_p=mid_p,
    )


def _describe(design, population, alpha, correction, mid_p, n, n_pop) -> str:
    corr = {
        "holm": "Holm (family-wise error rate)",
        "bh": "Benjamini-Hochberg (false discovery rate)",
        "none": "no multiplicity correction",
    }[correction]
    mp = " (mid-p)" if mid_p else ""
    if population == "items":
        test = (
            f"exact two-sided McNemar test{mp} on the items both models have; the {n} items are "
            "treated as a sample from a population of items; difference interval: Newcombe "
            "score (method 10); accuracy interval: Wilson; P(better) = P(Beta(1+n10, 1+n01) > 1/2)"
        )
    elif design == "weighted":
        test = (
            f"normal test of the full-benchmark difference (N = {n_pop}) from a weighted "
            f"subset of {n} items (Horvitz-Thompson-style weighted difference, linearised "
            "variance with finite-population correction; approximate); accuracy interval: "
            "Wilson at Kish's effective size with FPC"
        )
    elif design == "uniform":
        test = (
            f"exact conditional hypergeometric test{mp} of the full-benchmark difference "
            f"(N = {n_pop}) from a uniform random subset of {n} items (supremum over the unknown "
            "number of discordant items); difference interval: Newcombe with FPC-deflated Wilson "
            "components (approximate); accuracy interval: Wilson with FPC"
        )
    else:
        test = (
            f"all {n} benchmark items seen: full-benchmark differences are known exactly "
            "(p = 0 if two models differ, 1 if not; zero-width intervals)"
        )
    simult = (
        "simultaneous (family-wise)"
        if correction == "holm"
        else "not simultaneous (no family-wise control)"
    )
    return (
        f"Pairs: {test}. Multiplicity: {corr}, alpha = {alpha:g}; a pair is significant when its "
        f"adjusted p-value <= {alpha:g}. Rank: by accuracy, ties share the best rank. Rank "
        f"interval: [1 + #significantly better, m - #significantly worse], {simult}. Tiers: sort "
        "by accuracy; a tier is the best unassigned model plus every unassigned model not "
        f"significantly worse than it. Intervals at {100 * (1 - alpha):g}%."
    )
