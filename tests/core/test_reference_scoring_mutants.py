"""Tests that kill the surviving mutants of ``app/core/scoring/reference.py`` (issue 17).

Each test asserts values against an independent computation: the Rasch-type shift solved by
``scipy.optimize.brentq`` instead of Newton, the difference estimator and its variance written out
item by item, Student and Beta quantiles from scipy, or the kernel calibration recomputed with
plain loops. Mutants that cannot change any result are listed with a reason in
``bench/mutation_equivalent.toml``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from app.core.results import Selection
from app.core.scoring.crossfit import reference_calibrations
from app.core.scoring.reference import (
    CALIBRATION_INFLATION,
    MIN_MODEL_ASSISTED_N,
    MIN_REFERENCE_MODELS,
    model_assisted,
    reference_estimates,
    reference_predictions,
)
from tests.support.calibration_oracle import calibration_oracle as _calibration_oracle


def _selection(method, indices, weights=None, estimator="mean", fitted=None) -> Selection:
    idx = np.asarray(indices, dtype=np.int64)
    w = np.full(idx.size, 1.0 / idx.size) if weights is None else np.asarray(weights, float)
    return Selection(
        method=method,
        indices=idx,
        weights=w,
        estimator=estimator,
        estimate_on="correct",
        signal="correct",
        n_requested=idx.size,
        n_candidates=100,
        seed=0,
        fitted=fitted or {},
    )


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _predictions_oracle(idx, y, ref):
    """``sigmoid(logit(pbar_j) + theta_i)`` with theta_i from a bracketing root finder."""
    ref = np.asarray(ref, float)
    r, n_items = ref.shape
    pbar = np.array([(ref[:, j].sum() + 0.5) / (r + 1) for j in range(n_items)])
    base = np.log(pbar) - np.log1p(-pbar)
    out = np.empty((y.shape[0], n_items))
    for i in range(y.shape[0]):
        target = float(y[i].sum())

        def g(t, target=target):
            return float(np.sum(_sigmoid(base[idx] + t)) - target)

        if g(-8.0) >= 0:
            theta = -8.0
        elif g(8.0) <= 0:
            theta = 8.0
        else:
            theta = optimize.brentq(g, -8.0, 8.0, xtol=1e-14)
        out[i] = _sigmoid(base + theta)
    return out


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(17)
    ref = (rng.random((9, 14)) < np.linspace(0.15, 0.9, 14)).astype(float)
    idx = np.array([0, 2, 3, 5, 8, 11, 13])
    y = np.array(
        [
            [1, 0, 1, 1, 0, 0, 1],
            [1, 1, 1, 1, 1, 1, 1],  # all right: theta clipped at +8
            [0, 0, 0, 0, 0, 0, 0],  # all wrong: theta clipped at -8
            [0, 0, 1, 0, 0, 0, 0],
        ],
        dtype=float,
    )
    return ref, idx, y


def test_reference_predictions_match_a_root_finder(small) -> None:
    """Shrunk item accuracies ``(s + 1/2) / (r + 1)``, the shift solving sum yhat = sum y, |theta| <= 8."""
    ref, idx, y = small
    sel = _selection("random", idx)
    got = reference_predictions(sel, y, ref)
    want = _predictions_oracle(idx, y, ref)
    assert got.shape == (4, 14)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    # the clipped shifts: exactly sigmoid(base -+ 8)
    pbar = (ref.sum(axis=0) + 0.5) / 10.0
    base = np.log(pbar / (1 - pbar))
    np.testing.assert_allclose(got[1], _sigmoid(base + 8.0), rtol=1e-13)
    np.testing.assert_allclose(got[2], _sigmoid(base - 8.0), rtol=1e-13)
    # the fitted rows reproduce the observed totals on the subset
    np.testing.assert_allclose(got[[0, 3]][:, idx].sum(axis=1), [4.0, 1.0], atol=1e-10)


# -- model_assisted ---------------------------------------------------------------------------------
def _model_assisted_oracle(idx, y, n_pop, ref, level, weights=None):
    """The difference estimator and its stratified SRS variance, item by item."""
    k = idx.size
    w = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, float)
    yhat = _predictions_oracle(idx, y, ref)
    pi = 1.0 / (n_pop * w / w.sum())
    labels = np.round(pi, 12)
    values, ses = [], []
    for i in range(y.shape[0]):
        e = y[i] - yhat[i, idx]
        value = yhat[i].mean() + sum(e[j] / pi[j] for j in range(k)) / n_pop
        var = 0.0
        for lab in np.unique(labels):
            members = np.flatnonzero(labels == lab)
            n_h = members.size
            big_n_h = sum(1.0 / pi[j] for j in members)
            if n_h > 1:
                s2 = np.var(e[members], ddof=1)
            else:
                s2 = np.var(e, ddof=1)
            var += big_n_h**2 * max(0.0, 1.0 - n_h / big_n_h) * s2 / n_h
        se = np.sqrt(var) / n_pop * np.sqrt(k / max(k - 2, 1))
        ys = yhat[i, idx]
        f = (n_pop - k) / (n_pop - 1)
        se = max(se, np.sqrt(f * np.mean(ys * (1 - ys)) / k))
        values.append(value)
        ses.append(se)
    values, ses = np.array(values), np.array(ses)
    q = stats.t.ppf(0.5 + level / 2.0, max(k - 2, 1))
    lo, hi = np.clip(values - q * ses, 0, 1), np.clip(values + q * ses, 0, 1)
    # fewer than 2 right (or wrong): the hull with Wilson at Kish's size (issue 24)
    z = stats.norm.ppf(0.5 + level / 2.0)
    n_eff = w.sum() ** 2 / np.sum(w**2) / ((n_pop - k) / (n_pop - 1))
    for i in range(y.shape[0]):
        s = y[i].sum()
        if min(s, k - s) < 2:
            p = float(np.clip(y[i] @ w / w.sum(), 0, 1))
            centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
            half = z / (1 + z * z / n_eff) * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff**2))
            lo[i] = min(lo[i], max(0.0, centre - half))
            hi[i] = max(hi[i], min(1.0, centre + half))
    return values, lo, hi, ses


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_model_assisted_value_se_and_student_interval(small, level) -> None:
    """Value, floored and inflated SE, ``t_{n-2}`` bounds at the requested level, batch labels."""
    ref, idx, y = small
    sel = _selection("random", idx)
    b = model_assisted(sel, y, 14, ref, level=level)
    value, lo, hi, se = _model_assisted_oracle(idx, y, 14, ref, level)
    np.testing.assert_allclose(b.value, value, atol=1e-10)
    np.testing.assert_allclose(b.se, se, atol=1e-10)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-10)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-10)
    np.testing.assert_allclose(b.raw_value, value, atol=1e-10)
    assert b.estimator == "model_assisted"
    assert b.interval == "difference_fpc" and b.basis == "model-assisted"
    assert b.confidence == level and b.available and b.note is None


def test_model_assisted_default_level_is_95() -> None:
    rng = np.random.default_rng(3)
    ref = (rng.random((12, 30)) < 0.6).astype(float)
    idx = np.arange(0, 30, 3)
    y = (rng.random((3, 10)) < 0.5).astype(float)
    sel = _selection("random", idx)
    b = model_assisted(sel, y, 30, ref)
    value, lo, hi, se = _model_assisted_oracle(idx, y, 30, ref, 0.95)
    assert b.confidence == 0.95
    np.testing.assert_allclose(b.value, value, atol=1e-10)
    np.testing.assert_allclose(b.se, se, atol=1e-10)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-10)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-10)


def test_model_assisted_stratified_design_uses_its_strata() -> None:
    """Weights ``N_h / (N n_h)``: two strata with different sampling fractions."""
    rng = np.random.default_rng(11)
    n_pop = 40
    ref = (rng.random((15, n_pop)) < np.linspace(0.2, 0.85, n_pop)).astype(float)
    idx = np.r_[np.arange(0, 10, 2), np.arange(10, 40, 6)]  # 5 of 10, 5 of 30
    w = np.r_[np.full(5, 10 / (40 * 5)), np.full(5, 30 / (40 * 5))]
    y = (rng.random((4, 10)) < 0.55).astype(float)
    sel = _selection("subtask_stratified", idx, w)
    b = model_assisted(sel, y, n_pop, ref, level=0.9)
    value, lo, hi, se = _model_assisted_oracle(idx, y, n_pop, ref, 0.9, w)
    np.testing.assert_allclose(b.value, value, atol=1e-10)
    np.testing.assert_allclose(b.se, se, atol=1e-10)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-10)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-10)


def test_model_assisted_two_items_use_one_degree_of_freedom() -> None:
    """k = 2: inflation ``k / max(k - 2, 1) = 2`` and ``t_1``."""
    ref = np.array([[1, 0, 1, 0, 1], [1, 1, 0, 0, 1], [0, 0, 1, 1, 1], [1, 0, 0, 0, 1]], float)
    idx = np.array([1, 3])
    y = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    sel = _selection("random", idx)
    b = model_assisted(sel, y, 5, ref, level=0.5)
    value, lo, hi, se = _model_assisted_oracle(idx, y, 5, ref, 0.5)
    np.testing.assert_allclose(b.value, value, atol=1e-10)
    np.testing.assert_allclose(b.se, se, atol=1e-10)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-10)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-10)


def test_model_assisted_census_falls_back_to_clopper_pearson() -> None:
    """k = N (N = 8, so pi = 1 exactly): no sampling error (se = 0), so the bounds are
    Clopper-Pearson's, never zero width."""
    ref = np.array(
        [[1, 0, 1, 0, 1, 1, 0, 1], [1, 1, 0, 0, 1, 0, 0, 1], [0, 0, 1, 1, 1, 1, 1, 0]], float
    )
    idx = np.arange(8)
    y = np.array([[1, 0, 1, 1, 0, 1, 0, 1], [1] * 8, [0] * 8], float)
    sel = _selection("random", idx)
    # level 0.95: the fallback is computed at the default level whatever ``level`` is
    b = model_assisted(sel, y, 8, ref, level=0.95)
    assert np.all(b.se == 0.0)
    for i, s in enumerate((5, 8, 0)):
        ci = stats.binomtest(s, 8).proportion_ci(0.95, method="exact")
        assert b.ci_low[i] == pytest.approx(ci.low, abs=1e-12)
        assert b.ci_high[i] == pytest.approx(ci.high, abs=1e-12)
    # the value is still the census mean
    np.testing.assert_allclose(b.value, y.mean(axis=1), atol=1e-12)


