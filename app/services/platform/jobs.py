"""Jobs, request side (create, read, cancel, mark failed; flush only), and the contract between
the worker's runner (``worker.runner``) and a job kind's handler.

The job kinds and their handlers are listed in :data:`app.services.job_kinds.JOB_KINDS`. A handler
``handler(session, job, ctx)`` reads ``job.params``/``job.seed``, does the work in ``session``
(flush only), reports progress through ``ctx.progress`` (which raises :class:`JobCancelled` when a
cancel was requested) and sets ``job.result``. The runner owns every transaction: it commits the
final status together with whatever the handler wrote, or rolls it back.

Handlers must not flush changes to the ``job`` row itself (set ``job.result`` and return): the
progress reporter updates that row from its own transaction, and a lock held by the handler's
session would make it wait for itself.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Job
from app.db.models.job import ACTIVE_DEDUPE_INDEX
from app.db.repositories import JobRepository
from app.enums import JobStatus
from app.errors import Conflict, InvalidInput, NotFound
from app.services.platform import quotas


class JobCancelled(Exception):
    """Raised inside a handler (by its progress reporter) when the job's cancel flag is set."""


class Progress(Protocol):
    """Reports progress from a running job; raises :class:`JobCancelled` when asked to stop."""

    def __call__(self, done: int, total: int | None = None) -> None: ...

    def check_cancelled(self) -> None: ...


def no_helpers(job_id: uuid.UUID, n: int) -> None:
    """The helper publisher where there is nobody else to ask (tests, a lone process)."""


@dataclass(frozen=True)
class JobContext:
    """What the worker's runner hands a handler besides its session and job.

    Attributes
    ----------
    progress : Progress
        Commits progress in short transactions of its own (the API sees it while the job runs).
    transaction : callable or None
        Opens an independent session in a transaction that commits when the ``with`` block ends
        (rolls back on error); only where other processes can share the work (Postgres with
        ``SKIP LOCKED``). ``None``: do everything in the handler's session.
    request_helpers : callable
        ``request_helpers(job_id, n)`` asks up to ``n`` other worker processes to help with the
        job (the analysis kind's chunks). A no-op by default.
    """

    progress: Progress
    transaction: Callable[[], AbstractContextManager[Session]] | None = None
    request_helpers: Callable[[uuid.UUID, int], None] = no_helpers


JobHandler = Callable[[Session, Job, JobContext], None]
ParamsValidator = Callable[[dict[str, Any]], dict[str, Any]]


def version_id_param(params: dict[str, Any], allowed: set[str]) -> str:
    """A job's ``params["version_id"]`` as a canonical uuid string, after refusing any key not in
    ``allowed`` (422 naming the field)."""
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InvalidInput("unknown parameter", field=("params", unknown[0]))
    try:
        return str(uuid.UUID(str(params.get("version_id"))))
    except ValueError:
        raise InvalidInput(
            "version_id: expected a benchmark version id", field=("params", "version_id")
        ) from None


def new_seed() -> int:
    """A fresh non-negative seed that fits a signed BIGINT."""
    return secrets.randbits(63)


def create_job(
    session: Session, kind: str, params: dict[str, Any] | None = None, seed: int | None = None
) -> Job:
    """Insert a queued job with validated ``params`` (flush only).

    Callers validate ``params`` first: the service of the kind, or
    :func:`app.services.job_kinds.submit_job` for the generic ``POST /v1/jobs``.
    """
    quotas.check_new_job(session, kind, params or {})
    job = Job(
        kind=kind,
        status=JobStatus.queued,
        params=dict(params or {}),
        seed=new_seed() if seed is None else seed,
        progress_done=0,
        owner=quotas.owner(),
    )
    return JobRepository(session).add(job)


def dedupe_key(kind: str, params: dict[str, Any], seed: int) -> str:
    """sha256 (hex) of the job's canonical identity: kind, params (sorted-key JSON) and seed."""
    payload = {"kind": kind, "params": params, "seed": int(seed)}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


JOIN_ATTEMPTS = 5
CREATED_KEY = "benchslice.created_jobs"


def take_created(session: Session, job_id: uuid.UUID) -> bool:
    """Whether :func:`create_or_join_job` inserted this job in ``session`` (rather than joining
    an identical active one); the mark is consumed. Only a new job is enqueued: publishing a
    shared running job again would let a second worker run it alongside the first."""
    created = session.info.get(CREATED_KEY, set())
    if job_id in created:
        created.discard(job_id)
        return True
    return False


def is_dedupe_conflict(exc: IntegrityError) -> bool:
    """Whether the violation is the active-job dedupe index (Postgres names the index, SQLite
    the column)."""
    text = str(exc.orig)
    return ACTIVE_DEDUPE_INDEX in text or "jobs.dedupe_key" in text


def create_or_join_job(
    session: Session,
    kind: str,
    params: dict[str, Any],
    seed: int | None = None,
    *,
    progress_total: int | None = None,
) -> tuple[Job, bool]:
    """Single flight: ``(job, created)``, the queued or running job with the same kind, params
    and seed, or a new queued one (flush only; the caller enqueues a new job after commit).

    The database arbitrates, so it holds across API processes: the insert carries
    :func:`dedupe_key`, which a partial unique index allows once among active jobs. The insert
    runs in a SAVEPOINT; on a conflict (another request inserted the same key first; on Postgres
    the insert waits for that transaction to commit) the savepoint is rolled back and the
    winner's job is read back. A job that turned terminal in between no longer holds the key,
    so the insert is retried (a few times, then 409).
    """
    params = dict(params)
    seed = new_seed() if seed is None else int(seed)
    key = dedupe_key(kind, params, seed)
    repo = JobRepository(session)
    for _ in range(JOIN_ATTEMPTS):
        found = repo.active_by_dedupe_key(key)
        if found is not None:
            return found, False
        quotas.check_new_job(session, kind, params)
        job = Job(
            kind=kind,
            status=JobStatus.queued,
            params=params,
            seed=seed,
            progress_done=0,
            progress_total=progress_total,
            dedupe_key=key,
            owner=quotas.owner(),
        )
        try:
            with session.begin_nested():
                session.add(job)
                session.flush()
        except IntegrityError as exc:
            if not is_dedupe_conflict(exc):
                raise
            continue
        session.info.setdefault(CREATED_KEY, set()).add(job.id)
        return job, True
    raise Conflict(f"an identical {kind} job kept changing state; try again")


def discard_new_job(session: Session, job: Job) -> None:
    """Delete a job this session just created (flush only): the work turned out to be done."""
    session.info.get(CREATED_KEY, set()).discard(job.id)
    JobRepository(session).delete(job)


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
