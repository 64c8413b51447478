"""Mutation-driven tests for the driver of ``app.core.irt.fit.fit_irt`` and its spectral start.

Oracles:

* the spectral start against a full ``np.linalg.svd`` of the centred (masked) responses where the
  randomized range finder is exact (centred matrix of rank < ``k``, or ``k = min(m, n)``), and
  against Halko, Martinsson & Tropp (2011) Algorithm 4.3 (``orth((A A')^2 A Omega)``, no
  re-orthonormalisation between the power steps) written out here for a full-rank matrix; the
  generator draws are replayed in the documented order (test matrix, padding, jitters);
* the documented initialisation ``b_i = -logit(p_i) / D`` with ``p_i`` the smoothed p-value over
  the observed entries, computed with ``math.fsum``;
* the negative log posterior written from the docstring formula (``logaddexp``) for ``loss``;
* the documented EM schedule (the round after the hyperparameters move by < 2 % is the last,
  intermediate rounds at a 10x looser tolerance, gradient tolerance ``tol * max(m, n)``, one
  shared iteration budget), checked with a recording stand-in for ``_lbfgs`` and a scripted
  ``_update_hyper`` whose hyperparameter moves are chosen by hand around the 2 % threshold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import app.core.irt.fit as irt
from app.core.irt.fit import Hyper, Layout, _OptResult, fit_irt, make_objective_mixed


# ---------------------------------------------------------------------------------------------
# spectral initialisation
# ---------------------------------------------------------------------------------------------
def _smoothed_pvalues(y, mask):
    m, n = y.shape
    obs = np.ones((m, n), bool) if mask is None else np.asarray(mask, bool)
    p = np.empty(n)
    for i in range(n):
        vals = [float(y[j, i]) for j in range(m) if obs[j, i]]
        p[i] = (math.fsum(vals) + 0.5) / (len(vals) + 1.0)
    return p, obs.astype(float)


def _halko_43(a, omega):
    z = a @ omega
    for _ in range(2):
        z = a @ (a.T @ z)
    q, _ = np.linalg.qr(z)
    ub, _, _ = np.linalg.svd(q.T @ a, full_matrices=False)
    return q @ ub


def _spectral_errors(y, dims, seed, mask=None, oracle="svd"):
    """Max abs differences of (theta0, a0) from the oracle start with the replayed draws."""
    m, n = y.shape
    model = fit_irt(y, dims=dims, mask=mask, max_iter=0, rng=seed, prior="fixed")
    p, w = _smoothed_pvalues(y, mask)
    yc = (np.where(w > 0, y, 0.0) - p) * w
    k = min(dims + 5, m, n)
    gen = np.random.default_rng(seed)
    omega = gen.standard_normal((n, k))
    pad = gen.standard_normal((m, dims - k)) if k < dims else np.zeros((m, 0))
    jit_theta = gen.standard_normal((m, dims))
    jit_a = gen.standard_normal((n, dims))
    if oracle == "svd":
        u = np.linalg.svd(yc)[0][:, : min(dims, k)]
    else:
        u = _halko_43(yc, omega)[:, :dims]
    u = np.hstack([u, 0.1 * pad / np.sqrt(m)])
    # singular vectors are defined up to sign: take the signs of the fitted start
    u_fit = (model.theta - 0.1 * jit_theta) / np.sqrt(m)
    u = u * np.where(np.sum(u * u_fit, axis=0) < 0, -1.0, 1.0)
    theta0 = np.sqrt(m) * u + 0.1 * jit_theta
    a0 = yc.T @ u / (np.sqrt(m) * p * (1.0 - p))[:, None] + 0.01 * jit_a
    return np.max(np.abs(model.theta - theta0)), np.max(np.abs(model.a - a0))


def _low_rank_responses(m, n, seed):
    """Fractional responses whose centred matrix has rank 3 with well separated singular values."""
    r = np.random.default_rng(seed)
    s1, s2 = r.standard_normal(m), r.standard_normal(m)
    t1, t2 = r.standard_normal(n), r.standard_normal(n)
    y = 0.5 + 0.1 * np.outer(s1, t1) + 0.04 * np.outer(s2, t2) + 0.1 * r.uniform(-1, 1, n)
    assert y.min() > 0 and y.max() < 1
    return y


def test_spectral_start_is_the_top_singular_subspace_of_a_low_rank_matrix():
    # rank(yc) = 3 < k = 7: the range finder is exact whatever the draws and power steps
    err_t, err_a = _spectral_errors(_low_rank_responses(30, 20, 1), dims=2, seed=3)
    assert err_t < 1e-9 and err_a < 1e-9


@pytest.mark.parametrize(
    ("m", "n", "dims"),
    [
        (6, 20, 3),  # k = m < dims + 5: the range is all of R^m
        (20, 6, 3),  # k = n < dims + 5
        (4, 9, 6),  # k = m < dims: padding columns 0.1 N(0, 1) / sqrt(m)
        (9, 3, 5),  # k = n < dims: padding
    ],
)
def test_spectral_start_with_k_the_full_range(m, n, dims):
    y = (np.random.default_rng(m * n).random((m, n)) < 0.5).astype(float)
    err_t, err_a = _spectral_errors(y, dims=dims, seed=4)
    assert err_t < 1e-9 and err_a < 1e-9


@pytest.mark.parametrize("masked", [False, True])
def test_spectral_start_is_a_two_step_power_range_finder(masked):
    # full-rank matrix with a slowly decaying spectrum: the top-2 subspace after two power
    # steps differs from the exact one by O(0.1), so the oracle must be the same algorithm
    r = np.random.default_rng(11)
    y = r.random((30, 20))
    mask = r.random((30, 20)) < 0.8 if masked else None
    err_t, err_a = _spectral_errors(y, dims=2, seed=5, mask=mask, oracle="halko")
    assert err_t < 1e-9 and err_a < 1e-9
    # and it is not the exact SVD (so the test above can tell the number of power steps)
    err_svd, _ = _spectral_errors(y, dims=2, seed=5, mask=mask, oracle="svd")
    assert err_svd > 1e-2


# ---------------------------------------------------------------------------------------------
# inputs: dtype, mask coercion
# ---------------------------------------------------------------------------------------------
def test_float32_responses_are_used_at_their_exact_float64_values():
    y32 = np.random.default_rng(2).random((50, 7)).astype(np.float32)
    model = fit_irt(y32, dims=1, prior="fixed", max_iter=0, rng=0)
    p, _ = _smoothed_pvalues(y32.astype(np.float64), None)
    np.testing.assert_allclose(model.b, -(np.log(p) - np.log1p(-p)), rtol=1e-14, atol=0)


def test_integer_mask_means_nonzero_is_observed():
    r = np.random.default_rng(6)
    y = (r.random((12, 5)) < 0.6).astype(float)
    counts = r.integers(0, 4, (12, 5))  # e.g. attempt counts: 0 = missing
    model = fit_irt(y, dims=2, mask=counts, prior="fixed", max_iter=0, rng=0)
    p, _ = _smoothed_pvalues(y, counts != 0)
    np.testing.assert_allclose(model.b, -(np.log(p) - np.log1p(-p)) / 2, rtol=1e-14, atol=0)


# ---------------------------------------------------------------------------------------------
# returned loss: the objective of the requested precision at the returned parameters
# ---------------------------------------------------------------------------------------------
def _neg_log_posterior(x, y, w, lay, hyp):
    theta, a, b = lay.unpack(x)
    c = (a * b).sum(axis=1) if lay.per_dim else lay.d * b
    z = theta @ a.T - c
    f = np.sum(w * (np.logaddexp(0.0, z) - y * z)) + 0.5 * np.sum(theta**2)
    f += 0.5 * np.sum((a - hyp.mu_a) ** 2 / hyp.sd_a**2)
    return f + 0.5 * np.sum((b - hyp.mu_b) ** 2) / hyp.sd_b**2


def _problem():
    r = np.random.default_rng(21)
    theta = r.standard_normal((25, 1))
    y = (r.random((25, 14)) < 1 / (1 + np.exp(-(1.5 * theta - np.linspace(-1, 1, 14))))).astype(
        float
    )
    mask = r.random((25, 14)) < 0.75
    return y, mask


@pytest.mark.parametrize("prior", ["fixed", "hierarchical"])
def test_float64_loss_is_the_masked_negative_log_posterior(prior):
    y, mask = _problem()
    model = fit_irt(
        y, dims=2, mask=mask, prior=prior, precision="float64", rng=1, a_scale=1.5, b_scale=0.7
    )
    lay = Layout(25, 14, 2, False)
    h = model.hyper
    hyp = Hyper(mu_a=h["mu_a"], sd_a=h["sd_a"], mu_b=h["mu_b"], sd_b=h["sd_b"])
    x = np.concatenate([model.theta.ravel(), model.a.ravel(), model.b.ravel()])
    w = mask.astype(float)
    assert model.loss == pytest.approx(_neg_log_posterior(x, y * w, w, lay, hyp), rel=1e-12)
    assert model.n_iter > 0


def test_mixed_precision_loss_is_the_mixed_objective():
    y, mask = _problem()
    model = fit_irt(y, dims=2, mask=mask, prior="fixed", rng=1, max_iter=15)
    lay = Layout(25, 14, 2, False)
    hyp = Hyper(mu_a=np.zeros(2), sd_a=np.ones(2), mu_b=0.0, sd_b=1.0)
    x = np.concatenate([model.theta.ravel(), model.a.ravel(), model.b.ravel()])
    w = mask.astype(float)
    f_mixed = make_objective_mixed(y * w, w, lay, hyp)(x)[0]
    f_exact = _neg_log_posterior(x, y * w, w, lay, hyp)
    assert model.loss == pytest.approx(f_mixed, rel=1e-14)
    # the two precisions are distinguishable here, so the line above pins the dispatch
    assert abs(f_mixed - f_exact) > 1e-10 * abs(f_exact)
    assert 0 < model.n_iter <= 15


# ---------------------------------------------------------------------------------------------
# the EM schedule, with a recording L-BFGS and a scripted hyperparameter update
# ---------------------------------------------------------------------------------------------
class _Recorder:
    def __init__(self, nit=3):
        self.calls = []
        self.nit = nit
        self.updates = []

    def lbfgs(self, fun, x0, *, max_iter, ftol, gtol, memory=10):
        self.calls.append({"max_iter": max_iter, "ftol": ftol, "gtol": gtol, "x0": x0.copy()})
        x = x0 + 1.0  # visible step, so the next update must receive it
        nit = min(self.nit, max_iter)
        return _OptResult(x=x, fun=float(len(self.calls)), nit=nit, nfev=nit, success=True)

    def scripted(self, hypers):
        it = iter(hypers)

        def update(y_w, lay, x, hyp):
            self.updates.append({"w": y_w, "x": x.copy(), "hyp": hyp})
            mu_a, sd_a, mu_b, sd_b = next(it)
            d = lay.d
            return Hyper(
                mu_a=np.full(d, float(mu_a)),
                sd_a=np.full(d, float(sd_a)),
                mu_b=float(mu_b),
                sd_b=float(sd_b),
            )

        return update


def _run(monkeypatch, hypers, *, nit=3, **kwargs):
    rec = _Recorder(nit=nit)
    monkeypatch.setattr(irt, "_lbfgs", rec.lbfgs)
    monkeypatch.setattr(irt, "_update_hyper", rec.scripted(hypers))
    y = (np.random.default_rng(0).random((6, 8)) < 0.5).astype(float)
    kwargs.setdefault("dims", 1)
    kwargs.setdefault("rng", 0)
    model = fit_irt(y, **kwargs)
    return model, rec


def _loose_tight(rec, tol):
    out = []
    for call in rec.calls:
        if call["ftol"] == pytest.approx(tol, rel=1e-15):
            out.append("T")
        elif call["ftol"] == pytest.approx(10 * tol, rel=1e-15):
            out.append("L")
        else:
            out.append(call["ftol"])
    return out


# (a_scale, b_scale) and the scripted (mu_a, sd_a, mu_b, sd_b) after each update, with the
# expected tolerance of each L-BFGS run: moves are relative for sd, and relative to the new sd
# for mu; a move < 0.02 settles the prior and the following run is the last (tight) one.
SCHEDULES = {
    "never settles": ((1.0, 1.0), [(0, 1.5, 0, 1), (0, 1, 0, 1), (0, 1.5, 0, 1)], "LLLT"),
    "settles at once": ((1.0, 1.0), [(0, 1, 0, 1)], "LT"),
    "settles at once, sd != 1": ((2.0, 0.5), [(0, 2, 0, 0.5)], "LT"),
    "sd_a moves 3 %": ((1.0, 1.0), [(0, 1.03, 0, 1), (0, 1.03, 0, 1)], "LLT"),
    "sd_a moves 1.5 %": ((2.0, 1.0), [(0, 2.03, 0, 1)], "LT"),
    "sd_b moves 3 %": ((1.0, 1.0), [(0, 1, 0, 1.03), (0, 1, 0, 1.03)], "LLT"),
    "sd_b moves 1.5 %": ((1.0, 2.0), [(0, 1, 0, 2.03)], "LT"),
    "mu_a moves 0.03 sd": ((1.0, 1.0), [(0.03, 1, 0, 1), (0.03, 1, 0, 1)], "LLT"),
    "mu_a moves 0.015 sd_a=2": ((2.0, 1.0), [(0.03, 2, 0, 1)], "LT"),
    "mu_a moves 0.03 sd_a=0.5": ((0.5, 1.0), [(0.015, 0.5, 0, 1), (0.015, 0.5, 0, 1)], "LLT"),
    "mu_a stays off zero": ((1.0, 1.0), [(0.5, 1, 0, 1), (0.5, 1, 0, 1)], "LLT"),
    "mu_b moves 0.03 sd": ((1.0, 1.0), [(0, 1, 0.03, 1), (0, 1, 0.03, 1)], "LLT"),
    "mu_b moves 0.015 sd_b=2": ((1.0, 2.0), [(0, 1, 0.03, 2)], "LT"),
    "mu_b moves 0.03 sd_b=0.5": ((1.0, 0.5), [(0, 1, 0.015, 0.5), (0, 1, 0.015, 0.5)], "LLT"),
    "mu_b stays off zero": ((1.0, 1.0), [(0, 1, 0.5, 1), (0, 1, 0.5, 1)], "LLT"),
    "mu_b moves exactly 0.02": ((1.0, 1.0), [(0, 1, 0.02, 1), (0, 1, 0.02, 1)], "LLT"),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_em_schedule(monkeypatch, name):
    (a_scale, b_scale), hypers, expected = SCHEDULES[name]
    tol = 1e-4
    model, rec = _run(
        monkeypatch, hypers, tol=tol, em_rounds=3, max_iter=1000, a_scale=a_scale, b_scale=b_scale
    )
    assert "".join(map(str, _loose_tight(rec, tol))) == expected
    n_updates = len(expected) - 1
    assert len(rec.updates) == n_updates
    # every update sees the previous run's result and the current prior
    for r, upd in enumerate(rec.updates):
        np.testing.assert_array_equal(upd["x"], rec.calls[r]["x0"] + 1.0)
    mu_a, sd_a, mu_b, sd_b = hypers[n_updates - 1]
    assert model.hyper["sd_a"].tolist() == [sd_a] and model.hyper["mu_a"].tolist() == [mu_a]
    assert (model.hyper["mu_b"], model.hyper["sd_b"]) == (mu_b, sd_b)
    assert model.n_iter == 3 * len(expected)
    assert model.loss == float(len(expected)) and model.converged


def test_fixed_prior_is_a_single_tight_run(monkeypatch):
    model, rec = _run(monkeypatch, [], prior="fixed", tol=3e-5, max_iter=50, em_rounds=3)
    assert _loose_tight(rec, 3e-5) == ["T"]
    assert rec.updates == [] and model.n_iter == 3


def test_budget_tolerances_and_iteration_count(monkeypatch):
    y_shape = (6, 8)
    hypers = [(0, 1.5, 0, 1), (0, 1, 0, 1), (0, 1.5, 0, 1)]
    model, rec = _run(monkeypatch, hypers, nit=4, tol=1e-3, max_iter=11)
    # the budget is shared: 11, 11 - 4, 11 - 8, then 11 - 12 < 0 stops
    assert [c["max_iter"] for c in rec.calls] == [11, 7, 3]
    assert model.n_iter == 4 + 4 + 3
    for c in rec.calls:
        assert c["gtol"] == pytest.approx(c["ftol"] * max(y_shape), rel=1e-15)
    assert _loose_tight(rec, 1e-3) == ["L", "L", "L"]


def test_a_budget_of_one_iteration_runs_it(monkeypatch):
    model, rec = _run(monkeypatch, [], nit=1, prior="fixed", max_iter=1)
    assert [c["max_iter"] for c in rec.calls] == [1]
    assert model.n_iter == 1 and model.loss == 1.0


def test_documented_defaults(monkeypatch):
    hypers = [(0, 1.5, 0, 1), (0, 1, 0, 1), (0, 1.5, 0, 1), (0, 1, 0, 1), (0, 1.5, 0, 1)]
    rec = _Recorder(nit=1)
    monkeypatch.setattr(irt, "_lbfgs", rec.lbfgs)
    monkeypatch.setattr(irt, "_update_hyper", rec.scripted(hypers))
    y = (np.random.default_rng(0).random((12, 15)) < 0.5).astype(float)
    model = fit_irt(y, rng=0)
    assert model.dims == 10 and model.theta.shape == (12, 10)
    assert model.form == "scalar_difficulty" and model.prior == "hierarchical"
    assert len(rec.calls) == 4  # em_rounds = 3 updates
    assert [c["max_iter"] for c in rec.calls] == [400, 399, 398, 397]  # max_iter = 400
    assert _loose_tight(rec, 2e-5) == ["L", "L", "L", "T"]  # tol = 2e-5


def test_mask_reaches_the_start_the_objective_and_the_update(monkeypatch):
    y, mask = _problem()
    hypers = [(0.1, 0.8, 0.2, 0.9), (0.1, 0.8, 0.2, 0.9)]
    funs = []
    rec = _Recorder(nit=2)

    def lbfgs(fun, x0, **kw):
        funs.append(fun)
        return rec.lbfgs(fun, x0, **kw)

    monkeypatch.setattr(irt, "_lbfgs", lbfgs)
    monkeypatch.setattr(irt, "_update_hyper", rec.scripted(hypers))
    fit_irt(y, dims=2, mask=mask, precision="float64", rng=2, a_scale=1.3, b_scale=0.6)
    w = mask.astype(float)
    for upd in rec.updates:
        np.testing.assert_array_equal(upd["w"], w)
    lay = Layout(25, 14, 2, False)
    hyps = [Hyper(mu_a=np.zeros(2), sd_a=np.full(2, 1.3), mu_b=0.0, sd_b=0.6)]
    hyps += [Hyper(np.full(2, h[0]), np.full(2, h[1]), h[2], h[3]) for h in hypers]
    assert len(funs) == 3
    x = np.random.default_rng(3).normal(size=lay.size)
    for fun, hyp in zip(funs, hyps, strict=True):
        assert fun(x)[0] == pytest.approx(_neg_log_posterior(x, y * w, w, lay, hyp), rel=1e-12)