def test_model_assisted_partial_zero_se_only_replaces_that_model() -> None:
    """One model with se = 0 among others is impossible below a census; at k = N all are zero."""
    ref = np.array([[1, 0, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]], float)
    sel = _selection("random", np.arange(4))
    b = model_assisted(sel, np.array([[1, 0, 1, 1]], float), 4, ref, level=0.95)
    ci = stats.binomtest(3, 4).proportion_ci(0.95, method="exact")
    assert (b.ci_low[0], b.ci_high[0]) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_model_assisted_accepts_a_single_model_as_1d() -> None:
    ref = np.array([[1, 0, 1, 0, 1, 1], [1, 1, 0, 0, 1, 0], [0, 0, 1, 1, 1, 1]], float)
    idx = np.array([0, 2, 3, 5])
    sel = _selection("random", idx)
    b = model_assisted(sel, [1, 0, 1, 0], 6, ref, level=0.9)
    value, lo, hi, se = _model_assisted_oracle(idx, np.array([[1.0, 0, 1, 0]]), 6, ref, 0.9)
    assert b.value.shape == (1,)
    np.testing.assert_allclose(b.value, value, atol=1e-10)
    np.testing.assert_allclose(b.se, se, atol=1e-10)
    np.testing.assert_allclose(b.ci_low, lo, atol=1e-10)
    np.testing.assert_allclose(b.ci_high, hi, atol=1e-10)


