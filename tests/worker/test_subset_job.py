"""The subset job through a real worker over Redis: build, fetch, reuse; and the failure path."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import BenchmarkVersion, Job, LanguageModel
from app.db.models.benchmark import Benchmark
from tests.api._subset_data import committed
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]


@pytest.fixture
def stored(committed_sessionmaker: sessionmaker[Session], cleanup: Cleanup):
    seeded = committed(committed_sessionmaker, n_models=25)
    with committed_sessionmaker() as s:
        version = s.get(BenchmarkVersion, seeded.version_id)
        cleanup(Benchmark, version.benchmark_id)
        for mid in s.scalars(select(LanguageModel.id).where(LanguageModel.name.in_(seeded.names))):
            cleanup(LanguageModel, mid)
    return seeded


def test_subset_job_end_to_end_then_reused(
    celery_worker_process: WorkerProcess, committed_client: TestClient, cleanup: Cleanup, stored
) -> None:
    body = {"method": "dpp", "size": 20, "seed": 42}
    r = committed_client.post(f"/v1/benchmarks/{stored.version_id}/subsets", json=body)
    assert r.status_code == 202, r.text
    cleanup(Job, uuid.UUID(r.json()["id"]))
    done = wait_for_job(lambda: committed_client.get(r.headers["location"]).json(), timeout=90)
    assert done["status"] == "succeeded", (done, celery_worker_process.log[-3000:])
    sid = done["result"]["subset_id"]
    got = committed_client.get(f"/v1/subsets/{sid}")
    assert got.status_code == 200
    sub = got.json()
    assert sub["size"] == 20 and sub["provenance"]["job_id"] == done["id"]
    assert sub["provenance"]["source_models"] == stored.names
    lm = committed_client.get(f"/v1/subsets/{sid}", params={"format": "lm-eval"}).json()
    assert sum(len(v) for v in lm.values()) == 20
    again = committed_client.post(f"/v1/benchmarks/{stored.version_id}/subsets", json=body)
    assert again.status_code == 200 and again.json()["id"] == sid


def test_subset_job_failure_keeps_the_reason(
    celery_worker_process: WorkerProcess, committed_client: TestClient, cleanup: Cleanup, stored
) -> None:
    # The generic jobs endpoint validates structure only; the size is checked by the worker.
    r = committed_client.post(
        "/v1/jobs",
        json={
            "kind": "subset",
            "params": {"benchmark_id": str(stored.version_id), "method": "random", "size": 5000},
        },
    )
    assert r.status_code == 202, r.text
    cleanup(Job, uuid.UUID(r.json()["id"]))
    done = wait_for_job(lambda: committed_client.get(r.headers["location"]).json(), timeout=90)
    assert done["status"] == "failed"
    assert "5000 exceeds" in done["error"] and done["result"] is None
