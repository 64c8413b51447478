"""Which project owns a target: a benchmark version, or a subset, session, analysis or job
addressed by its id (through the benchmark version it was built on).

Each ``*_owner`` returns ``(version or None, project)`` and raises exactly the ``NotFound``
the target's own endpoint raises when it does not exist, so a caller that may not read the
project can be given the same answer (no existence leak).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import BenchmarkVersion, Project
from app.db.repositories import JobRepository
from app.db.repositories.analyses import AnalysisRepository
from app.db.repositories.benchmarks import BenchmarkVersionRepository
from app.db.repositories.gates import GateRepository
from app.db.repositories.sessions import EvaluationSessionRepository
from app.db.repositories.subsets import SubsetRepository
from app.errors import NotFound
from app.services.access import audit
from app.services.access.access import can_read, check_read, check_role
from app.services.access.audit import Actor
from app.services.access.keys import Principal
from app.services.access.projects import default_project
from app.services.catalog.benchmark_refs import missing, owner_project, resolve_version

# the params key naming a job's benchmark version, by kind family (older irt jobs: benchmark_id)
_JOB_VERSION_KEYS = ("benchmark_version_id", "version_id", "benchmark_id")


def version_project(version: BenchmarkVersion) -> Project:
    return version.benchmark.project


def _version(session: Session, version_id: uuid.UUID | str | None) -> BenchmarkVersion | None:
    try:
        vid = uuid.UUID(str(version_id))
    except ValueError:
        return None
    return BenchmarkVersionRepository(session).get(vid)


# a short subset id: 6-63 hex digits (selection.subsets.MIN_ID_PREFIX; catalog cannot import it)
_SHORT_ID = re.compile(r"^[0-9a-f]{6,63}$")


def subset_not_found(subset_id: str) -> NotFound:
    """The words the subset routes use for a missing id (a short one: a prefix)."""
    if _SHORT_ID.match(subset_id):
        return NotFound(f"no subset id starts with {subset_id}")
    return NotFound(f"subset {subset_id} does not exist")


class AmbiguousTarget(Exception):
    """A short id that starts several targets' ids: the target's own route answers it (422)."""


def _owner(
    session: Session, row, missing: Callable[[], Exception]
) -> tuple[BenchmarkVersion, Project]:
    """The version and project that own ``row`` (anything with a ``benchmark_version_id``);
    ``missing()`` is raised when the row or its version does not exist."""
    version = _version(session, row.benchmark_version_id) if row is not None else None
    if version is None:
        raise missing()
    return version, version_project(version)


def subset_owner(session: Session, subset_id: str) -> tuple[BenchmarkVersion, Project]:
    """Also for a short id (a unique prefix of the id, as the CLI and pages show it)."""
    repo = SubsetRepository(session)
    row = repo.get(subset_id) if "\x00" not in subset_id else None
    if row is None and _SHORT_ID.match(subset_id):
        found = repo.ids_starting(subset_id, 2)
        if len(found) > 1:
            raise AmbiguousTarget(subset_id)
        row = repo.get(found[0]) if found else None
    return _owner(session, row, lambda: subset_not_found(subset_id))


def session_not_found(session_id: uuid.UUID) -> NotFound:
    return NotFound(f"evaluation session {session_id} does not exist")


def session_owner(session: Session, session_id: uuid.UUID) -> tuple[BenchmarkVersion, Project]:
    row = EvaluationSessionRepository(session).get(session_id)
    return _owner(session, row, lambda: session_not_found(session_id))


def analysis_not_found(analysis_id: uuid.UUID) -> NotFound:
    return NotFound(f"analysis {analysis_id} does not exist")


def analysis_owner(session: Session, analysis_id: uuid.UUID) -> tuple[BenchmarkVersion, Project]:
    row = AnalysisRepository(session).get(analysis_id)
    return _owner(session, row, lambda: analysis_not_found(analysis_id))


def gate_not_found(gate_id: uuid.UUID | str) -> NotFound:
    return NotFound(f"gate {gate_id} does not exist")


def gate_owner(session: Session, gate_id: uuid.UUID | str) -> tuple[BenchmarkVersion, Project]:
    """A gate's first benchmark version (its audit rows name it) and the gate's own project."""
    try:
        gid = uuid.UUID(str(gate_id))
    except ValueError:
        raise gate_not_found(gate_id) from None
    row = GateRepository(session).get(gid)
    version = _version(session, row.benchmarks[0]["version_id"]) if row is not None else None
    project = session.get(Project, row.project_id) if row is not None else None
    if version is None or project is None:
        raise gate_not_found(gate_id)
    return version, project


def job_params_version(session: Session, params: dict[str, Any]) -> BenchmarkVersion | None:
    """The benchmark version a job's params name, if any (``ping`` names none)."""
    for key in _JOB_VERSION_KEYS:
        if params.get(key):
            return _version(session, params[key])
    return None


