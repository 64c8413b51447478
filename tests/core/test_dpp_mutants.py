"""Mutation-driven tests for ``app.core.selectors.dpp``.

Oracles: scikit-learn's ``PCA`` and ``numpy.quantile`` for the features (steps 2-4 of the
docstring, written out in the test), ``itertools.product`` for the multi-index order, a
Vandermonde matrix built entry by entry and ``numpy.linalg.qr`` for the basis, hand-made kernels
whose DPP sample is forced, and a fresh selector for the per-``n`` cache.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.decomposition import PCA

import app.core.selectors.dpp as dpp_module
from app.core.selectors import make_selector
from app.core.selectors.dpp import (
    _exact_step,
    dpp_features,
    multi_indices,
    projection_basis,
    sample_projection_dpp,
)


def _features_reference(features, seed):
    n, s = features.shape
    d = min(n, s, 4)
    solver = "full" if d == min(n, s) else "randomized"
    z = PCA(n_components=d, svd_solver=solver, random_state=seed).fit_transform(features)
    lo = np.array([np.quantile(z[:, r], 0.01) for r in range(d)])
    hi = np.array([np.quantile(z[:, r], 0.99) for r in range(d)])
    kept = [i for i in range(n) if all(lo[r] <= z[i, r] <= hi[r] for r in range(d))]
    x = z[kept].copy()
    for r in range(d):
        mn, mx = x[:, r].min(), x[:, r].max()
        x[:, r] = 0.99 * (2 * (x[:, r] - mn) / (mx - mn) - 1) if mx > mn else 0.0
    return np.array(kept), x


@pytest.mark.parametrize(("shape", "seed"), [((120, 9), 0), ((120, 9), 3), ((60, 3), 0)])
def test_features_match_pca_trim_and_rescale(shape, seed):
    features = np.random.default_rng(1).random(shape) @ np.diag(np.linspace(1, 3, shape[1]))
    kept, x = dpp_features(features, seed=seed)
    ref_kept, ref_x = _features_reference(features, seed)
    assert kept.dtype == np.int64
    np.testing.assert_array_equal(kept, ref_kept)
    np.testing.assert_allclose(x, ref_x, atol=1e-12)
    assert kept.size < shape[0]  # the trimming removed something


def test_constant_component_maps_to_zero():
    features = np.zeros((30, 2))
    features[:, 0] = np.linspace(0, 1, 30)  # rank one: the second component is constant (0)
    kept, x = dpp_features(features)
    assert x.shape == (kept.size, 2)
    np.testing.assert_array_equal(x[:, 1], 0.0)
    np.testing.assert_allclose([x[:, 0].min(), x[:, 0].max()], [-0.99, 0.99])


@pytest.mark.parametrize(("n", "d"), [(1, 3), (5, 3), (12, 2), (30, 3), (20, 1)])
def test_multi_indices_match_itertools(n, d):
    expected = []
    k = 0
    while len(expected) < n:
        expected += [t for t in itertools.product(range(k + 1), repeat=d) if max(t) == k]
        k += 1
    got = multi_indices(n, d)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.array(expected[:n]))


@pytest.mark.parametrize(("n", "d"), [(1, 2), (7, 2), (10, 3)])
def test_projection_basis_is_the_qr_of_the_vandermonde(n, d):
    x = np.random.default_rng(2).uniform(-0.99, 0.99, (25, d))
    alpha = multi_indices(n, d)
    v = np.array([[np.prod([x[i, r] ** alpha[j, r] for r in range(d)]) for j in range(n)]
                  for i in range(25)])  # fmt: skip
    q_ref, _ = np.linalg.qr(v)
    q = projection_basis(x, n)
    assert q.shape == (25, n)
    np.testing.assert_allclose(q, q_ref, atol=1e-10)


def test_exact_step_draws_by_residual_norm():
    basis = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    u = np.array([[1.0, 0.0, 0.0]])  # item 0 drawn: residuals 0, 1, 1, 4
    taken = np.array([True, False, False, True])  # item 3 is taken too: only 1 and 2 remain
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(40):
        j, v = _exact_step(basis, u, taken, rng)
        assert j in (1, 2)
        np.testing.assert_allclose(v, [0.0, 1.0, 0.0], atol=1e-15)
        seen.add(j)
    assert seen == {1, 2}
    # a single admissible row is drawn for sure, with its residual vector
    j, v = _exact_step(basis, u, np.array([True, True, False, False]), rng)
    assert j in (2, 3)
    only = np.array([True, True, True, False])
    for _ in range(5):
        j, v = _exact_step(basis, u, only, np.random.default_rng(1))
        assert j == 3
        np.testing.assert_allclose(v, [0.0, 0.0, 2.0])


def test_exact_step_frequencies():
    basis = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 2.0], [3.0, 0.0]])
    u = np.array([[1.0, 0.0]])  # residual norms 0, 1, 4, 0 -> P(1) = 0.2, P(2) = 0.8
    rng = np.random.default_rng(5)
    draws = [_exact_step(basis, u, np.zeros(4, dtype=bool), rng)[0] for _ in range(2000)]
    assert set(draws) <= {1, 2}
    assert abs(np.mean(np.array(draws) == 1) - 0.2) < 5 * np.sqrt(0.16 / 2000)


def test_auto_switches_to_phased_at_the_threshold_rank(monkeypatch):
    """``auto`` is ``phased`` from rank PHASED_MIN_RANK (128) on; the threshold is lowered to 4
    here to keep the test small."""
    monkeypatch.setattr(dpp_module, "PHASED_MIN_RANK", 4)
    rng = np.random.default_rng(3)
    for rank, method in ((3, "chain"), (4, "phased")):
        q, _ = np.linalg.qr(rng.standard_normal((12, rank)))
        other = "phased" if method == "chain" else "chain"
        differ = 0
        for seed in range(20):
            auto = sample_projection_dpp(q, np.random.default_rng(seed))
            ref = sample_projection_dpp(q, np.random.default_rng(seed), method=method)
            np.testing.assert_array_equal(auto, ref)
            alt = sample_projection_dpp(q, np.random.default_rng(seed), method=other)
            differ += not np.array_equal(alt, ref)
        assert differ > 0  # premise: the two samplers draw differently from the same stream


@pytest.mark.parametrize("method", ["chain", "phased"])
def test_full_rank_kernel_takes_every_item(method):
    q = np.linalg.qr(np.random.default_rng(4).standard_normal((9, 9)))[0]  # K = I
    s = sample_projection_dpp(q, np.random.default_rng(0), method=method)
    assert s.dtype == np.int64 and sorted(s.tolist()) == list(range(9))


def _fit(**kw):
    correct = (np.random.default_rng(6).random((40, 80)) < 0.5).astype(float)
    return make_selector("dpp", **kw).fit(correct)


def test_cache_is_per_n():
    sel = _fit()
    a5 = sel.select(5, rng=1)
    a6 = sel.select(6, rng=1)
    b5 = sel.select(5, rng=1)
    np.testing.assert_array_equal(a5.indices, b5.indices)
    np.testing.assert_array_equal(a6.indices, _fit().select(6, rng=1).indices)
    assert a6.size == 6 and a5.size == 5
    np.testing.assert_array_equal(a5.weights, np.full(5, 0.2))


def test_defaults_and_pca_seed_validation():
    assert make_selector("dpp").params == {"weighting": "mean", "pca_seed": 0}
    correct = (np.random.default_rng(7).random((10, 12)) < 0.5).astype(float)
    for bad in (True, 1.5, -1, "0"):
        with pytest.raises(ValueError, match=r"^pca_seed: expected a non-negative int, got "):
            make_selector("dpp", pca_seed=bad).fit(correct)
    make_selector("dpp", pca_seed=np.int64(0)).fit(correct)
    with pytest.raises(ValueError, match=r"^weighting: expected one of \('mean', 'sampler'\)"):
        make_selector("dpp", weighting="x").fit(correct)


def test_pca_seed_reaches_the_features():
    correct = (np.random.default_rng(8).random((40, 80)) < 0.5).astype(float)
    sel = make_selector("dpp", pca_seed=5).fit(correct)
    kept, x = dpp_features(correct.T, seed=5)
    np.testing.assert_array_equal(sel.kept_, kept)
    np.testing.assert_allclose(sel.features_, x, atol=1e-9)  # threaded BLAS: not bit-exact
    kept0, x0 = dpp_features(correct.T, seed=0)  # premise: the seed matters on this input
    assert kept0.shape != kept.shape or np.abs(x0 - x).max() > 1e-3


def test_too_large_n_message_is_exact():
    sel = _fit()
    k = sel.kept_.size
    with pytest.raises(ValueError, match=rf"^n: {k + 1} exceeds the {k} candidates left after"):
        sel.select(k + 1, rng=0)
    assert sel.select(k, rng=0).size == k


def test_features_default_seed_is_zero():
    # 80 items x 40 binary sources: d = 4 < 40, randomized PCA, and the seed matters here
    features = (np.random.default_rng(8).random((40, 80)) < 0.5).astype(float).T
    kept, x = dpp_features(features)
    kept0, x0 = dpp_features(features, seed=0)
    np.testing.assert_array_equal(kept, kept0)
    np.testing.assert_allclose(x, x0, atol=1e-9)  # threaded BLAS: not bit-exact
    kept1, x1 = dpp_features(features, seed=1)  # premise: another seed gives other features
    assert kept1.shape != kept.shape or np.abs(x1 - x).max() > 1e-3


def test_planned_sizes_share_one_basis(monkeypatch):
    """plan_sizes: one QR of the largest planned width; smaller sizes use its leading columns."""
    widths = []
    real = dpp_module.projection_basis

    def counting(x, n):
        widths.append(n)
        return real(x, n)

    monkeypatch.setattr(dpp_module, "projection_basis", counting)
    planned = _fit(weighting="sampler").plan_sizes([5, 12, 20])
    unplanned = _fit(weighting="sampler")
    for n in (5, 12, 20, 3):
        a, b = planned.select(n, rng=n), unplanned.select(n, rng=n)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_allclose(a.weights, b.weights, rtol=1e-10)
        assert int(a.fitted["basis_width"]) == (20 if n <= 20 else n)
        assert int(b.fitted["basis_width"]) == n
    # planned: width 20 once (5, 12, 20, 3 all <= 20); unplanned: one QR per size
    assert widths == [20, 5, 12, 20, 3]
    q20 = real(planned.features_, 20)
    for n in (5, 12):
        np.testing.assert_allclose(q20[:, :n], real(planned.features_, n), atol=1e-12)


def test_plan_above_the_kept_items_is_ignored_for_that_size():
    sel = _fit().plan_sizes([4, 10_000])
    assert sel.basis_width_ == 4
    with pytest.raises(ValueError, match=r"^n: 10000 exceeds"):
        sel.select(10_000, rng=0)
    assert int(sel.select(7, rng=0).fitted["basis_width"]) == 7


def test_refit_forgets_the_plan():
    correct = (np.random.default_rng(6).random((40, 80)) < 0.5).astype(float)
    sel = _fit().plan_sizes([9])
    sel.fit(correct)
    assert sel.basis_width_ is None and int(sel.select(4, rng=0).fitted["basis_width"]) == 4
