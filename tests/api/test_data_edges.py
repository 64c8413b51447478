"""The lower data-side findings of issue 39, one test each (in-process app on this session's
Postgres, keys on): no audit row for a no-op; session, score and job rows name their
benchmark; a subset id of another project is answered like a missing one; coverage studies
inside the cost quotas; ``..`` parts in model names, ``yes`` for a boolean, 10k tags and a NUL
in an item id refused; DPP sizes checked when asked for, not when the job fails."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import AuditEvent
from app.schemas.results import MAX_TAGS
from app.services.platform.quotas import COVERAGE_DRAW_COST, QUOTAS
from app.services.selection import subsets as subset_service
from tests.api._teams import Teams, auth_enabled, make_benchmark, make_teams, seed_results, upload

N_ITEMS = 40


@pytest.fixture
def teams(app: Any, db_session: Session) -> Iterator[Teams]:
    with auth_enabled(app):
        yield make_teams(db_session)


def _trail(db_session: Session) -> list[AuditEvent]:
    db_session.expire_all()
    return list(db_session.scalars(select(AuditEvent).order_by(AuditEvent.id)))


def _subset(db_session: Session, version_id: str) -> Any:
    """A random 5-item subset of the version, built through the service (no worker here)."""
    req = subset_service.resolve_request(
        db_session, uuid.UUID(version_id), "random", 5, {}, 1, None
    )
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    return subset


def _fields(r: Any) -> set[str]:
    return {e["field"] for e in r.json().get("errors", [])}


def test_a_no_op_request_writes_no_audit_row(
    client: TestClient, db_session: Session, teams: Teams
) -> None:
    """Decided (README, audit trail): a request that changes nothing appends nothing, so a
    retry loop cannot grow the trail (450 no-op rows against 49 writes, before)."""
    a = teams.a_write
    items = [{"id": f"q{i}"} for i in range(4)]
    assert (
        client.post("/v1/benchmarks", json={"name": "noop", "items": items}, headers=a).status_code
        == 201
    )
    row = np.array([1, 0, 1, 0])
    assert upload(client, a, "noop", "org/m", row).status_code == 201
    start = len(_trail(db_session))
    for _ in range(5):
        again = client.post("/v1/benchmarks", json={"name": "noop", "items": items}, headers=a)
        assert again.status_code == 200
        same = upload(client, a, "noop", "org/m", row)
        assert same.status_code == 200 and same.json()["status"] == "unchanged"
        buf = io.BytesIO()
        np.savez(buf, correct=row[None, :].astype(np.uint8), models=np.array(["org/m"]))
        matrix = client.post(
            "/v1/benchmarks/noop/results/matrix",
            content=buf.getvalue(),
            headers={**a, "content-type": "application/x-npz"},
        )
        assert matrix.status_code == 200 and matrix.json()["unchanged"] == 1, matrix.text
    assert len(_trail(db_session)) == start
    for _ in range(3):  # the first retire is a write, the next two are no-ops
        assert (
            client.post("/v1/benchmarks/noop@v1/retire", headers=teams.a_admin).status_code == 200
        )
    events = _trail(db_session)[start:]
    assert [e.action for e in events] == ["benchmark.retire"]


def test_session_score_and_job_rows_name_their_benchmark(
    client: TestClient, db_session: Session, teams: Teams
) -> None:
    a = teams.a_write
    version = make_benchmark(client, a, "named", n_items=N_ITEMS)
    names = seed_results(client, a, "named", n_models=6, seed=3)
    bench_id = uuid.UUID(version["benchmark_id"])

    s = client.post(
        "/v1/benchmarks/named/sessions",
        json={"model": "org/new", "baseline": names[0], "policy": "random", "batch_size": 5},
        headers=a,
    )
    assert s.status_code == 201, s.text
    batch = s.json()["next_items"]
    posted = client.post(
        f"/v1/sessions/{s.json()['id']}/results",
        json={"model": "org/new", "item_ids": [b["item_id"] for b in batch], "correct": [1] * 5},
        headers=a,
    )
    assert posted.status_code == 200, posted.text
    subset = _subset(db_session, version["id"])
    ids = [f"named-q{p}" for p in np.frombuffer(subset.indices, dtype="<i8")]
    score = client.post(
        f"/v1/subsets/{subset.id}/scores",
        json={"model": "org/scored", "item_ids": ids, "correct": [1, 0, 1, 0, 1]},
        headers=a,
    )
    assert score.status_code in (200, 201), score.text
    job = client.post(
        "/v1/jobs", json={"kind": "irt_fit", "params": {"version_id": version["id"]}}, headers=a
    )
    assert job.status_code in (202, 503), job.text
    by_action = {e.action: e for e in _trail(db_session)}
    for action in ("session.post_results", "subset.score", "job.create"):
        if action == "job.create" and job.status_code == 503:
            continue  # no broker here: the job is failed and the request rolled back
        assert by_action[action].benchmark_id == bench_id, action
        assert by_action[action].target["benchmark"] == "named"


def test_a_subset_of_another_project_is_answered_like_a_missing_one(
    client: TestClient, db_session: Session, teams: Teams
) -> None:
    make_benchmark(client, teams.a_write, "lb-a", n_items=N_ITEMS)
    seed_results(client, teams.a_write, "lb-a", n_models=4, seed=1)
    make_benchmark(client, teams.b_write, "lb-b", n_items=N_ITEMS)
    seed_results(client, teams.b_write, "lb-b", n_models=4, seed=2)
    a_version = client.get("/v1/benchmarks/lb-a", headers=teams.a_write).json()["id"]
    theirs = _subset(db_session, a_version).id
    missing = "f" * len(theirs)

    def board(sid: str) -> Any:
        return client.get(
            "/v1/benchmarks/lb-b/leaderboard", params={"subset": sid}, headers=teams.b_write
        )

    seen, none = board(theirs), board(missing)
    assert seen.status_code == none.status_code == 404, seen.text
    assert seen.json()["detail"].replace(theirs, "ID") == none.json()["detail"].replace(
        missing, "ID"
    )
    assert a_version not in seen.text


def test_coverage_studies_count_in_the_cost_quota(
    client: TestClient, teams: Teams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: outside the quotas (20 per key, ~11 worker-minutes each)."""
    a = teams.a_write
    make_benchmark(client, a, "cov", n_items=N_ITEMS)
    seed_results(client, a, "cov", n_models=10, seed=4)
    body = {"methods": ["random"], "sizes": [5, 10], "repeats": 5}
    cost = 5 * 2 * 1 * COVERAGE_DRAW_COST
    monkeypatch.setattr(QUOTAS, "analysis_cost_quota", 3 * cost)
    monkeypatch.setattr(QUOTAS, "project_analysis_cost_quota", 100 * cost)
    monkeypatch.setattr(QUOTAS, "analysis_max_cost", 2 * cost)
    codes = []
    for seed in range(4):
        r = client.post("/v1/benchmarks/cov/coverage", json={**body, "seed": seed}, headers=a)
        codes.append(r.status_code)
    if 503 in codes:
        pytest.skip("no broker: the jobs were failed, not queued")
    assert codes == [202, 202, 202, 429], codes
    too_big = client.post(
        "/v1/benchmarks/cov/coverage", json={**body, "repeats": 11, "seed": 9}, headers=a
    )
    assert too_big.status_code == 422 and "body.repeats" in _fields(too_big), too_big.text