# -- reference_estimates ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def refs():
    rng = np.random.default_rng(23)
    ref = (rng.random((25, 20)) < np.linspace(0.1, 0.95, 20)).astype(float)
    conf = np.clip(ref * 0.7 + rng.random((25, 20)) * 0.3, 0, 1)
    idx = np.array([1, 4, 6, 9, 12, 15, 18])
    w = np.array([0.05, 0.1, 0.2, 0.15, 0.1, 0.3, 0.1])
    return ref, conf, idx, w


def test_reference_estimates_default_estimators_of_a_non_probability_subset(refs) -> None:
    """DPP offers mean and weighted_mean: both are the weighted sums on the references."""
    ref, _, idx, w = refs
    sel = _selection("dpp", idx, w)
    out = reference_estimates(sel, ref)
    assert list(out) == ["mean", "weighted_mean"]
    want = np.array([sum(w[j] * ref[i, idx[j]] for j in range(7)) for i in range(25)])
    for v in out.values():
        np.testing.assert_allclose(v, want, atol=1e-12)


def test_reference_estimates_skip_linear_estimators_of_probability_designs(refs) -> None:
    ref, conf, idx, w = refs
    assert reference_estimates(_selection("random", idx), ref) == {}
    sel = _selection("subtask_stratified", idx, w)
    out = reference_estimates(
        sel,
        ref,
        reference_confidence=conf,
        estimators=("mean", "weighted_confidence", "horvitz_thompson", "irt"),
    )
    assert list(out) == ["weighted_confidence"]
    np.testing.assert_allclose(out["weighted_confidence"], conf[:, idx] @ w, atol=1e-12)


