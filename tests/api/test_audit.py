"""The audit trail (issue 25): one row per write, written in the write's own transaction, and
`GET /v1/audit` with its filters, pagination and who may read it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import AuditEvent, ModelResult
from tests.api._teams import (
    Teams,
    auth_enabled,
    make_benchmark,
    make_teams,
    model_rows,
    upload,
)


@pytest.fixture
def teams(app: Any, db_session: Session) -> Iterator[Teams]:
    with auth_enabled(app):
        yield make_teams(db_session)


def _audit_count(session: Session) -> int:
    return int(session.scalar(select(func.count()).select_from(AuditEvent)) or 0)


def test_one_row_per_write_in_a_mixed_workload_of_1000_requests(
    client: TestClient, db_session: Session, teams: Teams
) -> None:
    """Uploads (new, identical, conflicting, replacing), deletes, restores, new benchmark
    versions, reads, refused cross-project writes and invalid bodies, in a seeded random order:
    the trail grows by exactly the number of write requests that succeeded and changed
    something (an identical upload is a no-op: no row, issue 39), with their key, project,
    action and request id."""
    a, b = teams.a_write, teams.b_write
    n_items = 20
    make_benchmark(client, a, "mix-a", n_items=n_items)
    make_benchmark(client, b, "mix-b", n_items=n_items)
    rows = model_rows(8, n_items, seed=5)
    rng = np.random.default_rng(25)
    start = _audit_count(db_session)
    writes = Counter()
    outcomes = Counter()
    for k in range(1000):
        kind = rng.choice(
            ["upload", "replace", "delete", "restore", "version", "read", "cross", "invalid"],
            p=[0.25, 0.15, 0.1, 0.1, 0.05, 0.15, 0.1, 0.1],
        )
        model = f"org/m{rng.integers(8)}"
        row = rows[int(model[-1])]
        headers = {**a, "X-Request-ID": f"req-{k}"}
        if kind == "upload":
            r = upload(client, headers, "mix-a", model, row)
            action = "results.upload"
        elif kind == "replace":
            r = upload(client, headers, "mix-a", model, rng.integers(0, 2, n_items), replace="true")
            action = "results.upload"
        elif kind == "delete":
            r = client.delete(f"/v1/benchmarks/mix-a/models/{model}", headers=headers)
            action = "results.delete"
        elif kind == "restore":
            r = client.post(f"/v1/benchmarks/mix-a/models/{model}/restore", headers=headers)
            action = "results.restore"
        elif kind == "version":
            items = [{"id": f"v{k}-{i}"} for i in range(3)]
            r = client.post(
                "/v1/benchmarks", json={"name": "mix-a2", "items": items}, headers=headers
            )
            action = "benchmark.create_version"
        elif kind == "read":
            r = client.get("/v1/benchmarks/mix-a/models", headers=headers)
            action = None
        elif kind == "cross":  # team A's key on team B's benchmark
            r = upload(client, headers, "mix-b", model, row)
            action = None
            assert r.status_code == 403
        else:  # a body that fails validation
            r = client.post(
                "/v1/benchmarks/mix-a/results",
                json={"model": model, "correct": [2]},
                headers=headers,
            )
            action = None
            assert r.status_code == 422
        outcomes[(kind, r.status_code)] += 1
        no_op = r.status_code == 200 and r.json().get("status") == "unchanged"
        if no_op:
            outcomes[(kind, "unchanged")] += 1
        if action is not None and 200 <= r.status_code < 300 and not no_op:
            writes[action] += 1
    total = sum(writes.values())
    assert _audit_count(db_session) - start == total
    # every kind happened, and the refusals happened too (the workload is really mixed)
    assert {k for k, _ in outcomes} == {
        "upload",
        "replace",
        "delete",
        "restore",
        "version",
        "read",
        "cross",
        "invalid",
    }
    assert any(code == 404 for (kind, code) in outcomes if kind in ("delete", "restore"))
    assert outcomes[("upload", "unchanged")] > 0  # no-ops happened, and wrote no row
    events = db_session.scalars(select(AuditEvent).order_by(AuditEvent.id)).all()[-total:]
    assert Counter(e.action for e in events) == writes
    assert {e.key_name for e in events} == {"a-ci"}
    assert {e.project_name for e in events} == {"team-a"}
    assert all(e.request_id and e.request_id.startswith("req-") for e in events)
    replaced = [e for e in events if e.summary.get("status") == "replaced"]
    assert replaced and all("previous_accuracy" in e.summary for e in replaced)


def test_a_failed_request_writes_no_row(
    client: TestClient, db_session: Session, teams: Teams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row is in the write's transaction: a failure after it (here: storing the
    Idempotency-Key response) rolls back the results and the row together."""
    from app.services.platform import idempotency

    make_benchmark(client, teams.a_write, "fail-a", n_items=5)
    before = _audit_count(db_session)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(idempotency, "store", broken)
    r = client.post(
        "/v1/benchmarks/fail-a/results",
        json={"model": "org/x", "correct": [1, 0, 1, 0, 1]},
        headers={**teams.a_write, "Idempotency-Key": "k1"},
    )
    assert r.status_code == 500
    assert _audit_count(db_session) == before
    assert db_session.scalar(select(func.count()).select_from(ModelResult)) == 0


