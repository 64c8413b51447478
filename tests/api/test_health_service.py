"""Readiness probes live in a service (routes hold no SQL): real database and broker, up and down."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from app.db.session import make_engine
from app.settings import Settings
from worker.celery_app import make_celery

ROUTES = Path(__file__).resolve().parents[2] / "app" / "api" / "routes"


def test_readiness_with_real_database_and_broker(
    engine: Engine, settings: Settings, redis_isolation: str
) -> None:
    from app.services.platform import health

    celery_app = make_celery(settings)
    try:
        ready = health.readiness(engine, celery_app, timeout=settings.broker_publish_timeout)
    finally:
        celery_app.close()
    assert ready.status == "ok"
    assert {k: (c.ok, c.detail) for k, c in ready.checks.items()} == {
        "database": (True, None),
        "broker": (True, None),
    }


def test_readiness_names_what_is_down(settings: Settings) -> None:
    from app.services.platform import health

    broken = settings.model_copy(
        update={
            "database_url": "postgresql+psycopg://postgres@127.0.0.1:1/nothing",
            "broker_url": "redis://127.0.0.1:1/0",
        }
    )
    engine, celery_app = make_engine(broken), make_celery(broken)
    try:
        ready = health.readiness(engine, celery_app, timeout=0.5)
    finally:
        celery_app.close()
        engine.dispose()
    assert ready.status == "unavailable"
    assert not ready.checks["database"].ok and ready.checks["database"].detail
    assert not ready.checks["broker"].ok and ready.checks["broker"].detail


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_routes_import_no_sqlalchemy() -> None:
    offenders: dict[str, Any] = {
        p.name: sorted(m for m in _imported_modules(p) if m.split(".")[0] == "sqlalchemy")
        for p in sorted(ROUTES.glob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}
