"""store_many against real Postgres: the same rows as one-by-one stores, idempotent, all or none."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models.model_result import ModelResult
from app.errors import Conflict, InvalidInput
from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.bulk_results import store_many
from app.services.catalog.results import load_matrix, store_results

FIELDS = ("binary", "correct", "confidence", "coverage", "n_items", "accuracy", "content_hash")


def _version(session: Session, n: int, name: str):
    version, _ = create_version(session, name, [f"i{k}" for k in range(n)], [None] * n)
    return version


def _batch(rng, m: int, n: int):
    """SYNTHETIC: 0/1 rows, float rows, partial coverage, with and without confidence."""
    out = []
    for i in range(m):
        values = rng.integers(0, 2, n).astype(float) if i % 4 else rng.random(n)
        conf = rng.random(n).tolist() if i % 3 == 0 else None
        if i % 5 == 1:
            keep = np.flatnonzero(rng.random(n) < 0.7)
            ids = [f"i{k}" for k in keep]
            parsed = parse_columnar(values[keep].tolist(), item_ids=ids)
        else:
            parsed = parse_columnar(values.tolist(), conf)
        out.append((ModelCreate(name=f"model-{i:03d}", family="f" if i % 2 else None), parsed))
    return out


def _rows(session: Session, version_id) -> dict[str, tuple]:
    rows = session.scalars(
        select(ModelResult).where(ModelResult.benchmark_version_id == version_id)
    )
    return {r.model.name: tuple(getattr(r, f) for f in FIELDS) for r in rows}


def test_same_rows_as_one_by_one_and_idempotent(db_session: Session) -> None:
    rng = np.random.default_rng(27)
    batch = _batch(rng, 40, 30)
    one = _version(db_session, 30, "one-by-one")
    bulk = _version(db_session, 30, "bulk")
    for ref, parsed in batch:
        store_results(db_session, one.id, ref, parsed)
    got = store_many(db_session, bulk.id, batch)
    assert [s for _, s in got] == ["created"] * 40
    db_session.expire_all()
    assert _rows(db_session, bulk.id) == _rows(db_session, one.id)
    a, b = load_matrix(db_session, one.id), load_matrix(db_session, bulk.id)
    np.testing.assert_array_equal(a.correct, b.correct)
    np.testing.assert_array_equal(a.coverage, b.coverage)
    # again: nothing changes; one changed model: 409 without replace, replaced with it
    assert [s for _, s in store_many(db_session, bulk.id, batch)] == ["unchanged"] * 40
    changed = list(batch)
    changed[7] = (batch[7][0], parse_columnar(rng.integers(0, 2, 30).tolist()))
    with pytest.raises(Conflict):
        store_many(db_session, bulk.id, changed)
    statuses = [s for _, s in store_many(db_session, bulk.id, changed, replace=True)]
    assert statuses == ["unchanged"] * 7 + ["replaced"] + ["unchanged"] * 32


def test_conflict_leaves_nothing_written(db_session: Session) -> None:
    rng = np.random.default_rng(3)
    version = _version(db_session, 20, "all-or-none")
    first = _batch(rng, 5, 20)
    store_many(db_session, version.id, first)
    db_session.commit()
    before = _rows(db_session, version.id)
    batch = _batch(rng, 12, 20)  # new values for model-000..004, and 7 new models
    with pytest.raises(Conflict):
        store_many(db_session, version.id, batch)
    db_session.rollback()
    assert _rows(db_session, version.id) == before
    dup = [first[0], first[0]]
    with pytest.raises(InvalidInput) as err:
        store_many(db_session, version.id, dup)
    assert "models" in str(err.value.errors) and "twice" in err.value.detail
