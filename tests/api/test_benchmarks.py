"""Benchmarks API: versioned item lists, pagination, creation from lm-eval sample logs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Benchmark, BenchmarkVersion

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
ARC = FIX / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"
MMLU_PRO = FIX / "samples_leaderboard_mmlu_pro_2024-07-03T08-15-00.000001.jsonl"
PROBLEM = "application/problem+json"


def _items(n: int, prefix: str = "q") -> list[dict]:
    return [{"id": f"{prefix}{i}", "subtask": "algebra" if i % 2 else "geometry"} for i in range(n)]


def _count(session: Session, model: type) -> int:
    return session.scalar(select(func.count()).select_from(model))


def test_same_items_same_version_changed_items_next_version(client: TestClient) -> None:
    first = client.post("/v1/benchmarks", json={"name": "mini", "items": _items(4)})
    assert first.status_code == 201, first.text
    body = first.json()
    assert first.headers["location"] == f"/v1/benchmarks/{body['id']}"
    assert body["version"] == 1 and body["n_items"] == 4 and body["n_models"] == 0
    assert {s["name"]: s["n_items"] for s in body["subtasks"]} == {"algebra": 2, "geometry": 2}
    assert len(body["content_hash"]) == 64

    again = client.post("/v1/benchmarks", json={"name": "mini", "items": _items(4)})
    assert again.status_code == 200
    assert again.json()["id"] == body["id"]

    changed = client.post("/v1/benchmarks", json={"name": "mini", "items": _items(5)})
    assert changed.status_code == 201
    v2 = changed.json()
    assert v2["version"] == 2 and v2["benchmark_id"] == body["benchmark_id"]
    assert v2["id"] != body["id"]

    reordered = client.post(
        "/v1/benchmarks", json={"name": "mini", "items": list(reversed(_items(4)))}
    )
    assert reordered.status_code == 201 and reordered.json()["version"] == 3


def test_item_text_and_metadata_are_part_of_the_content(client: TestClient) -> None:
    items = _items(2)
    a = client.post("/v1/benchmarks", json={"name": "texty", "items": items}).json()
    items[0]["text"] = "What is 2 + 2?"
    b = client.post("/v1/benchmarks", json={"name": "texty", "items": items})
    assert b.status_code == 201 and b.json()["content_hash"] != a["content_hash"]


def test_duplicate_item_ids_are_rejected_and_nothing_is_written(
    client: TestClient, db_session: Session
) -> None:
    items = [*_items(3), {"id": "q1"}]
    response = client.post("/v1/benchmarks", json={"name": "dups", "items": items})
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["errors"][0]["loc"] == ["body", "items", 3, "id"]
    assert _count(db_session, Benchmark) == 0 and _count(db_session, BenchmarkVersion) == 0


@pytest.mark.parametrize(
    "payload",
    [
        {"name": "x", "items": []},
        {"name": "", "items": [{"id": "a"}]},
        {"name": "x", "items": [{"id": ""}]},
        {"name": "x", "items": [{"id": "a", "extra": 1}]},
    ],
)
def test_invalid_benchmark_bodies(client: TestClient, payload: dict) -> None:
    response = client.post("/v1/benchmarks", json=payload)
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM


def test_cursor_pagination_visits_every_version_once(client: TestClient) -> None:
    ids = [
        client.post("/v1/benchmarks", json={"name": f"b{i}", "items": _items(2)}).json()["id"]
        for i in range(5)
    ]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.get("/v1/benchmarks", params=params).json()
        seen += [b["id"] for b in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(ids))  # newest first
    only = client.get("/v1/benchmarks", params={"name": "b3"}).json()
    assert [b["id"] for b in only["items"]] == [ids[3]]
    bad = client.get("/v1/benchmarks", params={"cursor": "garbage"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["query", "cursor"]


def test_get_benchmark_detail_and_404(client: TestClient) -> None:
    bench = client.post("/v1/benchmarks", json={"name": "det", "items": _items(4)}).json()
    for name, correct in (("m/a", [1, 1, 0, 0]), ("m/b", [1, 1, 1, 0])):
        r = client.post(
            f"/v1/benchmarks/{bench['id']}/results", json={"model": name, "correct": correct}
        )
        assert r.status_code == 201, r.text
    detail = client.get(f"/v1/benchmarks/{bench['id']}").json()
    assert detail["n_models"] == 2
    assert [m["name"] for m in detail["models"]] == ["m/a", "m/b"]
    assert detail["accuracy"] == {"mean": 0.625, "min": 0.5, "median": 0.625, "max": 0.75}
    missing = client.get(f"/v1/benchmarks/{uuid.uuid4()}")
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM


def test_create_from_sample_log_body(client: TestClient) -> None:
    response = client.post(
        "/v1/benchmarks/from-samples",
        params={"name": "arc", "task": "arc_easy"},
        content=ARC.read_bytes(),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["n_items"] == 5 and body["subtasks"] == [{"name": "arc_easy", "n_items": 5}]
    recs = sorted((json.loads(x) for x in ARC.read_text().splitlines()), key=lambda r: r["doc_id"])
    matrix_items = client.get(f"/v1/benchmarks/{body['id']}/matrix")
    assert matrix_items.status_code == 200
    import io

    import numpy as np

    npz = np.load(io.BytesIO(matrix_items.content))
    assert npz["item_ids"].tolist() == [r["doc_hash"] for r in recs]


def test_create_from_several_sample_logs_by_task_or_subject(client: TestClient) -> None:
    files = [
        ("file", (ARC.name, ARC.read_bytes(), "application/x-ndjson")),
        ("file", (MMLU_PRO.name, MMLU_PRO.read_bytes(), "application/octet-stream")),
    ]
    by_task = client.post("/v1/benchmarks/from-samples", params={"name": "mix"}, files=files)
    assert by_task.status_code == 201, by_task.text
    assert {s["name"]: s["n_items"] for s in by_task.json()["subtasks"]} == {
        "arc_easy": 5,
        "leaderboard_mmlu_pro": 4,
    }
    pro = [("file", (MMLU_PRO.name, MMLU_PRO.read_bytes(), "application/x-ndjson"))]
    by_subject = client.post(
        "/v1/benchmarks/from-samples", params={"name": "pro", "subtask": "subject"}, files=pro
    )
    assert by_subject.status_code == 201
    assert {s["name"]: s["n_items"] for s in by_subject.json()["subtasks"]} == {
        "biology": 1,
        "math": 2,
        "other": 1,
    }
    arc = [("file", (ARC.name, ARC.read_bytes(), "application/x-ndjson"))]
    no_subject = client.post(
        "/v1/benchmarks/from-samples", params={"name": "arc2", "subtask": "subject"}, files=arc
    )
    assert no_subject.status_code == 422
    assert no_subject.json()["errors"][0]["loc"] == ["query", "subtask"]


def test_create_from_malformed_sample_log_names_the_line(
    client: TestClient, db_session: Session
) -> None:
    lines = ARC.read_text().splitlines()
    lines[2] = lines[2][:40]
    response = client.post(
        "/v1/benchmarks/from-samples",
        params={"name": "bad"},
        content="\n".join(lines).encode(),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 422
    err = response.json()["errors"][0]
    assert err["loc"] == ["body", "line", 3] and "malformed JSON" in err["message"]
    assert _count(db_session, Benchmark) == 0


def test_from_samples_rejects_csv(client: TestClient) -> None:
    response = client.post(
        "/v1/benchmarks/from-samples",
        params={"name": "csv"},
        content=b"item_id,correct\na,1\n",
        headers={"content-type": "text/csv"},
    )
    assert response.status_code == 415 and response.headers["content-type"] == PROBLEM
