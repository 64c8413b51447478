"""Exactly-once batches of an evaluation session (issue 23), over HTTP on Postgres.

A results post names the batch it answers (``?batch=N``, or the item ids, which belong to one
batch only since items are drawn without replacement). A resend of an answered batch is answered
with the reply that batch got and changes nothing; a different body for it is a 409 naming the
field at fault; values without item ids must name their batch (422). The racing cases run
against a real uvicorn server on the test database with real commits, so the row lock is what
serialises them.

Oracles: the number of items the server holds after the posts (``items_used``, the history) and
the first reply of the batch, against which every resend is compared field by field.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.api._subset_data import Seeded, committed, seed_gpqa

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    s = seed_gpqa(db_session, n_models=12)
    db_session.commit()
    return s


def _start(client, version_id, seeded: Seeded, *, batch_size: int = 20, seed: int = 4) -> dict:
    r = client.post(
        f"/v1/benchmarks/{version_id}/sessions",
        json={
            "model": "new/candidate",
            "baseline": seeded.names[0],
            "policy": "random",
            "batch_size": batch_size,
            "seed": seed,
        },
    )
    assert r.status_code == 201, r.text
    return r.json()


def _values(body: dict, truth: np.ndarray, ids: list[str]) -> list[float]:
    """The model's values on the open batch, in the order served (no item ids)."""
    return [float(truth[ids.index(it["item_id"])]) for it in body["next_items"]]


def _fields(r) -> set[str]:
    assert r.headers["content-type"].startswith(PROBLEM), r.text
    return {e["loc"][-1] for e in r.json().get("errors") or []}


def test_idless_resend_is_applied_once(client: TestClient, seeded: Seeded) -> None:
    """Two identical posts of values in serving order for batch 1: the second is answered with
    the first's reply (today it was applied to batch 2: items_used 40)."""
    truth = seeded.correct[5].astype(float)
    body = _start(client, seeded.version_id, seeded)
    sid = body["id"]
    payload = {"model": "new/candidate", "correct": _values(body, truth, seeded.item_ids)}
    url = f"/v1/sessions/{sid}/results?batch=1"
    r1 = client.post(url, json=payload)
    r2 = client.post(url, json=payload)
    assert r1.status_code == r2.status_code == 200, (r1.text, r2.text)
    assert r1.json()["items_used"] == 20 and r1.json()["step"] == 1
    assert "Idempotency-Replayed" not in r1.headers
    assert r2.headers.get("Idempotency-Replayed") == "true"
    assert r2.json() == r1.json()
    now = client.get(f"/v1/sessions/{sid}").json()
    assert now["items_used"] == 20 and len(now["history"]) == 1
    # values without item ids that do not name their batch cannot be told from a resend
    r = client.post(f"/v1/sessions/{sid}/results", json=payload)
    assert r.status_code == 422 and "batch" in _fields(r), r.text
    assert client.get(f"/v1/sessions/{sid}").json() == now


def test_resend_of_an_older_batch_returns_its_reply(client: TestClient, seeded: Seeded) -> None:
    """After batch 2, a resend of batch 1 (by number or by its item ids) answers batch 1's
    reply (history up to batch 1, batch 2 as next_items) and the session stays at batch 2."""
    truth = seeded.correct[5].astype(float)
    body = _start(client, seeded.version_id, seeded, batch_size=10)
    sid = body["id"]
    first = {"model": "new/candidate", "correct": _values(body, truth, seeded.item_ids)}
    by_ids = {
        "model": "new/candidate",
        "item_ids": [it["item_id"] for it in body["next_items"]][::-1],
        "correct": first["correct"][::-1],
    }
    r1 = client.post(f"/v1/sessions/{sid}/results?batch=1", json=first)
    assert r1.status_code == 200, r1.text
    second = {"model": "new/candidate", "correct": _values(r1.json(), truth, seeded.item_ids)}
    r2 = client.post(f"/v1/sessions/{sid}/results?batch=2", json=second)
    assert r2.status_code == 200 and r2.json()["items_used"] == 20, r2.text
    for url, payload in [
        (f"/v1/sessions/{sid}/results?batch=1", first),
        (f"/v1/sessions/{sid}/results", by_ids),
        (f"/v1/sessions/{sid}/results?batch=1", by_ids),
    ]:
        again = client.post(url, json=payload)
        assert again.status_code == 200, again.text
        assert again.headers.get("Idempotency-Replayed") == "true"
        assert again.json() == r1.json()
    now = client.get(f"/v1/sessions/{sid}").json()
    assert now["items_used"] == 20 and now["step"] == 2 and now["history"] == r2.json()["history"]


