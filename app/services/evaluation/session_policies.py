"""How a session draws its items and computes its interval (the policy and decision path).

Every policy of :mod:`app.core.sequential.policies` (``random``, ``assisted``, ``neyman``,
``fluid``) decides with the §7 confidence sequence for the model's full-benchmark mean ``A``;
with a baseline the interval for ``Delta`` is that CS minus the baseline's known mean (its full
results are stored with the session), so every returned interval is ``design``-based and a
decision is wrong with probability at most ``alpha``.

The engine state (``parts`` of :func:`app.services.evaluation.sessions.pack_state`) holds
``"policy"`` (:class:`~app.core.sequential.policies.PolicyState`), ``"draws"`` (the
:class:`~app.core.sequential.active.DrawRecord` of every item served so far, the open batch
included: each ``pi_t(I_t)``, ``f_t(I_t)``, ``F_t``, ``L_t``, ``U_t``) and ``"inputs"`` (``theta``:
the ability each batch's predictions and draws were computed from, one row per batch). ``random`` and
``assisted`` serve the seeded permutation ``numpy.random.default_rng(seed).permutation(N)`` in
order; ``neyman`` and ``fluid`` draw batch ``j`` with the uniforms of
``numpy.random.default_rng([seed, j])``. The predictions are a function of the values stored before
the batch and the benchmark's stored IRT fit, so a session is replayed exactly from its seed,
values and fit. A confidence sequence starts on the exact 0/1 lattice; the
first fractional value (an item mean of repeated samples, or a fractional score) rebuilds it on the
fine grid by replaying the stored draws and values.
"""

from __future__ import annotations

import numpy as np

from app.core.sequential.active import DrawRecord
from app.core.sequential.confidence_sequences import CSState
from app.core.sequential.fluid import ItemBank
from app.core.sequential.gating.one_sided import (
    GridTrack,
    OneSidedState,
    goal_decision,
    goal_tests,
    one_sided_init,
    one_sided_update,
    track_bounds,
)
from app.core.sequential.policies import (
    IRT_POLICIES,
    POLICY_BET,
    POLICY_C,
    UNIFORM_POLICIES,
    PolicyState,
    point_estimate,
    policy_draw,
    policy_init,
    policy_interval,
    policy_record,
    policy_update,
    prediction_gain,
    replay,
)
from app.core.sequential.population import (
    GENERALIZED,
    check_estimand,
    population_cs_init,
    population_cs_interval,
    population_cs_update,
)


def batch_uniforms(seed: int, step: int, k: int) -> np.ndarray:
    """The uniforms of batch ``step`` (0 = the first batch), shape (1, k)."""
    return np.random.default_rng([int(seed), int(step)]).random((1, int(k)))


def _draw(st: PolicyState, bank: ItemBank | None, seed: int, step: int, k: int, costs=None):
    if st.policy in UNIFORM_POLICIES and costs is None:  # the seeded permutation, as always
        t = int(st.cs.t[0])
        perm = np.random.default_rng(int(seed)).permutation(st.cs.n_items)
        return policy_record(st, bank, perm[None, t : t + k])
    return policy_draw(st, bank, k, batch_uniforms(seed, step, k), costs=costs)


def start(
    policy: str,
    n_items: int,
    *,
    bank: ItemBank | None,
    alpha: float,
    seed: int,
    k: int,
    costs=None,
    gamma: float | None = None,
    estimand: str = "benchmark",
    paired: bool = False,
) -> tuple[dict, np.ndarray]:
    """Engine state of a new session and its first batch (item positions in draw order).

    ``random`` and ``assisted`` serve the seeded permutation ``default_rng(seed).permutation(N)``
    in order (uniform draws without replacement); the others draw batch ``j`` with the uniforms
    of ``default_rng([seed, j])``. ``costs`` (predicted per-item costs, stored with the session)
    makes every policy draw cost-aware with the floor ``gamma``
    (:func:`app.core.sequential.policies.allocation_scores`), uniforms as the others; the
    IRT policies then bet as ``assisted`` does (the variant measured in bench/bench_cost.py).
    ``estimand="generalized"`` (a uniform policy without costs only) adds the item-population
    confidence sequences (:mod:`app.core.sequential.population`): ``"pop_acc"`` for the model's
    mean and, when ``paired`` (a baseline), ``"pop_diff"`` for ``(d + 1) / 2``.
    """
    check_estimand(estimand)
    if estimand == GENERALIZED and (policy not in UNIFORM_POLICIES or costs is not None):
        raise ValueError("estimand: generalized needs a uniformly random order")
    kw: dict = {}
    if costs is not None:
        kw["gamma"] = gamma
        if policy != "random":
            kw.update(bet=POLICY_BET["assisted"], c=POLICY_C["assisted"])
    st = policy_init(policy, n_items, bank=bank, alpha=alpha, **kw)
    rec = _draw(st, bank, seed, 0, k, costs)
    parts = {"policy": st.to_dict(), "draws": rec.to_dict(), "inputs": {"theta": st.theta.copy()}}
    if estimand == GENERALIZED:
        parts["pop_acc"] = population_cs_init(n_items, alpha=alpha).to_dict()
        if paired:
            parts["pop_diff"] = population_cs_init(n_items, alpha=alpha).to_dict()
    return parts, rec.items[0]


