"""Thin tasks: take a job id and hand it to the runner (:mod:`worker.runner`).

``benchslice.run_job`` runs any job kind; ``benchslice.analysis_chunks`` is a helper for analysis
jobs: the job's own task publishes up to one helper per remaining chunk; a helper claims pending
chunks with ``FOR UPDATE SKIP LOCKED`` until none is left and returns. Helpers are idempotent and
disposable: a redelivered or late helper finds nothing to claim, and a helper that dies releases
its chunk to the others.
"""

from __future__ import annotations

import logging
import uuid
from functools import lru_cache
from typing import Any

from celery import Task
from sqlalchemy.orm import Session, sessionmaker

from app.db.session import make_engine, make_sessionmaker
from app.queue import ANALYSIS_CHUNKS_TASK, RUN_JOB_TASK, CeleryQueue
from app.settings import get_settings
from worker import runner
from worker.celery_app import celery_app

log = logging.getLogger(__name__)

MAX_HELPERS = 8


@lru_cache
def session_factory() -> sessionmaker[Session]:
    return make_sessionmaker(make_engine(get_settings()))


def publish_helpers(job_id: uuid.UUID, n: int) -> None:
    """Ask up to ``n`` (at most :data:`MAX_HELPERS`) other worker processes to take chunks."""
    queue = CeleryQueue(celery_app)
    for _ in range(min(n, MAX_HELPERS)):
        queue.send(ANALYSIS_CHUNKS_TASK, {"job_id": str(job_id)})


class JobTask(Task):
    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Also called in the parent process on a hard time limit: never leave a job "running".
        job_id = kwargs.get("job_id") or (args[0] if args else None)
        if job_id is None:
            return
        runner.mark_failed(session_factory(), uuid.UUID(str(job_id)), exc)


@celery_app.task(name=RUN_JOB_TASK, base=JobTask, bind=True)
def run_job(self: Task, job_id: str) -> str | None:
    status = runner.execute_job(
        session_factory(), uuid.UUID(job_id), request_helpers=publish_helpers
    )
    log.info("job %s -> %s", job_id, status)
    return None if status is None else status.value


@celery_app.task(name=ANALYSIS_CHUNKS_TASK)
def analysis_chunks(job_id: str) -> int:
    n = runner.help_with_chunks(session_factory(), uuid.UUID(job_id))
    log.info("analysis job %s: computed %d chunk(s) as a helper", job_id, n)
    return n
