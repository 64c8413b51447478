"""Caches bounded by measured bytes (per cache and per process), counted on /metrics."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import REGISTRY

from app.services.platform import caching
from app.services.platform.caching import BUDGET, BoundedCache
from app.services.platform.sizing import nbytes

MB = 1024 * 1024


def _count(metric: str, name: str) -> float:
    return REGISTRY.get_sample_value(metric, {"cache": name}) or 0.0


def test_nbytes_counts_buffers_once() -> None:
    a = np.zeros(MB, dtype=np.float64)  # 8 MiB
    assert 8 * MB <= nbytes(a) < 8 * MB + 1024
    assert 8 * MB <= nbytes((a, a, a[:10], a[5:].T)) < 8 * MB + 4096  # the buffer counted once
    view = np.frombuffer(bytes(3 * MB), dtype=np.uint8)[::2]  # a view of a view of bytes
    assert 3 * MB <= nbytes(view) < 3 * MB + 4096
    assert nbytes(b"x" * 5 * MB) >= 5 * MB
    assert nbytes({"k": ["y" * MB, 1.5]}) >= MB


def test_cache_holds_at_most_its_bytes_and_counts() -> None:
    cache: BoundedCache[int, np.ndarray] = BoundedCache("test_bytes", max_bytes=10 * MB)
    hits, misses = (
        _count("benchslice_cache_hits_total", "test_bytes"),
        _count("benchslice_cache_misses_total", "test_bytes"),
    )
    evictions = _count("benchslice_cache_evictions_total", "test_bytes")
    for i in range(5):
        cache.put(i, np.full(MB // 8 * 3, i, dtype=np.float64))  # 3 MB each
    assert len(cache) == 3 and cache.currsize <= 10 * MB
    assert cache.get(0) is None and cache.get(4) is not None  # least recently used went first
    assert _count("benchslice_cache_evictions_total", "test_bytes") == evictions + 2
    assert _count("benchslice_cache_hits_total", "test_bytes") == hits + 1
    assert _count("benchslice_cache_misses_total", "test_bytes") == misses + 1
    too_large = np.zeros(2 * MB, dtype=np.float64)  # 16 MB: never stored
    cache.put("big", too_large)
    assert cache.get("big") is None and cache.currsize <= 10 * MB
    assert REGISTRY.get_sample_value("benchslice_cache_bytes", {"cache": "test_bytes"}) == (
        cache.currsize
    )


def test_process_budget_evicts_across_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    one: BoundedCache[int, bytes] = BoundedCache("test_budget_one", max_bytes=50 * MB)
    two: BoundedCache[int, bytes] = BoundedCache("test_budget_two", max_bytes=50 * MB)
    others = BUDGET.total()
    monkeypatch.setattr(BUDGET, "limit", others + 12 * MB)
    for i in range(3):
        one.put(i, bytes(4 * MB))
    for i in range(3):
        two.put(i, bytes(4 * MB))
    assert BUDGET.total() <= others + 12 * MB
    assert len(two) >= 1 and len(one) + len(two) <= 3
    caching.configure(others + 4 * MB)  # lowering the limit evicts at once
    assert BUDGET.total() <= others + 4 * MB
    one.clear()
    two.clear()
