"""Error-controlled fixed designs: items an exact test needs on a random subset, at a given power.

The reference a sequential session is compared with: draw ``n`` of the ``N`` items uniformly
without replacement *once*, run an exact level-``alpha`` test, and choose ``n`` as the smallest
size at which the test rejects "no difference" with probability ``>= power`` for this pair. Both
tests are two-sided, equal-tailed (``alpha / 2`` per side), so a rejection in the wrong direction
has probability at most ``alpha / 2``; power is computed exactly under sampling without replacement
(hypergeometric), not by a normal approximation.

* :func:`binomial_test_sizes` — the baseline's full mean ``B`` is known: exact binomial test of
  ``H0: A = B`` from the new model's ``k`` successes in ``n`` items (level-``alpha`` under
  sampling without replacement too, since the hypergeometric null is more concentrated than the
  binomial). Power ``P(K <= k_lo) + P(K >= k_hi)``, ``K ~ Hypergeom(N, N A, n)``.
* :func:`mcnemar_test_sizes` — exact McNemar test on the pair's discordant items in the subset
  (binomial test of ``X10`` in ``X10 + X01`` trials at 1/2). With ``D = n10 + n01`` discordant items
  in the benchmark, ``X10 + X01 = j ~ Hypergeom(N, D, n)`` and ``X10 | j ~ Hypergeom(D, n10, j)``, so
  ``power(n) = sum_j P(j) R(j)`` with ``R(j)`` the rejection probability given ``j`` (independent of
  ``n``): one matrix-vector product per pair.

Sizes are ``NaN`` when no ``n <= N`` reaches the power (close or tied pairs). Cost: ``O(P N)`` for
the binomial test, ``O(P N D)`` for McNemar (chunked over pairs).

References
----------
McNemar, Q. (1947). Note on the sampling error of the difference between correlated proportions
or percentages. Psychometrika 12, 153-157.
Clopper, C. J. & Pearson, E. S. (1934). The use of confidence or fiducial limits illustrated in the
case of the binomial. Biometrika 26, 404-413.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln
from scipy.stats import binom, hypergeom


def _check(alpha: float, power: float) -> None:
    if not (0.0 < alpha < 1.0) or not (0.0 < power < 1.0):
        raise ValueError("alpha: alpha and power must lie in (0, 1)")


def _rejection_bounds(n, p0, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed exact binomial test: reject when ``k <= k_lo`` or ``k >= k_hi``.

    ``k_lo`` is the largest ``k`` with ``P(X <= k) <= alpha/2`` (``-1`` if none), ``k_hi`` the
    smallest with ``P(X >= k) <= alpha/2`` (``n + 1`` if none), ``X ~ Binomial(n, p0)``.
    """
    n = np.asarray(n, dtype=np.float64)
    p0 = np.asarray(p0, dtype=np.float64)
    half = alpha / 2.0
    lo = binom.ppf(half, n, p0)  # smallest k with cdf >= alpha/2
    lo = np.where(binom.cdf(lo, n, p0) <= half, lo, lo - 1.0)
    hi = binom.isf(half, n, p0)  # smallest k with sf(k) <= alpha/2 ...
    hi = hi + 1.0  # ... so P(X >= hi) = sf(hi - 1) <= alpha/2
    hi = np.where(binom.sf(hi - 2.0, n, p0) <= half, hi - 1.0, hi)  # guard one step down
    return lo, hi


def _first_reaching(power: np.ndarray, target: float) -> np.ndarray:
    """Smallest ``n`` (column index + 1) with ``power >= target`` per row; NaN if none."""
    ok = power >= target - 1e-12
    first = np.argmax(ok, axis=1).astype(np.float64) + 1.0
    return np.where(ok.any(axis=1), first, np.nan)


def binomial_test_sizes(
    successes, baseline_mean, n_items: int, *, alpha: float = 0.05, power: float = 0.8
) -> np.ndarray:
    """Fixed subset size of the exact one-sample binomial test against a known baseline mean.

    Parameters
    ----------
    successes : array_like of int, shape (P,)
        ``N A``: the new model's correct items on the whole benchmark.
    baseline_mean : array_like, shape (P,)
        ``B`` (the null mean of the test).
    n_items : int
        ``N``.
    alpha, power : float

    Returns
    -------
    ndarray, shape (P,)
        Smallest ``n`` with power ``>= power`` (NaN if none).
    """
    _check(alpha, power)
    k = np.asarray(successes, dtype=np.int64).reshape(-1, 1)
    p0 = np.clip(np.asarray(baseline_mean, dtype=np.float64).reshape(-1, 1), 0.0, 1.0)
    n = np.arange(1, int(n_items) + 1)[None, :]
    lo, hi = _rejection_bounds(n, p0, alpha)
    pw = hypergeom.cdf(lo, n_items, k, n) + hypergeom.sf(hi - 1.0, n_items, k, n)
    return _first_reaching(pw, power)


def _log_comb(n, k):
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def mcnemar_test_sizes(
    n10, n01, n_items: int, *, alpha: float = 0.05, power: float = 0.8, chunk: int = 64
) -> np.ndarray:
    """Fixed subset size of the exact (equal-tailed) McNemar test, per pair.

    Parameters
    ----------
    n10, n01 : array_like of int, shape (P,)
        Discordant counts on the whole benchmark (A right only, B right only).
    n_items : int
        ``N``.
    alpha, power : float
    chunk : int
        Pairs per vectorised block (memory ``chunk * N * (D_max + 1)`` floats).

    Returns
    -------
    ndarray, shape (P,)
        Smallest ``n`` with power ``>= power`` (NaN if none, e.g. ``n10 == n01``).
    """
    _check(alpha, power)
    a = np.asarray(n10, dtype=np.int64).reshape(-1)
    b = np.asarray(n01, dtype=np.int64).reshape(-1)
    big_n = int(n_items)
    out = np.full(a.size, np.nan)
    n = np.arange(1, big_n + 1, dtype=np.float64)
    for s in range(0, a.size, chunk):  # blocks of pairs bound the memory
        aa, bb = a[s : s + chunk], b[s : s + chunk]
        d = aa + bb
        j = np.arange(int(d.max()) + 1, dtype=np.float64)[None, :]  # discordant items drawn
        lo, hi = _rejection_bounds(j, 0.5, alpha)
        # R(j) = P(X10 <= lo | j) + P(X10 >= hi | j), X10 | j ~ Hypergeom(D, n10, j)
        valid = j <= d[:, None]
        jj = np.where(valid, j, 0.0)
        rej = hypergeom.cdf(lo, d[:, None], aa[:, None], jj) + hypergeom.sf(
            hi - 1.0, d[:, None], aa[:, None], jj
        )
        rej = np.where(valid, np.nan_to_num(rej), 0.0)
        # P(j | n) = C(D, j) C(N - D, n - j) / C(N, n), shape (pairs, n, j)
        dd = d[:, None, None].astype(np.float64)
        nn = n[None, :, None]
        jv = j[:, None, :]
        ok = (jv <= dd) & (jv <= nn) & (nn - jv <= big_n - dd)
        logp = (
            _log_comb(dd, np.where(ok, jv, 0.0))
            + _log_comb(big_n - dd, np.where(ok, nn - jv, 0.0))
            - _log_comb(float(big_n), nn)
        )
        pj = np.where(ok, np.exp(logp), 0.0)
        pw = np.einsum("pnj,pj->pn", pj, rej)
        out[s : s + chunk] = _first_reaching(pw, power)
    return out


__all__ = ["binomial_test_sizes", "mcnemar_test_sizes"]