def test_a_different_body_for_an_answered_batch_is_409(client: TestClient, seeded: Seeded) -> None:
    truth = seeded.correct[5].astype(float)
    body = _start(client, seeded.version_id, seeded, batch_size=5)
    sid = body["id"]
    served = [it["item_id"] for it in body["next_items"]]
    values = _values(body, truth, seeded.item_ids)
    ok = client.post(
        f"/v1/sessions/{sid}/results?batch=1", json={"model": "new/candidate", "correct": values}
    )
    assert ok.status_code == 200, ok.text
    after = client.get(f"/v1/sessions/{sid}").json()
    flipped = [1.0 - values[0], *values[1:]]
    offered = served + [it["item_id"] for it in after["next_items"]]
    unseen = next(i for i in seeded.item_ids if i not in offered)
    cases = [
        ("?batch=1", {"correct": flipped}, 409, "correct"),
        ("", {"item_ids": served, "correct": flipped}, 409, "correct"),
        ("?batch=1", {"item_ids": [*served[:4], unseen], "correct": values}, 409, "item_ids"),
        ("?batch=1", {"correct": values[:4]}, 409, "correct"),
        ("?batch=3", {"correct": values}, 409, "batch"),  # not served yet
        ("?batch=0", {"correct": values}, 422, "batch"),
    ]
    for query, extra, code, field in cases:
        r = client.post(
            f"/v1/sessions/{sid}/results{query}", json={"model": "new/candidate", **extra}
        )
        assert r.status_code == code, (query, extra, r.text)
        assert field in _fields(r), (query, extra, r.json())
    assert client.get(f"/v1/sessions/{sid}").json() == after


# --- racing posts: a real server, real commits -------------------------------------------------


@pytest.fixture(scope="module")
def live_api(engine, settings) -> Iterator[str]:
    """The API served by uvicorn in a thread on this run's Postgres database."""
    import time

    import uvicorn

    from app.main import create_app
    from tests.cli.service import free_port

    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def committed_gpqa(committed_sessionmaker) -> Iterator[Seeded]:
    """12 GPQA models committed (the server's requests must see them); deleted at the end."""
    from app.db.models import Benchmark, BenchmarkVersion, EvaluationSession, LanguageModel

    seeded = committed(committed_sessionmaker, n_models=12)
    yield seeded
    with committed_sessionmaker() as s:
        version = s.get(BenchmarkVersion, seeded.version_id)
        bench_id = version.benchmark_id
        for row in s.scalars(
            select(EvaluationSession).where(
                EvaluationSession.benchmark_version_id == seeded.version_id
            )
        ):
            s.delete(row)
        s.flush()
        s.delete(s.get(Benchmark, bench_id))
        s.flush()
        for lm in s.scalars(select(LanguageModel).where(LanguageModel.name.in_(seeded.names))):
            s.delete(lm)
        s.commit()


def _race(url: str, n: int, payload: dict, headers: dict[str, str]) -> list[httpx.Response]:
    """``n`` identical posts released together."""
    barrier = threading.Barrier(n)

    def post(_: int) -> httpx.Response:
        with httpx.Client(timeout=60) as http:
            barrier.wait()
            return http.post(url, json=payload, headers=headers)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(post, range(n)))


