"""Jobs: create/cancel (request side, flush only) and execute (worker side, own transactions).

Other packages register a handler per job kind in :data:`JOB_HANDLERS`; a handler reads
``job.params``/``job.seed``, does the work, reports progress through the reporter (which also
raises :class:`JobCancelled` when a cancel was requested) and sets ``job.result``. The executor
commits the final status together with whatever the handler wrote.

Handlers must not flush changes to the ``job`` row itself (set ``job.result`` and return): the
reporter updates that row from its own transaction, and a lock held by the handler's session
would make it wait for itself.
"""

from __future__ import annotations

import importlib
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.db.base import utcnow
from app.db.models import Job, JobStatus
from app.db.repositories import JobRepository
from app.errors import Conflict, InvalidInput, NotFound


class JobCancelled(Exception):
    """Raised inside a handler when the job's cancel flag is set."""


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


JobHandler = Callable[[Session, Job, ProgressReporter], None]
ParamsValidator = Callable[[dict[str, Any]], dict[str, Any]]

JOB_HANDLERS: dict[str, JobHandler] = {}
JOB_PARAM_VALIDATORS: dict[str, ParamsValidator] = {}

# Modules that call ``register_job_kind`` at import; the API and the worker both load them.
JOB_KIND_MODULES: list[str] = ["app.services.analyses", "app.services.subsets"]


def load_job_kinds() -> None:
    for module in JOB_KIND_MODULES:
        importlib.import_module(module)


def register_job_kind(
    kind: str, handler: JobHandler, validate_params: ParamsValidator | None = None
) -> None:
    JOB_HANDLERS[kind] = handler
    if validate_params is not None:
        JOB_PARAM_VALIDATORS[kind] = validate_params


def new_seed() -> int:
    """A fresh non-negative seed that fits a signed BIGINT."""
    return secrets.randbits(63)


def create_job(
    session: Session, kind: str, params: dict[str, Any] | None = None, seed: int | None = None
) -> Job:
    if kind not in JOB_HANDLERS:
        raise InvalidInput(
            f"unknown job kind {kind!r}",
            errors=[{"loc": ["body", "kind"], "message": f"choose from {sorted(JOB_HANDLERS)}"}],
        )
    params = dict(params or {})
    validator = JOB_PARAM_VALIDATORS.get(kind)
    if validator is not None:
        params = validator(params)
    job = Job(
        kind=kind,
        status=JobStatus.queued,
        params=params,
        seed=new_seed() if seed is None else seed,
        progress_done=0,
    )
    return JobRepository(session).add(job)


def get_job(session: Session, job_id: uuid.UUID) -> Job:
    job = JobRepository(session).get(job_id)
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def cancel_job(session: Session, job_id: uuid.UUID) -> Job:
    """Queued jobs are cancelled at once; running ones get a flag their handler honours."""
    job = JobRepository(session).get(job_id, for_update=True)  # serialise with the worker's start
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    if job.status.terminal:
        raise Conflict(f"job {job_id} is already {job.status.value}")
    job.cancel_requested = True
    if job.status is JobStatus.queued:
        job.status = JobStatus.cancelled
        job.finished_at = utcnow()
        job.error = "cancelled before it started"
    session.flush()
    return job


def mark_failed(session: Session, job_id: uuid.UUID, reason: str) -> bool:
    """Mark a non-terminal job failed (flush only). Returns whether the row changed."""
    job = JobRepository(session).get(job_id)
    if job is None or job.status.terminal:
        return False
    job.status = JobStatus.failed
    job.error = reason
    job.finished_at = utcnow()
    session.flush()
    return True


def execute_job(session_factory: sessionmaker[Session], job_id: uuid.UUID) -> JobStatus | None:
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

    reporter = ProgressReporter(session_factory, job_id)
    session = session_factory()
    try:
        job = session.get(Job, job_id)
        assert job is not None
        handler = JOB_HANDLERS.get(job.kind)
        if handler is None:
            raise LookupError(f"no handler registered for job kind {job.kind!r}")
        handler(session, job, reporter)
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
        _finish(session, job_id, JobStatus.failed, _reason(exc))
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


def _reason(exc: BaseException) -> str:
    name = type(exc).__name__
    if name in {"SoftTimeLimitExceeded", "TimeLimitExceeded"}:
        return f"time limit exceeded ({name})"
    text = str(exc)
    return f"{name}: {text}" if text else name


# --- the built-in "ping" kind: proves API -> commit -> broker -> worker -> status ---------------

PING_MAX_STEPS = 1000
PING_MAX_DELAY = 60.0


def _validate_ping(params: dict[str, Any]) -> dict[str, Any]:
    errors = []
    steps = params.get("steps", 1)
    delay = params.get("delay", 0.0)
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= PING_MAX_STEPS:
        errors.append(
            {"loc": ["body", "params", "steps"], "message": f"an integer in [1, {PING_MAX_STEPS}]"}
        )
    if (
        not isinstance(delay, int | float)
        or isinstance(delay, bool)
        or not 0 <= delay <= PING_MAX_DELAY
    ):
        errors.append(
            {
                "loc": ["body", "params", "delay"],
                "message": f"seconds per step, a number in [0, {PING_MAX_DELAY}]",
            }
        )
    unknown = sorted(set(params) - {"steps", "delay"})
    for key in unknown:
        errors.append({"loc": ["body", "params", key], "message": "unknown parameter"})
    if errors:
        raise InvalidInput("invalid ping parameters", errors=errors)
    return {"steps": steps, "delay": float(delay)}


def _run_ping(session: Session, job: Job, progress: ProgressReporter) -> None:
    steps, delay = int(job.params["steps"]), float(job.params["delay"])
    progress(0, steps)
    for step in range(1, steps + 1):
        if delay:
            time.sleep(delay)
        progress(step)
    job.result = {"pong": True, "steps": steps}


register_job_kind("ping", _run_ping, _validate_ping)