def job_not_found(job_id: uuid.UUID) -> NotFound:
    return NotFound(f"job {job_id} does not exist")


def job_owner(session: Session, job_id: uuid.UUID) -> tuple[BenchmarkVersion | None, Project]:
    """A job's version and project; jobs on no benchmark (``ping``) belong to ``default``."""
    job = JobRepository(session).get(job_id)
    if job is None:
        raise job_not_found(job_id)
    version = job_params_version(session, job.params or {})
    return version, version_project(version) if version is not None else default_project(session)


def record_write(
    session: Session,
    actor: Actor,
    action: str,
    version: BenchmarkVersion,
    summary: Mapping[str, Any] | None = None,
    /,
    **target: Any,
) -> None:
    """Append the audit row of a write on ``version`` (its project, benchmark and version in
    the target, plus ``target``'s extra keys)."""
    audit.record(
        session,
        actor,
        action,
        project=version_project(version),
        benchmark_id=version.benchmark_id,
        target={"benchmark": version.benchmark.name, "version": version.version, **target},
        summary=summary,
    )


def record_on(
    session: Session,
    actor: Actor,
    action: str,
    version: BenchmarkVersion | None,
    project: Project,
    summary: Mapping[str, Any] | None = None,
    /,
    **target: Any,
) -> None:
    """:func:`record_write` when the write is on a benchmark version (a session, a subset's
    score, a job on a version: the row names its benchmark, so ``?benchmark_id=`` finds it),
    else a row in ``project``'s trail without one (a ``ping`` job)."""
    if version is not None:
        record_write(session, actor, action, version, summary, **target)
    else:
        audit.record(session, actor, action, project=project, target=target, summary=summary)


def readable_version(session: Session, principal: Principal, ref: str) -> BenchmarkVersion:
    """The version ``ref`` names, when the caller may read its project; otherwise exactly the
    404 a missing benchmark gives (retired versions of hidden benchmarks included)."""
    try:
        version = resolve_version(session, ref)
    except NotFound:
        owner = owner_project(session, ref)
        if owner is not None and not can_read(principal, owner):
            raise missing(ref) from None
        raise
    check_read(principal, version_project(version), lambda: missing(ref))
    return version


def check_readable(
    session: Session, principal: Principal, kind: str, target_id: uuid.UUID | str
) -> Project | None:
    """The project of a subset/session/analysis/job the caller may read (else its 404).

    ``None`` without a check where the target's own route decides: an instance admin may read
    everything (a missing target is the route's 404), and an ambiguous short id is its 422."""
    if principal.instance_admin:
        return None
    owner, not_found = _BY_ID[kind]
    try:
        _, project = owner(session, target_id)
    except AmbiguousTarget:
        return None
    check_read(principal, project, lambda: not_found(target_id))
    return project


def check_writable(
    session: Session, principal: Principal, kind: str, target_id: uuid.UUID | str
) -> Project:
    """The project of a subset/session/job the caller may write (else 403 naming it); an
    ambiguous short id is refused here like a missing one (nothing is written either way)."""
    owner, not_found = _BY_ID[kind]
    try:
        _, project = owner(session, target_id)
    except AmbiguousTarget:
        raise not_found(target_id) from None
    check_role(principal, project, "write")
    return project


_BY_ID: dict[str, tuple[Any, Any]] = {
    "subset": (subset_owner, subset_not_found),
    "session": (session_owner, session_not_found),
    "analysis": (analysis_owner, analysis_not_found),
    "job": (job_owner, job_not_found),
    "gate": (gate_owner, gate_not_found),
}
