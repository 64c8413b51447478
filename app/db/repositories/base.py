"""Small generic repository: all SQL lives in repositories, services only call them and flush."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.db.base import Base

M = TypeVar("M", bound=Base)


class Repository(Generic[M]):
    model: type[M]

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, id_: Any, *, for_update: bool = False) -> M | None:
        return self.session.get(self.model, id_, with_for_update=for_update or None)

    def add(self, obj: M, *, flush: bool = True) -> M:
        self.session.add(obj)
        if flush:
            self.session.flush()
        return obj

    def delete(self, obj: M) -> None:
        self.session.delete(obj)
        self.session.flush()

    def select(self) -> Select[tuple[M]]:
        return select(self.model)

    def list(
        self, stmt: Select[tuple[M]] | None = None, *, limit: int | None = None, offset: int = 0
    ) -> Sequence[M]:
        stmt = self.select() if stmt is None else stmt
        if limit is not None:
            stmt = stmt.limit(limit).offset(offset)
        return self.session.scalars(stmt).all()
