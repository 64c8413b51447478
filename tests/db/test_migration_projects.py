"""Upgrading a populated database from e7a3c9d2f4b1 (before projects) keeps every row and every
key working (issue 25): the upgrade runs on a copy (``CREATE DATABASE … TEMPLATE``) of a
database populated at the old head, and the copy is compared with the original row by row."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from argon2 import PasswordHasher
from sqlalchemy import MetaData, create_engine, select, text
from sqlalchemy.orm import Session

from app.db import migrate
from app.services.access.keys import authenticate
from tests.conftest import ADMIN_DATABASE_URL, TEST_DATABASE_NAME

OLD_HEAD = "e7a3c9d2f4b1"
SCOPES = {"reader": ["read"], "writer": ["write"], "admin": ["admin"], "both": ["read", "write"]}
HIGHEST = {"reader": "read", "writer": "write", "admin": "admin", "both": "write"}


def _url(name: str) -> str:
    return ADMIN_DATABASE_URL.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def databases() -> Iterator[tuple[str, str]]:
    orig, copy = f"{TEST_DATABASE_NAME}_p25o", f"{TEST_DATABASE_NAME}_p25c"
    admin = create_engine(ADMIN_DATABASE_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{orig}"'))
    try:
        yield orig, copy
    finally:
        with admin.connect() as conn:
            for name in (copy, orig):
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _populate(url: str) -> dict[str, str]:
    """Rows in every table a client writes, at the old schema; returns the keys' tokens."""
    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine)
    t = meta.tables
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    hasher = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1)
    tokens: dict[str, str] = {}
    bench, version = uuid.uuid4(), uuid.uuid4()
    with engine.begin() as conn:
        conn.execute(
            t["benchmarks"]
            .insert()
            .values(
                id=bench,
                name="gpqa-old",
                description="before projects",
                created_at=now,
                updated_at=now,
            )
        )
        conn.execute(
            t["benchmark_versions"]
            .insert()
            .values(
                id=version,
                benchmark_id=bench,
                version=1,
                content_hash="h" * 64,
                n_items=3,
                item_ids=["a", "b", "c"],
                subtask_names=["all"],
                subtask_codes=b"\0" * 12,
                items_extra=None,
                created_at=now,
            )
        )
        for k in range(3):
            model = uuid.uuid4()
            conn.execute(
                t["models"]
                .insert()
                .values(
                    id=model,
                    name=f"org/m{k}",
                    params_b=7.0,
                    family="f",
                    tags=[],
                    created_at=now,
                    updated_at=now,
                )
            )
            conn.execute(
                t["model_results"]
                .insert()
                .values(
                    id=uuid.uuid4(),
                    benchmark_version_id=version,
                    model_id=model,
                    binary=True,
                    correct=bytes([0b10100000 | (k << 6)]),
                    confidence=None,
                    coverage=None,
                    n_items=3,
                    accuracy=k / 3,
                    content_hash=hashlib.sha256(bytes([k])).hexdigest(),
                    source_format="json",
                    metric=None,
                    created_at=now,
                    updated_at=now,
                )
            )
        for name, scopes in SCOPES.items():
            prefix = uuid.uuid4().hex[:12]
            token = f"bsk_{prefix}_{uuid.uuid4().hex}"
            tokens[name] = token
            conn.execute(
                t["api_keys"]
                .insert()
                .values(
                    id=uuid.uuid4(),
                    name=name,
                    prefix=prefix,
                    key_hash=hasher.hash(token),
                    scopes=scopes,
                    revoked=False,
                    created_at=now,
                    last_used_at=None,
                )
            )
        conn.execute(
            t["jobs"]
            .insert()
            .values(
                id=uuid.uuid4(),
                kind="ping",
                status="succeeded",
                progress_done=1,
                progress_total=1,
                seed=1,
                params={},
                result={"pong": True},
                cancel_requested=False,
                created_at=now,
                updated_at=now,
            )
        )
        conn.execute(
            t["idempotency_keys"]
            .insert()
            .values(
                id=uuid.uuid4(),
                key="k",
                principal="p",
                request_hash="r" * 64,
                status_code=201,
                response={},
                resource=None,
                created_at=now,
            )
        )
    engine.dispose()
    return tokens


def _columns(url: str, tables: list[str]) -> dict[str, set[str]]:
    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine, only=tables)
    engine.dispose()
    return {name: {c.name for c in meta.tables[name].columns} for name in tables}


