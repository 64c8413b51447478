"""One-sided tests for a mean (app.core.sequential.gating.one_sided): known answers and error control."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.core.sequential.active import record_draws
from app.core.sequential.gating.one_sided import (
    LOWER,
    UPPER,
    OrderedBaseline,
    affine_uniform_record,
    grid_bounds,
    one_sided_init,
    one_sided_update,
    uniform_record,
)


def _all_orders(n: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64)


@pytest.mark.parametrize("use_baseline", [False, True])
def test_capital_at_the_truth_is_a_martingale_exactly(use_baseline):
    """Over all 7! orders, E[K_t] at the true mean is 1 at every t (both sides); off it, not."""
    a = np.array([1, 0, 1, 1, 0, 1, 0], dtype=float)
    b = np.array([1, 0, 0, 1, 0, 1, 1], dtype=float)
    orders = _all_orders(a.size)
    s = orders.shape[0]
    f = np.tile(b if use_baseline else np.zeros_like(b), (s, 1))
    truth = a.mean()
    state = one_sided_init(
        a.size, np.tile([truth, truth, truth - 0.2], (s, 1)), [LOWER, UPPER, LOWER], 0.05
    )
    for t in range(a.size):
        rec, live = uniform_record(f, orders, state.t, 1)
        assert live.all()
        one_sided_update(state, rec, a[rec.items], inplace=True)
        mean_capital = np.exp(state.log_capital).mean(axis=0)
        np.testing.assert_allclose(mean_capital[:2], 1.0, atol=1e-10)
        if t >= 1:  # a target below the truth: the lower test's capital grows in expectation
            assert mean_capital[2] > 1.01


def test_type_one_error_of_each_side_is_at_most_alpha():
    """20,000 random orders of a 200-item population, target = the true mean (can fail)."""
    rng = np.random.default_rng(3)
    a = (rng.random(200) < 0.55).astype(float)
    truth = a.mean()
    s, alpha = 5_000, 0.1
    orders = rng.permuted(np.tile(np.arange(a.size), (s, 1)), axis=1)
    state = one_sided_init(a.size, np.tile([truth, truth], (s, 1)), [LOWER, UPPER], alpha)
    f = np.zeros((s, a.size))
    while state.t[0] < a.size - 1:  # the last item decides by the range, at the truth never
        rec, _ = uniform_record(f, orders, state.t, 20)
        one_sided_update(state, rec, a[rec.items], inplace=True)
    rate = (state.hit > 0).mean(axis=0)
    assert np.all(rate <= alpha)
    assert np.all(rate > 0.005)  # and the test has power to reject at all


def test_exhaustion_decides_by_the_exact_mean():
    a = np.array([1, 1, 0, 1, 0, 0, 1, 1, 0, 1], dtype=float)  # mean 0.6
    order = np.arange(10)[None, :]
    state = one_sided_init(10, [[0.6, 0.6, 0.5, 0.7]], [LOWER, UPPER, LOWER, UPPER], 0.05)
    rec, _ = uniform_record(np.zeros((1, 10)), order, [0], 10)
    one_sided_update(state, rec, a[None, rec.items[0]], inplace=True)
    hit = state.hit[0]
    assert hit[0] == 0 and hit[1] == 0  # exactly on the target: neither side
    assert hit[2] > 0 and hit[3] > 0  # 0.6 > 0.5 and 0.6 < 0.7


def test_uniform_records_match_the_general_draw_record():
    rng = np.random.default_rng(0)
    s, n = 4, 30
    b = (rng.random((s, n)) < 0.5).astype(float)
    f0, f1 = rng.random(s), rng.random(s)
    f = f0[:, None] + (f1 - f0)[:, None] * b
    orders = rng.permuted(np.tile(np.arange(n), (s, 1)), axis=1)
    start = np.array([0, 3, 11, 24])
    general, live = uniform_record(f, orders, start, 6)
    fast, live2 = affine_uniform_record(OrderedBaseline.build(b, orders), f0, f1, start, 6)
    assert live.all() and live2.all()
    for row in range(s):
        avail = np.ones((1, n), dtype=bool)
        avail[0, orders[row, : start[row]]] = False
        ref = record_draws(f[row : row + 1], None, avail, general.items[row : row + 1], gamma=1.0)
        for name in ("items", "prob", "remaining", "prediction", "mean_prediction", "low", "high"):
            np.testing.assert_allclose(
                getattr(general, name)[row], getattr(ref, name)[0], atol=1e-12
            )
            np.testing.assert_allclose(getattr(fast, name)[row], getattr(ref, name)[0], atol=1e-12)


def test_padding_changes_nothing_and_rows_end_at_their_size():
    rng = np.random.default_rng(1)
    a = (rng.random((2, 12)) < 0.5).astype(float)
    orders = np.tile(np.arange(12), (2, 1))
    f = np.zeros((2, 12))
    st = one_sided_init(12, np.full((2, 1), 0.3), [LOWER], 0.05)
    rec, _ = uniform_record(f, orders, [0, 0], 10)
    first = np.array([[True] * 10, [False] * 10])
    one_sided_update(st, rec, np.take_along_axis(a, rec.items, 1), live=first, inplace=True)
    assert st.t.tolist() == [10, 0]
    rec, live = uniform_record(f, orders, st.t, 4)
    assert live.tolist() == [[True, True, False, False], [True] * 4]
    out = one_sided_update(st, rec, np.take_along_axis(a, rec.items, 1), live=live)
    assert out.t.tolist() == [12, 4]
    with pytest.raises(ValueError, match="live"):
        one_sided_update(st, rec, np.zeros((2, 4)), live=np.array([[False, True, True, True]] * 2))


def test_grid_bound_crosses_the_target_exactly_when_the_test_rejects():
    rng = np.random.default_rng(5)
    n, s = 300, 40
    a = (rng.random(n) < 0.7).astype(float)
    orders = rng.permuted(np.tile(np.arange(n), (s, 1)), axis=1)
    targets = np.tile([0.62, 0.78], (s, 1))
    st0 = one_sided_init(n, targets, [LOWER, UPPER], 0.05)
    grid = np.arange(n + 1) / n
    for t in (40, 120, n):
        rec, _ = uniform_record(np.zeros((s, n)), orders, np.zeros(s, int), t)
        bound, st = grid_bounds(st0, rec, a[rec.items], grid)
        rejected = st.hit > 0
        assert np.array_equal(bound[:, 0] > targets[:, 0] + 1e-12, rejected[:, 0])
        assert np.array_equal(bound[:, 1] < targets[:, 1] - 1e-12, rejected[:, 1])
        assert np.all(bound[:, 0] <= a.mean() + 1e-12) or t < n  # a lower bound, exact at N
        if t == n:
            np.testing.assert_allclose(bound, a.mean())
