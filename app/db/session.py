"""Engine and session factory; an after-commit hook list for work that must follow a commit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings

AFTER_COMMIT_KEY = "benchslice.after_commit"


def make_engine(settings: Settings) -> Engine:
    url = settings.database_url
    kwargs: dict[str, Any] = {"echo": settings.database_echo, "pool_pre_ping": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    elif url.startswith("postgresql"):
        # Bounded waits: an unreachable or stuck database becomes a 503, never a hung request.
        connect_args: dict[str, Any] = {"connect_timeout": settings.database_connect_timeout}
        if settings.database_statement_timeout:
            connect_args["options"] = f"-c statement_timeout={settings.database_statement_timeout}"
        kwargs.update(
            connect_args=connect_args,
            pool_size=settings.database_pool_size,
            max_overflow=settings.database_max_overflow,
            pool_timeout=settings.database_pool_timeout,
        )
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")  # API and worker processes share the file
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def ping(engine: Engine) -> None:
    """One round trip on a fresh pooled connection (raises when the database is unreachable)."""
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)


def after_commit(session: Session, callback: Callable[[], None]) -> None:
    """Run ``callback`` once the request's transaction has committed (dropped on rollback)."""
    session.info.setdefault(AFTER_COMMIT_KEY, []).append(callback)


def pop_after_commit(session: Session) -> list[Callable[[], None]]:
    return session.info.pop(AFTER_COMMIT_KEY, [])
