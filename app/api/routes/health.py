from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.errors import UNAVAILABLE, problem_response
from app.schemas.common import HealthPublic, ReadinessPublic
from app.services.platform import health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthPublic, name="healthz")
async def healthz(request: Request) -> HealthPublic:
    """The process is alive; ``saturated`` when all its admission places are taken."""
    admission = getattr(request.app.state, "admission", None)
    if admission is None:
        return HealthPublic()
    counts = admission.saturation()
    return HealthPublic(status="saturated" if counts["saturated"] else "ok", **counts)


@router.get("/readyz", response_model=ReadinessPublic, responses={**UNAVAILABLE}, name="readyz")
def readyz(request: Request) -> ReadinessPublic | JSONResponse:
    """The database and the message broker are reachable."""
    state = request.app.state
    ready = health.readiness(
        state.engine, state.celery, timeout=state.settings.broker_publish_timeout
    )
    if ready.status == "ok":
        return ready
    failing = ", ".join(f"{name}: {c.detail}" for name, c in ready.checks.items() if not c.ok)
    return problem_response(
        request,
        503,
        title="Not ready",
        type_slug="not-ready",
        detail=failing,
        headers={"Retry-After": "5"},
    )
