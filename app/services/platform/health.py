"""Readiness: is the database reachable, can the broker take a task."""

from __future__ import annotations

from celery import Celery
from sqlalchemy import Engine

from app.db.session import ping
from app.schemas.common import CheckPublic, ReadinessPublic


def check_database(engine: Engine) -> CheckPublic:
    try:
        ping(engine)
    except Exception as exc:  # any failure means not ready; the class name says which
        return CheckPublic(ok=False, detail=type(exc).__name__)
    return CheckPublic(ok=True)


def check_broker(celery_app: Celery, timeout: float) -> CheckPublic:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        return CheckPublic(ok=False, detail=type(exc).__name__)
    return CheckPublic(ok=True)


def readiness(engine: Engine, celery_app: Celery, *, timeout: float) -> ReadinessPublic:
    """Both probes; ``status`` is ``ok`` only when every check passes."""
    checks = {"database": check_database(engine), "broker": check_broker(celery_app, timeout)}
    ok = all(c.ok for c in checks.values())
    return ReadinessPublic(status="ok" if ok else "unavailable", checks=checks)
