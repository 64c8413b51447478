from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Job, JobStatus
from app.main import create_app
from app.queue import BROKER_DOWN_REASON
from app.settings import Settings


def test_create_ping_job_is_202_with_location(client: TestClient, redis_isolation: str) -> None:
    response = client.post("/v1/jobs", json={"kind": "ping", "seed": 42})
    assert response.status_code == 202, response.text
    body = response.json()
    assert response.headers["location"] == f"/v1/jobs/{body['id']}"
    assert body["status"] == "queued" and body["kind"] == "ping" and body["seed"] == 42
    assert body["params"] == {"steps": 1, "delay": 0.0}
    assert body["progress"] == {"done": 0, "total": None}

    fetched = client.get(response.headers["location"])
    assert fetched.status_code == 200
    assert fetched.json()["id"] == body["id"]


def test_seed_is_drawn_and_stored_when_omitted(
    client: TestClient, db_session: Session, redis_isolation: str
) -> None:
    body = client.post("/v1/jobs", json={"kind": "ping"}).json()
    job = db_session.get(Job, uuid.UUID(body["id"]))
    assert job is not None and job.seed == body["seed"] and 0 <= job.seed < 2**63


def test_cancel_queued_job_then_conflict(client: TestClient, redis_isolation: str) -> None:
    job_id = client.post("/v1/jobs", json={"kind": "ping"}).json()["id"]
    cancelled = client.post(f"/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["finished_at"] is not None
    again = client.post(f"/v1/jobs/{job_id}/cancel")
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"


def test_unknown_job_is_404_problem(client: TestClient) -> None:
    job_id = uuid.uuid4()
    for response in (client.get(f"/v1/jobs/{job_id}"), client.post(f"/v1/jobs/{job_id}/cancel")):
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"
        assert str(job_id) in response.json()["detail"]


def test_validation_errors_list_the_fields(client: TestClient) -> None:
    response = client.post("/v1/jobs", json={"params": [], "seed": -1})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    fields = {e["field"] for e in response.json()["errors"]}
    assert fields == {"body.kind", "body.params", "body.seed"}
    assert client.get("/v1/jobs/not-a-uuid").json()["errors"][0]["field"] == "path.job_id"


def test_unknown_kind_and_bad_ping_params_are_422(client: TestClient) -> None:
    unknown = client.post("/v1/jobs", json={"kind": "nope"})
    assert unknown.status_code == 422
    assert unknown.json()["errors"][0]["field"] == "body.kind"
    bad = client.post("/v1/jobs", json={"kind": "ping", "params": {"steps": 0, "x": 1}})
    assert bad.status_code == 422
    assert {e["field"] for e in bad.json()["errors"]} == {"body.params.steps", "body.params.x"}


def test_rejected_request_leaves_no_row(client: TestClient, db_session: Session) -> None:
    before = db_session.scalars(select(Job.id)).all()
    client.post("/v1/jobs", json={"kind": "ping", "params": {"delay": -1}})
    assert db_session.scalars(select(Job.id)).all() == before


def test_broker_down_is_503_and_the_job_is_marked_failed(
    settings: Settings, db_session: Session
) -> None:
    from app.api.deps import open_session

    app = create_app(
        settings.model_copy(
            update={"broker_url": "redis://127.0.0.1:1/0", "broker_publish_timeout": 0.5}
        )
    )
    app.dependency_overrides[open_session] = lambda: db_session
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/v1/jobs", json={"kind": "ping"})
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "10"
    # only this request's job: earlier committing tests on this worker's database may have left
    # broker-down jobs of their own
    jobs = db_session.scalars(select(Job).where(Job.error == BROKER_DOWN_REASON)).all()
    mine = [j for j in jobs if str(j.id) in response.json()["detail"]]
    assert len(mine) == 1
    assert mine[0].status is JobStatus.failed and mine[0].finished_at is not None


def test_a_job_body_summarises_stored_source_models(
    client: TestClient, db_session: Session
) -> None:
    """Jobs stored with the full list (before issue 16.6) read as a count and a sha256."""
    import hashlib
    import json

    names = [f"org/model-{k:03d}" for k in range(420)]
    old = Job(kind="subset", status=JobStatus.succeeded, seed=1, progress_done=0)
    old.params = {"method": "dpp", "size": 5, "source_models": list(reversed(names))}
    none = Job(kind="subset", status=JobStatus.succeeded, seed=1, progress_done=0)
    none.params = {"method": "random", "size": 5, "source_models": None}
    db_session.add_all([old, none])
    db_session.flush()
    got = client.get(f"/v1/jobs/{old.id}")
    assert got.status_code == 200 and len(got.content) < 2048
    params = got.json()["params"]
    digest = hashlib.sha256(json.dumps(sorted(names), separators=(",", ":")).encode())
    assert params == {
        "method": "dpp",
        "size": 5,
        "n_source_models": 420,
        "source_models_sha256": digest.hexdigest(),
    }
    params = client.get(f"/v1/jobs/{none.id}").json()["params"]
    assert params["n_source_models"] is None and params["source_models_sha256"] is None


def test_the_dedupe_index_allows_one_active_job_per_key(db_session: Session) -> None:
    from sqlalchemy.exc import IntegrityError

    def job(status: JobStatus) -> Job:
        return Job(kind="k", status=status, seed=1, params={}, progress_done=0, dedupe_key="x" * 64)

    db_session.add_all([job(JobStatus.succeeded), job(JobStatus.failed), job(JobStatus.queued)])
    db_session.flush()  # terminal jobs do not hold the key
    with pytest.raises(IntegrityError), db_session.begin_nested():
        db_session.add(job(JobStatus.running))
        db_session.flush()
