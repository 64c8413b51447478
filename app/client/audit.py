"""Client calls on projects and the audit trail."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime

from app.client.transport import Transport
from app.schemas.audit import AuditEventPublic, AuditPage, ProjectList


class AuditOperations(Transport):
    """``/v1/projects`` and ``/v1/audit``."""

    def list_projects(self) -> ProjectList:
        """``GET /v1/projects``: the projects this key may read, with its role on each."""
        return ProjectList.model_validate(self.get_json("/v1/projects"))

    def list_audit_events(
        self,
        *,
        project: str | None = None,
        benchmark_id: str | uuid.UUID | None = None,
        key_id: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> AuditPage:
        """``GET /v1/audit``: writes, newest first (needs ``admin`` on the project)."""
        return AuditPage.model_validate(
            self.get_json(
                "/v1/audit",
                project=project,
                benchmark_id=str(benchmark_id) if benchmark_id else None,
                key_id=key_id,
                action=action,
                since=since.isoformat() if since else None,
                until=until.isoformat() if until else None,
                limit=limit,
                cursor=cursor,
            )
        )

    def iter_audit_events(self, **filters: object) -> Iterator[AuditEventPublic]:
        """Every matching audit row (all pages), newest first."""
        cursor = None
        while True:
            page = self.list_audit_events(**filters, limit=500, cursor=cursor)  # type: ignore[arg-type]
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor
