"""The full path with a real worker process: API → commit → Redis → celery worker → API."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job
from app.queue import publish_job
from app.services.job_kinds import submit_job
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]


def _submit(client: TestClient, cleanup: Cleanup, **body: Any) -> str:
    response = client.post("/v1/jobs", json={"kind": "ping", **body})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    cleanup(Job, uuid.UUID(job_id))
    return response.headers["location"]


def test_ping_job_reaches_succeeded_through_a_real_worker(
    celery_worker_process: WorkerProcess, committed_client: TestClient, cleanup: Cleanup
) -> None:
    location = _submit(committed_client, cleanup, params={"steps": 2})
    body = wait_for_job(lambda: committed_client.get(location).json())
    assert body["status"] == "succeeded", (body, celery_worker_process.log[-3000:])
    assert body["result"] == {"pong": True, "steps": 2}
    assert body["progress"] == {"done": 2, "total": 2}
    assert body["started_at"] is not None and body["finished_at"] is not None


def test_running_job_reports_progress_and_can_be_cancelled(
    celery_worker_process: WorkerProcess, committed_client: TestClient, cleanup: Cleanup
) -> None:
    location = _submit(committed_client, cleanup, params={"steps": 100, "delay": 0.1})
    running = wait_for_job(
        lambda: committed_client.get(location).json(),
        until=lambda b: b["status"] == "running" and b["progress"]["done"] >= 2,
    )
    assert running["progress"]["total"] == 100
    assert committed_client.post(f"{location}/cancel").status_code == 200
    body = wait_for_job(lambda: committed_client.get(location).json())
    assert body["status"] == "cancelled"
    assert 2 <= body["progress"]["done"] < 100


def test_soft_time_limit_ends_in_failed(
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
) -> None:
    with committed_sessionmaker() as session:
        job = submit_job(session, "ping", {"steps": 50, "delay": 0.1})
        session.commit()
    cleanup(Job, job.id)
    publish_job(committed_client.app.state.job_queue, job.id, soft_time_limit=1, time_limit=10)
    body = wait_for_job(lambda: committed_client.get(f"/v1/jobs/{job.id}").json())
    assert body["status"] == "failed"
    assert body["error"] == "time limit exceeded (SoftTimeLimitExceeded)"


def test_hard_time_limit_hook_never_leaves_a_job_running(
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
) -> None:
    # On a hard limit the prefork parent kills the child and calls Task.on_failure itself
    # (celery.worker.request.Request.on_timeout); here that hook runs against the real DB.
    # (AsynPool arms the hard timer only after the soft one, and ping always yields to the
    # soft limit, so a live hard-limit kill is not reachable with the built-in kind.)
    from celery.exceptions import TimeLimitExceeded

    from app.db.models import JobStatus
    from worker.tasks import run_job

    with committed_sessionmaker() as session:
        job = submit_job(session, "ping")
        job.status = JobStatus.running
        session.commit()
    cleanup(Job, job.id)
    run_job.on_failure(TimeLimitExceeded(1.5), "task-id", (), {"job_id": str(job.id)}, None)
    with committed_sessionmaker() as session:
        row = session.get(Job, job.id)
        assert row is not None and row.status is JobStatus.failed
        assert row.error == "time limit exceeded (TimeLimitExceeded)"


def test_redelivered_job_is_not_run_twice(
    celery_worker_process: WorkerProcess, committed_client: TestClient, cleanup: Cleanup
) -> None:
    location = _submit(committed_client, cleanup)
    first = wait_for_job(lambda: committed_client.get(location).json())
    assert first["status"] == "succeeded"
    publish_job(committed_client.app.state.job_queue, uuid.UUID(first["id"]))
    marker = f"job {first['id']} -> succeeded"
    wait_for_job(
        lambda: {"n": celery_worker_process.log.count(marker)}, until=lambda b: b["n"] >= 2
    )
    again = committed_client.get(location).json()
    assert again["finished_at"] == first["finished_at"]
    assert again["started_at"] == first["started_at"]
