"""Cost-aware designs, budgets and per-item cost summaries (app.core.sequential.cost)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.core.sequential.active import (
    ACTIVE_BETS,
    acs_init,
    acs_update,
    design_probabilities,
    neyman_scores,
    record_draws,
)
from app.core.sequential.confidence_sequences import combined_log_capital
from app.core.sequential.cost import (
    budget_open,
    cost_design_probabilities,
    cost_scores,
    expected_draw_cost,
    item_cost_summary,
    model_cost_scale,
    predicted_subset_cost,
    random_subset_cost,
    worst_batch_cost,
)
from app.core.sequential.cost_simulation import simulate_cost_policy
from app.core.sequential.policies import policy_draw, policy_init
from app.core.sequential.simulation import simulate_policy

POP = np.array([0.0, 1.0, 0.25, 1.0, 0.6])
FEATURE = np.array([0.9, 0.1, 0.5, 0.7, 0.3])
COST = np.array([1.0, 10.0, 3.0, 0.5, 6.0])  # 20x spread, dearest item the one most often right


def test_cost_scores_and_design_known_answers():
    avail = np.array([[True, True, False, True, True]])
    s = cost_scores(None, COST, avail)
    np.testing.assert_allclose(s, [[1.0, 10**-0.5, 0.0, 0.5**-0.5, 6**-0.5]])
    ney = np.array([[0.2, 0.4, 0.5, 0.1, 0.3]])
    np.testing.assert_allclose(cost_scores(ney, COST, avail), np.where(avail, ney / COST**0.5, 0))
    pi = cost_design_probabilities(ney, COST, avail, gamma=0.3)
    w = np.where(avail, ney / np.sqrt(COST), 0.0)
    np.testing.assert_allclose(pi, 0.7 * w / w.sum() + 0.3 * avail / 4, atol=1e-15)
    assert pi.sum() == pytest.approx(1.0) and pi[0, 2] == 0
    # gamma = 1 stays uniform whatever the costs; equal costs give the cost-free design
    np.testing.assert_allclose(cost_design_probabilities(ney, COST, avail, 1.0), avail / 4)
    np.testing.assert_allclose(
        cost_design_probabilities(ney, np.full(5, 7.0), avail, 0.3),
        design_probabilities(ney, avail, 0.3),
    )
    # the expected cost of a draw falls below the uniform design's
    assert expected_draw_cost(pi, COST)[0] < expected_draw_cost(avail / 4, COST)[0]
    assert expected_draw_cost(avail / 4, COST)[0] == pytest.approx((1 + 10 + 0.5 + 6) / 4)


def test_cost_inputs_are_checked():
    avail = np.ones((1, 5), dtype=bool)
    for bad in ([1, 2, 0, 1, 1], [1, 2, np.nan, 1, 1], [1, 2, -1, 1, 1], [1, 2, 3]):
        with pytest.raises(ValueError, match="costs"):
            cost_scores(None, bad, avail)
    with pytest.raises(ValueError, match="k"):
        worst_batch_cost(COST, avail, 0)
    with pytest.raises(ValueError, match="costs"):
        item_cost_summary([[1.0, -2.0]])


def _cost_prediction(avail, past_mean):
    return np.clip(0.2 + 0.6 * FEATURE[None, :] + 0.1 * past_mean[:, None], 0, 1)


def _all_orders(bet: str, kind: str, batch: int, gamma: float, c: float):
    """Every order of POP, its probability under the cost-aware design, K_t(A) after each draw,
    and the cost spent after each draw."""
    n = POP.size
    perms = np.array(list(itertools.permutations(range(n))))
    s = perms.shape[0]
    st = acs_init(n, sessions=s, grid=np.array([0.0, POP.mean(), 1.0]), binary=False, bet=bet, c=c)
    avail = np.ones((s, n), dtype=bool)
    rows = np.arange(s)[:, None]
    log_p, caps, t = np.zeros(s), [], 0
    while t < n:
        k = min(batch, n - t)
        past = np.where(~avail, POP[None, :], 0.0).sum(1) / max(t, 1)
        f = _cost_prediction(avail, past)
        base = neyman_scores(f) if kind == "neyman" else None
        scores = cost_scores(base, COST, avail)
        rec = record_draws(f, scores, avail, perms[:, t : t + k], gamma=gamma)
        log_p += np.log(rec.prob).sum(axis=1)
        avail[rows, perms[:, t : t + k]] = False
        for q in range(k):
            one = rec.take((slice(None), slice(q, q + 1)))
            acs_update(st, one, POP[perms[:, t + q]][:, None], inplace=True)
            caps.append(np.exp(combined_log_capital(st)[:, 1]))
        t += k
    spent = np.cumsum(COST[perms], axis=1).T  # (n, s): cost after each draw
    return np.exp(log_p), np.array(caps), spent


@pytest.mark.parametrize("bet", ACTIVE_BETS)
@pytest.mark.parametrize(("kind", "gamma"), [("uniform", 0.3), ("neyman", 0.3), ("neyman", 0.1)])
def test_cost_aware_capital_is_exact_martingale_and_budget_stops_are_fair(bet, kind, gamma):
    c = 0.9 if bet == "agrapa-cv" else 0.5
    prob, caps, spent = _all_orders(bet, kind, 2, gamma, c)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    # the design really is non-uniform: orders have different probabilities
    assert prob.max() / prob.min() > 1.5
    np.testing.assert_allclose(caps @ prob, 1.0, atol=1e-12)
    assert np.sqrt(((caps[1] - 1) ** 2) @ prob) > 0.01
    # a budget read at batch ends (after draws 2, 4, 5) is a stopping time: E[K_tau] = 1
    ends = np.array([1, 3, 4])
    for max_cost in (4.0, 8.0, 12.0, 15.0):
        over = spent[ends] >= max_cost
        tau = ends[np.where(over.any(0), over.argmax(0), len(ends) - 1)]
        k_tau = caps[tau, np.arange(prob.size)]
        assert float(k_tau @ prob) == pytest.approx(1.0, abs=1e-12)
        assert np.all(spent[tau, np.arange(prob.size)] - max_cost <= 10.0 + 6.0)  # <= one batch


def test_a_stop_that_peeks_at_the_next_draw_is_caught():
    # the check can fail: stopping when the *next* capital would fall is not a stopping time
    prob, caps, _ = _all_orders("agrapa", "neyman", 1, 0.3, 0.5)
    falls = caps[1:] < caps[:-1]
    tau = np.where(falls.any(0), falls.argmax(0), caps.shape[0] - 1)
    assert float(caps[tau, np.arange(prob.size)] @ prob) > 1.0 + 1e-3


def test_worst_batch_cost_and_budget():
    avail = np.array([[True, False, True, True, True], [True] * 5])
    np.testing.assert_allclose(worst_batch_cost(COST, avail, 2), [6 + 3, 10 + 6])
    np.testing.assert_allclose(worst_batch_cost(COST, avail, 9), [10.5, 20.5])
    np.testing.assert_array_equal(budget_open([1.0, 5.0, 7.0], 5.0), [True, False, False])
    assert budget_open([1e9], None).all()


def test_uniform_policies_ignore_costs_and_the_default_is_unchanged():
    rng = np.random.default_rng(3)
    st = policy_init("random", 30, sessions=4)
    u = rng.random((4, 5))
    a = policy_draw(st, None, 5, u)
    b = policy_draw(st, None, 5, u, costs=np.linspace(1, 10, 30))  # gamma 1: uniform
    np.testing.assert_array_equal(a.items, b.items)
    np.testing.assert_array_equal(a.prob, b.prob)


def _synthetic(n_sessions, n_items, gap, seed):
    """SYNTHETIC candidates of known full mean ``b + gap`` and dearer items harder."""
    gen = np.random.default_rng(seed)
    difficulty = np.sort(gen.standard_normal(n_items))
    p = 1 / (1 + np.exp(difficulty - 0.3))
    y = (gen.random((n_sessions, n_items)) < p).astype(float)
    cost = np.exp(0.7 * difficulty)  # about 10x from the 5th to the 95th percentile
    base = y.mean(1) - gap
    return y, base, cost


def test_without_costs_matches_the_session_simulator():
    y, base, cost = _synthetic(40, 120, 0.1, 1)
    ref = simulate_policy("random", y, base, alpha=0.05, batch_size=10, rng=5)
    run = simulate_cost_policy("random", y, base, cost, alpha=0.05, batch_size=10, rng=5)
    np.testing.assert_array_equal(run.items, ref[0])
    np.testing.assert_allclose(run.lower, ref[1])
    np.testing.assert_allclose(run.upper, ref[2])


def test_max_cost_overshoots_by_at_most_one_batch_and_stops_undecided():
    y, base, cost = _synthetic(200, 150, 0.02, 2)
    measured = cost[None, :] * np.exp(0.3 * np.random.default_rng(0).standard_normal(y.shape))
    budget = 0.2 * cost.sum()
    run = simulate_cost_policy(
        "random",
        y,
        base,
        measured,
        design_costs=cost,
        gamma=0.3,
        max_cost=budget,
        batch_size=10,
        rng=9,
    )
    assert run.budget_stopped.sum() > 100  # most close pairs run out of budget
    assert np.all(run.spent <= budget + run.worst_overshoot + 1e-9)
    assert np.all(run.spent[run.budget_stopped] >= budget)
    assert np.all(run.decision[run.budget_stopped] == 0)
    # with unit costs the spending is the item count, and a budget of 25 stops after 30 items
    unit = simulate_cost_policy(
        "random", y, base, np.ones_like(y), max_cost=25, batch_size=10, rng=9
    )
    np.testing.assert_array_equal(unit.spent, unit.items)
    assert unit.items.max() == 30 and np.all(unit.spent[unit.budget_stopped] == 30)


def test_cost_aware_sessions_keep_the_error_rate_on_ties():
    # SYNTHETIC exactly tied pairs: any decision is wrong; the rate must stay <= alpha
    y, _, cost = _synthetic(300, 100, 0.0, 4)
    base = y.mean(1)
    run = simulate_cost_policy(
        "random", y, base, cost, design_costs=cost, gamma=0.3, alpha=0.1, batch_size=5, rng=11
    )
    wrong = int((run.decision != 0).sum())
    assert wrong <= 45  # binomial(300, 0.1): P(X > 45) < 0.003
    assert np.all(run.ever_missed.mean() <= 0.15)


def test_item_cost_summary_and_model_scale():
    c = np.array([[1.0, 10.0, np.nan], [3.0, 20.0, np.nan], [2.0, np.nan, np.nan]])
    s = item_cost_summary(c)
    np.testing.assert_allclose(s.median[:2], [2.0, 15.0])
    assert np.isnan(s.median[2]) and s.models.tolist() == [3, 2, 0]
    np.testing.assert_allclose(s.lower[:2], [1.5, 12.5])
    np.testing.assert_allclose(s.filled(), [2.0, 15.0, 8.5])
    assert model_cost_scale([4.0, 30.0, np.nan], s) == pytest.approx(17.0 / 8.5)
    assert model_cost_scale([np.nan] * 3, s) == 1.0


def test_predicted_subset_cost():
    c = np.array([[1.0, 2.0, 4.0], [3.0, 2.0, 8.0]])
    mean, sd = predicted_subset_cost(c, [0, 2])
    np.testing.assert_allclose(mean, [8.0])  # totals 5 and 11
    np.testing.assert_allclose(sd, [np.std([5.0, 11.0], ddof=1)])
    mean, sd = predicted_subset_cost(c, np.array([[True, True, False], [False, False, True]]))
    np.testing.assert_allclose(mean, [4.0, 6.0])
    mean, sd = predicted_subset_cost(c[0], [1])
    assert mean[0] == 2.0 and sd[0] == 0.0


def test_random_subset_cost_matches_brute_force():
    c = np.array([1.0, 2.0, 4.0, 8.0, 3.0])
    for n in range(6):
        totals = [sum(c[list(s)]) for s in itertools.combinations(range(5), n)]
        mean, sd = random_subset_cost(c, n)
        assert mean == pytest.approx(np.mean(totals))
        assert sd == pytest.approx(np.std(totals), abs=1e-12)
    with pytest.raises(ValueError, match="size"):
        random_subset_cost(c, 6)
