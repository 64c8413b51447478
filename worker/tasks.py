"""Thin tasks: take a job id, reload, run the registered handler, record status."""

from __future__ import annotations

import logging
import uuid
from functools import lru_cache
from typing import Any

from celery import Task
from sqlalchemy.orm import Session, sessionmaker

from app.db.session import make_engine, make_sessionmaker
from app.services import jobs as job_service
from app.settings import get_settings
from worker.celery_app import celery_app

log = logging.getLogger(__name__)

job_service.load_job_kinds()


@lru_cache
def session_factory() -> sessionmaker[Session]:
    return make_sessionmaker(make_engine(get_settings()))


class JobTask(Task):
    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Also called in the parent process on a hard time limit: never leave a job "running".
        job_id = kwargs.get("job_id") or (args[0] if args else None)
        if job_id is None:
            return
        with session_factory()() as session:
            if job_service.mark_failed(session, uuid.UUID(str(job_id)), job_service._reason(exc)):
                session.commit()


@celery_app.task(name="benchslice.run_job", base=JobTask, bind=True)
def run_job(self: Task, job_id: str) -> str | None:
    status = job_service.execute_job(session_factory(), uuid.UUID(job_id))
    log.info("job %s -> %s", job_id, status)
    return None if status is None else status.value
