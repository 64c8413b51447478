"""Keys with a life cycle (issue 25): expiry, rotation with a grace period, last use, and the
CLI that creates keys with project roles and lists them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.db.base import utcnow
from app.db.models import ApiKey, Project
from app.errors import InvalidInput
from app.services.access.keys import authenticate, create_key, describe_roles, rotate_key
from app.services.access.projects import create_project
from tests.api._teams import auth_enabled, bearer


@pytest.fixture
def auth_on(app: Any) -> Iterator[None]:
    with auth_enabled(app):
        yield


@pytest.mark.usefixtures("auth_on")
def test_an_expired_key_is_refused(client: TestClient, db_session: Session) -> None:
    row, token = create_key(db_session, "temp", ["read"], expires_at=utcnow() + timedelta(hours=1))
    db_session.commit()
    assert client.get("/v1/benchmarks", headers=bearer(token)).status_code == 200
    row.expires_at = utcnow() - timedelta(seconds=1)
    db_session.commit()
    refused = client.get("/v1/benchmarks", headers=bearer(token))
    assert refused.status_code == 401 and "expired" in refused.json()["detail"]
    with pytest.raises(InvalidInput):
        create_key(db_session, "x", ["read"], expires_at=utcnow() - timedelta(days=1))


@pytest.mark.usefixtures("auth_on")
def test_rotation_keeps_the_old_secret_for_the_grace_period(
    client: TestClient, db_session: Session
) -> None:
    row, old = create_key(db_session, "ci", ["write"])
    new_row, new = rotate_key(db_session, row.prefix, grace=timedelta(hours=1))
    db_session.commit()
    assert new_row.id == row.id and new != old and new.split("_")[1] == row.prefix
    for token in (old, new):
        assert client.get("/v1/benchmarks", headers=bearer(token)).status_code == 200
    row.previous_valid_until = utcnow() - timedelta(seconds=1)  # the grace period is over
    db_session.commit()
    assert client.get("/v1/benchmarks", headers=bearer(old)).status_code == 401
    assert client.get("/v1/benchmarks", headers=bearer(new)).status_code == 200
    # no grace: the old secret stops at once (also when it was verified and cached before)
    _, newest = rotate_key(db_session, row.prefix, grace=timedelta(0))
    db_session.commit()
    assert client.get("/v1/benchmarks", headers=bearer(new)).status_code == 401
    assert authenticate(db_session, newest).id == str(row.id)


def test_last_use_is_recorded(db_session: Session) -> None:
    row, token = create_key(db_session, "ci", ["read"])
    assert row.last_used_at is None
    principal = authenticate(db_session, token)
    assert row.last_used_at is not None and principal.name == "ci"
    assert principal.has(row.roles[0].project_id, "read")


def test_cli_creates_keys_with_project_roles_and_lists_them(
    committed_sessionmaker: Any, cleanup: Any
) -> None:
    from app.cli import app as cli

    runner = CliRunner()
    with committed_sessionmaker() as session:
        for name in ("cli-team-a", "cli-team-b"):
            cleanup(Project, create_project(session, name).id)
        session.commit()
    made = runner.invoke(
        cli,
        [
            "keys",
            "create",
            "--name",
            "ci-a",
            "--project",
            "cli-team-a",
            "--project",
            "cli-team-b",
            "--role",
            "write",
            "--expires-in-days",
            "30",
        ],
    )
    assert made.exit_code == 0, made.output
    token = made.stdout.strip().splitlines()[0]
    with committed_sessionmaker() as session:
        row = session.scalars(select(ApiKey).where(ApiKey.prefix == token.split("_")[1])).one()
        cleanup(ApiKey, row.id)
        assert describe_roles(row) == ["cli-team-a:write", "cli-team-b:write"]
        assert row.expires_at is not None
        principal = authenticate(session, token)
        session.commit()
    assert principal.allows("write") and not principal.allows("admin")
    paired = runner.invoke(
        cli,
        [
            "keys",
            "create",
            "--name",
            "mixed",
            "--project",
            "cli-team-a",
            "--role",
            "admin",
            "--project",
            "cli-team-b",
            "--role",
            "read",
        ],
    )
    assert paired.exit_code == 0, paired.output
    mixed_prefix = paired.stdout.strip().split("_")[1]
    with committed_sessionmaker() as session:
        mixed = session.scalars(select(ApiKey).where(ApiKey.prefix == mixed_prefix)).one()
        cleanup(ApiKey, mixed.id)
        assert describe_roles(mixed) == ["cli-team-a:admin", "cli-team-b:read"]
    listed = runner.invoke(cli, ["keys", "list"])
    assert listed.exit_code == 0
    line = next(x for x in listed.stdout.splitlines() if x.startswith(row.prefix))
    assert "cli-team-a:write,cli-team-b:write" in line and "active" in line
    assert token not in listed.stdout
    rotated = runner.invoke(cli, ["keys", "rotate", row.prefix, "--grace-hours", "0"])
    assert rotated.exit_code == 0, rotated.output
    with committed_sessionmaker() as session:
        assert authenticate(session, rotated.stdout.strip().splitlines()[0]).name == "ci-a"
        session.commit()
    projects = runner.invoke(cli, ["projects", "list"])
    assert any(x.startswith("cli-team-a\tno\t0\t2") for x in projects.stdout.splitlines()), (
        projects.stdout
    )
    for bad in (
        ["keys", "create", "--name", "x", "--project", "nope", "--role", "read"],
        ["keys", "create", "--name", "x", "--role", "root"],
        [
            "keys",
            "create",
            "--name",
            "x",
            "--project",
            "cli-team-a",
            "--project",
            "cli-team-b",
            "--role",
            "read",
            "--role",
            "write",
            "--role",
            "admin",
        ],
        ["projects", "create", "Bad Name"],
    ):
        assert runner.invoke(cli, bad).exit_code != 0, bad
