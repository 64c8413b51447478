"""POST /benchmarks/{b}/results/matrix on real Postgres: a whole .npz in one request."""

from __future__ import annotations

import io

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models.model_result import ModelResult

NPZ = {"content-type": "application/x-npz"}
PROBLEM = "application/problem+json"


def _bench(client: TestClient, n: int, name: str) -> dict:
    items = [{"id": f"q{i}"} for i in range(n)]
    r = client.post("/v1/benchmarks", json={"name": name, "items": items})
    assert r.status_code in (200, 201), r.text
    return r.json()


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _exported(client: TestClient, bench_id: str) -> dict[str, np.ndarray]:
    r = client.get(f"/v1/benchmarks/{bench_id}/matrix")
    assert r.status_code == 200
    with np.load(io.BytesIO(r.content), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(ModelResult))


def test_matrix_round_trip_noop_conflict_replace(client: TestClient, db_session: Session) -> None:
    """SYNTHETIC 0/1 matrix of 60 models x 9 items, two rows with gaps."""
    rng = np.random.default_rng(27)
    bench = _bench(client, 9, "matrix-up")
    url = f"/v1/benchmarks/{bench['id']}/results/matrix"
    correct = rng.integers(0, 2, (60, 9)).astype(float)
    correct[[4, 17], [2, 5]] = np.nan
    names = np.array([f"model-{i:02d}" for i in range(60)])
    body = _npz(correct=correct, models=names, item_ids=np.array([f"q{i}" for i in range(9)]))
    # the same results uploaded alone first: the matrix finds them identical (same hash)
    alone = client.post(
        f"/v1/benchmarks/{bench['id']}/results",
        json={"model": {"name": "model-01"}, "correct": correct[1].tolist()},
    )
    assert alone.status_code == 201, alone.text
    first = client.post(url, content=body, headers=NPZ | {"Idempotency-Key": "mx-1"})
    assert first.status_code == 201, first.text
    assert first.json() == {
        "benchmark_version_id": bench["id"],
        "models": 60,
        "created": 59,
        "unchanged": 1,
        "replaced": 0,
    }
    hashes = {
        m["model"]["name"]: m["content_hash"]
        for m in client.get(f"/v1/benchmarks/{bench['id']}/models").json()["items"]
    }
    assert hashes["model-01"] == alone.json()["content_hash"]
    replay = client.post(url, content=body, headers=NPZ | {"Idempotency-Key": "mx-1"})
    assert replay.json() == first.json() and replay.headers["Idempotency-Replayed"] == "true"
    got = _exported(client, bench["id"])
    order = np.argsort(names)
    assert got["models"].tolist() == names[order].tolist()
    cov = got["coverage"].astype(bool)
    np.testing.assert_array_equal(cov, ~np.isnan(correct[order]))
    np.testing.assert_array_equal(got["correct"][cov], correct[order][cov])
    same = client.post(url, content=body, headers=NPZ)
    assert same.status_code == 200 and same.json()["unchanged"] == 60
    changed = correct.copy()
    changed[30, 0] = 1 - np.nan_to_num(changed[30, 0])
    other = _npz(correct=changed, models=names, item_ids=np.array([f"q{i}" for i in range(9)]))
    rows = _count(db_session)
    conflict = client.post(url, content=other, headers=NPZ)
    assert conflict.status_code == 409 and conflict.headers["content-type"].startswith(PROBLEM)
    assert _count(db_session) == rows
    replaced = client.post(url, content=other, headers=NPZ, params={"replace": "true"})
    assert replaced.status_code == 200 and replaced.json()["replaced"] == 1


def test_bad_matrices_are_422_naming_the_array(client: TestClient, db_session: Session) -> None:
    bench = _bench(client, 4, "matrix-bad")
    url = f"/v1/benchmarks/{bench['id']}/results/matrix"
    ok = np.zeros((2, 4))
    names = np.array(["a", "b"])
    cases = [
        (b"not a zip", "body"),
        (_npz(models=names), "correct"),
        (_npz(correct=ok), "models"),
        (_npz(correct=ok, models=np.array(["a", "a"])), "models"),
        (_npz(correct=ok, models=np.array(["..", "b"])), "models"),  # issue 39
        (_npz(correct=ok, models=np.array(["a", "../x"])), "models"),
        (_npz(correct=np.zeros((2, 3)), models=names), "correct"),
        (_npz(correct=ok + 2, models=names), "correct"),
        (_npz(correct=ok, models=names, item_ids=np.array(["q0", "q1"])), "item_ids"),
        (_npz(correct=ok, models=names, coverage=np.ones((2, 3), bool)), "coverage"),
        (_npz(correct=ok, models=names, item_ids=np.array(["q0", "q0", "q1", "q2"])), "item_ids"),
        (
            _npz(correct=ok * np.nan, models=names, item_ids=np.array(["q0", "q1", "q2", "q3"])),
            "correct",
        ),
        (_npz(correct=ok, models=names, params_b=np.array(["x", "y"])), "params_b"),
    ]
    rows = _count(db_session)
    for body, field in cases:
        r = client.post(url, content=body, headers=NPZ)
        assert r.status_code == 422, (field, r.text)
        assert r.headers["content-type"].startswith(PROBLEM)
        assert field in {str(e["loc"][-1]) for e in r.json()["errors"]}, (field, r.json())
    assert _count(db_session) == rows
    wrong = client.post(
        url, content=_npz(correct=ok, models=names), headers={"content-type": "text/csv"}
    )
    assert wrong.status_code == 415
