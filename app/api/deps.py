"""Typed request dependencies. The session dependency owns the transaction:
commit on success (then run after-commit hooks such as enqueueing), rollback on error."""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Path, Request
from fastapi._compat import field_annotation_is_sequence
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.api.errors import EXEMPT_STATE
from app.db.models import BenchmarkVersion, Project
from app.db.session import pop_after_commit
from app.errors import FieldIssue, InvalidInput
from app.queue import JobQueue
from app.services.access.access import check_role
from app.services.access.audit import Actor
from app.services.access.keys import ANONYMOUS, Principal, authenticate, require
from app.services.access.projects import default_project
from app.services.catalog import ownership
from app.services.catalog.benchmark_refs import resolve_version
from app.services.catalog.benchmarks import creation_project
from app.services.limits.ratelimit import RATES, quota_units, unit_labels
from app.services.limits.ratelimit import headers as rate_headers
from app.services.platform.caller import CALLER, Caller
from app.settings import Settings


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def get_job_queue(request: Request) -> JobQueue:
    return request.app.state.job_queue


def open_session(request: Request) -> Iterator[Session]:
    """Source of sessions (tests override this to hand in a rolled-back session)."""
    session = request.app.state.sessionmaker()
    try:
        yield session
    finally:
        session.close()


def get_session(session: Annotated[Session, Depends(open_session)]) -> Iterator[Session]:
    try:
        yield session
    except BaseException:
        session.rollback()
        pop_after_commit(session)
        raise
    session.commit()
    for callback in pop_after_commit(session):
        callback()


# scope="function": commit (and enqueue) happen before the response is sent, so a client that
# follows Location always finds the row, and an enqueue failure can still become a 503.
# A dependency written with `yield` that takes SessionDep must itself use scope="function".
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]


# --- authentication: API keys with scopes read < write < admin (issue 5) -----------------------

