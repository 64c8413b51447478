"""``smallest_n``'s grid-then-scan search and ``order_probabilities``' memory chunks.

Oracle for the search: its documented definition written as a per-size loop — the first point of
the geometric grid whose P(correct order) reaches the target, then the smallest size after the
previous grid point that reaches it — with P from one scalar ``order_probabilities`` call per
size (P itself is pinned against enumeration in test_exact.py). Oracle for the chunks: the same
probabilities computed with the default chunk size.
"""

from __future__ import annotations

import numpy as np
import pytest

import app.core.exact as exact_module
from app.core.exact import order_probabilities, smallest_n


def _scan_oracle(n10, n01, n_items, probability, n_grid=48):
    hi, lo = max(n10, n01), min(n10, n01)
    p = {n: float(order_probabilities(hi, lo, n_items, n).p_greater) for n in range(1, n_items + 1)}
    grid = sorted({round(float(g)) for g in np.geomspace(1, n_items, n_grid)})
    passing = [g for g in grid if p[g] >= probability]
    if not passing:
        return n_items
    g_first = passing[0]
    g_prev = max([g for g in grid if g < g_first], default=0)
    return next(n for n in range(g_prev + 1, g_first + 1) if p[n] >= probability)


def _pair(n_items, n10, n01):
    correct = np.zeros((2, n_items), dtype=np.int8)
    correct[0, :n10] = 1
    correct[1, n10 : n10 + n01] = 1
    return correct


CASES = [(60, 9, 3), (60, 20, 12), (80, 14, 5), (120, 30, 21), (45, 6, 1)]


def test_smallest_n_follows_its_documented_scan():
    below_grid_point = 0  # premise: some answers lie strictly between two grid points
    for n_items, n10, n01 in CASES:
        grid = set(np.unique(np.geomspace(1, n_items, 48).round().astype(int)).tolist())
        for probability in (0.55, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99):
            want = _scan_oracle(n10, n01, n_items, probability)
            assert smallest_n(_pair(n_items, n10, n01), 0, 1, probability) == want
            below_grid_point += (want not in grid) and (want + 1 in grid)
    assert below_grid_point > 0


def test_smallest_n_counts_a_size_that_meets_the_target_exactly():
    """A target equal to an attained probability is met at that size (>=, not >)."""
    n_items, n10, n01 = 60, 9, 3
    grid = set(np.unique(np.geomspace(1, n_items, 48).round().astype(int)).tolist())
    tried = 0
    for n in range(2, n_items):
        if n in grid or n - 1 in grid:
            continue
        target = float(order_probabilities(n10, n01, n_items, np.array([n])).p_greater[0])
        if _scan_oracle(n10, n01, n_items, target) != n:
            continue
        tried += 1
        assert smallest_n(_pair(n_items, n10, n01), 0, 1, target) == n
    assert tried > 0


@pytest.mark.parametrize("chunk", [1, 7, 50])
def test_tiny_memory_chunks_give_the_same_probabilities(monkeypatch, chunk):
    """One (n10, n01, n) window larger than four chunks is still computed (alone in its chunk)."""
    n10 = np.array([30, 12, 40, 5])
    n01 = np.array([20, 12, 1, 0])
    n = np.array([50, 25, 80, 10])
    want = order_probabilities(n10, n01, 200, n)
    monkeypatch.setattr(exact_module, "_CHUNK_ELEMENTS", chunk)
    got = order_probabilities(n10, n01, 200, n)
    np.testing.assert_allclose(got.p_greater, want.p_greater, rtol=0, atol=1e-14)
    np.testing.assert_allclose(got.p_equal, want.p_equal, rtol=0, atol=1e-14)
