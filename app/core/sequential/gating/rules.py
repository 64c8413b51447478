"""A gate's decision rules: each benchmark's tests, its state, the gate's outcome and the
allocation of a round (statistics-next §8; the engine is :mod:`app.core.sequential.gating.gates`,
which re-exports every name here)."""

from __future__ import annotations

import numpy as np

from app.core.sequential.gating.one_sided import LOWER, UPPER, OneSidedState

RULES = ("no_regression", "no_regression_and_one_better")
BENCH_STATES = ("open", "noninferior", "regressed", "better", "on_margin")
OPEN, NONINFERIOR, REGRESSED, BETTER, ON_MARGIN = range(5)
OUTCOMES = ("open", "pass", "fail", "inconclusive")
#: how a round's quota is split: by progress alone, or by progress per unit of predicted cost
ALLOCATIONS = ("progress", "cost")
G_OPEN, G_PASS, G_FAIL, G_INCONCLUSIVE = range(4)
#: test columns of a benchmark's :class:`OneSidedState`
T_NONINFERIOR, T_REGRESSED, T_BETTER = 0, 1, 2


def _check_rule(rule: str) -> bool:
    if rule not in RULES:
        raise ValueError(f"rule: expected one of {RULES}, got {rule!r}")
    return rule == RULES[1]


def gate_tests(
    baseline_mean, margin, *, alpha: float, n_benchmarks: int, rule: str, superiority: float = 0.0
):
    """Targets, sides and levels of one benchmark's tests in a gate of ``K`` benchmarks.

    Parameters
    ----------
    baseline_mean : array_like, shape (S,)
        ``B_k`` per gate (or a scalar).
    margin : float
        ``delta_k`` in [0, 1).
    alpha : float
    n_benchmarks : int
        ``K``.
    rule : str
        One of :data:`RULES`.
    superiority : float
        Margin of the ``better`` test (``A > B + superiority``).

    Returns
    -------
    target : ndarray, shape (S, P)
    side : ndarray, shape (P,)
    alpha : ndarray, shape (P,)
        ``P = 2`` (non-inferior at ``alpha``, regressed at ``alpha / K``), 3 with the second rule
        (better at ``alpha / K``).
    """
    one_better = _check_rule(rule)
    if not (0.0 <= float(margin) < 1.0):
        raise ValueError("margin: must lie in [0, 1)")
    k = int(n_benchmarks)
    b = np.atleast_1d(np.asarray(baseline_mean, dtype=np.float64))
    m = np.clip(b - float(margin), 0.0, 1.0)
    cols = [m, m]
    sides = [LOWER, UPPER]
    alphas = [alpha, alpha / k]
    if one_better:
        cols.append(np.clip(b + float(superiority), 0.0, 1.0))
        sides.append(LOWER)
        alphas.append(alpha / k)
    return np.stack(cols, axis=1), np.asarray(sides, np.int8), np.asarray(alphas)


def benchmark_codes(state: OneSidedState) -> np.ndarray:
    """State of one benchmark in each gate (:data:`BENCH_STATES`), shape (S,).

    ``regressed`` when the upper test rejected first (or in the same draw); else ``better`` when
    the better test (if any) rejected; else ``noninferior``; ``on_margin`` when exhausted with
    neither decided; else ``open``.
    """
    hit = state.hit
    lo, up = hit[:, T_NONINFERIOR], hit[:, T_REGRESSED]
    regressed = (up > 0) & ((lo == 0) | (up <= lo))
    out = np.full(state.sessions, OPEN, dtype=np.int8)
    out[(lo > 0) & ~regressed] = NONINFERIOR
    if hit.shape[1] > T_BETTER:
        out[(hit[:, T_BETTER] > 0) & ~regressed] = BETTER
    out[regressed] = REGRESSED
    out[(out == OPEN) & (state.t >= state.n_items)] = ON_MARGIN
    return out


def needs_items(codes, exhausted, rule: str) -> np.ndarray:
    """Which benchmarks get items in the next round, shape (S, K).

    Open ones; with the second rule also non-inferior ones while no benchmark of the gate is
    better yet. Never an exhausted one, and nothing once the gate has an outcome.
    """
    one_better = _check_rule(rule)
    c = np.asarray(codes)
    ex = np.asarray(exhausted, dtype=bool)
    want = c == OPEN
    if one_better:
        none_better = ~(c == BETTER).any(axis=1, keepdims=True)
        want |= (c == NONINFERIOR) & none_better
    return want & ~ex


def gate_outcome(codes, exhausted, budget_left, rule: str) -> np.ndarray:
    """Outcome of each gate (:data:`OUTCOMES`), shape (S,).

    Parameters
    ----------
    codes : array_like, shape (S, K)
        :func:`benchmark_codes` of every benchmark.
    exhausted : array_like of bool, shape (S, K)
    budget_left : array_like, shape (S,)
        Items the gate may still serve.
    rule : str
    """
    one_better = _check_rule(rule)
    c = np.asarray(codes)
    fine = np.isin(c, (NONINFERIOR, BETTER)).all(axis=1)
    fail = ((c == REGRESSED) | (c == ON_MARGIN)).any(axis=1)
    if one_better:
        any_better = (c == BETTER).any(axis=1)
        passed = fine & any_better
        # every benchmark settled non-inferior and exhausted, none better: nothing left to learn
        fail |= fine & ~any_better & np.asarray(exhausted, bool).all(axis=1)
    else:
        passed = fine
    want = needs_items(c, exhausted, rule).any(axis=1)
    out = np.full(c.shape[0], G_OPEN, dtype=np.int8)
    out[~fail & ~passed & (np.asarray(budget_left) < 1)] = G_INCONCLUSIVE
    out[~fail & ~passed & ~want] = G_INCONCLUSIVE
    out[passed] = G_PASS
    out[fail] = G_FAIL
    return out


