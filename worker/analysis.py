"""Helper task for analysis jobs: other worker processes take chunks of runs of a running job.

The job's own task (``benchslice.run_job`` → the "analysis" handler) publishes up to one helper
per remaining chunk; a helper claims pending chunks with ``FOR UPDATE SKIP LOCKED`` until none is
left and returns. Helpers are idempotent and disposable: a redelivered or late helper finds
nothing to claim, and a helper that dies releases its chunk to the others.
"""

from __future__ import annotations

import logging
import uuid

from app.services import analyses as analysis_service
from worker.celery_app import celery_app

log = logging.getLogger(__name__)

CHUNK_TASK = "benchslice.analysis_chunks"
MAX_HELPERS = 8


@celery_app.task(name=CHUNK_TASK)
def analysis_chunks(job_id: str) -> int:
    from worker.tasks import session_factory  # late: worker.tasks imports this module

    n = analysis_service.work_on_chunks(session_factory(), uuid.UUID(job_id))
    log.info("analysis job %s: computed %d chunk(s) as a helper", job_id, n)
    return n


def publish_helpers(job_id: uuid.UUID, n: int) -> None:
    for _ in range(min(n, MAX_HELPERS)):
        celery_app.send_task(
            CHUNK_TASK, kwargs={"job_id": str(job_id)}, queue=celery_app.conf.task_default_queue
        )


if publish_helpers not in analysis_service.CHUNK_HELPERS:
    analysis_service.CHUNK_HELPERS[:] = [publish_helpers]
