"""THE table of write routes and the project role each needs (issue 25).

Every route of the app that is not a GET/HEAD must be listed here with the role it requires
and where the project comes from; a new write route without an entry fails the test, and so
does an entry whose route no longer checks what the table says. The check reads the tags that
``app.api.deps.needs`` puts on the dependencies a route runs. A behavioural check follows:
for every route on a benchmark path, a key with one role less than the table says is refused
with a 403 naming the project, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import AuditEvent
from tests.api._teams import bearer, key, make_benchmark, seed_results

# (method, path) -> (role, where the project comes from); None: not a write on project data
WRITE_ROUTES: dict[tuple[str, str], tuple[str, str] | None] = {
    ("POST", "/v1/benchmarks"): ("write", "body"),
    ("POST", "/v1/benchmarks/from-samples"): ("write", "body"),
    ("POST", "/v1/benchmarks/{benchmark}/results"): ("write", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/results/matrix"): ("write", "benchmark"),
    ("DELETE", "/v1/benchmarks/{benchmark}/models/{model:path}"): ("write", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/models/{model:path}/restore"): ("write", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/retire"): ("admin", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/unretire"): ("admin", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/subsets"): ("write", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/analyses"): ("write", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/coverage"): ("write", "benchmark"),
    ("POST", "/v1/benchmarks/{benchmark}/sessions"): ("write", "benchmark"),
    ("POST", "/v1/subsets/{subset_id}/scores"): ("write", "subset"),
    ("POST", "/v1/sessions/{session_id}/results"): ("write", "session"),
    ("POST", "/v1/gates"): ("write", "body"),
    ("POST", "/v1/gates/{gate_id}/results"): ("write", "gate"),
    ("POST", "/v1/gates/{gate_id}/results/files"): ("write", "gate"),
    ("POST", "/v1/gates/{gate_id}/abandon"): ("write", "gate"),
    ("POST", "/v1/jobs"): ("write", "body"),
    ("POST", "/v1/jobs/{job_id}/cancel"): ("write", "job"),
    # the browser view's login form: checks a key, writes no project data (issue 26's room)
    ("POST", "/ui/login"): None,
    ("POST", "/ui/logout"): None,
}
_RANK = {"read": 0, "write": 1, "admin": 2}


def _routes(app: Any) -> Iterator[tuple[str, APIRoute]]:
    """``(full path, route)`` of every route, through included routers."""
    for route in app.routes:
        if hasattr(route, "effective_route_contexts"):
            for context in route.effective_route_contexts():
                yield context.path, context.original_route
        elif isinstance(route, APIRoute):
            yield route.path, route


def _tags(dependant: Any) -> set[tuple[str, str]]:
    """The ``project_role`` tags of every dependency a route runs (recursively)."""
    found: set[tuple[str, str]] = set()
    for dep in dependant.dependencies:
        tag = getattr(dep.call, "project_role", None)
        if tag is not None:
            found.add(tag)
        found |= _tags(dep)
    return found


def _required(route: APIRoute) -> tuple[str, str] | None:
    """The strongest project-scoped check of a route (``any`` only filters before the body)."""
    scoped = [t for t in _tags(route.dependant) if t[1] != "any"]
    if not scoped:
        return None
    return max(scoped, key=lambda t: _RANK[t[0]])


def test_every_write_route_has_an_entry_and_checks_its_role(app: Any) -> None:
    writes = {
        (method, path): route
        for path, route in _routes(app)
        if isinstance(route, APIRoute)
        for method in route.methods - {"GET", "HEAD"}
    }
    missing = sorted(set(writes) - set(WRITE_ROUTES))
    assert not missing, f"write routes without an entry in WRITE_ROUTES: {missing}"
    stale = sorted(set(WRITE_ROUTES) - set(writes))
    assert not stale, f"entries without a route: {stale}"
    for endpoint, route in writes.items():
        assert _required(route) == WRITE_ROUTES[endpoint], endpoint
        if WRITE_ROUTES[endpoint] is not None:
            # and the key is checked before the body is read (no key, no upload)
            assert any(t[1] == "any" for t in _tags(route.dependant)), endpoint


def test_the_introspection_sees_a_route_without_a_check(app: Any) -> None:
    """The table test can fail: a write route added without a project check is reported."""
    from fastapi import APIRouter, FastAPI

    router = APIRouter()

    @router.post("/v1/benchmarks/{benchmark}/rename")
    def rename(benchmark: str) -> None:  # pragma: no cover - never called
        return None

    probe = FastAPI()
    probe.include_router(router)
    found = [(m, p, _required(r)) for p, r in _routes(probe) for m in r.methods]
    assert found == [("POST", "/v1/benchmarks/{benchmark}/rename", None)]
    assert ("POST", "/v1/benchmarks/{benchmark}/rename") not in WRITE_ROUTES


@pytest.fixture
def setup(app: Any, client: TestClient, db_session: Session) -> Iterator[dict[str, Any]]:
    from app.services.access.projects import create_project
    from tests.api._teams import auth_enabled

    with auth_enabled(app):
        create_project(db_session, "team-a")
        owner = bearer(key(db_session, "owner", {"team-a": "admin"}))
        make_benchmark(client, owner, "roles-bench", n_items=20)
        names = seed_results(client, owner, "roles-bench", n_models=3)
        yield {"owner": owner, "model": names[0]}


def _call(client: TestClient, method: str, path: str, headers: dict, model: str):
    url = path.replace("{benchmark}", "roles-bench").replace("{model:path}", model)
    bodies = {
        "/results": {"model": "org/intruder", "correct": [0] * 20},
        "/subsets": {"method": "random", "size": 5, "seed": 1},
        "/analyses": {"methods": ["random"], "sizes": [5], "runs": 2},
        "/sessions": {"model": "org/intruder"},
    }
    body = next((b for suffix, b in bodies.items() if url.endswith(suffix)), None)
    return client.request(method, url, json=body, headers=headers)


@pytest.mark.parametrize(
    "endpoint",
    [e for e, need in WRITE_ROUTES.items() if need is not None and need[1] == "benchmark"],
    ids=lambda e: f"{e[0]} {e[1]}",
)
def test_one_role_less_is_refused_naming_the_project(
    client: TestClient, db_session: Session, setup: dict[str, Any], endpoint: tuple[str, str]
) -> None:
    role, _ = WRITE_ROUTES[endpoint]  # type: ignore[misc]
    lesser = {"write": "read", "admin": "write"}[role]
    # the lesser key also writes elsewhere, so it passes the check made before the body
    from app.services.access.projects import create_project

    create_project(db_session, "elsewhere")
    headers = bearer(key(db_session, "lesser", {"team-a": lesser, "elsewhere": "admin"}))
    before = db_session.scalar(select(func.count()).select_from(AuditEvent))
    response = _call(client, *endpoint, headers, setup["model"])
    assert response.status_code == 403, response.text
    assert f"lacks the '{role}' role on project 'team-a'" in response.json()["detail"]
    assert db_session.scalar(select(func.count()).select_from(AuditEvent)) == before