def test_concurrent_copies_are_applied_once(live_api: str, committed_gpqa: Seeded) -> None:
    """20 copies of one id-less post at once (no key): one applies the batch, 19 are answered
    with its reply (today each copy was applied to the next batch: 400 items)."""
    seeded = committed_gpqa
    truth = seeded.correct[5].astype(float)
    with httpx.Client(base_url=live_api, timeout=60) as http:
        body = _start(http, seeded.version_id, seeded)
        sid = body["id"]
        payload = {"model": "new/candidate", "correct": _values(body, truth, seeded.item_ids)}
        replies = _race(f"{live_api}/v1/sessions/{sid}/results?batch=1", 20, payload, {})
        assert [r.status_code for r in replies] == [200] * 20, [r.text for r in replies]
        fresh = [r for r in replies if r.headers.get("Idempotency-Replayed") != "true"]
        assert len(fresh) == 1
        assert all(r.json() == fresh[0].json() for r in replies)
        now = http.get(f"/v1/sessions/{sid}").json()
    assert now["items_used"] == 20 and len(now["history"]) == 1
    assert [r.json()["items_used"] for r in replies] == [20] * 20


def test_racing_posts_with_one_key_see_the_server_state(
    live_api: str, committed_gpqa: Seeded
) -> None:
    """8 trials of 8 posts with one Idempotency-Key released together: every reply says the
    items the server holds (today 3 of 8 trials answered 20 while the server held 40-140)."""
    seeded = committed_gpqa
    truth = seeded.correct[7].astype(float)
    with httpx.Client(base_url=live_api, timeout=60) as http:
        for trial in range(8):
            body = _start(http, seeded.version_id, seeded, seed=100 + trial)
            sid = body["id"]
            payload = {"model": "new/candidate", "correct": _values(body, truth, seeded.item_ids)}
            key = {"Idempotency-Key": f"race-{uuid.uuid4().hex}"}
            replies = _race(f"{live_api}/v1/sessions/{sid}/results?batch=1", 8, payload, key)
            assert [r.status_code for r in replies] == [200] * 8, [r.text for r in replies]
            now = http.get(f"/v1/sessions/{sid}").json()
            held = (now["items_used"], len(now["history"]))
            seen = {(r.json()["items_used"], r.json()["step"]) for r in replies}
            assert held == (20, 1) and seen == {held}, (trial, held, seen)


def test_racing_posts_on_sqlite_are_serialised() -> None:
    """The same races on SQLite (``make run``'s database, no row locks): the session row is
    written first, so a second request waits for the first one's commit and then sees its batch
    as answered."""
    from tests.api._subset_data import gpqa
    from tests.cli.service import thread_server

    data = gpqa()
    ids = [str(i) for i in data["item_ids"][:60]]
    truth = data["correct"][:2, :60].astype(float)
    with thread_server() as (url, _), httpx.Client(base_url=url, timeout=60) as http:
        r = http.post("/v1/benchmarks", json={"name": "race", "items": [{"id": i} for i in ids]})
        assert r.status_code == 201, r.text
        r = http.post(
            "/v1/benchmarks/race/results",
            json={"model": "base", "item_ids": ids, "correct": truth[0].tolist()},
        )
        assert r.status_code == 201, r.text
        for headers in ({}, {"Idempotency-Key": "sqlite-race"}):
            body = http.post(
                "/v1/benchmarks/race/sessions",
                json={"model": "new", "baseline": "base", "batch_size": 10, "seed": 1},
            ).json()
            sid = body["id"]
            payload = {
                "model": "new",
                "correct": [truth[1][ids.index(it["item_id"])] for it in body["next_items"]],
            }
            replies = _race(f"{url}/v1/sessions/{sid}/results?batch=1", 8, payload, headers)
            assert [r.status_code for r in replies] == [200] * 8, [r.text for r in replies]
            now = http.get(f"/v1/sessions/{sid}").json()
            assert now["items_used"] == 10 and len(now["history"]) == 1
            assert {r.json()["items_used"] for r in replies} == {10}