def test_reference_estimates_weighted_confidence_needs_confidences(refs) -> None:
    ref, conf, idx, w = refs
    sel = _selection("anchor_points", idx, w, estimator="weighted_confidence")
    without = reference_estimates(sel, ref)
    assert list(without) == ["weighted_mean"]
    np.testing.assert_allclose(without["weighted_mean"], ref[:, idx] @ w, atol=1e-12)
    with_conf = reference_estimates(sel, ref, reference_confidence=conf)
    assert list(with_conf) == ["weighted_confidence", "weighted_mean"]
    np.testing.assert_allclose(with_conf["weighted_confidence"], conf[:, idx] @ w, atol=1e-12)
    np.testing.assert_allclose(with_conf["weighted_mean"], ref[:, idx] @ w, atol=1e-12)


def test_reference_estimates_unknown_method_uses_its_own_estimator(refs) -> None:
    ref, _, idx, w = refs
    sel = _selection("hand_picked", idx, w, estimator="weighted_mean")
    out = reference_estimates(sel, ref)
    assert list(out) == ["weighted_mean"]
    np.testing.assert_allclose(out["weighted_mean"], ref[:, idx] @ w, atol=1e-12)


def test_reference_estimates_leave_out_a_failing_estimator_and_go_on(refs) -> None:
    ref, _, idx, w = refs
    sel = _selection("dpp", idx, w)
    out = reference_estimates(sel, ref, estimators=("no_such_estimator", "weighted_mean"))
    assert list(out) == ["weighted_mean"]
    np.testing.assert_allclose(out["weighted_mean"], ref[:, idx] @ w, atol=1e-12)


# -- reference_calibrations -------------------------------------------------------------------------
def test_reference_calibrations_default_level_and_inflation(refs) -> None:
    ref, _, idx, w = refs
    ref20 = ref[:MIN_REFERENCE_MODELS]
    sel = _selection("dpp", idx, w)
    cals = reference_calibrations(sel, ref20)
    assert list(cals) == ["mean", "weighted_mean"]
    truth = ref20.mean(axis=1)
    grid, b, s, q = _calibration_oracle(ref20[:, idx] @ w, truth, 0.95, 1.1)
    for cal in cals.values():
        assert cal.confidence == 0.95 and cal.inflation == CALIBRATION_INFLATION == 1.1
        np.testing.assert_allclose(cal.grid, grid, atol=1e-12)
        np.testing.assert_allclose(cal.bias, b, atol=1e-10)
        np.testing.assert_allclose(cal.spread, s, atol=1e-10)
        np.testing.assert_allclose(cal.quantile, q, rtol=1e-9)


def test_reference_calibrations_level_inflation_and_given_values(refs) -> None:
    ref, _, idx, w = refs
    sel = _selection("dpp", idx, w)
    truth = ref.mean(axis=1)
    shifted = ref[:, idx] @ w + np.linspace(-0.05, 0.05, 25)
    cals = reference_calibrations(
        sel,
        ref,
        level=0.8,
        inflation=1.3,
        values={"weighted_mean": shifted, "weighted_confidence": shifted},
    )
    assert list(cals) == ["weighted_mean"]  # weighted_confidence is calibrated on confidences
    cal = cals["weighted_mean"]
    assert cal.confidence == 0.8 and cal.inflation == 1.3
    grid, b, s, q = _calibration_oracle(shifted, truth, 0.8, 1.3)
    np.testing.assert_allclose(cal.grid, grid, atol=1e-12)
    np.testing.assert_allclose(cal.bias, b, atol=1e-10)
    np.testing.assert_allclose(cal.spread, s, atol=1e-10)
    np.testing.assert_allclose(cal.quantile, q, rtol=1e-9)


