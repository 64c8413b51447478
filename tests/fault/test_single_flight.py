"""A cold verdict cache under concurrent load computes the benchmark-wide exact MDAD once per
process (single flight), not once per request thread (found by bench/load.py: at 200 req/s the
threads of two API processes all recomputed it and latencies reached tens of seconds)."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from app.services.catalog.matrices import FullMatrix
from app.services.reliability import verdicts


def test_concurrent_misses_compute_the_exact_mdad_once(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    correct = (rng.random((60, 120)) < 0.6).astype(np.uint8)
    fm = FullMatrix(
        version_id=uuid.uuid4(),
        stamp=(60, "single-flight"),
        names=np.array([f"m{i}" for i in range(60)]),
        rows={f"m{i}": i for i in range(60)},
        correct=correct,
        accuracy=correct.mean(axis=1),
        subtasks=np.array(["all"] * 120),
        unusable={},
    )
    calls: list[int] = []
    real = verdicts.exact_agreement

    def counted(*args, **kwargs):  # the real computation, counted
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(verdicts, "exact_agreement", counted)
    start = threading.Barrier(12)

    def ask(_: int) -> float | None:
        start.wait(timeout=30)
        return verdicts.exact_random_mdad(fm, 20, 0.8).mdad

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(ask, range(12)))
    assert len(calls) == 1
    assert len(set(answers)) == 1
    assert not len(verdicts.MDAD_FLIGHTS)
