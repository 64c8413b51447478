"""Single flight on the embedded default (SQLite): the partial unique index over active jobs'
dedupe keys makes concurrent identical requests (threads, each its own connection) share one job."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.db import migrate
from app.db.models import Job, JobStatus
from app.services.platform import jobs as job_service
from app.settings import Settings


def _factory(tmp_path: Path):
    from app.db.session import make_engine, make_sessionmaker

    url = f"sqlite:///{tmp_path / 'j.sqlite3'}"
    migrate.upgrade(url)
    engine = make_engine(Settings(database_url=url))  # type: ignore[call-arg]
    return engine, make_sessionmaker(engine)


def test_twelve_concurrent_identical_requests_share_one_job(tmp_path: Path) -> None:
    engine, factory = _factory(tmp_path)
    params = {"method": "dpp", "size": 5, "source_models": [f"m{k}" for k in range(400)]}
    barrier = threading.Barrier(12)

    def request(_: int) -> tuple[uuid.UUID, bool]:
        with factory() as session:
            barrier.wait(timeout=30)
            job, created = job_service.create_or_join_job(session, "subset", params, seed=4)
            session.commit()
            return job.id, created

    try:
        with ThreadPoolExecutor(max_workers=12) as pool:
            answers = list(pool.map(request, range(12)))
        assert len({job_id for job_id, _ in answers}) == 1
        assert sum(created for _, created in answers) == 1
        with factory() as session:
            assert session.scalar(select(func.count()).select_from(Job)) == 1
            job = session.scalars(select(Job)).one()
            job.status = JobStatus.failed  # a terminal job frees the key: asking again is new work
            session.commit()
            again, created = job_service.create_or_join_job(session, "subset", params, seed=4)
            assert created and again.id != job.id
            other, created = job_service.create_or_join_job(session, "subset", params, seed=5)
            assert created and other.id != again.id
            session.commit()
    finally:
        engine.dispose()


def test_the_index_rejects_a_second_active_job_with_the_key(tmp_path: Path) -> None:
    engine, factory = _factory(tmp_path)

    def job(status: JobStatus) -> Job:
        return Job(kind="k", status=status, seed=1, params={}, progress_done=0, dedupe_key="k" * 64)

    try:
        with factory() as session:
            session.add_all([job(JobStatus.cancelled), job(JobStatus.running)])
            session.commit()
            session.add(job(JobStatus.queued))
            with pytest.raises(IntegrityError) as caught:
                session.flush()
            assert job_service.is_dedupe_conflict(caught.value)
    finally:
        engine.dispose()