def test_reference_calibrations_need_twenty_models_in_a_matrix(refs) -> None:
    ref, _, idx, w = refs
    sel = _selection("dpp", idx, w)
    assert MIN_REFERENCE_MODELS == 20
    assert reference_calibrations(sel, ref[:19]) == {}
    assert len(reference_calibrations(sel, ref[:20])) == 2
    assert reference_calibrations(sel, ref[0]) == {}  # one model's results, not a matrix


def test_min_model_assisted_n_is_fifty() -> None:
    """The documented threshold (coverage study): score_models offers model_assisted from n = 50."""
    assert MIN_MODEL_ASSISTED_N == 50


def test_model_assisted_zero_se_for_some_models_only() -> None:
    """Census of N = 6 (pi is 1 only up to rounding): a model whose residuals are all equal has
    se = 0 and gets Clopper-Pearson bounds; the other keeps its (tiny-se) Student bounds."""
    ref = np.array([[1] * 6, [0] * 6, [1] * 6], float)  # every item equally hard: equal yhat
    y = np.array([[1] * 6, [1, 0, 1, 0, 1, 0]], float)
    sel = _selection("random", np.arange(6))
    b = model_assisted(sel, y, 6, ref, level=0.95)
    assert b.se[0] == 0.0 and 0.0 < b.se[1] < 1e-6
    ci = stats.binomtest(6, 6).proportion_ci(0.95, method="exact")
    assert (b.ci_low[0], b.ci_high[0]) == pytest.approx((ci.low, 1.0), abs=1e-12)
    assert (b.ci_low[1], b.ci_high[1]) == pytest.approx((0.5, 0.5), abs=1e-6)


def _extreme_references(hard_on_subset: bool):
    """2000 references that all miss (or all get) the 20 subset items and all get (miss) the 20
    others: item accuracies (0.5 / 2001 or 2000.5 / 2001), logits -+8.29."""
    r = 2000
    ref = np.zeros((r, 40))
    if hard_on_subset:
        ref[:, 20:] = 1.0
    else:
        ref[:, :20] = 1.0
    return ref, np.arange(20)


def test_model_assisted_bounds_are_clipped_above_one() -> None:
    """An all-right model on items the references never get right: shift clipped at +8, the
    estimate ``1 + mean_all yhat - mean_S yhat`` is above 1 by more than ``t se``: both bounds
    clip to 1, and the no-information fallback (issue 24) widens [1, 1] to Wilson's."""
    ref, idx = _extreme_references(hard_on_subset=True)
    y = np.ones((1, 20))
    b = model_assisted(_selection("random", idx), y, 40, ref, level=0.95)
    value, lo, _, se = _model_assisted_oracle(idx, y, 40, ref, 0.95)
    q = stats.t.ppf(0.975, 18)
    assert value[0] - q * se[0] > 1.0
    np.testing.assert_allclose(b.value, value, atol=1e-10)
    assert b.ci_high[0] == 1.0 and b.ci_low[0] == pytest.approx(lo[0], abs=1e-12)
    assert lo[0] < 0.95


def test_model_assisted_bounds_are_clipped_below_zero() -> None:
    ref, idx = _extreme_references(hard_on_subset=False)
    y = np.zeros((1, 20))
    b = model_assisted(_selection("random", idx), y, 40, ref, level=0.95)
    value, _, hi, se = _model_assisted_oracle(idx, y, 40, ref, 0.95)
    q = stats.t.ppf(0.975, 18)
    assert value[0] + q * se[0] < 0.0
    np.testing.assert_allclose(b.value, value, atol=1e-10)
    assert b.ci_low[0] == 0.0 and b.ci_high[0] == pytest.approx(hi[0], abs=1e-12)
    assert hi[0] > 0.05
