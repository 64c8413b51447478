"""Fault-injection fixtures: each test gets its own database and, when it breaks a dependency,
its own private Redis or Postgres (tests/support/procs.py). The shared services on 5432/6379
are never stopped or restarted; the only processes signalled are the ones started here."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.conftest import _RUN_ID, ADMIN_DATABASE_URL, TEST_REDIS_URL
from tests.support.procs import migrated_database, private_redis

pytestmark = pytest.mark.integration


def unique(label: str) -> str:
    return f"{_RUN_ID}_{label}_{secrets.token_hex(2)}"


@pytest.fixture
def fault_database() -> Iterator[str]:
    """A migrated database of its own on the shared server (dropped afterwards)."""
    with migrated_database(ADMIN_DATABASE_URL, f"benchslice_test_{unique('fault')}") as url:
        yield url


@pytest.fixture
def redis_broker() -> Iterator[str]:
    """A private ``redis-server`` (the test may stop and restart it)."""
    with private_redis() as redis:
        yield redis


@pytest.fixture
def shared_broker() -> tuple[str, str, str]:
    """(url, queue, key prefix) on the shared Redis, isolated by this run's prefix."""
    tag = unique("q")
    return TEST_REDIS_URL, f"benchslice-test-{tag}", f"benchslice-test-{_RUN_ID}:{tag}:"


def synthetic_results(n_models: int, n_items: int, seed: int = 0) -> np.ndarray:
    """0/1 results from a 1-PL model (abilities and difficulties standard normal)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=n_models)
    difficulty = rng.normal(size=n_items)
    p = 1.0 / (1.0 + np.exp(-(ability[:, None] - difficulty[None, :])))
    return (rng.random((n_models, n_items)) < p).astype(np.uint8)


def payload(body: dict[str, Any], truth: np.ndarray, ids: list[str]) -> dict[str, Any]:
    """The model's results on the open batch (item ids and values, as a CI job would post)."""
    items = body["next_items"]
    return {
        "model": body["model"],
        "item_ids": [it["item_id"] for it in items],
        "correct": [float(truth[ids.index(it["item_id"])]) for it in items],
    }
