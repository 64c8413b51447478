"""Sessions a CI job can live with (issue 23), over HTTP on Postgres: the listing of a
benchmark's sessions (model and state filters, keyset pages) and ``abandoned`` sessions.

Oracles: the sessions this test created (ids, models, states) and the idle limit: a session
whose last activity is moved back past ``SESSION_IDLE_HOURS`` (default 24) reads as
``abandoned`` and takes no more batches, one moved back by less does not.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import EvaluationSession
from app.services.evaluation import sessions as sessions_service
from tests.api._subset_data import Seeded, seed_gpqa

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    s = seed_gpqa(db_session, n_models=6)
    db_session.commit()
    return s


def _start(client: TestClient, seeded: Seeded, model: str, **kw) -> dict:
    body = {"model": model, "baseline": seeded.names[0], "batch_size": 10, "seed": 1, **kw}
    r = client.post(f"/v1/benchmarks/{seeded.version_id}/sessions", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _answer(client: TestClient, body: dict, truth: np.ndarray, ids: list[str], **kw):
    values = [float(truth[ids.index(it["item_id"])]) for it in body["next_items"]]
    return client.post(
        f"/v1/sessions/{body['id']}/results?batch={body['step'] + 1}",
        json={"model": body["model"], "correct": values},
        **kw,
    )


def _idle(db: Session, sid: str, hours: float) -> None:
    """Move the session's last activity ``hours`` back."""
    db.execute(
        update(EvaluationSession)
        .where(EvaluationSession.id == sid)
        .values(updated_at=utcnow() - timedelta(hours=hours))
        .execution_options(synchronize_session=False)
    )
    db.commit()
    db.expire_all()


def _fields(r) -> set[str]:
    assert r.headers["content-type"].startswith(PROBLEM), r.text
    return {e["loc"][-1] for e in r.json().get("errors") or []}


def test_an_idle_session_is_abandoned(client: TestClient, db_session: Session, seeded) -> None:
    truth = seeded.correct[3].astype(float)
    body = _start(client, seeded, "ci/model")
    first = _answer(client, body, truth, seeded.item_ids)
    assert first.status_code == 200, first.text
    _idle(db_session, body["id"], 23.5)  # within the default 24 h
    assert client.get(f"/v1/sessions/{body['id']}").json()["state"] == "open"
    _idle(db_session, body["id"], 24.5)
    now = client.get(f"/v1/sessions/{body['id']}").json()
    assert now["state"] == "abandoned" and now["items_used"] == 10
    # the state follows the limit in force: a longer one, or 0 (never), reads it as open
    for hours, state in ((24.0, "abandoned"), (48.0, "open"), (0.0, "open")):
        pub = sessions_service.get_session_public(
            db_session, uuid.UUID(body["id"]), idle_hours=hours
        )
        assert pub.state == state, hours
    r = _answer(client, first.json(), truth, seeded.item_ids)
    assert r.status_code == 409 and "session_id" in _fields(r), r.text
    assert "abandoned" in r.json()["detail"]
    # a resend of the batch it answered is still answered (nothing changes)
    again = _answer(client, body, truth, seeded.item_ids)
    assert again.status_code == 200 and again.headers.get("Idempotency-Replayed") == "true"
    assert again.json()["state"] == "abandoned"
    assert client.get(f"/v1/sessions/{body['id']}").json() == now
    # the idle time is counted from the last batch: an idle session without any batch too
    fresh = _start(client, seeded, "ci/never-ran")
    _idle(db_session, fresh["id"], 30)
    r = _answer(client, fresh, truth, seeded.item_ids)
    assert r.status_code == 409 and "session_id" in _fields(r), r.text


def test_listing_filters_and_pages(client: TestClient, db_session: Session, seeded) -> None:
    truth = seeded.correct[3].astype(float)
    url = f"/v1/benchmarks/{seeded.version_id}/sessions"
    made = {}
    for k in range(3):
        made[_start(client, seeded, "ci/a", seed=k)["id"]] = "open"
    b = _start(client, seeded, "ci/b", max_items=10)
    assert _answer(client, b, truth, seeded.item_ids).json()["state"] in ("decided", "exhausted")
    made[b["id"]] = client.get(f"/v1/sessions/{b['id']}").json()["state"]
    idle = _start(client, seeded, "ci/b", seed=9)
    _idle(db_session, idle["id"], 48)
    made[idle["id"]] = "abandoned"

    everything = client.get(url).json()
    assert {s["id"]: s["state"] for s in everything["items"]} == made
    assert everything["next_cursor"] is None
    created = [s["created_at"] for s in everything["items"]]
    assert created == sorted(created, reverse=True)  # newest first
    # pages of 2 walk the same list once
    seen, cursor = [], None
    while True:
        page = client.get(url, params={"limit": 2, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        seen += [s["id"] for s in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == [s["id"] for s in everything["items"]]
    # filters
    by_model = client.get(url, params={"model": "ci/b"}).json()["items"]
    assert {s["id"] for s in by_model} == {b["id"], idle["id"]}
    for state in ("open", "abandoned", "decided", "exhausted"):
        got = {s["id"] for s in client.get(url, params={"state": state}).json()["items"]}
        assert got == {sid for sid, st in made.items() if st == state}, state
    both = client.get(url, params={"model": "ci/b", "state": "abandoned"}).json()["items"]
    assert [s["id"] for s in both] == [idle["id"]]
    row = next(s for s in everything["items"] if s["id"] == b["id"])
    assert row["items_used"] == 10 and row["model"] == "ci/b" and row["n_items"] == 448
    # bad input names the field
    for params, field in [
        ({"state": "sleeping"}, "state"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
    ]:
        r = client.get(url, params=params)
        assert r.status_code == 422 and field in _fields(r), (params, r.text)
    assert client.get("/v1/benchmarks/no-such-bench/sessions").status_code == 404
