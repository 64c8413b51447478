"""Per-item costs through the API: stored with each result, validated, summarised per item."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import ModelResult


def _bench(client: TestClient, n: int = 4, name: str = "costly") -> dict:
    items = [{"id": f"q{i}"} for i in range(n)]
    r = client.post("/v1/benchmarks", json={"name": name, "items": items})
    assert r.status_code in (200, 201), r.text
    return r.json()


def _csv(tokens, usd) -> bytes:
    rows = ["item_id,correct,tokens,cost"]
    rows += [f"q{i},{i % 2},{t},{u}" for i, (t, u) in enumerate(zip(tokens, usd, strict=True))]
    return ("\n".join(rows) + "\n").encode()


def test_costs_stored_summarised_and_shown(client: TestClient, db_session: Session) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    tokens = {"m1": [100, 200, 300, ""], "m2": [300, 400, 900, ""], "m3": [200, 600, 600, ""]}
    for name, tok in tokens.items():
        r = client.post(
            url,
            params={"model": name},
            content=_csv(tok, [0.1, 0.2, 0.3, 0.4]),
            headers={"content-type": "text/csv"},
        )
        assert r.status_code == 201, r.text
    # a model without costs is stored as before and left out of the summary
    assert client.post(url, json={"model": "plain", "correct": [1, 0, 1, 0]}).status_code == 201
    row = db_session.scalars(
        select(ModelResult).where(ModelResult.cost_source.is_not(None)).limit(1)
    ).one()
    stored = np.frombuffer(row.item_costs, "<f4").reshape(4, 4)
    assert row.cost_source == "csv cost columns"
    assert np.isnan(stored[0]).all() and np.isnan(stored[1, 3])
    detail = client.get(f"/v1/benchmarks/{bench['id']}").json()
    by_unit = {c["unit"]: c for c in detail["costs"]}
    assert set(by_unit) == {"output_tokens", "usd"}
    tok = by_unit["output_tokens"]
    # per-item medians over the three models: 200, 400, 600; item q3 unreported
    assert tok["items"] == 3 and tok["models"] == 3
    assert tok["median_per_item"] == pytest.approx(400.0)
    assert tok["full_benchmark"] == pytest.approx(200 + 400 + 600 + 400)
    assert "measured on stored models" in tok["source"] and "csv cost columns" in tok["source"]
    assert by_unit["usd"]["full_benchmark"] == pytest.approx(1.0, rel=1e-6)
    page = client.get("/ui/benchmarks/costly")
    assert page.status_code == 200 and "Cost per item" in page.text and "output_tokens" in page.text
    # the same upload is unchanged; other costs replace it
    same = client.post(
        url,
        params={"model": "m1"},
        content=_csv(tokens["m1"], [0.1, 0.2, 0.3, 0.4]),
        headers={"content-type": "text/csv"},
    )
    assert same.json()["status"] == "unchanged"


def _count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(ModelResult))


@pytest.mark.parametrize(
    ("body", "ctype", "loc_tail"),
    [
        (_csv([1, -2, 3, 4], [0, 0, 0, 0]), "text/csv", "tokens"),
        (_csv([1, 2, 3, 4], [0, "nan", 0, 0]), "text/csv", "cost"),
        (_csv([1, 2, 3, 4], [0, 0, 0, 5e6]), "text/csv", "cost"),
        (_csv([1, 2.5, 3, 4], [0, 0, 0, 0]), "text/csv", "tokens"),
        (
            json.dumps({"model": "bad", "correct": [1, 0, 1, 0], "costs": {"usd": [0, 0, -1, 0]}}),
            "application/json",
            "usd[2]",
        ),
        (
            json.dumps({"model": "bad", "results": {"q0": {"correct": 1, "seconds": 1e9}}}),
            "application/json",
            "seconds",
        ),
    ],
)
def test_bad_costs_are_422_naming_the_field_and_write_nothing(
    client: TestClient, db_session: Session, body, ctype, loc_tail
) -> None:
    bench = _bench(client, name="costly-bad")
    before = _count(db_session)
    r = client.post(
        f"/v1/benchmarks/{bench['id']}/results",
        params={"model": "bad"} if ctype == "text/csv" else None,
        content=body,
        headers={"content-type": ctype},
    )
    assert r.status_code == 422, r.text
    loc = r.json()["errors"][0]["loc"]
    assert str(loc[-1]).endswith(loc_tail), loc
    assert _count(db_session) == before
