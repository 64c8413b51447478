"""The data-side and lower findings of issue 39 against the real service: two API processes
(each request on a new connection, so on either), a Celery worker, Postgres, Redis, keys on.
The in-process tests (tests/api/test_data_edges.py, tests/api/test_model_metadata.py,
tests/security/test_input_edges.py) pin each decision in detail; these reproduce each finding
as the probe met it, end to end:

* model metadata per project: B's upload of a model name changes nothing A sees and shows B
  nothing of A's, and writes no row in A's trail;
* a no-op request appends no audit row (the probe: 450 ``applied:false`` rows against 49);
* ``leaderboard?subset=`` with another project's subset id answers like a missing id (it named
  the subset's version: an existence oracle);
* ``..`` parts in model names, ``"yes"`` for a boolean, 10k tags, a NUL in an item id: 422
  naming the field; DPP sizes checked when asked for, not when the job fails;
* ``/metrics`` needs an instance-admin key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import create_engine, text

from app.schemas.results import MAX_TAGS
from tests.support.stack import Stack, create_key, project_keys, wait_job

pytestmark = pytest.mark.integration

MODEL = "org/shared-name"
N_ITEMS = 40


@dataclass
class Tenants:
    stack: Stack
    a_write: httpx.Client
    a_admin: httpx.Client
    b_write: httpx.Client

    def trail(self) -> int:
        """Audit rows of project A (read from the database: what any surface would show)."""
        engine = create_engine(self.stack.database_url)
        try:
            with engine.connect() as conn:
                return conn.scalar(
                    text(
                        "SELECT count(*) FROM audit_events e JOIN projects p"
                        " ON p.id = e.project_id WHERE p.name = 'data-a'"
                    )
                )
        finally:
            engine.dispose()


def _client(stack: Stack, token: str) -> httpx.Client:
    """No keep-alive: each request on a new connection, so on either API process."""
    return httpx.Client(
        base_url=stack.api.url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


@pytest.fixture(scope="module")
def tenants(two_process_stack: Stack) -> Iterator[Tenants]:
    keys = project_keys(
        two_process_stack.database_url,
        ["data-a", "data-b"],
        {
            "a-ci": {"data-a": "write"},
            "a-lead": {"data-a": "admin"},
            "b-ci": {"data-b": "write"},
        },
    )
    clients = [_client(two_process_stack, keys[k]) for k in ("a-ci", "a-lead", "b-ci")]
    try:
        yield Tenants(two_process_stack, *clients)
    finally:
        for c in clients:
            c.close()


def _benchmark(client: httpx.Client, name: str, project: str, n_items: int = N_ITEMS) -> None:
    items = [{"id": f"{name}-q{i}", "subtask": f"s{i % 2}"} for i in range(n_items)]
    r = client.post("/v1/benchmarks", json={"name": name, "project": project, "items": items})
    assert r.status_code == 201, r.text


def _seed(client: httpx.Client, bench: str, n_models: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ability = np.linspace(0.2, 0.85, n_models)[:, None]
    rows = (rng.random((n_models, N_ITEMS)) < ability).astype(int)
    for k, row in enumerate(rows):
        r = client.post(
            f"/v1/benchmarks/{bench}/results",
            json={"model": f"org/model-{k}", "correct": row.tolist()},
        )
        assert r.status_code == 201, r.text


def _fields(r: httpx.Response) -> set[str]:
    return {e["field"] for e in r.json().get("errors", [])}


def _seen(client: httpx.Client, bench: str) -> dict[str, Any]:
    models = client.get(f"/v1/benchmarks/{bench}/models").json()["items"]
    (row,) = [m["model"] for m in models if m["model"]["name"] == MODEL]
    return {k: row[k] for k in ("params_b", "family", "tags")}


def test_model_metadata_is_per_project(tenants: Tenants) -> None:
    _benchmark(tenants.a_write, "meta-a", "data-a", n_items=4)
    _benchmark(tenants.b_write, "meta-b", "data-b", n_items=4)
    a_model = {"name": MODEL, "params_b": 7.0, "family": "llama", "tags": ["internal"]}
    r = tenants.a_write.post(
        "/v1/benchmarks/meta-a/results", json={"model": a_model, "correct": [1, 0, 1, 0]}
    )
    assert r.status_code == 201, r.text
    before, trail = _seen(tenants.a_write, "meta-a"), tenants.trail()
    assert before == {"params_b": 7.0, "family": "llama", "tags": ["internal"]}
    r = tenants.b_write.post(
        "/v1/benchmarks/meta-b/results",
        json={"model": {"name": MODEL, "params_b": 70.0}, "correct": [1, 1, 1, 0]},
    )
    assert r.status_code == 201, r.text
    assert _seen(tenants.b_write, "meta-b") == {"params_b": 70.0, "family": None, "tags": []}
    assert _seen(tenants.a_write, "meta-a") == before
    assert tenants.trail() == trail


def test_a_no_op_request_appends_no_audit_row(tenants: Tenants) -> None:
    items = [{"id": f"noop-q{i}"} for i in range(4)]
    body = {"name": "noop", "project": "data-a", "items": items}
    assert tenants.a_write.post("/v1/benchmarks", json=body).status_code == 201
    upload = {"model": "org/m", "correct": [1, 0, 1, 0]}
    assert tenants.a_write.post("/v1/benchmarks/noop/results", json=upload).status_code == 201
    start = tenants.trail()
    for _ in range(5):
        assert tenants.a_write.post("/v1/benchmarks", json=body).status_code == 200
        same = tenants.a_write.post("/v1/benchmarks/noop/results", json=upload)
        assert same.status_code == 200 and same.json()["status"] == "unchanged", same.text
    assert tenants.trail() == start
    for _ in range(3):  # the first retire is a write, the next two are no-ops
        assert tenants.a_admin.post("/v1/benchmarks/noop@v1/retire").status_code == 200
    assert tenants.trail() == start + 1


def test_another_projects_subset_is_answered_like_a_missing_one(tenants: Tenants) -> None:
    _benchmark(tenants.a_write, "lb-a", "data-a")
    _seed(tenants.a_write, "lb-a", n_models=4, seed=1)
    _benchmark(tenants.b_write, "lb-b", "data-b")
    _seed(tenants.b_write, "lb-b", n_models=4, seed=2)
    r = tenants.a_write.post(
        "/v1/benchmarks/lb-a/subsets", json={"method": "random", "size": 5, "seed": 1}
    )
    assert r.status_code in (200, 202), r.text
    if r.status_code == 202:
        job = wait_job(tenants.a_write, r.headers["location"])
        assert job["status"] == "succeeded", job
        theirs = job["result"]["subset_id"]
    else:
        theirs = r.json()["id"]
    a_version = tenants.a_write.get("/v1/benchmarks/lb-a").json()["id"]
    missing = "f" * len(theirs)

    def board(sid: str) -> httpx.Response:
        return tenants.b_write.get("/v1/benchmarks/lb-b/leaderboard", params={"subset": sid})

    seen, none = board(theirs), board(missing)
    assert seen.status_code == none.status_code == 404, seen.text
    assert seen.json()["detail"].replace(theirs, "ID") == none.json()["detail"].replace(
        missing, "ID"
    )
    assert a_version not in seen.text


@pytest.mark.parametrize("name", ["../x", "org/../x", "org/.."])
def test_model_names_with_dot_parts_are_422(tenants: Tenants, name: str) -> None:
    bench = f"dots-{abs(hash(name)) % 10**6}"
    _benchmark(tenants.a_write, bench, "data-a", n_items=2)
    r = tenants.a_write.post(
        f"/v1/benchmarks/{bench}/results", json={"model": name, "correct": [1, 0]}
    )
    assert r.status_code == 422, r.text
    q = tenants.a_write.post(
        f"/v1/benchmarks/{bench}/results",
        params={"model": name},
        content=f"item,correct\n{bench}-q0,1\n".encode(),
        headers={"content-type": "text/csv"},
    )
    assert q.status_code == 422 and "query.model" in _fields(q), q.text


def test_yes_tags_and_nul_are_422_naming_the_field(tenants: Tenants) -> None:
    _benchmark(tenants.a_write, "edges", "data-a", n_items=2)
    r = tenants.a_write.post(
        "/v1/benchmarks/edges/results",
        params={"replace": "yes"},
        json={"model": "org/b", "correct": [1, 0]},
    )
    assert r.status_code == 422 and "query.replace" in _fields(r), r.text

    def tagged(n: int) -> httpx.Response:
        model = {"name": f"org/t{n}", "tags": [f"t{i}" for i in range(n)]}
        return tenants.a_write.post(
            "/v1/benchmarks/edges/results", json={"model": model, "correct": [1, 0]}
        )

    assert tagged(MAX_TAGS).status_code == 201
    r = tagged(10_000)
    assert r.status_code == 422 and any(f.endswith(".tags") for f in _fields(r)), r.text
    r = tenants.a_write.post(
        "/v1/benchmarks",
        json={"name": "nul", "project": "data-a", "items": [{"id": "a"}, {"id": "a\x00"}]},
    )
    assert r.status_code == 422 and "body.items.1.id" in _fields(r), r.text


def test_dpp_sizes_are_checked_when_asked_for(tenants: Tenants) -> None:
    _benchmark(tenants.a_write, "dppsize", "data-a")
    _seed(tenants.a_write, "dppsize", n_models=20, seed=5)
    r = tenants.a_write.post(
        "/v1/benchmarks/dppsize/subsets", json={"method": "dpp", "size": 36, "seed": 1}
    )
    assert r.status_code == 422 and "body.size" in _fields(r), r.text
    ok = tenants.a_write.post(
        "/v1/benchmarks/dppsize/subsets", json={"method": "dpp", "size": 32, "seed": 1}
    )
    assert ok.status_code in (200, 201, 202), ok.text
    if ok.status_code == 202:
        job = wait_job(tenants.a_write, ok.headers["location"])
        assert job["status"] == "succeeded", job


def test_metrics_need_an_instance_admin_key(tenants: Tenants) -> None:
    stack = tenants.stack
    with httpx.Client(base_url=stack.api.url, timeout=30) as anyone:
        assert anyone.get("/metrics").status_code == 401
    assert tenants.a_admin.get("/metrics").status_code == 403
    reader = create_key(stack.database_url, ["read"], name="metrics-reader")
    with _client(stack, reader) as client:
        assert client.get("/metrics").status_code == 403
    admin = create_key(stack.database_url, [], name="metrics-admin", instance_admin=True)
    with _client(stack, admin) as client:
        r = client.get("/metrics")
        assert r.status_code == 200 and "benchslice_" in r.text
