"""Mutation-driven tests for the optimiser and objectives of ``app.core.irt.fit`` (``_lbfgs``,
``make_objective``, ``make_objective_mixed``), all on tiny problems.

Oracles:

* L-BFGS trajectory: a dense-matrix BFGS written independently of the two-loop recursion
  (``H <- V' H V + rho s s'``, ``V = I - rho y s'``, over the last ``memory`` accepted pairs, from
  ``H0 = (s'y / y'y) I``, or ``I / max(|g|, 1)`` with no pairs), with the documented Armijo
  backtracking (``c1 = 1e-4``, halving from ``t = 1``); the minimiser of Rosenbrock's function and
  of a convex quadratic from scipy / ``numpy.linalg.solve``.
* Stopping rules, line search and the descent reset: hand-traced runs on one-dimensional functions
  whose every step is worked out in the comments (piecewise-constant objective with a constant
  pseudo-gradient, so that the relative decreases are prescribed exactly; ``x^2`` and
  ``-x + c x^2`` for the line search; an objective that is ``nan`` beyond a step of ``2^-40``).
* Objectives: the gradient against central finite differences of the objective itself, and the
  objective against a plain double loop with ``scipy.special`` (``log1p(exp)``, ``expit``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der
from scipy.special import log1p

from app.core.irt.fit import Hyper, Layout, _lbfgs, make_objective, make_objective_mixed


# ---------------------------------------------------------------------------------------------
# L-BFGS: the quasi-Newton direction and the memory window
# ---------------------------------------------------------------------------------------------
def _ill_quadratic(dim=30, seed=5):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    hess = (q * np.logspace(0, 3, dim)) @ q.T
    rhs = rng.normal(size=dim)
    return hess, rhs, lambda x: (0.5 * x @ hess @ x - rhs @ x, hess @ x - rhs)


def _dense_bfgs(fun, x0, n_iter, memory):
    """Reference: the same method with the inverse Hessian built as a dense matrix."""
    x = x0.copy()
    f, g = fun(x)
    pairs = []
    nfev = 1
    eye = np.eye(x.size)
    for _ in range(n_iter):
        if pairs:
            s, y = pairs[-1]
            h = (s @ y) / (y @ y) * eye
        else:
            h = eye / max(np.linalg.norm(g), 1.0)
        for s, y in pairs:
            r = 1.0 / (s @ y)
            v = eye - r * np.outer(y, s)
            h = v.T @ h @ v + r * np.outer(s, s)
        d = -h @ g
        slope = g @ d
        assert slope < 0
        t = 1.0
        while True:
            x_new = x + t * d
            f_new, g_new = fun(x_new)
            nfev += 1
            if f_new <= f + 1e-4 * t * slope:
                break
            t /= 2
        s, y = x_new - x, g_new - g
        if s @ y > 1e-10 * (y @ y):
            pairs = [*pairs, (s, y)][-memory:]
        x, f, g = x_new, f_new, g_new
    return x, nfev


@pytest.mark.parametrize("memory", [None, 3])
def test_lbfgs_follows_the_dense_bfgs_trajectory(memory):
    _, _, fun = _ill_quadratic()
    x0 = np.zeros(30)
    kw = {} if memory is None else {"memory": memory}
    for n_iter in (5, 14, 24):  # before and well after the default window of 10 pairs fills up
        res = _lbfgs(fun, x0, max_iter=n_iter, ftol=-1.0, gtol=0.0, **kw)
        x_ref, nfev_ref = _dense_bfgs(fun, x0, n_iter, memory or 10)
        assert res.nit == n_iter and res.success is False
        assert res.nfev == nfev_ref
        np.testing.assert_allclose(res.x, x_ref, rtol=1e-7, atol=1e-9)
        assert res.fun == pytest.approx(fun(x_ref)[0], rel=1e-10)


def test_lbfgs_minimises_rosenbrock_like_scipy():
    x0 = np.array([-1.2, 1.0, -0.5, 0.8, 1.5])
    res = _lbfgs(lambda x: (rosen(x), rosen_der(x)), x0, max_iter=2000, ftol=0.0, gtol=1e-9)
    ref = minimize(rosen, x0, jac=rosen_der, method="BFGS", options={"gtol": 1e-10})
    assert res.success and res.nit < 2000
    np.testing.assert_allclose(res.x, ref.x, atol=1e-7)
    np.testing.assert_allclose(res.x, np.ones(5), atol=1e-7)


# ---------------------------------------------------------------------------------------------
# L-BFGS: the first step, the line search and the budget
# ---------------------------------------------------------------------------------------------
def _half_square(x):
    return 0.5 * float(x @ x), x.copy()


@pytest.mark.parametrize(
    ("x0", "x1", "nfev"),
    [
        (3.0, 2.0, 2),  # g = 3: first direction -g / |g| = -1, accepted at t = 1
        (0.5, 0.0, 2),  # g = 0.5: |g| < 1, first direction -g itself (lands on the minimum)
    ],
)
def test_lbfgs_first_step_is_gradient_over_max_norm_one(x0, x1, nfev):
    res = _lbfgs(_half_square, np.array([x0]), max_iter=1, ftol=-1.0, gtol=0.0)
    assert res.x.tolist() == [x1] and res.nfev == nfev and res.nit == 1
    assert res.fun == 0.5 * x1 * x1 and res.success is False


def test_lbfgs_armijo_rejects_a_step_without_sufficient_decrease():
    # f = x^2 from 0.5: g = 1, d = -1; t = 1 gives x = -0.5 with f unchanged (0.25): rejected,
    # t = 1/2 gives the minimum
    res = _lbfgs(lambda x: (float(x @ x), 2 * x), np.array([0.5]), max_iter=1, ftol=-1, gtol=0)
    assert res.x.tolist() == [0.0] and res.nfev == 3 and res.fun == 0.0


@pytest.mark.parametrize(
    ("c", "x1", "nfev"),
    [
        # f(t) = -t + c t^2 along d = +1 (g(0) = -1): Armijo at t holds iff c t <= 1 - 1e-4
        (1.9995, 0.5, 3),  # t = 1/2: f = -1.25e-4 <= -5e-5 (but not <= -2e-4)
        (3.0, 0.25, 4),  # t = 1 and 1/2 rejected, t = 1/4 accepted
    ],
)
def test_lbfgs_backtracking_halves_until_armijo_holds(c, x1, nfev):
    def fun(x):
        return float(-x[0] + c * x[0] ** 2), np.array([-1.0 + 2 * c * x[0]])

    res = _lbfgs(fun, np.array([0.0]), max_iter=1, ftol=-1.0, gtol=0.0)
    assert res.x.tolist() == [x1] and res.nfev == nfev and res.nit == 1


def test_lbfgs_line_search_gives_up_after_forty_halvings():
    # finite only within 2^-40 of the start: the 40 trials t = 1 .. 2^-39 are all nan, so the
    # run stops in its first iteration without moving
    def fun(x):
        return (float(-x[0]) if x[0] <= 2.0**-40 else float("nan")), np.array([-1.0])

    res = _lbfgs(fun, np.array([0.0]), max_iter=5, ftol=-1.0, gtol=0.0)
    assert res.x.tolist() == [0.0] and res.fun == 0.0
    assert res.nit == 1 and res.nfev == 41 and res.success is False


def test_lbfgs_zero_budget_and_gradient_tolerance_boundary():
    res = _lbfgs(_half_square, np.array([2.0]), max_iter=0, ftol=0.0, gtol=0.0)
    assert (res.nit, res.nfev, res.success, res.fun, res.x.tolist()) == (0, 1, False, 2.0, [2.0])
    # max|g| == gtol counts as converged, before any step
    res = _lbfgs(_half_square, np.array([0.5, -0.25]), max_iter=9, ftol=0.0, gtol=0.5)
    assert (res.nit, res.nfev, res.success, res.x.tolist()) == (1, 1, True, [0.5, -0.25])


# ---------------------------------------------------------------------------------------------
# L-BFGS: the descent reset
# ---------------------------------------------------------------------------------------------
def test_lbfgs_resets_to_steepest_descent_when_the_slope_is_not_negative():
    # x0 = -1: g = -2, first direction +1, x1 = 0 (f drops 0 -> -1); pair s = 1, y = 2 (+1e-170).
    # At x1 the gradient is 1e-170: the two-loop direction is -H g = -5e-171 and its slope
    # g.d = -5e-341 underflows to -0.0, which is not negative: the memory is dropped and the
    # step is -g / max(|g|, 1) = -1e-170 (accepted: f stays -1 <= -1 + 1e-4 * (-0.0)).
    def fun(x):
        return (0.0, np.array([-2.0])) if x[0] == -1.0 else (-1.0, np.array([1e-170]))

    res = _lbfgs(fun, np.array([-1.0]), max_iter=2, ftol=-1.0, gtol=0.0)
    assert res.x.tolist() == [-1e-170]
    assert (res.nit, res.nfev, res.success, res.fun) == (2, 3, False, -1.0)


def test_lbfgs_reset_direction_is_normalised_by_the_gradient_norm():
    # |g|^2 overflows: the scaled direction -g / max(|g|, 1) = -g / inf is zero, so the slope is
    # -0.0 (reset branch), the trial point is x itself and f does not change (accepted,
    # f <= f + 0); no curvature pair (s = y = 0); zero decreases stop the run after _MIN_ITER
    def fun(x):
        return 1e200 * float(x[0]), np.array([1e200])

    res = _lbfgs(fun, np.array([0.0]), max_iter=50, ftol=0.0, gtol=0.0)
    assert (res.nit, res.nfev, res.success, res.x.tolist(), res.fun) == (11, 12, True, [0.0], 0.0)


# ---------------------------------------------------------------------------------------------
# L-BFGS: the relative-decrease stopping rule
# ---------------------------------------------------------------------------------------------
def _staircase(values):
    """f(k) = values[k] at the integer points, pseudo-gradient -1 everywhere.

    From x0 = 0 every iteration is the step +1 (first-step scaling -g / max(|g|, 1) = +1, accepted
    at t = 1 when values decrease by >= 1e-4; y = 0, so no pair is ever stored), so iteration k
    moves from values[k-1] to values[k].
    """

    def fun(x):
        return float(values[round(x[0])]), np.array([-1.0])

    return fun


def _run_staircase(values, ftol, max_iter):
    res = _lbfgs(_staircase(values), np.array([0.0]), max_iter=max_iter, ftol=ftol, gtol=0.5)
    assert res.x.tolist() == [float(res.nit)] and res.nfev == res.nit + 1
    assert res.fun == values[res.nit]
    return res.nit, res.success


# eleven steps of relative decrease 0.8 (1e9 * 0.2^k: 1e9 ... 102.4)
_HEAD = [1e9 * 0.2**k for k in range(11)]


@pytest.mark.parametrize(
    ("tail", "ftol", "max_iter", "expected"),
    [
        # values[11:]; the 11th step is a big decrease in every case. Two small decreases
        # (0.1, 0.1) right after _MIN_ITER: stop at the second one
        ([20.48, 18.432, 16.5888], 0.3, 16, (13, True)),
        # small decreases (0.1, then 0.05) that never come two in a row (the others 0.5 or more):
        # the budget ends the run
        (
            [20.48, 18.432, 9.216, 8.2944, 4.1472, 3.73248, 1.86624, 1.679616, -1.0, -1.05],
            0.3,
            20,
            (20, False),
        ),
        # relative to the larger |f| of the pair: 20.48 -> 12.288 -> 7.3728 is 0.4 (not 0.67)
        ([20.48, 12.288, 7.3728], 0.5, 14, (13, True)),
        # ... the new value included: -1 -> -1.4 -> -1.96 is 0.286 each (not 0.4)
        ([-1.0, -1.4, -1.96], 0.3, 14, (13, True)),
        # ... and at least 1: 0.5 -> 0.25 -> 0 is 0.25 each (neither 0.5 and 1, nor 0.125)
        ([0.5, 0.25, 0.0], 0.3, 14, (13, True)),
        ([0.5, 0.25, 0.0], 0.2, 14, (14, False)),
    ],
)
def test_lbfgs_stops_on_two_consecutive_small_relative_decreases(tail, ftol, max_iter, expected):
    values = [*_HEAD, *tail]
    while len(values) <= max_iter:  # big decreases (relative > 2/3) afterwards
        values.append(-(abs(values[-1]) + 1.0) * 3.0)
    assert _run_staircase(values, ftol, max_iter) == expected


def test_lbfgs_small_decreases_before_min_iter_stop_at_iteration_eleven():
    values = [1000.0 * 0.95**k for k in range(40)]  # relative decrease 0.05 throughout
    assert _run_staircase(values, 0.3, 39) == (11, True)


def test_lbfgs_decrease_equal_to_ftol_counts_as_small():
    # dyadic values in (-1, 1): decreases are exact; eleven of 1/8, then two of exactly 1/16
    values = [0.9375 - 0.125 * k for k in range(12)] + [-0.5, -0.5625]
    assert _run_staircase(values, 0.0625, 13) == (13, True)


# ---------------------------------------------------------------------------------------------
# objectives
# ---------------------------------------------------------------------------------------------
def _problem(per_dim, masked, seed=11, m=5, n=7, d=2):
    rng = np.random.default_rng(seed)
    y = rng.random((m, n))
    w = (rng.random((m, n)) < 0.7).astype(float) if masked else None
    lay = Layout(m, n, d, per_dim)
    hyp = Hyper(mu_a=rng.normal(size=d), sd_a=rng.uniform(0.5, 2, d), mu_b=-0.3, sd_b=1.4)
    return y, w, lay, hyp, rng.normal(size=lay.size)


def _loop_posterior(x, y, w, lay, hyp):
    theta, a, b = lay.unpack(x)
    f = 0.0
    for j in range(lay.m):
        for i in range(lay.n):
            if lay.per_dim:
                z = sum(a[i, k] * (theta[j, k] - b[i, k]) for k in range(lay.d))
            else:
                z = sum(a[i, k] * theta[j, k] for k in range(lay.d)) - lay.d * b[i]
            wij = 1.0 if w is None else w[j, i]
            f += wij * (log1p(np.exp(z)) - y[j, i] * z)
    f += 0.5 * np.sum(theta**2) + 0.5 * np.sum(((a - hyp.mu_a) / hyp.sd_a) ** 2)
    return f + 0.5 * np.sum(((b - hyp.mu_b) / hyp.sd_b) ** 2)


@pytest.mark.parametrize("per_dim", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("mixed", [False, True])
def test_objective_is_the_negative_log_posterior_and_its_gradient(per_dim, masked, mixed):
    y, w, lay, hyp, x = _problem(per_dim, masked)
    fun = (make_objective_mixed if mixed else make_objective)(y, w, lay, hyp)
    f, g = fun(x)
    assert f == pytest.approx(_loop_posterior(x, y, w, lay, hyp), rel=2e-7 if mixed else 1e-13)
    # central differences of the float64 objective (truncation error ~1e-8 at h = 1e-5)
    exact = make_objective(y, w, lay, hyp)
    h = 1e-5
    fd = np.array([(exact(x + h * e)[0] - exact(x - h * e)[0]) / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(g, fd, atol=2e-5 if mixed else 1e-7)
