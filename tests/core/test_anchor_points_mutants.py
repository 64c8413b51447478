"""Mutation-driven tests for ``app.core.selectors.anchor_points``.

Oracles: ``numpy.corrcoef`` and the documented ``[0, 2]`` range of ``1 - R``; the documented
CLARA design (5 samples of ``min(N, max(40 + 2n, 2000))`` distinct candidates, each holding the
previous best medoids), observed by recording what FasterPAM is handed.
"""

from __future__ import annotations

import numpy as np
import pytest

import app.core.selectors.anchor_points as ap
from app.core.selectors import make_selector
from app.core.selectors.anchor_points import correlation_dissimilarity, standardized_columns


# ----------------------------------------------------------------- standardized columns, 1 - R
def test_standardized_columns_by_hand():
    # the constant column is 0.1: its float mean is 0.10000000000000002, so only the explicit
    # zero scale of constant columns makes them exactly zero
    x = np.array([[0.0, 0.1, 4.0], [1.0, 0.1, 0.0], [2.0, 0.1, 2.0]])
    z, constant = standardized_columns(x)
    # column 0: centred (-1, 0, 1), population sd sqrt(2/3): z = xc / (sd sqrt(3)) = xc / sqrt(2)
    np.testing.assert_allclose(z[:, 0], [-(0.5**0.5), 0.0, 0.5**0.5], atol=1e-15)
    np.testing.assert_array_equal(z[:, 1], 0.0)  # constant column -> zeros
    np.testing.assert_allclose(z.T @ z, [[1, 0, -0.5], [0, 0, 0], [-0.5, 0, 1]], atol=1e-15)
    np.testing.assert_array_equal(constant, [False, True, False])
    assert z.dtype == np.float64
    assert standardized_columns(x, np.float32)[0].dtype == np.float32


def test_dissimilarity_keeps_the_requested_dtype():
    x = np.random.default_rng(0).random((12, 5))
    assert correlation_dissimilarity(x, np.float32).dtype == np.float32
    assert correlation_dissimilarity(x).dtype == np.float64
    np.testing.assert_allclose(correlation_dissimilarity(x), 1 - np.corrcoef(x.T), atol=1e-12)


def test_dissimilarity_is_clipped_to_zero_two():
    """Duplicated and mirrored columns have R = +1 / -1 exactly; round-off may put 1 - R a few
    ulps outside [0, 2], which the clip removes (some of these seeds do, on this BLAS)."""
    outside = 0
    for seed in range(60):
        c = np.random.default_rng(seed).random(7)
        x = np.column_stack([c, c, 1 - c, 3 * c])
        z, _ = standardized_columns(x)
        raw = 1 - z.T @ z
        outside += int(raw.min() < 0 or raw.max() > 2)
        d = correlation_dissimilarity(x)
        assert d.min() >= 0.0 and d.max() <= 2.0
        np.testing.assert_allclose(
            d, [[0, 0, 2, 0], [0, 0, 2, 0], [2, 2, 0, 2], [0, 0, 2, 0]], atol=1e-15
        )
    assert outside > 0  # the clip was exercised


# -------------------------------------------------------------------------------- fit params
def test_dense_dtype_switches_above_the_float64_limit(monkeypatch):
    monkeypatch.setattr(ap, "FLOAT64_MAX_ITEMS", 10)
    x = np.random.default_rng(1).random((8, 11))
    at = make_selector("anchor_points", estimate_on="correct").fit(x, candidates=np.arange(10))
    above = make_selector("anchor_points", estimate_on="correct").fit(x)
    assert at.dissim_.dtype == np.float64 and above.dissim_.dtype == np.float32


def test_clara_only_above_max_full_items():
    x = np.random.default_rng(2).random((8, 12))
    assert not make_selector("anchor_points", max_full_items=12).fit(x).clara_
    assert make_selector("anchor_points", max_full_items=11).fit(x).clara_
    assert make_selector("anchor_points", max_full_items=1).fit(x).clara_  # 1 is allowed
    for bad in (True, 1.5, -3):
        with pytest.raises(ValueError, match="max_full_items"):
            make_selector("anchor_points", max_full_items=bad).fit(x)


