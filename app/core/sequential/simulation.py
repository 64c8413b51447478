"""Offline replay of evaluation sessions: every policy on real or synthetic pairs.

Replays sessions for model pairs drawn from a results matrix and measures, per policy, how often a
session decides, how often it decides wrongly (against the full benchmark's order), how often its
interval ever excluded the truth, and how many items it uses, next to the exact fixed random-subset
size the same pair would need.

Design
------
* Pairs. A seeded held-out pool of ``round(holdout * n_models)`` models is drawn; pairs are drawn
  among its distinct unordered pairs (with replacement): uniformly, or (``stratify=True``) in equal
  numbers from each gap bucket that has pool pairs. Each pair is replayed ``orders`` times
  (independent draws). Session ``i`` evaluates model A against the stored baseline B, whose full
  mean ``B`` is known.
* The IRT policies need a fit that has not seen the pair: :func:`app.core.irt.fit.fit_irt` is run
  once per simulation on all models *outside* the pool (pool models never enter the fit).
* Every policy (:mod:`app.core.sequential.policies`) decides with the §7 confidence sequence for
  ``A`` (:mod:`app.core.sequential.active`); the interval for ``Delta`` is that CS minus ``B``.
  Vectorised over sessions (loop over batches, and over the draws and items of a batch), with
  finished sessions dropped from the working arrays at batch ends.
* Goals: ``decide`` (``better``/``worse``/``equivalent`` with ``margin``) or ``precision`` (half-width
  of the interval for ``Delta`` at most ``precision``); ``max_items`` caps every session.
* Wrong decision: ``better`` when the full-benchmark ``Delta <= 0``, ``worse`` when ``Delta >= 0`` (ties
  count as wrong), ``equivalent`` when ``|Delta| > margin``. Its share gets a Clopper-Pearson interval.
  ``missed`` counts sessions whose final interval excludes ``Delta``; ``ever_missed`` those whose
  interval excluded it at some batch end (what the time-uniform guarantee bounds by ``alpha``).
* Fixed size: the smallest ``n`` such that a uniform random ``n``-subset orders the pair as the full
  benchmark with probability ``>= 1 - alpha`` (exact hypergeometric, :func:`app.core.reliability.exact.order_probabilities`,
  the rule of :func:`app.core.reliability.exact.smallest_n`), vectorised over pairs; ``NaN`` for tied
  pairs. Error-controlled fixed designs (exact tests at a given power) are in
  :mod:`app.core.sequential.fixed_designs`.

Cost: per session and item ``O(N + G)`` (draw probabilities over the ``N`` items, capital over the
``G`` grid points), plus one Newton solve of the ability per batch for the IRT policies.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import beta as beta_dist

from app.core._validation import SeedLike, normalize_rng
from app.core.irt.fit import fit_irt
from app.core.reliability.exact import order_probabilities
from app.core.sequential.active import difference_from_known
from app.core.sequential.confidence_sequences import (
    BETTER,
    EQUIVALENT,
    UNDECIDED,
    WORSE,
    decide,
    precision_met,
)
from app.core.sequential.fluid import ItemBank
from app.core.sequential.policies import (
    IRT_POLICIES,
    POLICIES,
    policy_draw,
    policy_init,
    policy_interval,
    policy_update,
)

GOALS = ("decide", "precision")
GAP_EDGES = (0.0, 2.0, 5.0, 10.0, 15.0, np.inf)  # points
GAP_LABELS = ("<2", "2-5", "5-10", "10-15", ">=15")


@dataclass(frozen=True)
class BucketRow:
    """One policy in one gap bucket (points = 100 x |Delta|).

    ``wrong_upper`` is the Clopper-Pearson upper end (level ``1 - alpha``) of the wrong share;
    ``ever_missed`` counts sessions whose interval excluded ``Delta`` at some batch end.
    """

    bucket: str
    sessions: int
    decided: int
    wrong: int
    wrong_upper: float
    ever_missed: int
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
    sessions, decided, wrong, missed, ever_missed : int
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
    ever_missed_mask : ndarray of bool, shape (n_sessions,)
    """

    policy: str
    sessions: int
    decided: int
    decided_share: float
    wrong: int
    wrong_share: float
    wrong_ci: tuple[float, float]
    missed: int
    ever_missed: int
    buckets: tuple[BucketRow, ...]
    runtime_s: float
    pair: np.ndarray
    items_used: np.ndarray
    decision: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    ever_missed_mask: np.ndarray


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
    if not (np.isfinite(c).all() and ((c >= 0) & (c <= 1)).all()):
        raise ValueError(
            "correct: the simulator needs full results in [0, 1] (0/1 correctness or graded "
            "scores, no NaN)"
        )
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


