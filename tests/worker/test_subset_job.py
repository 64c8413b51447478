"""The subset job through a real worker over Redis: build, fetch, reuse; and the failure path."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job
from tests.api._subset_data import committed_with_cleanup
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]


@pytest.fixture
def stored(committed_sessionmaker: sessionmaker[Session], cleanup: Cleanup):
    return committed_with_cleanup(committed_sessionmaker, cleanup, n_models=25)


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


def test_tiny_benchmarks_subset_through_the_worker_then_scored(
    celery_worker_process: WorkerProcess, committed_client: TestClient, cleanup: Cleanup, stored
) -> None:
    body = {"method": "tiny_benchmarks", "size": 25, "seed": 1, "params": {"dims": 3}}
    r = committed_client.post(f"/v1/benchmarks/{stored.version_id}/subsets", json=body)
    assert r.status_code == 202, r.text
    cleanup(Job, uuid.UUID(r.json()["id"]))
    done = wait_for_job(lambda: committed_client.get(r.headers["location"]).json(), timeout=120)
    assert done["status"] == "succeeded", (done, celery_worker_process.log[-3000:])
    sid = done["result"]["subset_id"]
    sub = committed_client.get(f"/v1/subsets/{sid}").json()
    assert sub["estimators"] == ["irt", "p_irt", "gp_irt"]
    items = [it["item_id"] for it in sub["items"]]
    row = stored.correct[0]
    results = {i: int(row[stored.item_ids.index(i)]) for i in items}
    scored = committed_client.post(
        f"/v1/subsets/{sid}/scores",
        params={"baseline": stored.names[1]},
        json={"model": "ci-candidate", "results": results},
    )
    assert scored.status_code == 201, scored.text
    out = scored.json()
    assert {e["estimator"] for e in out["estimates"] if e["ci_low"] is not None} == {
        "irt",
        "p_irt",
        "gp_irt",
    }
    assert out["population_shift"]["checked"] == "irt_ability_and_person_fit"
    assert 0.0 <= out["baseline"]["p_better"] <= 1.0
    with committed_client.app.state.sessionmaker() as s:  # scores go with the benchmark
        from app.db.models import SubsetScore

        assert s.get(SubsetScore, uuid.UUID(out["id"])) is not None
