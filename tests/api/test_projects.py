"""Projects own benchmarks (issue 25): the second-team scenario replayed, public read, the
project a new benchmark goes to, and keys disabled (everything in `default`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import AuditEvent, Benchmark, BenchmarkVersion, Job, Project
from app.services.access.projects import set_public_read
from tests.api._teams import (
    PROBLEM,
    Teams,
    auth_enabled,
    make_benchmark,
    make_teams,
    seed_results,
    upload,
)


@pytest.fixture
def teams(app: Any, db_session: Session) -> Iterator[Teams]:
    with auth_enabled(app):
        yield make_teams(db_session)


def _state(client: TestClient, headers: dict, bench: str, session_id: str, job_id: str) -> tuple:
    """Everything team A can observe about its data."""
    detail = client.get(f"/v1/benchmarks/{bench}", headers=headers).json()
    matrix = client.get(f"/v1/benchmarks/{bench}/matrix", headers=headers).content
    versions = client.get("/v1/benchmarks", params={"name": "a-bench"}, headers=headers).json()
    sess = client.get(f"/v1/sessions/{session_id}", headers=headers).json()
    job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
    return (
        detail["id"],
        detail["models"],
        matrix,
        [v["id"] for v in versions["items"]],
        sess["state"],
        sess["items_used"],
        job["status"],
        job["cancel_requested"],
    )


def _forbidden_naming_team_a(response) -> None:
    assert response.status_code == 403, response.text
    assert response.headers["content-type"] == PROBLEM
    assert "'team-a'" in response.json()["detail"]


def test_second_team_cannot_touch_the_first_teams_data(
    client: TestClient, db_session: Session, teams: Teams
) -> None:
    a, b = teams.a_write, teams.b_write
    bench = make_benchmark(client, a, "a-bench")
    assert bench["project"] == "team-a"  # the key's only writable project
    names = seed_results(client, a, "a-bench")
    opened = client.post(
        "/v1/benchmarks/a-bench/sessions",
        json={"model": "org/new-model", "baseline": names[-1], "batch_size": 5, "seed": 1},
        headers=a,
    )
    assert opened.status_code == 201, opened.text
    session_id = opened.json()["id"]
    queued = client.post(
        "/v1/benchmarks/a-bench/subsets",
        json={"method": "random", "size": 5, "seed": 3},
        headers=a,
    )
    assert queued.status_code == 202, queued.text
    job_id = queued.json()["id"]
    before = _state(client, a, "a-bench", session_id, job_id)
    audit_before = db_session.scalar(select(func.count()).select_from(AuditEvent))

    # every write of the scenario, and the other write routes, with team B's write key
    zeros = np.zeros(40, dtype=int)
    _forbidden_naming_team_a(upload(client, b, "a-bench", names[0], zeros, replace="true"))
    _forbidden_naming_team_a(upload(client, b, bench["id"], "org/b-model", zeros))
    _forbidden_naming_team_a(client.delete(f"/v1/benchmarks/a-bench/models/{names[1]}", headers=b))
    _forbidden_naming_team_a(
        client.post(f"/v1/benchmarks/a-bench/models/{names[1]}/restore", headers=b)
    )
    _forbidden_naming_team_a(client.post(f"/v1/jobs/{job_id}/cancel", headers=b))
    batch = opened.json()["next_items"]
    _forbidden_naming_team_a(
        client.post(
            f"/v1/sessions/{session_id}/results",
            json={"model": "org/new-model", "results": {i["item_id"]: 0 for i in batch}},
            headers=b,
        )
    )
    _forbidden_naming_team_a(
        client.post(
            "/v1/benchmarks",
            json={"name": "a-bench", "items": [{"id": "only-one"}]},
            headers=b,
        )
    )
    _forbidden_naming_team_a(
        client.post(
            "/v1/benchmarks/from-samples",
            params={"name": "a-bench"},
            content=b"{}",
            headers={**b, "content-type": "application/x-ndjson"},
        )
    )
    _forbidden_naming_team_a(
        client.post(
            "/v1/benchmarks/a-bench/subsets", json={"method": "random", "size": 5}, headers=b
        )
    )
    _forbidden_naming_team_a(
        client.post(
            "/v1/benchmarks/a-bench/analyses",
            json={"methods": ["random"], "sizes": [5], "runs": 2},
            headers=b,
        )
    )
    _forbidden_naming_team_a(
        client.post("/v1/benchmarks/a-bench/sessions", json={"model": "x"}, headers=b)
    )
    _forbidden_naming_team_a(
        client.post(
            "/v1/jobs",
            json={
                "kind": "subset",
                "params": {"version_id": bench["id"], "method": "random", "size": 5},
            },
            headers=b,
        )
    )
    _forbidden_naming_team_a(client.post("/v1/benchmarks/a-bench/retire", headers=teams.b_admin))

    # reads of the private project: 404 exactly like targets that do not exist
    for path, missing in [
        ("/v1/benchmarks/a-bench", "/v1/benchmarks/no-such-bench"),
        ("/v1/benchmarks/a-bench@v1", "/v1/benchmarks/no-such-bench@v1"),
        (f"/v1/benchmarks/{bench['id']}", "/v1/benchmarks/00000000-0000-4000-8000-000000000000"),
        ("/v1/benchmarks/a-bench/matrix", "/v1/benchmarks/no-such-bench/matrix"),
        ("/v1/benchmarks/a-bench/models", "/v1/benchmarks/no-such-bench/models"),
        (f"/v1/sessions/{session_id}", "/v1/sessions/00000000-0000-4000-8000-000000000000"),
        (f"/v1/jobs/{job_id}", "/v1/jobs/00000000-0000-4000-8000-000000000000"),
    ]:
        got, want = client.get(path, headers=b), client.get(missing, headers=b)
        assert got.status_code == want.status_code == 404, (path, got.text)
        assert got.json()["title"] == want.json()["title"]
        hidden, absent = path.split("/")[3].split("@")[0], missing.split("/")[3].split("@")[0]
        assert got.json()["detail"].replace(hidden, "X") == want.json()["detail"].replace(
            absent, "X"
        ), (got.json(), want.json())
    listed = client.get("/v1/benchmarks", headers=b).json()["items"]
    assert all(v["project"] != "team-a" for v in listed)
    assert [p["name"] for p in client.get("/v1/projects", headers=b).json()["items"]] == ["team-b"]

    # the first team's data is untouched, and nothing was recorded for the refused writes
    assert _state(client, a, "a-bench", session_id, job_id) == before
    assert db_session.scalar(select(func.count()).select_from(AuditEvent)) == audit_before
    n_versions = db_session.scalar(
        select(func.count())
        .select_from(BenchmarkVersion)
        .join(Benchmark)
        .where(Benchmark.name == "a-bench")
    )
    assert n_versions == 1
    assert db_session.get(Job, job_id).status.value == "queued"


def test_public_read_lets_every_key_read_but_not_write(
    client: TestClient, db_session: Session, teams: Teams
) -> None:
    make_benchmark(client, teams.a_write, "a-public")
    names = seed_results(client, teams.a_write, "a-public", n_models=3)
    assert client.get("/v1/benchmarks/a-public", headers=teams.b_write).status_code == 404
    project = db_session.scalars(select(Project).where(Project.name == "team-a")).one()
    set_public_read(db_session, project, True)
    shown = client.get("/v1/benchmarks/a-public", headers=teams.b_write)
    assert shown.status_code == 200 and shown.json()["project"] == "team-a"
    assert client.get("/v1/benchmarks/a-public/matrix", headers=teams.b_write).status_code == 200
    assert any(
        v["name"] == "a-public"
        for v in client.get("/v1/benchmarks", headers=teams.b_write).json()["items"]
    )
    _forbidden_naming_team_a(
        client.delete(f"/v1/benchmarks/a-public/models/{names[0]}", headers=teams.b_write)
    )


def test_read_role_reads_and_cannot_write(client: TestClient, teams: Teams) -> None:
    make_benchmark(client, teams.a_write, "a-ro")
    names = seed_results(client, teams.a_write, "a-ro", n_models=2)
    assert client.get("/v1/benchmarks/a-ro/models", headers=teams.a_read).status_code == 200
    denied = client.delete(f"/v1/benchmarks/a-ro/models/{names[0]}", headers=teams.a_read)
    assert denied.status_code == 403  # the key holds no write role anywhere: refused up front
    assert "write" in denied.json()["detail"]


def test_where_a_new_benchmark_goes(client: TestClient, db_session: Session, teams: Teams) -> None:
    from tests.api._teams import bearer, key

    both = bearer(key(db_session, "both", {"team-a": "write", "team-b": "write"}))
    items = [{"id": "x"}, {"id": "y"}]
    unsaid = client.post("/v1/benchmarks", json={"name": "nb", "items": items}, headers=both)
    assert unsaid.status_code == 422
    assert unsaid.json()["errors"][0]["loc"] == ["body", "project"]
    made = client.post(
        "/v1/benchmarks", json={"name": "nb", "items": items, "project": "team-b"}, headers=both
    )
    assert made.status_code == 201 and made.json()["project"] == "team-b"
    # a new version of the name stays in team-b; asking for team-a is a conflict naming project
    moved = client.post(
        "/v1/benchmarks",
        json={"name": "nb", "items": items[:1], "project": "team-a"},
        headers=both,
    )
    assert moved.status_code == 409 and moved.json()["errors"][0]["loc"] == ["body", "project"]
    v2 = client.post("/v1/benchmarks", json={"name": "nb", "items": items[:1]}, headers=both)
    assert v2.status_code == 201 and v2.json()["project"] == "team-b" and v2.json()["version"] == 2
    unknown = client.post(
        "/v1/benchmarks", json={"name": "nb2", "items": items, "project": "nope"}, headers=both
    )
    assert unknown.status_code == 404
    elsewhere = client.post(
        "/v1/benchmarks",
        json={"name": "nb3", "items": items, "project": "team-b"},
        headers=teams.a_write,
    )
    assert elsewhere.status_code == 403 and "'team-b'" in elsewhere.json()["detail"]


def test_keys_disabled_everything_is_in_default(client: TestClient) -> None:
    made = client.post("/v1/benchmarks", json={"name": "anon-b", "items": [{"id": "q"}]})
    assert made.status_code == 201 and made.json()["project"] == "default"
    assert client.get("/v1/projects").json()["items"][0]["role"] == "admin"