def _run_batches(s, cap, batch_size, step, shrink, goal, margin, precision, truth):
    """Run ``s`` sessions batch by batch until each stops or reaches ``cap`` items.

    ``step(active, t, k)`` feeds items ``t .. t+k-1`` of the running sessions ``active`` and
    returns their intervals ``(lo, hi)`` for ``Delta``; ``shrink(keep)`` drops the finished
    sessions' rows of the policy's state (its rows follow ``active``). Returns ``items_used,
    lower, upper, ever_missed`` (the interval excluded ``truth`` at some batch end).
    """
    items = np.full(s, cap, dtype=np.int64)
    lower = np.full(s, -1.0)
    upper = np.full(s, 1.0)
    ever = np.zeros(s, dtype=bool)
    active = np.arange(s)  # sessions still running; state rows follow `active`
    t = 0
    tol = 1e-12
    while active.size and t < cap:  # loop over batches (vectorised over sessions)
        k = min(int(batch_size), cap - t)
        lo, hi = step(active, t, k)
        t += k
        ever[active] |= (truth[active] < lo - tol) | (truth[active] > hi + tol)
        done = _finished(lo, hi, goal, margin, precision) | (t >= cap)
        if done.any():
            idx = active[done]
            items[idx] = t
            lower[idx], upper[idx] = lo[done], hi[done]
            keep = ~done
            active = active[keep]
            shrink(keep)
    return items, lower, upper, ever