def is_generalized(parts: dict) -> bool:
    """Whether the engine state carries the item-population (generalized) sequences."""
    return "pop_acc" in parts


def _feed_population(parts: dict, x: np.ndarray, base_x: np.ndarray | None) -> dict:
    out = dict(parts)
    acc = population_cs_update(CSState.from_dict(parts["pop_acc"]), x[None, :])
    out["pop_acc"] = acc.to_dict()
    if "pop_diff" in parts:
        if base_x is None:
            raise ValueError("base_x: a paired generalized session needs the baseline's values")
        pair = (x - np.asarray(base_x, dtype=np.float64) + 1.0) / 2.0
        diff = population_cs_update(CSState.from_dict(parts["pop_diff"]), pair[None, :])
        out["pop_diff"] = diff.to_dict()
    return out


def population_intervals(parts: dict) -> tuple[tuple, tuple | None]:
    """``(estimate, lower, upper)`` for the model's generalized accuracy and, with a baseline,
    for the generalized difference ``Delta = 2 m - 1`` (the sample means as estimates)."""

    def read(d: dict) -> tuple[float | None, float, float]:
        cs = CSState.from_dict(d)
        lo, hi = population_cs_interval(cs)
        t = int(cs.t[0])
        return (float(cs.total[0] / t) if t else None), float(lo[0]), float(hi[0])

    est = read(parts["pop_acc"])
    if "pop_diff" not in parts:
        return est, None
    m, lo, hi = read(parts["pop_diff"])
    return est, (None if m is None else 2.0 * m - 1.0, 2.0 * lo - 1.0, 2.0 * hi - 1.0)


def _on_lattice(x: np.ndarray) -> bool:
    return bool(np.all((x == 0) | (x == 1)))


def feed(
    parts: dict,
    bank: ItemBank | None,
    x: np.ndarray,
    prev: np.ndarray,
    *,
    base_x: np.ndarray | None = None,
) -> dict:
    """Apply the open batch's values ``x`` (in the order served); returns new parts.

    Parameters
    ----------
    parts : dict
        ``{"policy": ..., "draws": ...}`` (not modified).
    bank : ItemBank or None
    x : ndarray, shape (k,)
        Values of the open batch in [0, 1].
    prev : ndarray, shape (t,)
        Values of the items applied before, in the order served.
    base_x : ndarray, shape (k,), optional
        The baseline's values on the batch (a generalized session with a baseline).
    """
    st = PolicyState.from_dict(parts["policy"])
    draws = DrawRecord.from_dict(parts["draws"])
    t = int(st.cs.t[0])
    if st.cs.exact_grid and not _on_lattice(x):
        fresh = policy_init(
            st.policy,
            st.cs.n_items,
            bank=bank,
            alpha=st.cs.alpha,
            bet=st.cs.bet,
            c=st.cs.c,
            gamma=st.gamma,
            binary=False,
        )
        done = draws.take((slice(None), slice(0, t)))
        st.cs = replay(fresh, done, prev[None, :]) if t else fresh.cs
    pending = draws.take((slice(None), slice(t, None)))
    values = np.asarray(x, dtype=np.float64)[None, :]
    policy_update(st, bank, pending, values, inplace=True)
    out = {**parts, "policy": st.to_dict(), "draws": draws.to_dict()}
    if is_generalized(parts):
        out = _feed_population(out, np.asarray(x, dtype=np.float64), base_x)
    if "one_sided" in parts:  # a one-sided goal: its tests read the very same draws
        out |= _feed_one_sided(parts, pending, values)
    return out


def start_one_sided(
    parts: dict, goal: str, n_items: int, *, baseline_mean: float, margin: float | None,
    alpha: float,
) -> dict:  # fmt: skip
    """Add a one-sided goal's tests (``noninferior``, ``superior``) to a new session's parts.

    They consume the policy's own draws (any predictable design, the same predictions), so the
    decision spends all of ``alpha`` on its side (:mod:`app.core.sequential.gating.one_sided`); the
    tracked grid (``k / N``) gives the reported bound.
    """
    target, side, al = goal_tests(goal, baseline_mean, margin, alpha)
    st = one_sided_init(n_items, target, side, al)
    track = GridTrack.start(st, np.arange(n_items + 1) / n_items)
    return {**parts, "one_sided": st.to_dict(), "one_sided_grid": _track_dict(track)}


def _track_dict(track: GridTrack) -> dict:
    return {"grid": track.grid, "log_capital": track.log_capital, "rejected": track.rejected}


