"""SQL for API keys and idempotency records."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from app.db.models.access import ApiKey, IdempotencyKey
from app.db.repositories.base import Repository


class ApiKeyRepository(Repository[ApiKey]):
    model = ApiKey

    def get_by_prefix(self, prefix: str) -> ApiKey | None:
        return self.session.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).first()

    def all(self) -> Sequence[ApiKey]:
        return self.session.scalars(select(ApiKey).order_by(ApiKey.created_at)).all()


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
