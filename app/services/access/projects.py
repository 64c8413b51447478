"""Projects: the unit of ownership. Every benchmark belongs to one; keys get roles on them.

The ``default`` project always exists (created on first use): with keys disabled everything
lives there, and the migration put every earlier benchmark and key role there.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models.access import Project
from app.db.repositories.access import ProjectRepository
from app.errors import Conflict, InvalidInput, NotFound

DEFAULT_PROJECT = "default"
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,99}$"
_NAME = re.compile(NAME_PATTERN)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidInput(
            f"invalid project name {name!r}",
            field="name",
            message="lower-case letters, digits, '.', '_' or '-' (at most 100, first a letter "
            "or digit)",
        )
    return name


def create_project(session: Session, name: str, *, public_read: bool = False) -> Project:
    """A new project (409 when the name is taken)."""
    check_name(name)
    repo = ProjectRepository(session)
    if repo.get_by_name(name) is not None:
        raise Conflict(f"project {name!r} already exists", field="name")
    try:
        return repo.add(Project(name=name, public_read=public_read))
    except IntegrityError:
        raise Conflict(f"project {name!r} is being created concurrently; retry") from None


def get_by_name(session: Session, name: str, *, field: str = "project") -> Project:
    project = ProjectRepository(session).get_by_name(name) if "\x00" not in name else None
    if project is None:
        raise NotFound(f"no project named {name!r}", field=field)
    return project


def default_project(session: Session) -> Project:
    """The ``default`` project, created when missing (a fresh database before any write)."""
    repo = ProjectRepository(session)
    project = repo.get_by_name(DEFAULT_PROJECT)
    if project is None:
        project = repo.add_if_missing(DEFAULT_PROJECT)
    return project


def list_projects(session: Session) -> Sequence[Project]:
    return ProjectRepository(session).all()


def set_public_read(session: Session, project: Project, public_read: bool) -> Project:
    project.public_read = public_read
    session.flush()
    return project


def get_by_id(session: Session, project_id: uuid.UUID) -> Project:
    project = ProjectRepository(session).get(project_id)
    if project is None:
        raise NotFound(f"project {project_id} does not exist", field="project")
    return project


def usage(session: Session) -> dict[uuid.UUID, tuple[int, int]]:
    """``{project id: (benchmarks, keys with a role)}``."""
    return ProjectRepository(session).usage()
