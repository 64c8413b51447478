"""The benchmark page's cached fragment: new results (a new results stamp) give a fresh page,
and the cached part holds nothing per request (the sign-out form's CSRF token is in the shell)."""

from __future__ import annotations

import re

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog.results import store_results
from tests.api._subset_data import gpqa, seed_gpqa


def _matching(page: str) -> str:
    return re.search(r"(\d+) of (\d+) models match", page).group(0)


def test_new_results_refresh_the_cached_page(client: TestClient, db_session: Session) -> None:
    seeded = seed_gpqa(db_session, n_models=10)
    db_session.commit()
    url = f"/ui/benchmarks/{seeded.version_id}"
    first = client.get(url)
    assert first.status_code == 200 and _matching(first.text) == "10 of 10 models match"
    again = client.get(url)
    assert again.text == first.text  # served from the cache, same bytes
    row = gpqa()["correct"][10].astype(np.uint8)
    store_results(
        db_session, seeded.version_id, ModelCreate(name="zz-newcomer"), parse_columnar(row.tolist())
    )
    db_session.commit()
    fresh = client.get(url)
    assert fresh.status_code == 200
    assert _matching(fresh.text) == "11 of 11 models match"
    assert "zz-newcomer" in fresh.text
    assert f"{100 * row.mean():.1f}%" in fresh.text
    # another query is its own entry; the first query's page is still right after the change
    page = client.get(url, params={"q": "zz-new"})
    assert _matching(page.text) == "1 of 11 models match"
