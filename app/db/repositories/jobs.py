from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select

from app.db.models import Job, KeyRole
from app.db.repositories.base import Repository
from app.enums import JobStatus


class JobRepository(Repository[Job]):
    model = Job

    def active_by_dedupe_key(self, key: str) -> Job | None:
        """The queued or running job with this dedupe key (at most one: a partial unique index)."""
        stmt = select(Job).where(
            Job.dedupe_key == key, Job.status.in_([JobStatus.queued, JobStatus.running])
        )
        return self.session.scalars(stmt).first()

    def active_for_owner(self, owner: str) -> Sequence[Job]:
        """The key's queued and running jobs (its job quota)."""
        stmt = select(Job).where(
            Job.owner == owner, Job.status.in_([JobStatus.queued, JobStatus.running])
        )
        return self.session.scalars(stmt).all()

    def active_for_project(self, project_id: uuid.UUID) -> Sequence[Job]:
        """The queued and running jobs of every key with a role on the project (its quota)."""
        keys = self.session.scalars(
            select(KeyRole.key_id).where(KeyRole.project_id == project_id)
        ).all()
        if not keys:
            return []
        stmt = select(Job).where(
            Job.owner.in_([str(k) for k in keys]),
            Job.status.in_([JobStatus.queued, JobStatus.running]),
        )
        return self.session.scalars(stmt).all()

    def finished_of_kind(self, kind: str, limit: int = 200) -> Sequence[Job]:
        """The newest succeeded jobs of ``kind`` (newest first, at most ``limit``)."""
        stmt = (
            select(Job)
            .where(Job.kind == kind, Job.status == JobStatus.succeeded)
            .order_by(Job.finished_at.desc(), Job.created_at.desc())
            .limit(limit)
        )
        return self.session.scalars(stmt).all()
