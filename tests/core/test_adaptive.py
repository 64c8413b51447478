"""Adaptive (fluid) item choice and model-based estimates (app.core.sequential.fluid)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from app.core.irt.fit import fit_irt
from app.core.sequential.fluid import (
    FluidState,
    ItemBank,
    accuracy_gradient,
    accuracy_information,
    fisher_information,
    fluid_estimate,
    fluid_init,
    fluid_next,
    fluid_update,
    map_ability,
    normal_interval,
)


def _bank(n=60, d=3, seed=0) -> ItemBank:
    rng = np.random.default_rng(seed)
    return ItemBank.from_arrays(rng.normal(0.8, 0.4, (n, d)), rng.normal(0, 1.2, n))


def _num_grad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):  # finite differences over D coordinates
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def test_fisher_information_vs_finite_differences():
    bank = _bank()
    theta = np.array([0.3, -0.5, 0.8])
    info = fisher_information(bank, theta, items=[3, 17])[0]
    for k, j in enumerate([3, 17]):

        def logp(th, y, j=j):
            z = bank.a[j] @ th - bank.offset[j]
            return np.log(expit(z)) if y else np.log(expit(-z))

        p = expit(bank.a[j] @ theta - bank.offset[j])
        s1, s0 = _num_grad(lambda t: logp(t, 1), theta), _num_grad(lambda t: logp(t, 0), theta)
        expected = p * np.outer(s1, s1) + (1 - p) * np.outer(s0, s0)  # E[score score^T]
        np.testing.assert_allclose(info[k], expected, rtol=1e-5, atol=1e-8)


def test_accuracy_gradient_and_criterion():
    bank = _bank()
    theta = np.array([[0.1, 0.2, -0.3]])
    g = accuracy_gradient(bank, theta)[0]
    num = _num_grad(lambda t: bank.probabilities(t).mean(), theta[0])
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-10)
    crit = accuracy_information(bank, theta)[0]
    info = fisher_information(bank, theta)[0]
    np.testing.assert_allclose(crit, np.einsum("d,nde,e->n", g, info, g), rtol=1e-10)


def test_map_matches_scipy_and_covariance_is_inverse_hessian():
    bank = _bank(n=80)
    rng = np.random.default_rng(4)
    seen = rng.random((3, 80)) < 0.4
    y = (rng.random((3, 80)) < 0.5).astype(float)
    y[2] = rng.random(80)  # fractional targets work too
    theta, cov = map_ability(bank, y, seen)
    for s in range(3):  # three sessions, each against an independent optimiser

        def f(th, s=s):
            z = bank.a[seen[s]] @ th - bank.offset[seen[s]]
            yy = y[s, seen[s]]
            return np.sum(np.logaddexp(0, z) - yy * z) + 0.5 * th @ th

        ref = minimize(f, np.zeros(3), method="BFGS", options={"gtol": 1e-10})
        np.testing.assert_allclose(theta[s], ref.x, atol=1e-5)
        hess = np.array(
            [_num_grad(lambda t, i=i: _num_grad(f, t)[i], theta[s], h=1e-4) for i in range(3)]
        )
        np.testing.assert_allclose(np.linalg.inv(cov[s]), hess, rtol=1e-3, atol=1e-3)
    # warm start from the previous estimate reaches the same optimum
    theta2, _ = map_ability(bank, y, seen, theta + 0.5)
    np.testing.assert_allclose(theta2, theta, atol=1e-7)


def test_next_items_top_k_unseen_and_update_checks():
    bank = _bank()
    st = fluid_init(bank, sessions=2)
    nxt = fluid_next(bank, st, 5)
    crit = accuracy_information(bank, st.theta)
    np.testing.assert_array_equal(nxt[0], np.argsort(-crit[0])[:5])
    vals = np.ones((2, 5))
    st2 = fluid_update(bank, st, nxt, vals)
    assert st.items_used.tolist() == [0, 0] and st2.items_used.tolist() == [5, 5]
    assert np.all(st2.theta @ accuracy_gradient(bank, st2.theta).T > -np.inf)
    nxt2 = fluid_next(bank, st2, 5)
    assert not np.isin(nxt2[0], nxt[0]).any()
    with pytest.raises(ValueError, match="items"):
        fluid_update(bank, st2, nxt, vals)  # already seen
    with pytest.raises(ValueError, match="values"):
        fluid_update(bank, st2, nxt2, vals * 2)
    with pytest.raises(ValueError, match="items"):
        fluid_update(bank, st2, np.array([[1, 1, 2, 3, 4], [5, 6, 7, 8, 9]]), vals)
    rt = FluidState.from_dict({k: np.asarray(v) for k, v in st2.to_dict().items()})
    np.testing.assert_array_equal(rt.theta, st2.theta)


def test_exhaustion_is_exact():
    bank = _bank(n=30)
    rng = np.random.default_rng(1)
    y = (rng.random(30) < 0.6).astype(float)
    st = fluid_update(bank, fluid_init(bank), np.arange(30), y)
    est, se = fluid_estimate(bank, st)
    assert est[0] == pytest.approx(y.mean(), abs=1e-12) and se[0] == 0.0


def test_se_calibration_rough(gpqa):
    # responses simulated from an IRT model fitted on GPQA: the realised full accuracy should fall
    # inside estimate -+ 1.96 SE in about 95% of 400 sessions after 60 adaptively chosen items
    irt = fit_irt(gpqa["correct"][:300].astype(float), dims=1, rng=0)
    bank = ItemBank.from_irt(irt)
    rng = np.random.default_rng(9)
    s = 400
    theta = rng.normal(0, 1, (s, 1))
    y = (rng.random((s, bank.n_items)) < bank.probabilities(theta)).astype(float)
    st = fluid_init(bank, sessions=s)
    for _ in range(6):  # six batches of 10
        nxt = fluid_next(bank, st, 10)
        fluid_update(bank, st, nxt, np.take_along_axis(y, nxt, 1), inplace=True)
    est, se = fluid_estimate(bank, st)
    lo, hi = normal_interval(est, se, 0.05)
    truth = y.mean(1)
    cover = ((truth >= lo) & (truth <= hi)).mean()
    assert 0.91 <= cover <= 0.99
    z = (est - truth) / se
    assert 0.8 <= z.std() <= 1.2
    # without the unseen items' Bernoulli term the SE is too small
    _, se0 = fluid_estimate(bank, st, item_noise=False)
    assert np.all(se0 < se)