def test_kmedoids_seed_comes_from_the_selection_rng():
    x = np.random.default_rng(3).random((10, 15))
    sel = make_selector("anchor_points").fit(x)
    for seed in (0, 1, 11):
        expected = np.random.default_rng(seed).integers(0, 2**31 - 1)
        assert int(sel.select(3, rng=seed).fitted["kmedoids_seed"]) == int(expected)


# ------------------------------------------------------------------------------------- CLARA
class _Recorder:
    """Stand-in for FasterPAM: records each call (shape, smallest off-diagonal dissimilarity, a
    checksum of the matrix), picks the last n positions as medoids."""

    def __init__(self):
        self.calls = []

    def __call__(self, d, n, *, max_iter, seed):
        off = np.array(d)
        np.fill_diagonal(off, 9.0)
        self.calls.append((d.shape, off.min(), float(d.sum(dtype=np.float64)), n, max_iter))

        class _Res:
            medoids = np.arange(d.shape[0] - n, d.shape[0])

        return _Res()


def _clara_fit(n_items, seed=4):
    x = np.random.default_rng(seed).random((10, n_items))
    return make_selector("anchor_points", estimate_on="correct", max_full_items=50).fit(x)


@pytest.mark.parametrize(("n_items", "n", "size"), [(2001, 2, 2000), (2100, 1000, 2040)])
def test_clara_sample_size_and_distinct_members(monkeypatch, n_items, n, size):
    rec = _Recorder()
    monkeypatch.setattr(ap, "fasterpam", rec)
    sel = _clara_fit(n_items).select(n, rng=5)
    assert len(rec.calls) == ap.CLARA_DRAWS == 5
    for shape, off_min, _, n_med, max_iter in rec.calls:
        assert shape == (size, size) and n_med == n and max_iter == 100
        assert off_min > 1e-3  # a repeated item would be perfectly correlated with itself: D = 0
    assert sel.size == n and np.unique(sel.indices).size == n


