"""Upgrading a populated database to per-project model metadata (issue 39, migration
39b1e7c4d2a6): every project holding results of a model (current or archived) keeps seeing the
size, family and tags it saw before; the shared columns are gone; the downgrade puts them back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import MetaData, create_engine, inspect, text

from app.db import migrate
from tests.conftest import ADMIN_DATABASE_URL, TEST_DATABASE_NAME

BEFORE = "c27c9e4b2a18"
AFTER = "39b1e7c4d2a6"


@pytest.fixture
def url() -> Iterator[str]:
    name = f"{TEST_DATABASE_NAME}_mm39"
    admin = create_engine(ADMIN_DATABASE_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield ADMIN_DATABASE_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _populate(url: str) -> dict[str, uuid.UUID]:
    """Projects a and b, a benchmark each; model ``shared`` with results in both, ``archived``
    with only an archived copy in b, ``orphan`` with no results anywhere."""
    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine)
    t = meta.tables
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    ids = {k: uuid.uuid4() for k in ("a", "b", "ba", "bb", "va", "vb", "shared", "archived")}
    ids["orphan"] = uuid.uuid4()
    result = {
        "binary": True,
        "correct": b"\xa0",
        "n_items": 3,
        "accuracy": 2 / 3,
        "content_hash": "c" * 64,
        "created_at": now,
    }
    with engine.begin() as conn:
        for p in ("a", "b"):
            conn.execute(
                t["projects"].insert().values(id=ids[p], name=f"team-{p}", public_read=False)
            )
            conn.execute(
                t["benchmarks"]
                .insert()
                .values(
                    id=ids[f"b{p}"],
                    name=f"bench-{p}",
                    project_id=ids[p],
                    created_at=now,
                    updated_at=now,
                )
            )
            conn.execute(
                t["benchmark_versions"]
                .insert()
                .values(
                    id=ids[f"v{p}"],
                    benchmark_id=ids[f"b{p}"],
                    version=1,
                    content_hash=p * 64,
                    n_items=3,
                    item_ids=["x", "y", "z"],
                    subtask_names=["all"],
                    subtask_codes=b"\0" * 12,
                    created_at=now,
                )
            )
        for name, params, family, tags in (
            ("shared", 7.0, "llama", ["base", "secret"]),
            ("archived", 1.5, "tiny", []),
            ("orphan", None, None, []),
        ):
            conn.execute(
                t["models"]
                .insert()
                .values(
                    id=ids[name],
                    name=f"org/{name}",
                    params_b=params,
                    family=family,
                    tags=tags,
                    created_at=now,
                    updated_at=now,
                )
            )
        for p in ("a", "b"):
            conn.execute(
                t["model_results"]
                .insert()
                .values(
                    id=uuid.uuid4(),
                    benchmark_version_id=ids[f"v{p}"],
                    model_id=ids["shared"],
                    updated_at=now,
                    **result,
                )
            )
        conn.execute(
            t["model_result_archive"]
            .insert()
            .values(
                id=uuid.uuid4(),
                benchmark_version_id=ids["vb"],
                model_id=ids["archived"],
                reason="deleted",
                archived_at=now,
                result_id=uuid.uuid4(),
                result_created_at=now,
                **{k: v for k, v in result.items() if k != "created_at"},
            )
        )
    engine.dispose()
    return ids


def _rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def test_each_project_keeps_what_it_saw_and_the_downgrade_restores_the_shared_columns(
    url: str,
) -> None:
    migrate.upgrade(url, BEFORE)
    ids = _populate(url)
    migrate.upgrade(url, AFTER)

    got = _rows(
        url,
        "SELECT p.name, m.name, d.params_b, d.family, d.tags::text FROM model_metadata d "
        "JOIN projects p ON p.id = d.project_id JOIN models m ON m.id = d.model_id "
        "ORDER BY p.name, m.name",
    )
    assert got == [
        ("team-a", "org/shared", 7.0, "llama", '["base", "secret"]'),
        ("team-b", "org/archived", 1.5, "tiny", "[]"),
        ("team-b", "org/shared", 7.0, "llama", '["base", "secret"]'),
    ]
    engine = create_engine(url)
    columns = {c["name"] for c in inspect(engine).get_columns("models")}
    engine.dispose()
    assert columns == {"id", "name", "created_at", "updated_at"}
    # the model rows themselves (ids, names) are untouched: results still point at them
    shared = f"'{ids['shared']}'"
    assert _rows(url, f"SELECT count(*) FROM model_results WHERE model_id = {shared}") == [(2,)]

    # project b changes its copy: a's stays; the downgrade keeps the copy changed last
    _rows(
        url,
        "UPDATE model_metadata SET params_b = 8.0, updated_at = now() + interval '1 s' "
        f"WHERE project_id = '{ids['b']}' AND model_id = {shared} RETURNING 1",
    )
    migrate.downgrade(url, BEFORE)
    assert _rows(url, "SELECT name, params_b, family, tags::text FROM models ORDER BY name") == [
        ("org/archived", 1.5, "tiny", "[]"),
        ("org/orphan", None, None, "[]"),
        ("org/shared", 8.0, "llama", '["base", "secret"]'),
    ]
    migrate.upgrade(url)  # and up again, to the head
