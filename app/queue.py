"""The one seam between the API and the job queue: send a task by name.

The API never imports the ``worker`` package (which builds the worker's Celery app at import and
registers the tasks): it publishes task names through a :class:`JobQueue`. The Celery
implementation is a client-only Celery app built from Settings with the same broker, queue,
serialisation and transport options the worker uses (``worker.celery_app`` starts from
:func:`make_celery_client`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from celery import Celery
from kombu import Queue
from sqlalchemy.orm import Session

from app.db.session import after_commit
from app.errors import ServiceUnavailable
from app.services.platform import jobs as job_service
from app.settings import Settings

log = logging.getLogger(__name__)

RUN_JOB_TASK = "benchslice.run_job"
ANALYSIS_CHUNKS_TASK = "benchslice.analysis_chunks"
BROKER_DOWN_REASON = "could not enqueue: message broker unavailable"


class JobQueue(Protocol):
    """Publishes a task by name with JSON keyword arguments (raises when the broker is down)."""

    def send(self, task_name: str, kwargs: Mapping[str, Any], **options: Any) -> None: ...


def make_celery_client(settings: Settings) -> Celery:
    """A Celery app that can publish (and that the worker extends): broker, queue, json only,
    transport options. It imports no tasks."""
    app = Celery("benchslice", broker=settings.broker_url)
    transport_options: dict[str, Any] = {}
    if settings.broker_is_redis:
        transport_options["visibility_timeout"] = settings.visibility_timeout
        if settings.celery_key_prefix:
            transport_options["global_keyprefix"] = settings.celery_key_prefix
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,
        result_backend=None,
        task_default_queue=settings.celery_queue,
        task_queues=[Queue(settings.celery_queue, routing_key=settings.celery_queue)],
        task_default_routing_key=settings.celery_queue,
        broker_transport_options=transport_options,
        broker_connection_timeout=settings.broker_publish_timeout,
        broker_connection_retry_on_startup=True,
        timezone="UTC",
        enable_utc=True,
    )
    return app


class CeleryQueue:
    """:class:`JobQueue` over a Celery app: every task goes to the app's default queue."""

    def __init__(self, celery: Celery) -> None:
        self.celery = celery

    @classmethod
    def from_settings(cls, settings: Settings) -> CeleryQueue:
        return cls(make_celery_client(settings))

    def send(self, task_name: str, kwargs: Mapping[str, Any], **options: Any) -> None:
        self.celery.send_task(
            task_name, kwargs=dict(kwargs), queue=self.celery.conf.task_default_queue, **options
        )

    def close(self) -> None:
        self.celery.close()


def publish_job(queue: JobQueue, job_id: uuid.UUID, **options: Any) -> None:
    """Send ``run_job(job_id)`` (a few quick retries, then raise)."""
    queue.send(
        RUN_JOB_TASK,
        {"job_id": str(job_id)},
        retry=True,
        retry_policy={
            "max_retries": 2,
            "interval_start": 0.2,
            "interval_step": 0.3,
            "interval_max": 0.5,
        },
        **options,
    )


def _publish_or_mark_failed(session: Session, queue: JobQueue, job_id: uuid.UUID) -> bool:
    """Publish the job; on broker failure mark it ``failed`` (committed: the request's
    transaction is over). Whether it was published."""
    try:
        publish_job(queue, job_id)
    except Exception as exc:
        log.warning("enqueue of job %s failed: %s", job_id, exc)
        if job_service.mark_failed(session, job_id, BROKER_DOWN_REASON):
            session.commit()
        return False
    return True


def enqueue_job_after_commit(session: Session, queue: JobQueue, job_id: uuid.UUID) -> None:
    """Publish once the request commits. On broker failure the job is marked ``failed``
    (kept for the record, never left ``queued``) and the request answers 503 + Retry-After."""

    def _publish() -> None:
        if not _publish_or_mark_failed(session, queue, job_id):
            raise ServiceUnavailable(
                f"the job queue is unavailable; job {job_id} was marked failed, retry later",
                retry_after=10,
            )

    after_commit(session, _publish)


def publish_after_commit_quietly(session: Session, queue: JobQueue, job_id: uuid.UUID) -> None:
    """Publish a job the instance queued for itself (e.g. the precompute after an upload) once
    the request commits. On broker failure the job is marked ``failed`` and the request still
    succeeds: the work it would have saved is done on the next read instead."""
    after_commit(session, lambda: _publish_or_mark_failed(session, queue, job_id))
