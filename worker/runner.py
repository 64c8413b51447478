"""The worker's one runner: it owns every transaction of a job (services only flush).

:func:`execute_job` marks the job running, looks its handler up in
:data:`app.services.job_kinds.JOB_KINDS`, calls it with one session and a
:class:`~app.services.platform.jobs.JobContext` (progress reporter, independent transactions where chunks
can be shared, the helper publisher), and commits the final status with the handler's writes, or
rolls them back and records why.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.db.base import utcnow
from app.db.models import Job
from app.enums import JobStatus
from app.services.job_kinds import JOB_KINDS, JobKind, job_kind
from app.services.platform import jobs as job_service
from app.services.platform.jobs import JobCancelled, JobContext, no_helpers
from app.services.reliability import analysis_jobs

Helpers = Callable[[uuid.UUID, int], None]


class ProgressReporter:
    """Commits progress in short transactions of its own, so the API sees it while the job runs."""

    def __init__(self, session_factory: sessionmaker[Session], job_id: uuid.UUID) -> None:
        self._factory = session_factory
        self.job_id = job_id

    def __call__(self, done: int, total: int | None = None) -> None:
        with self._factory() as session, session.begin():
            job = session.get(Job, self.job_id)
            if job is None:
                raise JobCancelled("job row is gone")
            job.progress_done = done
            if total is not None:
                job.progress_total = total
            cancel = job.cancel_requested
        if cancel:
            raise JobCancelled("cancel requested")

    def check_cancelled(self) -> None:
        with self._factory() as session:
            job = session.get(Job, self.job_id)
            if job is None or job.cancel_requested:
                raise JobCancelled("cancel requested")


def transactions(
    session_factory: sessionmaker[Session],
) -> Callable[[], AbstractContextManager[Session]]:
    """``with tx() as session``: an independent session whose transaction commits at the end of
    the block (rolls back on error)."""

    @contextmanager
    def tx() -> Iterator[Session]:
        with session_factory() as session, session.begin():
            yield session

    return tx


def _shares_work(session: Session) -> bool:
    """Other processes can share the job's rows (Postgres, ``SKIP LOCKED``, engine-bound)."""
    bind = session.get_bind()
    return isinstance(bind, Engine) and bind.dialect.name == "postgresql"


def execute_job(
    session_factory: sessionmaker[Session],
    job_id: uuid.UUID,
    *,
    kinds: Mapping[str, JobKind] = JOB_KINDS,
    request_helpers: Helpers | None = None,
) -> JobStatus | None:
    """Run one job to a terminal status. Idempotent: a terminal job is left as it is.

    Returns the final status, or ``None`` when the job row does not exist.
    """
    with session_factory() as session, session.begin():
        job = session.get(Job, job_id, with_for_update=True)
        if job is None:
            return None
        if job.status.terminal:
            return job.status
        if job.cancel_requested:
            job.status, job.finished_at = JobStatus.cancelled, utcnow()
            return job.status
        job.status = JobStatus.running
        job.started_at = utcnow()
        job.error = None

    session = session_factory()
    try:
        job = session.get(Job, job_id)
        assert job is not None
        handler = job_kind(job.kind, kinds).handler
        ctx = JobContext(
            progress=ProgressReporter(session_factory, job_id),
            transaction=transactions(session_factory) if _shares_work(session) else None,
            request_helpers=request_helpers or no_helpers,
        )
        handler(session, job, ctx)
        job.status = JobStatus.succeeded
        job.finished_at = utcnow()
        if job.progress_total is not None:
            job.progress_done = job.progress_total
        session.commit()
        return JobStatus.succeeded
    except JobCancelled as exc:
        session.rollback()
        return _finish(session, job_id, JobStatus.cancelled, str(exc) or "cancelled")
    except BaseException as exc:
        session.rollback()
        _finish(session, job_id, JobStatus.failed, failure_reason(exc))
        if isinstance(exc, Exception):
            return JobStatus.failed
        raise
    finally:
        session.close()


def _finish(session: Session, job_id: uuid.UUID, status: JobStatus, reason: str) -> JobStatus:
    job = session.get(Job, job_id)
    if job is None:
        return status
    if not job.status.terminal:
        job.status, job.error, job.finished_at = status, reason, utcnow()
    session.commit()
    return job.status


def failure_reason(exc: BaseException) -> str:
    """The ``error`` recorded for a job that raised ``exc`` (time limits named as such)."""
    # A time limit raised inside a database call can leave that connection mid-query, so the
    # cleanup raises again (psycopg: "another command is already in progress") and the limit is
    # only the context of what propagates: the limit is still the reason.
    seen: BaseException | None = exc
    for _ in range(16):  # a chain of causes, not a loop
        if seen is None:
            break
        if type(seen).__name__ in {"SoftTimeLimitExceeded", "TimeLimitExceeded"}:
            return f"time limit exceeded ({type(seen).__name__})"
        seen = seen.__cause__ or seen.__context__
    name = type(exc).__name__
    text = str(exc)
    return f"{name}: {text}" if text else name


def mark_failed(
    session_factory: sessionmaker[Session], job_id: uuid.UUID, exc: BaseException
) -> bool:
    """Record a task failure outside the handler (e.g. a hard time limit, seen by the parent
    process): a non-terminal job becomes ``failed`` with the reason. Commits."""
    with session_factory() as session:
        changed = job_service.mark_failed(session, job_id, failure_reason(exc))
        if changed:
            session.commit()
        return changed


def help_with_chunks(session_factory: sessionmaker[Session], job_id: uuid.UUID) -> int:
    """A helper's share of an analysis job: claim and compute its pending chunks, one committed
    transaction per chunk. Returns the number computed."""
    return analysis_jobs.work_on_chunks(transactions(session_factory), job_id)
