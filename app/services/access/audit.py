"""The audit trail: one append-only row per write, in the write's own transaction.

A route records its write after the service call succeeded and before the request commits,
so a request that fails (and rolls back) leaves no row, and a committed write always has one.
Idempotent replays write nothing and record nothing. Rows are never updated or deleted by the
service.

Who may read it: an instance admin every row; any other key the rows of the projects where it
holds ``admin``.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.db.models.access import AuditEvent, Project
from app.db.repositories.access import AuditFilter, AuditRepository
from app.errors import Forbidden, InvalidInput
from app.services.access.keys import Principal
from app.services.access.projects import get_by_name

MAX_PAGE = 500


@dataclass(frozen=True)
class Actor:
    """Who writes (the request's principal) and the request id that ties log lines together."""

    principal: Principal
    request_id: str | None = None


def record(
    session: Session,
    actor: Actor,
    action: str,
    *,
    project: Project | None,
    target: Mapping[str, Any],
    benchmark_id: uuid.UUID | None = None,
    summary: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Append one row (flush only: it commits or rolls back with the write it describes)."""
    event = AuditEvent(
        key_id=actor.principal.id,
        key_name=actor.principal.name,
        project_id=project.id if project is not None else None,
        project_name=project.name if project is not None else None,
        action=action,
        benchmark_id=benchmark_id,
        target={k: (str(v) if isinstance(v, uuid.UUID) else v) for k, v in target.items()},
        request_id=actor.request_id,
        summary=dict(summary or {}),
    )
    return AuditRepository(session).add(event)


def _encode(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"audit:{last_id}".encode()).decode().rstrip("=")


def _decode(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind != "audit":
            raise ValueError(kind)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput(
            "invalid cursor", field="cursor", message="not a cursor returned by this API"
        ) from None


def page(
    session: Session,
    principal: Principal,
    *,
    project: str | None = None,
    benchmark_id: uuid.UUID | None = None,
    key_id: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> tuple[list[AuditEvent], str | None]:
    """Rows newest first and the cursor of the next page (None on the last one)."""
    if since is not None and until is not None and since >= until:
        raise InvalidInput("since must be before until", field="since")
    project_ids: frozenset[uuid.UUID] | None = None  # None: every project
    if project is not None:
        row = get_by_name(session, project)
        if not principal.has(row.id, "admin"):
            raise Forbidden(
                f"reading the audit trail of project {project!r} needs its 'admin' role"
            )
        project_ids = frozenset({row.id})
    elif not principal.instance_admin:
        project_ids = frozenset(principal.projects_with("admin"))
        if not project_ids:
            raise Forbidden("reading the audit trail needs the 'admin' role on a project")
    rows = AuditRepository(session).page(
        AuditFilter(
            project_ids=project_ids,
            benchmark_id=benchmark_id,
            key_id=key_id,
            action=action,
            since=since,
            until=until,
            before_id=_decode(cursor) if cursor else None,
        ),
        limit=min(max(1, limit), MAX_PAGE) + 1,
    )
    more = len(rows) > limit
    rows = list(rows[:limit])
    return rows, (_encode(rows[-1].id) if more and rows else None)
