"""tinyBenchmarks (paper §3.6): anchors, IRT / p-IRT / gp-IRT on real GPQA, no target-label leakage."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.estimation.estimators import estimate
from app.core.irt.fit import IRTModel
from app.core.results import Selection
from app.core.selectors import make_selector


@pytest.fixture(scope="module")
def gpqa_split(gpqa):
    correct = gpqa["correct"].astype(np.float64)
    rng = np.random.default_rng(0)
    models = rng.permutation(correct.shape[0])
    sources, targets = models[:300], models[300:350]
    candidates = np.sort(rng.permutation(correct.shape[1])[:224])  # the seen half
    return correct, sources, targets, candidates


@pytest.fixture(scope="module")
def fitted(gpqa_split):
    correct, sources, _, candidates = gpqa_split
    return make_selector("tiny_benchmarks").fit(correct[sources], candidates=candidates)


def test_pirt_and_gpirt_close_to_truth_on_gpqa(fitted, gpqa_split):
    correct, _, targets, candidates = gpqa_split
    truth = correct[np.ix_(targets, candidates)].mean(axis=1)
    errors = {e: [] for e in ("irt", "p_irt", "gp_irt")}
    for seed in range(3):
        s = fitted.select(50, rng=seed)
        y = correct[np.ix_(targets, s.indices)]
        for e in errors:
            errors[e].append(np.mean(np.abs(fitted.estimate(s, y, estimator=e) - truth)))
    mae = {e: float(np.mean(v)) for e, v in errors.items()}
    # uniform random at n = 50 of 224 has MAE ~0.045 on these targets
    assert mae["p_irt"] < 0.035
    assert mae["gp_irt"] < 0.04
    assert mae["irt"] < 0.06


def test_selection_shape_weights_and_fitted_state(fitted, gpqa_split):
    _, _, _, candidates = gpqa_split
    s = fitted.select(25, rng=1)
    assert s.method == "tiny_benchmarks" and s.estimator == "irt"
    assert s.size == 25 - int(s.fitted["duplicates"])
    assert np.unique(s.indices).size == s.size and np.isin(s.indices, candidates).all()
    assert np.all(s.weights > 0) and s.weights.sum() == pytest.approx(1.0)
    f = s.fitted
    assert f["irt_a"].shape == (224, 10) and f["irt_b"].shape == (224,)
    np.testing.assert_array_equal(candidates[f["anchor_candidate_positions"]], s.indices)
    assert 0.0 <= float(f["lambda_gp"]) <= 1.0
    assert float(f["lambda_p"]) == pytest.approx(s.size / 224)
    assert np.all(f["theta_min"] <= f["theta_max"])


def test_stored_selection_scores_without_refit(fitted, gpqa_split):
    correct, _, targets, _ = gpqa_split
    s = fitted.select(30, rng=2)
    stored = Selection(  # as if reloaded from storage: plain fields, no selector object
        method=s.method,
        indices=np.array(s.indices),
        weights=np.array(s.weights),
        estimator=s.estimator,
        estimate_on=s.estimate_on,
        signal=s.signal,
        n_requested=s.n_requested,
        n_candidates=s.n_candidates,
        seed=s.seed,
        params=dict(s.params),
        fitted={k: np.array(v) for k, v in s.fitted.items()},
    )
    y = correct[np.ix_(targets, s.indices)]
    for e in ("irt", "p_irt", "gp_irt"):
        np.testing.assert_allclose(
            estimate(stored, y, estimator=e), fitted.estimate(s, y, estimator=e)
        )


def test_gpirt_lambda_never_reads_target_labels(gpqa_split):
    correct, sources, targets, candidates = gpqa_split
    shuffled = correct.copy()
    rng = np.random.default_rng(5)
    # shuffle every target's labels (anchors included): the fit only ever sees the sources
    shuffled[targets] = rng.permuted(shuffled[targets], axis=1)
    kw = {"dims": 2, "max_iter": 150}
    a = make_selector("tiny_benchmarks", **kw).fit(correct[sources], candidates=candidates)
    b = make_selector("tiny_benchmarks", **kw).fit(shuffled[sources], candidates=candidates)
    sa, sb = a.select(20, rng=4), b.select(20, rng=4)
    assert float(sa.fitted["lambda_gp"]) == float(sb.fitted["lambda_gp"])
    # and a target's gp-IRT estimate does not move when its non-anchor labels are shuffled
    non_anchor = np.setdiff1d(candidates, sa.indices)
    y1 = correct[np.ix_(targets, sa.indices)]
    shuffled2 = correct.copy()
    shuffled2[np.ix_(targets, non_anchor)] = rng.permuted(
        correct[np.ix_(targets, non_anchor)], axis=1
    )
    y2 = shuffled2[np.ix_(targets, sa.indices)]
    np.testing.assert_array_equal(
        a.estimate(sa, y1, estimator="gp_irt"), a.estimate(sa, y2, estimator="gp_irt")
    )


def test_beta_matches_slow_heldout_reference(gpqa_split):
    correct, sources, _, candidates = gpqa_split
    sel = make_selector("tiny_benchmarks", dims=2, max_iter=150).fit(
        correct[sources], candidates=candidates
    )
    s = sel.select(15, rng=0)
    anchors = s.fitted["anchor_candidate_positions"]
    rest = np.setdiff1d(np.arange(candidates.size), anchors)
    y = correct[np.ix_(sources, candidates)][sel.holdout_]
    bank = sel.irt_train_
    errs = []
    for j in range(y.shape[0]):  # one held-out model at a time
        theta, _ = bank.score(y[j : j + 1, anchors], anchors)
        errs.append(abs(bank.predict_proba(theta, rest).mean() - y[j, rest].mean()))
    assert float(s.fitted["beta"]) == pytest.approx(np.mean(errs), rel=1e-9)
    v = np.mean(np.var(correct[np.ix_(sources, candidates)], axis=1))
    beta = np.mean(errs)
    assert float(s.fitted["lambda_gp"]) == pytest.approx(
        beta**2 / (v / (4 * anchors.size) + beta**2)
    )
    # the held-out sources were not used to fit the bank that scores them
    assert sel.holdout_.size == 60 and bank.theta.shape[0] == 240


def test_all_candidates_as_anchors_reduces_to_the_mean(gpqa_split):
    correct, sources, targets, _ = gpqa_split
    cand = np.arange(30)
    sel = make_selector("tiny_benchmarks", dims=2, max_iter=100).fit(
        correct[sources], candidates=cand
    )
    s = sel.select(30, rng=0)
    if s.size == 30:  # no shared anchors
        y = correct[np.ix_(targets, s.indices)]
        truth = correct[np.ix_(targets, cand)].mean(axis=1)
        for e in ("irt", "p_irt", "gp_irt"):
            np.testing.assert_allclose(sel.estimate(s, y, estimator=e), truth)


def test_duplicate_anchors_are_merged():
    rng = np.random.default_rng(9)
    correct = (rng.random((80, 24)) < 0.5).astype(float)
    sel = make_selector("tiny_benchmarks", dims=1, max_iter=50).fit(correct)
    # 6 distinct embeddings, each shared by 4 items: 12 centroids must share anchors
    sel.embeddings_ = np.repeat(rng.standard_normal((6, 2)) * 5, 4, axis=0)
    s = sel.select(12, rng=0)
    assert s.size <= 6 and int(s.fitted["duplicates"]) == 12 - s.size
    assert np.unique(s.indices).size == s.size
    assert s.weights.sum() == pytest.approx(1.0)
    # merged weights: each distinct point's 4 items go to its single anchor
    np.testing.assert_allclose(np.sort(s.weights), np.full(s.size, 1 / s.size))


def test_kmeans_seed_policy(fitted):
    s1, s2 = fitted.select(20, rng=0), fitted.select(20, rng=1)
    assert not np.array_equal(s1.indices, s2.indices)  # default: derived from the selection seed
    paper = make_selector("tiny_benchmarks", kmeans_seed=42)
    paper.data_, paper.irt_, paper.embeddings_ = fitted.data_, fitted.irt_, fitted.embeddings_
    paper.irt_train_, paper.holdout_, paper.v_ = fitted.irt_train_, fitted.holdout_, fitted.v_
    p1, p2 = paper.select(20, rng=0), paper.select(20, rng=1)
    np.testing.assert_array_equal(p1.indices, p2.indices)
    assert int(p1.fitted["kmeans_seed"]) == 42


def test_pirt_needs_fitted_irt_state():
    s = Selection(
        method="random", indices=np.arange(3), weights=np.full(3, 1 / 3), estimator="mean",
        estimate_on="correct", signal="none", n_requested=3, n_candidates=10, seed=0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="selection"):
        estimate(s, np.ones((2, 3)), estimator="p_irt")


def test_bad_parameters(gpqa_split):
    correct, sources, _, _ = gpqa_split
    for kw, name in [
        ({"form": "x"}, "form"),
        ({"prior": "x"}, "prior"),
        ({"holdout_fraction": 1.5}, "holdout"),
    ]:
        with pytest.raises(ValueError, match=name):
            make_selector("tiny_benchmarks", **kw).fit(correct[sources[:20], :30])


def test_item_bank_is_an_irt_model(fitted):
    from app.core.estimation.irt_estimates import item_bank

    bank = item_bank(fitted.select(10, rng=0))
    assert isinstance(bank, IRTModel) and bank.n_items == 224


def test_uncalibrated_selection_skips_heldout_fit_and_refuses_gp_irt(fitted, gpqa_split):
    """calibrate_gp_irt=False (what the protocol uses) selects the same anchors with one IRT fit
    and says clearly that gp-IRT is unavailable, instead of silently returning p-IRT."""
    from app.core.selectors import SELECTORS

    correct, sources, targets, candidates = gpqa_split
    full = fitted
    lean = make_selector("tiny_benchmarks", calibrate_gp_irt=False).fit(
        correct[sources], candidates=candidates
    )
    assert lean.irt_train_ is None and full.irt_train_ is not None
    a, b = full.select(25, rng=3), lean.select(25, rng=3)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.weights, b.weights)
    assert "lambda_gp" not in b.fitted
    y = correct[np.ix_(targets, b.indices)]
    np.testing.assert_allclose(
        lean.estimate(b, y, estimator="p_irt"), full.estimate(a, y, estimator="p_irt")
    )
    with pytest.raises(ValueError, match="estimator: gp_irt"):
        lean.estimate(b, y, estimator="gp_irt")
    assert SELECTORS["tiny_benchmarks"].protocol_params == {"calibrate_gp_irt": False}
