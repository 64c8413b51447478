"""Release gates (app.core.sequential.gating.gates): decision rules, allocation, error control."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from app.core.sequential.gating.gates import (
    BETTER,
    G_FAIL,
    G_INCONCLUSIVE,
    G_OPEN,
    G_PASS,
    NONINFERIOR,
    ON_MARGIN,
    OPEN,
    REGRESSED,
    GateState,
    allocate,
    gate_apply,
    gate_orders,
    gate_outcome,
    gate_plan,
    gate_records,
    gate_start,
    gate_tests,
    needs_items,
    prediction_coefficients,
    refresh_residuals,
    run_gates,
)
from app.core.sequential.gating.one_sided import LOWER, UPPER, OrderedBaseline, one_sided_init

RULE1 = "no_regression_and_one_better"


def assert_error_rate(wrong, alpha: float = 0.05, *, odds: float = 1e-3) -> None:
    """Fail when more decisions are wrong than a level-``alpha`` test gives once in 1/``odds``
    runs (one-sided binomial tail). A plain ``rate <= alpha`` fails a correct test about half the
    time when its true rate sits at ``alpha`` (a candidate exactly on its margin); an engine
    without the correction for K (15 % wrong, issue 34) still fails this at 300 gates."""
    wrong = np.asarray(wrong, dtype=bool)
    k, n = int(wrong.sum()), wrong.size
    assert binom.sf(k - 1, n, alpha) >= odds, f"{k} of {n} wrong at level {alpha}"


def test_levels_follow_the_intersection_union_and_union_bounds():
    target, side, alpha = gate_tests([0.6], 0.02, alpha=0.05, n_benchmarks=4, rule="no_regression")
    np.testing.assert_allclose(target, [[0.58, 0.58]])
    assert side.tolist() == [LOWER, UPPER]
    np.testing.assert_allclose(alpha, [0.05, 0.0125])  # PASS side uncorrected, FAIL side / K
    target, side, alpha = gate_tests(
        [0.6], 0.02, alpha=0.05, n_benchmarks=4, rule="no_regression_and_one_better"
    )
    np.testing.assert_allclose(target, [[0.58, 0.58, 0.6]])
    np.testing.assert_allclose(alpha, [0.05, 0.0125, 0.0125])
    with pytest.raises(ValueError, match="margin"):
        gate_tests([0.6], 1.0, alpha=0.05, n_benchmarks=1, rule="no_regression")
    with pytest.raises(ValueError, match="rule"):
        gate_tests([0.6], 0.0, alpha=0.05, n_benchmarks=1, rule="both")


def test_outcome_table():
    rule = "no_regression"
    codes = np.array(
        [
            [NONINFERIOR, NONINFERIOR],
            [NONINFERIOR, REGRESSED],
            [NONINFERIOR, OPEN],
            [NONINFERIOR, OPEN],
            [ON_MARGIN, NONINFERIOR],
        ]
    )
    exhausted = np.zeros(codes.shape, bool)
    exhausted[4, 0] = True
    out = gate_outcome(codes, exhausted, np.array([5, 5, 5, 0, 5]), rule)
    assert out.tolist() == [G_PASS, G_FAIL, G_OPEN, G_INCONCLUSIVE, G_FAIL]
    one = "no_regression_and_one_better"
    codes = np.array([[NONINFERIOR, BETTER], [NONINFERIOR, NONINFERIOR], [NONINFERIOR] * 2])
    ex = np.array([[False, False], [False, True], [True, True]])
    assert gate_outcome(codes, ex, np.array([9, 9, 9]), one).tolist() == [G_PASS, G_OPEN, G_FAIL]
    # without a better benchmark, non-inferior ones keep receiving items (not exhausted ones)
    assert needs_items(codes, ex, one).tolist() == [[False, False], [True, False], [False, False]]


def test_allocation_splits_the_quota_by_largest_remainder():
    w = np.array([[1.0, 2.0, 1.0], [1.0, 1.0, 1.0], [1.0, 2.0, 1.0]])
    want = np.array([[True, True, True], [True, False, True], [True, True, False]])
    remaining = np.array([[100, 100, 100], [100, 100, 3], [100, 100, 100]])
    got = allocate(w, want, remaining, 10, np.array([1000, 1000, 7]))
    assert got.tolist() == [[8, 15, 7], [10, 0, 3], [2, 5, 0]]
    # decided benchmarks get nothing; the quota is at most the budget
    assert got[1, 1] == 0 and got[2].sum() == 7


def test_calibrated_prediction_is_the_shrunk_group_mean_for_binary_results():
    rng = np.random.default_rng(0)
    a = (rng.random(80) < 0.7).astype(float)
    b = (rng.random(80) < 0.5).astype(float)
    seen = np.array([[a.size, a.sum(), b.sum(), (a * b).sum(), (b * b).sum(), (a * a).sum()]])
    f0, f1 = prediction_coefficients("calibrated", seen)
    np.testing.assert_allclose(f0, (a[b == 0].sum() + 0.25) / ((b == 0).sum() + 1))
    np.testing.assert_allclose(f1, (a[b == 1].sum() + 0.75) / ((b == 1).sum() + 1))
    empty = prediction_coefficients("calibrated", np.zeros((1, 6)))  # halfway: 1/2 and b
    np.testing.assert_allclose(np.concatenate(empty), [0.25, 0.75])
    assert prediction_coefficients("paired", seen)[1].tolist() == [1.0]
    st = one_sided_init(100, [[0.5]], [LOWER], 0.05)
    refresh_residuals(st, seen, f0, f1)
    r = a - (f0 + (f1 - f0) * b)
    np.testing.assert_allclose(st.resid, r.sum())
    np.testing.assert_allclose(st.sq, ((r - r.mean()) ** 2).sum())


def _sibling(b, delta, agree, gates, rng):
    """SYNTHETIC candidates: ``b`` with flipped items, exact gap ``delta`` (in items / N)."""
    n = b.size
    dis = round((1 - agree) * n)
    net = round(delta * n)
    up, down = (dis + net) // 2, dis - (dis + net) // 2
    ones, zeros = np.flatnonzero(b == 1), np.flatnonzero(b == 0)
    out = np.tile(b, (gates, 1))
    rows = np.arange(gates)[:, None]
    out[rows, ones[np.argsort(rng.random((gates, ones.size)), 1)[:, :down]]] = 0
    out[rows, zeros[np.argsort(rng.random((gates, zeros.size)), 1)[:, :up]]] = 1
    return out


def test_whole_suite_budget_gives_the_exact_answer():
    rng = np.random.default_rng(2)
    b1 = (rng.random(200) < 0.6).astype(float)
    b2 = (rng.random(300) < 0.4).astype(float)
    a1 = _sibling(b1, -0.05, 0.8, 1, rng)  # exactly on a 5-point margin
    a2 = _sibling(b2, 0.0, 0.9, 1, rng)
    run = run_gates([a1, a2], [b1, b2], [0.05, 0.05], batch_size=25, seed=4)
    np.testing.assert_allclose(run.estimate[0, 0], -0.05)
    assert run.outcome[0] == G_FAIL
    # ON_MARGIN only at exhaustion; the sibling inside its margin is non-inferior
    if run.codes[0, 0] == ON_MARGIN:
        assert run.items[0, 0] == 200
    assert run.codes[0, 1] == NONINFERIOR


def test_error_control_small_suite():
    """300 gates per case on a SYNTHETIC 3-benchmark suite (can fail: wrong decisions must stay
    within what a level-alpha test gives, :func:`assert_error_rate`)."""
    rng = np.random.default_rng(7)
    sizes, margin, gates = (400, 800, 1200), 0.03, 300
    bases = [
        (rng.random(n) < p).astype(float) for n, p in zip(sizes, (0.3, 0.6, 0.85), strict=True)
    ]
    fine = [_sibling(b, 0.0, 0.88, gates, rng) for b in bases]
    run = run_gates(fine, bases, [margin] * 3, seed=1)
    at_margin = [_sibling(bases[0], -margin, 0.88, gates, rng), *fine[1:]]
    run2 = run_gates(at_margin, bases, [margin] * 3, seed=2)
    assert_error_rate(run.outcome == G_FAIL)
    assert_error_rate(run2.outcome == G_PASS)
    assert (run.outcome == G_PASS).mean() > 0.9  # and the gate does pass the fine siblings
    assert np.median(run.items.sum(1)) < sum(sizes)


def test_reported_bounds_agree_with_the_decisions():
    rng = np.random.default_rng(9)
    bases = [(rng.random(n) < p).astype(float) for n, p in ((300, 0.5), (500, 0.7))]
    cands = [_sibling(bases[0], 0.0, 0.9, 6, rng), _sibling(bases[1], -0.06, 0.85, 6, rng)]
    margins = [0.03, 0.03]
    fast = run_gates(cands, bases, margins, seed=3)
    run = run_gates(cands, bases, margins, seed=3, bounds=True)
    assert np.array_equal(fast.codes, run.codes) and np.array_equal(fast.items, run.items)
    lower, upper = run.bounds[..., 0], run.bounds[..., 1]
    decided_ok = np.isin(run.codes, (NONINFERIOR, BETTER))
    assert np.array_equal(lower > -0.03 + 1e-12, decided_ok)
    assert np.array_equal(upper < -0.03 - 1e-12, run.codes == REGRESSED)
    assert np.all(lower <= upper + 1e-12)


def test_one_round_at_a_time_through_storage_is_the_same_gate():
    """A service runs a round per request from a stored state: same outcome, items and rounds."""
    rng = np.random.default_rng(12)
    bases = [(rng.random(n) < p).astype(float) for n, p in ((250, 0.4), (600, 0.75))]
    cands = [_sibling(bases[0], 0.0, 0.9, 1, rng)[0], _sibling(bases[1], -0.01, 0.9, 1, rng)[0]]
    ref = run_gates(cands, bases, [0.03, 0.03], batch_size=20, seed=5, rule=RULE1)
    orders = gate_orders(5, [b.size for b in bases])
    ordered = [OrderedBaseline.build(b, o) for b, o in zip(bases, orders, strict=True)]
    state = gate_start([[b.mean()] for b in bases], [b.size for b in bases], [0.03, 0.03],
                       batch_size=20, rule=RULE1).to_dict()  # fmt: skip
    served = [set(), set()]
    while True:
        gs = GateState.from_dict(state)
        counts = gate_plan(gs)
        if not counts.any():
            break
        recs = gate_records(gs, ordered, counts)
        items = [None if r is None else r[2].items for r in recs]
        for j, (r, it) in enumerate(zip(recs, items, strict=True)):
            if r is not None:
                new = set(it[r[3]].tolist())
                assert not new & served[j]  # never an item twice
                served[j] |= new
        a = [None if it is None else c[it] for it, c in zip(items, cands, strict=True)]
        b = [None if it is None else x[it] for it, x in zip(items, bases, strict=True)]
        gate_apply(gs, counts, recs, a, b)
        state = gs.to_dict()
    codes, _, outcome = GateState.from_dict(state).status()
    assert outcome.tolist() == ref.outcome.tolist() and codes.tolist() == ref.codes.tolist()
    assert [len(x) for x in served] == ref.items[0].tolist()
    assert gs.rounds.tolist() == ref.rounds.tolist()


def test_design_prior_moves_each_target_towards_its_rejection_side():
    from app.core.sequential.gating.gates import design_priors

    target, side, _ = gate_tests([0.6], 0.02, alpha=0.05, n_benchmarks=1, rule=RULE1)
    prior = design_priors(target, side, 0.02)
    # non-inferiority at B - delta: planned for B; regression: one margin beyond; better: B + g
    np.testing.assert_allclose(prior[0], target[0] + 0.02 * side)
    # P = 3 with this rule: non-inferior (lower, B - delta), regressed (upper), better (lower, B)
    assert side.tolist() == [LOWER, UPPER, LOWER]
    np.testing.assert_allclose(prior[0], [0.6, 0.56, 0.62])
    assert design_priors([[0.995]], np.array([LOWER]), 0.0)[0, 0] == 1.0  # clipped; g >= 0.01
    assert design_priors([[0.004]], np.array([UPPER]), 0.0)[0, 0] == 0.0


def test_states_written_without_a_design_prior_still_read():
    """Sessions' stored one-sided states (and gates stored before priors) have no prior keys."""
    plain = one_sided_init(50, np.array([[0.5]]), np.array([LOWER]), np.array([[0.05]]))
    d = plain.to_dict()
    assert "prior_mean" not in d and "prior_weight" not in d
    back = type(plain).from_dict(d)
    assert back.prior_mean is None and back.prior_weight == 0.0
    gs = gate_start([[0.6]], [80], [0.02], rule=RULE1)
    again = GateState.from_dict(gs.to_dict())
    np.testing.assert_array_equal(again.tests[0].prior_mean, gs.tests[0].prior_mean)
    assert again.tests[0].prior_weight == gs.tests[0].prior_weight > 0


