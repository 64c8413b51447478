"""Evaluation sessions of both policies end to end over HTTP on Postgres with a real worker:
``fluid`` before the benchmark's IRT fit exists answers 202 with the fit job (single flight),
the worker fits and stores it, then the session runs to its decision (every answer labelled
``basis: "model"``); ``random`` runs beside it (``basis: "design"``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import BenchmarkVersion, IrtFit, Job, LanguageModel
from app.db.models.benchmark import Benchmark
from app.services.catalog.irt_fits import IRT_DIMS
from tests.api._subset_data import committed, gpqa
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]
NEW_ROW = 210  # a GPQA model that is not stored: the one being evaluated


@pytest.fixture
def stored(committed_sessionmaker: sessionmaker[Session], cleanup: Cleanup):
    seeded = committed(committed_sessionmaker, n_models=30)
    with committed_sessionmaker() as s:
        version = s.get(BenchmarkVersion, seeded.version_id)
        cleanup(Benchmark, version.benchmark_id)
        for mid in s.scalars(select(LanguageModel.id).where(LanguageModel.name.in_(seeded.names))):
            cleanup(LanguageModel, mid)
    return seeded


def _answer_all(client: TestClient, body: dict, truth: np.ndarray, ids: list[str]) -> dict:
    while body["state"] == "open":
        items = body["next_items"]
        r = client.post(
            f"/v1/sessions/{body['id']}/results",
            json={
                "model": body["model"],
                "results": {it["item_id"]: float(truth[ids.index(it["item_id"])]) for it in items},
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
    return body


def test_fluid_and_random_sessions_end_to_end(
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
    stored,
) -> None:
    truth = gpqa()["correct"][NEW_ROW].astype(float)
    acc = stored.correct.mean(axis=1)
    b = int(np.argmax(np.abs(truth.mean() - acc)))
    delta = truth.mean() - acc[b]
    assert abs(delta) >= 0.15
    url = f"/v1/benchmarks/{stored.version_id}/sessions"
    req = {"model": "new/model", "baseline": stored.names[b], "policy": "fluid", "batch_size": 10}
    r = committed_client.post(url, json=req)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    cleanup(Job, uuid.UUID(job_id))
    assert r.json()["kind"] == "irt_fit" and r.headers["Location"] == f"/v1/jobs/{job_id}"
    again = committed_client.post(url, json=req)
    if again.status_code == 202:  # still queued/running: the same job, not a second one
        assert again.json()["id"] == job_id
    done = wait_for_job(lambda: committed_client.get(f"/v1/jobs/{job_id}").json(), timeout=120)
    assert done["status"] == "succeeded", (done, celery_worker_process.log[-3000:])
    assert done["result"]["n_models"] == 30 and done["result"]["dims"] == IRT_DIMS
    with committed_sessionmaker() as s:
        fit = s.get(IrtFit, stored.version_id)
        assert fit is not None and fit.job_id == uuid.UUID(job_id)
        a = np.frombuffer(fit.a, dtype="<f8").reshape(-1, fit.dims)
        assert a.shape == (448, IRT_DIMS) and np.all(np.isfinite(a))
    r = committed_client.post(url, json=req)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["estimate"]["basis"] == "model" and len(body["next_items"]) == 10
    final = _answer_all(committed_client, body, truth, stored.item_ids)
    hist = committed_client.get(f"/v1/sessions/{body['id']}").json()["history"]
    assert all(h["estimate"]["basis"] == h["difference"]["basis"] == "model" for h in hist)
    assert len({p for h in hist for p in h.get("items", [])}) == 0  # item positions stay private
    assert [h["items_used"] for h in hist] == list(range(10, final["items_used"] + 1, 10))
    assert final["state"] in ("decided", "exhausted")
    if final["state"] == "decided":
        assert final["decision"] == ("better" if delta > 0 else "worse")
    # random beside it: design-based, no job needed
    r = committed_client.post(url, json={**req, "policy": "random", "seed": 4})
    assert r.status_code == 201, r.text
    final_r = _answer_all(committed_client, r.json(), truth, stored.item_ids)
    assert final_r["state"] == "decided" and final_r["difference"]["basis"] == "design"
    assert final_r["decision"] == ("better" if delta > 0 else "worse")
