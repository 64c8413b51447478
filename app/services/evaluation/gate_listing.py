"""The listing of release gates (issue 34): every gate of the projects a key may read."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.db.models import Project
from app.db.repositories.access import ProjectRepository
from app.db.repositories.gates import GateRepository
from app.schemas.gates import GatePage, GateSummary
from app.services.access.access import visibility
from app.services.access.keys import Principal
from app.services.platform.pagination import decode_cursor, encode_cursor

MAX_PAGE = 100


def list_gates(
    session: Session,
    principal: Principal,
    *,
    limit: int = 20,
    cursor: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
) -> GatePage:
    """The gates of every project the key may read, newest first (keyset pagination)."""
    seen = visibility(principal)
    ids = None
    if not seen.everything:
        public = {p.id for p in ownership_projects(session) if p.public_read}
        ids = set(seen.project_ids) | public
    before = decode_cursor(cursor) if cursor else None
    limit = max(1, min(limit, MAX_PAGE))
    rows = list(
        GateRepository(session).page(
            ids, limit=limit + 1, before=before, model=model, outcome=outcome
        )
    )
    more = len(rows) > limit
    rows = rows[:limit]
    names = {p.id: p.name for p in ownership_projects(session)}
    return GatePage(
        items=[
            GateSummary(
                id=r.id,
                project=names.get(r.project_id, ""),
                model=r.model_name,
                rule=r.rule,  # type: ignore[arg-type]
                state=r.state,  # type: ignore[arg-type]
                outcome=r.outcome,  # type: ignore[arg-type]
                benchmarks=[b["key"] for b in r.benchmarks],
                items_used=r.items_used,
                items_total=r.items_total,
                created_at=r.created_at,
                updated_at=r.updated_at,
            )
            for r in rows
        ],
        next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None,
    )


def ownership_projects(session: Session) -> list[Project]:
    return list(ProjectRepository(session).all())


__all__ = ["list_gates"]
