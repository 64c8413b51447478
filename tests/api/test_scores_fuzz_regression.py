"""Regressions the schemathesis fuzz found on ``POST /v1/subsets/{id}/scores``."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.services.selection import subsets as subset_service
from tests.api._subset_data import Seeded, seed_gpqa


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=12)
    db_session.commit()
    return seeded


@pytest.mark.parametrize("item_key", ["doc_hash", "doc_id"])
def test_undecodable_csv_with_odd_query_values_is_a_4xx(
    client: TestClient, db_session: Session, seeded: Seeded, item_key: str
) -> None:
    req = subset_service.resolve_request(db_session, seeded.version_id, "random", 20, {}, 9, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    r = client.post(
        f"/v1/subsets/{subset.id}/scores",
        params={
            "model": "\x1fi`yjp\U000bbabd\x0c\x9c\U000dbb86=\U000c0c7a\xe8 \x02@",
            "metric": "",
            "item_key": item_key,
            "threshold": 0.6464380138413579,
            "baseline": seeded.names[1],
            "task": "",
        },
        content=b"\xc3\x86\xf2\x84\x80\xa6",
        headers={"Content-Type": "text/csv"},
    )
    assert r.status_code == 422, r.text  # was a 500: the name reached ModelCreate unchecked
    assert r.headers["content-type"].startswith("application/problem+json")
    assert ["query", "model"] in [e["loc"] for e in r.json()["errors"]], r.text
