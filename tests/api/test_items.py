"""GET /v1/benchmarks/{benchmark}/items: item health rows, flags, summary, pagination, 422s."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.items.health import FLAGS
from tests.api._subset_data import seed_gpqa, store_irt_fit

PROBLEM = "application/problem+json"


def _all_pages(client: TestClient, url: str, **params) -> tuple[list[dict], dict]:
    rows, cursor, summary = [], None, None
    while True:
        q = {**params, **({"cursor": cursor} if cursor else {})}
        r = client.get(url, params=q)
        assert r.status_code == 200, r.text
        body = r.json()
        rows += body["items"]
        summary = body["summary"]
        cursor = body["next_cursor"]
        if cursor is None:
            return rows, summary


def test_gpqa_constant_items_and_statistics(client: TestClient, db_session: Session) -> None:
    seeded = seed_gpqa(db_session, n_models=420)
    db_session.commit()
    url = f"/v1/benchmarks/{seeded.version_id}/items"
    c = seeded.correct.astype(float)
    const, summary = _all_pages(client, url, flag="constant", limit=2)
    wrong = np.flatnonzero(c.sum(axis=0) == 0)
    right = np.flatnonzero(c.sum(axis=0) == c.shape[0])
    assert (wrong.size, right.size) == (3, 2)
    assert [r["position"] for r in const] == sorted(np.r_[wrong, right].tolist())
    assert all(r["flags"] == ["constant"] and r["point_biserial"] is None for r in const)
    assert {r["accuracy"] for r in const} == {0.0, 1.0}
    assert summary["counts"]["constant"] == 5 and summary["n_models"] == 420
    assert summary["irt"] is False and summary["n_items"] == 448

    rows, _ = _all_pages(client, url, limit=1000)
    assert [r["position"] for r in rows] == list(range(448))
    assert [r["item_id"] for r in rows] == seeded.item_ids
    total = c.sum(axis=1)
    for i in (0, 100, 447):  # accuracy and rest-score point-biserial vs numpy
        assert rows[i]["accuracy"] == pytest.approx(c[:, i].mean(), abs=1e-12)
        if rows[i]["point_biserial"] is not None:
            ref = np.corrcoef(c[:, i], total - c[:, i])[0, 1]
            assert rows[i]["point_biserial"] == pytest.approx(ref, abs=1e-10)
        assert rows[i]["discrimination"] is None and rows[i]["fit"] is None
    neg = [r for r in rows if "negative_discrimination" in r["flags"]]
    assert len(neg) == summary["counts"]["negative_discrimination"] == 39
    assert all(r["point_biserial"] <= -0.2 for r in neg)
    # the flagged filter is the union; two flags
    both, _ = _all_pages(client, url, flag=["constant", "negative_discrimination"], limit=7)
    assert len(both) == 44 and summary["n_flagged"] == 44
    commas, _ = _all_pages(client, url, flag="constant,negative_discrimination", limit=1000)
    assert commas == both
    # subtask/doc_id: doc_id counts within the subtask
    sub_a = [r for r in rows if r["subtask"] == "gpqa_a"]
    assert [r["doc_id"] for r in sub_a] == list(range(len(sub_a)))


def test_pagination_and_errors(client: TestClient, db_session: Session) -> None:
    seeded = seed_gpqa(db_session, n_models=12)
    db_session.commit()
    url = f"/v1/benchmarks/{seeded.version_id}/items"
    first = client.get(url, params={"limit": 100}).json()
    assert len(first["items"]) == 100 and first["next_cursor"]
    second = client.get(url, params={"limit": 100, "cursor": first["next_cursor"]}).json()
    assert [r["position"] for r in second["items"]] == list(range(100, 200))
    for params, field in (
        ({"flag": "wrong_key"}, "flag"),
        ({"limit": 1001}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
    ):
        r = client.get(url, params=params)
        assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
        assert any(field in e["loc"] for e in r.json()["errors"]), r.json()
    assert client.get("/v1/benchmarks/no-such-bench/items").status_code == 404
    few = seed_gpqa(db_session, n_models=2)
    db_session.commit()
    r = client.get(f"/v1/benchmarks/{few.version_id}/items")
    assert r.status_code == 409 and "at least 3" in r.json()["detail"]
    assert set(FLAGS) == set(first["summary"]["counts"])


def test_stored_irt_fit_gives_discrimination_difficulty_and_fit(
    client: TestClient, db_session: Session
) -> None:
    seeded = seed_gpqa(db_session, n_models=40)
    y = seeded.correct.astype(float)
    model = store_irt_fit(db_session, seeded)
    db_session.commit()
    body = client.get(f"/v1/benchmarks/{seeded.version_id}/items", params={"limit": 1000}).json()
    assert body["summary"]["irt"] is True and body["summary"]["irt_dims"] == 2
    # independent oracle: MAP abilities under the stored parameters, then Wright's infit
    theta = model.score(y).theta
    p = np.clip(1 / (1 + np.exp(-(theta @ model.a.T - model.item_offsets()))), 1e-9, 1 - 1e-9)
    infit = ((y - p) ** 2).sum(axis=0) / (p * (1 - p)).sum(axis=0)
    u = model.a.mean(axis=0) / np.linalg.norm(model.a.mean(axis=0))
    rows = body["items"]
    for i in (5, 200, 400):
        assert rows[i]["fit"] == pytest.approx(infit[i], rel=1e-6)
        assert rows[i]["discrimination"] == pytest.approx(float(model.a[i] @ u), rel=1e-9)
        assert rows[i]["difficulty"] == pytest.approx(
            model.item_offsets()[i] / np.linalg.norm(model.a[i]), rel=1e-9
        )
    misfit = [r for r in rows if "misfit" in r["flags"]]
    assert all(not 0.7 <= r["fit"] <= 1.3 for r in misfit)
