"""Races on the data (issue 39), against the real service: ``uvicorn --workers 2`` with keys on,
a Celery worker, Postgres and Redis. Each race runs 12 trials; every trial has one of the
outcomes a serial order of the two requests gives, never a 500, never a lost or duplicated
version of a model's results, never a write across projects.

* a project-B key creating a name while project A creates it (the owner check and the insert
  under one lock);
* replace / delete / restore of one model's results against each other (serialised on the
  model): the stored row and the archive equal those of one serial order exactly;
* a push by name against the retire of the version it resolved: the push lands before the
  retire, or is refused (409) with nothing stored.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.services.access.keys import create_key
from app.services.access.projects import create_project
from tests.fault.conftest import unique
from tests.support.procs import api_server, celery_worker, service_env

pytestmark = pytest.mark.integration

TRIALS = 12
N_ITEMS = 400


@dataclass
class Racers:
    url: str
    engine: Engine
    a_write: str
    a_admin: str
    b_write: str
    key_ids: dict[str, str]  # token -> the key's id (as the audit trail names it)

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params))


@pytest.fixture(scope="module")
def racers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Racers]:
    from tests.conftest import _RUN_ID, ADMIN_DATABASE_URL, TEST_REDIS_URL
    from tests.support.procs import migrated_database

    tag = unique("races")
    with migrated_database(ADMIN_DATABASE_URL, f"benchslice_test_{tag}") as db_url:
        engine = create_engine(db_url)
        tokens: dict[str, str] = {}
        ids: dict[str, str] = {}
        with Session(engine) as session, session.begin():
            create_project(session, "team-a")
            create_project(session, "team-b")
            for name, roles in (
                ("a-ci", {"team-a": "write"}),
                ("a-lead", {"team-a": "admin"}),
                ("b-ci", {"team-b": "write"}),
            ):
                row, token = create_key(session, name, roles)
                tokens[name] = token
                ids[token] = str(row.id)
        env = service_env(
            DATABASE_URL=db_url,
            BROKER_URL=TEST_REDIS_URL,
            CELERY_QUEUE=f"benchslice-test-{tag}",
            CELERY_KEY_PREFIX=f"benchslice-test-{_RUN_ID}:{tag}:",
            AUTH_ENABLED="true",
            RATE_LIMIT_PER_SECOND="0",  # the trials write fast; limits are not under test
        )
        try:
            with celery_worker(env, f"races-{tag}"), api_server(env, workers=2) as api:
                yield Racers(api.url, engine, tokens["a-ci"], tokens["a-lead"], tokens["b-ci"], ids)
        finally:
            engine.dispose()


def race(*calls: Callable[[], httpx.Response]) -> list[httpx.Response]:
    """Run the calls at once (each on its own connection, so on either API process)."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], httpx.Response]) -> httpx.Response:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def items(prefix: str, n: int) -> list[dict[str, str]]:
    return [{"id": f"{prefix}-{i}"} for i in range(n)]


# --- a name created by two projects at once -----------------------------------------------


def test_two_projects_creating_one_name_never_write_across_projects(racers: Racers) -> None:
    """B's body is large (slow to check and hash): B's owner check was passed before A's
    creation committed and B's version then landed in A's benchmark. Now one project owns the
    name, every version of it is that project's, the other key is refused (403, nothing
    written), and the one audit row is in the owner's trail with the owner's key."""
    outcomes = Counter()
    for t in range(TRIALS):
        name = f"name-race-{t}"
        a_body = {"name": name, "items": items("a", 5)}
        b_body = {"name": name, "items": items("b", 20_000)}
        with racers.client(racers.a_write) as a, racers.client(racers.b_write) as b:
            ra, rb = race(
                partial(a.post, "/v1/benchmarks", json=a_body),
                partial(b.post, "/v1/benchmarks", json=b_body),
            )
        statuses = (ra.status_code, rb.status_code)
        assert statuses in {(201, 403), (403, 201)}, (t, ra.text[:300], rb.text[:300])
        winner, project = ("a", "team-a") if ra.status_code == 201 else ("b", "team-b")
        outcomes[winner] += 1
        versions = racers.rows(
            "SELECT p.name, v.n_items FROM benchmark_versions v JOIN benchmarks b "
            "ON b.id = v.benchmark_id JOIN projects p ON p.id = b.project_id WHERE b.name = :n",
            n=name,
        )
        assert versions == [(project, 5 if winner == "a" else 20_000)], (t, versions)
        trail = racers.rows(
            "SELECT project_name, key_id, action FROM audit_events WHERE target->>'benchmark' = :n",
            n=name,
        )
        token = racers.a_write if winner == "a" else racers.b_write
        assert trail == [(project, racers.key_ids[token], "benchmark.create_version")], trail
        refused = rb if winner == "a" else ra
        assert refused.headers["content-type"].startswith("application/problem+json")
    assert sum(outcomes.values()) == TRIALS


