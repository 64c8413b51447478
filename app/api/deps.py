"""Typed request dependencies. The session dependency owns the transaction:
commit on success (then run after-commit hooks such as enqueueing), rollback on error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.db.session import pop_after_commit
from app.settings import Settings


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def get_celery(request: Request) -> Celery:
    return request.app.state.celery


def open_session(request: Request) -> Iterator[Session]:
    """Source of sessions (tests override this to hand in a rolled-back session)."""
    session = request.app.state.sessionmaker()
    try:
        yield session
    finally:
        session.close()


def get_session(session: Annotated[Session, Depends(open_session)]) -> Iterator[Session]:
    try:
        yield session
    except BaseException:
        session.rollback()
        pop_after_commit(session)
        raise
    session.commit()
    for callback in pop_after_commit(session):
        callback()


# scope="function": commit (and enqueue) happen before the response is sent, so a client that
# follows Location always finds the row, and an enqueue failure can still become a 503.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
CeleryDep = Annotated[Celery, Depends(get_celery)]
