"""Benchmarks addressed by name in every path: ``{benchmark}`` is a version id, a name (its
latest version) or ``name@vN``; ``version_id`` names a version and ``benchmark_id`` the parent."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import IdempotencyKey
from app.schemas.analyses import AnalysisPublic
from app.schemas.results import ModelResultPublic
from app.schemas.subsets import SubsetPublic
from app.services.catalog.benchmarks import create_version, get_version
from app.services.platform import idempotency
from app.services.selection import subsets as subset_service
from tests.api._subset_data import Seeded, seed_gpqa

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=12, name=f"gpqa-{uuid.uuid4().hex[:8]}")
    db_session.commit()  # a later failing request rolls back to here, not before the data
    return seeded


def _name(db_session: Session, seeded: Seeded) -> str:
    return get_version(db_session, seeded.version_id).benchmark.name


def _second_version(db_session: Session, seeded: Seeded) -> uuid.UUID:
    """Version 2 of the same name: the first 100 items only (a different item list)."""
    name = _name(db_session, seeded)
    v2, created = create_version(
        db_session, name, seeded.item_ids[:100], seeded.subtasks[:100], None, None
    )
    db_session.commit()
    assert created and v2.version == 2
    return v2.id


def _locs(body: dict) -> list[list[str]]:
    return [e["loc"] for e in body.get("errors", [])]


def test_verdict_by_name_by_name_at_v1_and_by_id_are_identical(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    name = _name(db_session, seeded)
    params = {"model_a": seeded.names[0], "model_b": seeded.names[-1], "size": 25}
    answers = {}
    for ref in (str(seeded.version_id), name, f"{name}@v1"):
        r = client.get(f"/v1/benchmarks/{ref}/verdict", params=params)
        assert r.status_code == 200, (ref, r.text)
        answers[ref] = r.json()
    first = answers[str(seeded.version_id)]
    assert all(body == first for body in answers.values()), answers
    acc = seeded.correct.mean(axis=1)  # the stored matrix, rows sorted by name
    assert first["full_accuracy_a"] == pytest.approx(acc[0])
    assert first["full_accuracy_b"] == pytest.approx(acc[-1])
    # the same holds for the plan (another route of the same dependency)
    plans = [
        client.get(f"/v1/benchmarks/{ref}/plan", params={"gap": 0.2}).json()
        for ref in (str(seeded.version_id), name, f"{name}@v1")
    ]
    assert plans[0] == plans[1] == plans[2] and plans[0]["size"] is not None


def test_a_second_version_makes_the_name_mean_v2_while_name_at_v1_keeps_v1(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    name = _name(db_session, seeded)
    v2_id = _second_version(db_session, seeded)
    latest = client.get(f"/v1/benchmarks/{name}").json()
    v1 = client.get(f"/v1/benchmarks/{name}@v1").json()
    v2 = client.get(f"/v1/benchmarks/{name}@v2").json()
    by_id = client.get(f"/v1/benchmarks/{seeded.version_id}").json()
    assert latest["id"] == latest["version_id"] == str(v2_id) and latest["version"] == 2
    assert latest == v2
    assert v1["id"] == v1["version_id"] == str(seeded.version_id) and v1["version"] == 1
    assert v1 == by_id
    assert v1["n_items"] == 448 and v2["n_items"] == 100
    # benchmark_id is the parent: one benchmark, two versions
    parent = get_version(db_session, seeded.version_id).benchmark_id
    assert v1["benchmark_id"] == v2["benchmark_id"] == str(parent) != v1["version_id"]
    # routes below the version follow the same resolution
    assert client.get(f"/v1/benchmarks/{name}/models").json()["items"] == []
    models_v1 = client.get(f"/v1/benchmarks/{name}@v1/models").json()["items"]
    assert len(models_v1) == 12
    assert {m["version_id"] for m in models_v1} == {str(seeded.version_id)}
    assert all("benchmark_id" not in m for m in models_v1)
    # a verdict by name now asks v2, which has no results for these models
    params = {"model_a": seeded.names[0], "model_b": seeded.names[1], "size": 25}
    assert client.get(f"/v1/benchmarks/{name}/verdict", params=params).status_code == 404
    assert client.get(f"/v1/benchmarks/{name}@v1/verdict", params=params).status_code == 200


@pytest.mark.parametrize(
    ("method", "suffix", "kwargs"),
    [
        ("GET", "", {}),
        ("GET", "/verdict", {"params": {"model_a": "a", "model_b": "b", "size": 5}}),
        ("GET", "/plan", {"params": {"gap": 0.1}}),
        ("GET", "/models", {}),
        ("GET", "/matrix", {}),
        ("GET", "/analyses", {}),
        ("GET", "/leaderboard", {}),
        ("DELETE", "/models/org/m", {}),
        ("POST", "/results", {"json": {"model": "m", "correct": [1, 0]}}),
        ("POST", "/subsets", {"json": {"method": "random", "size": 3}}),
        ("POST", "/analyses", {"json": {"methods": ["random"], "sizes": [5]}}),
    ],
)
def test_unknown_name_is_a_404_problem_naming_it(
    client: TestClient, method: str, suffix: str, kwargs: dict
) -> None:
    name = f"no-such-bench-{uuid.uuid4().hex[:6]}"
    r = client.request(method, f"/v1/benchmarks/{name}{suffix}", **kwargs)
    assert r.status_code == 404, r.text
    assert r.headers["content-type"] == PROBLEM
    body = r.json()
    assert _locs(body) == [["path", "benchmark"]]
    assert body["errors"][0]["field"] == "path.benchmark"
    assert name in body["detail"]


def test_unknown_version_number_and_unknown_version_id_are_404(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    name = _name(db_session, seeded)
    r = client.get(f"/v1/benchmarks/{name}@v9")
    assert r.status_code == 404 and r.headers["content-type"] == PROBLEM
    assert _locs(r.json()) == [["path", "benchmark"]]
    assert name in r.json()["detail"] and "9" in r.json()["detail"]
    missing = uuid.uuid4()
    r = client.get(f"/v1/benchmarks/{missing}/models")
    assert r.status_code == 404 and _locs(r.json()) == [["path", "benchmark"]]
    assert str(missing) in r.json()["detail"]


def test_results_upload_by_name_lands_on_the_version_it_names(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    name = _name(db_session, seeded)
    v2_id = _second_version(db_session, seeded)
    correct = [1, 0] * 50
    r = client.post(f"/v1/benchmarks/{name}/results", json={"model": "new", "correct": correct})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["version_id"] == str(v2_id) and "benchmark_id" not in body
    assert body["n_items"] == 100 and body["accuracy"] == pytest.approx(0.5)
    keyed = {i: 1.0 for i in seeded.item_ids[:10]}
    r = client.post(f"/v1/benchmarks/{name}@v1/results", json={"model": "new", "results": keyed})
    assert r.status_code == 201, r.text
    assert r.json()["version_id"] == str(seeded.version_id) and r.json()["n_items"] == 10
    v1_models = client.get(f"/v1/benchmarks/{seeded.version_id}/models").json()["items"]
    assert "new" in {m["model"]["name"] for m in v1_models}
    r = client.delete(f"/v1/benchmarks/{name}/models/new")
    assert r.status_code == 204
    assert client.get(f"/v1/benchmarks/{name}/models").json()["items"] == []


def test_names_needing_escapes_resolve(client: TestClient, db_session: Session) -> None:
    name = f"my bench #{uuid.uuid4().hex[:4]}?x=1"
    version, _ = create_version(db_session, name, ["a", "b", "c"], ["s", "s", "s"], None, None)
    db_session.commit()
    from urllib.parse import quote

    r = client.get(f"/v1/benchmarks/{quote(name, safe='')}")
    assert r.status_code == 200, r.text
    assert r.json()["version_id"] == str(version.id) and r.json()["name"] == name
    r = client.get(f"/v1/benchmarks/{quote(name, safe='')}@v1/matrix")
    assert r.status_code == 200


def test_subset_and_analysis_responses_say_version_id(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    name = _name(db_session, seeded)
    req = subset_service.resolve_request(db_session, seeded.version_id, "random", 5, {}, 3, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    # the same request by name answers the stored subset (200), which names its version
    r = client.post(
        f"/v1/benchmarks/{name}/subsets", json={"method": "random", "size": 5, "seed": 3}
    )
    assert r.status_code == 200, r.text
    assert r.json()["id"] == subset.id and r.json()["version_id"] == str(seeded.version_id)
    assert "benchmark_id" not in r.json() and r.json()["benchmark"] == name
    listed = client.get(f"/v1/benchmarks/{name}@v1/analyses")
    assert listed.status_code == 200 and listed.json()["items"] == []
    assert "version_id" in AnalysisPublic.model_fields
    assert "benchmark_id" not in AnalysisPublic.model_fields


def test_old_benchmark_id_keys_are_still_read() -> None:
    """Clients of older servers and stored replies say ``benchmark_id`` for the version."""
    vid = uuid.uuid4()
    base = {
        "model": {
            "id": str(uuid.uuid4()),
            "name": "m",
            "params_b": None,
            "family": None,
            "tags": [],
        },
        "n_items": 1,
        "coverage": 1.0,
        "accuracy": 1.0,
        "binary": True,
        "has_confidence": False,
        "content_hash": "h",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
    }
    assert ModelResultPublic.model_validate({**base, "benchmark_id": str(vid)}).version_id == vid
    assert ModelResultPublic.model_validate({**base, "version_id": str(vid)}).version_id == vid
    assert (
        "benchmark_id"
        not in ModelResultPublic.model_validate({**base, "version_id": str(vid)}).model_dump()
    )
    assert "version_id" in SubsetPublic.model_fields
    # subset job params: the old key is accepted and rewritten
    params = subset_service.validate_job_params(
        {"benchmark_id": str(vid), "method": "random", "size": 5}
    )
    assert params["version_id"] == str(vid) and "benchmark_id" not in params
    assert subset_service.job_version_id({"benchmark_id": str(vid)}) == str(vid)
    assert subset_service.job_version_id({"version_id": str(vid)}) == str(vid)
    # a stored reply is upgraded only where the old key meant the version (results uploads)
    legacy = {"benchmark_id": str(vid), "status": "created"}
    assert idempotency.upgraded_response(f"results/{vid}/x", legacy) == {
        "version_id": str(vid),
        "status": "created",
    }
    assert idempotency.upgraded_response(None, legacy) == legacy


def test_a_reply_stored_with_the_old_key_is_replayed_with_the_new_one(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    name = _name(db_session, seeded)
    url = f"/v1/benchmarks/{name}/results"
    payload = {"model": "replayed", "correct": [1] * 448}
    first = client.post(url, json=payload, headers={"Idempotency-Key": "legacy-1"})
    assert first.status_code == 201, first.text
    row = db_session.scalars(select(IdempotencyKey).where(IdempotencyKey.key == "legacy-1")).one()
    old = dict(row.response)
    old["benchmark_id"] = old.pop("version_id")  # as stored before the rename
    row.response = old
    db_session.commit()
    replay = client.post(url, json=payload, headers={"Idempotency-Key": "legacy-1"})
    assert replay.headers["idempotency-replayed"] == "true"
    assert replay.json() == first.json() and replay.json()["version_id"] == str(seeded.version_id)


@pytest.mark.parametrize(
    "name", ["gpqa@v2", "3f0c6a52-7d1e-4b8a-9c2d-5e6f7a8b9c0d", "3f0c6a527d1e4b8a9c2d5e6f7a8b9c0d"]
)
def test_a_name_that_reads_as_a_version_reference_is_refused(client: TestClient, name: str) -> None:
    r = client.post("/v1/benchmarks", json={"name": name, "items": [{"id": "a"}, {"id": "b"}]})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert _locs(r.json()) == [["body", "name"]]
    assert client.get(f"/v1/benchmarks/{name}").status_code == 404  # nothing was created