@pytest.mark.parametrize("name", ["..", "../x", "org/../x", "org/./m", "x/.."])
def test_model_names_with_dot_parts_are_refused(
    client: TestClient, teams: Teams, name: str
) -> None:
    make_benchmark(client, teams.a_write, "dots", n_items=2)
    body = client.post(
        "/v1/benchmarks/dots/results",
        json={"model": name, "correct": [1, 0]},
        headers=teams.a_write,
    )
    assert body.status_code == 422, body.text
    query = client.post(
        "/v1/benchmarks/dots/results",
        params={"model": name},
        content=b"item,correct\ndots-q0,1\n",
        headers={**teams.a_write, "content-type": "text/csv"},
    )
    assert query.status_code == 422 and "query.model" in _fields(query), query.text
    fine = upload(client, teams.a_write, "dots", "org/...x/.hidden", np.array([1, 0]))
    assert fine.status_code == 201, fine.text


def test_dpp_sizes_are_checked_when_asked_for(client: TestClient, teams: Teams) -> None:
    """40 items: the trimming may drop up to 8, so 32 is the most the DPP always draws."""
    a = teams.a_write
    make_benchmark(client, a, "dppsize", n_items=N_ITEMS)
    seed_results(client, a, "dppsize", n_models=20, seed=5)
    r = client.post(
        "/v1/benchmarks/dppsize/subsets", json={"method": "dpp", "size": 36, "seed": 1}, headers=a
    )
    assert r.status_code == 422 and "body.size" in _fields(r), r.text
    ok = client.post(
        "/v1/benchmarks/dppsize/subsets", json={"method": "dpp", "size": 32, "seed": 1}, headers=a
    )
    assert ok.status_code in (200, 201, 202, 503), ok.text
    # the generic job route checks a coverage study's sizes against the version too
    version = client.get("/v1/benchmarks/dppsize", headers=a).json()["id"]
    params = {"version_id": version, "methods": ["dpp"], "sizes": [36], "repeats": 1}
    job = client.post("/v1/jobs", json={"kind": "coverage", "params": params}, headers=a)
    assert job.status_code == 422 and "body.params.sizes" in _fields(job), job.text
    too_many = {**params, "methods": ["random"], "sizes": [N_ITEMS]}
    job = client.post("/v1/jobs", json={"kind": "coverage", "params": too_many}, headers=a)
    assert job.status_code == 422 and "body.params.sizes" in _fields(job), job.text


