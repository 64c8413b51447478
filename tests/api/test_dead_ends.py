"""Errors that lead somewhere (issue 28): subset ids shortened to their first characters resolve
when only one id starts that way (422 listing the candidates otherwise), and a problem whose
list of errors was cut says how many there were (the CLI printed "… and 15 more" for 55)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.client.errors import BenchsliceError
from app.db.models.subset import Subset
from app.services.selection import subsets as subset_service
from tests.api._subset_data import seed_gpqa

PROBLEM = "application/problem+json"


def test_short_subset_ids(client: TestClient, db_session: Session) -> None:
    seeded = seed_gpqa(db_session, n_models=12)
    req = subset_service.resolve_request(db_session, seeded.version_id, "random", 10, {}, 5, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    full = subset.id
    for ref in (full, full[:12], full[:6]):
        r = client.get(f"/v1/subsets/{ref}")
        assert r.status_code == 200, (ref, r.text)
        assert r.json()["id"] == full
        assert client.get(f"/v1/subsets/{ref}", params={"format": "ids"}).status_code == 200
    assert client.get(f"/ui/subsets/{full[:12]}").status_code == 200
    too_short = client.get(f"/v1/subsets/{full[:5]}")
    assert too_short.status_code == 404 and "at least 6 hex digits" in too_short.json()["detail"]

    # two more ids sharing the first 12 characters: the prefix is ambiguous, the 13th decides
    clones = []
    for tail in [d for d in "0123456789abcdef" if d != full[12]][:2]:
        clone_id = full[:12] + tail * 52
        columns = {c.key: getattr(subset, c.key) for c in Subset.__table__.columns}
        db_session.add(Subset(**{**columns, "id": clone_id}))
        clones.append(clone_id)
    db_session.commit()
    r = client.get(f"/v1/subsets/{full[:12]}")
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
    body = r.json()
    assert "several subset ids" in body["detail"]
    for candidate in (full, *clones):
        assert candidate in body["detail"]
    assert body["errors"][0]["loc"] == ["path", "subset_id"]
    assert client.get(f"/v1/subsets/{full[:13]}").json()["id"] == full


def test_a_cut_error_list_says_how_many(client: TestClient) -> None:
    r = client.post("/v1/benchmarks", json={"name": "dups", "items": [{"id": "x"}] * 62})
    assert r.status_code == 422, r.text
    body = r.json()
    assert len(body["errors"]) == 50 and body["errors_total"] == 61  # 61 duplicates of "x"
    exc = BenchsliceError(
        body["title"], status=422, errors=body["errors"], errors_total=body["errors_total"]
    )
    assert str(exc).endswith("… and 56 more")
