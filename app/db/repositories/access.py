"""SQL for projects, API keys and idempotency records."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import joinedload

from app.db.models.access import ApiKey, AuditEvent, IdempotencyKey, KeyRole, Project
from app.db.models.benchmark import Benchmark
from app.db.repositories.base import Repository


class ApiKeyRepository(Repository[ApiKey]):
    model = ApiKey

    def get_by_prefix(self, prefix: str, *, share_lock: bool = False) -> ApiKey | None:
        """The key with its roles and their projects in one query (every authenticated
        request asks: one round trip, not two). ``share_lock``: ``FOR KEY SHARE OF api_keys``
        until the transaction ends (a write request: :meth:`lock_for_change`, which a
        revocation or rotation takes, waits for it; recording last use does not)."""
        stmt = select(ApiKey).options(joinedload(ApiKey.roles)).where(ApiKey.prefix == prefix)
        if share_lock:
            stmt = stmt.with_for_update(read=True, key_share=True, of=ApiKey)
        return self.session.scalars(stmt).unique().first()

    def all(self) -> Sequence[ApiKey]:
        return self.session.scalars(select(ApiKey).order_by(ApiKey.created_at)).all()

    def lock_if_free(self, key_id: uuid.UUID) -> bool:
        """Lock the key's row for this transaction unless another transaction holds it (then
        False at once: ``FOR UPDATE SKIP LOCKED`` on Postgres; SQLite has one writer)."""
        stmt = (
            select(ApiKey.id)
            .where(ApiKey.id == key_id)
            .with_for_update(skip_locked=True, key_share=True)  # FOR NO KEY UPDATE
        )
        return self.session.execute(stmt).first() is not None

    def lock_for_change(self, key_id: uuid.UUID) -> None:
        """``FOR UPDATE`` on the key's row: waits for the key's in-flight write requests (their
        ``FOR KEY SHARE``), so a revocation or rotation is ordered after them."""
        self.session.execute(select(ApiKey.id).where(ApiKey.id == key_id).with_for_update())


class IdempotencyKeyRepository(Repository[IdempotencyKey]):
    model = IdempotencyKey

    def get_for(self, principal: str, key: str) -> IdempotencyKey | None:
        stmt = select(IdempotencyKey).where(
            IdempotencyKey.principal == principal, IdempotencyKey.key == key
        )
        return self.session.scalars(stmt).first()

    def delete_for_resource(self, resource: str) -> None:
        self.session.execute(
            delete(IdempotencyKey)
            .where(IdempotencyKey.resource == resource)
            .execution_options(synchronize_session="fetch")
        )


class ProjectRepository(Repository[Project]):
    model = Project

    def get_by_name(self, name: str) -> Project | None:
        return self.session.scalars(select(Project).where(Project.name == name)).first()

    def all(self) -> Sequence[Project]:
        return self.session.scalars(select(Project).order_by(Project.name)).all()

    def usage(self) -> dict[uuid.UUID, tuple[int, int]]:
        benchmarks = dict(
            self.session.execute(
                select(Benchmark.project_id, func.count()).group_by(Benchmark.project_id)
            ).all()
        )
        keys = dict(
            self.session.execute(
                select(KeyRole.project_id, func.count()).group_by(KeyRole.project_id)
            ).all()
        )
        return {p: (int(benchmarks.get(p, 0)), int(keys.get(p, 0))) for p in benchmarks | keys}

    def add_if_missing(self, name: str) -> Project:
        """Insert the project unless a concurrent transaction did (then return theirs)."""
        try:
            with self.session.begin_nested():
                self.session.add(Project(name=name, public_read=False))
        except IntegrityError:
            pass
        found = self.get_by_name(name)
        assert found is not None
        return found


@dataclass(frozen=True)
class AuditFilter:
    """``project_ids`` None: every project (an instance admin's view)."""

    project_ids: frozenset[uuid.UUID] | None = None
    benchmark_id: uuid.UUID | None = None
    key_id: str | None = None
    action: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    before_id: int | None = None


class AuditRepository(Repository[AuditEvent]):
    model = AuditEvent

    def page(self, where: AuditFilter, *, limit: int) -> Sequence[AuditEvent]:
        """Newest first (by id: the order rows were appended)."""
        stmt = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
        if where.project_ids is not None:
            stmt = stmt.where(AuditEvent.project_id.in_(list(where.project_ids)))
        if where.benchmark_id is not None:
            stmt = stmt.where(AuditEvent.benchmark_id == where.benchmark_id)
        if where.key_id is not None:
            stmt = stmt.where(AuditEvent.key_id == where.key_id)
        if where.action is not None:
            stmt = stmt.where(AuditEvent.action == where.action)
        if where.since is not None:
            stmt = stmt.where(AuditEvent.at >= where.since)
        if where.until is not None:
            stmt = stmt.where(AuditEvent.at < where.until)
        if where.before_id is not None:
            stmt = stmt.where(AuditEvent.id < where.before_id)
        return self.session.scalars(stmt).all()

    def count(self) -> int:
        return int(self.session.scalar(select(func.count()).select_from(AuditEvent)) or 0)
