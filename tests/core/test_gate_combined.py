"""The ``combined`` gate prediction (issue 34 item 3): the baseline's outcome and the candidate's
IRT probability, refitted each round. SYNTHETIC 2PL benchmarks; every check can fail."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.sequential.fluid import ItemBank
from app.core.sequential.gating.combined import combined_predictions
from app.core.sequential.gating.gates import (
    G_FAIL,
    G_PASS,
    GateState,
    gate_apply,
    gate_orders,
    gate_plan,
    gate_records,
    gate_start,
    run_gates,
)
from app.core.sequential.gating.one_sided import OrderedBaseline


def _bank_and_rows(n_items: int, thetas, rng) -> tuple[ItemBank, np.ndarray]:
    """A 1-D 2PL bank and 0/1 rows drawn from it at the given abilities."""
    a = rng.uniform(0.8, 2.5, (n_items, 1))
    offset = rng.normal(0.0, 1.2, n_items)
    bank = ItemBank.from_arrays(a, offset)
    p = bank.probabilities(np.asarray(thetas, dtype=np.float64).reshape(-1, 1))
    return bank, (rng.random(p.shape) < p).astype(np.float64)


def test_prediction_is_one_half_before_any_item_and_learns_which_part_predicts():
    rng = np.random.default_rng(3)
    bank, rows = _bank_and_rows(400, [0.3, 0.3, -1.0], rng)
    order = np.tile(rng.permutation(400), (1, 1))
    ob = OrderedBaseline.build(rows[1][None, :], order)
    a_ord = np.take_along_axis(rows[0][None, :], order, 1)
    f, theta = combined_predictions(bank, order, ob.b, a_ord, np.array([0]))
    np.testing.assert_allclose(f, 0.5)
    np.testing.assert_allclose(theta, 0.0)
    # an unrelated pair (independent draws): after 150 items f follows the IRT probability,
    # which predicts the candidate's unseen items better than the constant
    f, theta = combined_predictions(bank, order, ob.b, a_ord, np.array([150]))
    rest = np.take_along_axis(rows[0][None, :], order, 1)[0, 150:]
    assert abs(theta[0, 0] - 0.3) < 0.4
    assert np.mean((rest - f[0, 150:]) ** 2) < np.mean((rest - rest.mean()) ** 2) - 0.02
    # a sibling (the baseline's outcome with 5 % of items flipped): f follows b
    sib = np.where(rng.random(400) < 0.05, 1 - rows[2], rows[2])
    ob2 = OrderedBaseline.build(rows[2][None, :], order)
    f, _ = combined_predictions(
        bank, order, ob2.b, np.take_along_axis(sib[None, :], order, 1), np.array([150])
    )
    assert np.corrcoef(f[0, 150:], ob2.b[0, 150:])[0, 1] > 0.9


def test_a_combined_gate_resumed_round_by_round_matches_run_gates():
    """A service keeps only the state between rounds (to_dict / from_dict)."""
    rng = np.random.default_rng(12)
    banks, bases, cands = [], [], []
    for n in (250, 400):
        bank, rows = _bank_and_rows(n, [0.2, 0.4], rng)
        banks.append(bank)
        bases.append(rows[1])
        cands.append(rows[0])
    ref = run_gates(cands, bases, [0.03, 0.03], batch_size=20, seed=5,
                    prediction="combined", banks=banks)  # fmt: skip
    orders = gate_orders(5, [b.size for b in bases])
    ordered = [OrderedBaseline.build(b, o) for b, o in zip(bases, orders, strict=True)]
    state = gate_start([[b.mean()] for b in bases], [b.size for b in bases], [0.03, 0.03],
                       batch_size=20, prediction="combined").to_dict()  # fmt: skip
    while True:
        gs = GateState.from_dict(state)
        counts = gate_plan(gs)
        if not counts.any():
            break
        recs = gate_records(gs, ordered, counts, banks)
        items = [None if r is None else r.record.items for r in recs]
        a = [None if it is None else c[it] for it, c in zip(items, cands, strict=True)]
        b = [None if it is None else x[it] for it, x in zip(items, bases, strict=True)]
        gate_apply(gs, counts, recs, a, b)
        state = gs.to_dict()
    codes, _, outcome = GateState.from_dict(state).status()
    assert outcome.tolist() == ref.outcome.tolist() and codes.tolist() == ref.codes.tolist()
    assert [st.t.tolist() for st in gs.tests] == [[int(x)] for x in ref.items[0]]


def test_combined_needs_the_item_banks():
    gs = gate_start([[0.5]], [100], [0.02], prediction="combined")
    with pytest.raises(ValueError, match="item bank"):
        gate_records(gs, [None], gate_plan(gs))


def test_combined_keeps_error_control_and_saves_items_on_unrelated_pairs():
    """200 gates per case on a 600-item benchmark: unrelated pairs of equal ability (truth
    inside the margin: a FAIL is wrong) and candidates exactly one margin below (a PASS is
    wrong); combined needs fewer items than calibrated on the former."""
    rng = np.random.default_rng(2024)
    gates, n, margin = 200, 600, 0.03
    bank, pop = _bank_and_rows(n, np.concatenate([np.full(gates, 0.4), np.full(gates, 0.4)]), rng)
    cand, base = pop[:gates], pop[gates:]
    runs = {p: run_gates([cand], [base], [margin], batch_size=20, seed=9, prediction=p,
                         banks=[bank]) for p in ("calibrated", "combined")}  # fmt: skip
    true_gap = cand.mean(1) - base.mean(1)
    inside = true_gap > -margin
    for p, r in runs.items():
        wrong_fail = np.sum((r.outcome == G_FAIL) & inside)
        assert wrong_fail <= 8, (p, wrong_fail)  # alpha = 0.05 of <= 200: 10 expected at most
    sel = inside
    assert np.median(runs["combined"].items[sel, 0]) < np.median(runs["calibrated"].items[sel, 0])
    # exactly at the margin: the candidate's rows shifted down by ceil(margin N) items
    low = base.copy()
    k = int(np.ceil(margin * n))
    for s in range(gates):
        ones = np.flatnonzero(low[s] == 1)
        low[s, rng.choice(ones, k, replace=False)] = 0.0
    at = run_gates([low], [base], [margin], batch_size=20, seed=9, prediction="combined",
                   banks=[bank])  # fmt: skip
    assert np.sum(at.outcome == G_PASS) <= 0.05 * gates + 6
