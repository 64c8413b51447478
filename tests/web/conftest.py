"""Fixtures for the browser view's fast tests: a slice of real GPQA on the test Postgres (one
rolled-back transaction per test), with a succeeded analysis, a subset scored once and an
evaluation session driven to its decision — every page has something to show."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.api.deps import open_session
from app.db.models import JobStatus
from app.main import create_app
from app.services.platform.jobs import JobContext
from app.services.reliability import analyses as analyses_service
from app.services.reliability import analysis_jobs
from app.services.selection import subsets as subset_service
from app.settings import Settings
from tests.api._subset_data import Seeded, seed_gpqa
from worker.runner import ProgressReporter

ANALYSIS = {
    "methods": ["random", "subtask_stratified"],
    "sizes": [10, 25, 50],
    "runs": 4,
    "n_sources": 20,
    "n_targets": 10,
    "seed": 7,
}


@dataclass
class Seen:
    seeded: Seeded
    analysis_id: str
    subset_id: str
    session_id: str
    session_body: dict

    @property
    def ref(self) -> str:
        return str(self.seeded.version_id)


def _factory(db_session: Session) -> sessionmaker[Session]:
    return sessionmaker(
        bind=db_session.connection(),
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
    )


def run_analysis(db_session: Session, analysis_id: uuid.UUID) -> None:
    """The worker's job body, in the test's transaction (no Celery)."""
    row = analyses_service.get_analysis(db_session, analysis_id)
    job = row.job
    job.status = JobStatus.running
    db_session.flush()
    analysis_jobs.run_analysis(
        db_session, job, JobContext(progress=ProgressReporter(_factory(db_session), job.id))
    )
    job.status = JobStatus.succeeded
    db_session.flush()
    db_session.refresh(job)


def far_pair(seeded: Seeded) -> tuple[int, int]:
    acc = seeded.correct.mean(axis=1)
    return int(np.argmax(acc)), int(np.argmin(acc))


@pytest.fixture
def seen(client: TestClient, db_session: Session) -> Seen:
    seeded = seed_gpqa(db_session, n_models=30)
    db_session.commit()
    ref = str(seeded.version_id)
    r = client.post(f"/v1/benchmarks/{ref}/analyses", json=ANALYSIS)
    assert r.status_code == 202, r.text
    analysis_id = r.json()["id"]
    run_analysis(db_session, uuid.UUID(analysis_id))
    req = subset_service.resolve_request(db_session, seeded.version_id, "random", 20, {}, 3, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    a, b = far_pair(seeded)
    truth = dict(zip(seeded.item_ids, seeded.correct[a].tolist(), strict=True))
    items = client.get(f"/v1/subsets/{subset.id}").json()["items"]
    r = client.post(
        f"/v1/subsets/{subset.id}/scores",
        json={
            "model": seeded.names[a],
            "item_ids": [it["item_id"] for it in items],
            "correct": [truth[it["item_id"]] for it in items],
        },
    )
    assert r.status_code == 201, r.text
    r = client.post(
        f"/v1/benchmarks/{ref}/sessions",
        json={
            "model": seeded.names[a],
            "baseline": seeded.names[b],
            "policy": "random",
            "batch_size": 20,
            "seed": 2,
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    while body["state"] == "open":
        batch = body["next_items"]
        r = client.post(
            f"/v1/sessions/{body['id']}/results",
            json={
                "model": body["model"],
                "item_ids": [it["item_id"] for it in batch],
                "correct": [truth[it["item_id"]] for it in batch],
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
    return Seen(seeded, analysis_id, subset.id, body["id"], body)


@pytest.fixture
def auth_client(settings: Settings, db_session: Session) -> Iterator[TestClient]:
    """A client of an app with API-key auth on (no redirects followed, 500s returned)."""
    app = create_app(settings.model_copy(update={"auth_enabled": True}))
    app.dependency_overrides[open_session] = lambda: db_session
    try:
        with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as c:
            yield c
    finally:
        app.state.celery.close()
        app.state.engine.dispose()
