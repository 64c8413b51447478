from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app.api.errors import UNAVAILABLE, problem_response
from app.schemas.common import CheckPublic, HealthPublic, ReadinessPublic

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthPublic, name="healthz")
def healthz() -> HealthPublic:
    """The process is alive."""
    return HealthPublic()


@router.get("/readyz", response_model=ReadinessPublic, responses={**UNAVAILABLE}, name="readyz")
def readyz(request: Request) -> ReadinessPublic | JSONResponse:
    """The database and the message broker are reachable."""
    checks = {"database": _check_database(request), "broker": _check_broker(request)}
    if all(c.ok for c in checks.values()):
        return ReadinessPublic(status="ok", checks=checks)
    failing = ", ".join(f"{name}: {c.detail}" for name, c in checks.items() if not c.ok)
    return problem_response(
        request,
        503,
        title="Not ready",
        type_slug="not-ready",
        detail=failing,
        headers={"Retry-After": "5"},
    )


def _check_database(request: Request) -> CheckPublic:
    try:
        with request.app.state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return CheckPublic(ok=False, detail=type(exc).__name__)
    return CheckPublic(ok=True)


def _check_broker(request: Request) -> CheckPublic:
    celery_app = request.app.state.celery
    timeout = request.app.state.settings.broker_publish_timeout
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        return CheckPublic(ok=False, detail=type(exc).__name__)
    return CheckPublic(ok=True)