def simulate_policy(
    policy: str,
    y_model,
    baseline_mean,
    *,
    bank: ItemBank | None = None,
    alpha: float,
    batch_size: int,
    goal: str = "decide",
    margin: float | None = None,
    precision: float | None = None,
    max_items: int | None = None,
    bet: str | None = None,
    c: float | None = None,
    gamma: float | None = None,
    rng: SeedLike = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Replay sessions of one policy, vectorised over sessions.

    Parameters
    ----------
    policy : {"random", "assisted", "neyman", "fluid"}
    y_model : array_like, shape (S, N)
        Each session's model results on all items, in [0, 1] (item means for repeated samples).
    baseline_mean : array_like, shape (S,)
        The baseline's known full-benchmark mean ``B``.
    bank : ItemBank, optional
        Item parameters for the IRT policies (fitted without the session's models).
    alpha, batch_size, goal, margin, precision, max_items, bet, c
        As in :func:`simulate_sessions`.
    gamma : float, optional
        Floor of the sampling probabilities (default :data:`~app.core.sequential.policies.POLICY_GAMMA`).
    rng : int, Generator or None
        Draws the items: one uniform per session and draw, drawn up front, so a session's
        draws do not depend on the other sessions (nor, for ``random``, on the batch size).

    Returns
    -------
    items_used : ndarray of int64, shape (S,)
    lower, upper : ndarray, shape (S,)
        Final interval for ``Delta = A - B``.
    ever_missed : ndarray of bool, shape (S,)
        The interval excluded the true ``Delta`` at some batch end.
    """
    gen, _ = normalize_rng(rng)
    y = np.asarray(y_model, dtype=np.float64)
    base = np.broadcast_to(np.asarray(baseline_mean, dtype=np.float64), y.shape[:1])
    s, n = y.shape
    cap = n if max_items is None else min(int(max_items), n)
    binary = bool(np.isin(y, (0.0, 1.0)).all())
    state = policy_init(
        policy, n, bank=bank, sessions=s, alpha=alpha, bet=bet, c=c, gamma=gamma, binary=binary
    )
    uniforms = gen.random((s, cap))  # one per session and draw, whatever the batch size

    def step(active, t, k):
        rec = policy_draw(state, bank, k, uniforms[active, t : t + k])
        policy_update(state, bank, rec, np.take_along_axis(y[active], rec.items, 1), inplace=True)
        return difference_from_known(*policy_interval(state), base[active])

    def shrink(keep):
        state.keep(keep)

    truth = y.mean(axis=1) - base
    return _run_batches(s, cap, batch_size, step, shrink, goal, margin, precision, truth)


def _bucket_of(delta) -> np.ndarray:
    pts = 100 * np.abs(np.asarray(delta))
    return np.searchsorted(np.asarray(GAP_EDGES[1:-1]), pts + 1e-9, side="right")


def _summary(
    policy, pair, items, lo, hi, ever, delta, fixed_n, goal, margin, precision, alpha, runtime
):
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
    bucket = _bucket_of(dl)
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
                wrong_upper=clopper_pearson(int(wrong[m].sum()), int(m.sum()), alpha)[1],
                ever_missed=int(ever[m].sum()),
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
        ever_missed=int(ever.sum()),
        buckets=tuple(rows),
        runtime_s=float(runtime),
        pair=pair,
        items_used=items,
        decision=dec,
        lower=lo,
        upper=hi,
        ever_missed_mask=ever,
    )


def _draw_pairs(gen, pool, acc, pairs: int, stratify: bool):
    """``(a, b)`` rows of ``pairs`` ordered pairs of distinct pool models."""
    ia, ib = np.triu_indices(pool.size, 1)
    if stratify:
        bucket = _bucket_of(acc[pool[ia]] - acc[pool[ib]])
        present = np.unique(bucket)
        per = np.bincount(np.arange(pairs) % present.size, minlength=present.size)
        pick = np.concatenate(
            [
                gen.choice(np.flatnonzero(bucket == b), int(m))
                for b, m in zip(present, per, strict=True)  # at most five buckets
            ]
        )
    else:
        pick = gen.integers(0, ia.size, int(pairs))
    swap = gen.random(int(pairs)) < 0.5
    a = np.where(swap, pool[ib[pick]], pool[ia[pick]])
    b = np.where(swap, pool[ia[pick]], pool[ib[pick]])
    return a, b


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
    bet: str | None = None,
    c: float | None = None,
    holdout: float = 0.25,
    irt_dims: int = 2,
    stratify: bool = False,
    rng: SeedLike = 0,
) -> SimulationResult:
    """Replay evaluation sessions for random model pairs of a full results matrix.

    Parameters
    ----------
    correct : array_like, shape (n_models, n_items)
        0/1 correctness or graded scores in [0, 1] (issue 35: the confidence sequences take any
        bounded value, the IRT policies' fit takes fractional responses). The exact fixed-subset
        sizes (``fixed_n``) are hypergeometric, so for graded scores they are NaN.
    policies : sequence of {"random", "assisted", "neyman", "fluid"}
    pairs : int
        Model pairs drawn from the held-out pool (module docstring).
    orders : int
        Independent replays per pair (sessions = ``pairs * orders`` per policy).
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
        Confidence-sequence bet and truncation (:mod:`app.core.sequential.active`); default
        each policy's (:data:`~app.core.sequential.policies.POLICY_BET`, ``POLICY_C``).
    holdout : float
        Share of models in the pair pool (excluded from the IRT fit).
    irt_dims : int
        Latent dimension of the IRT fit for the IRT policies (default 2).
    stratify : bool
        Draw pairs in equal numbers from each gap bucket (else uniformly among pool pairs).
    rng : int, Generator or None
        Seed of everything random (pool, pairs, draws, IRT initialisation).

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
    acc = c01.mean(axis=1)
    a, b = _draw_pairs(gen, pool, acc, int(pairs), bool(stratify))
    pair_rows = np.stack([a, b], axis=1)
    delta = acc[a] - acc[b]
    graded = not bool(np.isin(c01, (0.0, 1.0)).all())
    if graded:  # no hypergeometric closed form for graded scores
        fixed_n = np.full(a.size, np.nan)
    else:
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
        c=None if c is None else float(c),
        holdout=float(holdout),
        irt_dims=int(irt_dims),
        stratify=bool(stratify),
        seed=seed,
        pool=pool,
        graded=graded,
    )
    bank = None
    if any(p in IRT_POLICIES for p in pol):
        t_fit = time.perf_counter()
        bank = ItemBank.from_irt(fit_irt(c01[train], dims=int(irt_dims), rng=gen))
        params["irt_fit_s"] = time.perf_counter() - t_fit
    out: dict[str, PolicySummary] = {}
    kw = dict(
        alpha=alpha,
        batch_size=int(batch_size),
        goal=goal,
        margin=margin,
        precision=precision,
        max_items=max_items,
        bet=bet,
        c=c,
    )
    sess_pair = np.repeat(np.arange(int(pairs)), int(orders))
    for p in pol:  # at most four policies
        t0 = time.perf_counter()
        items, lo, hi, ever = simulate_policy(
            p, c01[a[sess_pair]], acc[b[sess_pair]], bank=bank, rng=gen, **kw
        )
        runtime = time.perf_counter() - t0
        out[p] = _summary(
            p,
            sess_pair,
            items,
            lo,
            hi,
            ever,
            delta,
            fixed_n,
            goal,
            margin,
            precision,
            alpha,
            runtime,
        )
    return SimulationResult(
        pairs=pair_rows, delta=delta, fixed_n=fixed_n, policies=out, params=params
    )


__all__ = [
    "GAP_EDGES",
    "GAP_LABELS",
    "POLICIES",
    "BucketRow",
    "PolicySummary",
    "SimulationResult",
    "clopper_pearson",
    "fixed_subset_sizes",
    "simulate_policy",
    "simulate_sessions",
]