def _rows(
    url: str,
    tables: list[str],
    skip: dict[str, set[str]],
    keep: dict[str, set[str]] | None = None,
) -> dict[str, list[tuple]]:
    """Every row of ``tables`` as reprs, without the ``skip`` columns (and, given ``keep``, only
    those columns: later migrations may add columns the old head did not have)."""
    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine, only=tables)
    out = {}
    with engine.connect() as conn:
        for name in tables:
            table = meta.tables[name]
            cols = [
                c
                for c in table.columns
                if c.name not in skip.get(name, set()) and (keep is None or c.name in keep[name])
            ]
            out[name] = sorted(tuple(map(repr, r)) for r in conn.execute(select(*cols)))
    engine.dispose()
    return out


def test_upgrade_of_a_populated_copy_keeps_every_row_and_key(databases: tuple[str, str]) -> None:
    orig, copy = databases
    migrate.upgrade(_url(orig), OLD_HEAD)
    tokens = _populate(_url(orig))
    tables = [
        "benchmarks",
        "benchmark_versions",
        "models",
        "model_results",
        "api_keys",
        "jobs",
        "idempotency_keys",
        "subsets",
        "subset_scores",
        "analyses",
        "evaluation_sessions",
    ]
    # models' params_b / family / tags move to per-project rows at 39b1e7c4d2a6 (issue 39;
    # tests/db/test_migration_model_metadata.py checks them)
    moved = {"params_b", "family", "tags"}
    before = _rows(_url(orig), tables, {"api_keys": {"scopes"}, "models": moved})
    old_columns = _columns(_url(orig), tables)
    admin = create_engine(ADMIN_DATABASE_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{copy}" TEMPLATE "{orig}"'))
    admin.dispose()

    migrate.upgrade(_url(copy))

    after = _rows(
        _url(copy),
        tables,
        {
            "benchmarks": {"project_id"},
            "api_keys": {
                "instance_admin",
                "expires_at",
                "previous_key_hash",
                "previous_valid_until",
                "rotated_at",
            },
            "benchmark_versions": {"retired_at"},
        },
        keep=old_columns,
    )
    assert after == before  # every row, every column it had
    engine = create_engine(_url(copy))
    with Session(engine) as session:
        default = session.execute(text("SELECT id FROM projects WHERE name = 'default'")).scalar()
        owners = session.execute(text("SELECT DISTINCT project_id FROM benchmarks")).scalars().all()
        assert owners == [default]
        for name, token in tokens.items():
            principal = authenticate(session, token)  # still a valid key, same name
            assert principal.name == name
            assert principal.roles == {default: HIGHEST[name]}
            assert not principal.instance_admin
        session.rollback()
    engine.dispose()

    # and back: the downgrade rebuilds each key's scope from its role
    migrate.downgrade(_url(copy), OLD_HEAD)
    engine = create_engine(_url(copy))
    with engine.connect() as conn:
        scopes = dict(conn.execute(text("SELECT name, scopes FROM api_keys")).all())
    engine.dispose()
    assert scopes == {name: [role] for name, role in HIGHEST.items()}
    assert _rows(_url(copy), tables, {"api_keys": {"scopes"}, "models": moved}) == before


def test_sqlite_upgrade_keeps_benchmarks_and_keys(tmp_path) -> None:
    """The same on the embedded SQLite database of `make run` (batch table rebuilds)."""
    import sqlite3

    from app.services.catalog.benchmark_refs import resolve_version

    path = tmp_path / "old.sqlite3"
    url = f"sqlite:///{path}"
    migrate.upgrade(url, OLD_HEAD)
    hasher = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1)
    token = "bsk_abcdef012345_" + uuid.uuid4().hex
    bench, stamp = uuid.uuid4().hex, "2026-11-30 00:00:00"
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO benchmarks (id, name, created_at, updated_at) VALUES (?, 'old', ?, ?)",
        (bench, stamp, stamp),
    )
    con.execute(
        "INSERT INTO benchmark_versions (id, benchmark_id, version, content_hash, n_items, "
        "item_ids, subtask_names, subtask_codes, created_at) VALUES (?, ?, 1, ?, 1, ?, ?, ?, ?)",
        (uuid.uuid4().hex, bench, "h" * 64, '["a"]', '["all"]', b"\0" * 4, stamp),
    )
    con.execute(
        "INSERT INTO api_keys (id, name, prefix, key_hash, scopes, revoked, created_at) "
        "VALUES (?, 'ci', 'abcdef012345', ?, '[\"admin\"]', 0, ?)",
        (uuid.uuid4().hex, hasher.hash(token), stamp),
    )
    con.commit()
    con.close()
    migrate.upgrade(url)
    engine = create_engine(url)
    with Session(engine) as session:
        principal = authenticate(session, token)
        assert list(principal.project_names.values()) == ["default"]
        assert list(principal.roles.values()) == ["admin"]
        assert resolve_version(session, "old").benchmark.project.name == "default"
    engine.dispose()
