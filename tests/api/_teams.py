"""Two teams on one service: projects, keys with roles, and helpers shared by the tests of
issue 25 (projects, roles, audit trail, undo)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.services.access.keys import create_key
from app.services.access.projects import create_project

PROBLEM = "application/problem+json"


@contextmanager
def auth_enabled(app: Any) -> Iterator[None]:
    original = app.state.settings
    app.state.settings = original.model_copy(update={"auth_enabled": True})
    try:
        yield
    finally:
        app.state.settings = original


def bearer(token: str, request_id: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if request_id is not None:
        headers["X-Request-ID"] = request_id
    return headers


def key(session: Session, name: str, roles: dict[str, str], **kwargs: Any) -> str:
    _, token = create_key(session, name, roles, **kwargs)
    session.commit()  # a savepoint: a later request's rollback must not take the key with it
    return token


@dataclass
class Teams:
    """Team A and team B, each with a write key on its own project; A also has an admin key."""

    a_write: dict[str, str]
    a_admin: dict[str, str]
    a_read: dict[str, str]
    b_write: dict[str, str]
    b_admin: dict[str, str]
    instance_admin: dict[str, str]


def make_teams(db_session: Session) -> Teams:
    """Projects team-a and team-b and their keys (use inside :func:`auth_enabled`)."""
    create_project(db_session, "team-a")
    create_project(db_session, "team-b")
    return Teams(
        a_write=bearer(key(db_session, "a-ci", {"team-a": "write"})),
        a_admin=bearer(key(db_session, "a-lead", {"team-a": "admin"})),
        a_read=bearer(key(db_session, "a-viewer", {"team-a": "read"})),
        b_write=bearer(key(db_session, "b-ci", {"team-b": "write"})),
        b_admin=bearer(key(db_session, "b-lead", {"team-b": "admin"})),
        instance_admin=bearer(key(db_session, "root", {}, instance_admin=True)),
    )


def make_benchmark(
    client: TestClient, headers: dict[str, str], name: str, n_items: int = 40, **extra: Any
) -> dict:
    items = [{"id": f"{name}-q{i}", "subtask": f"s{i % 2}"} for i in range(n_items)]
    r = client.post("/v1/benchmarks", json={"name": name, "items": items, **extra}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def model_rows(n_models: int, n_items: int, seed: int) -> np.ndarray:
    """0/1 results of models of spread-out ability on items of spread-out difficulty."""
    rng = np.random.default_rng(seed)
    ability = np.linspace(-1.5, 1.5, n_models)[:, None]
    difficulty = rng.normal(0, 1, n_items)[None, :]
    p = 1 / (1 + np.exp(-(ability - difficulty)))
    return (rng.random((n_models, n_items)) < p).astype(int)


def upload(
    client: TestClient,
    headers: dict[str, str],
    bench: str,
    model: str,
    correct: np.ndarray,
    **params: Any,
):
    return client.post(
        f"/v1/benchmarks/{bench}/results",
        json={"model": model, "correct": [int(x) for x in correct]},
        params=params,
        headers=headers,
    )


def seed_results(
    client: TestClient, headers: dict[str, str], bench: str, n_models: int = 6, seed: int = 0
) -> list[str]:
    n_items = client.get(f"/v1/benchmarks/{bench}", headers=headers).json()["n_items"]
    names = [f"org/model-{k}" for k in range(n_models)]
    for name, row in zip(names, model_rows(n_models, n_items, seed), strict=True):
        assert upload(client, headers, bench, name, row).status_code == 201
    return names
