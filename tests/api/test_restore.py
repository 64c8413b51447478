"""Writes that can be undone (issue 25): replace → restore and delete → restore give back the
results byte for byte, and verdicts, leaderboards and matrices follow; retired versions leave
name resolution and come back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import LanguageModel, ModelResult, ModelResultArchive
from app.db.models.model_result import ARCHIVED_COLUMNS
from app.services.catalog import matrices
from tests.api._teams import make_benchmark, seed_results, upload

N_ITEMS = 40


@pytest.fixture
def bench(client: TestClient, db_session: Session, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(matrices, "STAMP_TTL_SECONDS", 0.0)  # caches re-check the stamp at once
    make_benchmark(client, {}, "undo", n_items=N_ITEMS)
    names = seed_results(client, {}, "undo", n_models=6, seed=7)
    db_session.commit()
    return names


def _stored(db_session: Session, model: str) -> dict[str, Any]:
    """Every stored column of a model's results row (except ``updated_at``)."""
    db_session.expire_all()
    row = db_session.scalars(
        select(ModelResult).join(LanguageModel).where(LanguageModel.name == model)
    ).one()
    return {c: getattr(row, c) for c in (*ARCHIVED_COLUMNS, "id", "created_at")}


def _observed(client: TestClient, names: list[str]) -> tuple:
    """What clients see: the matrix bytes, the model list, a verdict and the leaderboard."""
    matrix = client.get("/v1/benchmarks/undo/matrix").content
    models = client.get("/v1/benchmarks/undo/models").json()["items"]
    for m in models:
        m.pop("updated_at")
    verdict = client.get(
        "/v1/benchmarks/undo/verdict",
        params={"model_a": names[0], "model_b": names[1], "size": 10},
    )
    board = client.get("/v1/benchmarks/undo/leaderboard")
    assert verdict.status_code == 200 and board.status_code == 200, (verdict.text, board.text)
    return matrix, models, verdict.json(), board.json()


def test_replace_then_restore_is_byte_identical(
    client: TestClient, db_session: Session, bench: list[str]
) -> None:
    target = bench[0]
    stored, seen = _stored(db_session, target), _observed(client, bench)
    flipped = 1 - np.frombuffer(np.unpackbits(np.frombuffer(stored["correct"], np.uint8)), np.uint8)
    r = upload(client, {}, "undo", target, flipped[:N_ITEMS], replace="true")
    assert r.status_code == 200 and r.json()["status"] == "replaced"
    changed = _observed(client, bench)
    assert changed[0] != seen[0] and changed[2] != seen[2]  # the replace was visible
    restored = client.post(f"/v1/benchmarks/undo/models/{target}/restore")
    assert restored.status_code == 200, restored.text
    assert restored.json()["status"] == "restored"
    assert _stored(db_session, target) == stored
    assert _observed(client, bench) == seen
    # the restore is itself undoable: restoring again brings back the replacement
    again = client.post(f"/v1/benchmarks/undo/models/{target}/restore")
    assert again.status_code == 200 and _observed(client, bench)[0] == changed[0]


def test_delete_then_restore_is_byte_identical(
    client: TestClient, db_session: Session, bench: list[str]
) -> None:
    target = bench[2]
    stored, seen = _stored(db_session, target), _observed(client, bench)
    assert client.delete(f"/v1/benchmarks/undo/models/{target}").status_code == 204
    gone = client.get("/v1/benchmarks/undo/models").json()["items"]
    assert target not in {m["model"]["name"] for m in gone}
    assert client.post(f"/v1/benchmarks/undo/models/{target}/restore").status_code == 200
    assert _stored(db_session, target) == stored  # same row id and creation time too
    assert _observed(client, bench) == seen
    # nothing left to restore
    nothing = client.post(f"/v1/benchmarks/undo/models/{target}/restore")
    assert nothing.status_code == 404


def test_restore_past_the_retention_period_is_gone(
    client: TestClient, db_session: Session, bench: list[str], app: Any
) -> None:
    target = bench[3]
    assert client.delete(f"/v1/benchmarks/undo/models/{target}").status_code == 204
    retention = app.state.settings.results_retention
    db_session.execute(
        update(ModelResultArchive).values(archived_at=utcnow() - retention - timedelta(seconds=1))
    )
    db_session.commit()
    assert client.post(f"/v1/benchmarks/undo/models/{target}/restore").status_code == 404
    # the 404 rolled its request back; the next archived write purges the expired copy
    assert client.delete(f"/v1/benchmarks/undo/models/{bench[4]}").status_code == 204
    db_session.expire_all()
    left = db_session.scalars(select(ModelResultArchive)).all()
    assert [a.reason for a in left] == ["deleted"] and len(left) == 1
    assert (
        left[0].model_id
        != db_session.scalars(select(LanguageModel.id).where(LanguageModel.name == target)).one()
    )


def test_retired_versions_leave_name_resolution(client: TestClient, db_session: Session) -> None:
    v1 = make_benchmark(client, {}, "ret", n_items=3)
    v2 = client.post("/v1/benchmarks", json={"name": "ret", "items": [{"id": "z"}]}).json()
    assert client.get("/v1/benchmarks/ret").json()["id"] == v2["id"]
    retired = client.post("/v1/benchmarks/ret@v2/retire")
    assert retired.status_code == 200 and retired.json()["retired"] is True
    assert client.get("/v1/benchmarks/ret").json()["id"] == v1["id"]
    by_number = client.get("/v1/benchmarks/ret@v2")
    assert by_number.status_code == 404 and "retired" in by_number.json()["detail"]
    assert client.get(f"/v1/benchmarks/{v2['id']}").json()["retired"] is True
    assert client.post(f"/v1/benchmarks/{v1['id']}/retire").status_code == 200
    everything = client.get("/v1/benchmarks/ret")
    assert everything.status_code == 404 and "retired" in everything.json()["detail"]
    back = client.post("/v1/benchmarks/ret@v2/unretire")
    assert back.status_code == 200 and back.json()["retired"] is False
    assert client.get("/v1/benchmarks/ret").json()["id"] == v2["id"]


def test_a_matrix_upload_that_replaces_rows_can_be_undone(
    client: TestClient, db_session: Session, bench: list[str]
) -> None:
    """`POST …/results/matrix?replace=true` archives each row it replaces, like one upload."""
    import io

    stored, seen = _stored(db_session, bench[1]), _observed(client, bench)
    buf = io.BytesIO()
    np.savez(
        buf,
        correct=np.zeros((2, N_ITEMS), dtype=np.uint8),
        models=np.array(bench[:2]),
    )
    r = client.post(
        "/v1/benchmarks/undo/results/matrix",
        params={"replace": "true"},
        content=buf.getvalue(),
        headers={"content-type": "application/x-npz"},
    )
    assert r.status_code == 200 and r.json()["replaced"] == 2, r.text
    for model in bench[:2]:
        assert client.post(f"/v1/benchmarks/undo/models/{model}/restore").status_code == 200
    assert _stored(db_session, bench[1]) == stored
    assert _observed(client, bench) == seen
