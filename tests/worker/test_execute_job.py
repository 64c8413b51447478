"""Task logic called in-process with a session factory bound to the rolled-back test connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobStatus
from app.services import jobs as job_service
from app.services.jobs import JobCancelled, ProgressReporter, execute_job


@pytest.fixture
def factory(db_session: Session) -> Iterator[sessionmaker[Session]]:
    connection = db_session.connection()
    yield sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )


def _job(factory: sessionmaker[Session], kind: str = "ping", **params: object) -> Job:
    with factory() as session:
        job = job_service.create_job(session, kind, params or None, seed=1)
        session.commit()
        return job


def _load(factory: sessionmaker[Session], job: Job) -> Job:
    with factory() as session:
        loaded = session.get(Job, job.id)
        assert loaded is not None
        return loaded


def test_ping_succeeds_with_progress(factory: sessionmaker[Session]) -> None:
    job = _job(factory, steps=3)
    assert execute_job(factory, job.id) is JobStatus.succeeded
    done = _load(factory, job)
    assert done.status is JobStatus.succeeded
    assert (done.progress_done, done.progress_total) == (3, 3)
    assert done.result == {"pong": True, "steps": 3}
    assert done.started_at is not None and done.finished_at >= done.started_at


def test_terminal_job_is_not_run_again(
    factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def handler(session: Session, job: Job, progress: ProgressReporter) -> None:
        calls.append(job.kind)

    monkeypatch.setitem(job_service.JOB_HANDLERS, "count", handler)
    job = _job(factory, "count")
    assert execute_job(factory, job.id) is JobStatus.succeeded
    assert execute_job(factory, job.id) is JobStatus.succeeded  # a redelivery
    assert calls == ["count"]


def test_handler_exception_marks_failed_and_discards_its_writes(
    factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    def handler(session: Session, job: Job, progress: ProgressReporter) -> None:
        job.result = {"partial": True}
        session.flush()
        raise ValueError("bad input matrix")

    monkeypatch.setitem(job_service.JOB_HANDLERS, "broken", handler)
    job = _job(factory, "broken")
    assert execute_job(factory, job.id) is JobStatus.failed
    failed = _load(factory, job)
    assert failed.error == "ValueError: bad input matrix"
    assert failed.result is None and failed.finished_at is not None


def test_soft_time_limit_marks_failed_with_reason(
    factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    def handler(session: Session, job: Job, progress: ProgressReporter) -> None:
        raise SoftTimeLimitExceeded()

    monkeypatch.setitem(job_service.JOB_HANDLERS, "slow", handler)
    job = _job(factory, "slow")
    assert execute_job(factory, job.id) is JobStatus.failed
    assert "time limit exceeded" in (_load(factory, job).error or "")


def test_cancel_flag_is_honoured_through_the_reporter(
    factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []

    def handler(session: Session, job: Job, progress: ProgressReporter) -> None:
        for step in range(10):
            seen.append(step)
            if step == 2:
                with factory() as other:
                    job_service.cancel_job(other, job.id)
                    other.commit()
            progress(step, 10)

    monkeypatch.setitem(job_service.JOB_HANDLERS, "long", handler)
    job = _job(factory, "long")
    assert execute_job(factory, job.id) is JobStatus.cancelled
    cancelled = _load(factory, job)
    assert cancelled.status is JobStatus.cancelled and seen == [0, 1, 2]
    assert cancelled.error == "cancel requested" and cancelled.finished_at is not None


def test_job_cancelled_before_start_never_runs(factory: sessionmaker[Session]) -> None:
    job = _job(factory)
    with factory() as session:
        job_service.cancel_job(session, job.id)
        session.commit()
    assert execute_job(factory, job.id) is JobStatus.cancelled
    assert _load(factory, job).started_at is None


def test_unregistered_kind_fails(
    factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(job_service.JOB_HANDLERS, "gone", lambda s, j, p: None)
    job = _job(factory, "gone")
    monkeypatch.delitem(job_service.JOB_HANDLERS, "gone")
    assert execute_job(factory, job.id) is JobStatus.failed
    assert "no handler registered" in (_load(factory, job).error or "")


def test_missing_job_returns_none(factory: sessionmaker[Session]) -> None:
    import uuid

    assert execute_job(factory, uuid.uuid4()) is None


def test_reporter_raises_when_cancel_requested(factory: sessionmaker[Session]) -> None:
    job = _job(factory)
    with factory() as session:
        row = session.get(Job, job.id)
        assert row is not None
        row.cancel_requested = True
        session.commit()
    with pytest.raises(JobCancelled):
        ProgressReporter(factory, job.id)(1, 2)
