"""Confidence sequences for *generalized* accuracy: the mean over the population of items like these.

Two accuracies (statistics-next §10; NIST AI 800-3). *Benchmark accuracy* is the mean over the
benchmark's ``N`` items: a finite population, estimated by
:mod:`app.core.sequential.confidence_sequences` with the without-replacement centring
``mu_t(m) = (N m - S_{t-1}) / (N - t + 1)``, so the interval collapses to the exact value at
``t = N``. *Generalized accuracy* is the mean ``mu = E[x]`` over the population the items were
drawn from. If the ``N`` items are an i.i.d. sample of that population (the assumption McNemar's
test and every "the items are treated as a sample" statement make), a uniformly random serving
order of them is an i.i.d. sequence from it, and the with-replacement betting CS of
Waudby-Smith & Ramdas (2024) applies: centring at ``m`` itself, no finite-population correction,
no feasible-range intersection, never exact (at ``t = N`` it is as wide as ``N`` i.i.d. draws
allow).

Construction (aGRAPA, WSR 2024 §5.2), for each candidate ``m`` on a fine grid:

    K_t(m) = prod_{i<=t} (1 + lam_i(m) (X_i - m)),
    lam_t(m) = clip( D / (s2_{t-1} + D^2), -c / (1 - m), c / m ),   D = mu_hat_{t-1} - m,

with ``mu_hat_{t-1} = (1/2 + S_{t-1}) / t`` and ``s2_{t-1} = (1/4 + sum_{i<t} (X_i -
mu_hat_{i-1})^2) / t`` (the same statistics as the benchmark CS). ``K_t(mu)`` is a non-negative
martingale, so ``C_t = {m : max_{s<=t} K_s(m) < 1/alpha}`` holds at every ``t`` with probability
``>= 1 - alpha`` (Ville). The mean is not on any lattice, so the hull of the surviving grid points is
widened by one grid step on each side.

Paired differences: with a baseline whose results on the same items are known, the generalized
difference ``Delta = E[a - b]`` is estimated from ``x = (d + 1) / 2`` (``Delta = 2 m - 1``): the
baseline's own generalized accuracy is not known (its ``N`` results are a sample too), so the
one-sample shortcut of the benchmark CS (``B`` known exactly) does not apply here.

When the benchmark is itself a random part of a larger finite item set (the simulation of
``bench/bench_estimand.py``: 150 of GPQA's 448 items, the truth the 448-item mean), the served items
are a without-replacement sample of it and ``E[X_t | past]`` drifts *towards* the truth from the
opposite side of the past mean, which the aGRAPA bet (its sign follows ``mu_hat - m``) only loses
from; that case is measured, not assumed.

References
----------
Waudby-Smith, I. & Ramdas, A. (2024). Estimating means of bounded random variables by betting.
JRSS-B 86(1), 1-27.
"""

from __future__ import annotations

import numpy as np

from app.core.sequential.confidence_sequences import DEFAULT_ALPHA, DEFAULT_C, CSState

ESTIMANDS = ("benchmark", "generalized")
BENCHMARK, GENERALIZED = ESTIMANDS
#: Grid of candidate item-population means (step 1/2000: 0.1 points for a paired difference).
POPULATION_GRID = 2001

ESTIMAND_SENTENCES = {
    "benchmark": "benchmark accuracy: the mean over these {n} items (exact once all are seen)",
    "generalized": "generalized accuracy: the mean over items like these (the {n} items treated "
    "as a sample; never exact)",
}


def estimand_sentence(estimand: str, n_items: int) -> str:
    """One sentence naming which accuracy an interval is about (CLI, pages, API descriptions)."""
    check_estimand(estimand)
    return ESTIMAND_SENTENCES[estimand].format(n=int(n_items))


def check_estimand(estimand: str) -> str:
    if estimand not in ESTIMANDS:
        raise ValueError(f"estimand: expected one of {ESTIMANDS}, got {estimand!r}")
    return estimand


def _positive_int(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or int(v) < 1:
        raise ValueError(f"{name}: expected a positive integer")
    return int(v)


def _check_values(x, sessions: int) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64)
    v = (v[None, :] if sessions == 1 else v[:, None]) if v.ndim == 1 else v
    if v.ndim != 2 or v.shape[0] != sessions:
        raise ValueError(f"x: expected shape ({sessions}, k), got {np.shape(x)}")
    if not np.all(np.isfinite(v)) or v.min(initial=0.0) < 0.0 or v.max(initial=0.0) > 1.0:
        raise ValueError("x: values must be finite and in [0, 1]")
    return v


