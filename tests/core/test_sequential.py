"""Confidence sequences for sampling without replacement (app.core.sequential.confidence_sequences)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.core.sequential.confidence_sequences import (
    BETS,
    BETTER,
    EQUIVALENT,
    UNDECIDED,
    WORSE,
    CSState,
    combined_log_capital,
    conditional_mean,
    confidence_sequence,
    cs_init,
    cs_interval,
    cs_update,
    decide,
    decision_names,
    difference_interval,
    grid_is_exact,
    mean_grid,
    paired_values,
    precision_met,
)


def test_conditional_mean_is_mean_of_remaining_population():
    # brute force: population, a prefix; the remaining items' mean is mu_t(m*)
    pop = np.array([0.0, 0.25, 1.0, 1.0, 0.5, 0.0, 0.75])
    n = pop.size
    m_star = pop.mean()
    for t_prev in range(n):
        prefix = pop[:t_prev]
        mu = conditional_mean(m_star, prefix.sum(), t_prev, n)
        assert mu == pytest.approx(pop[t_prev:].mean(), abs=1e-12)
    # vectorised shape: (S,) totals x (G,) grid
    out = conditional_mean(np.linspace(0, 1, 5), np.array([0.0, 2.0]), np.array([0, 3]), 10)
    assert out.shape == (2, 5)
    assert out[1, 2] == pytest.approx((10 * 0.5 - 2.0) / 7)


def _capital_at(values_by_order: np.ndarray, m_star: float, n: int, bet: str) -> np.ndarray:
    """Capital K_t(m*) after each t for every order (rows), grid = {m*} plus ends."""
    grid = np.array([0.0, m_star, 1.0]) if 0 < m_star < 1 else np.array([0.0, 1.0])
    st = cs_init(n, sessions=values_by_order.shape[0], bet=bet, grid=grid, binary=False)
    j = int(np.flatnonzero(np.isclose(grid, m_star))[0])
    out = np.empty(values_by_order.shape)
    for t in range(n):
        cs_update(st, values_by_order[:, t : t + 1], inplace=True)
        out[:, t] = np.exp(combined_log_capital(st)[:, j])
    return out


@pytest.mark.parametrize("bet", BETS)
def test_capital_is_exact_martingale_by_enumeration(bet):
    # all 720 orders of a 6-item population: E[K_t(m*)] = 1 exactly for every t
    pop = np.array([0.0, 1.0, 1.0, 0.5, 0.0, 1.0])
    orders = np.array(list(itertools.permutations(range(pop.size))))
    cap = _capital_at(pop[orders], pop.mean(), pop.size, bet)
    np.testing.assert_allclose(cap.mean(axis=0), 1.0, atol=1e-10)
    assert cap.std(axis=0)[2] > 0.01  # the bets are not trivially zero


def test_capital_martingale_monte_carlo_fractions():
    # N = 30 fractional values, 20,000 random orders: mean K_t(m*) within 4 MC standard errors of 1
    rng = np.random.default_rng(3)
    pop = rng.beta(0.6, 0.9, 30)
    k = 20_000
    orders = np.argsort(rng.random((k, pop.size)), axis=1)
    cap = _capital_at(pop[orders], pop.mean(), pop.size, "agrapa")
    for t in (4, 14, 29):
        mc_se = cap[:, t].std() / np.sqrt(k)
        assert abs(cap[:, t].mean() - 1.0) < 4 * mc_se + 1e-9


def test_mean_grid_and_exactness():
    g = mean_grid(448, paired=True)
    assert g.size == 897 and grid_is_exact(g, 448, paired=True)
    assert grid_is_exact(mean_grid(448), 448) and not grid_is_exact(
        mean_grid(448), 448, paired=True
    )
    gf = mean_grid(448, binary=False)
    assert gf.size > 2000 and gf[0] == 0 and gf[-1] == 1


@pytest.mark.parametrize("bet", BETS)
def test_exhaustion_gives_exact_value_gpqa(gpqa, bet):
    c = gpqa["correct"].astype(float)
    x = paired_values(c[:6], c[6:12])
    rng = np.random.default_rng(1)
    order = np.argsort(rng.random(x.shape), axis=1)
    path = confidence_sequence(
        np.take_along_axis(x, order, 1), n_items=x.shape[1], bet=bet, paired=True
    )
    exact = x.mean(axis=1)
    np.testing.assert_array_equal(path.lower[:, -1], exact)
    np.testing.assert_array_equal(path.upper[:, -1], exact)
    lo, _ = difference_interval(path.lower[:, -1], path.upper[:, -1])
    np.testing.assert_allclose(lo, c[:6].mean(1) - c[6:12].mean(1), atol=1e-12)
    # intervals are nested over time (running intersection) and contain the range constraint
    assert np.all(np.diff(path.lower, axis=1) >= -1e-12)
    assert np.all(np.diff(path.upper, axis=1) <= 1e-12)


def test_fractions_work_and_cover():
    rng = np.random.default_rng(7)
    n, s = 120, 200
    pop = rng.beta(2, 5, n)
    order = np.argsort(rng.random((s, n)), axis=1)
    path = confidence_sequence(pop[order], n_items=n, grid=np.linspace(0, 1, 601))
    assert not path.state.exact_grid
    m = pop.mean()
    ever_missed = ((path.lower > m + 1e-12) | (path.upper < m - 1e-12)).any(axis=1)
    assert ever_missed.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / s)
    np.testing.assert_allclose(path.lower[:, -1], m, rtol=0, atol=1e-12)
    assert np.all(path.upper[:, -1] == path.lower[:, -1])
    assert np.median(path.upper[:, 59] - path.lower[:, 59]) < 0.2  # informative, not trivial


def test_time_uniform_validity_on_gpqa(gpqa):
    # 300 random pairs x 1 random order each: share of sessions whose CS *ever* misses Delta
    c = gpqa["correct"].astype(float)
    rng = np.random.default_rng(11)
    s = 300
    a, b = rng.integers(0, c.shape[0], s), rng.integers(0, c.shape[0], s)
    x = paired_values(c[a], c[b])
    order = np.argsort(rng.random(x.shape), axis=1)
    path = confidence_sequence(np.take_along_axis(x, order, 1), n_items=x.shape[1], paired=True)
    lo, hi = difference_interval(path.lower, path.upper)
    delta = (c[a] - c[b]).mean(axis=1)[:, None]
    missed = ((lo > delta + 1e-12) | (hi < delta - 1e-12)).any(axis=1)
    assert missed.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / s)
    # wrong decisions (ties count as wrong) are a subset of misses
    dec = decide(lo, hi)
    first = np.where((dec != UNDECIDED).any(axis=1), np.argmax(dec != UNDECIDED, axis=1), -1)
    got = dec[np.arange(s), first]
    d = delta[:, 0]
    wrong = (first >= 0) & (((got == BETTER) & (d <= 0)) | ((got == WORSE) & (d >= 0)))
    assert wrong.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / s)


def test_incremental_equals_batch_path_and_roundtrip():
    rng = np.random.default_rng(5)
    n = 50
    x = rng.integers(0, 3, (4, n)) / 2.0
    path = confidence_sequence(x, n_items=n, paired=True, bet="mixture")
    st = cs_init(n, sessions=4, paired=True, bet="mixture")
    t = 0
    for k in (1, 7, 10, 2, 30):
        st = cs_update(st, x[:, t : t + k])
        t += k
        st = CSState.from_dict({k_: np.asarray(v) for k_, v in st.to_dict().items()})
        lo, hi = cs_interval(st)
        np.testing.assert_array_equal(lo, path.lower[:, t - 1])
        np.testing.assert_array_equal(hi, path.upper[:, t - 1])
    np.testing.assert_array_equal(st.log_capital, path.state.log_capital)
    # a single session accepts 1-d batches
    one = cs_update(cs_init(n, paired=True), x[0, :5])
    assert one.t.tolist() == [5]


def test_inputs_unchanged_and_copy_semantics():
    x = np.array([[1.0, 0.0, 0.5, 1.0]])
    x0 = x.copy()
    st = cs_init(10)
    st2 = cs_update(st, np.array([[1.0, 0.0]]))
    assert st.t.tolist() == [0] and st2.t.tolist() == [2]
    confidence_sequence(x, n_items=10, paired=True)
    np.testing.assert_array_equal(x, x0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="x"):
        cs_update(cs_init(5), [[1.5]])
    with pytest.raises(ValueError, match="x"):
        cs_update(cs_init(5), [[np.nan]])
    with pytest.raises(ValueError, match="x"):
        cs_update(cs_init(2), [[1.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="alpha"):
        cs_init(5, alpha=1.0)
    with pytest.raises(ValueError, match="bet"):
        cs_init(5, bet="kelly")
    with pytest.raises(ValueError, match="grid"):
        cs_init(5, grid=[0.5, 0.2])
    with pytest.raises(ValueError, match="y_model"):
        paired_values([2.0], [0.0])


def test_decide_and_precision_known_answers():
    lo = np.array([0.01, -0.2, -0.01, -0.03, -0.1])
    hi = np.array([0.2, -0.05, 0.015, 0.01, 0.1])
    d = decide(lo, hi, margin=0.02)
    assert d.tolist() == [BETTER, WORSE, EQUIVALENT, UNDECIDED, UNDECIDED]
    assert decision_names(d).tolist() == ["better", "worse", "equivalent", "undecided", "undecided"]
    assert decide(lo, hi).tolist() == [BETTER, WORSE, UNDECIDED, UNDECIDED, UNDECIDED]
    assert precision_met(lo, hi, 0.1).tolist() == [True, True, True, True, True]
    assert precision_met(lo, hi, 0.05).tolist() == [False, False, True, True, False]


def test_agrapa_beats_plugin_on_large_gaps(gpqa):
    # efficiency regression guard: median items to decide for pairs >= 15 points apart
    c = gpqa["correct"].astype(float)
    acc = c.mean(1)
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, c.shape[0], 4000), rng.integers(0, c.shape[0], 4000)
    keep = np.flatnonzero(np.abs(acc[a] - acc[b]) >= 0.15)[:120]
    x = paired_values(c[a[keep]], c[b[keep]])
    order = np.argsort(rng.random(x.shape), axis=1)
    xo = np.take_along_axis(x, order, 1)[:, :250]
    med = {}
    for bet in ("agrapa", "plugin"):
        path = confidence_sequence(xo, n_items=x.shape[1], bet=bet, paired=True)
        dec = decide(*difference_interval(path.lower, path.upper)) != UNDECIDED
        used = np.where(dec.any(1), np.argmax(dec, 1) + 1, 449)
        med[bet] = np.median(used)
    assert med["agrapa"] <= med["plugin"]
    assert med["agrapa"] < 100
