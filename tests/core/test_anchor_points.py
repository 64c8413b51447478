"""Anchor Points (paper §3.5): correlations, NaN policy, known answers, estimators, CLARA path."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.selectors import make_selector
from app.core.selectors.anchor_points import correlation_dissimilarity


def _blocks(sizes, n_models=80, *, seed=0, noise=0.3):
    """Signal in [0, 1] whose items correlate strongly within blocks and not across them."""
    rng = np.random.default_rng(seed)
    factors = rng.standard_normal((n_models, len(sizes)))
    cols = np.repeat(np.arange(len(sizes)), sizes)
    z = factors[:, cols] + noise * rng.standard_normal((n_models, cols.size))
    conf = 1.0 / (1.0 + np.exp(-z))
    return conf, (conf > 0.5).astype(float), cols


def test_dissimilarity_matches_corrcoef_and_nan_policy():
    rng = np.random.default_rng(1)
    x = rng.random((30, 8))
    x[:, 3] = 0.7  # constant item: NaN correlations in the reference
    d = correlation_dissimilarity(x)
    keep = np.array([0, 1, 2, 4, 5, 6, 7])
    np.testing.assert_allclose(1 - d[np.ix_(keep, keep)], np.corrcoef(x[:, keep].T), atol=1e-12)
    assert not np.isnan(d).any()
    np.testing.assert_array_equal(d[3, keep], 1.0)  # correlation 0 with the others
    assert d[3, 3] == 0.0  # and 1 with itself
    np.testing.assert_allclose(correlation_dissimilarity(x, np.float32), d, atol=1e-6)


@pytest.mark.parametrize("max_full_items", [20_000, 50])
def test_block_structure_known_answer(max_full_items):
    sizes = (30, 50, 20)
    conf, correct, cols = _blocks(sizes)
    sel = make_selector("anchor_points", max_full_items=max_full_items).fit(
        correct, confidence=conf
    )
    s = sel.select(3, rng=0)
    assert sorted(cols[s.indices]) == [0, 1, 2]  # one medoid per block
    by_block = dict(zip(cols[s.indices], s.weights, strict=True))
    assert by_block == pytest.approx({0: 0.3, 1: 0.5, 2: 0.2})
    assert s.fitted["clara"] == (max_full_items == 50)


def test_weights_indices_and_determinism():
    conf, correct, _ = _blocks((40, 40, 40), seed=2, noise=1.0)
    cand = np.arange(0, 120, 2)
    sel = make_selector("anchor_points").fit(correct, confidence=conf, candidates=cand)
    s1, s2 = sel.select(7, rng=3), sel.select(7, rng=3)
    np.testing.assert_array_equal(s1.indices, s2.indices)
    assert s1.size == 7 and np.unique(s1.indices).size == 7
    assert np.isin(s1.indices, cand).all()
    assert np.all(s1.weights >= 0) and s1.weights.sum() == pytest.approx(1.0)
    assert s1.seed == 3 and int(s1.fitted["kmedoids_seed"]) >= 0


def test_assignment_is_most_correlated_medoid():
    conf, correct, _ = _blocks((25, 25), seed=4, noise=1.5)
    sel = make_selector("anchor_points").fit(correct, confidence=conf)
    s = sel.select(5, rng=1)
    r = np.corrcoef(conf.T)
    labels = np.argmax(r[s.indices], axis=0)
    np.testing.assert_allclose(s.weights, np.bincount(labels, minlength=5) / 50)


def test_estimate_on_variants_and_fallback():
    conf, correct, _ = _blocks((20, 20), seed=5)
    ap_conf = make_selector("anchor_points").fit(correct, confidence=conf)
    s = ap_conf.select(4, rng=0)
    assert (s.estimator, s.estimate_on, s.signal) == (
        "weighted_confidence",
        "confidence",
        "confidence",
    )
    est = ap_conf.estimate(s, correct[:, s.indices], conf[:, s.indices])
    np.testing.assert_allclose(est, conf[:, s.indices] @ s.weights)
    assert not s.fitted["estimate_on_fallback"]

    ap_corr = make_selector("anchor_points", estimate_on="correct").fit(correct, confidence=conf)
    s = ap_corr.select(4, rng=0)
    assert (s.estimator, s.estimate_on, s.signal) == ("weighted_mean", "correct", "confidence")
    np.testing.assert_allclose(
        ap_corr.estimate(s, correct[:, s.indices]), correct[:, s.indices] @ s.weights
    )

    ap_fb = make_selector("anchor_points").fit(correct)  # no confidences: falls back, recorded
    s = ap_fb.select(4, rng=0)
    assert (s.estimator, s.estimate_on, s.signal) == ("weighted_mean", "correct", "correct")
    assert s.fitted["estimate_on_fallback"]


def test_constant_item_does_not_break_selection():
    conf, correct, _ = _blocks((15, 15), seed=6)
    conf[:, 0] = 0.25
    sel = make_selector("anchor_points").fit(correct, confidence=conf)
    s = sel.select(30, rng=0)  # every item a medoid, constant one included
    assert s.size == 30 and int(s.fitted["constant_items"]) == 1
    np.testing.assert_allclose(s.weights, 1 / 30)


def test_bad_parameters():
    _, correct, _ = _blocks((5, 5), seed=7)
    with pytest.raises(ValueError, match="estimate_on"):
        make_selector("anchor_points", estimate_on="logits").fit(correct)
    with pytest.raises(ValueError, match="max_full_items"):
        make_selector("anchor_points", max_full_items=0).fit(correct)


def test_clara_on_25k_items_keeps_memory_small():
    rng = np.random.default_rng(8)
    n_models, n_items = 60, 25_000
    factors = rng.standard_normal((n_models, 4))
    cols = rng.integers(0, 4, n_items)
    x = factors[:, cols] + 0.5 * rng.standard_normal((n_models, n_items))
    sel = make_selector("anchor_points", estimate_on="correct").fit((x > 0).astype(float))
    assert sel.dissim_ is None and sel.z_.dtype == np.float32
    s = sel.select(4, rng=0)
    assert s.fitted["clara"] and s.size == 4
    assert sorted(cols[s.indices]) == [0, 1, 2, 3]
    assert s.weights.sum() == pytest.approx(1.0)


def test_fasterpam_transposed_view_is_the_library_call_bit_for_bit():
    """The selector hands FasterPAM ``D.T`` (contiguous column reads): same result as ``D``."""
    import kmedoids

    from app.core.selectors.anchor_points import fasterpam

    conf, correct, _ = _blocks((60, 90, 50), n_models=40, seed=9, noise=1.2)
    d = correlation_dissimilarity(conf)
    np.testing.assert_array_equal(d, d.T)  # exactly symmetric: D.T is the same matrix
    for n, seed in ((3, 0), (17, 5), (60, 11)):
        fast = fasterpam(d, n, max_iter=100, seed=seed)
        ref = kmedoids.fasterpam(d, n, max_iter=100, init="random", random_state=seed, n_cpu=1)
        np.testing.assert_array_equal(fast.medoids, ref.medoids)
        np.testing.assert_array_equal(fast.labels, ref.labels)
        assert (fast.loss, fast.n_swap) == (ref.loss, ref.n_swap)
    sel = make_selector("anchor_points").fit(correct, confidence=conf)
    s = sel.select(17, rng=4)
    ref = kmedoids.fasterpam(
        d, 17, max_iter=100, init="random", random_state=int(s.fitted["kmedoids_seed"]), n_cpu=1
    )
    np.testing.assert_array_equal(s.indices, ref.medoids)


def test_dissimilarity_into_a_reused_buffer_is_bit_identical():
    conf, _, _ = _blocks((40, 30, 30), n_models=50, seed=10, noise=0.8)
    fresh = correlation_dissimilarity(conf)
    buf = np.full_like(fresh, np.nan)
    out = correlation_dissimilarity(conf, out=buf)
    assert out is buf
    np.testing.assert_array_equal(out, fresh)
    np.testing.assert_array_equal(out, out.T)
    with pytest.raises(ValueError, match="out"):
        correlation_dissimilarity(conf, out=np.empty((5, 5)))
    with pytest.raises(ValueError, match="out"):
        correlation_dissimilarity(conf, np.float32, out=buf)


def test_nearest_medoid_is_argmin_with_first_tie():
    from app.core.selectors.anchor_points import nearest_medoid

    rng = np.random.default_rng(12)
    d = rng.integers(0, 4, size=(300, 300)).astype(float)  # many exact ties
    for k, block in ((1, 64), (7, 3), (150, 64), (300, 64), (130, 1)):
        medoids = rng.choice(300, size=k, replace=False)
        np.testing.assert_array_equal(
            nearest_medoid(d, medoids, block=block), np.argmin(d[medoids], axis=0)
        )


def test_refit_reuses_the_matrix_and_selects_as_a_fresh_selector():
    first, _, _ = _blocks((30, 50, 20), seed=13, noise=1.0)
    second, correct, _ = _blocks((30, 50, 20), seed=14, noise=1.0)
    sel = make_selector("anchor_points").fit(correct, confidence=first)
    buf = sel.dissim_
    sel.fit(correct, confidence=second)
    assert sel.dissim_ is buf  # written in place
    fresh = make_selector("anchor_points").fit(correct, confidence=second)
    np.testing.assert_array_equal(sel.dissim_, fresh.dissim_)
    for n in (3, 17, 60):
        a, b = sel.select(n, rng=n), fresh.select(n, rng=n)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.weights, b.weights)
    other = sel.fit(correct[:, :40], confidence=second[:, :40])  # another size: a new matrix
    assert other.dissim_ is not buf and other.dissim_.shape == (40, 40)


def test_float32_dissimilarity_selects_as_float64(monkeypatch):
    """Above FLOAT64_MAX_ITEMS the matrix is float32 (a documented difference): same medoids and
    weights as the float64 path on a pool with clear structure, loss equal to ~1e-6 relative."""
    import kmedoids

    from app.core.selectors import anchor_points as ap

    conf, correct, _ = _blocks((60, 90, 50, 100), n_models=60, seed=15, noise=1.0)
    exact = make_selector("anchor_points").fit(correct, confidence=conf)
    monkeypatch.setattr(ap, "FLOAT64_MAX_ITEMS", 100)
    single = make_selector("anchor_points").fit(correct, confidence=conf)
    assert exact.dissim_.dtype == np.float64 and single.dissim_.dtype == np.float32
    np.testing.assert_allclose(single.dissim_, exact.dissim_, atol=1e-6)
    for n in (4, 25, 100):
        a, b = exact.select(n, rng=n), single.select(n, rng=n)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_allclose(a.weights, b.weights)
        seed = int(a.fitted["kmedoids_seed"])
        la = kmedoids.fasterpam(exact.dissim_, n, init="random", random_state=seed, n_cpu=1).loss
        lb = kmedoids.fasterpam(single.dissim_, n, init="random", random_state=seed, n_cpu=1).loss
        assert lb == pytest.approx(la, rel=1e-6)
