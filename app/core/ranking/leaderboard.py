"""Leaderboards that say which differences are real: all pairwise tests, rank intervals, tiers.

For ``m`` models with 0/1 results on shared items, every one of the ``m (m - 1) / 2`` pairs is
compared from matrix products (``n11 = Y Yᵀ``; ``n10``, ``n01`` from row sums) in blocks of rows
(:mod:`app.core.ranking.pair_table`): memory ``O(m N)`` plus a bounded block, time ``O(m² N)``;
the rows keep per model only how many models are significantly better and worse, and any
pair's record is computed when asked for (``Leaderboard.table.pairs``). The p-values are corrected for multiplicity (Holm by
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
:func:`rank_intervals` and :func:`tiers`. The per-pair counts, tests and intervals live in
:mod:`app.core.ranking.pairwise` (its names listed above are re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, partial
from typing import Literal

import numpy as np
from scipy import special as _sc
from scipy import stats as _st

from app.core.ranking.pair_table import BlockedPairTable, DensePairTable, LeaderboardPairs
from app.core.ranking.pairwise import (
    CORRECTIONS,
    Correction,
    PairCounts,
    adjust_pvalues,
    as_binary,
    as_mask,
    finite_population_pvalues,
    mcnemar_pvalues,
    pairwise_counts,
    weighted_pair_tests,
    wilson,
)

__all__ = [
    "CORRECTIONS",
    "POPULATIONS",
    "Leaderboard",
    "LeaderboardPairs",
    "LeaderboardRows",
    "PairCounts",
    "adjust_pvalues",
    "assemble_board",
    "check_alpha",
    "finite_population_pvalues",
    "items_tests",
    "leaderboard",
    "leaderboard_for_selection",
    "mcnemar_pvalues",
    "pairwise_counts",
    "rank_intervals",
    "tiers",
]

POPULATIONS = ("items", "benchmark")
Population = Literal["items", "benchmark"]


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------
def _frozen(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


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
class Leaderboard:
    """A leaderboard with significance: rows, the pairwise table and the rules used.

    Attributes
    ----------
    rows : LeaderboardRows
    table : BlockedPairTable or DensePairTable
        The pairwise table: ``n_pairs``, ``n_significant`` and ``pairs(a, b)``, the records of
        any pairs ``a < b`` computed on demand (``pairs`` is every pair at once).
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
    table: BlockedPairTable | DensePairTable
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

    @cached_property
    def pairs(self) -> LeaderboardPairs:
        """Every pair ``a < b`` in ``np.triu_indices`` order (``O(m²)`` memory: for a large
        population ask ``table.pairs`` for the pairs you need)."""
        a, b = np.triu_indices(self.rows.model.shape[0], 1)
        return self.table.pairs(a, b).frozen()


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
def check_alpha(alpha: float) -> float:
    """``alpha`` as a float in (0, 1) (ValueError naming it otherwise)."""
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha}")
    return a


# ---------------------------------------------------------------------------------------------
# ranks and tiers
# ---------------------------------------------------------------------------------------------
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


def _tiers_by_row(order: np.ndarray, better_row) -> np.ndarray:
    """:func:`tiers` with the orderings given row by row: ``better_row(i)`` is ``better[i, :]``
    (one row per tier head, so the ``m x m`` matrix is never formed)."""
    tier = np.zeros(order.shape[0], dtype=np.int64)
    left = order.copy()
    t = 0
    while left.size:
        t += 1
        join = ~better_row(int(left[0]))[left]
        tier[left[join]] = t
        left = left[~join]
    return tier


def _items_p_better(n10, n01) -> np.ndarray:
    """P(Beta(1 + n10, 1 + n01) > 1/2) = P(Binomial(n10 + n01 + 1, 1/2) <= n10) for integer
    counts; the binomial form (bdtr) is ~4x cheaper than betaincc."""
    return _sc.bdtr(n10, n10 + n01 + 1, 0.5)


def items_tests(mid_p: bool):
    """``(p_of, p_better_of)`` of the ``"items"`` population: the exact McNemar p-value and
    ``P(Beta(1 + n10, 1 + n01) > ½)`` as functions of ``(n10, n01)`` (module-level functions and
    partials, so a table holding them pickles into an expensive-work child process)."""
    return partial(mcnemar_pvalues, mid_p=mid_p), _items_p_better


