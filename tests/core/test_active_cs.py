"""§7 confidence sequences with predictions and active draws (app.core.sequential.active)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import app.core.sequential.active as active
from app.core.sequential.active import (
    ACTIVE_BETS,
    CV_BET,
    ActiveCSState,
    DrawRecord,
    acs_init,
    acs_interval,
    acs_update,
    design_probabilities,
    difference_from_known,
    draw_batch,
    increments,
    neyman_scores,
    record_draws,
)
from app.core.sequential.confidence_sequences import combined_log_capital, confidence_sequence

POP = np.array([0.0, 1.0, 0.25, 1.0, 0.6])
FEATURE = np.array([0.9, 0.1, 0.5, 0.7, 0.3])


def _prediction(kind: str, avail: np.ndarray, past_mean: np.ndarray) -> np.ndarray:
    """A predictable prediction f(i): a function of the item and of the outcomes seen so far."""
    s, n = avail.shape
    if kind == "zero":
        return np.zeros((s, n))
    if kind == "feature":
        return np.clip(0.2 + 0.6 * FEATURE[None, :] + 0.1 * past_mean[:, None], 0, 1)
    if kind == "regression":  # least squares of the seen outcomes on FEATURE, refitted per batch
        seen = ~avail
        x, y = FEATURE[None, :], np.where(seen, POP[None, :], 0.0)
        m = np.maximum(seen.sum(1), 1)
        xm, ym = (seen * x).sum(1) / m, y.sum(1) / m
        cov = (seen * (x - xm[:, None]) * (y - ym[:, None])).sum(1)
        var = (seen * (x - xm[:, None]) ** 2).sum(1)
        slope = np.divide(cov, var, out=np.zeros(s), where=var > 1e-12)
        return np.clip(ym[:, None] + slope[:, None] * (x - xm[:, None]), 0.0, 1.0)
    # deliberately bad: predicts the opposite of what has been seen
    return np.broadcast_to(1.0 - past_mean[:, None], (s, n)).copy()


def _scores(kind: str, f: np.ndarray, past_mean: np.ndarray):
    if kind == "uniform":
        return None
    if kind == "neyman":
        return neyman_scores(f)
    # an arbitrary predictable allocation that depends on the past outcomes
    return FEATURE[None, :] ** 2 + past_mean[:, None] * np.arange(FEATURE.size)


def _all_orders_capital(fkind: str, skind: str, bet: str, batch: int, gamma: float, c: float = 0.5):
    """Probability of every order of POP under the design, and K_t(A) along it."""
    n = POP.size
    perms = np.array(list(itertools.permutations(range(n))))
    s = perms.shape[0]
    grid = np.array([0.0, POP.mean(), 1.0])
    st = acs_init(n, sessions=s, grid=grid, binary=False, bet=bet, c=c)
    avail = np.ones((s, n), dtype=bool)
    rows = np.arange(s)[:, None]
    log_p = np.zeros(s)
    caps = []
    t = 0
    while t < n:  # batches: f and the scores are fixed within a batch, pi is recomputed per draw
        k = min(batch, n - t)
        past = np.where(~avail, POP[None, :], 0.0).sum(1) / max(t, 1)
        f = _prediction(fkind, avail, past)
        rec = record_draws(f, _scores(skind, f, past), avail, perms[:, t : t + k], gamma=gamma)
        log_p += np.log(rec.prob).sum(axis=1)
        avail[rows, perms[:, t : t + k]] = False
        for q in range(k):  # read the capital after every draw
            acs_update(
                st,
                rec.take((slice(None), slice(q, q + 1))),
                POP[perms[:, t + q]][:, None],
                inplace=True,
            )
            caps.append(np.exp(combined_log_capital(st)[:, 1]))
        t += k
    return np.exp(log_p), np.array(caps)


@pytest.mark.parametrize("bet", ACTIVE_BETS)
@pytest.mark.parametrize(
    ("fkind", "skind", "gamma"),
    [
        ("zero", "uniform", 1.0),
        ("zero", "neyman", 0.3),
        ("feature", "uniform", 1.0),
        ("feature", "neyman", 0.3),
        ("feature", "past", 0.1),
        ("flip", "past", 0.5),
        ("regression", "uniform", 1.0),
        ("regression", "neyman", 0.3),
    ],
)
def test_capital_is_exact_martingale_over_all_orders(bet, fkind, skind, gamma):
    # all 120 orders of a 5-item population, each with its probability under the design:
    # E[K_t(A)] = 1 exactly for every t, whatever the prediction and the allocation
    prob, caps = _all_orders_capital(fkind, skind, bet, batch=2, gamma=gamma)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(caps @ prob, 1.0, atol=1e-12)
    assert np.sqrt(((caps[1] - 1) ** 2) @ prob) > 0.01  # the bets are not trivially zero


@pytest.mark.parametrize(
    ("fkind", "skind", "gamma"), [("feature", "uniform", 1.0), ("regression", "neyman", 0.3)]
)
def test_assisted_bet_at_its_truncation_is_exact_martingale(fkind, skind, gamma):
    # the assisted policy's bet at its own truncation (c = 0.9), batches of 1 and 3
    for batch in (1, 3):
        prob, caps = _all_orders_capital(fkind, skind, CV_BET[0], batch, gamma, c=0.9)
        np.testing.assert_allclose(caps @ prob, 1.0, atol=1e-12)
        assert caps.min() > 0


def test_a_bet_that_peeks_at_the_current_outcome_breaks_the_martingale(monkeypatch):
    # the enumeration detects a bet that is not predictable: "agrapa-cv" whose mean estimate
    # already contains the residual of the draw it bets on
    step = active._step

    def peeking(state, a, y, fbar, *rest):
        state.resid += y - fbar
        step(state, a, y, fbar, *rest)
        state.resid -= y - fbar

    monkeypatch.setattr(active, "_step", peeking)
    prob, caps = _all_orders_capital("feature", "uniform", CV_BET[0], 2, 1.0, c=0.9)
    assert np.abs(caps @ prob - 1.0).max() > 1e-3


def test_mean_variance_is_recorded_and_old_records_read():
    avail = np.ones((1, POP.size), dtype=bool)
    f = _prediction("feature", avail, np.zeros(1))
    rec = record_draws(f, None, avail, np.array([[2, 0]]), gamma=1.0)
    v0 = (f * (1 - f)).mean()
    v1 = np.delete(f * (1 - f), 2).mean()
    np.testing.assert_allclose(rec.mean_variance, [[v0, v1]], atol=1e-15)
    old = {k: v for k, v in rec.to_dict().items() if k != "mean_variance"}
    np.testing.assert_array_equal(DrawRecord.from_dict(old).mean_variance, [[0.25, 0.25]])


def test_wrong_weights_break_the_martingale():
    # the enumeration can fail: without the inverse-probability factor the mean is not 1
    n = POP.size
    first = np.arange(n)[:, None]  # every possible first draw, one session each
    avail = np.ones((n, n), dtype=bool)
    f = _prediction("feature", avail, np.zeros(n))
    rec = record_draws(f, FEATURE[None, :] ** 4, avail, first, gamma=0.05)
    y = increments(rec, POP[first])
    assert float((rec.prob[:, 0] * y[:, 0]).sum()) == pytest.approx(POP.mean(), abs=1e-12)
    naive = rec.mean_prediction + (POP[first] - rec.prediction)
    assert abs(float((rec.prob[:, 0] * naive[:, 0]).sum()) - POP.mean()) > 1e-3


def test_uniform_zero_prediction_is_the_one_sample_cs(gpqa):
    # f = 0, uniform draws: exactly the one-sample CS of confidence_sequences, same state
    c = gpqa["correct"].astype(float)
    rng = np.random.default_rng(0)
    s, n = 20, c.shape[1]
    a = c[rng.integers(0, c.shape[0], s)]
    st = acs_init(n, sessions=s)
    avail = np.ones((s, n), dtype=bool)
    vals, lows = [], []
    for t in range(0, n, 10):
        k = min(10, n - t)
        rec = draw_batch(np.zeros((s, n)), None, avail, k, uniforms=rng.random((s, k)), gamma=1)
        v = np.take_along_axis(a, rec.items, 1)
        avail[np.arange(s)[:, None], rec.items] = False
        acs_update(st, rec, v, inplace=True)
        vals.append(v)
        lows.append(acs_interval(st)[0])
    path = confidence_sequence(np.concatenate(vals, axis=1), n_items=n)
    cols = np.r_[np.arange(9, n, 10), n - 1][: len(lows)]
    np.testing.assert_array_equal(np.stack(lows, 1), path.lower[:, cols])
    np.testing.assert_allclose(st.log_capital, path.state.log_capital, atol=1e-9)
    np.testing.assert_array_equal(st.rejected, path.state.rejected)


def test_exact_at_exhaustion_and_nested(gpqa):
    c = gpqa["correct"].astype(float)
    rng = np.random.default_rng(2)
    s, n = 8, c.shape[1]
    a = c[rng.integers(0, c.shape[0], s)]
    st = acs_init(n, sessions=s, bet="mixture")
    avail = np.ones((s, n), dtype=bool)
    f = np.clip(c[:50].mean(0) + 0.1 * rng.standard_normal(n), 0.01, 0.99)[None, :].repeat(s, 0)
    prev_lo, prev_hi = np.zeros(s), np.ones(s)
    for t in range(0, n, 32):
        k = min(32, n - t)
        rec = draw_batch(f, neyman_scores(f), avail, k, uniforms=rng.random((s, k)), gamma=0.2)
        avail[np.arange(s)[:, None], rec.items] = False
        acs_update(st, rec, np.take_along_axis(a, rec.items, 1), inplace=True)
        lo, hi = acs_interval(st)
        if t + k < n:  # running intersection (at t = N the range alone gives the exact value)
            assert np.all(lo >= prev_lo - 1e-12) and np.all(hi <= prev_hi + 1e-12)
        prev_lo, prev_hi = lo, hi
    assert not avail.any()
    np.testing.assert_array_equal(prev_lo, a.mean(1))
    np.testing.assert_array_equal(prev_hi, a.mean(1))
    dlo, dhi = difference_from_known(prev_lo, prev_hi, 0.3)
    np.testing.assert_allclose(dlo, a.mean(1) - 0.3, atol=1e-15)
    np.testing.assert_allclose(dhi, dlo, atol=0)


def test_design_floor_sums_and_ranges():
    rng = np.random.default_rng(4)
    s, n = 6, 40
    avail = rng.random((s, n)) < 0.6
    avail[:, 0] = True
    scores = rng.random((s, n)) ** 4
    pi = design_probabilities(scores, avail, 0.25)
    r = avail.sum(1, keepdims=True)
    np.testing.assert_allclose(pi.sum(1), 1.0, atol=1e-12)
    assert np.all(pi[~avail] == 0) and np.all(pi[avail] >= (0.25 / r).repeat(n, 1)[avail] - 1e-15)
    np.testing.assert_allclose(design_probabilities(None, avail), avail / r)
    # all-zero scores fall back to uniform
    np.testing.assert_allclose(design_probabilities(np.zeros((s, n)), avail, 0.3), avail / r)
    f = rng.random((s, n))
    rec = draw_batch(f, scores, avail, 5, uniforms=rng.random((s, 5)), gamma=0.25)
    assert np.all(rec.low <= 1e-12) and np.all(rec.high >= 1 - 1e-12)
    for v in (0.0, 1.0):  # the increment stays in [L, U] for every possible outcome
        y = increments(rec, np.full(rec.items.shape, v))
        assert np.all(y >= rec.low - 1e-9) and np.all(y <= rec.high + 1e-9)
    np.testing.assert_array_equal(rec.remaining[:, 0], r[:, 0])
    np.testing.assert_array_equal(rec.remaining[:, 1:], rec.remaining[:, :-1] - 1)


def test_draws_follow_pi_and_replay_exactly():
    rng = np.random.default_rng(8)
    s, n = 20_000, 6
    scores = np.array([5.0, 1.0, 0.0, 2.0, 0.5, 1.5])[None, :].repeat(s, 0)
    avail = np.ones((s, n), dtype=bool)
    f = np.full((s, n), 0.4)
    rec = draw_batch(f, scores, avail, 3, uniforms=rng.random((s, 3)), gamma=0.3)
    pi0 = design_probabilities(scores[:1], avail[:1], 0.3)[0]
    freq = np.bincount(rec.items[:, 0], minlength=n) / s
    assert np.all(np.abs(freq - pi0) < 4 * np.sqrt(pi0 * (1 - pi0) / s))
    assert np.all(np.sort(rec.items, 1)[:, 1:] != np.sort(rec.items, 1)[:, :-1])  # no repeats
    again = record_draws(f, scores, avail, rec.items, gamma=0.3)
    for name, v in rec.to_dict().items():
        np.testing.assert_array_equal(getattr(again, name), v)
    back = DrawRecord.from_dict(rec.to_dict())
    np.testing.assert_array_equal(back.prob, rec.prob)


def test_state_roundtrip_and_copy():
    st = acs_init(10, sessions=2)
    avail = np.ones((2, 10), dtype=bool)
    rec = draw_batch(np.full((2, 10), 0.3), None, avail, 4, uniforms=np.full((2, 4), 0.5), gamma=1)
    new = acs_update(st, rec, np.array([[1, 0, 1, 1], [0, 0, 1, 0]]))
    assert st.t.tolist() == [0, 0] and new.t.tolist() == [4, 4]
    back = ActiveCSState.from_dict(new.to_dict())
    np.testing.assert_array_equal(back.resid, new.resid)
    np.testing.assert_array_equal(back.log_capital, new.log_capital)
    np.testing.assert_allclose(
        new.resid, (increments(rec, [[1, 0, 1, 1], [0, 0, 1, 0]]) - 0.3).sum(1)
    )


def test_bad_inputs():
    avail = np.ones((1, 5), dtype=bool)
    with pytest.raises(ValueError, match="gamma"):
        design_probabilities(None, avail, 0.0)
    with pytest.raises(ValueError, match="scores"):
        design_probabilities(-np.ones((1, 5)), avail, 0.5)
    with pytest.raises(ValueError, match="predictions"):
        draw_batch(np.full((1, 5), 1.5), None, avail, 1, uniforms=[[0.1]])
    with pytest.raises(ValueError, match="k"):
        draw_batch(np.zeros((1, 5)), None, avail, 6, uniforms=np.zeros((1, 6)))
    with pytest.raises(ValueError, match="uniforms"):
        draw_batch(np.zeros((1, 5)), None, avail, 1, uniforms=[[1.0]])
    with pytest.raises(ValueError, match="items"):
        record_draws(np.zeros((1, 5)), None, avail, [[1, 1]])
    st = acs_init(5)
    rec = draw_batch(np.zeros((1, 5)), None, avail, 2, uniforms=[[0.1, 0.2]])
    with pytest.raises(ValueError, match="values"):
        acs_update(st, rec, [[0.5, 2.0]])
    st2 = acs_update(st, rec, [[1.0, 0.0]])
    with pytest.raises(ValueError, match="record"):
        acs_update(st2, rec, [[1.0, 0.0]])  # the same draws twice do not continue the state