# --- replace / delete / restore of one model's results ------------------------------------


def correct_for(seed: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, 2, N_ITEMS).tolist()


def result_hash(values: list[int]) -> str:
    """The stored content hash of full 0/1 results (app.services.catalog.results.pack)."""
    packed = np.packbits(np.asarray(values, dtype=np.uint8)).tobytes()
    h = hashlib.sha256(b"b")
    for part in (packed, b"", b""):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


@dataclass
class Undo:
    """The semantics of the three writes, applied in a serial order (the oracle)."""

    current: str | None
    archive: list[str]

    def replace(self, new: str) -> int:
        if self.current is None:
            self.current = new
            return 201
        self.archive.append(self.current)
        self.current = new
        return 200

    def delete(self) -> int:
        if self.current is None:
            return 404
        self.archive.append(self.current)
        self.current = None
        return 204

    def restore(self) -> int:
        if not self.archive:
            return 404
        copy = self.archive.pop()
        if self.current is not None:
            self.archive.append(self.current)
        self.current = copy
        return 200


OPS = {
    "replace-vs-restore": ("replace", "restore"),
    "delete-vs-replace": ("delete", "replace"),
    "delete-vs-restore": ("delete", "restore"),
    "restore-vs-restore": ("restore", "restore"),
}


def undo_call(
    op: str, c: httpx.Client, url: str, model: str, values: list[int]
) -> Callable[[], httpx.Response]:
    """One write of the race: ``replace`` with ``values``, ``delete`` or ``restore``."""
    if op == "replace":
        body = {"model": model, "correct": values}
        return partial(c.post, f"{url}/results", params={"replace": "true"}, json=body)
    if op == "delete":
        return partial(c.delete, f"{url}/models/{model}")
    return partial(c.post, f"{url}/models/{model}/restore")


@pytest.fixture(scope="module")
def undo_bench(racers: Racers) -> str:
    with racers.client(racers.a_write) as c:
        r = c.post("/v1/benchmarks", json={"name": "undo-races", "items": items("q", N_ITEMS)})
        assert r.status_code == 201, r.text
    return "undo-races"


