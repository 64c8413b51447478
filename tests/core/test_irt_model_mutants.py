"""Mutation-driven tests for ``app.core.irt.model`` (the fitted 2PL model).

Oracles: ``scipy.special.expit`` / ``numpy.logaddexp`` for the stable pieces, the closed forms of
the logits, the delta-method SE and the l_z person-fit statistic computed directly in the test,
and ``scipy.optimize.minimize`` (BFGS) on the MAP objective with the Hessian inverted by hand for
the ability scorer.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from app.core.irt.model import AbilityEstimate, IRTModel, _softplus_and_sigmoid, sigmoid

Z = np.array([-800.0, -30.0, -2.5, -1e-3, 0.0, 1e-3, 0.7, 30.0, 800.0])


def test_softplus_and_sigmoid_against_scipy():
    sp, sig = _softplus_and_sigmoid(Z.copy())
    np.testing.assert_allclose(sp, np.logaddexp(0.0, Z), rtol=1e-15, atol=0)
    np.testing.assert_allclose(sig, expit(Z), rtol=1e-15, atol=0)
    np.testing.assert_allclose(sigmoid(Z.tolist()), expit(Z), rtol=1e-15, atol=0)
    assert sigmoid([0, 1]).dtype == np.float64  # integer input is promoted
    assert sigmoid(np.array([0])).tolist() == [0.5]


def _model(form="scalar_difficulty"):
    a = np.array([[1.0, 0.5], [-0.3, 2.0], [0.8, 0.8]])
    b = (
        np.array([0.2, -0.4, 1.0])
        if form == "scalar_difficulty"
        else np.array([[0.2, -0.1], [-0.4, 0.3], [1.0, 0.0]])
    )
    hyper = {"mu_a": np.array([0.1, 0.2]), "sd_a": np.array([1.0, 2.0]), "mu_b": 0.5, "sd_b": 3}
    return IRTModel(
        a=a, b=b, theta=np.array([[0.0, 1.0]]), form=form, prior="fixed", dims=2, hyper=hyper
    )


def test_model_arrays_are_frozen_copies():
    a = np.ones((2, 1))
    m = IRTModel(
        a=a,
        b=np.zeros(2),
        theta=np.zeros((1, 1)),
        form="scalar_difficulty",
        prior="fixed",
        dims=1,
        hyper={"mu_a": np.zeros(1), "sd_b": 2},
    )
    a[0, 0] = 5.0
    assert m.a[0, 0] == 1.0 and m.a.dtype == np.float64
    for arr in (m.a, m.b, m.theta, m.hyper["mu_a"]):
        assert not arr.flags.writeable
    assert m.hyper["sd_b"] == 2.0 and isinstance(m.hyper["sd_b"], float)
    assert m.n_items == 2 and isinstance(m.n_items, int)


@pytest.mark.parametrize("form", ["scalar_difficulty", "per_dimension"])
def test_offsets_logits_probabilities_by_hand(form):
    m = _model(form)
    a, b = m.a, m.b
    c = 2 * b if form == "scalar_difficulty" else (a * b).sum(axis=1)
    np.testing.assert_allclose(m.item_offsets(), c, rtol=1e-15)
    np.testing.assert_allclose(m.item_offsets([2, 0]), c[[2, 0]], rtol=1e-15)
    theta = np.array([[0.5, -1.0], [2.0, 0.3]])
    z = theta @ a.T - c
    np.testing.assert_allclose(m.logits(theta), z, rtol=1e-14)
    np.testing.assert_allclose(m.logits(theta[0]), z[:1], rtol=1e-14)  # one row as a vector
    np.testing.assert_allclose(m.logits(theta, np.array([1])), z[:, [1]], rtol=1e-14)
    np.testing.assert_allclose(m.predict_proba(theta), expit(z), rtol=1e-14)
    emb = m.embeddings()
    expected = np.hstack([a, b[:, None] if b.ndim == 1 else b])
    np.testing.assert_array_equal(emb, expected)


def test_item_and_theta_validation_messages():
    m = _model()
    for bad in (np.array([[0, 1]]), np.array([0.0, 1.0])):
        with pytest.raises(
            ValueError, match=r"^items: expected a 1-d array of integer item positions$"
        ):
            m.logits(np.zeros(2), bad)
    for bad in ([-1], [3], [0, 3]):
        with pytest.raises(ValueError, match=r"^items: positions must lie in \[0, 3\)$"):
            m.logits(np.zeros(2), np.array(bad))
    assert m.logits(np.zeros(2), np.array([0, 2])).shape == (1, 2)  # both ends allowed
    assert m.logits(np.zeros(2), np.array([], dtype=int)).shape == (1, 0)
    with pytest.raises(ValueError, match=r"^theta: expected shape \(n_models, 2\), got \(3,\)$"):
        m.logits(np.zeros(3))
    with pytest.raises(
        ValueError, match=r"^theta: expected shape \(n_models, 2\), got \(1, 1, 2\)$"
    ):
        m.logits(np.zeros((1, 1, 2)))


def test_predict_accuracy_delta_method_by_hand():
    m = _model()
    theta = np.array([[0.5, -1.0], [2.0, 0.3]])
    cov = np.array([[[0.04, 0.01], [0.01, 0.09]], [[0.25, -0.02], [-0.02, 0.01]]])
    ab = AbilityEstimate(
        theta=theta,
        se=np.sqrt(np.diagonal(cov, axis1=1, axis2=2)),
        cov=cov,
        n_iter=1,
        converged=True,
    )
    items = np.array([0, 2])
    p = expit(theta @ m.a[items].T - 2 * m.b[items])
    acc, se = m.predict_accuracy(ab, items)
    np.testing.assert_allclose(acc, p.mean(axis=1), rtol=1e-14)
    for j in range(2):
        g = sum(p[j, k] * (1 - p[j, k]) * m.a[i] for k, i in enumerate(items)) / 2
        np.testing.assert_allclose(se[j], np.sqrt(g @ cov[j] @ g), rtol=1e-13)
    theta_hat, se_hat = ab  # unpacks as (theta, se)
    assert theta_hat is ab.theta and se_hat is ab.se


def _map_reference(m, y, items, prior, w=None):
    a, c = m.a[items], m.item_offsets(items)
    w = np.ones_like(y) if w is None else w
    out = []
    for j in range(y.shape[0]):

        def nlp(t, j=j):
            z = a @ t - c
            return np.sum(w[j] * (np.logaddexp(0, z) - y[j] * z)) + 0.5 * t @ t / prior**2

        t = minimize(nlp, np.zeros(a.shape[1]), method="BFGS", options={"gtol": 1e-11}).x
        p = expit(a @ t - c)
        hess = (a * (w[j] * p * (1 - p))[:, None]).T @ a + np.eye(a.shape[1]) / prior**2
        out.append((t, np.linalg.inv(hess)))
    return out


def test_score_matches_map_and_laplace_covariance_with_mask():
    m = _model("per_dimension")
    y = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.3, 1.0, 0.0], [1.0, 1.0, 1.0]])
    mask = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], dtype=bool)
    est = m.score(y, mask=mask, prior=0.7)
    ref = _map_reference(m, y, np.arange(3), 0.7, mask.astype(float))
    for j, (t, cov) in enumerate(ref):
        np.testing.assert_allclose(est.theta[j], t, atol=1e-6)
        np.testing.assert_allclose(est.cov[j], cov, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(est.se[j], np.sqrt(np.diag(cov)), rtol=1e-5)
    assert est.converged and 1 <= est.n_iter <= 50


def test_score_on_item_subset_with_default_prior():
    m = _model()
    items = np.array([2, 0])
    y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    est = m.score(y, items)
    for j, (t, cov) in enumerate(_map_reference(m, y, items, 1.0)):
        np.testing.assert_allclose(est.theta[j], t, atol=1e-6)
        np.testing.assert_allclose(est.cov[j], cov, rtol=1e-5, atol=1e-9)


def test_score_stops_at_max_iter_and_reports_it():
    m = _model()
    y = np.array([[1.0, 0.0, 1.0]])
    one = m.score(y, max_iter=1, tol=1e-14)
    assert one.n_iter == 1 and not one.converged
    full = m.score(y, tol=1e-12)
    assert full.converged and full.n_iter > 1
    far = m.score(y, tol=1e3)  # the zero start already satisfies a huge tolerance
    np.testing.assert_array_equal(far.theta, 0.0)
    assert far.n_iter == 1 and far.converged


def test_score_validation_messages():
    m = _model()
    with pytest.raises(ValueError, match=r"^responses: values must be finite and in \[0, 1\]$"):
        m.score(np.array([[1.0, 0.0, 1.2]]))
    with pytest.raises(ValueError, match=r"^responses: values must be finite and in \[0, 1\]$"):
        m.score(np.array([[1.0, -0.1, 1.0]]))
    with pytest.raises(ValueError, match=r"^responses: values must be finite and in \[0, 1\]$"):
        m.score(np.array([[1.0, np.nan, 1.0]]))
    m.score(np.array([[1.0, 0.0, 1.0]]))  # the bounds themselves are fine
    for prior in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match=r"^prior: must be a positive standard deviation$"):
            m.score(np.array([[1.0, 0.0, 1.0]]), prior=prior)
    with pytest.raises(
        ValueError, match=r"^mask: shape \(1, 2\) does not match responses \(1, 3\)$"
    ):
        m.score(np.array([[1.0, 0.0, 1.0]]), mask=np.ones((1, 2), dtype=bool))
    with pytest.raises(ValueError, match=r"^responses: expected shape \(n_models, 2\)"):
        m.score(np.ones((1, 3)), np.array([0, 1]))


def test_person_fit_closed_form():
    m = _model()
    theta = np.array([[0.5, -1.0], [2.0, 0.3]])
    y = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    z = theta @ m.a.T - 2 * m.b
    p = expit(z)
    l0 = np.sum(y * np.log(p) + (1 - y) * np.log(1 - p), axis=1)
    e = np.sum(p * np.log(p) + (1 - p) * np.log(1 - p), axis=1)
    v = np.sum(p * (1 - p) * np.log(p / (1 - p)) ** 2, axis=1)
    np.testing.assert_allclose(m.person_fit(y, theta), (l0 - e) / np.sqrt(v), rtol=1e-12)
    one = m.person_fit(y[0], theta[0])  # a single pattern as vectors
    np.testing.assert_allclose(one, ((l0 - e) / np.sqrt(v))[:1], rtol=1e-12)
    sub = m.person_fit(y[:, [1]], theta, np.array([1]))
    k = (y[:, 1] * np.log(p[:, 1]) + (1 - y[:, 1]) * np.log(1 - p[:, 1])) - (
        p[:, 1] * np.log(p[:, 1]) + (1 - p[:, 1]) * np.log(1 - p[:, 1])
    )
    np.testing.assert_allclose(sub, k / np.sqrt(p[:, 1] * (1 - p[:, 1]) * z[:, 1] ** 2), rtol=1e-12)


def test_default_newton_budget_and_unit_step_cap():
    """One all-correct response on a weak item under a flat prior: the MAP is far away, every
    Newton step is capped at length 1, so the default budget of 50 steps ends at theta = 50."""
    m = IRTModel(a=[[0.1]], b=[0.0], theta=[[0.0]], form="scalar_difficulty", prior="fixed", dims=1)
    est = m.score(np.ones((1, 1)), prior=1e6)
    assert est.n_iter == 50 and not est.converged
    np.testing.assert_allclose(est.theta, [[50.0]], rtol=1e-12)


def test_score_from_no_items_is_the_prior():
    m = _model()
    est = m.score(np.zeros((2, 0)), np.array([], dtype=np.int64), prior=2.0)
    np.testing.assert_array_equal(est.theta, 0.0)
    np.testing.assert_allclose(est.se, 2.0, rtol=1e-15)
    np.testing.assert_allclose(est.cov, np.broadcast_to(4.0 * np.eye(2), (2, 2, 2)), rtol=1e-15)
    assert est.converged


def _one_item():
    # z = theta (a = 1, b = 0); a response of 0.25 under the N(0, 1) prior: at theta = 0 the
    # gradient is sigmoid(0) - 0.25 = 0.25 and the Hessian 0.25 + 1 = 1.25, so one Newton step
    # lands on theta = -0.2 exactly, where the gradient is sigmoid(-0.2) - 0.45 (about 1.7e-4)
    return IRTModel(
        a=[[1.0]], b=[0.0], theta=[[0.0]], form="scalar_difficulty", prior="fixed", dims=1
    )


def test_tolerance_is_strict_and_one_newton_step_by_hand():
    est = _one_item().score([[0.25]], tol=0.25)  # |g| = 0.25 is not below 0.25: one step
    np.testing.assert_allclose(est.theta, [[-0.2]], rtol=1e-15)
    assert est.n_iter == 2 and est.converged
    p = expit(-0.2)
    np.testing.assert_allclose(est.cov, [[[1 / (p * (1 - p) + 1)]]], rtol=1e-14)


def test_zero_budget_scores_the_prior_mean():
    est = _one_item().score([[0.25]], max_iter=0)
    assert est.n_iter == 0 and not est.converged
    np.testing.assert_array_equal(est.theta, [[0.0]])
    np.testing.assert_allclose(est.se, [[1 / np.sqrt(1.25)]], rtol=1e-15)


def test_converged_flag_uses_ten_times_tol():
    g1 = expit(-0.2) - 0.45  # the gradient left after the single step max_iter=1 allows
    assert 1e-4 < g1 < 2e-4
    assert _one_item().score([[0.25]], max_iter=1, tol=2e-5).converged  # g1 < 10 tol
    assert not _one_item().score([[0.25]], max_iter=1, tol=g1 / 10.5).converged  # g1 > 10 tol
    assert not _one_item().score([[0.25]], max_iter=1, tol=1e-12).converged  # floor 1e-6


def test_float32_and_integer_inputs_are_promoted():
    z32 = np.array([0.1, -3.0], dtype=np.float32)
    out = sigmoid(z32)
    assert out.dtype == np.float64  # computed at the float64 value of the input
    np.testing.assert_array_equal(out, sigmoid(z32.astype(np.float64)))
    np.testing.assert_allclose(out, expit(z32.astype(np.float64)), rtol=1e-15)
    m = IRTModel(
        a=[[1], [2]], b=[0, 1], theta=[[0]], form="scalar_difficulty", prior="fixed", dims=1,
        hyper={"mu_a": np.array([1, 2]), "sd_a": [0.5, 3.0]},
    )  # fmt: skip
    for arr in (m.a, m.b, m.theta, m.hyper["mu_a"], m.hyper["sd_a"]):
        assert arr.dtype == np.float64
    np.testing.assert_array_equal(m.hyper["mu_a"], [1.0, 2.0])
    np.testing.assert_array_equal(m.hyper["sd_a"], [0.5, 3.0])
