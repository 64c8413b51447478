"""Mutation-driven tests for ``app.core.selectors.tiny_benchmarks`` on small synthetic pools.

Oracles: scikit-learn (``kmeans_plusplus``, ``KMeans(init="k-means++")``,
``pairwise_distances_argmin`` checked against brute force), ``fit_irt`` called directly with the
documented arguments, and the documented closed forms (``lambda_p = k / N``, ``v``, ``lambda_gp``, the held-out split size). Two IRT fits
of the same data agree to ~1e-12 only (threaded BLAS), hence ``atol=1e-9`` on item parameters.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.cluster import kmeans_plusplus as sk_kmeans_plusplus
from sklearn.metrics import pairwise_distances_argmin

from app.core.irt.fit import fit_irt
from app.core.selectors import make_selector
from app.core.selectors.tiny_benchmarks import kmeans_plusplus

KW = {"dims": 2, "max_iter": 40}


def _data(m=30, n_items=16, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((m, 1))
    b = np.linspace(-1.5, 1.5, n_items)
    p = 1 / (1 + np.exp(-(1.5 * theta - b)))
    return (rng.random((m, n_items)) < p).astype(float)


@pytest.mark.parametrize(("k", "seed"), [(1, 0), (2, 1), (5, 2), (9, 3)])
def test_kmeans_plusplus_is_scikit_learns(k, seed):
    x = np.random.default_rng(seed).standard_normal((40, 3)) * [1.0, 3.0, 0.5]
    ours = kmeans_plusplus(x, k, np.random.RandomState(seed))
    ref, _ = sk_kmeans_plusplus(x, k, random_state=np.random.RandomState(seed))
    np.testing.assert_array_equal(ours, ref)
    km = KMeans(n_clusters=k, init=kmeans_plusplus, n_init=1, random_state=seed).fit(x)
    km_ref = KMeans(n_clusters=k, init="k-means++", n_init=1, random_state=seed).fit(x)
    np.testing.assert_array_equal(km.cluster_centers_, km_ref.cluster_centers_)
    np.testing.assert_array_equal(km.labels_, km_ref.labels_)


def test_kmeans_plusplus_with_an_outlier_last():
    """The last point is far away: it carries almost all the D^2 mass, so the candidate draws
    land on the last index (the one the clip to N - 1 guards)."""
    x = np.vstack([np.random.default_rng(5).standard_normal((20, 2)), [[100.0, 100.0]]])
    for seed in range(5):
        ours = kmeans_plusplus(x, 3, np.random.RandomState(seed))
        ref, _ = sk_kmeans_plusplus(x, 3, random_state=np.random.RandomState(seed))
        np.testing.assert_array_equal(ours, ref)


def test_kmeans_plusplus_with_duplicate_points():
    x = np.repeat(np.random.default_rng(4).standard_normal((3, 2)), [5, 1, 6], axis=0)
    ours = kmeans_plusplus(x, 3, np.random.RandomState(7))
    ref, _ = sk_kmeans_plusplus(x, 3, random_state=np.random.RandomState(7))
    np.testing.assert_array_equal(ours, ref)


@pytest.fixture(scope="module")
def small():
    y = _data()
    sel = make_selector("tiny_benchmarks", **KW).fit(y)
    return y, sel


def test_fit_passes_the_documented_arguments(small):
    y, sel = small
    ref = fit_irt(
        y, rng=42, dims=2, form="scalar_difficulty", prior="hierarchical", max_iter=40, tol=1e-4
    )
    np.testing.assert_allclose(sel.irt_.a, ref.a, atol=1e-9)
    np.testing.assert_allclose(sel.irt_.b, ref.b, atol=1e-9)
    np.testing.assert_allclose(sel.embeddings_, np.hstack([ref.a, ref.b[:, None]]), atol=1e-9)
    # held-out split: round(0.2 * 30) = 6 sources from the fit_seed permutation
    perm = np.random.default_rng(42).permutation(30)
    np.testing.assert_array_equal(sel.holdout_, np.sort(perm[:6]))
    train = fit_irt(
        y[np.sort(perm[6:])], rng=42, dims=2, form="scalar_difficulty", prior="hierarchical",
        max_iter=40, tol=1e-4,
    )  # fmt: skip
    np.testing.assert_allclose(sel.irt_train_.a, train.a, atol=1e-9)
    assert sel.v_ == pytest.approx(np.mean([np.var(r) for r in y]), rel=1e-14)


def test_fit_arguments_reach_the_irt_fit():
    y = _data(m=12, n_items=10, seed=1)
    sel = make_selector(
        "tiny_benchmarks", dims=1, form="per_dimension", prior="fixed", fit_seed=3, max_iter=25,
        calibrate_gp_irt=False,
    ).fit(y)  # fmt: skip
    ref = fit_irt(y, rng=3, dims=1, form="per_dimension", prior="fixed", max_iter=25, tol=1e-4)
    np.testing.assert_allclose(sel.irt_.a, ref.a, atol=1e-9)
    np.testing.assert_allclose(sel.irt_.b, ref.b, atol=1e-9)
    assert sel.irt_.form == "per_dimension" and sel.irt_.prior == "fixed"
    assert sel.irt_train_ is None and sel.holdout_.shape == (0,)
    s = sel.select(4, rng=0)
    assert int(s.fitted["irt_form"]) == 1 and "beta" not in s.fitted


@pytest.mark.parametrize(("fraction", "n_hold"), [(0.01, 1), (0.5, 5), (0.99, 9)])
def test_holdout_size_is_clipped_to_one_and_m_minus_one(fraction, n_hold):
    y = _data(m=10, n_items=8, seed=2)
    sel = make_selector("tiny_benchmarks", dims=1, max_iter=15, holdout_fraction=fraction).fit(y)
    assert sel.holdout_.shape == (n_hold,) and sel.irt_train_.theta.shape == (10 - n_hold, 1)


def test_single_source_has_no_calibration():
    y = _data(m=1, n_items=8, seed=3)
    sel = make_selector("tiny_benchmarks", dims=1, max_iter=15).fit(y)
    assert sel.irt_train_ is None and sel.holdout_.size == 0
    s = sel.select(3, rng=0)
    assert float(s.fitted["beta"]) == 0.0


def test_selection_matches_scikit_learn_kmeans_and_brute_force_nearest(small):
    _, sel = small
    for seed in (0, 1, 6):  # the k-means seed is drawn from the selection rng
        expected = int(np.random.default_rng(seed).integers(0, 2**31 - 1))
        assert int(sel.select(2, rng=seed).fitted["kmeans_seed"]) == expected
    s = sel.select(5, rng=9)
    km_seed = int(np.random.default_rng(9).integers(0, 2**31 - 1))
    assert int(s.fitted["kmeans_seed"]) == km_seed
    e = sel.embeddings_
    km = KMeans(n_clusters=5, init="k-means++", n_init=1, random_state=km_seed).fit(e)
    # the nearest item per centroid (a 2-item cluster's centroid is equidistant to both: ties are
    # resolved as scikit-learn's pairwise_distances_argmin does, checked against brute force)
    nearest = pairwise_distances_argmin(km.cluster_centers_, e)
    dist = ((km.cluster_centers_[:, None, :] - e[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(dist[np.arange(5), nearest], dist.min(axis=1), atol=1e-12)
    anchors = np.unique(nearest)
    np.testing.assert_array_equal(s.indices, anchors)
    share = np.bincount(km.labels_, minlength=5) / 16
    expected = np.array([share[nearest == a].sum() for a in anchors])
    np.testing.assert_allclose(s.weights, expected, rtol=1e-14)
    f = s.fitted
    assert int(f["duplicates"]) == 5 - anchors.size
    assert float(f["lambda_p"]) == anchors.size / 16
    np.testing.assert_array_equal(f["anchor_candidate_positions"], anchors)
    np.testing.assert_array_equal(f["candidates"], np.arange(16))
    np.testing.assert_array_equal(f["theta_min"], sel.irt_.theta.min(axis=0))
    np.testing.assert_array_equal(f["theta_max"], sel.irt_.theta.max(axis=0))
    np.testing.assert_array_equal(f["irt_a"], sel.irt_.a)
    np.testing.assert_array_equal(f["irt_b"], sel.irt_.b)
    assert int(f["irt_form"]) == 0 and float(f["ability_prior"]) == 1.0
    assert float(f["v"]) == sel.v_
    beta = float(f["beta"])
    v_prime = sel.v_ / (4 * anchors.size)
    assert float(f["lambda_gp"]) == pytest.approx(beta**2 / (v_prime + beta**2), rel=1e-14)


def test_fixed_kmeans_seed_and_candidates(small):
    y, _ = small
    cand = np.arange(2, 16, 2)
    sel = make_selector("tiny_benchmarks", kmeans_seed=5, ability_prior=2.0, **KW).fit(
        y, candidates=cand
    )
    s = sel.select(3, rng=0)
    assert int(s.fitted["kmeans_seed"]) == 5 and float(s.fitted["ability_prior"]) == 2.0
    km = KMeans(n_clusters=3, init="k-means++", n_init=1, random_state=5).fit(sel.embeddings_)
    assert np.isin(s.indices, cand).all()
    np.testing.assert_allclose(
        np.sort(s.weights), np.sort(np.bincount(km.labels_, minlength=3) / 7), rtol=1e-14
    )


def test_every_candidate_an_anchor_gives_beta_zero(small):
    _, sel = small
    s = sel.select(16, rng=0)
    if s.size == 16:
        assert float(s.fitted["beta"]) == 0.0 and float(s.fitted["lambda_gp"]) == 0.0


def test_lambda_gp_is_one_when_beta_and_v_vanish():
    y = np.zeros((6, 5))
    y[::2] = 1.0  # every model answers all items alike: v = 0
    sel = make_selector("tiny_benchmarks", dims=1, max_iter=10).fit(y)
    assert sel.v_ == 0.0
    s = sel.select(5, rng=0)
    if s.size == 5:
        assert float(s.fitted["beta"]) == 0.0 and float(s.fitted["lambda_gp"]) == 1.0


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"form": "x"}, r"^form: expected one of"),
        ({"prior": "x"}, r"^prior: expected one of"),
        ({"holdout_fraction": 0.0}, r"^holdout_fraction: must lie in \(0, 1\)$"),
        ({"holdout_fraction": 1.0}, r"^holdout_fraction: must lie in \(0, 1\)$"),
        ({"kmeans_seed": True}, r"^kmeans_seed: expected an int or None$"),
        ({"kmeans_seed": 1.5}, r"^kmeans_seed: expected an int or None$"),
        ({"ability_prior": 0.0}, r"^ability_prior: must be positive$"),
        ({"ability_prior": -1.0}, r"^ability_prior: must be positive$"),
        ({"fit_tol": 0.0}, r"^fit_tol: expected a number in \(0, 1\), got 0\.0$"),
        ({"fit_tol": 1.0}, r"^fit_tol: expected a number in \(0, 1\), got 1\.0$"),
        ({"fit_tol": True}, r"^fit_tol: expected a number in \(0, 1\), got True$"),
        ({"fit_tol": "1e-4"}, r"^fit_tol: expected a number in \(0, 1\), got '1e-4'$"),
    ],
)
def test_bad_parameters_exact_messages(kw, msg):
    with pytest.raises(ValueError, match=msg):
        make_selector("tiny_benchmarks", dims=1, max_iter=5, **kw).fit(_data(m=6, n_items=5))


def test_numpy_int_kmeans_seed_is_accepted():
    sel = make_selector("tiny_benchmarks", dims=1, max_iter=5, kmeans_seed=np.int64(3))
    sel.fit(_data(m=6, n_items=5))
    assert int(sel.select(2, rng=0).fitted["kmeans_seed"]) == 3


def test_documented_defaults():
    assert make_selector("tiny_benchmarks").params == {
        "dims": 10,
        "form": "scalar_difficulty",
        "prior": "hierarchical",
        "fit_seed": 42,
        "kmeans_seed": None,
        "holdout_fraction": 0.2,
        "calibrate_gp_irt": True,
        "ability_prior": 1.0,
        "max_iter": 400,
        "fit_tol": 1e-4,
    }


def test_uncalibrated_holdout_is_an_empty_index_array():
    sel = make_selector("tiny_benchmarks", dims=1, max_iter=10, calibrate_gp_irt=False)
    sel.fit(_data(m=8, n_items=6, seed=5))
    assert sel.holdout_.dtype == np.int64 and sel.holdout_.shape == (0,)


def test_beta_on_a_candidate_subset_matches_per_model_scoring():
    y = _data(m=30, n_items=20, seed=6)
    cand = np.arange(1, 20, 2)  # odd items only: candidate positions != item positions
    sel = make_selector("tiny_benchmarks", **KW).fit(y, candidates=cand)
    s = sel.select(4, rng=1)
    anchors = s.fitted["anchor_candidate_positions"]
    rest = np.setdiff1d(np.arange(cand.size), anchors)
    yc = y[np.ix_(sel.holdout_, cand)]
    bank = sel.irt_train_
    errs = []
    for j in range(yc.shape[0]):  # one held-out model at a time
        theta, _ = bank.score(yc[j : j + 1, anchors], anchors)
        errs.append(abs(bank.predict_proba(theta, rest).mean() - yc[j, rest].mean()))
    assert float(s.fitted["beta"]) == pytest.approx(np.mean(errs), rel=1e-9)


def test_duplicate_embeddings_merge_anchors_without_leaking_warnings():
    import warnings

    sel = make_selector("tiny_benchmarks", dims=1, max_iter=10).fit(_data(m=10, n_items=24))
    # 6 distinct embeddings, 4 items each: 12 centroids, at most 6 distinct clusters and anchors
    sel.embeddings_ = np.repeat(np.random.default_rng(9).standard_normal((6, 2)) * 5, 4, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn's ConvergenceWarning is handled inside
        s = sel.select(12, rng=0)
    assert s.size <= 6 and int(s.fitted["duplicates"]) == 12 - s.size
    np.testing.assert_allclose(np.sort(s.weights), np.full(s.size, 1 / s.size), rtol=1e-14)


def test_lambda_gp_is_one_for_a_single_constant_source():
    """One source model (no held-out calibration: beta = 0) answering every item alike (v = 0):
    beta^2 / (v' + beta^2) is 0/0; with v' = 0 it equals 1 for every beta > 0, so 1 is its
    continuous extension."""
    sel = make_selector("tiny_benchmarks", dims=1, max_iter=10).fit(np.ones((1, 5)))
    s = sel.select(2, rng=0)
    assert sel.v_ == 0.0 and float(s.fitted["beta"]) == 0.0
    assert float(s.fitted["lambda_gp"]) == 1.0


def test_fit_tol_reaches_both_irt_fits(monkeypatch):
    import app.core.selectors.tiny_benchmarks as tiny_module

    seen = []
    real = tiny_module.fit_irt

    def spy(y, **kw):
        seen.append(kw["tol"])
        return real(y, **kw)

    monkeypatch.setattr(tiny_module, "fit_irt", spy)
    make_selector("tiny_benchmarks", dims=1, max_iter=20).fit(_data())
    make_selector("tiny_benchmarks", dims=1, max_iter=20, fit_tol=3e-3).fit(_data())
    assert seen == [1e-4, 1e-4, 3e-3, 3e-3]  # the main fit and the held-out calibration fit
