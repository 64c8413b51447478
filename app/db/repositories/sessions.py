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
        """``SELECT … FOR UPDATE`` (Postgres), refreshing a copy already in the session.

        A ``select`` rather than ``Session.get(with_for_update=True)``: the latter compares the
        row's version counter with a copy read earlier in this session and raises when another
        request applied a batch in between (a retry racing the original, across processes),
        where the caller must see the newer row and answer it as a replay.
        """
        stmt = (
            select(EvaluationSession)
            .where(EvaluationSession.id == id_)
            .with_for_update()
            .options(undefer(EvaluationSession.engine_state))
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).first()

    def model_name(self, id_: uuid.UUID) -> str | None:
        """The session's model name alone (no history, order or state loaded)."""
        stmt = select(EvaluationSession.model_name).where(EvaluationSession.id == id_)
        return self.session.scalars(stmt).first()


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
