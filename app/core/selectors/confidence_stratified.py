"""Stratified random sampling on source-model confidence, Horvitz-Thompson estimate (paper §3.3)."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from app.core._validation import ResultsData
from app.core.selectors._sampling import draw_within_groups
from app.core.selectors.base import Chosen, Selector

N_STRATA = 10
KMEANS_SEED = 42
INCLUSIONS = ("paper", "exact")


class ConfidenceStratifiedSelector(Selector):
    """Stratified sampling with strata from 1-D k-means on mean source confidence.

    Parameters
    ----------
    inclusion : {"paper", "exact"}, default "paper"
        Which inclusion probabilities the Horvitz-Thompson weights use.
        ``"paper"``: §3.3 step 5 (``n_h / N_h``, and ``n / N`` for fill items from strata with
        ``n_h = 0``). ``"exact"``: the design's true first-order inclusion probabilities (see
        :func:`stratified_design`), which make the estimator unbiased whenever every candidate
        can be drawn.

    Notes
    -----
    Fit (once, on the source models): the proxy ``q_i`` is the mean source signal (confidence,
    or correctness as the recorded fallback) of each candidate item; strata are the clusters of
    ``sklearn.cluster.KMeans(n_clusters=10, random_state=42, n_init="auto")`` on ``{q_i}``. The
    k-means seed is fixed by the paper and does not depend on the selection seed. When the proxy
    takes fewer than 10 distinct values, ``n_clusters`` is the number of distinct values (each
    value its own stratum) instead of asking k-means for duplicate centres.

    Select: see :func:`stratified_design`. The result may hold more than ``n`` items (no
    trimming, as in the paper). Linear weights are the Horvitz-Thompson coefficients
    ``1 / (N pi_i)``; they do **not** sum to one in general.
    """

    name = "confidence_stratified"
    estimators = ("horvitz_thompson",)

    def __init__(self, *, inclusion: str = "paper") -> None:
        super().__init__(inclusion=inclusion)

    def _fit(self, data: ResultsData) -> None:
        if self.params["inclusion"] not in INCLUSIONS:
            raise ValueError(
                f"inclusion: expected one of {INCLUSIONS}, got {self.params['inclusion']!r}"
            )
        self.proxy_ = data.signal[:, data.candidates].mean(axis=0)
        self.strata_ = confidence_strata(self.proxy_)

    def _select(self, data: ResultsData, n: int, rng: np.random.Generator) -> Chosen:
        pos, pi = stratified_design(self.strata_, n, rng, exact=self.params["inclusion"] == "exact")
        n_pool = data.candidates.shape[0]
        return Chosen(
            indices=data.candidates[pos],
            weights=1.0 / (n_pool * pi),
            fitted={"inclusion_probability": pi},
        )


def confidence_strata(proxy: np.ndarray, n_strata: int = N_STRATA) -> np.ndarray:
    """Strata of a 1-D proxy by k-means (paper §3.3 step 2).

    Parameters
    ----------
    proxy : ndarray of float, shape (N,)
        Mean source confidence per candidate item.
    n_strata : int, default 10

    Returns
    -------
    ndarray of int64, shape (N,)
        Stratum label per item, renumbered ``0..H-1`` in increasing order of the stratum's mean
        proxy (a relabelling only; the partition is k-means').

    Notes
    -----
    ``KMeans(n_clusters=min(n_strata, #distinct values), random_state=42, n_init="auto")``.
    """
    proxy = np.asarray(proxy, dtype=np.float64)
    k = min(n_strata, np.unique(proxy).shape[0])
    if k <= 1:
        return np.zeros(proxy.shape[0], dtype=np.int64)
    labels = KMeans(n_clusters=k, random_state=KMEANS_SEED, n_init="auto").fit_predict(
        proxy[:, None]
    )
    _, labels = np.unique(labels, return_inverse=True)
    means = np.bincount(labels, weights=proxy) / np.bincount(labels)
    rank = np.empty_like(labels)
    rank[np.argsort(means, kind="stable")] = np.arange(means.shape[0])
    return rank[labels].astype(np.int64)


def stratum_allocation(sizes: np.ndarray, n: int) -> np.ndarray:
    """``n_h = min(round_half_even(n N_h / N), N_h)`` (paper §3.3 step 3).

    Parameters
    ----------
    sizes : ndarray of int, shape (H,)
        Stratum sizes ``N_h`` (all positive).
    n : int

    Returns
    -------
    ndarray of int64, shape (H,)
        May sum to more or less than ``n``.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    return np.minimum(np.round(n * sizes / sizes.sum()).astype(np.int64), sizes)


def stratified_design(
    strata: np.ndarray, n: int, rng: np.random.Generator, *, exact: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Draw one confidence-stratified sample and its inclusion probabilities (paper §3.3).

    Parameters
    ----------
    strata : ndarray of int, shape (N,)
        Stratum code ``0..H-1`` of each candidate (every code present).
    n : int
        Requested size, ``1 <= n <= N``.
    rng : numpy.random.Generator
    exact : bool, default False
        Return the design's exact inclusion probabilities instead of the paper's.

    Returns
    -------
    positions : ndarray of int64, shape (k,)
        Distinct positions into ``strata``: the stratified draw (ascending) followed by the
        fill items. ``k = max(n, sum n_h)``.
    pi : ndarray of float64, shape (k,)
        Inclusion probability of each selected position.

    Notes
    -----
    With ``n_h = min(round_half_even(n N_h / N), N_h)`` and ``m = sum_h n_h``:

    1. draw ``n_h`` items uniformly without replacement in every stratum;
    2. if ``m < n``, draw the ``s = n - m`` missing items uniformly without replacement from the
       ``N - m`` unselected candidates (``s <= N - m`` always, since ``n <= N``, so the paper's
       with-replacement branch cannot occur);
    3. paper: ``pi_i = n_h / N_h``; a fill item from a stratum with ``n_h = 0`` gets
       ``pi_i = n / N``.

    The paper's ``pi`` are the true inclusion probabilities only when ``m >= n`` (no fill). The
    exact ones are ``pi_i = n_h/N_h + (1 - n_h/N_h) s / (N - m)`` (``s = max(n - m, 0)``): the
    Horvitz-Thompson estimate ``(1/N) sum_{i in A} y_i / pi_i`` is then unbiased whenever every
    ``pi_i > 0``.
    """
    strata = np.asarray(strata, dtype=np.int64)
    n_pool = strata.shape[0]
    sizes = np.bincount(strata)
    n_h = stratum_allocation(sizes, n)
    frac = n_h / sizes
    pos = draw_within_groups(strata, n_h, rng)
    m = pos.shape[0]
    shortfall = n - m
    if shortfall > 0:
        unselected = np.ones(n_pool, dtype=bool)
        unselected[pos] = False
        fill = rng.choice(np.flatnonzero(unselected), size=shortfall, replace=False)
        pos = np.concatenate([pos, fill.astype(np.int64)])
    if exact:
        s = max(shortfall, 0)
        pi_h = frac + (1.0 - frac) * (s / (n_pool - m) if n_pool > m else 0.0)
        pi = pi_h[strata[pos]]
    else:
        pi = frac[strata[pos]]
        pi = np.where(pi > 0, pi, n / n_pool)
    return pos, pi
