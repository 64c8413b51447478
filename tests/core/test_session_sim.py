"""Session simulator (app.core.sequential.simulation) on real GPQA data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from app.core.reliability.exact import smallest_n
from app.core.sequential.policies import POLICIES
from app.core.sequential.simulation import (
    GAP_LABELS,
    clopper_pearson,
    fixed_subset_sizes,
    simulate_policy,
    simulate_sessions,
)


def test_clopper_pearson_matches_scipy():
    for k, n in ((0, 20), (3, 50), (50, 50), (7, 400)):
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert clopper_pearson(k, n, 0.05) == pytest.approx((ci.low, ci.high), abs=1e-10)


def test_fixed_sizes_match_smallest_n(gpqa):
    c = gpqa["correct"]
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, c.shape[0], 8), rng.integers(0, c.shape[0], 8)
    a[0], b[0] = 5, 5  # a tie
    ci = c.astype(np.int64)
    n10 = (ci[a] * (1 - ci[b])).sum(1)
    n01 = ((1 - ci[a]) * ci[b]).sum(1)
    got = fixed_subset_sizes(n10, n01, c.shape[1], 0.95)
    assert np.isnan(got[0])
    for i in range(1, 8):  # eight named pairs against the scalar reference
        ref = smallest_n(c, int(a[i]), int(b[i]), 0.95)
        assert (np.isnan(got[i]) and ref is None) or got[i] == ref


def test_random_policy_validity_gpqa(gpqa):
    # 400 random sessions (200 pairs x 2 orders), alpha = 0.05, batch 10: wrong share <= 0.05 + 3 SE
    res = simulate_sessions(
        gpqa["correct"], policies=("random",), pairs=200, orders=2, batch_size=10, rng=123
    )
    s = res.policies["random"]
    assert s.sessions == 400
    assert s.wrong_share <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
    assert s.missed / s.sessions <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
    # recount wrong decisions independently from the per-session arrays (ties count as wrong)
    d = res.delta[s.pair]
    better, worse = s.lower > 0, s.upper < 0
    assert s.wrong == int(((better & (d <= 0)) | (worse & (d >= 0))).sum())
    assert s.decided == int((better | worse).sum())
    # sessions that ran to exhaustion report the exact difference
    full = s.items_used == gpqa["correct"].shape[1]
    np.testing.assert_allclose(s.lower[full], d[full], atol=1e-12)
    np.testing.assert_allclose(s.upper[full], d[full], atol=1e-12)
    assert sum(r.sessions for r in s.buckets) == 400
    assert [r.bucket for r in s.buckets] == list(GAP_LABELS)


def test_both_policies_reproducible_and_inputs_unchanged(gpqa):
    c = gpqa["correct"].copy()
    kw = dict(pairs=40, batch_size=20, rng=7, max_items=200)
    r1 = simulate_sessions(c, **kw)
    r2 = simulate_sessions(c, **kw)
    np.testing.assert_array_equal(c, gpqa["correct"])
    np.testing.assert_array_equal(r1.pairs, r2.pairs)
    for p in POLICIES:
        np.testing.assert_array_equal(r1.policies[p].items_used, r2.policies[p].items_used)
        np.testing.assert_array_equal(r1.policies[p].lower, r2.policies[p].lower)
        assert r1.policies[p].items_used.max() <= 200
        assert np.all(r1.policies[p].items_used % 20 == 0)
    # pairs come from the held-out pool, never from the IRT training models
    assert np.isin(r1.pairs, r1.params["pool"]).all()
    r3 = simulate_sessions(c, **{**kw, "rng": 8})
    assert not np.array_equal(r1.pairs, r3.pairs)


def test_precision_goal_and_vectorised_random_matches_batches():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, (30, 200)) / 2.0  # fractional item means (repeated samples)
    kw = dict(alpha=0.05, goal="precision", precision=0.15, rng=1)
    items1, lo1, hi1, _ = simulate_policy("random", y, 0.5, batch_size=1, **kw)
    assert np.all((hi1 - lo1) / 2 <= 0.15 + 1e-12)
    # batch 5 stops at multiples of 5 and never before batch 1 does (same draws per session)
    items5, _, _, _ = simulate_policy("random", y, 0.5, batch_size=5, **kw)
    assert np.all(items5 % 5 == 0) and np.all(items5 >= items1) and np.all(items5 - items1 < 5)


def test_every_policy_bucket_figures_recount(gpqa):
    res = simulate_sessions(
        gpqa["correct"], pairs=50, batch_size=10, stratify=True, max_items=150, rng=5
    )
    d = res.delta
    counts = np.bincount(
        np.searchsorted([2.0, 5.0, 10.0, 15.0], 100 * np.abs(d) + 1e-9, side="right"),
        minlength=5,
    )
    assert counts.min() >= 10  # stratified: every bucket is populated
    for s in res.policies.values():
        assert [r.sessions for r in s.buckets] == counts.tolist()
        assert (
            sum(r.ever_missed for r in s.buckets) == s.ever_missed == int(s.ever_missed_mask.sum())
        )
        for r in s.buckets:
            assert r.wrong_upper == pytest.approx(clopper_pearson(r.wrong, r.sessions, 0.05)[1])


def test_bad_arguments(gpqa):
    with pytest.raises(ValueError, match="policies"):
        simulate_sessions(gpqa["correct"], policies=("oracle",))
    with pytest.raises(ValueError, match="precision"):
        simulate_sessions(gpqa["correct"], goal="precision")
    with pytest.raises(ValueError, match=r"correct: .*\[0, 1\]"):
        simulate_sessions(gpqa["correct"] * 1.5)
    with pytest.raises(ValueError, match="correct"):
        simulate_sessions(np.where(gpqa["correct"] == 1, np.nan, 0.0))


def test_graded_scores_are_simulated_with_their_own_values():
    """SYNTHETIC graded matrix (mass at 0 and 1 plus a continuum): sessions run on the scores
    themselves (not a 0/1 rounding), the IRT policies fit fractional responses, the confidence
    sequences stay valid, and the 0/1-only exact fixed sizes are NaN."""
    rng = np.random.default_rng(35)
    theta, b = rng.uniform(-2, 2, 80), rng.standard_normal(300)
    p = 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))
    u = rng.random(p.shape)
    graded = np.where(
        u < (1 - p) / 2, 0.0, np.where(u > 1 - p / 2, 1.0, rng.beta(4 * p + 0.5, 4 * (1 - p) + 0.5))
    )
    res = simulate_sessions(
        graded, policies=("random", "assisted"), pairs=60, orders=2, stratify=True, rng=3
    )
    assert res.params["graded"] and np.isnan(res.fixed_n).all()
    acc = graded.mean(axis=1)
    np.testing.assert_allclose(res.delta, acc[res.pairs[:, 0]] - acc[res.pairs[:, 1]])
    for pol in ("random", "assisted"):
        s = res.policies[pol]
        assert s.sessions == 120
        assert s.ever_missed / s.sessions <= 0.05  # time-uniform coverage of the true gap
        assert s.decided > 60  # and most pairs are told apart or settled
    rounded = simulate_sessions(
        np.round(graded), policies=("random",), pairs=60, orders=2, stratify=True, rng=3
    )
    assert not rounded.params["graded"]
    assert not np.allclose(rounded.delta, res.delta)
