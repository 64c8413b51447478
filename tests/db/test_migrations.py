from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from app.db import migrate
from app.db.models import Base
from tests.conftest import ADMIN_DATABASE_URL, TEST_DATABASE_NAME


def _drift(url: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(ctx, Base.metadata)
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.fixture
def scratch_postgres_url() -> Iterator[str]:
    name = f"{TEST_DATABASE_NAME}_mig"
    admin = create_engine(ADMIN_DATABASE_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield ADMIN_DATABASE_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_postgres_upgrade_downgrade_upgrade_without_drift(scratch_postgres_url: str) -> None:
    migrate.upgrade(scratch_postgres_url)
    assert "jobs" in _tables(scratch_postgres_url)
    migrate.downgrade(scratch_postgres_url, "base")
    assert _tables(scratch_postgres_url) <= {"alembic_version"}
    migrate.upgrade(scratch_postgres_url)
    assert _drift(scratch_postgres_url) == []


def test_sqlite_upgrade_downgrade_upgrade_without_drift(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.sqlite3'}"
    migrate.upgrade(url)
    migrate.downgrade(url, "base")
    assert _tables(url) <= {"alembic_version"}
    migrate.upgrade(url)
    assert {"jobs", "alembic_version"} <= _tables(url)
    assert _drift(url) == []


def test_migration_files_use_date_slug_names() -> None:
    versions = Path(migrate.alembic_config().get_main_option("script_location")) / "versions"
    names = sorted(p.name for p in versions.glob("*.py"))
    assert names, "no migrations"
    for name in names:
        assert name[:4].isdigit() and name[4] == "_" and "-" in name, name