def _feed_one_sided(parts: dict, pending: DrawRecord, values: np.ndarray) -> dict:
    st = OneSidedState.from_dict(parts["one_sided"])
    g = parts["one_sided_grid"]
    track = GridTrack(
        grid=np.asarray(g["grid"], dtype=np.float64),
        log_capital=np.asarray(g["log_capital"], dtype=np.float64).copy(),
        rejected=np.asarray(g["rejected"], dtype=bool).copy(),
    )
    one_sided_update(st, pending, values, inplace=True, track=track)
    return {"one_sided": st.to_dict(), "one_sided_grid": _track_dict(track)}


def one_sided_difference(parts: dict, goal: str, baseline_mean, margin) -> tuple[float, ...]:
    """``(lower, upper, threshold)`` of a one-sided goal for the difference from the baseline."""
    _, lo, hi = one_sided_reading(parts, goal)
    b, d = float(baseline_mean), float(margin or 0.0)
    return lo - b, hi - b, (-d if goal == "noninferior" else d)


def one_sided_reading(parts: dict, goal: str) -> tuple[str, float, float]:
    """``(decision, lower bound, upper bound)`` of a one-sided goal, bounds for the model's mean
    (the lower test's bound and the upper test's)."""
    st = OneSidedState.from_dict(parts["one_sided"])
    g = parts["one_sided_grid"]
    track = GridTrack(
        grid=np.asarray(g["grid"], dtype=np.float64),
        log_capital=np.asarray(g["log_capital"], dtype=np.float64),
        rejected=np.asarray(g["rejected"], dtype=bool),
    )
    bounds = track_bounds(st, track)[0]
    return goal_decision(st, goal), float(bounds[0]), float(bounds[1])


def draw_next(
    parts: dict, bank: ItemBank | None, *, seed: int, step: int, k: int, costs=None
) -> tuple[dict, np.ndarray]:
    """Draw batch ``step`` (``k`` items) after every served item has its value.

    Returns the new parts and the batch's item positions in draw order. ``costs``: as in
    :func:`start` (the same stored costs at every batch).
    """
    st = PolicyState.from_dict(parts["policy"])
    rec = _draw(st, bank, seed, step, k, costs)
    draws = DrawRecord.concatenate([DrawRecord.from_dict(parts["draws"]), rec])
    thetas = np.concatenate([_thetas(parts, st), st.theta], axis=0)
    return {**parts, "draws": draws.to_dict(), "inputs": {"theta": thetas}}, rec.items[0]


def _thetas(parts: dict, st: PolicyState) -> np.ndarray:
    """The abilities the predictions of every batch so far were computed from, (batches, D)."""
    theta = np.asarray(parts["inputs"]["theta"], dtype=np.float64)
    return theta if theta.ndim == 2 else theta.reshape(-1, st.theta.shape[1])


def mean_interval(parts: dict, bank: ItemBank | None) -> tuple[float | None, float, float]:
    """``(estimate, lower, upper)`` for the model's full-benchmark mean.

    The interval is the design-based CS; the estimate is the model-assisted (difference)
    estimate (:func:`~app.core.sequential.policies.point_estimate`; the sample mean for
    ``random``), ``None`` before any result.
    """
    st = PolicyState.from_dict(parts["policy"])
    lo, hi = policy_interval(st)
    est = point_estimate(st, bank)[0]
    return (None if np.isnan(est) else float(est)), float(lo[0]), float(hi[0])


def prediction_report(parts: dict) -> dict | None:
    """Whether an IRT policy's predictions are helping its bets (issue 38 item 2), with the
    sentence a reader gets: :func:`~app.core.sequential.policies.prediction_gain` over the
    answered draws. None for ``random``, legacy states, or fewer answered items than it needs."""
    if "policy" not in parts or "draws" not in parts or is_generalized(parts):
        return None
    st = PolicyState.from_dict(parts["policy"])
    if st.policy not in IRT_POLICIES:
        return None
    draws = DrawRecord.from_dict(parts["draws"])
    answered = int(st.cs.t[0])
    items = draws.items[0, :answered]
    gain = prediction_gain(st.y[0, items], draws.prediction[0, :answered])
    if gain is None or np.isnan(gain["ratio"]):
        return None
    recent = gain["recent_ratio"]
    gain["recent_ratio"] = None if np.isnan(recent) else recent
    last = "" if np.isnan(recent) else f", {recent:.0%} over the last {gain['recent_items']}"
    share = f"{gain['ratio']:.0%} of the results' own over {gain['items']} items"
    if gain["helping"]:
        text = f"the IRT predictions help: the bets see a variance {share}"
    else:
        text = (
            f"the IRT predictions are not helping now (the bets see a variance {share}{last}): "
            "the candidate may be unlike the stored models; every decision stays valid, it may "
            "take more items than policy random"
        )
    return {**gain, "text": text}


__all__ = [
    "batch_uniforms",
    "draw_next",
    "feed",
    "is_generalized",
    "mean_interval",
    "one_sided_difference",
    "one_sided_reading",
    "population_intervals",
    "prediction_report",
    "start",
    "start_one_sided",
]
