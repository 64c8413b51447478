"""Enqueue only after commit; a broker failure fails the job instead of orphaning it as queued."""

from __future__ import annotations

import logging
import uuid

from celery import Celery
from sqlalchemy.orm import Session

from app.db.session import after_commit
from app.errors import ServiceUnavailable
from app.services import jobs as job_service

log = logging.getLogger(__name__)

RUN_JOB_TASK = "benchslice.run_job"
BROKER_DOWN_REASON = "could not enqueue: message broker unavailable"


def publish_job(celery: Celery, job_id: uuid.UUID, **options: object) -> None:
    """Send ``run_job(job_id)`` to the configured queue (a few quick retries, then raise)."""
    celery.send_task(
        RUN_JOB_TASK,
        kwargs={"job_id": str(job_id)},
        queue=celery.conf.task_default_queue,
        retry=True,
        retry_policy={
            "max_retries": 2,
            "interval_start": 0.2,
            "interval_step": 0.3,
            "interval_max": 0.5,
        },
        **options,
    )


def enqueue_job_after_commit(session: Session, celery: Celery, job_id: uuid.UUID) -> None:
    """Publish once the request commits. On broker failure the job is marked ``failed``
    (kept for the record, never left ``queued``) and the request answers 503 + Retry-After."""

    def _publish() -> None:
        try:
            publish_job(celery, job_id)
        except Exception as exc:
            log.warning("enqueue of job %s failed: %s", job_id, exc)
            if job_service.mark_failed(session, job_id, BROKER_DOWN_REASON):
                session.commit()
            raise ServiceUnavailable(
                f"the job queue is unavailable; job {job_id} was marked failed, retry later",
                retry_after=10,
            ) from exc

    after_commit(session, _publish)
