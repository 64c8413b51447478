"""Subsets: discriminated params, content-addressed ids, the subset job, fetch and exports."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.selectors import SELECTORS, make_selector
from app.db.models import Job, JobStatus, Subset
from app.schemas.subsets import method_tags
from app.services.selection import subsets as service
from tests.api._subset_data import Seeded, seed_gpqa
from worker.runner import execute_job

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=30)
    db_session.commit()  # a later failing request rolls back to here, not before the data
    return seeded


@pytest.fixture
def factory(db_session: Session) -> sessionmaker[Session]:
    return sessionmaker(
        bind=db_session.connection(),
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
    )


def _run(factory: sessionmaker[Session], job_id: str) -> Job:
    assert execute_job(factory, uuid.UUID(job_id)) is JobStatus.succeeded
    with factory() as s:
        job = s.get(Job, uuid.UUID(job_id))
        assert job is not None
        return job


def test_union_tags_equal_the_selector_registry() -> None:
    assert method_tags() == set(SELECTORS)


def test_request_runs_job_then_same_request_returns_the_stored_subset(
    client: TestClient, seeded: Seeded, factory: sessionmaker[Session]
) -> None:
    body = {"method": "random", "size": 25, "seed": 7}
    r = client.post(f"/v1/benchmarks/{seeded.version_id}/subsets", json=body)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert r.headers["location"] == f"/v1/jobs/{job_id}"
    assert r.json()["seed"] == 7
    job = _run(factory, job_id)
    sid = job.result["subset_id"]
    assert job.result["created"] is True and len(sid) == 64

    again = client.post(f"/v1/benchmarks/{seeded.version_id}/subsets", json=body)
    assert again.status_code == 200, again.text
    assert again.headers["location"] == f"/v1/subsets/{sid}"
    assert again.json()["id"] == sid

    # known answer: the engine's own selection with the stored seed
    expected = make_selector("random").fit(np.zeros((1, 448))).select(25, rng=7)
    got = client.get(f"/v1/subsets/{sid}").json()
    assert [it["position"] for it in got["items"]] == sorted(expected.indices.tolist())
    assert got["provenance"]["seed"] == 7 and got["provenance"]["source_models"] == []
    assert got["provenance"]["signal"] == "none" and got["estimator"] == "mean"
    assert all(it["weight"] == pytest.approx(1 / 25) for it in got["items"])
    assert got["items"][0]["item_id"] == seeded.item_ids[got["items"][0]["position"]]

    other = client.post(f"/v1/benchmarks/{seeded.version_id}/subsets", json={**body, "seed": 8})
    assert other.status_code == 202


def test_exports_ids_csv_and_lm_eval(
    client: TestClient, seeded: Seeded, factory: sessionmaker[Session]
) -> None:
    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/subsets",
        json={"method": "subtask_stratified", "size": 20, "seed": 3},
    )
    sid = _run(factory, r.json()["id"]).result["subset_id"]
    full = client.get(f"/v1/subsets/{sid}").json()
    positions = [it["position"] for it in full["items"]]
    assert positions == sorted(positions) and len(positions) == 20

    ids = client.get(f"/v1/subsets/{sid}", params={"format": "ids"})
    assert ids.json() == [seeded.item_ids[p] for p in positions]

    text = client.get(f"/v1/subsets/{sid}", params={"format": "csv"})
    assert text.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(text.text)))
    assert list(rows[0]) == ["item_id", "doc_id", "position", "subtask", "weight"]
    subs = np.array(seeded.subtasks)
    for row in rows:  # doc_id = position within the subtask
        p = int(row["position"])
        assert row["subtask"] == subs[p]
        assert int(row["doc_id"]) == int((subs[:p] == subs[p]).sum())
        assert float(row["weight"]) == pytest.approx(1 / 20)

    lm = client.get(f"/v1/subsets/{sid}", params={"format": "lm-eval"}).json()
    assert set(lm) == {"gpqa_a", "gpqa_b"}
    for task, docs in lm.items():
        assert docs == sorted(docs)
        assert sorted(docs) == sorted(int(r["doc_id"]) for r in rows if r["subtask"] == task)
    # equal allocation over the two subtasks
    assert sorted(len(v) for v in lm.values()) == [10, 10]


def test_source_model_method_records_sources_and_fallback_signal(
    client: TestClient, seeded: Seeded, factory: sessionmaker[Session]
) -> None:
    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/subsets",
        json={
            "method": "confidence_stratified",
            "size": 30,
            "seed": 1,
            "source_models": seeded.names[:12],
        },
    )
    assert r.status_code == 202, r.text
    params = r.json()["params"]  # a count and a content hash, not the names (issue 16.6)
    assert "source_models" not in params and params["n_source_models"] == 12
    names_json = json.dumps(sorted(seeded.names[:12]), separators=(",", ":"))
    assert params["source_models_sha256"] == hashlib.sha256(names_json.encode()).hexdigest()
    assert not any(name in r.text for name in seeded.names)
    sid = _run(factory, r.json()["id"]).result["subset_id"]
    got = client.get(f"/v1/subsets/{sid}").json()
    assert got["provenance"]["source_models"] == sorted(seeded.names[:12])
    assert (
        got["provenance"]["signal"] == "correct" and got["provenance"]["confidence_used"] is False
    )
    assert got["estimator"] == "horvitz_thompson"
    # same as the engine fitted on the same sources with the same seed
    rows = [seeded.names.index(n) for n in sorted(seeded.names[:12])]
    sel = make_selector("confidence_stratified").fit(seeded.correct[rows]).select(30, rng=1)
    assert sorted(sel.indices.tolist()) == [it["position"] for it in got["items"]]


def test_default_sources_are_all_full_coverage_models(db_session: Session, seeded: Seeded) -> None:
    req = service.resolve_request(db_session, seeded.version_id, "dpp", 10, {}, 5, None)
    assert req.source_names == seeded.names
    subset, created = service.build_subset(db_session, req, None)
    assert created and subset.size == 10
    again, created_again = service.build_subset(db_session, req, None)
    assert not created_again and again.id == subset.id
    assert service.to_selection(again).seed == 5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"method": "random", "size": 449, "seed": 1}, "size"),
        ({"method": "nope", "size": 4}, "method"),
        ({"method": "dpp", "size": 4, "params": {"weighting": "x"}}, "weighting"),
        ({"method": "random", "size": 4, "params": {"allocation": "equal"}}, "allocation"),
        ({"method": "dpp", "size": 4, "source_models": ["ghost"]}, "source_models"),
    ],
)
def test_invalid_requests_are_422_naming_the_field(
    client: TestClient, seeded: Seeded, body: dict, field: str
) -> None:
    r = client.post(f"/v1/benchmarks/{seeded.version_id}/subsets", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    assert any(field in e["field"] or field in e["message"] for e in r.json()["errors"]), r.json()


def test_unknown_benchmark_and_subset_are_404(client: TestClient) -> None:
    r = client.post(f"/v1/benchmarks/{uuid.uuid4()}/subsets", json={"method": "random", "size": 3})
    assert r.status_code == 404 and r.headers["content-type"] == PROBLEM
    r = client.get(f"/v1/subsets/{'0' * 64}")
    assert r.status_code == 404 and r.headers["content-type"] == PROBLEM


def test_subset_job_params_are_validated_for_generic_job_creation(client: TestClient) -> None:
    r = client.post("/v1/jobs", json={"kind": "subset", "params": {"method": "random"}})
    assert r.status_code == 422
    fields = {e["field"] for e in r.json()["errors"]}
    assert "body.params.version_id" in fields and "body.params.random.size" in fields


def test_cached_render_answers_404_once_the_subset_is_gone_and_revalidated(
    client: TestClient, db_session: Session, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    req = service.resolve_request(db_session, seeded.version_id, "random", 5, {}, 11, None)
    subset, _ = service.build_subset(db_session, req, None)
    assert client.get(f"/v1/subsets/{subset.id}", params={"format": "ids"}).status_code == 200
    db_session.delete(db_session.get(Subset, subset.id))
    db_session.flush()
    # within the revalidation window the immutable rendering is served from the cache
    assert client.get(f"/v1/subsets/{subset.id}", params={"format": "ids"}).status_code == 200
    monkeypatch.setattr(service, "RENDER_REVALIDATE_SECONDS", 0.0)
    assert client.get(f"/v1/subsets/{subset.id}", params={"format": "ids"}).status_code == 404
    assert json.loads(
        service.render(service.to_public(subset, _version(db_session, seeded)), "ids")
    )


def _version(session: Session, seeded: Seeded):
    from app.services.catalog.benchmarks import get_version

    return get_version(session, seeded.version_id)


def test_param_defaults_match_the_selectors() -> None:
    import inspect

    from app.schemas.subsets import SUBSET_CREATE_MODELS

    for model in SUBSET_CREATE_MODELS:
        tag = model.model_fields["method"].annotation.__args__[0]
        params_cls = model.model_fields["params"].default_factory
        sig = inspect.signature(SELECTORS[tag].__init__)
        defaults = {
            k: p.default
            for k, p in sig.parameters.items()
            if k != "self" and p.kind is not p.VAR_KEYWORD
        }
        assert params_cls().model_dump() == defaults, tag


def test_scopes_reads_need_read_writes_need_write(
    app, client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    from app.services.access.keys import create_key

    req = service.resolve_request(db_session, seeded.version_id, "random", 5, {}, 2, None)
    subset, _ = service.build_subset(db_session, req, None)
    _, read = create_key(db_session, "subset-read", ["read"])
    db_session.commit()
    original = app.state.settings
    app.state.settings = original.model_copy(update={"auth_enabled": True})
    try:
        hdr = {"Authorization": f"Bearer {read}"}
        post = f"/v1/benchmarks/{seeded.version_id}/subsets"
        body = {"method": "random", "size": 5, "seed": 2}
        assert client.post(post, json=body).status_code == 401
        assert client.post(post, json=body, headers=hdr).status_code == 403
        assert client.get(f"/v1/subsets/{subset.id}").status_code == 401
        assert client.get(f"/v1/subsets/{subset.id}", headers=hdr).status_code == 200
        names = {"model_a": seeded.names[0], "model_b": seeded.names[1]}
        verdict = f"/v1/benchmarks/{seeded.version_id}/verdict"
        assert client.get(verdict, params=names, headers=hdr).status_code == 200
        scores = f"/v1/subsets/{subset.id}/scores"
        assert (
            client.post(scores, json={"model": "m", "correct": [1] * 5}, headers=hdr).status_code
            == 403
        )
    finally:
        app.state.settings = original


def test_identical_requests_share_the_active_job_and_a_new_seed_is_new_work(
    client: TestClient, seeded: Seeded, db_session: Session, factory: sessionmaker[Session]
) -> None:
    url = f"/v1/benchmarks/{seeded.version_id}/subsets"
    body = {"method": "dpp", "size": 8, "seed": 21}
    first = client.post(url, json=body)
    again = client.post(url, json=body)
    assert first.status_code == again.status_code == 202, again.text
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["location"] == first.headers["location"]
    other = client.post(url, json={**body, "seed": 22})
    assert other.status_code == 202 and other.json()["id"] != first.json()["id"]
    rows = db_session.scalars(select(Job).where(Job.kind == "subset")).all()
    assert sorted(str(j.id) for j in rows) == sorted([first.json()["id"], other.json()["id"]])
    assert first.json()["params"]["n_source_models"] == len(seeded.names)
    assert not any(name in first.text for name in seeded.names)

    sid = _run(factory, first.json()["id"]).result["subset_id"]
    done = client.post(url, json=body)  # the job ran: the stored subset, with all its sources
    assert done.status_code == 200 and done.json()["id"] == sid
    assert done.json()["provenance"]["source_models"] == sorted(seeded.names)
    assert done.json()["provenance"]["job_id"] == first.json()["id"]


def test_a_failed_identical_job_frees_the_key(
    client: TestClient, seeded: Seeded, db_session: Session
) -> None:
    url = f"/v1/benchmarks/{seeded.version_id}/subsets"
    body = {"method": "random", "size": 5, "seed": 99}
    first = client.post(url, json=body).json()["id"]
    job = db_session.get(Job, uuid.UUID(first))
    assert job is not None
    job.status = JobStatus.failed
    db_session.commit()
    retry = client.post(url, json=body)
    assert retry.status_code == 202 and retry.json()["id"] != first