def test_design_prior_keeps_error_control_and_spares_items_on_siblings():
    """SYNTHETIC 2-benchmark suite, 300 gates per case (can fail both ways)."""
    rng = np.random.default_rng(21)
    bases = [(rng.random(n) < p).astype(float) for n, p in ((600, 0.45), (900, 0.7))]
    margin = 0.02
    fine = [_sibling(b, 0.0, 0.9, 300, rng) for b in bases]
    at_margin = [_sibling(bases[0], -margin, 0.9, 300, rng), fine[1]]
    with_prior = run_gates(fine, bases, [margin] * 2, seed=3)
    plain = run_gates(fine, bases, [margin] * 2, seed=3, prior_weight=0.0)
    wrong = run_gates(at_margin, bases, [margin] * 2, seed=4)
    assert (wrong.outcome == G_PASS).mean() <= 0.05
    assert (with_prior.outcome == G_FAIL).mean() <= 0.05
    assert with_prior.items.sum(1).mean() < plain.items.sum(1).mean()


def test_design_prior_lets_the_data_overrule_it_for_a_candidate_better_than_planned():
    """SYNTHETIC: a candidate 8 points better than its baseline. Once its data lie 1.5 standard
    errors beyond the planned alternative the bet plays them, so the prior costs little; a
    prior that never yields (release at infinity) costs far more here."""
    from app.core.sequential.gating import one_sided

    rng = np.random.default_rng(22)
    base = (rng.random(800) < 0.5).astype(float)
    better = _sibling(base, 0.08, 0.7, 300, rng)
    with_prior = run_gates([better], [base], [0.02], batch_size=10, seed=5)
    plain = run_gates([better], [base], [0.02], batch_size=10, seed=5, prior_weight=0.0)
    z = one_sided.PRIOR_RELEASE_Z
    try:
        one_sided.PRIOR_RELEASE_Z = np.inf
        stubborn = run_gates([better], [base], [0.02], batch_size=10, seed=5)
    finally:
        one_sided.PRIOR_RELEASE_Z = z
    assert (with_prior.outcome == G_PASS).all() and (plain.outcome == G_PASS).all()
    assert with_prior.items.mean() <= 1.3 * plain.items.mean()
    assert stubborn.items.mean() > 1.25 * with_prior.items.mean()
