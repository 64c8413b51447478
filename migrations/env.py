"""Alembic environment: URL from Settings (or a connection handed in via config.attributes)."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from app.db.models import Base
from app.settings import Settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return config.attributes.get("database_url") or Settings().database_url


def _configure(**kwargs: object) -> None:
    url = str(kwargs.get("url") or "")
    connection = kwargs.get("connection")
    is_sqlite = (
        url.startswith("sqlite") if connection is None else connection.dialect.name == "sqlite"
    )  # type: ignore[attr-defined]
    context.configure(
        target_metadata=target_metadata, render_as_batch=is_sqlite, compare_type=True, **kwargs
    )


def run_migrations_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    settings = Settings()
    settings.ensure_local_dirs()
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
