"""Release gates (issue 34)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import select, tuple_, update
from sqlalchemy.orm import load_only, undefer

from app.db.models import Gate
from app.db.repositories.base import Repository

LISTED = (
    Gate.id,
    Gate.project_id,
    Gate.model_name,
    Gate.rule,
    Gate.state,
    Gate.outcome,
    Gate.benchmarks,
    Gate.items_used,
    Gate.items_total,
    Gate.created_at,
    Gate.updated_at,
)


class GateRepository(Repository[Gate]):
    model = Gate

    def get_locked(self, id_: uuid.UUID) -> Gate | None:
        """``SELECT … FOR UPDATE`` with the packed state, refreshing a copy already loaded (as
        :meth:`app.db.repositories.sessions.EvaluationSessionRepository.get_locked`: a retry
        racing the original must see the newer row and answer it as a replay)."""
        if self.session.get_bind().dialect.name == "sqlite":  # no row locks: take the write lock
            self.session.execute(
                update(Gate)
                .where(Gate.id == id_)
                .values(step=Gate.step, updated_at=Gate.updated_at)
                .execution_options(synchronize_session=False)
            )
        stmt = (
            select(Gate)
            .where(Gate.id == id_)
            .with_for_update()
            .options(undefer(Gate.engine_state), undefer(Gate.values))
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).first()

    def model_name(self, id_: uuid.UUID) -> str | None:
        return self.session.scalars(select(Gate.model_name).where(Gate.id == id_)).first()

    def page(
        self,
        project_ids: Collection[uuid.UUID] | None,
        *,
        limit: int,
        before: tuple[datetime, uuid.UUID] | None = None,
        model: str | None = None,
        outcome: str | None = None,
    ) -> Sequence[Gate]:
        """Gates newest first, keyset-paginated on ``(created_at, id)``, without their packed
        columns; ``project_ids``: only these projects' (None: every project)."""
        stmt = select(Gate).options(load_only(*LISTED))
        if project_ids is not None:
            stmt = stmt.where(Gate.project_id.in_(list(project_ids)))
        if model is not None:
            stmt = stmt.where(Gate.model_name == model)
        if outcome is not None:
            stmt = stmt.where(Gate.outcome == outcome)
        if before is not None:
            stmt = stmt.where(tuple_(Gate.created_at, Gate.id) < before)
        stmt = stmt.order_by(Gate.created_at.desc(), Gate.id.desc()).limit(limit)
        return self.session.scalars(stmt).all()