def _uniform_p_better(n10, n01, n: int, f: float) -> np.ndarray:
    """``Φ(d̄ / SE)`` of a uniform subset (the sign of ``d̄`` when ``SE = 0``)."""
    dbar = (n10 - n01) / n
    var_d = ((n10 + n01) - n * dbar**2) / (n - 1) if n > 1 else np.zeros_like(dbar)
    se = np.sqrt(np.maximum(f * var_d / n, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            se > 0,
            _st.norm.cdf(dbar / np.where(se > 0, se, 1.0)),
            np.where(dbar > 0, 1.0, np.where(dbar < 0, 0.0, 0.5)),
        )


def _weighted_table(c, weights, n_pop, alpha, correction, z):
    """Accuracies, their bounds and the dense pair table of a weighted design."""
    m = c.shape[0]
    a, b = np.triu_indices(m, 1)
    counts = pairwise_counts(c)
    acc, lo_acc, hi_acc, diff, ci_lo, ci_hi, p_value, p_better = weighted_pair_tests(
        c.astype(np.float64), weights, a, b, n_pop, z
    )
    p_adj = adjust_pvalues(p_value, correction)
    full = LeaderboardPairs(
        a=a.astype(np.int64),
        b=b.astype(np.int64),
        n10=counts.n10[a, b],
        n01=counts.n01[a, b],
        n_shared=counts.n_shared[a, b],
        difference=diff,
        ci_low=ci_lo,
        ci_high=ci_hi,
        p_value=p_value,
        p_adjusted=p_adj,
        p_better=np.asarray(p_better, dtype=np.float64),
        significant=p_adj <= alpha,
    ).frozen()
    return acc, lo_acc, hi_acc, DensePairTable(full, m, alpha, correction)


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
    :func:`app.core.estimation.stats.wilson_interval`); the difference's interval is Newcombe's with
    FPC-deflated Wilson components (an approximation; zero width at ``n = N``); the p-value is
    the exact conditional hypergeometric test of :func:`finite_population_pvalues`;
    ``p_better = Φ(d̄ / SE)``, ``SE² = f s_d² / n`` (as :func:`app.core.estimation.stats.compare_to_baseline`;
    the sign of ``d̄`` when ``SE = 0``).

    *Benchmark, weighted design* (``design="weighted"``): accuracy ``Σ w y`` with the
    Kish/FPC Wilson interval of :func:`app.core.scoring.score_models.weighted_estimate`; difference
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
    c = as_binary(correct)
    m, n = c.shape
    alpha = check_alpha(alpha)
    if correction not in CORRECTIONS:
        raise ValueError(f"correction: expected one of {CORRECTIONS}, got {correction!r}")
    if population not in POPULATIONS:
        raise ValueError(f"population: expected one of {POPULATIONS}, got {population!r}")
    mask = as_mask(coverage, c.shape)
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

    if mask is not None:
        n_own = mask.sum(axis=1).astype(np.int64)
        k_own = np.count_nonzero((c == 1) & mask, axis=1).astype(np.float64)
    else:
        n_own = np.full(m, n, dtype=np.int64)
        k_own = np.count_nonzero(c == 1, axis=1).astype(np.float64)

    if design == "weighted":
        acc, lo_acc, hi_acc, table = _weighted_table(c, weights, n_pop, alpha, correction, z)
    else:
        acc = k_own / n_own
        # module-level functions and partials, not closures: a board can be pickled (computed
        # in a child process of the API, app.services.limits.children)
        if population == "items":
            factor = 1.0
            lo_acc, hi_acc = wilson(acc, n_own, z)
            p_of, p_better_of = items_tests(mid_p)
        else:
            f = (n_pop - n) / (n_pop - 1) if n_pop > 1 else 0.0
            factor = 1.0 / f if f > 0 else np.inf
            lo_acc, hi_acc = wilson(acc, n * factor, z)
            p_of = partial(finite_population_pvalues, n=n, n_population=n_pop, mid_p=mid_p)
            p_better_of = partial(_uniform_p_better, n=n, f=f)

        table = BlockedPairTable(c, mask, p_of, p_better_of, factor, alpha, correction, z)

    return assemble_board(
        acc, lo_acc, hi_acc, n_own, table, masked=mask is not None, alpha=alpha,
        correction=correction, population=population, design=design, mid_p=mid_p, n_items=n,
        n_population=n_pop,
    )  # fmt: skip


def assemble_board(
    acc, lo_acc, hi_acc, n_own, table, *, masked, alpha, correction, population, design, mid_p,
    n_items, n_population,
) -> Leaderboard:  # fmt: skip
    """The rows (ranks, rank intervals, tiers) of a leaderboard from its accuracies, their
    intervals and its pair table (:func:`leaderboard`'s rules; shared with
    :func:`app.core.ranking.stored_counts.leaderboard_from_counts`)."""
    m = acc.shape[0]
    order = np.lexsort((np.arange(m), -acc))  # accuracy descending, then input position
    sorted_acc = acc[order]
    first = np.r_[True, sorted_acc[1:] != sorted_acc[:-1]]
    rank_sorted = np.maximum.accumulate(np.where(first, np.arange(1, m + 1), 0))
    rank = np.empty(m, dtype=np.int64)
    rank[order] = rank_sorted
    n_better_than, n_worse_than = table.order_counts()
    r_lo, r_hi = 1 + n_better_than, m - n_worse_than
    if masked:
        r_lo, r_hi = np.minimum(r_lo, rank), np.maximum(r_hi, rank)
    tier = _tiers_by_row(order, table.better_row)

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
    method = _describe(design, population, alpha, correction, mid_p, n_items, n_population)
    return Leaderboard(
        rows=rows, table=table, alpha=alpha, correction=correction, population=population,
        design=design, mid_p=bool(mid_p), n_items=n_items, n_population=n_population,
        n_tiers=int(tier.max()), unshared_pairs=table.unshared_pairs, method=method,
    )  # fmt: skip


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
