from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status

from app.api.deps import (
    ActorDep,
    JobQueueDep,
    ProjectChooserDep,
    ReadableJob,
    SessionDep,
    WritableJob,
)
from app.api.errors import CONFLICT, INVALID, NOT_FOUND, UNAVAILABLE
from app.api.responses import AUTH
from app.queue import enqueue_job_after_commit
from app.schemas.jobs import JobCreate, JobPublic
from app.services.catalog import ownership
from app.services.job_kinds import submit_job
from app.services.platform import jobs as job_service

router = APIRouter(prefix="/jobs", tags=["jobs"])


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobPublic,
    responses={**INVALID, **UNAVAILABLE, **AUTH},
    name="create_job",
)
def create_job(
    body: JobCreate,
    session: SessionDep,
    queue: JobQueueDep,
    response: Response,
    chooser: ProjectChooserDep,
    actor: ActorDep,
) -> JobPublic:
    """Queue a job (built-in kind: `ping`). Poll the URL in `Location` for its status.

    A job on a benchmark version needs `write` on its project (a `ping`: on `default`).
    If the broker is down, the job is marked `failed` and the answer is 503 with Retry-After.
    """
    job = submit_job(session, body.kind, body.params, body.seed)
    project = chooser.for_job(job.params)
    version = ownership.job_params_version(session, job.params)
    ownership.record_on(session, actor, "job.create", version, project, job=job.id, kind=job.kind)
    enqueue_job_after_commit(session, queue, job.id)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return JobPublic.from_job(job)


@router.get("/{job_id}", response_model=JobPublic, responses={**NOT_FOUND, **AUTH}, name="get_job")
def get_job(job_id: uuid.UUID, session: SessionDep, _: ReadableJob) -> JobPublic:
    return JobPublic.from_job(job_service.get_job(session, job_id))


@router.post(
    "/{job_id}/cancel",
    response_model=JobPublic,
    responses={**NOT_FOUND, **CONFLICT, **AUTH},
    name="cancel_job",
)
def cancel_job(
    job_id: uuid.UUID, session: SessionDep, project: WritableJob, actor: ActorDep
) -> JobPublic:
    """Cancel a queued job at once, or ask a running one to stop at its next progress report.
    Needs `write` on the project of the job's benchmark."""
    job = job_service.cancel_job(session, job_id)
    version = ownership.job_params_version(session, job.params or {})
    summary = {"status": job.status.value, "cancel_requested": job.cancel_requested}
    ownership.record_on(
        session, actor, "job.cancel", version, project, summary, job=job.id, kind=job.kind
    )
    return JobPublic.from_job(job)
