"""API keys: hashed storage, roles read < write < admin (a bare list: on the default project),
401/403 as problem+json, CLI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.db.models import ApiKey
from app.services.access.keys import authenticate, create_key, describe_roles, revoke_key

PROBLEM = "application/problem+json"
ITEMS = {"name": "auth-bench", "items": [{"id": "a"}, {"id": "b"}]}


@pytest.fixture
def auth_on(app: Any) -> Iterator[None]:
    original = app.state.settings
    app.state.settings = original.model_copy(update={"auth_enabled": True})
    try:
        yield
    finally:
        app.state.settings = original


def _key(session: Session, *scopes: str) -> str:
    _, token = create_key(session, f"test-{'-'.join(scopes)}", list(scopes))
    return token


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_auth_disabled_allows_everything(client: TestClient) -> None:
    assert client.post("/v1/benchmarks", json=ITEMS).status_code == 201
    assert client.get("/v1/benchmarks").status_code == 200


@pytest.mark.usefixtures("auth_on")
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Bearer bsk_000000000000_wrong"},
        {"Authorization": "Basic dXNlcjpwdw=="},
    ],
)
def test_missing_or_invalid_key_is_401(client: TestClient, headers: dict) -> None:
    for response in (
        client.get("/v1/benchmarks", headers=headers),
        client.post("/v1/benchmarks", json=ITEMS, headers=headers),
    ):
        assert response.status_code == 401
        assert response.headers["content-type"] == PROBLEM
        assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.usefixtures("auth_on")
def test_right_prefix_wrong_secret_is_401(client: TestClient, db_session: Session) -> None:
    token = _key(db_session, "admin")
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert client.get("/v1/benchmarks", headers=_bearer(forged)).status_code == 401


@pytest.mark.usefixtures("auth_on")
def test_read_key_reads_but_cannot_write(client: TestClient, db_session: Session) -> None:
    token = _key(db_session, "read")
    assert client.get("/v1/benchmarks", headers=_bearer(token)).status_code == 200
    denied = client.post("/v1/benchmarks", json=ITEMS, headers=_bearer(token))
    assert denied.status_code == 403 and denied.headers["content-type"] == PROBLEM
    assert "write" in denied.json()["detail"]


@pytest.mark.usefixtures("auth_on")
def test_write_and_admin_keys_can_upload_and_read(client: TestClient, db_session: Session) -> None:
    for scope in ("write", "admin"):
        token = _key(db_session, scope)
        created = client.post("/v1/benchmarks", json=ITEMS, headers=_bearer(token))
        assert created.status_code in (200, 201)
        bench = created.json()["id"]
        up = client.post(
            f"/v1/benchmarks/{bench}/results",
            json={"model": f"m-{scope}", "correct": [1, 0]},
            headers=_bearer(token),
        )
        assert up.status_code == 201
        assert (
            client.get(f"/v1/benchmarks/{bench}/matrix", headers=_bearer(token)).status_code == 200
        )


@pytest.mark.usefixtures("auth_on")
def test_revoked_key_is_401_at_once(client: TestClient, db_session: Session) -> None:
    token = _key(db_session, "read")
    assert client.get("/v1/benchmarks", headers=_bearer(token)).status_code == 200
    revoke_key(db_session, token.split("_")[1])
    assert client.get("/v1/benchmarks", headers=_bearer(token)).status_code == 401


def test_key_is_stored_hashed_and_use_is_recorded(db_session: Session) -> None:
    row, token = create_key(db_session, "ci", ["write"])
    assert token.startswith("bsk_") and row.prefix in token
    stored = db_session.execute(
        select(ApiKey.name, ApiKey.prefix, ApiKey.key_hash).where(ApiKey.id == row.id)
    ).one()
    assert all(token not in str(v) for v in stored)
    assert row.key_hash.startswith("$argon2id$")
    assert row.last_used_at is None
    principal = authenticate(db_session, token)
    assert principal.allows("read") and principal.allows("write") and not principal.allows("admin")
    assert row.last_used_at is not None


def test_unknown_scope_is_rejected(db_session: Session) -> None:
    from app.errors import InvalidInput

    with pytest.raises(InvalidInput):
        create_key(db_session, "x", ["superuser"])


def test_cli_creates_a_key_and_prints_it_once(committed_sessionmaker, cleanup) -> None:
    from app.cli import app as cli

    result = CliRunner().invoke(cli, ["keys", "create", "--scope", "write", "--name", "ci"])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip().splitlines()[0]
    with committed_sessionmaker() as session:
        row = session.scalars(select(ApiKey).where(ApiKey.prefix == token.split("_")[1])).one()
        cleanup(ApiKey, row.id)
        assert describe_roles(row) == ["default:write"] and row.name == "ci"
        assert token not in row.key_hash
        assert authenticate(session, token).allows("write")
    listed = CliRunner().invoke(cli, ["keys", "list"])
    assert row.prefix in listed.stdout and token not in listed.stdout
    bad = CliRunner().invoke(cli, ["keys", "create", "--scope", "root", "--name", "x"])
    assert bad.exit_code == 2


def test_upload_without_a_key_is_401_before_the_body_is_read(app: Any, client: TestClient) -> None:
    original = app.state.settings
    app.state.settings = original.model_copy(update={"auth_enabled": True, "max_body_bytes": 8})
    try:
        big = b'{"model": "m", "correct": [1, 0, 1]}'
        results = client.post(
            "/v1/benchmarks/00000000-0000-0000-0000-000000000000/results",
            content=big,
            headers={"content-type": "application/json"},
        )
        samples = client.post(
            "/v1/benchmarks/from-samples",
            params={"name": "x"},
            content=big,
            headers={"content-type": "application/x-ndjson"},
        )
    finally:
        app.state.settings = original
    assert results.status_code == 401 and results.headers["content-type"] == PROBLEM
    assert samples.status_code == 401  # not 413: the key is checked first
