"""Release gates: one decision for a suite of benchmarks (statistics-next §8).

A gate compares a candidate ``A`` with a baseline ``B`` (full results stored) on ``K``
benchmarks with margins ``delta_k >= 0`` and answers PASS (``A`` is no worse than ``B`` by more
than ``delta_k`` on every benchmark; with ``rule="no_regression_and_one_better"`` also better on
at least one), FAIL (naming the regressed benchmarks) or INCONCLUSIVE (budget spent first).

Tests per benchmark (:mod:`app.core.sequential.gating.one_sided`), with ``m_k = B_k - delta_k``:

* ``noninferior``: lower test at ``m_k``, level ``alpha`` (no correction for ``K``: a wrong PASS
  needs a miss on a benchmark with ``Delta_k <= -delta_k``, whatever the others do — the
  intersection-union principle, Berger 1982);
* ``regressed``: upper test at ``m_k``, level ``alpha / K`` (a wrong FAIL is a miss on *any*
  benchmark: Bonferroni, time-uniform because each bound is);
* ``better`` (second rule only): lower test at ``B_k``, level ``alpha / K`` (a PASS is also
  wrong when no ``Delta_k > 0``; a union over ``k``).

So ``P(wrong PASS) <= alpha`` and ``P(wrong FAIL) <= alpha`` for every ``K``, every stopping
time and every predictable allocation (each benchmark's tests are valid at each of its own draws).
A benchmark whose exact mean lies on its margin (exhausted, neither test decided) is
``on_margin``: not non-inferior, so the gate cannot pass; it fails naming it.

Allocation (:func:`allocate`): a round hands out ``batch_size`` items per open benchmark (less
when the budget is nearly spent), split in proportion to ``1 + progress_k``, where ``progress_k
in [0, 1]`` is the larger fraction of the way its tests' log-capitals are to their thresholds — the
benchmarks closest to deciding get up to twice the share; decided ones get nothing. With
``allocation="cost"`` the shares are ``(1 + progress_k) / c_k`` (progress per unit of cost), ``c_k``
the benchmark's predicted mean cost per item, fixed before the gate starts (the stored models'
medians), and every open benchmark gets at least one item while the quota allows: the cheap
benchmarks move first and the expensive ones are served in smaller steps. Either way the
allocation is a function of the past only (predictable), so it keeps every guarantee.

What the bets predict and are planned for: :mod:`app.core.sequential.gating.bets`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from app.core.sequential.active import DrawRecord
from app.core.sequential.fluid import ItemBank
from app.core.sequential.gating.bets import (
    DEFAULT_PREDICTION,
    DEFAULT_PRIOR_WEIGHT,
    PREDICTIONS,
    design_priors,
    prediction_coefficients,
    refresh_residuals,
)
from app.core.sequential.gating.combined import (
    COMBINED,
    combined_predictions,
    combined_record,
    combined_residuals,
)
from app.core.sequential.gating.one_sided import (
    GridTrack,
    OneSidedState,
    OrderedBaseline,
    affine_uniform_record,
    one_sided_init,
    one_sided_update,
    track_bounds,
)
from app.core.sequential.gating.rules import (  # noqa: F401 (re-exported)
    ALLOCATIONS,
    BENCH_STATES,
    BETTER,
    G_FAIL,
    G_INCONCLUSIVE,
    G_OPEN,
    G_PASS,
    NONINFERIOR,
    ON_MARGIN,
    OPEN,
    OUTCOMES,
    REGRESSED,
    RULES,
    T_BETTER,
    T_NONINFERIOR,
    T_REGRESSED,
    allocate,
    allocation_weights,
    benchmark_codes,
    check_costs,
    gate_outcome,
    gate_tests,
    needs_items,
    progress,
)


@dataclass(frozen=True)
class GateRun:
    """Result of :func:`run_gates` for ``S`` gates of ``K`` benchmarks.

    Attributes
    ----------
    outcome : ndarray of int8, shape (S,)
        :data:`OUTCOMES`.
    codes : ndarray of int8, shape (S, K)
        :data:`BENCH_STATES`.
    items : ndarray of int64, shape (S, K)
        Items served per benchmark.
    estimate : ndarray, shape (S, K)
        ``Delta_hat``: candidate's sample mean minus the baseline's mean on the same items
        (exact at exhaustion), NaN before any item.
    rounds : ndarray of int64, shape (S,)
    bounds : ndarray, shape (S, K, P), or None
        With ``bounds=True``: each test's one-sided bound for ``Delta_k`` (the bound for ``A``
        minus ``B_k``; column 0 the non-inferiority lower bound, 1 the regression upper bound,
        2 the better lower bound), the CS of the very bets the gate used.
    """

    outcome: np.ndarray
    codes: np.ndarray
    items: np.ndarray
    estimate: np.ndarray
    rounds: np.ndarray
    bounds: np.ndarray | None = None


def gate_orders(seed: int, sizes, gates: int = 1) -> list[np.ndarray]:
    """The serving order of every benchmark: ``default_rng([seed, k]).permutation(N_k)``.

    With ``gates > 1`` (simulation) row ``s`` uses the seed ``[seed, k, s]``.
    """
    if gates == 1:
        return [
            np.random.default_rng([int(seed), k]).permutation(n)[None, :]
            for k, n in enumerate(sizes)
        ]
    out = []
    for k, n in enumerate(sizes):
        rng = np.random.default_rng([int(seed), k, gates])
        out.append(rng.permuted(np.tile(np.arange(n), (gates, 1)), axis=1))
    return out


@dataclass
class GateState:
    """Everything a gate of ``K`` benchmarks carries between rounds (persistable).

    Attributes
    ----------
    tests : list of K OneSidedState
        Each benchmark's tests (:func:`gate_tests`), one row per gate.
    seen : list of K ndarray, shape (S, 6)
        Sums over the served items (:func:`prediction_coefficients`).
    left : ndarray of int64, shape (S,)
        Items the gate may still serve.
    rounds : ndarray of int64, shape (S,)
    rule, prediction : str
    batch_size : int
    served : list of K ndarray, shape (S, N_k), or None
        The candidate's results along each serving order (the first ``t`` are served): kept for
        the ``combined`` prediction, which refits the candidate's ability on them.
    thetas : list of K ndarray, shape (S, D), or None
        ``combined``: the abilities of the last round (the next fit's starting point).
    allocation : str
        :data:`ALLOCATIONS` (:func:`allocation_weights`).
    costs : ndarray, shape (K,), or None
        ``allocation="cost"``: each benchmark's predicted mean cost per item (fixed at the start).
    """

    tests: list[OneSidedState]
    seen: list[np.ndarray]
    left: np.ndarray
    rounds: np.ndarray
    rule: str
    prediction: str
    batch_size: int
    served: list[np.ndarray] | None = None
    thetas: list[np.ndarray] | None = None
    allocation: str = "progress"
    costs: np.ndarray | None = None

    @property
    def sizes(self) -> np.ndarray:
        return np.asarray([st.n_items for st in self.tests])

    def status(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(codes (S, K), exhausted (S, K), outcome (S,))``."""
        codes = np.stack([benchmark_codes(st) for st in self.tests], axis=1)
        served = np.stack([st.t for st in self.tests], axis=1)
        exhausted = served >= self.sizes[None, :]
        return codes, exhausted, gate_outcome(codes, exhausted, self.left, self.rule)

    def to_dict(self) -> dict:
        out = {"left": self.left, "rounds": self.rounds, "rule": self.rule,
               "prediction": self.prediction, "batch_size": self.batch_size}  # fmt: skip
        for j, (st, sn) in enumerate(zip(self.tests, self.seen, strict=True)):
            out |= {f"test{j}.{k}": v for k, v in st.to_dict().items()}
            out[f"seen{j}"] = sn
        for j, sv in enumerate(self.served or []):
            out[f"served{j}"] = sv
        for j, th in enumerate(self.thetas or []):
            if th is not None:
                out[f"theta{j}"] = th
        if self.allocation != "progress":  # a progress gate's state is written as before
            out |= {"allocation": self.allocation, "costs": self.costs}
        return out

    @classmethod
    def from_dict(cls, d: dict) -> GateState:
        k = sum(1 for name in d if str(name).startswith("seen"))
        tests = []
        for j in range(k):
            pre = f"test{j}."
            tests.append(OneSidedState.from_dict(
                {n[len(pre):]: v for n, v in d.items() if str(n).startswith(pre)}))  # fmt: skip
        return cls(
            tests=tests,
            seen=[np.asarray(d[f"seen{j}"], dtype=np.float64).reshape(-1, 6) for j in range(k)],
            left=np.asarray(d["left"], dtype=np.int64).reshape(-1),
            rounds=np.asarray(d["rounds"], dtype=np.int64).reshape(-1),
            rule=str(d["rule"]),
            prediction=str(d["prediction"]),
            batch_size=int(d["batch_size"]),
            served=[
                np.asarray(d[f"served{j}"], dtype=np.float64).reshape(-1, int(tests[j].n_items))
                for j in range(k)
            ]
            if "served0" in d
            else None,
            thetas=[d.get(f"theta{j}") for j in range(k)] if "served0" in d else None,
            allocation=str(d.get("allocation", "progress")),
            costs=None if "costs" not in d else np.asarray(d["costs"], np.float64).reshape(-1),
        )


def gate_start(
    baseline_means,
    sizes,
    margins,
    *,
    alpha: float = 0.05,
    rule: str = "no_regression",
    batch_size: int = 50,
    budget: int | None = None,
    prediction: str = DEFAULT_PREDICTION,
    prior_weight: float = DEFAULT_PRIOR_WEIGHT,
    allocation: str = "progress",
    costs=None,
) -> GateState:
    """A new gate (``S`` of them for a simulation) before any item.

    ``baseline_means``: K arrays of shape (S,), ``B_k`` per gate; ``sizes``: the K ``N_k``; the
    other parameters as :func:`run_gates`.
    """
    k = len(sizes)
    if allocation not in ALLOCATIONS:
        raise ValueError(f"allocation: expected one of {ALLOCATIONS}, got {allocation!r}")
    cost_k = check_costs(costs, k) if allocation == "cost" else None
    delta = np.broadcast_to(np.asarray(margins, dtype=np.float64), (k,))
    if prediction not in (*PREDICTIONS, COMBINED):
        raise ValueError(
            f"prediction: expected one of {(*PREDICTIONS, COMBINED)}, got {prediction!r}"
        )
    tests = []
    for j in range(k):
        tg, sd, al = gate_tests(baseline_means[j], delta[j], alpha=alpha, n_benchmarks=k, rule=rule)
        st = one_sided_init(int(sizes[j]), tg, sd, np.broadcast_to(al, tg.shape))
        if prior_weight > 0:
            st.prior_mean, st.prior_weight = design_priors(tg, sd, delta[j]), float(prior_weight)
        tests.append(st)
    s = tests[0].sessions
    total = int(sum(sizes)) if budget is None else int(budget)
    return GateState(tests=tests, seen=[np.zeros((s, 6)) for _ in range(k)],
                     left=np.full(s, total, dtype=np.int64), rounds=np.zeros(s, dtype=np.int64),
                     rule=rule, prediction=prediction, batch_size=int(batch_size),
                     served=[np.zeros((s, int(n))) for n in sizes]
                     if prediction == COMBINED else None,
                     thetas=[None] * k if prediction == COMBINED else None,
                     allocation=allocation, costs=cost_k)  # fmt: skip


def gate_plan(gs: GateState) -> np.ndarray:
    """Items per benchmark in the next round, shape (S, K) (all 0 once a gate has its outcome)."""
    codes, exhausted, outcome = gs.status()
    want = needs_items(codes, exhausted, gs.rule) & (outcome == G_OPEN)[:, None]
    prog = np.stack([progress(st) for st in gs.tests], axis=1)
    weights = allocation_weights(prog, gs.allocation, gs.costs)
    served = np.stack([st.t for st in gs.tests], axis=1)
    return allocate(weights, want, gs.sizes[None, :] - served, gs.batch_size, gs.left,
                    at_least_one=gs.allocation == "cost")  # fmt: skip


class RoundDraws(NamedTuple):
    """One benchmark's draws of a round: the prediction ``f = f0 + (f1 - f0) b`` (``combined``:
    ``f0`` the prediction along the order, shape (S, N), ``f1`` None, ``theta`` its abilities),
    the :class:`DrawRecord` and which of its columns are served."""

    f0: np.ndarray
    f1: np.ndarray | None
    record: DrawRecord
    live: np.ndarray
    theta: np.ndarray | None = None


def gate_records(gs: GateState, ordered, counts, banks: list[ItemBank] | None = None) -> list:
    """The round's :class:`RoundDraws` per benchmark, or None when it gets none.

    ``ordered``: the K :class:`OrderedBaseline` (serving orders, the baseline along them);
    ``banks``: the K item banks, for the ``combined`` prediction. A function of the state only
    (nothing changes), so the items a round serves can be computed when it is handed out and
    again when its results arrive.
    """
    if gs.prediction == COMBINED and (banks is None or gs.served is None):
        raise ValueError("prediction: 'combined' needs each benchmark's item bank")
    out = []
    for j, st in enumerate(gs.tests):
        kmax = int(counts[:, j].max())
        if kmax == 0:
            out.append(None)
            continue
        theta = None
        if gs.prediction == COMBINED:
            ob = ordered[j]
            f0, theta = combined_predictions(
                banks[j], ob.order, ob.b, gs.served[j], st.t, gs.thetas[j]
            )
            f1 = None
            rec, live = combined_record(f0, ob.order, st.t, kmax)
        else:
            f0, f1 = prediction_coefficients(gs.prediction, gs.seen[j])
            rec, live = affine_uniform_record(ordered[j], f0, f1, st.t, kmax)
        live &= np.arange(kmax)[None, :] < counts[:, j][:, None]
        out.append(RoundDraws(f0, f1, rec, live, theta))
    return out


def gate_apply(gs: GateState, counts, records, cand_values, base_values, tracks=None) -> None:
    """Feed a round's outcomes (in place).

    Parameters
    ----------
    gs : GateState
    counts : ndarray, shape (S, K)
        :func:`gate_plan` of this round.
    records : list
        :func:`gate_records` of this round.
    cand_values, base_values : list of K ndarray (or None), shape of each record's items
        The candidate's and the baseline's results on the served items (padding ignored).
    tracks : list of K GridTrack or None, optional
        Updated with the same bets (reported bounds).
    """
    for j, item in enumerate(records):
        if item is None:
            continue
        f0, f1, rec, live, theta = item
        a = np.where(live, np.asarray(cand_values[j], dtype=np.float64), 0.0)
        b = np.where(live, np.asarray(base_values[j], dtype=np.float64), 0.0)
        if f1 is None:  # combined: f0 is the round's prediction along the order
            gs.thetas[j] = theta
            combined_residuals(gs.tests[j], f0, gs.served[j])
            pos = gs.tests[j].t[:, None] + np.arange(a.shape[1])[None, :]
            rows = np.nonzero(live)
            gs.served[j][rows[0], pos[rows]] = a[rows]
        else:
            refresh_residuals(gs.tests[j], gs.seen[j], f0, f1)
        track = None if tracks is None else tracks[j]
        one_sided_update(gs.tests[j], rec, a, live=live, inplace=True, track=track)
        sums = [live.sum(1), a.sum(1), b.sum(1), (a * b).sum(1), (b * b).sum(1), (a * a).sum(1)]
        gs.seen[j] += np.stack(sums, axis=1)
    gs.left -= np.asarray(counts).sum(axis=1)
    gs.rounds += np.asarray(counts).sum(axis=1) > 0


def run_gates(
    candidates,
    baselines,
    margins,
    *,
    alpha: float = 0.05,
    rule: str = "no_regression",
    batch_size: int = 50,
    budget: int | None = None,
    prediction: str = DEFAULT_PREDICTION,
    orders=None,
    seed: int = 0,
    bounds: bool = False,
    prior_weight: float = DEFAULT_PRIOR_WEIGHT,
    banks: list[ItemBank] | None = None,
    allocation: str = "progress",
    costs=None,
) -> GateRun:
    """Run ``S`` gates to their outcomes on stored results (vectorised over gates).

    Parameters
    ----------
    candidates, baselines : list of K arrays, shape (S, N_k) (or (N_k,) for one gate)
        Per-item results in [0, 1] of the candidate and the baseline on each benchmark.
    margins : array_like, shape (K,)
        ``delta_k`` in [0, 1).
    alpha, rule, batch_size, budget, prediction
        As the gate's parameters (``budget`` in items; default the whole suite).
    orders : list of K arrays of int, shape (S, N_k), optional
        Serving orders; default :func:`gate_orders` ``(seed, sizes, S)``.
    seed : int
    prior_weight : float
        Pseudo-items behind each test's design alternative (:func:`design_priors`): the bets
        start planned for a sibling (Delta = 0) on the PASS side and for a regression one margin
        beyond on the FAIL side, and follow the data as it outnumbers them. Any value keeps
        every guarantee (the bets stay predictable); 0 is the plain plug-in bet.
    banks : list of K ItemBank, optional
        Each benchmark's fitted item bank: needed by ``prediction="combined"``
        (:mod:`app.core.sequential.gating.combined`).
    bounds : bool
        Also track every test's bound on the lattice ``k / N`` (``O(S P N)`` per item: for a
        handful of gates, as the CLI and the service run them).
    allocation : str
        ``"progress"`` (shares ``1 + progress_k``) or ``"cost"`` (``(1 + progress_k) / c_k``,
        at least one item each while the quota allows; :func:`allocation_weights`).
    costs : array_like, shape (K,), optional
        ``allocation="cost"``: each benchmark's predicted mean cost per item, fixed before the
        gate starts (e.g. the stored models' per-item medians, averaged). Not the candidate's
        own costs: an allocation that looks at this gate's results other than through the past
        of the tests would not be predictable.

    Returns
    -------
    GateRun
        The rounds of :func:`gate_plan`, :func:`gate_records` and :func:`gate_apply` (what a
        service runs one round per request) until every gate has its outcome.
    """
    cand = [np.atleast_2d(np.asarray(c, dtype=np.float64)) for c in candidates]
    s = cand[0].shape[0]
    base = [np.broadcast_to(np.asarray(b, dtype=np.float64), c.shape)
            for b, c in zip(baselines, cand, strict=True)]  # fmt: skip
    sizes = [c.shape[1] for c in cand]
    if orders is None:
        orders = gate_orders(seed, sizes, s)
    orders = [np.broadcast_to(np.asarray(o, dtype=np.int64), c.shape)
              for o, c in zip(orders, cand, strict=True)]  # fmt: skip
    gs = gate_start([b.mean(axis=1) for b in base], sizes, margins, alpha=alpha, rule=rule,
                    batch_size=batch_size, budget=budget, prediction=prediction,
                    prior_weight=prior_weight, allocation=allocation, costs=costs)  # fmt: skip
    ordered = [OrderedBaseline.build(b, o) for b, o in zip(base, orders, strict=True)]
    tracks = [GridTrack.start(st, np.arange(n + 1) / n) if bounds else None
              for st, n in zip(gs.tests, sizes, strict=True)]  # fmt: skip
    while True:
        counts = gate_plan(gs)
        if not counts.any():
            break
        recs = gate_records(gs, ordered, counts, banks)
        take = [None if r is None else r[2].items for r in recs]
        a = [
            None if t is None else np.take_along_axis(c, t, 1)
            for t, c in zip(take, cand, strict=True)
        ]
        b = [
            None if t is None else np.take_along_axis(x, t, 1)
            for t, x in zip(take, base, strict=True)
        ]
        gate_apply(gs, counts, recs, a, b, tracks if bounds else None)
    codes, _, outcome = gs.status()
    items = np.stack([st.t for st in gs.tests], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.stack([(sn[:, 1] - sn[:, 2]) / sn[:, 0] for sn in gs.seen], axis=1)
    out_bounds = None
    if bounds:
        out_bounds = np.stack(
            [track_bounds(st, tr) - b.mean(axis=1)[:, None]
             for st, tr, b in zip(gs.tests, tracks, base, strict=True)],
            axis=1,
        )  # fmt: skip
    return GateRun(outcome=outcome, codes=codes, items=items, estimate=est, rounds=gs.rounds,
                   bounds=out_bounds)  # fmt: skip


__all__ = [
    "ALLOCATIONS",
    "BENCH_STATES",
    "BETTER",
    "COMBINED",
    "DEFAULT_PREDICTION",
    "DEFAULT_PRIOR_WEIGHT",
    "G_FAIL",
    "G_INCONCLUSIVE",
    "G_OPEN",
    "G_PASS",
    "NONINFERIOR",
    "ON_MARGIN",
    "OPEN",
    "OUTCOMES",
    "PREDICTIONS",
    "REGRESSED",
    "RULES",
    "GateRun",
    "GateState",
    "RoundDraws",
    "allocate",
    "allocation_weights",
    "benchmark_codes",
    "check_costs",
    "design_priors",
    "gate_apply",
    "gate_orders",
    "gate_outcome",
    "gate_plan",
    "gate_records",
    "gate_start",
    "gate_tests",
    "needs_items",
    "prediction_coefficients",
    "progress",
    "refresh_residuals",
    "run_gates",
]
