"""Run Alembic programmatically (CLI `benchslice migrate`, the launcher, the test suite)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from app.settings import REPO_ROOT


def alembic_config(database_url: str | None = None) -> Config:
    ini = Path.cwd() / "alembic.ini"
    if not ini.exists():
        ini = REPO_ROOT / "alembic.ini"
    config = Config(str(ini))
    config.set_main_option("script_location", str(ini.parent / "migrations"))
    if database_url:
        config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str | None = None, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str | None = None, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)
