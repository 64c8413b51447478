"""Offline replay of cost-aware sessions: cost to decision next to items to decision (issue 37).

:func:`simulate_cost_policy` replays sessions of one policy (:mod:`app.core.sequential.policies`)
exactly as :func:`app.core.sequential.simulation.simulate_policy` does (one uniform per session and
draw, drawn up front; decisions read at batch ends; finished sessions dropped), and in addition

* draws with a cost-aware design when ``design_costs`` is given (scores per unit of predicted
  cost, :func:`app.core.sequential.cost.cost_scores`),
* records what each session spent, measured on the candidate's own per-item costs,
* stops a session whose spending reached ``max_cost`` (:func:`~app.core.sequential.cost.budget_open`:
  no new batch once the budget is used up), which then ends undecided with what it spent.

Cost: that of ``simulate_policy`` plus ``O(S k)`` per batch for the spending.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.core._validation import SeedLike, normalize_rng
from app.core.sequential.active import difference_from_known
from app.core.sequential.confidence_sequences import UNDECIDED, decide
from app.core.sequential.cost import budget_open
from app.core.sequential.fluid import ItemBank
from app.core.sequential.policies import (
    policy_draw,
    policy_init,
    policy_interval,
    policy_update,
)


@dataclass(frozen=True)
class CostRun:
    """Outcome of ``S`` replayed sessions.

    Attributes
    ----------
    items : ndarray of int64, shape (S,)
        Items drawn when the session ended.
    spent : ndarray, shape (S,)
        Cost spent (the candidate's costs of the drawn items).
    lower, upper : ndarray, shape (S,)
        Final interval for ``Delta = A - B``.
    decision : ndarray of int8, shape (S,)
        :func:`~app.core.sequential.confidence_sequences.decide` of the final interval.
    ever_missed : ndarray of bool, shape (S,)
        The interval excluded the true ``Delta`` at some batch end.
    budget_stopped : ndarray of bool, shape (S,)
        Ended undecided because the budget ran out.
    worst_overshoot : ndarray, shape (S,)
        The largest cost one of the session's batches could have had (its ``k`` dearest items
        among those left before it), the bound on ``spent - max_cost``.
    """

    items: np.ndarray
    spent: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    decision: np.ndarray
    ever_missed: np.ndarray
    budget_stopped: np.ndarray
    worst_overshoot: np.ndarray


def simulate_cost_policy(
    policy: str,
    y_model,
    baseline_mean,
    costs,
    *,
    design_costs=None,
    bank: ItemBank | None = None,
    alpha: float = 0.05,
    batch_size: int = 10,
    margin: float | None = None,
    max_items: int | None = None,
    max_cost: float | None = None,
    bet: str | None = None,
    c: float | None = None,
    gamma: float | None = None,
    cost_after: int = 0,
    rng: SeedLike = None,
) -> CostRun:
    """Replay goal-``decide`` sessions of one policy, tracking what they spend.

    Parameters
    ----------
    policy : {"random", "assisted", "neyman", "fluid"}
    y_model : array_like, shape (S, N)
        Each session's candidate results on all items, in [0, 1].
    baseline_mean : array_like, shape (S,)
        The baseline's known full-benchmark mean.
    costs : array_like, shape (S, N) or (N,)
        What each item costs the candidate (measured; positive).
    design_costs : array_like, shape (N,), optional
        Predicted per-item costs the design may use (from stored models, known before the
        session); ``None`` draws as the policy does without costs.
    bank, alpha, batch_size, margin, max_items, bet, c, gamma
        As in :func:`app.core.sequential.simulation.simulate_policy`.
    max_cost : float, optional
        Budget: no new batch once ``spent >= max_cost``.
    cost_after : int
        Draw without the costs while fewer than this many items were drawn (a predictable
        schedule: far-apart pairs decide early, where the wider inverse-probability range of a
        cost-aware design caps the bets most).
    rng : int, Generator or None
        Seeds the draws (one uniform per session and draw, drawn up front).

    Returns
    -------
    CostRun
    """
    gen, _ = normalize_rng(rng)
    y = np.asarray(y_model, dtype=np.float64)
    s, n = y.shape
    base = np.broadcast_to(np.asarray(baseline_mean, dtype=np.float64), (s,))
    cost = np.broadcast_to(np.asarray(costs, dtype=np.float64), (s, n))
    if not np.all(np.isfinite(cost)) or cost.min() <= 0:
        raise ValueError("costs: must be finite and positive")
    if max_cost is not None and not max_cost > 0:
        raise ValueError("max_cost: must be positive")
    cap = n if max_items is None else min(int(max_items), n)
    binary = bool(np.isin(y, (0.0, 1.0)).all())
    state = policy_init(
        policy, n, bank=bank, sessions=s, alpha=alpha, bet=bet, c=c, gamma=gamma, binary=binary
    )
    uniforms = gen.random((s, cap))
    truth = y.mean(axis=1) - base
    items = np.zeros(s, dtype=np.int64)
    spent = np.zeros(s)
    lower, upper = np.full(s, -1.0), np.full(s, 1.0)
    ever = np.zeros(s, dtype=bool)
    stopped = np.zeros(s, dtype=bool)
    worst = np.zeros(s)
    active = np.arange(s)
    t = 0
    while active.size and t < cap:  # loop over batches, vectorised over sessions
        k = min(int(batch_size), cap - t)
        left = np.where(state.seen, 0.0, cost[active])
        worst[active] = np.maximum(worst[active], -np.sort(-left, axis=1)[:, :k].sum(axis=1))
        dc = design_costs if t >= int(cost_after) else None
        rec = policy_draw(state, bank, k, uniforms[active, t : t + k], costs=dc)
        vals = np.take_along_axis(y[active], rec.items, 1)
        policy_update(state, bank, rec, vals, inplace=True)
        spent[active] += np.take_along_axis(cost[active], rec.items, 1).sum(axis=1)
        t += k
        items[active] = t
        lo, hi = difference_from_known(*policy_interval(state), base[active])
        lower[active], upper[active] = lo, hi
        ever[active] |= (truth[active] < lo - 1e-12) | (truth[active] > hi + 1e-12)
        decided = decide(lo, hi, margin=margin) != UNDECIDED
        broke = ~decided & ~budget_open(spent[active], max_cost)
        stopped[active[broke]] = True
        keep = ~(decided | broke)
        active = active[keep]
        state.keep(keep)
    return CostRun(
        items=items,
        spent=spent,
        lower=lower,
        upper=upper,
        decision=decide(lower, upper, margin=margin),
        ever_missed=ever,
        budget_stopped=stopped,
        worst_overshoot=worst,
    )


__all__ = ["CostRun", "simulate_cost_policy"]
