"""The blocked leaderboard engine (app.core.ranking.pair_table) against the dense computation.

The dense reference below is the engine as it was before issue 27, assembled from the public,
separately tested pieces: every pair's counts (``pairwise_counts``), p-values, the per-pair
multiplicity step (``adjust_pvalues``), the ``m x m`` matrix of significant orderings,
``rank_intervals`` and ``tiers``. The blocked engine must give identical numbers (not close:
equal) on real GPQA and on SYNTHETIC matrices, with Holm, BH and no correction, with coverage
gaps, in both populations, and with blocks and cell tables small enough that every code path
(several blocks, the sparse cell table) runs.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import app.core.ranking.pair_table as pair_table
from app.core.ranking.leaderboard import (
    adjust_pvalues,
    finite_population_pvalues,
    leaderboard,
    mcnemar_pvalues,
    pairwise_counts,
    rank_intervals,
    tiers,
)
from app.core.ranking.pair_table import adjust_grouped


def _synthetic(rng, m, n):
    """Models of varied skill on items of varied difficulty (SYNTHETIC)."""
    skill = rng.uniform(-2.0, 2.0, m)[:, None]
    diff = rng.normal(0.0, 1.0, n)[None, :]
    return (rng.random((m, n)) < 1 / (1 + np.exp(-(skill - diff)))).astype(np.uint8)


def _dense(c, *, coverage=None, population="items", n_population=None, alpha, correction, mid_p):
    """Significance, rank intervals and tiers from every pair held at once (the old engine)."""
    m, n = c.shape
    counts = pairwise_counts(c, coverage=coverage)
    a, b = np.triu_indices(m, 1)
    n10, n01 = counts.n10[a, b], counts.n01[a, b]
    if population == "items":
        p = mcnemar_pvalues(n10, n01, mid_p=mid_p)
    else:
        p = finite_population_pvalues(n10, n01, n, n_population or n, mid_p=mid_p)
    p = np.where(counts.n_shared[a, b] == 0, 1.0, p)
    p_adj = adjust_pvalues(p, correction)
    sig = p_adj <= alpha
    better = np.zeros((m, m), dtype=bool)
    better[a[sig & (n10 > n01)], b[sig & (n10 > n01)]] = True
    better[b[sig & (n10 < n01)], a[sig & (n10 < n01)]] = True
    if coverage is None:
        acc = c.mean(axis=1)
    else:
        acc = (c * coverage).sum(axis=1) / coverage.sum(axis=1)
    order = np.lexsort((np.arange(m), -acc))
    lo, hi = rank_intervals(better)
    return p, p_adj, sig, lo, hi, tiers(order, better)


def _check(c, **kw):
    lb = leaderboard(c, **kw)
    opts = {"alpha": 0.05, "correction": "holm", "mid_p": False} | kw
    p, p_adj, sig, lo, hi, tier = _dense(c, **opts)
    model = lb.rows.model
    np.testing.assert_array_equal(lb.pairs.p_value, p)
    np.testing.assert_array_equal(lb.pairs.p_adjusted, p_adj)
    np.testing.assert_array_equal(lb.pairs.significant, sig)
    assert lb.table.n_significant == int(sig.sum())
    assert lb.table.n_pairs == sig.size
    np.testing.assert_array_equal(lb.rows.tier, tier[model])
    if kw.get("coverage") is None:  # with gaps the engine widens the intervals to the rank
        np.testing.assert_array_equal(lb.rows.rank_low, lo[model])
        np.testing.assert_array_equal(lb.rows.rank_high, hi[model])
    else:
        np.testing.assert_array_equal(lb.rows.rank_low, np.minimum(lo[model], lb.rows.rank))
        np.testing.assert_array_equal(lb.rows.rank_high, np.maximum(hi[model], lb.rows.rank))
    return lb


@pytest.fixture(params=["default", "small blocks, codes kept", "small blocks, sparse cells"])
def blocks(request, monkeypatch):
    if request.param != "default":  # several blocks even for GPQA's 88k pairs
        monkeypatch.setattr(pair_table, "BLOCK_PAIRS", 9_973)
        monkeypatch.setattr(pair_table, "GATHER_VALUES", 200_003)
    if request.param.endswith("sparse cells"):  # and pass 2 recomputes the products
        monkeypatch.setattr(pair_table, "DENSE_CELLS", 7)
        monkeypatch.setattr(pair_table, "PASS_CACHE_BYTES", 0)
    return request.param


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_gpqa_equals_the_dense_engine(gpqa, blocks, correction):
    c = gpqa["correct"]
    lb = _check(c, correction=correction, mid_p=correction == "bh")
    assert lb.n_tiers >= 2
    idx = np.random.default_rng(0).choice(c.shape[1], 100, replace=False)
    _check(c[:, idx], population="benchmark", n_population=c.shape[1], correction=correction)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("correction", ["holm", "bh", "none"])
def test_synthetic_matrices_equal_the_dense_engine(blocks, seed, correction):
    rng = np.random.default_rng(seed)
    m, n = [(60, 40), (250, 120), (9, 3), (120, 400)][seed]
    c = _synthetic(rng, m, n)
    lb = _check(c, correction=correction)
    assert lb.table.n_significant > 0 or seed == 2
    mask = rng.random(c.shape) < 0.8
    mask[np.arange(m), rng.integers(0, n, m)] = True
    if seed == 1:  # two models with no item in common
        mask[3], mask[4] = False, False
        mask[3, :5], mask[4, -5:] = True, True
    lb = _check(c, coverage=mask, correction=correction, mid_p=seed % 2 == 1)
    if seed == 1:
        assert lb.unshared_pairs.tolist() == [[3, 4]]
    _check(c, population="benchmark", correction=correction)  # n = N: differences known
    _check(np.repeat(c[:10], 3, axis=0), correction=correction)  # ties


def test_any_pairs_and_rows_equal_the_full_table(blocks):
    rng = np.random.default_rng(7)
    c = _synthetic(rng, 80, 60)
    lb = leaderboard(c)
    full = lb.pairs
    pick = rng.choice(full.a.size, 300, replace=False)
    some = lb.table.pairs(full.a[pick], full.b[pick])
    for field in full.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(some, field), getattr(full, field)[pick])
    better = np.zeros((80, 80), dtype=bool)
    up = full.significant & (full.difference > 0)
    down = full.significant & (full.difference < 0)
    better[full.a[up], full.b[up]] = True
    better[full.b[down], full.a[down]] = True
    for i in range(80):
        np.testing.assert_array_equal(lb.table.better_row(i), better[i])
        np.testing.assert_array_equal(lb.table.significant_row(i), better[i] | better[:, i])


def test_grouped_adjustment_equals_the_per_test_step():
    rng = np.random.default_rng(3)
    for _ in range(50):
        values = np.unique(np.r_[rng.random(rng.integers(1, 40)) ** 4, 1.0, 0.0])
        counts = rng.integers(1, 6, values.size)
        p = rng.permutation(np.repeat(values, counts))
        for correction in ("holm", "bh", "none"):
            got = adjust_grouped(values, counts, correction)
            want = adjust_pvalues(p, correction)
            np.testing.assert_array_equal(got[np.searchsorted(values, p)], want)


@pytest.mark.parametrize(("kept", "bytes_per_pair"), [(False, 2), (True, 4)])
def test_memory_stays_below_a_few_bytes_per_pair(monkeypatch, kept, bytes_per_pair):
    """1,500 models: 1.1 M pairs. The dense engine held about 100 bytes per pair; the blocked
    one holds the matrix, the cell table, one block and, when kept, 2-byte codes per pair."""
    monkeypatch.setattr(pair_table, "BLOCK_PAIRS", 2**16)
    monkeypatch.setattr(pair_table, "PASS_CACHE_BYTES", 2**30 if kept else 0)
    c = _synthetic(np.random.default_rng(0), 1_500, 60)
    n_pairs = 1_500 * 1_499 // 2
    tracemalloc.start()
    lb = leaderboard(c)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert lb.table.n_significant > 0
    assert peak < bytes_per_pair * n_pairs, f"peak {peak / 2**20:.1f} MiB"
    if kept:
        assert peak > 2 * n_pairs  # the codes were kept (else this test checks nothing new)
