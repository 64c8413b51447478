"""The audit trail of writes (project admins: their projects; instance admins: everything)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import AdminPrincipal, ReadPrincipal, SessionDep
from app.api.errors import INVALID, NOT_FOUND
from app.api.responses import AUTH
from app.schemas.audit import AuditEventPublic, AuditPage, ProjectList, ProjectPublic
from app.schemas.benchmarks import NO_NUL
from app.services.access import audit as service
from app.services.access.access import readable_projects

router = APIRouter(tags=["audit"])


@router.get(
    "/audit",
    response_model=AuditPage,
    responses={**INVALID, **NOT_FOUND, **AUTH},
    name="list_audit_events",
)
def list_audit_events(
    session: SessionDep,
    principal: AdminPrincipal,
    project: Annotated[str | None, Query(max_length=100, pattern=NO_NUL)] = None,
    benchmark_id: Annotated[
        uuid.UUID | None, Query(description="The benchmark's id (`benchmark_id` of a version)")
    ] = None,
    key_id: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
    action: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
    since: Annotated[datetime | None, Query(description="Written at or after (ISO 8601)")] = None,
    until: Annotated[datetime | None, Query(description="Written before (ISO 8601)")] = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> AuditPage:
    """Writes, newest first: who (key id and name), project, action, target, request id and
    what changed. Needs `admin` on the project (every project for an instance admin)."""
    rows, next_cursor = service.page(
        session,
        principal,
        project=project,
        benchmark_id=benchmark_id,
        key_id=key_id,
        action=action,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
    return AuditPage(
        items=[AuditEventPublic.model_validate(r) for r in rows], next_cursor=next_cursor
    )


@router.get("/projects", response_model=ProjectList, responses={**AUTH}, name="list_projects")
def list_projects(session: SessionDep, principal: ReadPrincipal) -> ProjectList:
    """The projects this key may read (its roles and the public-read ones), with its role."""
    return ProjectList(
        items=[
            ProjectPublic(
                name=p.name,
                public_read=p.public_read,
                role=principal.role_on(p.id),
                created_at=p.created_at,
            )
            for p in readable_projects(session, principal)
        ]
    )
