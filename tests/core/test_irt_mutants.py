"""Mutation-driven tests for ``app.core.irt.fit`` (the MAP fit), all on tiny problems.

Oracles: the negative log posterior and its analytic gradient written out in the test from the
docstring's formulas (``F``, ``G = w (sigmoid(z) - y)``, ``dF/dtheta = G a + theta`` ...), the
defining equations of the Laplace-EM hyperparameter update (``mu = sum x / (k + sd^2 / 100)``,
``u`` the positive root of ``S u^2 + u - k = 0``), a convex quadratic with a known minimiser for
L-BFGS, and the documented initialisation (``b_i = -logit(p_i) / D`` with smoothed p-values).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from app.core.irt.fit import (
    Hyper,
    Layout,
    _lbfgs,
    _update_hyper,
    fit_irt,
    make_objective,
    make_objective_mixed,
)


def _reference(x, y, w, lay, hyp):
    theta, a, b = lay.unpack(x)
    d = lay.d
    c = (a * b).sum(axis=1) if lay.per_dim else d * b
    z = theta @ a.T - c
    w1 = np.ones_like(y) if w is None else w
    f = np.sum(w1 * (np.logaddexp(0, z) - y * z)) + 0.5 * np.sum(theta**2)
    f += (
        0.5 * np.sum((a - hyp.mu_a) ** 2 / hyp.sd_a**2)
        + 0.5 * np.sum((b - hyp.mu_b) ** 2) / hyp.sd_b**2
    )
    g_z = w1 * (expit(z) - y)
    gt = g_z @ a + theta
    ga = g_z.T @ theta + (a - hyp.mu_a) / hyp.sd_a**2
    col = g_z.sum(axis=0)
    if lay.per_dim:
        ga -= col[:, None] * b
        gb = -col[:, None] * a + (b - hyp.mu_b) / hyp.sd_b**2
    else:
        gb = -d * col + (b - hyp.mu_b) / hyp.sd_b**2
    return f, np.concatenate([gt.ravel(), ga.ravel(), gb.ravel()])


@pytest.mark.parametrize("per_dim", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("mixed", [False, True])
def test_objective_and_gradient_match_the_formulas(per_dim, masked, mixed):
    rng = np.random.default_rng(3)
    m, n, d = 6, 8, 3
    y = rng.random((m, n))
    w = (rng.random((m, n)) < 0.7).astype(float) if masked else None
    lay = Layout(m, n, d, per_dim)
    hyp = Hyper(mu_a=rng.normal(size=d), sd_a=rng.uniform(0.5, 2, d), mu_b=0.4, sd_b=0.8)
    x = rng.normal(size=lay.size)
    f_ref, g_ref = _reference(x, y, w, lay, hyp)
    make = make_objective_mixed if mixed else make_objective
    fun = make(y, w, lay, hyp)
    for _ in range(2):  # buffers are reused between calls
        f, g = fun(x)
        tol = 2e-6 if mixed else 1e-12
        assert f == pytest.approx(f_ref, rel=tol)
        np.testing.assert_allclose(g, g_ref, rtol=tol, atol=10 * tol)
        x = x * 0.5
        f_ref, g_ref = _reference(x, y, w, lay, hyp)


def test_layout_sizes_and_views():
    lay = Layout(3, 4, 2, False)
    assert (lay.nb, lay.size) == (4, 3 * 2 + 4 * 2 + 4)
    x = np.arange(lay.size, dtype=float)
    theta, a, b = lay.unpack(x)
    assert theta.shape == (3, 2) and a.shape == (4, 2) and b.shape == (4,)
    assert theta[0, 0] == 0 and a[0, 0] == 6 and b[0] == 14
    per = Layout(3, 4, 2, True)
    assert (per.nb, per.size) == (8, 6 + 8 + 8)
    assert per.unpack(np.zeros(per.size))[2].shape == (4, 2)


@pytest.mark.parametrize("per_dim", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_update_hyper_solves_its_defining_equations(per_dim, masked):
    rng = np.random.default_rng(4)
    m, n, d = 7, 5, 2
    lay = Layout(m, n, d, per_dim)
    x = rng.normal(size=lay.size)
    w = (rng.random((m, n)) < 0.6).astype(float) if masked else None
    hyp = Hyper(mu_a=np.zeros(d), sd_a=np.array([0.7, 1.3]), mu_b=0.0, sd_b=0.9)
    new = _update_hyper(w, lay, x, hyp)
    theta, a, b = lay.unpack(x)
    c = (a * b).sum(axis=1) if per_dim else d * b
    p = expit(theta @ a.T - c)
    h = p * (1 - p) * (1.0 if w is None else w)
    v_a = 1 / (h.T @ theta**2 + 1 / hyp.sd_a**2)
    hcol = h.sum(axis=0)
    v_b = (
        1 / (hcol[:, None] * a * a + 1 / hyp.sd_b**2)
        if per_dim
        else 1 / (d * d * hcol + 1 / hyp.sd_b**2)
    )
    for vals, var, sd_old, mu, sd in [
        *[(a[:, r], v_a[:, r], hyp.sd_a[r], new.mu_a[r], new.sd_a[r]) for r in range(d)],
        (b.ravel(), v_b.ravel(), hyp.sd_b, new.mu_b, new.sd_b),
    ]:
        k = vals.size
        assert mu == pytest.approx(vals.sum() / (k + sd_old**2 / 100.0), rel=1e-12)
        s = np.sum((vals - mu) ** 2 + var)
        u = 1 / sd
        assert u > 0 and s * u * u + u - k == pytest.approx(0.0, abs=1e-9 * k)
    assert isinstance(new.mu_b, float) and isinstance(new.sd_b, float)


def _quadratic(dim=5, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(dim, dim))
    hess = q @ q.T + 0.5 * np.eye(dim)
    rhs = rng.normal(size=dim)
    return hess, rhs, lambda x: (0.5 * x @ hess @ x - rhs @ x, hess @ x - rhs)


def test_lbfgs_minimises_a_quadratic():
    hess, rhs, fun = _quadratic()
    res = _lbfgs(fun, np.zeros(5), max_iter=200, ftol=0.0, gtol=1e-10)
    np.testing.assert_allclose(res.x, np.linalg.solve(hess, rhs), atol=1e-8)
    assert res.success and res.nit < 200 and res.nfev >= res.nit
    assert res.fun == pytest.approx(-0.5 * rhs @ np.linalg.solve(hess, rhs), rel=1e-12)


def test_lbfgs_stops_at_the_budget_and_at_a_zero_gradient():
    _, _, fun = _quadratic(seed=1)
    one = _lbfgs(fun, np.zeros(5), max_iter=1, ftol=0.0, gtol=1e-12)
    assert one.nit == 1 and not one.success and one.nfev >= 2
    assert one.fun < fun(np.zeros(5))[0]
    hess, rhs, _ = _quadratic(seed=1)
    opt = np.linalg.solve(hess, rhs)
    at = _lbfgs(fun, opt, max_iter=50, ftol=0.0, gtol=1e-6)
    assert at.success and at.nit == 1 and at.nfev == 1
    np.testing.assert_array_equal(at.x, opt)


def test_lbfgs_relative_decrease_stop_needs_more_than_min_iter():
    _, _, fun = _quadratic(seed=2)
    res = _lbfgs(fun, np.zeros(5), max_iter=500, ftol=1e30, gtol=0.0)
    assert res.success and res.nit == 11  # two small decreases in a row, after _MIN_ITER = 10


@pytest.mark.parametrize(
    ("kwargs", "msg"),
    [
        (
            {"form": "x"},
            r"^form: expected one of \('scalar_difficulty', 'per_dimension'\), got 'x'$",
        ),
        ({"init": "x"}, r"^init: expected 'spectral' or 'random', got 'x'$"),
        ({"prior": "x"}, r"^prior: expected one of \('hierarchical', 'fixed'\), got 'x'$"),
        ({"precision": "x"}, r"^precision: expected one of \('mixed', 'float64'\), got 'x'$"),
        ({"dims": 0}, r"^dims: expected a positive integer, got 0$"),
        ({"dims": True}, r"^dims: expected a positive integer, got True$"),
        ({"dims": 1.0}, r"^dims: expected a positive integer, got 1.0$"),
        (
            {"mask": np.ones((3, 3), bool)},
            r"^mask: shape \(3, 3\) does not match correct \(3, 4\)$",
        ),
    ],
)
def test_fit_argument_messages(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        fit_irt(np.zeros((3, 4)), **kwargs)


@pytest.mark.parametrize(
    ("y", "msg"),
    [
        (np.zeros(4), r"^correct: expected a non-empty 2-d array, got shape \(4,\)$"),
        (np.zeros((0, 4)), r"^correct: expected a non-empty 2-d array, got shape \(0, 4\)$"),
        (np.full((2, 2), 1.5), r"^correct: values must be finite and in \[0, 1\]$"),
        (np.full((2, 2), -0.5), r"^correct: values must be finite and in \[0, 1\]$"),
        (np.full((2, 2), np.inf), r"^correct: values must be finite and in \[0, 1\]$"),
    ],
)
def test_fit_data_messages(y, msg):
    with pytest.raises(ValueError, match=msg):
        fit_irt(y)


def test_zero_budget_returns_the_documented_initialisation():
    y = np.array([[1, 0, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    model = fit_irt(y, dims=2, prior="fixed", max_iter=0, rng=5, a_scale=2.0, b_scale=3.0)
    pval = (y.sum(axis=0) + 0.5) / (3 + 1.0)
    np.testing.assert_allclose(model.b, -np.log(pval / (1 - pval)) / 2, rtol=1e-14)
    assert model.n_iter == 0 and not model.converged and np.isnan(model.loss)
    assert model.seed == 5 and model.dims == 2 and model.form == "scalar_difficulty"
    assert model.hyper["sd_b"] == 3.0 and model.hyper["mu_b"] == 0.0
    np.testing.assert_array_equal(model.hyper["sd_a"], [2.0, 2.0])
    np.testing.assert_array_equal(model.hyper["mu_a"], [0.0, 0.0])


def test_zero_budget_random_init_and_masked_pvalues():
    y = np.array([[1, 0, 1], [1, 1, 1], [0, 0, 1], [1, 0, 0]], dtype=float)
    mask = np.array([[1, 1, 1], [0, 1, 1], [1, 1, 0], [1, 1, 1]], dtype=bool)
    model = fit_irt(y, dims=3, mask=mask, init="random", max_iter=0, rng=7)
    gen = np.random.default_rng(7)
    np.testing.assert_array_equal(model.theta, gen.standard_normal((4, 3)))
    np.testing.assert_array_equal(model.a, 0.1 * gen.standard_normal((3, 3)))
    obs = mask.sum(axis=0)
    pval = ((y * mask).sum(axis=0) + 0.5) / (obs + 1.0)
    np.testing.assert_allclose(model.b, -np.log(pval / (1 - pval)) / 3, rtol=1e-14)


def test_zero_budget_per_dimension_difficulty():
    y = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1]], dtype=float)
    model = fit_irt(y, dims=2, form="per_dimension", init="random", max_iter=0, rng=1)
    pval = (y.sum(axis=0) + 0.5) / 4.0
    a0 = model.a
    expected = -np.log(pval / (1 - pval))[:, None] * a0 / np.sum(a0 * a0, axis=1, keepdims=True)
    np.testing.assert_allclose(model.b, expected, rtol=1e-13)
    assert model.b.shape == (3, 2)


def test_fixed_prior_fit_reaches_a_stationary_point():
    rng = np.random.default_rng(8)
    theta = rng.standard_normal((40, 1))
    y = (rng.random((40, 12)) < expit(1.2 * theta - np.linspace(-1, 1, 12))).astype(float)
    model = fit_irt(y, dims=1, prior="fixed", precision="float64", rng=0, tol=1e-10, max_iter=2000)
    lay = Layout(40, 12, 1, False)
    hyp = Hyper(mu_a=np.zeros(1), sd_a=np.ones(1), mu_b=0.0, sd_b=1.0)
    x = np.concatenate([model.theta.ravel(), model.a.ravel(), model.b.ravel()])
    f, g = _reference(x, y, None, lay, hyp)
    assert np.max(np.abs(g)) < 1e-4
    assert model.loss == pytest.approx(f, rel=1e-10)
    assert model.converged and 0 < model.n_iter <= 2000
    assert model.prior == "fixed" and model.hyper["sd_a"].tolist() == [1.0]


def test_hierarchical_fit_uses_its_budget_and_updates_the_prior():
    rng = np.random.default_rng(9)
    theta = rng.standard_normal((30, 1))
    y = (rng.random((30, 10)) < expit(2.0 * theta - np.linspace(-2, 2, 10))).astype(float)
    model = fit_irt(y, dims=1, rng=0, max_iter=30)
    assert model.n_iter <= 30
    assert model.hyper["sd_a"][0] != 1.0 and model.hyper["sd_b"] != 1.0
    full = fit_irt(y, dims=1, rng=0, precision="float64", em_rounds=0)
    assert full.hyper["sd_b"] == 1.0  # no EM round: the starting prior stays
