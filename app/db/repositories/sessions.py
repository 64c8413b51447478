"""Evaluation sessions, per-version IRT fits, and the fit jobs in flight (issue 12)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import undefer

from app.db.models import BenchmarkVersion, EvaluationSession, IrtFit, Job
from app.db.repositories.base import Repository
from app.enums import TERMINAL_STATUSES


class EvaluationSessionRepository(Repository[EvaluationSession]):
    model = EvaluationSession

    def get_locked(self, id_: uuid.UUID) -> EvaluationSession | None:
        """``SELECT … FOR UPDATE`` (Postgres), refreshing a copy already in the session."""
        return self.session.get(
            EvaluationSession,
            id_,
            with_for_update=True,
            populate_existing=True,
            options=[undefer(EvaluationSession.engine_state)],
        )


class IrtFitRepository(Repository[IrtFit]):
    model = IrtFit

    def lock_version(self, version_id: uuid.UUID) -> None:
        """Serialise fit requests for one version (Postgres row lock; a no-op on SQLite)."""
        stmt = select(BenchmarkVersion.id).where(BenchmarkVersion.id == version_id)
        self.session.execute(stmt.with_for_update())

    def active_jobs(self, kind: str) -> Sequence[Job]:
        """Jobs of ``kind`` not yet terminal, oldest first."""
        stmt = (
            select(Job)
            .where(Job.kind == kind, Job.status.not_in(list(TERMINAL_STATUSES)))
            .order_by(Job.created_at)
        )
        return self.session.scalars(stmt).all()
