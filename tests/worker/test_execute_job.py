"""Task logic called in-process with a session factory bound to the rolled-back test connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Job, JobStatus
from app.services.job_kinds import JOB_KINDS, JobKind, submit_job
from app.services.platform import jobs as job_service
from app.services.platform.jobs import JobCancelled, JobContext
from worker.runner import ProgressReporter, execute_job


@pytest.fixture
def factory(db_session: Session) -> Iterator[sessionmaker[Session]]:
    connection = db_session.connection()
    yield sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )


def _job(factory: sessionmaker[Session], kind: str = "ping", **params: object) -> Job:
    with factory() as session:
        if kind in JOB_KINDS:
            job = submit_job(session, kind, params or None, seed=1)
        else:  # a kind of this test's own table
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


def test_terminal_job_is_not_run_again(factory: sessionmaker[Session]) -> None:
    calls: list[str] = []

    def handler(session: Session, job: Job, ctx: JobContext) -> None:
        calls.append(job.kind)

    kinds = {"count": JobKind(handler)}
    job = _job(factory, "count")
    assert execute_job(factory, job.id, kinds=kinds) is JobStatus.succeeded
    assert execute_job(factory, job.id, kinds=kinds) is JobStatus.succeeded  # a redelivery
    assert calls == ["count"]


def test_handler_exception_marks_failed_and_discards_its_writes(
    factory: sessionmaker[Session],
) -> None:
    def handler(session: Session, job: Job, ctx: JobContext) -> None:
        job.result = {"partial": True}
        session.flush()
        raise ValueError("bad input matrix")

    job = _job(factory, "broken")
    assert execute_job(factory, job.id, kinds={"broken": JobKind(handler)}) is JobStatus.failed
    failed = _load(factory, job)
    assert failed.error == "ValueError: bad input matrix"
    assert failed.result is None and failed.finished_at is not None


def test_soft_time_limit_marks_failed_with_reason(factory: sessionmaker[Session]) -> None:
    def handler(session: Session, job: Job, ctx: JobContext) -> None:
        raise SoftTimeLimitExceeded()

    job = _job(factory, "slow")
    assert execute_job(factory, job.id, kinds={"slow": JobKind(handler)}) is JobStatus.failed
    assert "time limit exceeded" in (_load(factory, job).error or "")


def test_cancel_flag_is_honoured_through_the_reporter(factory: sessionmaker[Session]) -> None:
    seen: list[int] = []

    def handler(session: Session, job: Job, ctx: JobContext) -> None:
        for step in range(10):
            seen.append(step)
            if step == 2:
                with factory() as other:
                    job_service.cancel_job(other, job.id)
                    other.commit()
            ctx.progress(step, 10)

    job = _job(factory, "long")
    assert execute_job(factory, job.id, kinds={"long": JobKind(handler)}) is JobStatus.cancelled
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


def test_unregistered_kind_fails(factory: sessionmaker[Session]) -> None:
    job = _job(factory, "gone")  # e.g. queued by an older release
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


def test_the_table_lists_every_kind_with_its_handler_and_validator() -> None:
    from app.services import job_kinds
    from app.services.catalog import irt_fits
    from app.services.platform import ping
    from app.services.ranking import precompute
    from app.services.reliability import analyses, analysis_jobs, plots
    from app.services.selection import coverage_runs, subsets

    assert job_kinds.PRECOMPUTE.func is precompute.run_precompute
    assert job_kinds.PRECOMPUTE.keywords == {"figures": plots.accuracy_histograms}
    assert dict(JOB_KINDS) == {
        "ping": JobKind(ping.run_ping, ping.validate_ping),
        "analysis": JobKind(analysis_jobs.run_analysis, analyses.validate_params),
        "subset": JobKind(subsets.run_subset_job, subsets.validate_job_params),
        "irt_fit": JobKind(irt_fits.run_irt_fit, irt_fits.validate_params),
        "coverage": JobKind(
            coverage_runs.run_coverage, coverage_runs.validate_params, coverage_runs.check_params
        ),
        "precompute_views": JobKind(job_kinds.PRECOMPUTE, precompute.validate_params),
    }
    with pytest.raises(TypeError):
        JOB_KINDS["other"] = JobKind(ping.run_ping)  # type: ignore[index]


def test_unknown_kind_is_a_422_naming_the_field(db_session: Session) -> None:
    from app.errors import InvalidInput

    with pytest.raises(InvalidInput) as info:
        submit_job(db_session, "nope")
    assert "unknown job kind 'nope'" in str(info.value.detail)
