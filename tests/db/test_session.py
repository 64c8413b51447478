from __future__ import annotations

from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from app.db.base import Base
from app.db.models import Job, JobStatus
from app.db.session import after_commit, pop_after_commit


def test_constraint_names_follow_the_convention(engine: Engine) -> None:
    pk = Base.metadata.tables["jobs"].primary_key
    assert pk.name == "pk_jobs"
    with engine.connect() as conn:
        names = set(
            conn.scalars(
                text("SELECT conname FROM pg_constraint WHERE conrelid = 'jobs'::regclass")
            )
        )
    assert "pk_jobs" in names


def test_db_session_commit_is_invisible_outside_the_test(
    db_session: Session, engine: Engine
) -> None:
    job = Job(kind="ping", seed=7, params={}, status=JobStatus.queued, progress_done=0)
    db_session.add(job)
    db_session.commit()  # releases a savepoint only
    assert db_session.scalar(select(Job.id).where(Job.id == job.id)) == job.id
    with engine.connect() as other:
        assert other.scalar(select(Job.id).where(Job.id == job.id)) is None


def test_job_defaults_and_bigint_seed(db_session: Session) -> None:
    job = Job(kind="ping", seed=2**63 - 1, params={"a": [1, 2]})
    db_session.add(job)
    db_session.flush()
    db_session.expire_all()
    loaded = db_session.get(Job, job.id)
    assert loaded is not None
    assert loaded.seed == 2**63 - 1
    assert loaded.status is JobStatus.queued
    assert loaded.progress_done == 0 and loaded.cancel_requested is False
    assert loaded.created_at.tzinfo is not None


def test_after_commit_hooks_are_collected_and_popped(db_session: Session) -> None:
    calls: list[int] = []
    after_commit(db_session, lambda: calls.append(1))
    after_commit(db_session, lambda: calls.append(2))
    hooks = pop_after_commit(db_session)
    assert len(hooks) == 2 and pop_after_commit(db_session) == []
    for hook in hooks:
        hook()
    assert calls == [1, 2]