@pytest.mark.parametrize("pair", list(OPS))
def test_concurrent_undo_has_one_serial_outcome(racers: Racers, undo_bench: str, pair: str) -> None:
    first, second = OPS[pair]
    seen = Counter()
    for t in range(TRIALS):
        model = f"org/{pair}-{t}"
        base = 1000 * (list(OPS).index(pair) + 1) + 10 * t
        v0, v1, v2 = (correct_for(base + k) for k in range(3))
        url = f"/v1/benchmarks/{undo_bench}"

        with racers.client(racers.a_write) as setup:
            for values, code in ((v0, 201), (v1, 200)):  # stored v1, archived v0
                r = setup.post(
                    f"{url}/results",
                    params={"replace": "true"},
                    json={"model": model, "correct": values},
                )
                assert r.status_code == code, r.text
        with racers.client(racers.a_write) as c1, racers.client(racers.a_write) as c2:
            r1, r2 = race(
                undo_call(first, c1, url, model, v2), undo_call(second, c2, url, model, v2)
            )
        got = (r1.status_code, r2.status_code)
        assert 500 not in got and got[0] < 500 and got[1] < 500, (pair, t, r1.text, r2.text)
        h0, h1, h2 = (result_hash(v) for v in (v0, v1, v2))
        current = racers.rows(
            "SELECT r.content_hash FROM model_results r JOIN models m ON m.id = r.model_id "
            "WHERE m.name = :m",
            m=model,
        )
        archived = racers.rows(
            "SELECT a.content_hash FROM model_result_archive a JOIN models m "
            "ON m.id = a.model_id WHERE m.name = :m",
            m=model,
        )
        stored = (current[0][0] if current else None, Counter(h for (h,) in archived))
        serial = []
        for order in ((0, 1), (1, 0)):
            oracle = Undo(h1, [h0])
            codes = [0, 0]
            for k in order:
                op = (first, second)[k]
                codes[k] = oracle.replace(h2) if op == "replace" else getattr(oracle, op)()
            serial.append((tuple(codes), (oracle.current, Counter(oracle.archive))))
        matches = [codes for codes, state in serial if codes == got and state == stored]
        assert matches, (pair, t, got, stored, serial)
        # each state is kept once: nothing lost, nothing duplicated
        kept = Counter(stored[1]) + Counter([stored[0]] if stored[0] else [])
        assert kept == Counter({h0: 1, h1: 1, **({h2: 1} if "replace" in OPS[pair] else {})})
        seen[got] += 1
    assert sum(seen.values()) == TRIALS


# --- a push by name against a retire ------------------------------------------------------


def retire_after(c: httpx.Client, version_id: str, delay: float) -> httpx.Response:
    threading.Event().wait(delay)
    return c.post(f"/v1/benchmarks/{version_id}/retire")


def test_a_push_by_name_never_lands_in_a_version_retired_before_it(racers: Racers) -> None:
    """The push resolves ``name`` to v2 and reads a large body; the retire of v2 commits
    meanwhile. Before: 201 into the retired v2. Now: the push committed before the retire
    (its row is older than ``retired_at``), or resolved the name after it (v1, which holds the
    same items and one more), or is 409 with nothing stored."""
    n_items = 20_000
    seen = Counter()
    for t in range(TRIALS):
        name = f"retire-race-{t}"
        with racers.client(racers.a_write) as c:
            v1_items = [*items("y", n_items), {"id": "only-in-v1"}]
            r = c.post("/v1/benchmarks", json={"name": name, "items": v1_items})
            assert r.status_code == 201, r.text
            r = c.post("/v1/benchmarks", json={"name": name, "items": items("y", n_items)})
            assert r.status_code == 201 and r.json()["version"] == 2, r.text
            v2 = r.json()["id"]
        values = np.random.default_rng(t).integers(0, 2, n_items)
        body = {"model": "org/pusher", "results": {f"y-{i}": int(v) for i, v in enumerate(values)}}
        delay = 0.02 * t  # the retire starts a little later each trial

        with racers.client(racers.a_write) as pusher, racers.client(racers.a_admin) as admin:
            push, retired = race(
                partial(pusher.post, f"/v1/benchmarks/{name}/results", json=body),
                partial(retire_after, admin, v2, delay),
            )
        assert retired.status_code == 200, retired.text
        assert push.status_code in (201, 409), (t, push.status_code, push.text[:300])
        rows = racers.rows(
            "SELECT v.version, r.created_at, v.retired_at FROM model_results r "
            "JOIN benchmark_versions v ON v.id = r.benchmark_version_id "
            "JOIN benchmarks b ON b.id = v.benchmark_id WHERE b.name = :n",
            n=name,
        )
        if push.status_code == 201:  # in v2 before it was retired, or in v1 after
            assert len(rows) == 1, rows
            version, stored_at, retired_at = rows[0]
            assert version == 1 or stored_at < retired_at, f"stored after the retire: {rows}"
            assert push.json()["version_id"] != v2 or version == 2
        else:
            assert rows == [], rows
            assert push.json()["errors"][0]["loc"][-1] == "benchmark", push.text
        seen[push.status_code] += 1
    assert sum(seen.values()) == TRIALS