def progress(state: OneSidedState) -> np.ndarray:
    """How far each gate's benchmark is towards deciding, in [0, 1], shape (S,).

    The largest ``log K / log(1 / alpha)`` over its tests (0 when no capital was won).
    """
    frac = np.clip(state.log_capital / state.log_threshold, 0.0, 1.0)
    return frac.max(axis=1)


def allocation_weights(prog, allocation: str = "progress", costs=None) -> np.ndarray:
    """Shares of a round's quota, shape (S, K).

    Parameters
    ----------
    prog : array_like, shape (S, K)
        :func:`progress` of every benchmark.
    allocation : str
        One of :data:`ALLOCATIONS`.
    costs : array_like, shape (K,), optional
        ``"cost"``: each benchmark's predicted mean cost per item (positive, finite).

    Returns
    -------
    ndarray
        ``1 + progress_k`` (``"progress"``), or ``(1 + progress_k) / c_k`` with ``c_k`` the costs
        over their mean (``"cost"``: progress per unit of predicted cost, so the benchmarks
        cheapest to move get the larger share).

    Notes
    -----
    ``c_k`` must be fixed before the gate starts (the stored models' medians, never the
    candidate's own measured costs): then the weights are a function of the past only and every
    benchmark's confidence sequence stays valid (statistics-next §8, "Allocation").

    The quota stays ``batch_size`` items per open benchmark: the weights only reorder which
    benchmark moves first. A PASS needs every benchmark decided, and the items each needs do not
    depend on the split, so it costs about the same; a FAIL stops the gate, so finding it on a
    cheap benchmark first saves what the dear ones would have spent (SYNTHETIC 1x / 3x / 10x
    suite, ``bench/bench_gate_cost_allocation.py``: 47 % less to a regression on the cheap one,
    4 % more when the dear one regressed, the same on passing suites).
    """
    w = 1.0 + np.asarray(prog, dtype=np.float64)
    if allocation not in ALLOCATIONS:
        raise ValueError(f"allocation: expected one of {ALLOCATIONS}, got {allocation!r}")
    if allocation == "progress":
        return w
    c = check_costs(costs, w.shape[1])
    return w / (c / c.mean())[None, :]


def check_costs(costs, n_benchmarks: int) -> np.ndarray:
    """The K predicted mean costs per item as a float array (ValueError naming ``costs``)."""
    if costs is None:
        raise ValueError("costs: allocation 'cost' needs each benchmark's predicted cost per item")
    c = np.asarray(costs, dtype=np.float64).reshape(-1)
    if c.size != int(n_benchmarks) or not (np.isfinite(c).all() and (c > 0).all()):
        raise ValueError(f"costs: expected {n_benchmarks} positive finite costs, got {c.tolist()}")
    return c


def allocate(
    weights, want, remaining, batch_size: int, budget_left, *, at_least_one: bool = False
) -> np.ndarray:
    """Items per benchmark in the next round, shape (S, K) of int64.

    Parameters
    ----------
    weights : array_like, shape (S, K)
        Positive shares (:func:`allocation_weights`).
    want : array_like of bool, shape (S, K)
        :func:`needs_items`.
    remaining : array_like of int, shape (S, K)
        Items not served yet per benchmark.
    batch_size : int
        Items per open benchmark per round.
    budget_left : array_like of int, shape (S,)
    at_least_one : bool
        Hand every wanted benchmark one item first whenever the quota covers them all, then
        split the rest (cost-aware weights can give an expensive benchmark a share below one).

    Returns
    -------
    ndarray
        The quota ``min(batch_size * open, budget_left)`` split by largest remainder in
        proportion to ``weights`` over the wanted benchmarks, at least one item each while the
        quota allows, at most what a benchmark has left.
    """
    want = np.asarray(want, dtype=bool)
    w = np.where(want, np.asarray(weights, dtype=np.float64), 0.0)
    n_open = want.sum(axis=1)
    quota = np.minimum(int(batch_size) * n_open, np.maximum(np.asarray(budget_left), 0))
    first = np.zeros(w.shape, dtype=np.int64)
    if at_least_one:
        first = (want & (quota >= n_open)[:, None]).astype(np.int64)
        quota = quota - first.sum(axis=1)
    tot = w.sum(axis=1, keepdims=True)
    share = np.divide(w * quota[:, None], tot, out=np.zeros_like(w), where=tot > 0)
    base = np.floor(share).astype(np.int64)
    short = quota - base.sum(axis=1)
    frac = np.where(want, share - base, -1.0)
    rank = np.argsort(np.argsort(-frac, axis=1, kind="stable"), axis=1, kind="stable")
    base += (rank < short[:, None]) & want
    return np.minimum(base + first, np.asarray(remaining, dtype=np.int64))
