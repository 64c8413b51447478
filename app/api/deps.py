"""Typed request dependencies. The session dependency owns the transaction:
commit on success (then run after-commit hooks such as enqueueing), rollback on error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.db.models import BenchmarkVersion
from app.db.session import pop_after_commit
from app.queue import JobQueue
from app.services.catalog.benchmark_refs import resolve_version
from app.services.platform.keys import ANONYMOUS, Principal, authenticate, require
from app.settings import Settings


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def get_job_queue(request: Request) -> JobQueue:
    return request.app.state.job_queue


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
# A dependency written with `yield` that takes SessionDep must itself use scope="function".
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]


# --- authentication: API keys with scopes read < write < admin (issue 5) -----------------------

_bearer = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer bsk_…`")


def get_principal(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller. With ``AUTH_ENABLED=false`` (the local default) everyone is allowed."""
    if not request.app.state.settings.auth_enabled:
        return ANONYMOUS
    return authenticate(session, credentials.credentials if credentials else None)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require_scope(scope: str) -> Callable[[Principal], Principal]:
    """Dependency factory: 401 without a valid key, 403 when the key lacks ``scope``."""

    def dependency(principal: PrincipalDep) -> Principal:
        return require(principal, scope)

    dependency.__name__ = f"require_{scope}"
    return dependency


ReadPrincipal = Annotated[Principal, Depends(require_scope("read"))]
WritePrincipal = Annotated[Principal, Depends(require_scope("write"))]
AdminPrincipal = Annotated[Principal, Depends(require_scope("admin"))]


BenchmarkRef = Annotated[
    str,
    Path(
        min_length=1,
        max_length=220,
        description="A benchmark version id, a benchmark name (its latest version) or `name@vN`",
        examples=["gpqa", "gpqa@v1"],
    ),
]


def get_benchmark_version(
    _: ReadPrincipal, benchmark: BenchmarkRef, session: SessionDep
) -> BenchmarkVersion:
    """The version a ``{benchmark}`` path segment names: a version id, a name or ``name@vN``.

    Authenticated first (read scope, shared with the route's own principal dependency): a caller
    without a key gets 401 whatever the parameter order, never a 404 revealing what exists."""
    return resolve_version(session, benchmark)


BenchmarkVersionDep = Annotated[BenchmarkVersion, Depends(get_benchmark_version)]
