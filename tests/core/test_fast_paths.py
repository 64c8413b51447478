"""Fast paths of the engine against their direct (slow) definitions."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors.dpp import multi_indices, projection_basis


@pytest.mark.parametrize("n", [1, 7, 60, 300])
def test_dpp_basis_is_the_qr_of_the_entrywise_vandermonde_bit_for_bit(n):
    """The power table + gather builds exactly ``V[i, j] = prod_r x_ir ** alpha_jr``."""
    x = np.random.default_rng(n).uniform(-0.99, 0.99, (700, 4))
    alpha = multi_indices(n, 4)
    vander = np.ones((x.shape[0], n))
    for r in range(4):
        vander *= x[:, r : r + 1] ** alpha[:, r]
    q_direct, _ = np.linalg.qr(vander, mode="reduced")
    np.testing.assert_array_equal(projection_basis(x, n), q_direct)


@pytest.mark.parametrize("form", ["scalar_difficulty", "per_dimension"])
@pytest.mark.parametrize("masked", [False, True])
def test_mixed_precision_objective_matches_float64(form, masked):
    from app.core.irt.fit import _Hyper, _Layout, _make_objective, _make_objective_mixed

    rng = np.random.default_rng(3)
    m, n, d = 40, 70, 4
    y = (rng.random((m, n)) < 0.6).astype(float)
    w = (rng.random((m, n)) < 0.8).astype(float) if masked else None
    lay = _Layout(m, n, d, form == "per_dimension")
    hyp = _Hyper(mu_a=rng.normal(size=d), sd_a=rng.uniform(0.5, 2, d), mu_b=0.3, sd_b=0.7)
    x = rng.normal(size=lay.size)
    f64, g64 = _make_objective(y, w, lay, hyp)(x)
    f32, g32 = _make_objective_mixed(y, w, lay, hyp)(x)
    assert f32 == pytest.approx(f64, rel=1e-6)
    np.testing.assert_allclose(g32, g64, rtol=0, atol=1e-5 * np.abs(g64).max())


def test_mixed_precision_fit_agrees_with_float64_within_the_optimiser_tolerance(gpqa):
    """On a GPQA-sized fit (300 x 224, D = 10): the two paths land on the same optimum."""
    from app.core.irt.fit import fit_irt

    correct = gpqa["correct"]
    rng = np.random.default_rng(0)
    y = np.asarray(correct, float)[rng.choice(correct.shape[0], 300, replace=False)]
    y = y[:, rng.choice(y.shape[1], 224, replace=False)]
    exact = fit_irt(y, dims=10, rng=42, precision="float64")
    mixed = fit_irt(y, dims=10, rng=42, precision="mixed")
    p_exact = exact.predict_proba(exact.theta)
    p_mixed = mixed.predict_proba(mixed.theta)
    assert np.mean(np.abs(p_exact - p_mixed)) < 0.01
    assert np.corrcoef(exact.b, mixed.b)[0, 1] > 0.999
    # the float64 path's own tolerance moves the fit more than the precision does
    tighter = fit_irt(y, dims=10, rng=42, precision="float64", tol=1e-6)
    p_tight = tighter.predict_proba(tighter.theta)
    assert np.mean(np.abs(p_exact - p_mixed)) < np.mean(np.abs(p_exact - p_tight))
    with pytest.raises(ValueError, match="precision"):
        fit_irt(y, precision="half")


@pytest.mark.parametrize("n_clusters", [1, 10, 57, 200])
def test_kmeans_plusplus_is_sklearns_bit_for_bit(gpqa, n_clusters):
    """tiny_benchmarks' lean k-means++ seeding gives sklearn's KMeans result exactly."""
    from sklearn.cluster import KMeans

    from app.core.irt.fit import fit_irt
    from app.core.selectors.tiny_benchmarks import kmeans_plusplus

    rng = np.random.default_rng(n_clusters)
    y = np.asarray(gpqa["correct"], float)[rng.choice(420, 300, replace=False)][:, :224]
    emb = fit_irt(y, dims=10, rng=42, max_iter=60).embeddings()
    points = np.vstack([emb, emb[:30]])  # duplicates too
    for seed in (0, 12345):
        ref = KMeans(n_clusters=n_clusters, n_init=1, random_state=seed).fit(points)
        fast = KMeans(n_clusters=n_clusters, init=kmeans_plusplus, n_init=1, random_state=seed).fit(
            points
        )
        np.testing.assert_array_equal(fast.cluster_centers_, ref.cluster_centers_)
        np.testing.assert_array_equal(fast.labels_, ref.labels_)
        assert fast.inertia_ == ref.inertia_
