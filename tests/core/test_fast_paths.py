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
    from app.core.irt.fit import Hyper, Layout, make_objective, make_objective_mixed

    rng = np.random.default_rng(3)
    m, n, d = 40, 70, 4
    y = (rng.random((m, n)) < 0.6).astype(float)
    w = (rng.random((m, n)) < 0.8).astype(float) if masked else None
    lay = Layout(m, n, d, form == "per_dimension")
    hyp = Hyper(mu_a=rng.normal(size=d), sd_a=rng.uniform(0.5, 2, d), mu_b=0.3, sd_b=0.7)
    x = rng.normal(size=lay.size)
    f64, g64 = make_objective(y, w, lay, hyp)(x)
    f32, g32 = make_objective_mixed(y, w, lay, hyp)(x)
    assert f32 == pytest.approx(f64, rel=1e-6)
    np.testing.assert_allclose(g32, g64, rtol=0, atol=1e-5 * np.abs(g64).max())


@pytest.mark.parametrize("m", [1, 119, 120, 121, 300, 601])
def test_sum_log_by_block_products_matches_the_float64_log_sum(m):
    """The logs of products of 120-row blocks equal the float64 sum of logs, at the edges too."""
    from app.core.irt.objective import _LOG_PRODUCT_ROWS, _sum_log

    rng = np.random.default_rng(m)
    n = 257
    z = rng.normal(scale=4.0, size=(m, n)).astype(np.float32)
    u = (1.0 + np.exp(-np.abs(z))).astype(np.float32)
    u[0, :3] = [1.0, 2.0, np.float32(1.0 + 2**-23)]  # the range's ends; every factor <= 2
    exact = float(np.log(u.astype(np.float64)).sum())
    assert _LOG_PRODUCT_ROWS * np.log2(2.0) < 128  # a block's product cannot overflow float32
    assert _sum_log(u) == pytest.approx(exact, rel=2e-9, abs=1e-9 * m * n)
    # all factors at the maximum: the largest possible block product is still finite
    assert _sum_log(np.full((m, n), 2.0, np.float32)) == pytest.approx(m * n * np.log(2.0))


def test_mixed_precision_objective_matches_float64_over_several_log_blocks():
    """m = 300 subjects: the unmasked path multiplies three row blocks before its logs."""
    from app.core.irt.fit import Hyper, Layout, make_objective, make_objective_mixed

    rng = np.random.default_rng(5)
    m, n, d = 300, 90, 3
    y = (rng.random((m, n)) < 0.55).astype(float)
    lay = Layout(m, n, d, False)
    hyp = Hyper(mu_a=np.zeros(d), sd_a=np.ones(d), mu_b=0.0, sd_b=1.0)
    for scale in (0.1, 1.0, 3.0):  # logits near 0 (tanh from 2/u - 1 cancels) and large
        x = rng.normal(scale=scale, size=lay.size)
        f64, g64 = make_objective(y, None, lay, hyp)(x)
        f32, g32 = make_objective_mixed(y, None, lay, hyp)(x)
        assert f32 == pytest.approx(f64, rel=1e-7)
        np.testing.assert_allclose(g32, g64, rtol=0, atol=2e-6 * np.abs(g64).max())


def test_sigmoid_equals_the_softplus_pairs_second_part_bit_for_bit():
    from app.core.irt.model import _softplus_and_sigmoid, sigmoid

    z = np.random.default_rng(0).normal(scale=30.0, size=(50, 80))
    z[0, :4] = [0.0, -0.0, 800.0, -800.0]
    np.testing.assert_array_equal(sigmoid(z), _softplus_and_sigmoid(z)[1])


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
