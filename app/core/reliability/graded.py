"""Verdicts, agreement curves and plans of random subsets for scores in [0, 1] (statistics-next §9).

On 0/1 results P(a random ``n``-subset orders a pair like the benchmark) is hypergeometric
(:mod:`app.core.reliability.exact`); on graded scores it has no closed form, so it is estimated
by simulation: ``n_draws`` uniform random ``n``-subsets (one seeded generator, the same subsets for
every pair of a benchmark) and, per pair, the share whose subset difference has the sign of the
full-benchmark difference, with its binomial Monte Carlo error ``sqrt(p (1 - p) / R)``. The
agreement curve and MDAD follow :func:`app.core.reliability.exact.exact_agreement`'s rules (0.5-point
bins of the gap, pair-weighted isotonic fit, first bin reaching the threshold) with the simulated
probabilities in place of the exact ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.core.reliability.agreement import BINS_PER_UNIT
from app.core.reliability.mdad import DEFAULT_THRESHOLD, isotonic_increasing
from app.core.results import AgreementCurve, MDADResult, Verdict

__all__ = [
    "DEFAULT_DRAWS",
    "SIMULATION_SEED",
    "SimulatedOrder",
    "simulated_agreement",
    "simulated_order",
    "simulated_verdict",
    "subset_means",
]

DEFAULT_DRAWS = 4000  # Monte Carlo error of a probability at most 0.5 / sqrt(4000) = 0.008
SIMULATION_SEED = 35
_CHUNK = 2**24  # draws x items per working block


@dataclass(frozen=True)
class SimulatedOrder:
    """P(same order / tie / reversed) of a pair on random ``n``-subsets, by simulation."""

    p_same: float
    p_tie: float
    p_reversed: float
    mc_error: float
    n_draws: int
    seed: int


def _draws(n_items: int, n: int, n_draws: int, seed: int):
    """Index blocks of uniform random ``n``-subsets without replacement, ``(r, n)`` each."""
    rng = np.random.default_rng(seed)
    block = max(1, _CHUNK // max(n_items, 1))
    done = 0
    while done < n_draws:
        r = min(block, n_draws - done)
        yield np.argpartition(rng.random((r, n_items)), n - 1, axis=1)[:, :n]
        done += r


def subset_means(scores, n: int, *, n_draws: int, seed: int) -> np.ndarray:
    """Every model's mean on ``n_draws`` random ``n``-subsets: shape ``(n_draws, m)``."""
    s = np.asarray(scores, dtype=np.float64)
    n_items = s.shape[1]
    out = []
    for idx in _draws(n_items, n, n_draws, seed):
        member = np.zeros((idx.shape[0], n_items))
        np.put_along_axis(member, idx, 1.0, axis=1)
        out.append(member @ s.T / n)
    return np.concatenate(out)


def _orders(sub_diff: np.ndarray, full_diff: np.ndarray):
    lead = np.copysign(1.0, full_diff)  # equal accuracies: the first model leads (§4.1)
    tol = 1e-12
    same = ((sub_diff * lead) > tol).mean(axis=0)
    tie = (np.abs(sub_diff) <= tol).mean(axis=0)
    return same, tie


def simulated_order(
    a_scores, b_scores, n: int, *, n_draws: int = DEFAULT_DRAWS, seed: int = SIMULATION_SEED
) -> SimulatedOrder:
    """P(a uniform random ``n``-subset orders A and B like the full benchmark), simulated.

    Parameters
    ----------
    a_scores, b_scores : array_like, shape (N,)
        The two models' scores in [0, 1] on every item.
    n : int
    n_draws : int
    seed : int

    Returns
    -------
    SimulatedOrder
    """
    d = np.asarray(a_scores, dtype=np.float64) - np.asarray(b_scores, dtype=np.float64)
    big_n = d.shape[0]
    if not 1 <= n <= big_n:
        raise ValueError(f"n: expected 1 <= n <= {big_n}")
    sums = np.concatenate([d[idx].sum(axis=1) for idx in _draws(big_n, n, n_draws, seed)])
    same, tie = _orders(sums[:, None] / n, np.array([d.mean()]))
    p = float(same[0])
    return SimulatedOrder(
        p_same=p,
        p_tie=float(tie[0]),
        p_reversed=float(max(0.0, 1.0 - p - tie[0])),
        mc_error=float(np.sqrt(p * (1.0 - p) / n_draws)),
        n_draws=int(n_draws),
        seed=int(seed),
    )