@pytest.mark.parametrize("word", ["yes", "no", "on", "y", "t"])
def test_yes_is_not_a_boolean(client: TestClient, teams: Teams, word: str) -> None:
    a = teams.a_write
    make_benchmark(client, a, "bools", n_items=2)
    r = upload(client, a, "bools", "org/b", np.array([1, 0]), replace=word)
    assert r.status_code == 422 and "query.replace" in _fields(r), r.text
    assert upload(client, a, "bools", "org/b", np.array([1, 0]), replace="true").status_code == 201
    s = client.post(
        "/v1/benchmarks/bools/sessions",
        json={"model": "org/s", "baseline": "org/b", "store_results": word},
        headers=a,
    )
    assert s.status_code == 422 and "body.store_results" in _fields(s), s.text


def test_tags_have_a_documented_cap(client: TestClient, teams: Teams) -> None:
    make_benchmark(client, teams.a_write, "tags", n_items=2)

    def post(n: int) -> Any:
        model = {"name": f"org/t{n}", "tags": [f"t{i}" for i in range(n)]}
        return client.post(
            "/v1/benchmarks/tags/results",
            json={"model": model, "correct": [1, 0]},
            headers=teams.a_write,
        )

    assert post(MAX_TAGS).status_code == 201
    r = post(10_000)
    assert r.status_code == 422, r.text
    assert any(f.endswith(".tags") for f in _fields(r)), r.text


def test_a_nul_in_an_item_id_is_refused(client: TestClient, teams: Teams) -> None:
    """Never silently dropped on export (numpy strings lose trailing NULs: "a\\x00" was "a")."""
    items = [{"id": "a"}, {"id": "a\x00"}]
    r = client.post("/v1/benchmarks", json={"name": "nul", "items": items}, headers=teams.a_write)
    assert r.status_code == 422 and "body.items.1.id" in _fields(r), r.text