def population_cs_init(
    max_items: int,
    *,
    sessions: int = 1,
    alpha: float = DEFAULT_ALPHA,
    c: float = DEFAULT_C,
    grid_size: int = POPULATION_GRID,
) -> CSState:
    """Initial state of ``sessions`` confidence sequences for an item-population mean.

    Parameters
    ----------
    max_items : int
        Most items that will be fed (the benchmark's ``N``); it bounds the path only and plays
        no part in the centring.
    sessions : int
    alpha : float
        Miscoverage, in (0, 1).
    c : float
        Bet truncation, in (0, 1).
    grid_size : int
        Candidate means ``linspace(0, 1, grid_size)``.

    Returns
    -------
    CSState
        ``bet = "agrapa"``, ``exact_grid = False``; feed it with :func:`population_cs_update`
        and read it with :func:`population_cs_interval` (not the finite-population functions).
    """
    n = _positive_int(max_items, "max_items")
    s = _positive_int(sessions, "sessions")
    g = _positive_int(grid_size, "grid_size")
    if g < 3:
        raise ValueError("grid_size: at least 3")
    if not (0.0 < float(alpha) < 1.0):
        raise ValueError("alpha: must lie in (0, 1)")
    if not (0.0 < float(c) < 1.0):
        raise ValueError("c: must lie in (0, 1)")
    grid = np.linspace(0.0, 1.0, g)
    return CSState(
        n_items=n,
        alpha=float(alpha),
        bet="agrapa",
        c=float(c),
        exact_grid=False,
        grid=grid,
        t=np.zeros(s, dtype=np.int64),
        total=np.zeros(s),
        sq=np.zeros(s),
        log_capital=np.zeros((s, 1, g)),
        rejected=np.zeros((s, g), dtype=bool),
    )


def _population_step(state: CSState, x: np.ndarray, log_thr: float, bounds) -> None:
    """Advance every session by one value ``x`` (S,), in place (centring at ``m``)."""
    t_prev = state.t.astype(np.float64)
    m = state.grid[None, :]
    mu_hat = (0.5 + state.total) / (t_prev + 1.0)
    s2 = (0.25 + state.sq) / (t_prev + 1.0)
    up, lo = bounds
    d = mu_hat[:, None] - m
    lam = d / (s2[:, None] + d * d)
    np.clip(lam, -lo, up, out=lam)
    lam *= x[:, None] - m
    state.log_capital[:, 0, :] += np.log1p(lam, out=lam)
    state.rejected |= state.log_capital[:, 0, :] >= log_thr
    state.sq += (x - mu_hat) ** 2
    state.total += x
    state.t += 1


def _bounds(state: CSState) -> tuple[np.ndarray, np.ndarray]:
    """Bet bounds ``c / m`` and ``c / (1 - m)`` (constant in time: the centring does not move)."""
    g = state.grid
    return state.c / np.maximum(g, 1e-12), state.c / np.maximum(1.0 - g, 1e-12)


def population_cs_update(state: CSState, x, *, inplace: bool = False) -> CSState:
    """Feed one batch of values (S, k) in serving order (see :func:`population_cs_init`)."""
    v = _check_values(x, state.sessions)
    if np.any(state.t + v.shape[1] > state.n_items):
        raise ValueError(f"x: more values than the {state.n_items} items of the benchmark")
    out = state if inplace else state.copy()
    log_thr = float(np.log(1.0 / out.alpha))
    bounds = _bounds(out)
    for j in range(v.shape[1]):  # the capital is a product over items, in serving order
        _population_step(out, v[:, j], log_thr, bounds)
    return out


def population_cs_interval(state: CSState) -> tuple[np.ndarray, np.ndarray]:
    """Current interval for the item-population mean of every session.

    Returns
    -------
    lower, upper : ndarray, shape (S,)
        Hull of the grid candidates never rejected, widened by one grid step each side (the mean
        lies between grid points); ``[0, 1]`` before any value and if none survives.
    """
    g = state.grid
    ok = ~state.rejected
    any_ok = ok.any(axis=1)
    first = np.argmax(ok, axis=1)
    last = g.size - 1 - np.argmax(ok[:, ::-1], axis=1)
    lower = np.where(any_ok, g[np.maximum(first - 1, 0)], 0.0)
    upper = np.where(any_ok, g[np.minimum(last + 1, g.size - 1)], 1.0)
    return lower, upper


def population_confidence_sequence(
    x, *, alpha: float = DEFAULT_ALPHA, c: float = DEFAULT_C, grid_size: int = POPULATION_GRID
) -> tuple[np.ndarray, np.ndarray]:
    """Intervals for the item-population mean along whole paths.

    Parameters
    ----------
    x : array_like, shape (S, T) or (T,)
        Values in [0, 1] in serving order.
    alpha, c, grid_size
        As in :func:`population_cs_init`.

    Returns
    -------
    lower, upper : ndarray, shape (S, T)
        Column ``t - 1``: the interval after ``t`` values.
    """
    v = np.asarray(x, dtype=np.float64)
    v = v[None, :] if v.ndim == 1 else v
    if v.ndim != 2:
        raise ValueError("x: expected shape (S, T) or (T,)")
    state = population_cs_init(
        max(v.shape[1], 1), sessions=v.shape[0], alpha=alpha, c=c, grid_size=grid_size
    )
    v = _check_values(v, state.sessions)
    lower, upper = np.empty(v.shape), np.empty(v.shape)
    log_thr = float(np.log(1.0 / state.alpha))
    bounds = _bounds(state)
    for j in range(v.shape[1]):  # time steps, vectorised over sessions and grid
        _population_step(state, v[:, j], log_thr, bounds)
        lower[:, j], upper[:, j] = population_cs_interval(state)
    return lower, upper


__all__ = [
    "BENCHMARK",
    "ESTIMANDS",
    "ESTIMAND_SENTENCES",
    "GENERALIZED",
    "POPULATION_GRID",
    "check_estimand",
    "estimand_sentence",
    "population_confidence_sequence",
    "population_cs_init",
    "population_cs_interval",
    "population_cs_update",
]
