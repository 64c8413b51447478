"""Racing round posts of a release gate (issue 34) against a real uvicorn server with real
commits: on Postgres (row lock + version counter) and on SQLite (``make run``'s database: the
write lock taken first). Oracle: the items the server holds after the race (``items_used``, the
history) and the one fresh reply every copy must equal."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import delete

from app.db.models import Gate
from tests.api._subset_data import Seeded
from tests.api.test_session_batches import committed_gpqa, live_api  # noqa: F401 (fixtures)


def _race(url: str, payloads: list[dict]) -> list[httpx.Response]:
    """One post per payload, released together."""
    barrier = threading.Barrier(len(payloads))

    def post(payload: dict) -> httpx.Response:
        with httpx.Client(timeout=60) as http:
            barrier.wait()
            return http.post(url, json=payload)

    with ThreadPoolExecutor(len(payloads)) as pool:
        return list(pool.map(post, payloads))


def _round(gate: dict, truth: dict[str, float], flip: bool = False) -> dict:
    rnd = gate["next_round"]
    return {
        "round": rnd["round"],
        "results": [
            {"benchmark": k, "item_ids": [it["item_id"] for it in items],
             "correct": [abs(float(flip) - truth[it["item_id"]]) for it in items]}
            for k, items in rnd["items"].items()
        ],
    }  # fmt: skip


@pytest.fixture
def gates_cleanup(committed_sessionmaker) -> Iterator[None]:
    yield
    with committed_sessionmaker() as s:  # the module's benchmark goes at its end: gates first
        s.execute(delete(Gate).where(Gate.model_name == "race/candidate"))
        s.commit()


def _check_race(http: httpx.Client, base: str, gate: dict, truth: dict) -> None:
    gid = gate["id"]
    first = _round(gate, truth)
    replies = _race(f"{base}/v1/gates/{gid}/results", [first] * 12)
    assert [r.status_code for r in replies] == [200] * 12, [r.text for r in replies]
    fresh = [r for r in replies if r.headers.get("Idempotency-Replayed") != "true"]
    assert len(fresh) == 1
    now = http.get(f"/v1/gates/{gid}").json()
    served = sum(len(v) for v in gate["next_round"]["items"].values())
    assert now["items_used"] == served and len(now["history"]) == 1
    assert {r.json()["items_used"] for r in replies} == {served}
    # round 2 raced by two different bodies: one is applied, copies of it are replays and the
    # other body's copies are 409s naming `results`; never two applications
    same, other = _round(now, truth), _round(now, truth, flip=True)
    replies = _race(f"{base}/v1/gates/{gid}/results", [same, other] * 4)
    codes = sorted(r.status_code for r in replies)
    assert codes == [200] * 4 + [409] * 4, [r.text for r in replies]
    assert all(
        r.json()["errors"][0]["loc"][-1] == "results" for r in replies if r.status_code == 409
    )
    after = http.get(f"/v1/gates/{gid}").json()
    assert len(after["history"]) == 2
    assert after["items_used"] == served + sum(len(v) for v in now["next_round"]["items"].values())


def test_racing_round_posts_on_postgres_are_applied_once(
    live_api: str,  # noqa: F811
    committed_gpqa: Seeded,  # noqa: F811
    gates_cleanup: None,
) -> None:
    s = committed_gpqa
    truth = dict(zip(s.item_ids, s.correct[0].astype(float).tolist(), strict=True))
    with httpx.Client(base_url=live_api, timeout=60) as http:
        gate = http.post("/v1/gates", json={
            "model": "race/candidate", "baseline": s.names[0], "margin": 0.01, "batch_size": 20,
            "seed": 5, "benchmarks": [{"benchmark": str(s.version_id)}]}).json()  # fmt: skip
        _check_race(http, live_api, gate, truth)


def test_racing_round_posts_on_sqlite_are_serialised() -> None:
    from tests.api._subset_data import gpqa
    from tests.cli.service import thread_server

    data = gpqa()
    ids = [str(i) for i in data["item_ids"][:120]]
    rows = data["correct"][:2, :120].astype(float)
    with thread_server() as (url, _), httpx.Client(base_url=url, timeout=60) as http:
        r = http.post(
            "/v1/benchmarks", json={"name": "gate-race", "items": [{"id": i} for i in ids]}
        )
        assert r.status_code == 201, r.text
        r = http.post("/v1/benchmarks/gate-race/results",
                      json={"model": "base", "item_ids": ids, "correct": rows[0].tolist()})  # fmt: skip
        assert r.status_code == 201, r.text
        gate = http.post("/v1/gates", json={
            "model": "race/candidate", "baseline": "base", "margin": 0.01, "batch_size": 10,
            "seed": 1, "benchmarks": [{"benchmark": "gate-race"}]}).json()  # fmt: skip
        _check_race(http, url, gate, dict(zip(ids, rows[0].tolist(), strict=True)))
