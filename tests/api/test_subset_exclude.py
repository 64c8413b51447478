"""Subset requests with exclude: flagged items never become candidates; the subset records it."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.core.items.health import item_health
from app.core.selectors import make_selector
from app.db.models import Job
from app.enums import JobStatus
from tests.api._subset_data import Seeded, seed_gpqa
from worker.runner import execute_job

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=30)
    db_session.commit()
    return seeded


@pytest.fixture
def factory(db_session: Session) -> sessionmaker[Session]:
    return sessionmaker(
        bind=db_session.connection(),
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
    )


def _subset(client, factory, seeded, body) -> dict:
    r = client.post(f"/v1/benchmarks/{seeded.version_id}/subsets", json=body)
    assert r.status_code == 202, r.text
    assert execute_job(factory, uuid.UUID(r.json()["id"])) is JobStatus.succeeded
    with factory() as s:
        sid = s.get(Job, uuid.UUID(r.json()["id"])).result["subset_id"]
    return client.get(f"/v1/subsets/{sid}").json()


def test_exclude_flagged_drops_the_flagged_items(
    client: TestClient, seeded: Seeded, factory: sessionmaker[Session]
) -> None:
    h = item_health(seeded.correct.astype(float))
    flagged = np.flatnonzero(h.flagged())
    constant = np.flatnonzero(h.flags["constant"])
    assert constant.size > 5  # 30 models: many items all right or all wrong
    body = {"method": "random", "size": 300, "seed": 3, "exclude": "flagged"}
    got = _subset(client, factory, seeded, body)
    positions = [it["position"] for it in got["items"]]
    assert not set(positions) & set(flagged.tolist())
    prov = got["provenance"]
    assert prov["exclude"] == ["constant", "saturated", "negative_discrimination", "misfit"]
    assert prov["n_candidates"] == 448 - flagged.size and "exclude" not in prov["params"]
    # the engine with the same candidates and seed draws the same items
    cand = np.setdiff1d(np.arange(448), flagged)
    sel = make_selector("random").fit(np.zeros((1, 448)), candidates=cand).select(300, rng=3)
    assert positions == sorted(sel.indices.tolist())
    # a list of flags; a new id (exclude enters the content hash); the plain request differs
    only = _subset(client, factory, seeded, {**body, "exclude": ["constant"]})
    assert only["provenance"]["exclude"] == ["constant"] and only["id"] != got["id"]
    assert not set(it["position"] for it in only["items"]) & set(constant.tolist())
    plain = _subset(client, factory, seeded, {k: v for k, v in body.items() if k != "exclude"})
    assert plain["provenance"]["exclude"] == [] and plain["id"] not in (got["id"], only["id"])


def test_exclude_errors_name_the_field(client: TestClient, seeded: Seeded) -> None:
    url = f"/v1/benchmarks/{seeded.version_id}/subsets"
    r = client.post(url, json={"method": "random", "size": 10, "exclude": ["wrong_key"]})
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
    assert any("exclude" in e["loc"] for e in r.json()["errors"]), r.json()
    r = client.post(url, json={"method": "random", "size": 10, "exclude": "all"})
    assert r.status_code == 422 and any("exclude" in e["loc"] for e in r.json()["errors"])
    r = client.post(url, json={"method": "random", "size": 448, "exclude": "flagged"})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"][-1] == "size"
