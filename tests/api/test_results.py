"""Results API: every upload format, strict validation (nothing written on error), idempotency,
listing, deletion and the .npz matrix export."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import IdempotencyKey, LanguageModel, ModelResult

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
ARC = FIX / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"
GSM8K = FIX / "samples_gsm8k_2024-06-10T09-30-00.000000.jsonl"
MMLU_PRO = FIX / "samples_leaderboard_mmlu_pro_2024-07-03T08-15-00.000001.jsonl"
PROBLEM = "application/problem+json"
NDJSON = {"content-type": "application/x-ndjson"}


def _count(session: Session, model: type = ModelResult) -> int:
    return session.scalar(select(func.count()).select_from(model))


def _bench(client: TestClient, n: int = 4, name: str = "mini") -> dict:
    items = [{"id": f"q{i}", "subtask": "s1" if i < n // 2 else "s2"} for i in range(n)]
    r = client.post("/v1/benchmarks", json={"name": name, "items": items})
    assert r.status_code in (200, 201), r.text
    return r.json()


def _from_samples(client: TestClient, path: Path, name: str) -> dict:
    r = client.post(
        "/v1/benchmarks/from-samples",
        params={"name": name},
        files=[("file", (path.name, path.read_bytes(), "application/x-ndjson"))],
    )
    assert r.status_code == 201, r.text
    return r.json()


def _matrix(client: TestClient, bench_id: str) -> dict[str, np.ndarray]:
    r = client.get(f"/v1/benchmarks/{bench_id}/matrix")
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    with np.load(io.BytesIO(r.content), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def test_keyed_json_then_noop_then_conflict_then_replace(
    client: TestClient, db_session: Session
) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    payload = {
        "model": {"name": "org/m-7b", "params_b": 7.0, "family": "m", "tags": ["base"]},
        "results": {
            "q0": {"correct": 1, "confidence": 0.9},
            "q1": {"correct": 0, "confidence": 0.2},
            "q2": {"correct": 1, "confidence": 0.7},
            "q3": {"correct": 1, "confidence": 0.6},
        },
    }
    created = client.post(url, json=payload)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["status"] == "created" and body["accuracy"] == 0.75
    assert body["coverage"] == 1.0 and body["n_items"] == 4
    assert body["binary"] and body["has_confidence"]
    assert body["model"]["params_b"] == 7.0 and body["model"]["tags"] == ["base"]

    same = client.post(url, json=payload)
    assert same.status_code == 200 and same.json()["status"] == "unchanged"
    assert same.json()["content_hash"] == body["content_hash"]

    payload["results"]["q1"]["correct"] = 1
    conflict = client.post(url, json=payload)
    assert conflict.status_code == 409 and conflict.headers["content-type"] == PROBLEM
    assert conflict.json()["errors"][0]["loc"] == ["query", "replace"]

    replaced = client.post(url, params={"replace": "true"}, json=payload)
    assert replaced.status_code == 200 and replaced.json()["status"] == "replaced"
    assert replaced.json()["accuracy"] == 1.0
    assert _count(db_session) == 1 and _count(db_session, LanguageModel) == 1


def test_columnar_aligned_and_with_item_ids(client: TestClient) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    aligned = client.post(
        url, json={"model": "a", "correct": [0.5, 1, 0, 0.25], "confidence": [0.5, 0.9, 0.1, 0.3]}
    )
    assert aligned.status_code == 201, aligned.text
    assert not aligned.json()["binary"] and aligned.json()["accuracy"] == pytest.approx(0.4375)
    by_id = client.post(
        url, json={"model": "b", "correct": [1, 0, 0, 0], "item_ids": ["q3", "q2", "q1", "q0"]}
    )
    assert by_id.status_code == 201
    m = _matrix(client, bench["id"])
    assert m["models"].tolist() == ["a", "b"]
    np.testing.assert_allclose(m["correct"][0], [0.5, 1, 0, 0.25])
    np.testing.assert_array_equal(m["correct"][1], [0, 0, 0, 1])
    assert "confidence" not in m  # b has none
    assert m["subtasks"].tolist() == ["s1", "s1", "s2", "s2"]


def test_partial_coverage_is_recorded_and_exported_with_a_mask(client: TestClient) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    full = client.post(
        url, json={"model": "full", "correct": [1, 0, 1, 0], "confidence": [0.8, 0.3, 0.9, 0.4]}
    )
    part = client.post(
        url,
        json={
            "model": "part",
            "results": {
                "q1": {"correct": 1, "confidence": 0.7},
                "q3": {"correct": 0, "confidence": 0.2},
            },
        },
    )
    assert full.status_code == part.status_code == 201
    assert part.json()["coverage"] == 0.5 and part.json()["n_items"] == 2
    assert part.json()["accuracy"] == 0.5
    listing = client.get(f"/v1/benchmarks/{bench['id']}/models").json()["items"]
    assert [(m["model"]["name"], m["coverage"]) for m in listing] == [("full", 1.0), ("part", 0.5)]
    m = _matrix(client, bench["id"])
    assert m["correct"].dtype == np.float32
    np.testing.assert_array_equal(m["coverage"], [[1, 1, 1, 1], [0, 1, 0, 1]])
    np.testing.assert_array_equal(m["correct"][1], [np.nan, 1, np.nan, 0])
    np.testing.assert_allclose(m["confidence"][1], [np.nan, 0.7, np.nan, 0.2], rtol=1e-6)


def test_binary_full_matrix_is_uint8_like_the_shared_data(client: TestClient) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    for name, c in (("z/one", [1, 1, 0, 1]), ("a/two", [0, 1, 0, 0])):
        assert (
            client.post(
                url, json={"model": {"name": name, "params_b": 1.5}, "correct": c}
            ).status_code
            == 201
        )
    m = _matrix(client, bench["id"])
    assert m["correct"].dtype == np.uint8
    assert m["models"].tolist() == ["a/two", "z/one"]
    np.testing.assert_array_equal(m["correct"], [[0, 1, 0, 0], [1, 1, 0, 1]])
    np.testing.assert_array_equal(m["params_b"], [1.5, 1.5])
    assert m["item_ids"].tolist() == ["q0", "q1", "q2", "q3"]
    assert str(m["benchmark"]) == "mini" and int(m["version"]) == 1


@pytest.mark.parametrize(
    ("payload", "loc_start", "fragment"),
    [
        ({"model": "m", "results": {"q0": 1, "nope": 0}}, ["body", "item_ids"], "nope"),
        ({"model": "m", "results": {"q0": 1.5}}, ["body", "results['q0']"], "outside"),
        ({"model": "m", "correct": [1, 0, 1]}, ["body", "correct"], "4"),
        (
            {"model": "m", "correct": [1, 0, 1, 0], "confidence": [0.1]},
            ["body", "confidence"],
            "length",
        ),
        (
            {"model": "m", "correct": [1, 0, 1, 0], "item_ids": ["q0", "q0", "q1", "q2"]},
            ["body", "item_ids"],
            "duplicate",
        ),
        ({"model": "m", "results": {}}, ["body", "results"], "empty"),
        ({"model": "m"}, ["body"], "either"),
        ({"correct": [1, 0, 1, 0]}, ["body", "model"], "required"),
        ({"model": "m", "correct": [1, 0, "x", 0]}, ["body", "correct", 2], ""),
    ],
)
def test_bad_json_uploads_are_422_and_write_nothing(
    client: TestClient, db_session: Session, payload: dict, loc_start: list, fragment: str
) -> None:
    bench = _bench(client)
    response = client.post(f"/v1/benchmarks/{bench['id']}/results", json=payload)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    errors = response.json()["errors"]
    assert errors[0]["loc"][: len(loc_start)] == loc_start, errors
    assert fragment in response.json()["detail"] + " ".join(e["message"] for e in errors)
    assert _count(db_session) == 0 and _count(db_session, LanguageModel) == 0


def test_nan_and_infinity_are_rejected(client: TestClient, db_session: Session) -> None:
    bench = _bench(client)
    for literal in ("NaN", "Infinity"):
        body = '{"model": "m", "correct": [1, 0, ' + literal + ", 0]}"
        r = client.post(
            f"/v1/benchmarks/{bench['id']}/results",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["loc"][:2] == ["body", "correct"]
    assert _count(db_session) == 0


def test_unknown_benchmark_is_404(client: TestClient, db_session: Session) -> None:
    r = client.post(f"/v1/benchmarks/{uuid.uuid4()}/results", json={"model": "m", "correct": [1]})
    assert r.status_code == 404 and r.headers["content-type"] == PROBLEM
    assert _count(db_session, LanguageModel) == 0


def test_lm_eval_log_metric_choice_and_confidence(client: TestClient, db_session: Session) -> None:
    bench = _from_samples(client, ARC, "arc")
    url = f"/v1/benchmarks/{bench['id']}/results"
    ambiguous = client.post(url, params={"model": "m"}, content=ARC.read_bytes(), headers=NDJSON)
    assert ambiguous.status_code == 422
    err = ambiguous.json()["errors"][0]
    assert err["loc"] == ["query", "metric"] and "acc, acc_norm" in err["message"]
    assert _count(db_session) == 0

    ok = client.post(
        url, params={"model": "m", "metric": "acc_norm"}, content=ARC.read_bytes(), headers=NDJSON
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["metric"] == "acc_norm" and ok.json()["has_confidence"]
    assert ok.json()["source_format"] == "lm-eval"
    recs = sorted((json.loads(x) for x in ARC.read_text().splitlines()), key=lambda r: r["doc_id"])
    m = _matrix(client, bench["id"])
    np.testing.assert_array_equal(m["correct"][0], [r["acc_norm"] for r in recs])
    ll = np.array([[x[0] for x in r["filtered_resps"]] for r in recs])
    p = np.exp(ll - ll.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    gold = [r["target"] for r in recs]
    np.testing.assert_allclose(m["confidence"][0], p[np.arange(5), gold], rtol=1e-6)


def test_generative_log_needs_a_filter(client: TestClient) -> None:
    bench = _from_samples(client, GSM8K, "gsm8k")
    url = f"/v1/benchmarks/{bench['id']}/results"
    r = client.post(url, params={"model": "m"}, content=GSM8K.read_bytes(), headers=NDJSON)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "filter"]
    ok = client.post(
        url,
        params={"model": "m", "filter": "flexible-extract"},
        content=GSM8K.read_bytes(),
        headers=NDJSON,
    )
    assert ok.status_code == 201 and ok.json()["accuracy"] == 0.75
    assert not ok.json()["has_confidence"]


def test_malformed_jsonl_names_the_line_and_writes_nothing(
    client: TestClient, db_session: Session
) -> None:
    bench = _from_samples(client, ARC, "arc")
    lines = ARC.read_text().splitlines()
    lines[3] = "{oops"
    r = client.post(
        f"/v1/benchmarks/{bench['id']}/results",
        params={"model": "m", "metric": "acc"},
        content="\n".join(lines).encode(),
        headers=NDJSON,
    )
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == ["body", "line", 4]
    assert "line 4" in r.json()["errors"][0]["message"]
    assert _count(db_session) == 0 and _count(db_session, LanguageModel) == 0


def test_leaderboard_parquet_upload(client: TestClient) -> None:
    bench = _from_samples(client, MMLU_PRO, "mmlu_pro")
    recs = [json.loads(x) for x in MMLU_PRO.read_text().splitlines()]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(recs), buf)
    r = client.post(
        f"/v1/benchmarks/{bench['id']}/results",
        params={"model": "m", "task": "leaderboard_mmlu_pro"},
        content=buf.getvalue(),
        headers={"content-type": "application/vnd.apache.parquet"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["metric"] == "acc" and r.json()["accuracy"] == 0.75


def test_csv_and_multipart_uploads(client: TestClient) -> None:
    bench = _bench(client, n=3)
    url = f"/v1/benchmarks/{bench['id']}/results"
    csv = b"item_id,correct,confidence\nq0,1,0.9\nq1,0,0.2\nq2,1,0.6\n"
    r = client.post(
        url,
        params={"model": "csv-model"},
        content=csv,
        headers={"content-type": "text/csv; charset=utf-8"},
    )
    assert r.status_code == 201, r.text
    missing_model = client.post(url, content=csv, headers={"content-type": "text/csv"})
    assert missing_model.status_code == 422
    assert missing_model.json()["errors"][0]["loc"] == ["query", "model"]
    multi = client.post(
        url,
        params={"model": "mp-model"},
        files=[("file", ("r.csv", csv, "application/octet-stream"))],
    )
    assert multi.status_code == 201, multi.text
    bad_csv = client.post(
        url,
        params={"model": "x"},
        content=b"item_id,correct\nq0,1\nq1,7\n",
        headers={"content-type": "text/csv"},
    )
    assert bad_csv.status_code == 422
    assert bad_csv.json()["errors"][0]["loc"] == ["body", "line", 3, "correct"]


@pytest.mark.parametrize(
    ("content", "ctype", "status"),
    [
        (b"<xml/>", "application/xml", 415),
        (b"abc", "", 415),
        (b"", "application/json", 422),
        (b"   \n", "application/x-ndjson", 422),
        (b"", "text/csv", 422),
    ],
)
def test_unsupported_and_empty_bodies(
    client: TestClient, db_session: Session, content: bytes, ctype: str, status: int
) -> None:
    bench = _bench(client)
    headers = {"content-type": ctype} if ctype else {}
    r = client.post(
        f"/v1/benchmarks/{bench['id']}/results",
        params={"model": "m"},
        content=content,
        headers=headers,
    )
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM
    assert _count(db_session) == 0


def test_body_over_the_limit_is_413(app, client: TestClient, db_session: Session) -> None:
    bench = _bench(client)
    original = app.state.settings
    app.state.settings = original.model_copy(update={"max_body_bytes": 40})
    try:
        r = client.post(
            f"/v1/benchmarks/{bench['id']}/results",
            json={"model": "m", "correct": [1, 0, 1, 0], "confidence": [0.5] * 4},
        )
        chunked = client.post(
            f"/v1/benchmarks/{bench['id']}/results",
            params={"model": "m"},
            content=iter([b"item_id,correct\n", b"q0,1\n" * 40]),
            headers={"content-type": "text/csv"},
        )
    finally:
        app.state.settings = original
    assert r.status_code == 413 and r.headers["content-type"] == PROBLEM
    assert chunked.status_code == 413
    assert _count(db_session) == 0


def test_default_body_limit_fits_a_100k_item_result_set(settings) -> None:
    body = json.dumps(
        {
            "model": "m",
            "correct": [1] * 100_000,
            "confidence": [0.123456789] * 100_000,
            "item_ids": [f"{i:064x}" for i in range(100_000)],
        }
    )
    assert len(body) < settings.max_body_bytes


def test_idempotency_key_replays_and_rejects_a_different_body(
    client: TestClient, db_session: Session
) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    payload = {"model": "m", "correct": [1, 0, 1, 1]}
    first = client.post(url, json=payload, headers={"Idempotency-Key": "run-42"})
    assert first.status_code == 201
    replay = client.post(url, json=payload, headers={"Idempotency-Key": "run-42"})
    assert replay.status_code == 201 and replay.json() == first.json()
    assert replay.headers["idempotency-replayed"] == "true"
    other = client.post(
        url, json={"model": "m", "correct": [0, 1, 1, 1]}, headers={"Idempotency-Key": "run-42"}
    )
    assert other.status_code == 422 and other.json()["errors"][0]["loc"] == [
        "header",
        "Idempotency-Key",
    ]
    assert _count(db_session, IdempotencyKey) == 1 and _count(db_session) == 1


def test_idempotency_key_after_delete_stores_again(client: TestClient, db_session: Session) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    payload = {"model": "org/m", "correct": [1, 0, 1, 1]}
    key = {"Idempotency-Key": "push-1"}
    assert client.post(url, json=payload, headers=key).status_code == 201
    assert client.delete(f"/v1/benchmarks/{bench['id']}/models/org/m").status_code == 204
    again = client.post(url, json=payload, headers=key)
    assert again.status_code == 201 and again.json()["status"] == "created"
    assert "idempotency-replayed" not in again.headers
    assert _count(db_session) == 1
    assert _matrix(client, bench["id"])["models"].tolist() == ["org/m"]
    replay = client.post(url, json=payload, headers=key)
    assert replay.headers["idempotency-replayed"] == "true" and replay.json() == again.json()


def test_idempotency_key_after_replace_runs_again(client: TestClient, db_session: Session) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    payload = {"model": "m", "correct": [1, 0, 1, 1]}
    key = {"Idempotency-Key": "push-2"}
    assert client.post(url, json=payload, headers=key).status_code == 201
    replaced = client.post(
        url, params={"replace": "true"}, json={"model": "m", "correct": [0, 0, 0, 0]}
    )
    assert replaced.json()["status"] == "replaced"
    # the stored "created" no longer describes what is stored: the retry runs, and conflicts
    retry = client.post(url, json=payload, headers=key)
    assert retry.status_code == 409 and "idempotency-replayed" not in retry.headers


def test_expired_idempotency_key_is_not_replayed(
    client: TestClient, db_session: Session, settings
) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    key = {"Idempotency-Key": "old"}
    assert client.post(url, json={"model": "m", "correct": [1, 1, 1, 1]}, headers=key).status_code
    row = db_session.scalars(select(IdempotencyKey)).one()
    row.created_at = row.created_at - timedelta(hours=settings.idempotency_ttl_hours, minutes=1)
    db_session.flush()
    # an expired key is free again: another body is accepted, not a 422 replay mismatch
    fresh = client.post(
        url,
        params={"replace": "true"},
        json={"model": "m", "correct": [0, 0, 0, 0]},
        headers=key,
    )
    assert fresh.status_code == 200 and fresh.json()["status"] == "replaced"
    assert "idempotency-replayed" not in fresh.headers
    assert _count(db_session, IdempotencyKey) == 1


def test_list_and_delete_model_results(client: TestClient, db_session: Session) -> None:
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    client.post(url, json={"model": "org/keep", "correct": [1, 1, 1, 1]})
    client.post(url, json={"model": "org/drop", "correct": [0, 0, 0, 0]})
    listing = client.get(f"/v1/benchmarks/{bench['id']}/models").json()["items"]
    assert [m["model"]["name"] for m in listing] == ["org/drop", "org/keep"]
    assert all(m["created_at"] and m["updated_at"] for m in listing)
    gone = client.delete(f"/v1/benchmarks/{bench['id']}/models/org/drop")
    assert gone.status_code == 204
    again = client.delete(f"/v1/benchmarks/{bench['id']}/models/org/drop")
    assert again.status_code == 404 and again.headers["content-type"] == PROBLEM
    assert _count(db_session) == 1
    assert _matrix(client, bench["id"])["models"].tolist() == ["org/keep"]


def test_empty_matrix_export(client: TestClient) -> None:
    bench = _bench(client)
    m = _matrix(client, bench["id"])
    assert m["correct"].shape == (0, 4) and m["models"].shape == (0,)


def test_several_sample_logs_in_one_multipart_upload(client: TestClient) -> None:
    files = [("file", (p.name, p.read_bytes(), "application/x-ndjson")) for p in (ARC, MMLU_PRO)]
    bench = client.post("/v1/benchmarks/from-samples", params={"name": "two"}, files=files)
    assert bench.status_code == 201, bench.text
    url = f"/v1/benchmarks/{bench.json()['id']}/results"
    r = client.post(url, params={"model": "m", "metric": "acc"}, files=files)
    assert r.status_code == 201, r.text
    assert r.json()["n_items"] == 9 and r.json()["coverage"] == 1.0
    assert r.json()["has_confidence"]
    only_arc = client.post(url, params={"model": "arc-only", "metric": "acc"}, files=files[:1])
    assert only_arc.status_code == 201 and only_arc.json()["coverage"] == pytest.approx(5 / 9)
    bad = [files[0], ("file", (GSM8K.name, GSM8K.read_bytes(), "application/x-ndjson"))]
    r = client.post(url, params={"model": "x", "metric": "acc"}, files=bad)
    assert r.status_code == 422
    err = r.json()["errors"][0]
    assert err["loc"] == ["query", "metric"] and err["message"].startswith("file 2: unknown metric")
    broken = [files[0], ("file", ("b.jsonl", b'{"doc_id": 1}\n{oops\n', "application/x-ndjson"))]
    r = client.post(url, params={"model": "x", "metric": "acc"}, files=broken)
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == ["body", "file", 2, "line", 2]


def test_nul_characters_are_422_not_500(client: TestClient, db_session: Session) -> None:
    bad_bench = client.post("/v1/benchmarks", json={"name": "n\x00x", "items": [{"id": "a"}]})
    assert bad_bench.status_code == 422
    bench = _bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    for r in (
        client.post(url, json={"model": "m\x00", "correct": [1, 0, 1, 0]}),
        client.post(url, json={"model": {"name": "m", "family": "f\x00"}, "correct": [1] * 4}),
        client.post(
            url,
            params={"model": "m\x00"},
            content=b"item_id,correct\nq0,1\n",
            headers={"content-type": "text/csv"},
        ),
        client.get("/v1/benchmarks", params={"name": "a\x00"}),
    ):
        assert r.status_code == 422, r.text
    assert client.delete(f"/v1/benchmarks/{bench['id']}/models/x%00y").status_code == 404
    assert _count(db_session) == 0