def test_audit_endpoint_filters_paginates_and_is_for_admins(
    client: TestClient, db_session: Session, teams: Teams
) -> None:
    make_benchmark(client, teams.a_write, "aud-a", n_items=4)
    make_benchmark(client, teams.b_write, "aud-b", n_items=4)
    for m in range(5):
        assert upload(client, teams.a_write, "aud-a", f"org/a{m}", np.ones(4)).status_code == 201
    assert upload(client, teams.b_write, "aud-b", "org/b0", np.ones(4)).status_code == 201
    assert (
        client.delete("/v1/benchmarks/aud-a/models/org/a0", headers=teams.a_write).status_code
        == 204
    )

    # a write key is no admin anywhere; team B's admin cannot read team A's trail
    assert client.get("/v1/audit", headers=teams.a_write).status_code == 403
    other = client.get("/v1/audit", params={"project": "team-a"}, headers=teams.b_admin)
    assert other.status_code == 403 and "team-a" in other.json()["detail"]

    mine = client.get("/v1/audit", headers=teams.a_admin).json()["items"]
    assert {e["project"] for e in mine} == {"team-a"}  # only the projects it administers
    assert [e["action"] for e in mine][:2] == ["results.delete", "results.upload"]
    deleted = mine[0]
    assert deleted["target"]["model"] == "org/a0" and deleted["summary"]["accuracy"] == 1.0
    assert deleted["key_name"] == "a-ci"

    pages, cursor = [], None
    while True:
        params = {"project": "team-a", "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/audit", params=params, headers=teams.a_admin).json()
        pages.append(page["items"])
        cursor = page["next_cursor"]
        if not cursor:
            break
    flat = [e["id"] for p in pages for e in p]
    assert flat == [e["id"] for e in mine] and len(pages) == 4  # 7 rows, 2 a page
    only = client.get(
        "/v1/audit",
        params={"action": "results.delete", "project": "team-a"},
        headers=teams.instance_admin,
    ).json()["items"]
    assert [e["target"]["model"] for e in only] == ["org/a0"]
    everything = client.get("/v1/audit", headers=teams.instance_admin).json()["items"]
    # rows that earlier committing tests left on this worker's database may add other projects
    assert {"team-a", "team-b"} <= {e["project"] for e in everything}
    bench_id = client.get("/v1/benchmarks/aud-b", headers=teams.b_write).json()["benchmark_id"]
    by_bench = client.get(
        "/v1/audit", params={"benchmark_id": bench_id}, headers=teams.instance_admin
    ).json()["items"]
    assert {e["target"]["benchmark"] for e in by_bench} == {"aud-b"} and len(by_bench) == 2
    key_id = everything[0]["key_id"]
    by_key = client.get(
        "/v1/audit", params={"key_id": key_id}, headers=teams.instance_admin
    ).json()["items"]
    assert {e["key_id"] for e in by_key} == {key_id}
    late = client.get(
        "/v1/audit", params={"since": everything[0]["at"]}, headers=teams.instance_admin
    ).json()["items"]
    assert all(e["at"] >= everything[0]["at"] for e in late) and late
    bad = client.get("/v1/audit", params={"cursor": "nope"}, headers=teams.instance_admin)
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["query", "cursor"]
