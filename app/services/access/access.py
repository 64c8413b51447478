"""Who may do what on a project: the checks every route runs on the project that owns its target.

* read: a ``read`` role (or higher) on the project, or the project is public-read. A target the
  caller may not read is reported exactly as a missing one (404: no existence leak).
* write/admin: that role on the project; otherwise 403 naming the project (benchmark names are
  unique instance-wide, so a project's names are not secret: creating one would tell anyway).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.db.models.access import Project
from app.db.repositories.access import ProjectRepository
from app.errors import DomainError, Forbidden
from app.services.access.keys import Principal
from app.services.platform.caller import touch_project


def can_read(principal: Principal, project: Project) -> bool:
    return bool(project.public_read) or principal.has(project.id, "read")


def check_read(
    principal: Principal, project: Project, not_found: Callable[[], DomainError]
) -> None:
    """Raise ``not_found()`` (the error a missing target gives) unless the caller may read."""
    if not can_read(principal, project):
        raise not_found()
    touch_project(project.id)


def check_role(principal: Principal, project: Project, role: str) -> None:
    """403 naming the project unless the caller holds ``role`` on it."""
    if not principal.has(project.id, role):
        raise Forbidden(f"this API key lacks the {role!r} role on project {project.name!r}")
    touch_project(project.id)


@dataclass(frozen=True)
class Visibility:
    """Which projects a listing may show: every one, or these ids plus the public-read ones."""

    everything: bool
    project_ids: frozenset[uuid.UUID]


def visibility(principal: Principal) -> Visibility:
    return Visibility(
        everything=principal.instance_admin,
        project_ids=frozenset(principal.projects_with("read")),
    )


def readable_projects(session: Session, principal: Principal) -> list[Project]:
    """Every project the key may read (all of them for an instance admin), by name."""
    return [p for p in ProjectRepository(session).all() if can_read(principal, p)]
