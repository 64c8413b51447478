"""Minimum source populations (issue 24, item 4), over the API on the real Postgres: below the
measured floor a subset is refused (422 naming ``method`` or ``source_models``, with the floor and
the figure, no row or job left); between the floor and the measured threshold it is built and
carries ``few_source_models`` with the threshold. The CLI's refusal and warning lines are checked on
a live service in tests/web/test_coverage_panel.py."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Job, Subset
from app.services.selection import subsets as subset_service
from app.services.selection.drift import (
    MIN_SOURCE_MODELS,
    REFUSE_BELOW,
    WARN_BELOW,
    source_warnings,
)
from tests.api._subset_data import gpqa, seed_gpqa


def _counts(db_session: Session) -> tuple[int, int]:
    jobs = db_session.scalar(select(func.count()).select_from(Job))
    subsets = db_session.scalar(select(func.count()).select_from(Subset))
    return jobs, subsets


def test_the_thresholds_are_the_measured_ones() -> None:
    assert REFUSE_BELOW == {"tiny_benchmarks": 20, "dpp": 20}
    assert MIN_SOURCE_MODELS == 100
    assert WARN_BELOW == {"tiny_benchmarks": 300}  # p_irt's strongest fifth: 0.798 at 100 sources
    (w,) = source_warnings("tiny_benchmarks", ["a"] * 299)
    assert w.details == {"n_source_models": 299, "threshold": 300}
    assert source_warnings("tiny_benchmarks", ["a"] * 300) == []
    # selectors without sources never warn
    assert source_warnings("random", None) == []
    (w,) = source_warnings("anchor_points", ["a"] * 99)
    assert w.details == {"n_source_models": 99, "threshold": 100}


@pytest.mark.parametrize("method", ["tiny_benchmarks", "dpp"])
def test_below_the_floor_is_422_naming_method_or_source_models(
    client: TestClient, db_session: Session, method: str
) -> None:
    seeded = seed_gpqa(db_session, n_models=19, subtasks=False)
    db_session.commit()
    before = _counts(db_session)
    path = f"/v1/benchmarks/{seeded.version_id}/subsets"
    # every full-results model (19) is the implicit source set: the field is `method`
    r = client.post(path, json={"method": method, "size": 25, "seed": 1})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert [e["loc"] for e in r.json()["errors"]] == [["body", "method"]]
    detail = r.json()["detail"]
    assert f"{method} needs at least 20 source models with full results, got 19" in detail
    assert ("0.062" if method == "tiny_benchmarks" else "0.756") in detail
    # an explicit list: the field is `source_models`
    r = client.post(
        path, json={"method": method, "size": 25, "seed": 1, "source_models": seeded.names[:5]}
    )
    assert r.status_code == 422
    assert [e["loc"] for e in r.json()["errors"]] == [["body", "source_models"]]
    assert "got 5" in r.json()["detail"]
    assert _counts(db_session) == before
    # random and anchor_points are not refused on the same benchmark
    for ok in ("random", "anchor_points"):
        r = client.post(path, json={"method": ok, "size": 25, "seed": 1})
        assert r.status_code == 202, r.text


def test_dpp_at_the_floor_is_built_and_warns(client: TestClient, db_session: Session) -> None:
    seeded = seed_gpqa(db_session, n_models=20, subtasks=False)
    db_session.commit()
    req = subset_service.resolve_request(db_session, seeded.version_id, "dpp", 25, {}, 3, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    (w,) = client.get(f"/v1/subsets/{subset.id}").json()["warnings"]
    assert w["details"] == {"n_source_models": 20, "threshold": 100}


def test_tiny_benchmarks_above_the_floor_warns_on_subset_and_score(
    client: TestClient, db_session: Session
) -> None:
    seeded = seed_gpqa(db_session, n_models=36, subtasks=False)
    db_session.commit()
    req = subset_service.resolve_request(
        db_session, seeded.version_id, "tiny_benchmarks", 25, {}, 3, seeded.names[:34]
    )
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    (w,) = client.get(f"/v1/subsets/{subset.id}").json()["warnings"]
    assert w["code"] == "few_source_models"
    assert w["details"] == {"n_source_models": 34, "threshold": 300}
    assert "measured to hold from 300" in w["message"]
    idx = np.frombuffer(subset.indices, dtype="<i8")
    y = gpqa()["correct"][35].astype(int)
    r = client.post(
        f"/v1/subsets/{subset.id}/scores",
        json={"model": "t", "results": {seeded.item_ids[p]: int(y[p]) for p in idx}},
    )
    assert r.status_code == 201, r.text
    assert [x["code"] for x in r.json()["warnings"]] == ["few_source_models"]
