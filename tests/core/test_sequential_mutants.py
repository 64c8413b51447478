"""Exact small cases for app.core.sequential.confidence_sequences (mutation testing, issue 17).

Every expected value comes from an independent oracle written in the test: hand computations of
the first betting steps (fractions), a plain scalar transcription of the documented formulas
(:func:`_reference_capital`, loops over items and candidates), brute-force enumeration of every
serving order of tiny populations, and hand-built states for :func:`cs_interval`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from app.core.sequential.confidence_sequences import (
    BETTER,
    EQUIVALENT,
    MAX_GRID,
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

Q = np.array([0.0, 0.25, 0.5, 0.75, 1.0])  # mean_grid(4)


# -- oracle: the documented capital, one scalar at a time ----------------------------------------
def _reference_capital(xs, n, grid, bet, c, alpha):
    """Log capitals (P, G) and rejections (G,) after feeding ``xs`` one by one (module docstring).

    mu_t(m) = (N m - S_{t-1}) / (N - t + 1) clipped to [0, 1]; bounds c / max(mu, 1e-12) and
    c / max(1 - mu, 1e-12); mu_hat = (1/2 + S) / t, s2 = (1/4 + sq) / t; agrapa
    lam = clip(D / (s2 + D^2)), D = mu_hat - mu; plugin lam = sqrt(2 log(2/alpha) / (s2 t log(1+t)))
    hedged (K+ + K-)/2; mixture K_agrapa/2 + (K+ + K-)/4; reject when max_s K_s >= 1/alpha.
    """
    g = list(grid)
    procs = {"agrapa": 1, "plugin": 2, "mixture": 3}[bet]
    logk = [[0.0] * len(g) for _ in range(procs)]
    rejected = [False] * len(g)
    total, sq = 0.0, 0.0
    for t_prev, x in enumerate(xs):
        t = t_prev + 1
        mu_hat = (0.5 + total) / t
        s2 = (0.25 + sq) / t
        lam_p = math.sqrt(2 * math.log(2 / alpha) / (s2 * t * math.log(1 + t)))
        for j, m in enumerate(g):
            mu = (n * m - total) / (n - t_prev)
            mu = min(max(mu, 0.0), 1.0)
            hi_bound = c / max(mu, 1e-12)
            lo_bound = c / max(1 - mu, 1e-12)
            k = 0
            if bet in ("agrapa", "mixture"):
                d = mu_hat - mu
                lam = min(max(d / (s2 + d * d), -lo_bound), hi_bound)
                logk[0][j] += math.log1p(lam * (x - mu))
                k = 1
            if bet in ("plugin", "mixture"):
                logk[k][j] += math.log1p(min(lam_p, hi_bound) * (x - mu))
                logk[k + 1][j] += math.log1p(-min(lam_p, lo_bound) * (x - mu))
            caps = [math.exp(v[j]) for v in logk]
            if bet == "agrapa":
                comb = caps[0]
            elif bet == "plugin":
                comb = (caps[0] + caps[1]) / 2
            else:
                comb = caps[0] / 2 + (caps[1] + caps[2]) / 4
            rejected[j] = rejected[j] or comb >= 1 / alpha * (1 - 1e-12)
        sq += (x - mu_hat) ** 2
        total += x
    return np.array(logk), np.array(rejected)


# -- grid --------------------------------------------------------------------------------------
def test_mean_grid_lattices():
    np.testing.assert_array_equal(mean_grid(4), Q)
    np.testing.assert_array_equal(mean_grid(2, paired=True), Q)
    assert mean_grid(4).dtype == np.float64
    assert mean_grid(np.int64(3)).size == 4
    # fractions: largest multiple of N not above MAX_GRID - 1 = 4000 (7 * 571 = 3997)
    assert MAX_GRID == 4001
    g7 = mean_grid(7, binary=False)
    assert g7.size == 3998 and g7[571] == pytest.approx(1 / 7, abs=1e-15) and g7[-1] == 1.0
    assert mean_grid(4000, binary=False).size == 4001
    assert mean_grid(3, binary=False).size == 4000  # 3 * 1333 = 3999
    assert mean_grid(2, binary=False).size == 4001
    assert mean_grid(3000, binary=False).size == 3001  # at least N
    assert mean_grid(5000, binary=False).size == 5001
    # paired fractions ignore `paired` (the fine grid)
    assert mean_grid(7, paired=True, binary=False).size == 3998
    for bad in (0, -1, 2.0, True, "3"):
        with pytest.raises(ValueError, match=r"^n_items: expected a positive integer"):
            mean_grid(bad)


def test_grid_is_exact_cases():
    assert grid_is_exact(Q, 4) is True
    assert grid_is_exact(Q, 2, paired=True) is True
    assert grid_is_exact(Q, 4, paired=True) is False  # 1/8 missing
    assert grid_is_exact(Q[1:], 4) is False  # 0 missing
    assert grid_is_exact(Q[:-1], 4) is False  # 1 missing
    assert grid_is_exact(np.delete(Q, 1), 4) is False  # 1/4 missing
    assert grid_is_exact(np.delete(Q, 3), 4) is False  # 3/4 missing
    assert grid_is_exact(np.linspace(0, 1, 13), 4) is True  # superset
    assert grid_is_exact(np.array([0.0, 1.0]), 1) is True
    assert grid_is_exact(Q + np.array([0, 5e-13, 0, -5e-13, 0]), 4) is True  # within 1e-12
    assert grid_is_exact(Q + np.array([0, 0, 3e-12, 0, 0]), 4) is False
    assert grid_is_exact(Q + np.array([0, 0, -3e-12, 0, 0]), 4) is False
    assert grid_is_exact([0.0, 0.5, 1.0], 2) is True  # list input


# -- state -------------------------------------------------------------------------------------
def test_cs_init_defaults_and_shapes():
    st = cs_init(4)
    assert (st.n_items, st.alpha, st.bet, st.c) == (4, 0.05, "agrapa", 0.5)
    assert st.exact_grid is True and st.sessions == 1
    np.testing.assert_array_equal(st.grid, Q)
    assert st.t.dtype == np.int64 and st.t.tolist() == [0]
    assert st.total.tolist() == [0.0] and st.sq.tolist() == [0.0]
    assert st.log_capital.shape == (1, 1, 5) and not st.log_capital.any()
    assert st.rejected.shape == (1, 5) and st.rejected.dtype == bool and not st.rejected.any()
    for bet, p in (("agrapa", 1), ("plugin", 2), ("mixture", 3)):
        s = cs_init(3, sessions=np.int64(2), bet=bet, alpha=0.1, c=0.25)
        assert s.log_capital.shape == (2, p, 4) and s.rejected.shape == (2, 4)
        assert s.t.shape == (2,) and s.total.shape == (2,) and s.sq.shape == (2,)
        assert (s.alpha, s.c, s.bet, s.sessions) == (0.1, 0.25, bet, 2)
    sp = cs_init(2, paired=True)
    assert sp.grid.size == 5 and sp.exact_grid is True
    sf = cs_init(4, binary=False)
    assert sf.grid.size == 4001 and sf.exact_grid is False
    assert cs_init(4, grid=Q, binary=False).exact_grid is False
    assert cs_init(4, grid=Q).exact_grid is True
    assert cs_init(4, grid=[0.0, 0.5, 1.0]).exact_grid is False
    assert cs_init(2, grid=[0.0, 0.5, 1.0]).exact_grid is True
    assert isinstance(cs_init(4, alpha=np.float32(0.5)).alpha, float)


def test_cs_init_custom_grid_type_and_exactness():
    # an integer grid is stored as float64; exactness of a custom grid follows `paired`
    assert cs_init(1, grid=[0, 1]).grid.dtype == np.float64
    assert cs_init(4, grid=Q, paired=True).exact_grid is False  # 1/8 .. 7/8 missing
    assert cs_init(2, grid=Q, paired=True).exact_grid is True
    assert cs_init(4, grid=Q, paired=False).exact_grid is True


def test_cs_init_grid_is_copied_and_flattened():
    g = np.array([[0.0, 0.5], [0.75, 1.0]])
    st = cs_init(2, grid=g)
    g[0, 1] = 0.25
    np.testing.assert_array_equal(st.grid, [0.0, 0.5, 0.75, 1.0])
    assert st.exact_grid is True


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_items": 0}, "n_items"),
        ({"n_items": 4, "sessions": 0}, "sessions: expected a positive integer"),
        ({"n_items": 4, "sessions": True}, "sessions"),
        ({"n_items": 4, "alpha": 0.0}, "alpha: must lie in"),
        ({"n_items": 4, "alpha": 1.0}, "alpha"),
        ({"n_items": 4, "alpha": -0.5}, "alpha"),
        ({"n_items": 4, "c": 0.0}, "c: must lie in"),
        ({"n_items": 4, "c": 1.0}, "c: must"),
        ({"n_items": 4, "bet": "kelly"}, "bet: expected one of"),
        ({"n_items": 4, "grid": [0.5]}, "grid: expected at least two"),
        ({"n_items": 4, "grid": [0.0, np.nan]}, "grid: expected"),
        ({"n_items": 4, "grid": [0.0, np.inf]}, "grid: expected"),
        ({"n_items": 4, "grid": [-0.1, 0.5]}, "grid: expected"),
        ({"n_items": 4, "grid": [0.5, 1.1]}, "grid: expected"),
        ({"n_items": 4, "grid": [0.0, 0.5, 0.5, 1.0]}, "grid: must be strictly increasing"),
        ({"n_items": 4, "grid": [0.0, 0.6, 0.5, 1.0]}, "grid: must be"),
    ],
)
def test_cs_init_rejects(kwargs, match):
    with pytest.raises(ValueError, match=r"^" + match):
        cs_init(**kwargs)


def test_cs_init_accepts_edges():
    cs_init(1, grid=[0.0, 1.0])
    cs_init(4, alpha=0.999, c=0.999)
    cs_init(4, alpha=1e-9, c=1e-9)


def test_copy_to_dict_from_dict():
    st = cs_init(4, sessions=2, bet="plugin")
    st = cs_update(st, [[1.0, 0.0], [0.0, 0.0]])
    cp = st.copy()
    assert cp.n_items == 4 and cp.bet == "plugin" and cp.exact_grid is True
    for name in ("grid", "t", "total", "sq", "log_capital", "rejected"):
        a, b = getattr(st, name), getattr(cp, name)
        np.testing.assert_array_equal(a, b)
        assert a is not b
    cp.log_capital[:] = 7.0
    cp.t[:] = 9
    cp.grid[0] = 0.1
    assert st.log_capital.max() < 7.0 and st.t.tolist() == [2, 2] and st.grid[0] == 0.0
    d = st.to_dict()
    assert set(d) == {
        "n_items",
        "alpha",
        "bet",
        "c",
        "exact_grid",
        "grid",
        "t",
        "total",
        "sq",
        "log_capital",
        "rejected",
    }
    assert d["t"] is st.t and d["n_items"] == 4
    plain = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
    plain["n_items"], plain["alpha"], plain["exact_grid"] = "4", "0.05", 1
    back = CSState.from_dict(plain)
    assert back.n_items == 4 and isinstance(back.n_items, int)
    assert back.alpha == 0.05 and isinstance(back.alpha, float)
    assert back.c == 0.5 and isinstance(back.c, float)
    assert back.exact_grid is True and back.bet == "plugin"
    assert back.t.dtype == np.int64 and back.rejected.dtype == bool
    assert back.grid.dtype == np.float64 and back.total.dtype == np.float64
    assert back.sq.dtype == np.float64 and back.log_capital.dtype == np.float64
    for name in ("grid", "t", "total", "sq", "log_capital", "rejected"):
        np.testing.assert_array_equal(getattr(back, name), getattr(st, name))
    # an interval from the round-tripped state equals the original's
    np.testing.assert_array_equal(cs_interval(back)[0], cs_interval(st)[0])
    np.testing.assert_array_equal(cs_interval(back)[1], cs_interval(st)[1])
    # scalar sessions (a single session stored as 0-d values)
    one = cs_init(4).to_dict()
    one.update(t=np.int64(0), total=0.0, sq=0.0)
    st1 = CSState.from_dict(one)
    assert st1.t.shape == (1,) and st1.total.shape == (1,) and st1.sq.shape == (1,)


def test_from_dict_converts_types():
    # values of other types (e.g. from JSON) come back with the state's dtypes
    d = {
        "n_items": np.int32(2),
        "alpha": 1,
        "bet": "agrapa",
        "c": 0,
        "exact_grid": 0,
        "grid": [0, 1],
        "t": [[1.0]],
        "total": [1],
        "sq": [0],
        "log_capital": [[[0, 1]]],
        "rejected": [[0, 1]],
    }
    st = CSState.from_dict(d)
    assert type(st.n_items) is int and type(st.alpha) is float and type(st.c) is float
    assert st.exact_grid is False and type(st.bet) is str
    assert st.grid.dtype == np.float64 and st.t.dtype == np.int64 and st.t.shape == (1,)
    assert st.total.dtype == np.float64 and st.sq.dtype == np.float64
    assert st.log_capital.dtype == np.float64 and st.rejected.dtype == bool
    assert st.rejected.tolist() == [[False, True]]


def test_from_dict_shape_checks():
    d = cs_init(4, sessions=2, bet="mixture").to_dict()
    bad = dict(d, log_capital=np.zeros((2, 2, 5)))
    with pytest.raises(
        ValueError, match=r"^log_capital: shape does not match sessions, bet and grid$"
    ):
        CSState.from_dict(bad)
    with pytest.raises(ValueError, match=r"^log_capital"):
        CSState.from_dict(dict(d, log_capital=np.zeros((1, 3, 5))))
    with pytest.raises(ValueError, match=r"^log_capital"):
        CSState.from_dict(dict(d, log_capital=np.zeros((2, 3, 4))))
    with pytest.raises(ValueError, match=r"^rejected: shape does not match sessions and grid$"):
        CSState.from_dict(dict(d, rejected=np.zeros((2, 4), dtype=bool)))
    with pytest.raises(ValueError, match=r"^rejected"):
        CSState.from_dict(dict(d, rejected=np.zeros((1, 5), dtype=bool)))
    with pytest.raises(ValueError):
        CSState.from_dict(dict(d, total=np.zeros(3)))


# -- values ------------------------------------------------------------------------------------
def test_value_checks_and_batch_shapes():
    one = cs_init(4)
    assert cs_update(one, [1.0, 0.0]).t.tolist() == [2]  # (k,) is one session's batch
    two = cs_init(4, sessions=2)
    st = cs_update(two, [1.0, 0.0])  # (S,) is one item for each of S sessions
    assert st.t.tolist() == [1, 1] and st.total.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match=r"^x: expected shape \(2, k\), got \(3,\)"):
        cs_update(two, [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match=r"^x: expected shape \(2, k\)"):
        cs_update(two, np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"^x: expected shape"):
        cs_update(two, np.zeros((2, 1, 1)))
    for bad in (-0.5, 1.5, np.nan, np.inf):
        with pytest.raises(ValueError, match=r"^x: values must be finite and in"):
            cs_update(one, [[bad]])
    # an empty batch is a no-op
    st0 = cs_update(one, np.zeros((1, 0)))
    assert st0.t.tolist() == [0] and not st0.log_capital.any()
    # edges 0 and 1 are accepted; exactly N items fill the population
    full = cs_update(one, [[0.0, 1.0, 1.0, 0.0]])
    assert full.t.tolist() == [4] and full.total.tolist() == [2.0]
    with pytest.raises(ValueError, match=r"^x: more values than the 4 items of the population"):
        cs_update(one, [[0.0] * 5])
    with pytest.raises(ValueError, match=r"^x: more values"):
        cs_update(full, [[1.0]])


def test_update_inplace_and_copy():
    st = cs_init(4)
    same = cs_update(st, [[1.0]], inplace=True)
    assert same is st and st.t.tolist() == [1]
    other = cs_update(st, [[1.0]])
    assert other is not st and st.t.tolist() == [1] and other.t.tolist() == [2]
    assert cs_update(st, [[1.0]], inplace=False) is not st


def test_conditional_mean_hand_values():
    out = conditional_mean(Q, 1.0, 1, 4)  # (4 m - 1) / 3
    np.testing.assert_allclose(out, [-1 / 3, 0.0, 1 / 3, 2 / 3, 1.0], atol=1e-15)
    assert out.shape == (5,)
    out = conditional_mean([0.5], [0.0, 3.0], [0, 2], 6)
    np.testing.assert_allclose(out, [[0.5], [0.0]], atol=1e-15)


# -- the capital: hand computations of the first two steps (N = 4, grid k/4, c = 1/2) ------------
def test_agrapa_first_step_hand_values():
    # t = 1: mu = m, mu_hat = 1/2, s2 = 1/4, lam = (1/2 - m) / (1/4 + (1/2 - m)^2)
    st = cs_update(cs_init(4), [[1.0]])
    np.testing.assert_allclose(np.exp(st.log_capital[0, 0]), [2.0, 1.6, 1.0, 0.8, 1.0], rtol=1e-14)
    st0 = cs_update(cs_init(4), [[0.0]])
    np.testing.assert_allclose(np.exp(st0.log_capital[0, 0]), [1.0, 0.8, 1.0, 1.6, 2.0], rtol=1e-14)
    np.testing.assert_array_equal(combined_log_capital(st), st.log_capital[:, 0, :])
    assert st.t.tolist() == [1] and st.total.tolist() == [1.0] and st.sq.tolist() == [0.25]
    assert not st.rejected.any()  # 1/alpha = 20


def test_agrapa_second_step_hand_values():
    # after x1 = 1: S = 1, sq = 1/4, mu_hat = 3/4, s2 = 1/4, mu = (4m - 1)/3 clipped to [0, 1]
    # m = 1/2: mu = 1/3, D = 5/12, lam = 60/61, factor 1 - 20/61 = 41/61
    # m = 3/4: mu = 2/3, D = 1/12, lam = 12/37, factor 1 - 8/37 = 29/37
    # m = 1:   mu = 1, D = -1/4, lam = -4/5 (lower bound c / 1e-12), factor 1 + 4/5
    # m <= 1/4: mu clipped to 0, factor 1 (x2 = 0)
    st = cs_update(cs_init(4), [[1.0, 0.0]])
    want = [2.0, 1.6, 41 / 61, 0.8 * 29 / 37, 1.8]
    np.testing.assert_allclose(np.exp(st.log_capital[0, 0]), want, rtol=1e-14)
    assert st.sq.tolist() == [0.25 + 0.75**2] and st.total.tolist() == [1.0]
    # x2 = 1 instead: m = 1/2: 1 + (60/61)(2/3) = 101/61; m = 3/4: 1 + (12/37)/3 = 41/37
    # m = 1/4: mu = 0, D = 3/4, lam = 12/13 (upper bound c / 1e-12), factor 1 + 12/13
    st = cs_update(cs_init(4), [[1.0, 1.0]])
    want = [2.0 * 25 / 13, 1.6 * 25 / 13, 101 / 61, 0.8 * 41 / 37, 1.0 * (1 - 0.8 * 0.0)]
    np.testing.assert_allclose(np.exp(st.log_capital[0, 0]), want, rtol=1e-14)
    assert st.sq.tolist() == [0.25 + 0.25**2]


def test_agrapa_truncation_c():
    # c = 1/8: at t = 1, m = 1/4: lam = min(4/5, c/m = 1/2) -> 1 + (1/2)(3/4) = 11/8;
    # m = 3/4 with x = 0: lam = max(-4/5, -c/(1-m) = -1/2) -> 1 + (1/2)(3/4) = 11/8;
    # m = 0: lam = min(1, c / 1e-12) = 1 -> 2; m = 1/2: 1
    st = cs_update(cs_init(4, c=0.125), [[1.0]])
    np.testing.assert_allclose(
        np.exp(st.log_capital[0, 0]), [2.0, 1.375, 1.0, 1 - 0.5 * 0.25, 1.0], rtol=1e-14
    )
    st = cs_update(cs_init(4, c=0.125), [[0.0]])
    np.testing.assert_allclose(
        np.exp(st.log_capital[0, 0]), [1.0, 1 - 0.5 * 0.25, 1.0, 1.375, 2.0], rtol=1e-14
    )


def test_plugin_first_step_hand_values():
    # lam = sqrt(2 log(2/alpha) / (s2 t log(1 + t))) = sqrt(8 log(40) / log(2)) at t = 1
    lam = math.sqrt(8 * math.log(40) / math.log(2))
    st = cs_update(cs_init(4, bet="plugin"), [[1.0]])
    kp = [1 + lam, 1 + 2 * 0.75, 1 + 1 * 0.5, 1 + (2 / 3) * 0.25, 1.0]
    km = [0.5, 1 - (2 / 3) * 0.75, 0.5, 1 - 2 * 0.25, 1.0]
    np.testing.assert_allclose(np.exp(st.log_capital[0, 0]), kp, rtol=1e-13)
    np.testing.assert_allclose(np.exp(st.log_capital[0, 1]), km, rtol=1e-13)
    want = np.log((np.array(kp) + np.array(km)) / 2)
    np.testing.assert_allclose(combined_log_capital(st)[0], want, rtol=1e-13, atol=1e-15)
    # alpha enters the bet: alpha = 0.2 -> sqrt(8 log(10) / log(2)); x = 0
    lam = math.sqrt(8 * math.log(10) / math.log(2))
    st = cs_update(cs_init(4, bet="plugin", alpha=0.2), [[0.0]])
    np.testing.assert_allclose(np.exp(st.log_capital[0, 1, -1]), 1 + lam, rtol=1e-13)
    np.testing.assert_allclose(np.exp(st.log_capital[0, 0, -1]), 0.5, rtol=1e-13)


def test_mixture_first_step_hand_values():
    lam = math.sqrt(8 * math.log(40) / math.log(2))
    st = cs_update(cs_init(4, bet="mixture"), [[1.0]])
    ka = np.array([2.0, 1.6, 1.0, 0.8, 1.0])
    kp = np.array([1 + lam, 2.5, 1.5, 7 / 6, 1.0])
    km = np.array([0.5, 0.5, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(np.exp(st.log_capital[0]), [ka, kp, km], rtol=1e-13)
    np.testing.assert_allclose(
        np.exp(combined_log_capital(st)[0]), ka / 2 + (kp + km) / 4, rtol=1e-13
    )


def test_combined_log_capital_on_set_values():
    a, b, c = np.log(3.0), np.log(0.5), np.log(8.0)
    st = cs_init(2, bet="agrapa")
    st.log_capital[0, 0, :] = [a, b, c]
    np.testing.assert_allclose(combined_log_capital(st)[0], [a, b, c], rtol=1e-15)
    st = cs_init(2, bet="plugin")
    st.log_capital[0, 0, :] = [a, b, c]
    st.log_capital[0, 1, :] = [b, c, a]
    np.testing.assert_allclose(np.exp(combined_log_capital(st)[0]), [1.75, 4.25, 5.5], rtol=1e-14)
    st = cs_init(2, bet="mixture")
    st.log_capital[0, 0, :] = [a, b, c]
    st.log_capital[0, 1, :] = [b, c, a]
    st.log_capital[0, 2, :] = [c, a, b]
    np.testing.assert_allclose(
        np.exp(combined_log_capital(st)[0]),
        [3 / 2 + 8.5 / 4, 0.25 + 11 / 4, 4 + 3.5 / 4],
        rtol=1e-14,
    )


def test_rejection_at_exactly_one_over_alpha():
    # alpha = 1/2: at t = 1, x = 1, the candidate m = 0 has capital exactly 2 = 1/alpha (Ville: >=)
    st = cs_update(cs_init(4, alpha=0.5), [[1.0]])
    assert st.rejected[0].tolist() == [True, False, False, False, False]
    st = cs_update(st, [[0.0]])  # capitals 2, 1.6, 41/61, ... ; rejection is sticky
    assert st.rejected[0].tolist() == [True, False, False, False, False]
    # alpha = 0.6: 1/alpha = 5/3 -> m = 0 (2) rejected, m = 1/4 (1.6) not; next m = 1 (1.8)
    st = cs_update(cs_init(4, alpha=0.6), [[1.0]])
    assert st.rejected[0].tolist() == [True, False, False, False, False]
    st = cs_update(st, [[0.0]])
    assert st.rejected[0].tolist() == [True, False, False, False, True]
    # alpha = 0.55: m = 1 has capital 2 > 1/alpha after x1 = 0, then factor 1 (x2 = 1, mu = 4/3
    # clipped to 1): still rejected
    st = cs_update(cs_init(4, alpha=0.55), [[0.0, 1.0]])
    assert st.rejected[0, -1]


# -- the capital over longer paths: the scalar oracle ------------------------------------------
@pytest.mark.parametrize("bet", ["agrapa", "plugin", "mixture"])
@pytest.mark.parametrize(
    ("xs", "n", "grid", "c", "alpha"),
    [
        ([0.5] * 9 + [1.0, 0.5, 0.0], 12, None, 0.5, 0.05),  # ties: small s2, clipped bets
        ([1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0], 10, None, 0.3, 0.1),
        ([0.2, 0.9, 0.4, 0.4, 0.7, 0.1, 1.0], 7, list(np.linspace(0, 1, 29)), 0.7, 0.2),
        ([0.0, 0.0, 0.0, 0.0, 0.0], 5, None, 0.5, 0.3),
    ],
)
def test_capital_matches_scalar_oracle(bet, xs, n, grid, c, alpha):
    paired = 0.5 in xs
    binary = all(v in (0.0, 0.5, 1.0) for v in xs)
    st = cs_init(n, bet=bet, c=c, alpha=alpha, grid=grid, paired=paired, binary=binary)
    for x in xs:
        st = cs_update(st, [[x]])
    logk, rej = _reference_capital(xs, n, st.grid, bet, c, alpha)
    np.testing.assert_allclose(st.log_capital[0], logk, rtol=1e-11, atol=1e-11)
    np.testing.assert_array_equal(st.rejected[0], rej)
    assert st.total[0] == pytest.approx(sum(xs), abs=1e-12)
    assert st.t[0] == len(xs)
    # the whole batch at once: identical state
    batch = cs_update(cs_init(n, bet=bet, c=c, alpha=alpha, grid=grid, paired=paired), [xs])
    np.testing.assert_array_equal(batch.log_capital, st.log_capital)
    np.testing.assert_array_equal(batch.rejected, st.rejected)
    # several sessions in lockstep equal each alone
    rev = xs[::-1]
    two = cs_init(n, sessions=2, bet=bet, c=c, alpha=alpha, grid=grid, paired=paired)
    two = cs_update(two, [xs, rev])
    np.testing.assert_array_equal(two.log_capital[0], st.log_capital[0])
    logk_r, rej_r = _reference_capital(rev, n, st.grid, bet, c, alpha)
    np.testing.assert_allclose(two.log_capital[1], logk_r, rtol=1e-11, atol=1e-11)
    np.testing.assert_array_equal(two.rejected[1], rej_r)
    assert two.rejected.any()  # the cases reach 1/alpha for some candidate


@pytest.mark.parametrize("bet", ["agrapa", "plugin", "mixture"])
def test_martingale_and_validity_by_enumeration(bet):
    # all 5! orders of {0, 0, 1, 1, 1}: E K_t(m*) = 1 at every t, and the CS misses m* in at most
    # alpha of the orders (Ville); at t = N the interval is the exact mean
    pop = np.array([0.0, 0.0, 1.0, 1.0, 1.0])
    orders = np.array(list(itertools.permutations(range(5))))
    x = pop[orders]
    st = cs_init(5, sessions=len(orders), bet=bet, alpha=0.3)
    j = 3  # grid k/5: m* = 3/5
    misses = np.zeros(len(orders), dtype=bool)
    for t in range(5):
        cs_update(st, x[:, t : t + 1], inplace=True)
        np.testing.assert_allclose(np.exp(combined_log_capital(st)[:, j]).mean(), 1.0, rtol=1e-12)
        lo, hi = cs_interval(st)
        misses |= (lo > 0.6 + 1e-12) | (hi < 0.6 - 1e-12)
    assert misses.mean() <= 0.3
    np.testing.assert_array_equal(lo, 0.6)
    np.testing.assert_array_equal(hi, 0.6)


# -- intervals from hand-built states ----------------------------------------------------------
def _state(grid, n, t, total, rejected, exact):
    st = cs_init(n, grid=grid, binary=exact)
    st.t[:] = t
    st.total[:] = total
    st.rejected[0] = rejected
    st.exact_grid = exact  # as stated (a hand-built state)
    return st


def test_interval_exact_grid_hull_and_range():
    # N = 4 after t = 2 with S = 1: feasible means [1/4, 3/4]
    f, t_ = False, True
    cases = [
        ([f, f, f, f, f], (0.25, 0.75)),  # 0 and 1 are outside the range
        ([f, f, t_, f, f], (0.25, 0.75)),  # hull of 1/4 and 3/4
        ([t_, t_, f, t_, t_], (0.5, 0.5)),
        ([f, t_, f, f, f], (0.5, 0.75)),  # 0 survives but is infeasible
        ([f, f, f, t_, f], (0.25, 0.5)),  # 1 survives but is infeasible
        ([t_, t_, t_, t_, t_], (0.25, 0.75)),  # nothing survives: the range itself
        ([f, t_, t_, t_, f], (0.25, 0.75)),  # only infeasible survivors: the range
    ]
    for rej, (lo, hi) in cases:
        got = cs_interval(_state(Q, 4, 2, 1.0, rej, True))
        assert (got[0].tolist(), got[1].tolist()) == ([lo], [hi]), rej


def test_interval_feasible_range_ends_and_tolerance():
    # S = 0 after 1 item: range [0, 3/4]; S = 1 after 1: [1/4, 1]
    st = _state(Q, 4, 1, 0.0, [False] * 5, True)
    assert [v.tolist() for v in cs_interval(st)] == [[0.0], [0.75]]
    st = _state(Q, 4, 1, 1.0, [False] * 5, True)
    assert [v.tolist() for v in cs_interval(st)] == [[0.25], [1.0]]
    # candidates within 1e-12 of a range end count as feasible (and the ends are the range's)
    g = Q + np.array([0.0, -5e-13, 0.0, 5e-13, 0.0])
    st = _state(g, 4, 2, 1.0, [True, False, True, False, True], True)
    assert [v.tolist() for v in cs_interval(st)] == [[0.25], [0.75]]
    # ... but not beyond it
    g = Q + np.array([0.0, -3e-12, 0.0, 3e-12, 0.0])
    st = _state(g, 4, 2, 1.0, [True, False, False, False, True], True)
    assert [v.tolist() for v in cs_interval(st)] == [[0.5], [0.5]]
    st = _state(g, 4, 2, 1.0, [True, False, True, False, True], True)
    assert [v.tolist() for v in cs_interval(st)] == [[0.25], [0.75]]  # nothing feasible


def test_interval_fine_grid_is_widened_by_one_step():
    g = np.linspace(0, 1, 11)  # not exact for N = 4
    # N = 4, t = 1, S = 0.3: range [0.075, 0.825]; survivors 0.4, 0.5 -> [0.3, 0.6]
    rej = [True] * 4 + [False] * 2 + [True] * 5
    st = _state(g, 4, 1, 0.3, rej, False)
    assert st.exact_grid is False
    lo, hi = cs_interval(st)
    np.testing.assert_allclose([lo[0], hi[0]], [0.3, 0.6], atol=1e-15)
    # survivors 0.1 .. 0.8 -> widened to [0, 0.9], cut to the range
    rej = [True] + [False] * 8 + [True] * 2
    lo, hi = cs_interval(_state(g, 4, 1, 0.3, rej, False))
    assert (lo[0], hi[0]) == (0.075, 0.825)
    # ends of the grid: survivors at 0 and at 1 stay (no wrap-around)
    rej = [False, False] + [True] * 9
    lo, hi = cs_interval(_state(g, 4, 1, 0.0, rej, False))
    np.testing.assert_allclose([lo[0], hi[0]], [0.0, 0.2], atol=1e-15)
    rej = [True] * 9 + [False, False]
    lo, hi = cs_interval(_state(g, 4, 1, 1.0, rej, False))
    np.testing.assert_allclose([lo[0], hi[0]], [0.8, 1.0], atol=1e-15)
    rej = [False] + [True] * 10
    lo, hi = cs_interval(_state(g, 4, 1, 0.0, rej, False))
    np.testing.assert_allclose([lo[0], hi[0]], [0.0, 0.1], atol=1e-15)
    rej = [True] * 10 + [False]
    lo, hi = cs_interval(_state(g, 4, 3, 3.0, rej, False))
    np.testing.assert_allclose([lo[0], hi[0]], [0.9, 1.0], atol=1e-15)
    # same survivors on an exact grid: no widening
    rej = [True] * 4 + [False] * 2 + [True] * 5
    st = _state(g, 2, 1, 0.5, rej, True)
    assert st.exact_grid is True
    lo, hi = cs_interval(st)
    np.testing.assert_allclose([lo[0], hi[0]], [0.4, 0.5], atol=1e-15)


def test_interval_at_exhaustion_is_the_exact_mean():
    # a grid point 5e-13 above 1/3 (the grid still counts as exact): at t = N the ends are S/N
    g = np.array([0.0, 1 / 3 + 5e-13, 2 / 3, 1.0])
    st = cs_init(3, grid=g)
    assert st.exact_grid is True
    st.t[:] = 3
    st.total[:] = 1.0
    lo, hi = cs_interval(st)
    assert lo.tolist() == [1 / 3] and hi.tolist() == [1 / 3]
    # ... also when the only survivor lies 5e-13 below S/N
    g = np.array([0.0, 1 / 3 - 5e-13, 2 / 3, 1.0])
    below = cs_init(3, grid=g)
    assert below.exact_grid is True
    below.t[:] = 3
    below.total[:] = 1.0
    below.rejected[0] = [True, False, True, True]
    lo, hi = cs_interval(below)
    assert lo.tolist() == [1 / 3] and hi.tolist() == [1 / 3]
    # one step earlier the same survivor sets the lower end
    st.t[:] = 2
    st.rejected[0] = [True, False, True, True]
    lo, hi = cs_interval(st)
    assert lo.tolist() == [1 / 3 + 5e-13] and hi.tolist() == [1 / 3 + 5e-13]


def test_interval_several_sessions():
    st = cs_init(4, sessions=3)
    st.t[:] = [0, 2, 4]
    st.total[:] = [0.0, 1.0, 3.0]
    st.rejected[:] = [
        [True, False, False, False, True],
        [False, False, False, False, False],
        [False, False, False, False, False],
    ]
    lo, hi = cs_interval(st)
    assert lo.tolist() == [0.25, 0.25, 0.75] and hi.tolist() == [0.75, 0.75, 0.75]
    # each session its own hull
    st = cs_init(4, sessions=3)
    st.rejected[:] = [
        [False, False, True, True, True],
        [True, True, True, False, False],
        [True, False, True, False, True],
    ]
    lo, hi = cs_interval(st)
    assert lo.tolist() == [0.0, 0.75, 0.25] and hi.tolist() == [0.25, 1.0, 0.75]
    # a session with no survivor gets its range, even beside one with survivors (grid 0.2, 0.5,
    # 0.8: not exact, widened by a step)
    st = cs_init(4, sessions=2, grid=[0.2, 0.5, 0.8])
    assert st.exact_grid is False
    st.t[:] = 1
    st.total[:] = [0.0, 1.0]
    st.rejected[:] = [[True, True, True], [True, False, True]]
    lo, hi = cs_interval(st)
    assert lo.tolist() == [0.0, 0.25] and hi.tolist() == [0.75, 0.8]


def test_interval_range_tolerance_is_inclusive():
    # candidates exactly 1e-12 outside the range [1/4, 3/4] (N = 4, t = 2, S = 1) still count
    g = np.array([0.0, 0.25 - 1e-12, 0.5, 0.75 + 1e-12, 1.0])
    st = _state(g, 4, 2, 1.0, [True, False, False, True, True], True)
    assert [v.tolist() for v in cs_interval(st)] == [[0.25], [0.5]]
    st = _state(g, 4, 2, 1.0, [True, True, False, False, True], True)
    assert [v.tolist() for v in cs_interval(st)] == [[0.5], [0.75]]


# -- whole paths -------------------------------------------------------------------------------
def test_confidence_sequence_path_and_arguments():
    x = [1.0, 0.0, 1.0, 1.0]
    path = confidence_sequence(x, n_items=6, alpha=0.3, bet="plugin", c=0.4)
    st = path.state
    assert (st.alpha, st.bet, st.c, st.n_items, st.exact_grid) == (0.3, "plugin", 0.4, 6, True)
    assert st.grid.size == 7 and path.lower.shape == (1, 4) and path.upper.shape == (1, 4)
    # the path equals cs_update + cs_interval item by item; every interval is feasible
    ref = cs_init(6, alpha=0.3, bet="plugin", c=0.4)
    for j, v in enumerate(x):
        ref = cs_update(ref, [[v]])
        lo, hi = cs_interval(ref)
        assert (path.lower[0, j], path.upper[0, j]) == (lo[0], hi[0])
        s, t = sum(x[: j + 1]), j + 1
        assert s / 6 <= lo[0] <= hi[0] <= (s + 6 - t) / 6
    np.testing.assert_array_equal(st.log_capital, ref.log_capital)
    # a whole population: exact mean at the end, with several sessions
    full = confidence_sequence([[1, 0, 1], [0, 0, 1]], n_items=3)
    np.testing.assert_array_equal(full.lower[:, -1], [2 / 3, 1 / 3])
    np.testing.assert_array_equal(full.upper[:, -1], [2 / 3, 1 / 3])
    assert full.lower[:, 0].tolist() == [1 / 3, 0.0] and full.upper[:, 0].tolist() == [1.0, 2 / 3]


def test_confidence_sequence_grid_choice():
    # 0/1 values: lattice k/N; halves: paired lattice or the fine grid; explicit grid wins
    assert confidence_sequence([1.0, 0.0], n_items=4).state.grid.size == 5
    p = confidence_sequence([1.0, 0.5], n_items=4, paired=True).state
    assert p.grid.size == 9 and p.exact_grid is True
    f = confidence_sequence([1.0, 0.5], n_items=4).state
    assert f.grid.size == 4001 and f.exact_grid is False
    f = confidence_sequence([1.0, 0.25], n_items=4, paired=True).state
    assert f.grid.size == 4001 and f.exact_grid is False
    b = confidence_sequence([1.0, 0.0], n_items=4, binary=False).state
    assert b.grid.size == 4001 and b.exact_grid is False
    g = confidence_sequence([1.0, 0.0], n_items=4, grid=[0.0, 0.3, 1.0]).state
    assert g.grid.tolist() == [0.0, 0.3, 1.0] and g.exact_grid is False
    # fractions are widened by one grid step: after 0.3 of N = 2 nothing is rejected yet
    path = confidence_sequence([0.3], n_items=2, grid=np.linspace(0, 1, 11))
    np.testing.assert_allclose([path.lower[0, 0], path.upper[0, 0]], [0.15, 0.65], atol=1e-15)


def test_confidence_sequence_bad_inputs():
    with pytest.raises(ValueError, match=r"^x: expected shape \(S, T\) or \(T,\)"):
        confidence_sequence(np.zeros((1, 2, 2)), n_items=4)
    with pytest.raises(ValueError, match=r"^x: more values than the 2 items of the population"):
        confidence_sequence([1.0, 0.0, 1.0], n_items=2)
    with pytest.raises(ValueError, match=r"^x: values must be finite"):
        confidence_sequence([1.0, 2.0], n_items=4)
    with pytest.raises(ValueError, match=r"^alpha"):
        confidence_sequence([1.0], n_items=4, alpha=0.0)


# -- paired values and decisions ---------------------------------------------------------------
def test_paired_values_and_difference_interval():
    got = paired_values([1.0, 0.0, 1.0, 0.0, 0.5], [0.0, 1.0, 1.0, 0.0, 0.25])
    np.testing.assert_array_equal(got, [1.0, 0.0, 0.5, 0.5, 0.625])
    np.testing.assert_array_equal(
        paired_values([[1.0], [0.0]], [1.0, 0.0]), [[0.5, 1.0], [0.0, 0.5]]
    )
    for bad in (-0.1, 1.1, np.nan):
        with pytest.raises(ValueError, match=r"^y_model: values must be finite and in"):
            paired_values([bad], [0.0])
        with pytest.raises(ValueError, match=r"^y_baseline: values must be finite"):
            paired_values([0.0], [bad])
    assert paired_values([], []).size == 0
    # the result is float64 whatever the inputs' float type (e.g. long double)
    third = np.array([1, 2], dtype=np.longdouble) / 3
    assert paired_values(third, [0.0, 0.0]).dtype == np.float64
    assert paired_values([0.0, 0.0], third).dtype == np.float64
    # 0/1 results stored as uint8 (as in the GPQA matrix) do not wrap around
    c = np.array([[0, 1, 1], [1, 0, 1]], dtype=np.uint8)
    np.testing.assert_array_equal(paired_values(c[0], c[1]), [0.0, 1.0, 0.5])
    lo, hi = difference_interval([0.25, 0.5], [0.75, 1.0])
    assert lo.tolist() == [-0.5, 0.0] and hi.tolist() == [0.5, 1.0]
    lo, hi = difference_interval(0.5, 0.5)
    assert (float(lo), float(hi)) == (0.0, 0.0)


def test_decide_boundaries():
    lo = np.array([0.0, -0.1, -0.02, -0.02, -0.021, 0.01, -0.01, 0.0])
    hi = np.array([0.1, 0.0, 0.02, 0.021, 0.02, 0.015, -0.005, 0.0])
    d = decide(lo, hi, margin=0.02)
    assert d.dtype == np.int8
    assert d.tolist() == [
        UNDECIDED,  # lower = 0 does not exclude 0
        UNDECIDED,  # upper = 0 does not exclude 0
        EQUIVALENT,  # both ends on the margin
        UNDECIDED,
        UNDECIDED,
        BETTER,  # inside the margin but above 0
        WORSE,
        EQUIVALENT,
    ]
    assert decide(lo, hi).tolist() == [0, 0, 0, 0, 0, BETTER, WORSE, 0]
    assert decide(0.0, 0.0, margin=0.0).tolist() == EQUIVALENT
    assert decide([-0.1], [0.2], margin=0.5).tolist() == [EQUIVALENT]
    assert decide([0.1, -0.3], 0.2).tolist() == [BETTER, UNDECIDED]
    for bad in (-0.01, np.nan, np.inf):
        with pytest.raises(ValueError, match=r"^margin: must be a non-negative number"):
            decide(lo, hi, margin=bad)
    assert decision_names([0, 1, 2, 3]).tolist() == ["undecided", "better", "worse", "equivalent"]
    assert decision_names(np.int8(2)).tolist() == "worse"


def test_precision_met_boundaries():
    lo = np.array([-0.1, 0.0, 0.2])
    hi = np.array([0.1, 0.3, 0.2])
    assert precision_met(lo, hi, 0.1).tolist() == [True, False, True]
    assert precision_met(lo, hi, 0.15).tolist() == [True, True, True]
    assert precision_met([0.0], [0.25], 0.125).tolist() == [True]
    assert precision_met([0.0], [0.25], 0.124).tolist() == [False]
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match=r"^precision: must be a positive number"):
            precision_met(lo, hi, bad)


def test_decide_compares_exact_values_and_broadcasts():
    # float32 ends are compared at their exact values: float32(0.02) = 0.0199999995529...
    # lies outside a margin 1e-12 below it (a float32 comparison would round the margin onto it)
    a = float(np.float32(0.02))
    margin = a - 1e-12
    assert decide(np.array([-a], dtype=np.float32), [0.01], margin=margin).tolist() == [UNDECIDED]
    assert decide([-0.01], np.array([a], dtype=np.float32), margin=margin).tolist() == [UNDECIDED]
    assert decide([-0.01], [0.01], margin=margin).tolist() == [EQUIVALENT]
    # a scalar lower end against several upper ends
    assert decide(0.1, [0.2, 0.3]).tolist() == [BETTER, BETTER]
    assert decide(-0.1, [0.05, -0.05], margin=0.1).tolist() == [EQUIVALENT, WORSE]


def test_decision_names_from_stored_codes():
    # codes read back as floats (e.g. from JSON) name the same decisions
    assert decision_names(np.array([3.0, 0.0, 1.0])).tolist() == [
        "equivalent",
        "undecided",
        "better",
    ]
    assert decision_names([2.0]).tolist() == ["worse"]


def test_rejection_is_sticky():
    # N = 10, x = (1, 0), m = 0.2 (agrapa, c = 1/2), by hand:
    # t = 1: mu = 0.2, D = 0.3, lam = 0.3 / 0.34, K1 = 1 + 0.8 lam = 1.7059 >= 1/alpha = 5/3
    # t = 2: mu = (2 - 1)/9, mu_hat = 3/4, s2 = 1/4, D = 3/4 - 1/9, K2 = K1 (1 - lam2 / 9) < 5/3
    k1 = 1 + 0.8 * 0.3 / 0.34
    d2 = 0.75 - 1 / 9
    k2 = k1 * (1 - d2 / (0.25 + d2 * d2) / 9)
    assert k2 < 1 / 0.6 <= k1
    st = cs_update(cs_init(10, alpha=0.6), [[1.0]])
    assert st.rejected[0, 2]
    st = cs_update(st, [[0.0]])
    np.testing.assert_allclose(np.exp(st.log_capital[0, 0, 2]), k2, rtol=1e-13)
    assert st.rejected[0, 2]
    lo, _ = cs_interval(st)
    assert lo[0] > 0.2


def test_no_floating_point_errors_at_the_grid_ends():
    # candidates 0 and 1 (mu = 0 or 1) have finite bet bounds: no division by zero, no log(0)
    with np.errstate(all="raise"):
        for bet in ("agrapa", "plugin", "mixture"):
            confidence_sequence([1, 0, 0, 1, 1, 0, 1, 1, 1, 1], n_items=10, bet=bet)
            confidence_sequence([0.5] * 6, n_items=6, bet=bet, paired=True)
            confidence_sequence([0.3, 0.9, 0.0, 1.0], n_items=4, bet=bet)


def test_long_double_inputs_are_read_as_float64():
    ld = np.longdouble
    # conditional_mean returns float64 whatever the inputs' float type
    m = np.array([0.25, 0.5], dtype=ld)
    assert conditional_mean(m, 1.0, 1, 4).dtype == np.float64
    assert conditional_mean([0.5], np.array(1, dtype=ld), 1, 4).dtype == np.float64
    assert conditional_mean([0.5], 1.0, np.array(1, dtype=ld), 4).dtype == np.float64
    # values fed as long double give exactly the state of their float64 roundings
    x = np.array([[1, 2, 1, 7, 3, 9]], dtype=ld) / np.array([3, 3, 10, 10, 7, 11], dtype=ld)
    for bet in ("agrapa", "plugin", "mixture"):
        a = cs_update(cs_init(8, bet=bet, binary=False), x)
        b = cs_update(cs_init(8, bet=bet, binary=False), x.astype(np.float64))
        for name in ("total", "sq", "log_capital", "rejected"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    # grid exactness is judged on the float64 grid (the one cs_init stores)
    v = ld(0.5) + ld(1e-12) + ld(2.0) ** -64
    assert float(v) - 0.5 <= 1e-12
    assert grid_is_exact(np.array([0, v, 1], dtype=ld), 2) is True


def test_grid_is_exact_tolerance_is_inclusive():
    # the first point 1e-12 from 0 (exactly, in floating point) still counts
    assert grid_is_exact([1e-12, 0.5, 1.0], 2) is True
    assert grid_is_exact([2e-12, 0.5, 1.0], 2) is False
    assert cs_init(2, grid=[1e-12, 0.5, 1.0]).exact_grid is True


def test_confidence_sequence_reads_values_as_float64():
    # a long-double half that rounds to 1/2 in float64 is a paired tie: the exact paired lattice
    ld = np.longdouble
    x = np.array([1, ld(0.5) + ld(2.0) ** -60, 0], dtype=ld)
    assert x[1] != 0.5 and float(x[1]) == 0.5
    st = confidence_sequence(x, n_items=4, paired=True).state
    assert st.grid.size == 9 and st.exact_grid is True
    assert st.total.tolist() == [1.5]
