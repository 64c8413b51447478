"""Model metadata is per project (issue 39): what one project uploads about a model (size,
family, tags) changes nothing another project sees, and shows it nothing of the other's."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api._teams import Teams, auth_enabled, make_benchmark, make_teams

MODEL = "org/shared-name"


@pytest.fixture
def teams(app: Any, db_session: Session) -> Iterator[Teams]:
    with auth_enabled(app):
        yield make_teams(db_session)


def _seen(client: TestClient, headers: dict[str, str], bench: str) -> dict[str, Any]:
    models = client.get(f"/v1/benchmarks/{bench}/models", headers=headers).json()["items"]
    (row,) = [m["model"] for m in models if m["model"]["name"] == MODEL]
    return {k: row[k] for k in ("params_b", "family", "tags")}


def _matrix_params(client: TestClient, headers: dict[str, str], bench: str) -> list[float]:
    r = client.get(f"/v1/benchmarks/{bench}/matrix", headers=headers)
    with np.load(io.BytesIO(r.content)) as npz:
        return npz["params_b"].tolist()


def test_another_projects_upload_changes_nothing_this_project_sees(
    client: TestClient, teams: Teams
) -> None:
    make_benchmark(client, teams.a_write, "meta-a", n_items=4)
    make_benchmark(client, teams.b_write, "meta-b", n_items=4)
    a_model = {"name": MODEL, "params_b": 7.0, "family": "llama", "tags": ["internal"]}
    r = client.post(
        "/v1/benchmarks/meta-a/results",
        json={"model": a_model, "correct": [1, 0, 1, 0]},
        headers=teams.a_write,
    )
    assert r.status_code == 201, r.text
    before = _seen(client, teams.a_write, "meta-a")
    assert before == {"params_b": 7.0, "family": "llama", "tags": ["internal"]}
    trail = client.get("/v1/audit", headers=teams.a_admin).json()["items"]

    # B uploads the same model name with its own size: B sees B's, and none of A's
    r = client.post(
        "/v1/benchmarks/meta-b/results",
        json={"model": {"name": MODEL, "params_b": 70.0}, "correct": [1, 1, 1, 0]},
        headers=teams.b_write,
    )
    assert r.status_code == 201, r.text
    assert {k: r.json()["model"][k] for k in ("params_b", "family", "tags")} == {
        "params_b": 70.0,
        "family": None,
        "tags": [],
    }
    # a matrix upload by B too (another code path)
    buf = io.BytesIO()
    np.savez(buf, correct=np.ones((1, 4)), models=np.array([MODEL]), params_b=np.array([0.5]))
    r = client.post(
        "/v1/benchmarks/meta-b/results/matrix",
        params={"replace": "true"},
        content=buf.getvalue(),
        headers={**teams.b_write, "content-type": "application/x-npz"},
    )
    assert r.status_code == 200, r.text
    assert _seen(client, teams.b_write, "meta-b") == {
        "params_b": 0.5,
        "family": None,
        "tags": [],
    }
    # A: unchanged everywhere it looks, and no row in its trail
    assert _seen(client, teams.a_write, "meta-a") == before
    assert _matrix_params(client, teams.a_write, "meta-a") == [7.0]
    assert _matrix_params(client, teams.b_write, "meta-b") == [0.5]
    assert client.get("/v1/audit", headers=teams.a_admin).json()["items"] == trail


def test_an_upload_without_metadata_keeps_the_projects_values(
    client: TestClient, teams: Teams
) -> None:
    make_benchmark(client, teams.a_write, "meta-a1", n_items=2)
    make_benchmark(client, teams.a_write, "meta-a2", n_items=2)
    model = {"name": MODEL, "params_b": 3.0, "family": "f", "tags": ["t"]}
    for bench, body in (("meta-a1", {"model": model}), ("meta-a2", {"model": MODEL})):
        r = client.post(
            f"/v1/benchmarks/{bench}/results",
            json={**body, "correct": [1, 0]},
            headers=teams.a_write,
        )
        assert r.status_code == 201, r.text
    # the project's metadata is the project's, across its benchmarks
    assert _seen(client, teams.a_write, "meta-a2") == {
        "params_b": 3.0,
        "family": "f",
        "tags": ["t"],
    }
