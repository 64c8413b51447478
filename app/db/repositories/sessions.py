"""Evaluation sessions, per-version IRT fits, and the fit jobs in flight (issue 12)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, false, not_, select, tuple_, update
from sqlalchemy.orm import load_only, undefer

from app.db.models import BenchmarkVersion, EvaluationSession, IrtFit, Job
from app.db.repositories.base import Repository
from app.enums import TERMINAL_STATUSES

LISTED = (
    EvaluationSession.id,
    EvaluationSession.model_name,
    EvaluationSession.baseline_name,
    EvaluationSession.goal,
    EvaluationSession.policy,
    EvaluationSession.estimand,
    EvaluationSession.state,
    EvaluationSession.decision,
    EvaluationSession.items_used,
    EvaluationSession.n_items,
    EvaluationSession.created_at,
    EvaluationSession.updated_at,
)


class EvaluationSessionRepository(Repository[EvaluationSession]):
    model = EvaluationSession

    def get_locked(self, id_: uuid.UUID) -> EvaluationSession | None:
        """``SELECT … FOR UPDATE`` (Postgres), refreshing a copy already in the session.

        A ``select`` rather than ``Session.get(with_for_update=True)``: the latter compares the
        row's version counter with a copy read earlier in this session and raises when another
        request applied a batch in between (a retry racing the original, across processes),
        where the caller must see the newer row and answer it as a replay.
        """
        self._lock_sqlite(id_)
        stmt = (
            select(EvaluationSession)
            .where(EvaluationSession.id == id_)
            .with_for_update()
            .options(undefer(EvaluationSession.engine_state))
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).first()

    def _lock_sqlite(self, id_: uuid.UUID) -> None:
        """SQLite has no row locks, and pysqlite opens a transaction only at the first write:
        two requests could both read the row before either writes. A write that changes nothing
        (``step = step``, ``updated_at`` kept) takes the database's write lock first, so a
        second request waits (``busy_timeout``) for the first one's commit and then reads it."""
        if self.session.get_bind().dialect.name != "sqlite":
            return
        stmt = (
            update(EvaluationSession)
            .where(EvaluationSession.id == id_)
            .values(step=EvaluationSession.step, updated_at=EvaluationSession.updated_at)
            .execution_options(synchronize_session=False)
        )
        self.session.execute(stmt)

    def page(
        self,
        version_id: uuid.UUID,
        *,
        limit: int,
        before: tuple[datetime, uuid.UUID] | None = None,
        model: str | None = None,
        state: str | None = None,
        idle: bool | None = None,
        idle_before: datetime | None = None,
    ) -> Sequence[EvaluationSession]:
        """A version's sessions, newest first, keyset-paginated on ``(created_at, id)``, without
        their order, values or engine state. ``state``: the stored state; ``idle``: only the
        open sessions last active before ``idle_before`` (True) or all others (False)."""
        s = EvaluationSession
        stmt = select(s).where(s.benchmark_version_id == version_id).options(load_only(*LISTED))
        if model is not None:
            stmt = stmt.where(s.model_name == model)
        if state is not None:
            stmt = stmt.where(s.state == state)
        if idle is not None:
            idle_row = (
                and_(s.state == "open", s.updated_at < idle_before)
                if idle_before is not None
                else false()
            )
            stmt = stmt.where(idle_row if idle else not_(idle_row))
        if before is not None:
            stmt = stmt.where(tuple_(s.created_at, s.id) < before)
        stmt = stmt.order_by(s.created_at.desc(), s.id.desc()).limit(limit)
        return self.session.scalars(stmt).all()

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
