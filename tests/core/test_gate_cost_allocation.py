"""Cost-aware allocation of a gate's rounds (issue 37 item 4): shares ``(1 + progress_k) / c_k``
with ``c_k`` each benchmark's predicted mean cost per item, fixed before the gate starts."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.sequential.gating.gates import (
    G_FAIL,
    G_PASS,
    GateState,
    allocate,
    allocation_weights,
    gate_apply,
    gate_orders,
    gate_plan,
    gate_records,
    gate_start,
    run_gates,
)
from app.core.sequential.gating.one_sided import OrderedBaseline
from tests.core.test_gates import _sibling, assert_error_rate

COSTS = np.array([1.0, 3.0, 10.0])


def _suite(seed: int, sizes=(400, 600, 800), ps=(0.3, 0.6, 0.85)):
    rng = np.random.default_rng(seed)
    return rng, [(rng.random(n) < p).astype(float) for n, p in zip(sizes, ps, strict=True)]


def test_weights_are_progress_per_unit_of_cost_and_scale_free():
    prog = np.array([[0.0, 0.5, 1.0]])
    np.testing.assert_allclose(allocation_weights(prog), [[1.0, 1.5, 2.0]])
    w = allocation_weights(prog, "cost", COSTS)
    np.testing.assert_allclose(w, np.array([[1.0, 1.5 / 3, 2.0 / 10]]) * COSTS.mean())
    np.testing.assert_allclose(allocation_weights(prog, "cost", 7 * COSTS), w)  # any unit
    with pytest.raises(ValueError, match="costs"):
        allocation_weights(prog, "cost", None)
    with pytest.raises(ValueError, match="costs"):
        allocation_weights(prog, "cost", [1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="allocation"):
        allocation_weights(prog, "cheap", COSTS)


def test_cost_allocation_favours_the_cheap_benchmarks_and_serves_every_open_one():
    want = np.ones((1, 3), bool)
    remaining = np.full((1, 3), 1000)
    w = allocation_weights(np.zeros((1, 3)), "cost", COSTS)
    got = allocate(w, want, remaining, 10, np.array([1000]), at_least_one=True)
    assert got.sum() == 30 and got[0, 0] > got[0, 1] > got[0, 2] >= 1
    # a 100x benchmark's share is below one item: still one while the quota covers every one
    w = allocation_weights(np.zeros((1, 3)), "cost", [1.0, 1.0, 100.0])
    got = allocate(w, want, remaining, 2, np.array([1000]), at_least_one=True)
    assert got.tolist() == [[3, 2, 1]]
    assert allocate(w, want, remaining, 2, np.array([1000]))[0, 2] == 0  # the plain split
    # a quota below one item each: the plain largest-remainder split
    got = allocate(w, want, remaining, 2, np.array([2]), at_least_one=True)
    assert got.tolist() == [[1, 1, 0]]


def test_progress_allocation_is_unchanged():
    rng, bases = _suite(3)
    cands = [_sibling(b, 0.0, 0.88, 20, rng) for b in bases]
    ref = run_gates(cands, bases, [0.03] * 3, seed=1)
    same = run_gates(cands, bases, [0.03] * 3, seed=1, allocation="progress", costs=COSTS)
    for f in ("outcome", "codes", "items", "rounds"):
        assert np.array_equal(getattr(ref, f), getattr(same, f))
    st = gate_start([[b.mean()] for b in bases], [b.size for b in bases], [0.03] * 3).to_dict()
    assert "allocation" not in st and "costs" not in st  # stored progress gates read as before
    assert GateState.from_dict(st).allocation == "progress"


def test_cost_allocation_spends_fewer_items_of_the_expensive_benchmark_per_round():
    rng, bases = _suite(4)
    kw = {"seed": 2, "batch_size": 20}
    # the cheap benchmark regressed 5 points: the cost split finds it for less
    cands = [_sibling(bases[0], -0.08, 0.88, 40, rng),
             *(_sibling(b, 0.0, 0.88, 40, rng) for b in bases[1:])]  # fmt: skip
    prog = run_gates(cands, bases, [0.03] * 3, **kw)
    cost = run_gates(cands, bases, [0.03] * 3, allocation="cost", costs=COSTS, **kw)
    spent = lambda r: (r.items * COSTS).sum(1)  # noqa: E731
    assert (cost.outcome == G_FAIL).mean() > 0.9 and (prog.outcome == G_FAIL).mean() > 0.9
    assert np.median(spent(cost)) < 0.8 * np.median(spent(prog))
    per_round = lambda r: (r.items[:, 2] / r.rounds).mean()  # noqa: E731
    assert per_round(cost) < per_round(prog)
    # a passing sibling suite: every benchmark must decide, so the split changes little
    fine = [_sibling(b, 0.0, 0.88, 40, rng) for b in bases]
    prog, cost = (run_gates(fine, bases, [0.03] * 3, allocation=al, costs=COSTS, **kw)
                  for al in ("progress", "cost"))  # fmt: skip
    assert (cost.outcome == G_PASS).mean() > 0.9
    assert per_round(cost) < per_round(prog)
    assert abs(np.median(spent(cost)) / np.median(spent(prog)) - 1) < 0.1


@pytest.mark.parametrize("allocation", ["progress", "cost"])
def test_error_control_with_cost_allocation(allocation):
    """As ``test_gates.test_error_control_small_suite`` (300 SYNTHETIC gates per case; can fail:
    rates must stay within what a level-alpha test gives): the allocation is predictable, so
    both errors stay below alpha."""
    rng, bases = _suite(7, (400, 800, 1200))
    margin, gates = 0.03, 300
    kw = {"allocation": allocation, "costs": [10.0, 3.0, 1.0]}  # the regressed one: expensive
    fine = [_sibling(b, 0.0, 0.88, gates, rng) for b in bases]
    run = run_gates(fine, bases, [margin] * 3, seed=1, **kw)
    at_margin = [_sibling(bases[0], -margin, 0.88, gates, rng), *fine[1:]]
    run2 = run_gates(at_margin, bases, [margin] * 3, seed=2, **kw)
    assert_error_rate(run.outcome == G_FAIL)
    assert_error_rate(run2.outcome == G_PASS)
    assert (run.outcome == G_PASS).mean() > 0.9


def test_a_cost_allocated_gate_through_storage_is_the_same_gate():
    rng, bases = _suite(12, (250, 600, 300))
    cands = [_sibling(b, 0.0, 0.9, 1, rng)[0] for b in bases]
    kw = {"batch_size": 20, "allocation": "cost", "costs": COSTS}
    ref = run_gates(cands, bases, [0.03] * 3, seed=5, **kw)
    orders = gate_orders(5, [b.size for b in bases])
    ordered = [OrderedBaseline.build(b, o) for b, o in zip(bases, orders, strict=True)]
    state = gate_start([[b.mean()] for b in bases], [b.size for b in bases], [0.03] * 3,
                       **kw).to_dict()  # fmt: skip
    while True:
        gs = GateState.from_dict(state)
        assert gs.allocation == "cost" and gs.costs.tolist() == COSTS.tolist()
        counts = gate_plan(gs)
        if not counts.any():
            break
        recs = gate_records(gs, ordered, counts)
        items = [None if r is None else r[2].items for r in recs]
        a = [None if it is None else c[it] for it, c in zip(items, cands, strict=True)]
        b = [None if it is None else x[it] for it, x in zip(items, bases, strict=True)]
        gate_apply(gs, counts, recs, a, b)
        state = gs.to_dict()
    codes, _, outcome = GateState.from_dict(state).status()
    assert outcome.tolist() == ref.outcome.tolist() and codes.tolist() == ref.codes.tolist()
    assert np.stack([st.t for st in gs.tests], 1).tolist() == ref.items.tolist()


def test_cost_allocation_needs_costs():
    with pytest.raises(ValueError, match="costs"):
        gate_start([[0.5]] * 2, [10, 10], [0.02] * 2, allocation="cost")
    with pytest.raises(ValueError, match="allocation"):
        gate_start([[0.5]] * 2, [10, 10], [0.02] * 2, allocation="cheap")
