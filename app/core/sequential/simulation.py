"""Offline replay of evaluation sessions (issue 12 simulator engine).

Replays sessions for model pairs drawn from a results matrix and measures, per policy, how often a
session decides, how often it decides wrongly (against the full benchmark's order) and how many
items it uses, next to the exact fixed random-subset size the same pair would need.

Design
------
* Pairs. A seeded held-out pool of ``round(holdout * n_models)`` models is drawn; pairs are drawn
  uniformly among its distinct unordered pairs (with replacement), each replayed ``orders`` times
  (independent random orders for ``random``; ``fluid`` is deterministic given the pair, so it is
  replayed once per pair). Session ``i`` evaluates model A against the stored baseline B.
* ``fluid`` needs an IRT fit that has not seen the pair: :func:`app.core.irt.fit.fit_irt` is run once per
  simulation on all models *outside* the pool (cheap: one fit instead of one per pair; pool models
  never enter the fit). With ``holdout = 0.25`` on GPQA that is 315 training models; the fit
  (D = 2 by default) takes about 0.1 s.
* ``random``: items in a uniformly random order (one permutation per session); after every item
  the confidence sequence of :mod:`app.core.sequential.confidence_sequences` is updated for ``x = (d + 1)/2``; the goal
  is checked after every batch of ``batch_size`` items. Vectorised over sessions (loop over items),
  with finished sessions dropped from the working arrays at batch ends.
* ``fluid``: :mod:`app.core.sequential.fluid`, batches of the most informative unused items, interval
  ``(A_hat - acc_B) -+ z SE`` (model-based), vectorised over sessions (loop over batches).
* Goals: ``decide`` (``better``/``worse``/``equivalent`` with ``margin``) or ``precision`` (half-width
  of the interval for ``Delta`` at most ``precision``); ``max_items`` caps every session.
* Wrong decision: ``better`` when the full-benchmark ``Delta <= 0``, ``worse`` when ``Delta >= 0`` (ties
  count as wrong), ``equivalent`` when ``|Delta| > margin``. Its share gets a Clopper-Pearson interval.
  ``missed`` counts sessions whose final interval excludes ``Delta`` (the coverage of the stopped
  interval; for the precision goal).
* Fixed size: the smallest ``n`` such that a uniform random ``n``-subset orders the pair as the full
  benchmark with probability ``>= 1 - alpha`` (exact hypergeometric, :func:`app.core.reliability.exact.order_probabilities`,
  the rule of :func:`app.core.reliability.exact.smallest_n`), vectorised over pairs; ``NaN`` for tied pairs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import beta as beta_dist

from app.core._validation import SeedLike, normalize_rng
from app.core.irt.fit import fit_irt
from app.core.reliability.exact import order_probabilities
from app.core.sequential.confidence_sequences import (
    BETTER,
    EQUIVALENT,
    UNDECIDED,
    WORSE,
    cs_init,
    cs_interval,
    cs_update,
    decide,
    difference_interval,
    precision_met,
)
from app.core.sequential.fluid import (
    ItemBank,
    fluid_estimate,
    fluid_init,
    fluid_next,
    fluid_update,
    normal_interval,
)

POLICIES = ("random", "fluid")
GOALS = ("decide", "precision")
GAP_EDGES = (0.0, 2.0, 5.0, 10.0, 15.0, np.inf)  # points
GAP_LABELS = ("<2", "2-5", "5-10", "10-15", ">=15")


@dataclass(frozen=True)
class BucketRow:
    """Items used by one policy in one gap bucket (points = 100 x |Delta|)."""

    bucket: str
    sessions: int
    decided: int
    wrong: int
    median_items: float
    p90_items: float
    mean_items: float
    median_fixed_n: float


@dataclass(frozen=True)
class PolicySummary:
    """Outcome of one policy over all simulated sessions.

    Attributes
    ----------
    policy : str
    sessions, decided, wrong, missed : int
    decided_share, wrong_share : float
    wrong_ci : tuple of float
        Clopper-Pearson ``1 - alpha`` interval of the wrong-decision share.
    buckets : tuple of BucketRow
    runtime_s : float
    pair : ndarray of int64, shape (n_sessions,)
        Index into :attr:`SimulationResult.pairs` of each session.
    items_used : ndarray of int64, shape (n_sessions,)
    decision : ndarray of int8, shape (n_sessions,)
        Codes of :data:`app.core.sequential.confidence_sequences.DECISIONS`.
    lower, upper : ndarray, shape (n_sessions,)
        Final interval for ``Delta``.
    """

    policy: str
    sessions: int
    decided: int
    decided_share: float
    wrong: int
    wrong_share: float
    wrong_ci: tuple[float, float]
    missed: int
    buckets: tuple[BucketRow, ...]
    runtime_s: float
    pair: np.ndarray
    items_used: np.ndarray
    decision: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


@dataclass(frozen=True)
class SimulationResult:
    """Simulation output: the pairs and one :class:`PolicySummary` per policy.

    Attributes
    ----------
    pairs : ndarray of int64, shape (P, 2)
        Row positions (model A, baseline B).
    delta : ndarray, shape (P,)
        Full-benchmark ``Delta = acc_A - acc_B``.
    fixed_n : ndarray, shape (P,)
        Exact fixed random-subset size (``NaN`` for ties).
    policies : dict
        ``policy -> PolicySummary``.
    params : dict
        The arguments (``seed`` resolved) and the IRT fit time ``irt_fit_s``.
    """

    pairs: np.ndarray
    delta: np.ndarray
    fixed_n: np.ndarray
    policies: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact binomial interval ``[B(alpha/2; k, n-k+1), B(1-alpha/2; k+1, n-k)]`` (0/1 at the ends)."""
    if n <= 0:
        return (0.0, 1.0)
    lo = 0.0 if k == 0 else float(beta_dist.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def fixed_subset_sizes(n10, n01, n_items: int, probability: float, *, n_grid: int = 48):
    """Exact fixed random-subset size per pair, vectorised (the rule of ``exact.smallest_n``).

    Parameters
    ----------
    n10, n01 : array_like of int, shape (P,)
        Discordant counts (A right only, B right only).
    n_items : int
    probability : float
        Target P(subset orders the pair as the full benchmark).
    n_grid : int
        Geometric search grid size.

    Returns
    -------
    ndarray, shape (P,)
        Smallest ``n`` after the last geometric grid point below the target with
        ``P(same order) >= probability``; ``NaN`` for ties.
    """
    n10 = np.asarray(n10, dtype=np.int64)
    n01 = np.asarray(n01, dtype=np.int64)
    hi, lo = np.maximum(n10, n01), np.minimum(n10, n01)
    out = np.full(hi.shape, np.nan)
    live = np.flatnonzero(hi != lo)
    if live.size == 0:
        return out
    grid = np.unique(np.geomspace(1, n_items, n_grid).round().astype(np.int64))
    p = order_probabilities(hi[live, None], lo[live, None], n_items, grid[None, :]).p_greater
    ok = p >= probability
    ok[:, -1] = True  # P_N = 1 exactly
    first = np.argmax(ok, axis=1)
    low = np.where(first == 0, 1, grid[np.maximum(first - 1, 0)] + 1)
    high = grid[first]
    counts = high - low + 1
    owner = np.repeat(np.arange(live.size), counts)
    cand = low[owner] + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    pc = order_probabilities(hi[live][owner], lo[live][owner], n_items, cand).p_greater
    good = (pc >= probability) | (cand == high[owner])
    # first good candidate per pair: candidates are grouped by owner in increasing n
    big = np.where(good, cand, np.iinfo(np.int64).max)
    best = np.full(live.size, np.iinfo(np.int64).max)
    np.minimum.at(best, owner, big)
    out[live] = best
    return out


def _check(correct, policies, goal, alpha, batch_size, margin, precision, holdout, orders):
    c = np.asarray(correct)
    if c.ndim != 2 or c.shape[0] < 4 or c.shape[1] < 2:
        raise ValueError("correct: expected a (models x items) matrix with >= 4 models")
    if not np.isin(c, (0, 1)).all():
        raise ValueError("correct: the simulator needs 0/1 correctness")
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        raise ValueError(f"policies: expected a subset of {POLICIES}, got {policies!r}")
    if goal not in GOALS:
        raise ValueError(f"goal: expected one of {GOALS}, got {goal!r}")
    if goal == "precision" and (precision is None or not precision > 0):
        raise ValueError("precision: a positive half-width is needed for goal 'precision'")
    if not (0 < alpha < 1):
        raise ValueError("alpha: must lie in (0, 1)")
    if int(batch_size) < 1:
        raise ValueError("batch_size: expected a positive integer")
    if margin is not None and not margin >= 0:
        raise ValueError("margin: must be non-negative")
    if not (0 < holdout < 1):
        raise ValueError("holdout: must lie in (0, 1)")
    if int(orders) < 1:
        raise ValueError("orders: expected a positive integer")
    return c.astype(np.float64)


def _finished(lo, hi, goal, margin, precision):
    if goal == "decide":
        return decide(lo, hi, margin=margin) != UNDECIDED
    return precision_met(lo, hi, precision)


def _run_batches(s, cap, batch_size, step, shrink, goal, margin, precision):
    """Run ``s`` sessions batch by batch until each stops or reaches ``cap`` items.

    ``step(active, t, k)`` feeds items ``t .. t+k-1`` of the running sessions ``active`` and
    returns their intervals ``(lo, hi)``; ``shrink(keep)`` drops the finished sessions' rows of
    the policy's state (its rows follow ``active``). Returns ``items_used, lower, upper``.
    """
    items = np.full(s, cap, dtype=np.int64)
    lower = np.full(s, -1.0)
    upper = np.full(s, 1.0)
    active = np.arange(s)  # sessions still running; state rows follow `active`
    t = 0
    while active.size and t < cap:  # loop over batches (vectorised over sessions)
        k = min(int(batch_size), cap - t)
        lo, hi = step(active, t, k)
        t += k
        done = _finished(lo, hi, goal, margin, precision) | (t >= cap)
        if done.any():
            idx = active[done]
            items[idx] = t
            lower[idx], upper[idx] = lo[done], hi[done]
            keep = ~done
            active = active[keep]
            shrink(keep)
    return items, lower, upper


def simulate_random(
    x,
    *,
    alpha: float,
    batch_size: int,
    goal: str = "decide",
    margin: float | None = None,
    precision: float | None = None,
    max_items: int | None = None,
    bet: str = "agrapa",
    c: float = 0.5,
    rng: SeedLike = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replay ``random`` sessions on paired values, vectorised over sessions.

    Parameters
    ----------
    x : array_like, shape (S, N)
        Paired values ``(d + 1)/2`` of each session's pair on all items (item order as stored).
    alpha, batch_size, goal, margin, precision, max_items, bet, c
        As in :func:`simulate_sessions`.
    rng : int, Generator or None
        Draws one uniformly random item order per session.

    Returns
    -------
    items_used : ndarray of int64, shape (S,)
    lower, upper : ndarray, shape (S,)
        Final interval for ``Delta``.
    """
    gen, _ = normalize_rng(rng)
    v = np.asarray(x, dtype=np.float64)
    s, n = v.shape
    cap = n if max_items is None else min(int(max_items), n)
    order = np.argsort(gen.random((s, n)), axis=1)
    xo = np.take_along_axis(v, order, axis=1)
    binary = bool(np.isin(v, (0.0, 0.5, 1.0)).all())
    state = cs_init(n, sessions=s, alpha=alpha, bet=bet, c=c, paired=True, binary=binary)

    def step(active, t, k):
        cs_update(state, xo[active, t : t + k], inplace=True)
        return difference_interval(*cs_interval(state))

    def shrink(keep):
        for name in ("t", "total", "sq", "log_capital", "rejected"):
            setattr(state, name, getattr(state, name)[keep])

    return _run_batches(s, cap, batch_size, step, shrink, goal, margin, precision)


def simulate_fluid(
    bank: ItemBank,
    y_model,
    acc_baseline,
    *,
    alpha: float,
    batch_size: int,
    goal: str = "decide",
    margin: float | None = None,
    precision: float | None = None,
    max_items: int | None = None,
    item_noise: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replay ``fluid`` sessions (model-based), vectorised over sessions.

    Parameters
    ----------
    bank : ItemBank
    y_model : array_like, shape (S, N)
        Each session's model results on all items.
    acc_baseline : array_like, shape (S,)
        Baseline full-benchmark accuracy.

    Returns
    -------
    items_used, lower, upper : as :func:`simulate_random` (interval for ``Delta``).
    """
    y = np.asarray(y_model, dtype=np.float64)
    base = np.asarray(acc_baseline, dtype=np.float64)
    s, n = y.shape
    cap = n if max_items is None else min(int(max_items), n)
    state = fluid_init(bank, sessions=s)

    def step(active, t, k):
        nxt = fluid_next(bank, state, k)
        vals = np.take_along_axis(y[active], nxt, axis=1)
        fluid_update(bank, state, nxt, vals, inplace=True)
        est, se = fluid_estimate(bank, state, item_noise=item_noise)
        return normal_interval(est - base[active], se, alpha)

    def shrink(keep):
        state.theta, state.cov = state.theta[keep], state.cov[keep]
        state.seen, state.y = state.seen[keep], state.y[keep]

    return _run_batches(s, cap, batch_size, step, shrink, goal, margin, precision)


def _summary(policy, pair, items, lo, hi, delta, fixed_n, goal, margin, precision, alpha, runtime):
    dl = delta[pair]
    dec = decide(lo, hi, margin=margin) if goal == "decide" else np.zeros(pair.size, np.int8)
    wrong = (
        ((dec == BETTER) & (dl <= 0))
        | ((dec == WORSE) & (dl >= 0))
        | ((dec == EQUIVALENT) & (np.abs(dl) > (margin or 0.0)))
    )
    tol = 1e-12
    missed = (dl < lo - tol) | (dl > hi + tol)
    if goal == "decide":
        finished = dec != UNDECIDED
    else:
        finished = precision_met(lo, hi, precision)
    pts = 100 * np.abs(dl)
    bucket = np.searchsorted(np.asarray(GAP_EDGES[1:-1]), pts + 1e-9, side="right")
    rows = []
    for b, label in enumerate(GAP_LABELS):  # five fixed buckets (a summary table, not data)
        m = bucket == b
        it = items[m]
        fx = fixed_n[pair[m]]
        fx = fx[np.isfinite(fx)]
        rows.append(
            BucketRow(
                bucket=label,
                sessions=int(m.sum()),
                decided=int(finished[m].sum()),
                wrong=int(wrong[m].sum()),
                median_items=float(np.median(it)) if it.size else float("nan"),
                p90_items=float(np.percentile(it, 90)) if it.size else float("nan"),
                mean_items=float(it.mean()) if it.size else float("nan"),
                median_fixed_n=float(np.median(fx)) if fx.size else float("nan"),
            )
        )
    n_s = int(pair.size)
    k = int(wrong.sum())
    return PolicySummary(
        policy=policy,
        sessions=n_s,
        decided=int(finished.sum()),
        decided_share=float(finished.mean()) if n_s else float("nan"),
        wrong=k,
        wrong_share=k / n_s if n_s else float("nan"),
        wrong_ci=clopper_pearson(k, n_s, alpha),
        missed=int(missed.sum()),
        buckets=tuple(rows),
        runtime_s=float(runtime),
        pair=pair,
        items_used=items,
        decision=dec,
        lower=lo,
        upper=hi,
    )


def simulate_sessions(
    correct,
    *,
    policies=POLICIES,
    pairs: int = 400,
    orders: int = 1,
    alpha: float = 0.05,
    batch_size: int = 10,
    goal: str = "decide",
    margin: float | None = None,
    precision: float | None = None,
    max_items: int | None = None,
    bet: str = "agrapa",
    c: float = 0.5,
    holdout: float = 0.25,
    irt_dims: int = 2,
    item_noise: bool = True,
    rng: SeedLike = 0,
) -> SimulationResult:
    """Replay evaluation sessions for random model pairs of a 0/1 results matrix.

    Parameters
    ----------
    correct : array_like of {0, 1}, shape (n_models, n_items)
    policies : sequence of {"random", "fluid"}
    pairs : int
        Model pairs drawn from the held-out pool (module docstring).
    orders : int
        Random orders per pair for ``random`` (sessions = ``pairs * orders``).
    alpha : float
        Error level of the intervals (and of the exact fixed size, ``P >= 1 - alpha``).
    batch_size : int
        Items per batch (the goal is checked after each batch).
    goal : {"decide", "precision"}
    margin : float, optional
        Equivalence margin for ``decide`` (difference units, e.g. 0.02).
    precision : float, optional
        Target half-width of the interval for ``Delta`` (goal ``precision``).
    max_items : int, optional
        Cap per session (default ``N``).
    bet, c
        Confidence-sequence bet (:mod:`app.core.sequential.confidence_sequences`).
    holdout : float
        Share of models in the pair pool (excluded from the IRT fit).
    irt_dims : int
        Latent dimension of the IRT fit for ``fluid``. Default 2: on GPQA (400 pairs, batch 10,
        seed 0) the fluid wrong-decision share was 22/400 with D = 1 (Fluid Benchmarking's 1-d
        2PL), 11/400 with D = 2 and 13/400 with D = 5 (one seed; measured, not a guarantee).
    item_noise : bool
        Include the unseen items' Bernoulli variance in ``fluid``'s SE (:mod:`app.core.sequential.fluid`).
    rng : int, Generator or None
        Seed of everything random (pool, pairs, orders, IRT initialisation).

    Returns
    -------
    SimulationResult
    """
    pol = tuple(policies)
    c01 = _check(correct, pol, goal, alpha, batch_size, margin, precision, holdout, orders)
    gen, seed = normalize_rng(rng)
    n_models, n_items = c01.shape
    n_pool = max(2, round(holdout * n_models))
    perm = gen.permutation(n_models)
    pool, train = np.sort(perm[:n_pool]), np.sort(perm[n_pool:])
    ia, ib = np.triu_indices(n_pool, 1)
    pick = gen.integers(0, ia.size, int(pairs))
    swap = gen.random(int(pairs)) < 0.5
    a = np.where(swap, pool[ib[pick]], pool[ia[pick]])
    b = np.where(swap, pool[ia[pick]], pool[ib[pick]])
    pair_rows = np.stack([a, b], axis=1)
    acc = c01.mean(axis=1)
    delta = acc[a] - acc[b]
    n10 = (c01[a] * (1 - c01[b])).sum(axis=1).astype(np.int64)
    n01 = ((1 - c01[a]) * c01[b]).sum(axis=1).astype(np.int64)
    fixed_n = fixed_subset_sizes(n10, n01, n_items, 1.0 - alpha)
    params = dict(
        policies=pol,
        pairs=int(pairs),
        orders=int(orders),
        alpha=float(alpha),
        batch_size=int(batch_size),
        goal=goal,
        margin=margin,
        precision=precision,
        max_items=max_items,
        bet=bet,
        c=float(c),
        holdout=float(holdout),
        irt_dims=int(irt_dims),
        item_noise=bool(item_noise),
        seed=seed,
        pool=pool,
    )
    out: dict[str, PolicySummary] = {}
    kw = dict(
        alpha=alpha,
        batch_size=int(batch_size),
        goal=goal,
        margin=margin,
        precision=precision,
        max_items=max_items,
    )
    for p in pol:  # at most two policies
        t0 = time.perf_counter()
        if p == "random":
            sess_pair = np.repeat(np.arange(int(pairs)), int(orders))
            x = (c01[a[sess_pair]] - c01[b[sess_pair]] + 1.0) / 2.0
            items, lo, hi = simulate_random(x, bet=bet, c=c, rng=gen, **kw)
        else:
            t_fit = time.perf_counter()
            irt = fit_irt(c01[train], dims=int(irt_dims), rng=gen)
            params["irt_fit_s"] = time.perf_counter() - t_fit
            bank = ItemBank.from_irt(irt)
            sess_pair = np.arange(int(pairs))
            items, lo, hi = simulate_fluid(bank, c01[a], acc[b], item_noise=item_noise, **kw)
        runtime = time.perf_counter() - t0
        out[p] = _summary(
            p, sess_pair, items, lo, hi, delta, fixed_n, goal, margin, precision, alpha, runtime
        )
    return SimulationResult(
        pairs=pair_rows, delta=delta, fixed_n=fixed_n, policies=out, params=params
    )


__all__ = [
    "GAP_LABELS",
    "POLICIES",
    "BucketRow",
    "PolicySummary",
    "SimulationResult",
    "clopper_pearson",
    "fixed_subset_sizes",
    "simulate_fluid",
    "simulate_random",
    "simulate_sessions",
]
