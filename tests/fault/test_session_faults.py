"""Evaluation sessions under faults, against live uvicorn processes (issue 16, part 2).

Each test stores a slice of the real GPQA matrix (12 models x 448 items) through the services,
runs ``uvicorn`` on it (auth on) and evaluates a held-out GPQA model (row 300, not stored) against
the stored model closest to it in accuracy, goal ``precision`` with an unreachable target so the
session runs to ``max_items``. The oracles are an uninterrupted session with the same seed on the
same service (history, final intervals) and the offline confidence sequence
(:func:`app.core.sequential.confidence_sequences.confidence_sequence`) on the same values in the seeded order.

* the API SIGKILLed (its whole process group) and restarted: between batches, while a request
  waits inside its transaction (the test holds the session's row lock, so the kill lands
  mid-request deterministically), and at a random point of a burst of posts;
* the same batch posted twice in turn and by two clients at once (threads, two API processes),
  without a key, with the same Idempotency-Key and with different keys;
* a private Postgres stopped between batches and started again.

Every test is bounded (pytest-timeout); signals go only to processes started here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from app.core.sequential.confidence_sequences import confidence_sequence
from app.db.models import EvaluationSession
from tests.api._subset_data import Seeded, gpqa, seed_gpqa
from tests.fault.conftest import payload
from tests.support.procs import ApiServer, migrated_database, private_postgres, service_env
from tests.support.stack import create_key

pytestmark = pytest.mark.integration

PROBLEM = "application/problem+json"
HELD_OUT = 300  # GPQA row evaluated by the sessions (not stored)
N_STORED = 12
BATCH = 5
MAX_ITEMS = 150
VOLATILE = ("id", "created_at", "updated_at")


# --- setup ------------------------------------------------------------------------------------


def seed_database(url: str) -> tuple[Seeded, np.ndarray, dict[str, Any]]:
    """GPQA slice stored in ``url``; ``(seeded, truth of the held-out model, session spec)``."""
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            seeded = seed_gpqa(session, n_models=N_STORED, name="gpqa-faults")
            session.commit()
    finally:
        engine.dispose()
    truth = gpqa()["correct"][HELD_OUT].astype(float)
    acc = seeded.correct.mean(axis=1)
    baseline = seeded.names[int(np.argmin(np.abs(acc - truth.mean())))]
    spec = {
        "model": "held-out/gpqa-300",
        "baseline": baseline,
        "policy": "random",
        "estimand": "benchmark",  # checked against the finite-population CS below
        "goal": "precision",
        "precision": 1e-4,  # unreachable before max_items: the session runs every batch
        "batch_size": BATCH,
        "max_items": MAX_ITEMS,
        "seed": 20261201,
    }
    return seeded, truth, spec


def service(url: str, **settings: str) -> dict[str, str]:
    return service_env(
        DATABASE_URL=url,
        BROKER_URL="redis://127.0.0.1:1/0",  # sessions of the random policy need no broker
        AUTH_ENABLED="true",
        DATABASE_CONNECT_TIMEOUT="2",
        DATABASE_POOL_TIMEOUT="3",
        **settings,
    )


@contextlib.contextmanager
def live_api(env: dict[str, str], workers: int = 1) -> Iterator[list[ApiServer]]:
    """A one-element list holding the running server (a test replaces it after a restart);
    whatever is in it at the end is stopped."""
    box = [ApiServer(env, workers=workers)]
    box[0].start()
    try:
        yield box
    finally:
        box[0].stop()


def sigkill_and_restart(api: ApiServer) -> ApiServer:
    """SIGKILL the server's process group (started by us, in its own session), then start a new
    server with the same settings on the same port."""
    assert api.proc is not None and api.proc.poll() is None
    os.killpg(api.proc.pid, signal.SIGKILL)
    api.proc.wait(timeout=10)
    assert api.output is not None
    api.output.join()
    fresh = ApiServer(api.env, workers=api.workers, port=api.port)
    fresh.start()
    return fresh


def client(api: ApiServer, key: str, timeout: float = 30.0) -> httpx.Client:
    return httpx.Client(
        base_url=api.url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout
    )


# --- driving a session ------------------------------------------------------------------------


def post(c: httpx.Client, sid: str, data: dict[str, Any], key: str | None = None):
    headers = {"Idempotency-Key": key} if key else {}
    return c.post(f"/v1/sessions/{sid}/results", json=data, headers=headers)


def step(c: httpx.Client, body: dict, truth: np.ndarray, ids: list[str]) -> dict[str, Any]:
    r = post(c, body["id"], payload(body, truth, ids))
    assert r.status_code == 200, r.text
    assert r.headers.get("idempotency-replayed") is None, r.headers
    assert r.json()["step"] == body["step"] + 1
    return r.json()


def run_out(c: httpx.Client, body: dict, truth: np.ndarray, ids: list[str]) -> dict[str, Any]:
    for _ in range(MAX_ITEMS // BATCH + 1):
        if body["state"] != "open":
            return body
        body = step(c, body, truth, ids)
    raise AssertionError(f"session still open after {MAX_ITEMS // BATCH} batches: {body}")


def create(c: httpx.Client, version_id: Any, spec: dict[str, Any]) -> dict[str, Any]:
    r = c.post(f"/v1/benchmarks/{version_id}/sessions", json=spec)
    assert r.status_code == 201, r.text
    return r.json()


def strip(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in VOLATILE}


def assert_like_reference(
    final: dict[str, Any], reference: dict[str, Any], truth: np.ndarray, spec: dict[str, Any]
) -> None:
    """Nothing lost, nothing applied twice: the same history and final state as the session
    run without faults, one row per batch, and the offline confidence sequence's intervals."""
    assert final["state"] == reference["state"] == "exhausted", (final, reference)
    assert strip(final) == strip(reference)
    hist = final["history"]
    assert [h["step"] for h in hist] == list(range(1, MAX_ITEMS // BATCH + 1))
    assert [h["items_used"] for h in hist] == list(range(BATCH, MAX_ITEMS + 1, BATCH))
    seen = np.random.default_rng(spec["seed"]).permutation(truth.size)[:MAX_ITEMS]
    path = confidence_sequence(truth[seen], n_items=truth.size, alpha=0.05)
    cols = np.arange(BATCH - 1, MAX_ITEMS, BATCH)
    np.testing.assert_allclose([h["estimate"]["lower"] for h in hist], path.lower[0, cols])
    np.testing.assert_allclose([h["estimate"]["upper"] for h in hist], path.upper[0, cols])
    assert final["estimate"]["value"] == pytest.approx(truth[seen].mean(), abs=1e-12)


def lock_waiters(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                )
                or 0
            )
    finally:
        engine.dispose()


# --- (a) the API SIGKILLed mid-session --------------------------------------------------------


@pytest.mark.timeout(150)
def test_api_sigkilled_mid_session_continues_from_the_last_applied_batch(
    fault_database: str,
) -> None:
    seeded, truth, spec = seed_database(fault_database)
    ids = seeded.item_ids
    key = create_key(fault_database, ["write"])
    with live_api(service(fault_database)) as box:
        with client(box[0], key) as c:
            body = create(c, seeded.version_id, spec)
            reference = create(c, seeded.version_id, spec)
            sid = body["id"]
            for _ in range(2):
                body = step(c, body, truth, ids)

        # 1. killed between batches: the restarted service has the session as it was
        box[0] = sigkill_and_restart(box[0])
        with client(box[0], key) as c:
            after = c.get(f"/v1/sessions/{sid}").json()
            assert after == body
            body = step(c, body, truth, ids)

        # 2. killed while a post waits inside its transaction (we hold the row lock): the
        # open transaction dies with the process; nothing of that batch is applied
        engine = create_engine(fault_database)
        try:
            with engine.connect() as conn:
                tx = conn.begin()
                conn.execute(
                    select(EvaluationSession.id)
                    .where(EvaluationSession.id == sid)
                    .with_for_update()
                )
                failed: list[BaseException] = []

                def doomed_post() -> None:
                    with client(box[0], key) as c2:
                        try:
                            post(c2, sid, payload(body, truth, ids))
                        except httpx.TransportError as exc:
                            failed.append(exc)

                thread = threading.Thread(target=doomed_post)
                thread.start()
                deadline = time.monotonic() + 20
                while lock_waiters(fault_database) == 0:
                    assert time.monotonic() < deadline, "the post never reached the row lock"
                    time.sleep(0.05)
                os.killpg(box[0].proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
                thread.join(timeout=20)
                assert not thread.is_alive() and len(failed) == 1, failed
                tx.rollback()
        finally:
            engine.dispose()
        box[0].proc.wait(timeout=10)  # type: ignore[union-attr]
        fresh = ApiServer(box[0].env, port=box[0].port)
        fresh.start()
        box[0] = fresh
        with client(box[0], key) as c:
            assert c.get(f"/v1/sessions/{sid}").json() == body  # batch 4 not applied
            body = step(c, body, truth, ids)  # the client's retry applies it, once

        # 3. killed at a random point of a burst of posts: the in-flight batch was applied or
        # not; the client's retry of it converges either way (applied now, or a replay)
        rng = np.random.default_rng(16)
        known: dict[str, Any] = {"body": body, "in_flight": None}

        def burst() -> None:
            with client(box[0], key) as c2:
                for _ in range(25):  # batches 5 to 29 of 30: the kill comes first
                    data = payload(known["body"], truth, ids)
                    known["in_flight"] = data
                    try:
                        r = post(c2, sid, data)
                    except httpx.TransportError:
                        return
                    assert r.status_code == 200, r.text
                    known["body"], known["in_flight"] = r.json(), None

        thread = threading.Thread(target=burst)
        thread.start()
        time.sleep(float(rng.uniform(0.05, 0.15)))
        box[0] = sigkill_and_restart(box[0])
        thread.join(timeout=20)
        assert not thread.is_alive()
        before = known["body"]
        assert known["in_flight"] is not None, "the burst ended before the kill"
        with client(box[0], key) as c:
            now = c.get(f"/v1/sessions/{sid}").json()
            assert now["step"] in (before["step"], before["step"] + 1), (now, before)
            r = post(c, sid, known["in_flight"])
            assert r.status_code == 200, r.text
            replayed = r.headers.get("idempotency-replayed") == "true"
            assert replayed == (now["step"] == before["step"] + 1)
            assert r.json()["step"] == before["step"] + 1
            body = r.json()
            final = run_out(c, body, truth, ids)
            ref_final = run_out(c, reference, truth, ids)
            assert c.get(f"/v1/sessions/{sid}").json() == final
        assert "unhandled error" not in box[0].log, box[0].log[-3000:]
    assert_like_reference(final, ref_final, truth, spec)


# --- (b) the same batch twice, in turn and at once --------------------------------------------


@pytest.mark.timeout(150)
def test_the_same_batch_twice_or_racing_is_applied_exactly_once(fault_database: str) -> None:
    seeded, truth, spec = seed_database(fault_database)
    ids = seeded.item_ids
    key = create_key(fault_database, ["write"])
    with live_api(service(fault_database), workers=2) as box:
        api = box[0]
        with client(api, key) as c:
            body = create(c, seeded.version_id, spec)
            reference = create(c, seeded.version_id, spec)
            sid = body["id"]

            # in turn, no key: the retry of the batch applied last is answered, not applied
            data = payload(body, truth, ids)
            first, again = post(c, sid, data), post(c, sid, data)
            assert first.status_code == again.status_code == 200, again.text
            assert again.headers.get("idempotency-replayed") == "true"
            assert again.json() == first.json() and first.json()["step"] == 1
            body = first.json()

            # in turn, one key: the stored response comes back
            data = payload(body, truth, ids)
            first, again = post(c, sid, data, "seq-k"), post(c, sid, data, "seq-k")
            assert first.status_code == again.status_code == 200, again.text
            assert again.headers.get("idempotency-replayed") == "true"
            assert again.json() == first.json() and first.json()["step"] == 2
            body = first.json()

        def race(data: dict[str, Any], keys: tuple[str | None, str | None]) -> list[httpx.Response]:
            barrier = threading.Barrier(2)

            def one(k: str | None) -> httpx.Response:
                with client(api, key) as c2:
                    barrier.wait(timeout=20)
                    return post(c2, sid, data, k)

            with ThreadPoolExecutor(2) as pool:
                return list(pool.map(one, keys))

        # at once: a CI retry racing the original (no key, the same key, two keys), across two
        # API processes; several rounds so that the requests really overlap
        rounds = [(None, None), ("race-{n}", "race-{n}"), ("a-{n}", "b-{n}")] * 3
        for n, (ka, kb) in enumerate(rounds):
            keys = (ka and ka.format(n=n), kb and kb.format(n=n))
            rs = race(payload(body, truth, ids), keys)
            assert [r.status_code for r in rs] == [200, 200], (
                keys,
                [r.text for r in rs],
                api.log[-4000:],
            )
            assert all(r.json()["step"] == body["step"] + 1 for r in rs), [r.json() for r in rs]
            assert strip(rs[0].json()) == strip(rs[1].json())
            flags = sorted(r.headers.get("idempotency-replayed") == "true" for r in rs)
            assert flags == [False, True], flags  # one applied it, the other was answered
            body = rs[0].json()
            with client(api, key) as c:
                assert strip(c.get(f"/v1/sessions/{sid}").json()) == strip(body)

        with client(api, key) as c:
            final = run_out(c, body, truth, ids)
            ref_final = run_out(c, reference, truth, ids)
        assert "unhandled error" not in api.log, api.log[-3000:]
    assert_like_reference(final, ref_final, truth, spec)


# --- (c) Postgres restarted between batches ---------------------------------------------------


@pytest.mark.timeout(180)
def test_postgres_restarted_between_batches_503_then_the_session_goes_on() -> None:
    with private_postgres() as pg, migrated_database(pg.admin_url, "benchslice") as url:
        seeded, truth, spec = seed_database(url)
        ids = seeded.item_ids
        key = create_key(url, ["write"])
        with live_api(service(url)) as box, client(box[0], key, timeout=20) as c:
            body = create(c, seeded.version_id, spec)
            reference = create(c, seeded.version_id, spec)
            sid = body["id"]
            for _ in range(3):
                body = step(c, body, truth, ids)

            pg.stop()
            data = payload(body, truth, ids)
            for attempt in (
                lambda: post(c, sid, data),
                lambda: post(c, sid, data, "during-outage"),
                lambda: c.get(f"/v1/sessions/{sid}"),
            ):
                t0 = time.monotonic()
                r = attempt()
                assert time.monotonic() - t0 < 10, "not bounded by the connect/pool timeouts"
                assert r.status_code == 503, r.text
                assert r.headers["content-type"].startswith(PROBLEM), r.headers
                assert r.json()["status"] == 503
                assert int(r.headers["retry-after"]) > 0

            pg.start()
            deadline = time.monotonic() + 60
            while (r := c.get(f"/v1/sessions/{sid}")).status_code != 200:
                assert r.status_code == 503, r.text
                assert time.monotonic() < deadline, "no recovery within 60 s"
                time.sleep(0.3)
            assert r.json() == body  # intact: nothing of the refused posts was applied
            # the key used during the outage stored nothing: its retry runs as new
            r = post(c, sid, data, "during-outage")
            assert r.status_code == 200, r.text
            assert r.headers.get("idempotency-replayed") is None
            assert r.json()["step"] == body["step"] + 1
            final = run_out(c, r.json(), truth, ids)
            ref_final = run_out(c, reference, truth, ids)
            assert "unhandled error" not in box[0].log, box[0].log[-3000:]
    assert_like_reference(final, ref_final, truth, spec)
