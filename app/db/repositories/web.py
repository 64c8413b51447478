"""SQL for browser sessions and shared server secrets."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.db.models.web import BrowserSession, ServerSecret
from app.db.repositories.base import Repository


class BrowserSessionRepository(Repository[BrowserSession]):
    model = BrowserSession

    def get_by_hash(self, token_hash: str) -> BrowserSession | None:
        stmt = select(BrowserSession).where(BrowserSession.token_hash == token_hash)
        return self.session.scalars(stmt).first()

    def secret(self, name: str) -> str | None:
        return self.session.scalar(select(ServerSecret.value).where(ServerSecret.name == name))

    def insert_secret_if_absent(self, row: ServerSecret) -> str:
        """Store ``row`` unless another process stored that name first; the stored value."""
        try:
            with self.session.begin_nested():
                self.session.add(row)
        except IntegrityError:
            pass
        value = self.secret(row.name)
        assert value is not None
        return value
