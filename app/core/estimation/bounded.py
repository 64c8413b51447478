"""Statistics for scores in [0, 1] that are not 0/1 (statistics-next §9).

* :func:`betting_interval`: a finite-population (without-replacement) confidence interval for the
  mean of any [0, 1]-valued population from a uniform random sample, by betting
  (Waudby-Smith & Ramdas, JRSS-B 2024, §6 "sampling without replacement"): valid at every ``n``
  whatever the distribution of the scores (no normal approximation), the graded replacement of
  Clopper-Pearson / Jeffreys / the hypergeometric interval;
* :func:`sign_flip_test`: the exact paired sign-flip permutation test of a mean difference
  ``d_i in [-1, 1]`` (Good 2005), by exact enumeration (meet in the middle) up to
  ``max_exact`` non-zero differences, else Monte Carlo with a stored seed and its own error;
* :func:`pass_at_k`: Chen et al.'s (2021) unbiased pass@k from ``n >= k`` samples with ``c``
  correct, ``1 - C(n - c, k) / C(n, k)``.

Written here rather than taken from a library: ``scipy.stats.permutation_test`` enumerates
``2^n`` sign vectors explicitly (infeasible beyond ~20 items and a Python-level loop over
resamples in chunks) and the betting intervals of the ``confseq`` package are for one sample
with replacement, not a finite population; both are checked against brute force in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special as _sc

__all__ = [
    "BETTING_PERMUTATIONS",
    "BETTING_SEED",
    "SignFlipResult",
    "betting_interval",
    "is_binary",
    "pass_at_k",
    "sign_flip_test",
]

BETTING_PERMUTATIONS = 8  # orders the capital is averaged over (removes the dependence on order)
BETTING_SEED = 20240  # the fixed seed of those orders: the interval is a function of the data
BETTING_GRID = 801  # candidate means on [0, 1]; the interval is widened by one grid step
_CHUNK_CELLS = 2**22  # rows x grid x items per working block
_TRUNCATION = 0.5  # bets at most half the capital's distance to ruin


def is_binary(values) -> bool:
    """Every value is exactly 0 or 1 (the 0/1 methods apply)."""
    v = np.asarray(values)
    return bool(np.all((v == 0) | (v == 1)))


def betting_interval(
    values,
    n_population: int | None = None,
    *,
    confidence: float = 0.95,
    permutations: int = BETTING_PERMUTATIONS,
    seed: int = BETTING_SEED,
    grid: int = BETTING_GRID,
) -> tuple[np.ndarray, np.ndarray]:
    """Betting confidence interval for the population mean of [0, 1] scores, vectorised over rows.

    Parameters
    ----------
    values : array_like, shape (m, n) or (n,)
        Each row: a model's scores on a uniform random sample (without replacement) of ``n``
        items of a population of ``n_population`` items.
    n_population : int, optional
        ``N``; ``None`` is an infinite population (sampling with replacement).
    confidence : float
    permutations : int
        The capital at time ``n`` is averaged over this many random orders of the sample.
    seed : int
        Seed of those orders (the interval is deterministic given the data).
    grid : int
        Candidate means evaluated on ``[0, 1]``.

    Returns
    -------
    (lo, hi) : ndarray, shape (m,)

    Notes
    -----
    For a candidate mean ``μ`` the remaining population's mean before draw ``t`` is
    ``μ_t = (N μ - Σ_{i<t} x_i) / (N - t + 1)``; ``μ`` is impossible when ``μ_t`` leaves [0, 1].
    The hedged capital ``K(μ) = ½ Π (1 + λ⁺_t (x_t - μ_t)) + ½ Π (1 - λ⁻_t (x_t - μ_t))``,
    with predictable bets ``λ_t = sqrt(2 log(2 / alpha) / (n var_{t-1}))`` truncated to
    ``½ / μ_t`` (``½ / (1 - μ_t)`` for the short side), is a non-negative martingale with mean 1
    under the true ``μ`` for each order of the sample, so is its average over orders; Markov's
    inequality makes ``{μ : K(μ) < 1 / alpha}`` a ``1 - alpha`` interval (Waudby-Smith & Ramdas 2024,
    Thm 3 and §6). The union over grid cells is taken (endpoints moved out by one step).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] == 0 or not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 1:
        raise ValueError("values: expected rows of scores in [0, 1]")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: expected a level in (0, 1), got {confidence}")
    m, n = x.shape
    big_n = np.inf if n_population is None else float(n_population)
    if big_n < n:
        raise ValueError("n_population: smaller than the sample")
    alpha = 1.0 - confidence
    rng = np.random.default_rng(seed)
    orders = np.argsort(rng.random((permutations, n)), axis=1)
    rows = max(1, _CHUNK_CELLS // (grid * n))
    parts = [_betting_rows(x[r : r + rows], big_n, alpha, orders, grid) for r in range(0, m, rows)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _kept(x: np.ndarray, big_n: float, alpha: float, orders: np.ndarray, mus: np.ndarray):
    """Which candidate means ``mus`` (shape (m, G), one grid per row) the capital keeps."""
    m, n = x.shape
    permutations = orders.shape[0]
    grid = mus.shape[1]
    log_cap = np.full((m, permutations, grid), -np.inf)
    t = np.arange(1, n + 1, dtype=np.float64)
    for p in range(permutations):  # a handful of orders; each is vectorised over rows and grid
        xs = x[:, orders[p]]  # (m, n)
        before = np.cumsum(xs, axis=1) - xs  # Σ_{i<t} x_i
        mu_hat = (0.5 + before) / t  # predictable running mean
        sq = np.cumsum((xs - mu_hat) ** 2, axis=1)
        var_hat = (0.25 + np.concatenate([np.zeros((m, 1)), sq[:, :-1]], 1)) / t
        lam = np.sqrt(2.0 * np.log(2.0 / alpha) / (n * var_hat))  # (m, n)
        if np.isinf(big_n):
            mu_t = np.broadcast_to(mus[:, :, None], (m, grid, n))
        else:
            mu_t = (big_n * mus[:, :, None] - before[:, None, :]) / (big_n - t + 1.0)
        possible = np.all((mu_t >= -1e-12) & (mu_t <= 1 + 1e-12), axis=2)
        mu_c = np.clip(mu_t, 1e-12, 1 - 1e-12)
        dev = xs[:, None, :] - mu_c
        lam_up = np.minimum(lam[:, None, :], _TRUNCATION / mu_c)
        lam_dn = np.minimum(lam[:, None, :], _TRUNCATION / (1.0 - mu_c))
        up = np.log1p(lam_up * dev).sum(axis=2)
        dn = np.log1p(-lam_dn * dev).sum(axis=2)
        hedged = np.logaddexp(up, dn) + np.log(0.5)
        log_cap[:, p, :] = np.where(possible, hedged, np.inf)
    mean_cap = _sc.logsumexp(log_cap, axis=1) - np.log(permutations)  # (m, G)
    return mean_cap < np.log(1.0 / alpha)


def _hull(keep: np.ndarray, mus: np.ndarray, step, fallback: np.ndarray):
    """First and last kept candidate of each row, moved out by ``step`` (``fallback`` if none)."""
    g = keep.shape[1]
    any_kept = keep.any(axis=1)
    rows = np.arange(keep.shape[0])
    first = mus[rows, np.argmax(keep, axis=1)]
    last = mus[rows, g - 1 - np.argmax(keep[:, ::-1], axis=1)]
    lo = np.where(any_kept, np.maximum(0.0, first - step), fallback)
    hi = np.where(any_kept, np.minimum(1.0, last + step), fallback)
    return lo, hi


def _betting_rows(x: np.ndarray, big_n: float, alpha: float, orders: np.ndarray, grid: int):
    """Two passes: a coarse grid of ``grid // 8`` candidates on [0, 1], then ``grid // 4`` over
    the coarse hull widened by one coarse step (the kept set is an interval in practice; an
    island narrower than a coarse step beyond the hull would be missed)."""
    m = x.shape[0]
    mean = x.mean(axis=1)
    coarse = max(11, grid // 8)
    mus = np.broadcast_to(np.linspace(0.0, 1.0, coarse), (m, coarse))
    c_step = 1.0 / (coarse - 1)
    lo, hi = _hull(_kept(x, big_n, alpha, orders, mus), mus, c_step, mean)
    lo, hi = np.minimum(lo, mean), np.maximum(hi, mean)
    fine = max(11, grid // 4)
    mus = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, fine)[None, :]
    f_step = (hi - lo) / (fine - 1)
    lo, hi = _hull(_kept(x, big_n, alpha, orders, mus), mus, f_step, mean)
    return np.minimum(lo, mean), np.maximum(hi, mean)


@dataclass(frozen=True)
class SignFlipResult:
    """A paired sign-flip permutation test of ``H0: the differences are symmetric about 0``.

    Attributes
    ----------
    p_value : float
        Two-sided, statistic ``|Σ d_i|``.
    method : str
        ``"exact"`` (all ``2^z`` sign vectors of the ``z`` non-zero differences) or
        ``"monte_carlo"``.
    n_nonzero : int
    n_resamples : int or None
        Monte Carlo sign vectors drawn (``None`` when exact).
    seed : int or None
        The Monte Carlo seed.
    mc_error : float
        Standard error of the Monte Carlo p-value, ``sqrt(p (1 - p) / R)`` (0 when exact).
    """

    p_value: float
    method: str
    n_nonzero: int
    n_resamples: int | None
    seed: int | None
    mc_error: float


def _half_sums(d: np.ndarray) -> np.ndarray:
    h = d.shape[0]
    bits = (np.arange(2**h, dtype=np.int64)[:, None] >> np.arange(h)) & 1
    return (1.0 - 2.0 * bits) @ d


def sign_flip_test(
    differences,
    *,
    max_exact: int = 26,
    n_resamples: int = 20_000,
    seed: int = 0,
) -> SignFlipResult:
    """Paired sign-flip permutation test of a mean difference (exact or Monte Carlo).

    Parameters
    ----------
    differences : array_like, shape (n,)
        ``d_i = a_i - b_i`` in [-1, 1].
    max_exact : int
        Exact enumeration up to this many non-zero differences (``2^{z/2}`` sums per half:
        meet in the middle, so 26 costs two arrays of 8,192).
    n_resamples : int
        Monte Carlo sign vectors beyond that.
    seed : int

    Returns
    -------
    SignFlipResult

    Notes
    -----
    Exact: ``p = #{s ∈ {±1}^z : |Σ s_i d_i| >= |Σ d_i|} / 2^z`` (ties within a relative
    ``1e-9``), counted by splitting the differences in two halves and, for each sum of the first
    half, counting sums of the second with ``searchsorted``. Monte Carlo:
    ``p = (1 + #hits) / (1 + R)``, a valid p-value for any ``R`` (Phipson & Smyth 2010).
    """
    d = np.asarray(differences, dtype=np.float64).ravel()
    if not np.all(np.isfinite(d)) or np.any(np.abs(d) > 1 + 1e-12):
        raise ValueError("differences: expected values in [-1, 1]")
    d = d[d != 0]
    z = int(d.shape[0])
    obs = abs(float(d.sum()))
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if z == 0 or obs <= tol:
        exact = z <= max_exact
        return SignFlipResult(
            1.0, "exact" if exact else "monte_carlo", z, None if exact else 0, None, 0.0
        )
    if z <= max_exact:
        s1 = _half_sums(d[: z // 2])
        s2 = np.sort(_half_sums(d[z // 2 :]))
        upper = s2.shape[0] - np.searchsorted(s2, obs - tol - s1, side="left")
        lower = np.searchsorted(s2, -obs + tol - s1, side="right")
        p = float((upper + lower).sum()) / 2.0**z
        return SignFlipResult(min(1.0, p), "exact", z, None, None, 0.0)
    rng = np.random.default_rng(seed)
    hits = 0
    chunk = max(1, 2**22 // z)
    done = 0
    while done < n_resamples:  # chunks of sign vectors, a few MB each
        r = min(chunk, n_resamples - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(r, z))
        hits += int(np.count_nonzero(np.abs(signs @ d) >= obs - tol))
        done += r
    p = (1.0 + hits) / (1.0 + n_resamples)
    return SignFlipResult(
        p, "monte_carlo", z, int(n_resamples), int(seed), float(np.sqrt(p * (1 - p) / n_resamples))
    )


def pass_at_k(n, c, k: int) -> np.ndarray:
    """Unbiased pass@k of each item from ``n`` samples with ``c`` correct (Chen et al. 2021).

    Parameters
    ----------
    n, c : array_like of int
        Samples and correct samples per item (broadcast), ``0 <= c <= n``.
    k : int
        ``1 <= k <= min(n)``.

    Returns
    -------
    ndarray of float64
        ``1 - C(n - c, k) / C(n, k)`` (1 where ``n - c < k``), computed with log-gamma.
    """
    nn = np.asarray(n, dtype=np.float64)
    cc = np.asarray(c, dtype=np.float64)
    nn, cc = np.broadcast_arrays(nn, cc)
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k: expected a positive whole number, got {k!r}")
    if np.any(cc < 0) or np.any(cc > nn) or np.any(cc != np.round(cc)) or np.any(nn < k):
        raise ValueError(f"n, c: expected whole counts 0 <= c <= n with n >= k = {k}")
    fail = nn - cc
    with np.errstate(invalid="ignore"):
        log_ratio = (
            _sc.gammaln(fail + 1)
            - _sc.gammaln(np.maximum(fail - k, 0) + 1)
            - _sc.gammaln(nn + 1)
            + _sc.gammaln(nn - k + 1)
        )
    return np.where(fail < k, 1.0, 1.0 - np.exp(log_ratio))