def test_clara_is_deterministic_for_a_seed(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(ap, "fasterpam", rec)
    sel = _clara_fit(2050)
    a, b = sel.select(3, rng=7), sel.select(3, rng=7)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert len(rec.calls) == 10 and rec.calls[:5] == rec.calls[5:]  # the same five samples


def _clara_toy():
    """30 items over 40 models: items 0, 1, 3, 6 perfectly correlated, 2, 4, 5 perfectly
    anti-correlated with them (float32 round-off puts 1 - R a few ulps outside [0, 2] here), the
    rest independent noise. ``max_full_items=10`` forces CLARA; with N <= 2000 every CLARA sample
    is the whole pool in order, so FasterPAM's positions are item ids."""
    rng = np.random.default_rng(92)
    c = rng.random(40)
    return np.column_stack(
        [c, c, 1 - c, c / 3, 1 - c / 2, 0.25 - c / 4, 0.9 * c + 0.1, rng.random((40, 23))]
    )


class _Scripted:
    """FasterPAM stand-in returning scripted medoid positions, one set per call."""

    def __init__(self, sets):
        self.sets, self.seen = sets, []

    def __call__(self, d, n, *, max_iter, seed):
        self.seen.append((np.array(d), seed))
        medoids = np.array(self.sets[len(self.seen) - 1])

        class _Res:
            pass

        res = _Res()
        res.medoids = medoids
        return res


def test_clara_dissimilarities_and_lowest_cost_draw_win(monkeypatch):
    x = _clara_toy()
    d_ref = np.clip(1 - np.corrcoef(x.T), 0, 2)
    np.fill_diagonal(d_ref, 0)
    sets = [[7, 8, 9], [0, 2, 10], [12, 20, 25], [10, 2, 0], [15, 16, 17]]
    cost = [np.min(d_ref[s], axis=0).sum() for s in sets]
    # the test's premise: draws 2 and 4 (the same medoids, permuted) are clearly the cheapest
    assert cost[1] == cost[3] and min(cost[0], cost[2], cost[4]) > cost[1] + 0.5
    z32, _ = standardized_columns(x, np.float32)
    raw = 1 - z32.T @ z32
    assert raw.min() < 0 and raw.max() > 2  # the float32 clip is exercised
    fake = _Scripted(sets)
    monkeypatch.setattr(ap, "fasterpam", fake)
    sel = make_selector("anchor_points", estimate_on="correct", max_full_items=10).fit(x)
    s = sel.select(3, rng=0)
    assert len(fake.seen) == 5
    for d, seed in fake.seen:
        assert d.dtype == np.float32 and d.shape == (30, 30)
        np.testing.assert_array_equal(np.diag(d), 0.0)
        assert d.min() >= 0.0 and d.max() <= 2.0
        np.testing.assert_allclose(d, d_ref, atol=2e-6)
        assert isinstance(seed, int) and 0 <= seed < 2**31 - 1
    assert max(seed for _, seed in fake.seen) > 61
    # strict improvement only: the first of the tied draws is kept, in its own medoid order
    np.testing.assert_array_equal(s.indices, [0, 2, 10])
    labels = np.argmin(d_ref[[0, 2, 10]], axis=0)
    np.testing.assert_allclose(s.weights, np.bincount(labels, minlength=3) / 30)
    assert s.fitted["clara"]


def test_max_full_items_message_is_exact():
    x = np.random.default_rng(2).random((8, 12))
    with pytest.raises(ValueError, match=r"^max_full_items: expected a positive integer$"):
        make_selector("anchor_points", max_full_items=0).fit(x)


def test_fasterpam_passes_max_iter():
    import kmedoids

    rng = np.random.default_rng(12)
    x = rng.random((30, 80))
    d = correlation_dissimilarity(x)
    one = ap.fasterpam(d, 9, max_iter=1, seed=3)
    ref_one = kmedoids.fasterpam(d, 9, max_iter=1, init="random", random_state=3, n_cpu=1)
    ref_full = kmedoids.fasterpam(d, 9, max_iter=100, init="random", random_state=3, n_cpu=1)
    assert ref_one.loss > ref_full.loss  # premise: one iteration does not converge here
    np.testing.assert_array_equal(one.medoids, ref_one.medoids)
    assert one.loss == ref_one.loss


def test_documented_defaults():
    sel = make_selector("anchor_points")
    assert sel.params == {"estimate_on": "confidence", "max_full_items": 20_000, "max_iter": 100}


def test_dense_fit_state_and_constant_item_count():
    x = np.random.default_rng(13).random((6, 9))
    x[:, [2, 5]] = 0.4  # two constant items; no model answers every item alike
    sel = make_selector("anchor_points", estimate_on="correct").fit(x)
    assert sel.z_ is None and not sel.clara_
    np.testing.assert_array_equal(sel.constant_, np.isin(np.arange(9), [2, 5]))
    assert int(sel.select(3, rng=0).fitted["constant_items"]) == 2


def test_fasterpam_is_single_threaded_from_1000_items():
    """kmedoids switches to its parallel variant from 1,000 items unless n_cpu=1; the parallel
    loss differs in the last bits, so the bit-for-bit comparison pins n_cpu=1."""
    import kmedoids

    d = correlation_dissimilarity(np.random.default_rng(21).random((20, 1000)))
    fast = ap.fasterpam(d, 5, max_iter=100, seed=0)
    ref = kmedoids.fasterpam(d, 5, max_iter=100, init="random", random_state=0, n_cpu=1)
    np.testing.assert_array_equal(fast.medoids, ref.medoids)
    assert (fast.loss, fast.n_swap) == (ref.loss, ref.n_swap)


def test_empty_last_cluster_keeps_its_zero_weight():
    """Two identical items, both medoids: D = 0 everywhere, so both go to the first medoid
    (ties to the first) and the second keeps weight 0 (the weights stay aligned with indices)."""
    c = np.random.default_rng(0).random(9)
    x = np.column_stack([c, c])
    np.testing.assert_array_equal(correlation_dissimilarity(x), 0.0)  # premise
    s = make_selector("anchor_points", estimate_on="correct").fit(x).select(2, rng=0)
    assert s.size == 2
    np.testing.assert_array_equal(s.weights, [1.0, 0.0])


def test_constant_items_raise_no_floating_point_warning():
    import warnings

    x = np.random.default_rng(3).random((6, 4))
    x[:, 1] = 1.0  # exactly constant: sd = 0, never divided by
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z, constant = standardized_columns(x)
    np.testing.assert_array_equal(z[:, 1], 0.0)
    assert constant.tolist() == [False, True, False, False]