_bearer = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer bsk_…`")


def get_principal(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller. With ``AUTH_ENABLED=false`` (the local default) everyone is allowed.

    A key not verified before in this process first passes the failure limiter (per key prefix
    and client address, :meth:`~app.services.limits.ratelimit.RateLimits.check_auth_attempt`):
    wrong secrets cannot make the server run argon2 without bound."""
    if not request.app.state.settings.auth_enabled:
        return ANONYMOUS
    address = request.client.host if request.client else "unknown"
    return authenticate(
        session,
        credentials.credentials if credentials else None,
        before_hashing=lambda prefix: RATES.check_auth_attempt(prefix, address),
        after_failure=lambda prefix: RATES.auth_failed(prefix, address),
        for_write=request.method in WRITE_METHODS,
    )


PrincipalDep = Annotated[Principal, Depends(get_principal)]


F = TypeVar("F", bound=Callable[..., Any])


def needs(role: str, where: str) -> Callable[[F], F]:
    """Tag a dependency with the project role it enforces and where the project comes from
    (``any``: some project, before the body is read; ``benchmark``, ``subset``, ... : the
    target's project; ``body``: the project the request names). tests/api/test_write_roles.py
    reads the tags of every write route."""

    def tag(fn: F) -> F:
        fn.project_role = (role, where)  # type: ignore[attr-defined]
        return fn

    return tag


WRITE_COST = 5.0
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def operation_cost(request: Request) -> float:
    """What a request takes from its caller's bucket: 1, or :data:`WRITE_COST` for writes that
    store or queue work (expensive reads pay more only when they compute:
    :mod:`app.services.limits.expensive`)."""
    return WRITE_COST if request.method in WRITE_METHODS else 1.0


async def limited(request: Request, principal: Principal) -> Principal:
    """Charge the request to its caller (429 when short) and name the caller for the rest of
    the request (expensive-work pool, job quotas). Instance admins are exempt."""
    cost = operation_cost(request)
    caller = Caller(
        id=principal.id,
        units=tuple(quota_units(principal)),
        exempt=principal.instance_admin,
        labels=unit_labels(principal),
    )
    # a request on a target (a path parameter names it) charges its target's project's bucket
    # when that project is checked (issue 39: a key with roles on several projects is not
    # refused for another project's empty bucket); a listing or a creation, which names no
    # one target, charges every project the key draws on, as before
    if not request.path_params:
        caller.touched.update(u for u in caller.units if u.startswith("project:"))
    object.__setattr__(
        caller, "on_touch", lambda unit: RATES.charge_units(caller, [unit], cost, "a request")
    )
    if getattr(request.state, "charged", False):  # a route may check two roles: charge once
        return principal
    CALLER.set(caller)
    if caller.exempt:  # the admission layer lets this credential's requests in without a cap
        setattr(request.state, EXEMPT_STATE, True)
    request.state.charged = True
    decision = await run_in_threadpool(RATES.charge, caller, cost, "a request")
    if decision is not None:
        request.state.rate_limit = rate_headers(decision)
    return principal


def require_scope(scope: str) -> Callable[..., Awaitable[Principal]]:
    """Dependency factory: 401 without a valid key, 403 when the key holds ``scope`` on no
    project (checked before the body is read; the target's project is checked after), 429 when
    the key's rate limit is reached."""

    @needs(scope, "any")
    async def dependency(request: Request, principal: PrincipalDep) -> Principal:
        return await limited(request, require(principal, scope))

    dependency.__name__ = f"require_{scope}"
    return dependency


ReadPrincipal = Annotated[Principal, Depends(require_scope("read"))]
WritePrincipal = Annotated[Principal, Depends(require_scope("write"))]
AdminPrincipal = Annotated[Principal, Depends(require_scope("admin"))]

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def get_request_id(request: Request) -> str:
    """The caller's ``X-Request-ID`` when it is a short token, else a new one."""
    given = request.headers.get("x-request-id", "")
    return given if _REQUEST_ID.match(given) else uuid.uuid4().hex


def get_actor(
    principal: PrincipalDep, request_id: Annotated[str, Depends(get_request_id)]
) -> Actor:
    """Who writes, for the audit trail."""
    return Actor(principal=principal, request_id=request_id)


ActorDep = Annotated[Actor, Depends(get_actor)]


BenchmarkRef = Annotated[
    str,
    Path(
        min_length=1,
        max_length=220,
        description="A benchmark version id, a benchmark name (its latest version) or `name@vN`",
        examples=["gpqa", "gpqa@v1"],
    ),
]


@needs("read", "benchmark")
def get_benchmark_version(
    principal: ReadPrincipal, benchmark: BenchmarkRef, session: SessionDep
) -> BenchmarkVersion:
    """The version a ``{benchmark}`` path segment names: a version id, a name or ``name@vN``.

    Authenticated first (read scope, shared with the route's own principal dependency): a caller
    without a key gets 401 whatever the parameter order, never a 404 revealing what exists; a
    benchmark of a project the key may not read is a 404 like a missing one."""
    return ownership.readable_version(session, principal, benchmark)


@needs("write", "benchmark")
def get_writable_version(
    principal: WritePrincipal, benchmark: BenchmarkRef, session: SessionDep
) -> BenchmarkVersion:
    """The ``{benchmark}`` version, when the key holds ``write`` on its project (else 403
    naming the project; 404 when it does not exist)."""
    version = resolve_version(session, benchmark)
    check_role(principal, ownership.version_project(version), "write")
    return version


@needs("admin", "benchmark")
def get_administered_version(
    principal: AdminPrincipal, benchmark: BenchmarkRef, session: SessionDep
) -> BenchmarkVersion:
    """Any ``{benchmark}`` version, retired ones too, when the key is admin of its project."""
    version = resolve_version(session, benchmark, include_retired=True)
    check_role(principal, ownership.version_project(version), "admin")
    return version


BenchmarkVersionDep = Annotated[BenchmarkVersion, Depends(get_benchmark_version)]
WritableVersionDep = Annotated[BenchmarkVersion, Depends(get_writable_version)]
AdministeredVersionDep = Annotated[BenchmarkVersion, Depends(get_administered_version)]


# --- targets addressed by id: the project of the benchmark version they were built on --------


@needs("read", "subset")
async def readable_subset(
    principal: ReadPrincipal, subset_id: str, session: SessionDep
) -> Project | None:
    """An instance admin (everyone, with keys disabled) may read any subset: no lookup, no
    thread hop, so the route's cached rendering is still answered on the event loop. A short
    id is resolved like the route does."""
    if principal.instance_admin:
        return None
    return await run_in_threadpool(
        ownership.check_readable, session, principal, "subset", subset_id
    )


@needs("write", "subset")
def writable_subset(principal: WritePrincipal, subset_id: str, session: SessionDep) -> Project:
    return ownership.check_writable(session, principal, "subset", subset_id)


@needs("read", "session")
def readable_session(
    principal: ReadPrincipal, session_id: uuid.UUID, session: SessionDep
) -> Project | None:
    return ownership.check_readable(session, principal, "session", session_id)


@needs("write", "session")
def writable_session(
    principal: WritePrincipal, session_id: uuid.UUID, session: SessionDep
) -> Project:
    return ownership.check_writable(session, principal, "session", session_id)


@needs("read", "analysis")
def readable_analysis(
    principal: ReadPrincipal, analysis_id: uuid.UUID, session: SessionDep
) -> Project | None:
    return ownership.check_readable(session, principal, "analysis", analysis_id)


@needs("read", "job")
def readable_job(
    principal: ReadPrincipal, job_id: uuid.UUID, session: SessionDep
) -> Project | None:
    return ownership.check_readable(session, principal, "job", job_id)


@needs("write", "job")
def writable_job(principal: WritePrincipal, job_id: uuid.UUID, session: SessionDep) -> Project:
    return ownership.check_writable(session, principal, "job", job_id)


@needs("read", "gate")
def readable_gate(
    principal: ReadPrincipal, gate_id: uuid.UUID, session: SessionDep
) -> Project | None:
    return ownership.check_readable(session, principal, "gate", gate_id)


@needs("write", "gate")
def writable_gate(principal: WritePrincipal, gate_id: uuid.UUID, session: SessionDep) -> Project:
    return ownership.check_writable(session, principal, "gate", gate_id)


ReadableSubset = Annotated[Project | None, Depends(readable_subset)]
WritableSubset = Annotated[Project, Depends(writable_subset)]
ReadableSession = Annotated[Project | None, Depends(readable_session)]
WritableSession = Annotated[Project, Depends(writable_session)]
ReadableAnalysis = Annotated[Project | None, Depends(readable_analysis)]
ReadableJob = Annotated[Project | None, Depends(readable_job)]
WritableJob = Annotated[Project, Depends(writable_job)]
ReadableGate = Annotated[Project | None, Depends(readable_gate)]
WritableGate = Annotated[Project, Depends(writable_gate)]


class ProjectChooser:
    """Picks and checks the project a new benchmark version (or job) is created in."""

    def __init__(self, session: Session, principal: Principal) -> None:
        self.session = session
        self.principal = principal

    def for_benchmark(self, name: str, requested: str | None) -> Project:
        return creation_project(self.session, self.principal, name, requested)

    def for_job(self, params: dict[str, Any]) -> Project:
        version = ownership.job_params_version(self.session, params)
        project = (
            ownership.version_project(version)
            if version is not None
            else default_project(self.session)
        )
        check_role(self.principal, project, "write")
        return project


@needs("write", "body")
def get_project_chooser(principal: WritePrincipal, session: SessionDep) -> ProjectChooser:
    return ProjectChooser(session, principal)


ProjectChooserDep = Annotated[ProjectChooser, Depends(get_project_chooser)]


@needs("write", "body")
def gate_creator(principal: WritePrincipal) -> Principal:
    """A gate belongs to its first benchmark's project: the service checks ``write`` there once
    it has resolved the body's benchmarks (and ``read`` on the others)."""
    return principal


GateCreator = Annotated[Principal, Depends(gate_creator)]


def _scalar_query_params(request: Request) -> set[str]:
    """Names of the matched route's query parameters that take one value."""
    route = request.scope.get("route")
    found = getattr(route, "_scalar_query_params", None)
    if found is None:
        found = set()
        todo = [getattr(route, "dependant", None)]
        while todo:
            current = todo.pop()
            if current is None:
                continue
            for param in current.query_params:
                if not field_annotation_is_sequence(param.field_info.annotation):
                    found.add(param.alias)
            todo.extend(current.dependencies)
        if route is not None:
            route._scalar_query_params = found  # type: ignore[attr-defined]
    return found


def _bool_query_params(request: Request) -> set[str]:
    """Names of the matched route's boolean query parameters."""
    route = request.scope.get("route")
    found = getattr(route, "_bool_query_params", None)
    if found is None:
        found = set()
        todo = [getattr(route, "dependant", None)]
        while todo:
            current = todo.pop()
            if current is None:
                continue
            for param in current.query_params:
                if param.field_info.annotation in (bool, bool | None):
                    found.add(param.alias)
            todo.extend(current.dependencies)
        if route is not None:
            route._bool_query_params = found  # type: ignore[attr-defined]
    return found


# what a boolean query parameter may say (pydantic alone also takes yes/no/on/off/y/n/t/f)
BOOLEAN_WORDS = frozenset({"true", "false", "1", "0"})


def single_valued_query(request: Request) -> None:
    """A one-value query parameter given twice (``?models=a&models=b``) is a 422 naming it,
    not silently the last value; a boolean one is ``true``/``false`` (or ``1``/``0``), and
    ``?replace=yes`` a 422 naming it (issue 39). An app-wide dependency."""
    if request.query_params:
        flags = _bool_query_params(request)
        wrong = sorted(
            {
                k
                for k, v in request.query_params.multi_items()
                if k in flags and v.strip().lower() not in BOOLEAN_WORDS
            }
        )
        if wrong:
            raise InvalidInput(
                f"query parameter(s) {', '.join(wrong)}: expected true or false",
                errors=[
                    FieldIssue((name,), "expected true or false", location="query")
                    for name in wrong
                ],
            )
    keys = [k for k, _ in request.query_params.multi_items()]
    if len(keys) == len(set(keys)):
        return
    scalar = _scalar_query_params(request)
    repeated = sorted({k for k in keys if keys.count(k) > 1 and k in scalar})
    if repeated:
        raise InvalidInput(
            f"query parameter(s) {', '.join(repeated)} given more than once",
            errors=[
                FieldIssue((name,), "give it once (for several values, comma-separate them)")
                for name in repeated
            ],
        )