def simulated_agreement(
    scores,
    n: int,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    n_draws: int = DEFAULT_DRAWS,
    seed: int = SIMULATION_SEED,
    bins_per_unit: int = BINS_PER_UNIT,
) -> MDADResult:
    """Agreement curve and MDAD of random ``n``-subsets over all model pairs, by simulation.

    Parameters
    ----------
    scores : array_like, shape (m, N)
        Every model's scores in [0, 1] on the whole benchmark.
    n, threshold, n_draws, seed, bins_per_unit
        As :func:`app.core.reliability.exact.exact_agreement`; the draws are shared by all pairs.

    Returns
    -------
    MDADResult
        ``mode="simulated"``, ``n_runs = n_draws``, ``seed`` the generator's seed.
    """
    s = np.asarray(scores, dtype=np.float64)
    m = s.shape[0]
    if m < 2:
        raise ValueError("scores: expected at least two models")
    full = s.mean(axis=1)
    i, j = np.triu_indices(m, 1)
    means = subset_means(s, n, n_draws=n_draws, seed=seed)  # (R, m)
    gap = full[i] - full[j]
    same = np.empty(i.shape[0])
    tie = np.empty(i.shape[0])
    step = max(1, _CHUNK // (8 * n_draws))
    for k in range(0, i.shape[0], step):  # pairs in blocks of a few MB
        sl = slice(k, k + step)
        same[sl], tie[sl] = _orders(means[:, i[sl]] - means[:, j[sl]], gap[sl])
    k_bin = np.floor(bins_per_unit * np.abs(gap) + 1e-9).astype(np.int64)
    n_pairs = np.bincount(k_bin).astype(np.float64)
    present = np.flatnonzero(n_pairs > 0)
    sums = np.bincount(k_bin, weights=same)[present]
    ties = np.bincount(k_bin, weights=tie)[present]
    pairs = n_pairs[present]
    fitted = isotonic_increasing(sums, pairs)
    gaps = present / bins_per_unit
    ok = np.flatnonzero(fitted >= threshold)
    mdad = float(gaps[ok[0]]) if ok.size else None
    curve = AgreementCurve(
        gaps=gaps,
        gap_upper=(present + 1) / bins_per_unit,
        n_pairs=pairs,
        p_same=sums / pairs,
        p_tie=ties / pairs,
        p_reversed=1.0 - sums / pairs - ties / pairs,
        fitted=fitted,
        method="random",
        n=int(n),
        split="full",
        kind="simulated",
        max_gap=float(np.abs(gap).max()),
    )
    return MDADResult(
        method="random",
        n=int(n),
        split="full",
        mode="simulated",
        mdad=mdad,
        ci_low=mdad,
        ci_high=mdad,
        threshold=float(threshold),
        reached=mdad is not None,
        max_gap=curve.max_gap,
        mean_agreement=float(same.mean()),
        n_runs=int(n_draws),
        n_pairs=int(i.shape[0]),
        seed=int(seed),
        curve=curve,
    )


def _grid(n_items: int) -> list[int]:
    return np.unique(np.geomspace(min(10, n_items), n_items, 10).round().astype(np.int64)).tolist()


def simulated_verdict(
    scores,
    a: int,
    b: int,
    n: int,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    n_draws: int = DEFAULT_DRAWS,
    seed: int = SIMULATION_SEED,
    mdad: float | None = None,
) -> tuple[Verdict, SimulatedOrder]:
    """:func:`app.core.reliability.planning.verdict` of a random ``n``-subset on graded scores.

    ``p_same`` is simulated (:func:`simulated_order`; ``ci_low/ci_high`` its ± 2 Monte Carlo
    errors); ``n_needed`` the first size of the geometric grid (10 .. N) whose simulated
    probability reaches ``threshold``, then every size between the grid point before it and it
    (``None`` when none does); ``mdad`` computed by :func:`simulated_agreement` unless given.
    Basis ``"simulated"``.
    """
    s = np.asarray(scores, dtype=np.float64)
    big_n = s.shape[1]
    if not 1 <= n <= big_n:
        raise ValueError(f"n: expected 1 <= n <= {big_n}")
    order = simulated_order(s[a], s[b], n, n_draws=n_draws, seed=seed)
    if mdad is None:
        mdad = simulated_agreement(s, n, threshold=threshold, n_draws=n_draws, seed=seed).mdad

    def reaches(size: int) -> bool:
        return simulated_order(s[a], s[b], size, n_draws=n_draws, seed=seed).p_same >= threshold

    grid = _grid(big_n)
    needed = None
    for g_i, size in enumerate(grid):  # at most ten sizes
        if reaches(size):
            low = grid[g_i - 1] + 1 if g_i > 0 else 1
            lo, hi = low, size
            while lo < hi:  # bisection between the grid points
                mid = (lo + hi) // 2
                if reaches(mid):
                    hi = mid
                else:
                    lo = mid + 1
            needed = int(hi)
            break
    err = 2.0 * order.mc_error
    verdict = Verdict(
        model_a=int(a),
        model_b=int(b),
        method="random",
        n=int(n),
        gap=float(s[a].mean() - s[b].mean()),
        p_same=order.p_same,
        p_tie=order.p_tie,
        p_reversed=order.p_reversed,
        ci_low=max(0.0, order.p_same - err),
        ci_high=min(1.0, order.p_same + err),
        mdad=mdad,
        threshold=float(threshold),
        distinguishable=bool(order.p_same >= threshold),
        n_needed=needed,
        basis="simulated",
    )
    return verdict, order
