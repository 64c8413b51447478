"""Nothing lost across a backup (issue 16, part 5): the documented commands of README "Backup and
restore", then a service on the restored copy answers exactly as the original did.

Data: 12 real GPQA models x 448 items stored through the services; subsets (``random``,
``subtask_stratified``, ``anchor_points``) and an ``anchor_points`` MDAD analysis computed by the
worker's runner (:func:`worker.runner.execute_job`, what a Celery worker calls); through the live
API an open session with two batches applied and a closed one. Oracles: the original service's
own answers (subsets as JSON and as id lists, exact and analysis-based verdicts, a subset's
verdict, the leaderboard, the analysis, both sessions), every table's row count and content
digest (Postgres), and the next batch posted to the open session on the original and on the
restored copy (the same new state). A missing ``pg_dump``/``pg_restore`` skips, or fails with
``CI=true`` naming it (tests/support/tools.py).
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import TypeAdapter
from sqlalchemy import create_engine, text
from sqlalchemy.orm import sessionmaker

from app.db.models import Job, JobStatus
from app.schemas.analyses import AnalysisCreate
from app.schemas.subsets import SubsetCreate
from app.services.reliability.analyses import create_analysis
from app.services.selection.subsets import request_subset
from tests.api._subset_data import gpqa, seed_gpqa
from tests.conftest import ADMIN_DATABASE_URL
from tests.fault.conftest import payload, unique
from tests.support.procs import ApiServer, service_env
from tests.support.stack import create_key
from tests.support.tools import missing
from worker.runner import execute_job

pytestmark = pytest.mark.integration

SUBSETS = [
    {"method": "random", "size": 25, "seed": 1},
    {"method": "subtask_stratified", "size": 30, "seed": 2},
    {"method": "anchor_points", "size": 15, "seed": 3},
]
ANALYSIS = {
    "methods": ["anchor_points"],
    "sizes": [10, 20],
    "runs": 4,
    "n_sources": 6,
    "n_targets": 4,
    "seed": 5,
}
HELD_OUT = 300  # the GPQA row the sessions evaluate (not stored)


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        missing(f"{name} (PostgreSQL client tools) is not installed")
    assert found is not None
    return found


def libpq(url: str) -> str:
    """A SQLAlchemy ``postgresql+psycopg://`` URL as the libpq URI pg_dump/pg_restore take."""
    return "postgresql://" + url.split("://", 1)[1]


# --- the data ---------------------------------------------------------------------------------


def populate(url: str) -> dict[str, Any]:
    """GPQA slice, subsets and an analysis (computed by the worker's runner); their ids."""
    engine = create_engine(url)
    factory = sessionmaker(engine)
    try:
        with factory() as s:
            seeded = seed_gpqa(s, n_models=12, name="gpqa-backup")
            s.commit()
        jobs = []
        with factory() as s:
            for body in SUBSETS:
                existing, job = request_subset(
                    s, seeded.version_id, TypeAdapter(SubsetCreate).validate_python(body)
                )
                assert existing is None and job is not None
                jobs.append(job.id)
            analysis = create_analysis(s, seeded.version_id, AnalysisCreate(**ANALYSIS))
            analysis_id = analysis.id
            jobs.append(analysis.job.id)
            s.commit()
        for job_id in jobs:
            assert execute_job(factory, job_id) is JobStatus.succeeded
        with factory() as s:
            subset_ids = [str(s.get(Job, j).result["subset_id"]) for j in jobs[: len(SUBSETS)]]
    finally:
        engine.dispose()
    return {
        "version_id": str(seeded.version_id),
        "names": seeded.names,
        "item_ids": seeded.item_ids,
        "accuracy": seeded.correct.mean(axis=1),
        "subset_ids": subset_ids,
        "analysis_id": str(analysis_id),
    }


def open_sessions(c: httpx.Client, data: dict[str, Any]) -> dict[str, Any]:
    """An open session with two batches applied, and a closed (exhausted) one."""
    truth = gpqa()["correct"][HELD_OUT].astype(float)
    near = data["names"][int(np.argmin(np.abs(data["accuracy"] - truth.mean())))]
    vid, ids = data["version_id"], data["item_ids"]
    spec = {
        "model": "held-out/gpqa-300",
        "baseline": near,
        "policy": "random",
        "batch_size": 10,
        "seed": 9,
    }
    r = c.post(f"/v1/benchmarks/{vid}/sessions", json=spec)
    assert r.status_code == 201, r.text
    body = r.json()
    for _ in range(2):
        r = c.post(f"/v1/sessions/{body['id']}/results", json=payload(body, truth, ids))
        assert r.status_code == 200, r.text
        body = r.json()
    assert body["state"] == "open" and body["step"] == 2, body
    r = c.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={**spec, "model": "held-out/closed", "max_items": 10, "seed": 10},
    )
    assert r.status_code == 201, r.text
    closed = r.json()
    r = c.post(f"/v1/sessions/{closed['id']}/results", json=payload(closed, truth, ids))
    assert r.status_code == 200 and r.json()["state"] in ("exhausted", "decided"), r.text
    return {"open": body["id"], "closed": closed["id"], "truth": truth}


def snapshot(c: httpx.Client, data: dict[str, Any], sessions: dict[str, Any]) -> dict[str, Any]:
    """What the service answers about everything stored (JSON bodies by path)."""
    vid, names = data["version_id"], data["names"]
    a, b = names[0], names[-1]
    paths = [f"/v1/benchmarks/{vid}", f"/v1/benchmarks/{vid}/models"]
    for sid in data["subset_ids"]:
        paths += [f"/v1/subsets/{sid}", f"/v1/subsets/{sid}?format=ids"]
        paths.append(f"/v1/subsets/{sid}/verdict?model_a={a}&model_b={b}")
    paths += [
        f"/v1/benchmarks/{vid}/verdict?model_a={a}&model_b={b}&size=20",
        f"/v1/benchmarks/{vid}/verdict?model_a={names[1]}&model_b={names[2]}&size=10"
        "&method=anchor_points",
        f"/v1/benchmarks/{vid}/leaderboard",
        f"/v1/analyses/{data['analysis_id']}",
        f"/v1/sessions/{sessions['open']}",
        f"/v1/sessions/{sessions['closed']}",
    ]
    out = {}
    for path in paths:
        r = c.get(path)
        assert r.status_code == 200, (path, r.text)
        out[path] = r.json()
    # the checks below must compare something
    assert [len(out[f"/v1/subsets/{sid}?format=ids"]) for sid in data["subset_ids"]] == [
        s["size"] for s in SUBSETS
    ]
    assert out[f"/v1/sessions/{sessions['open']}"]["state"] == "open"
    return out


def next_batch(c: httpx.Client, sessions: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """Post the open session's next batch; the new state without its timestamps."""
    body = c.get(f"/v1/sessions/{sessions['open']}").json()
    r = c.post(
        f"/v1/sessions/{sessions['open']}/results", json=payload(body, sessions["truth"], ids)
    )
    assert r.status_code == 200 and r.headers.get("idempotency-replayed") is None, r.text
    new = r.json()
    assert new["step"] == 3 and new["items_used"] == 30, new
    return {k: v for k, v in new.items() if k not in ("updated_at",)}


@contextlib.contextmanager
def api(env: dict[str, str]) -> Iterator[ApiServer]:
    server = ApiServer(env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def client(server: ApiServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


# --- Postgres: pg_dump (custom format) -> pg_restore into a fresh database ---------------------


def table_digests(url: str) -> dict[str, tuple[int, str]]:
    """Every table of the public schema: (row count, md5 of its rows in a canonical order)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = conn.scalars(
                text(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
                )
            ).all()
            out = {}
            for t in tables:
                digest = "md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), ''))"
                row = conn.execute(text(f'SELECT count(*), {digest} FROM "{t}" x')).one()
                out[t] = (int(row[0]), str(row[1]))
            return out
    finally:
        engine.dispose()


@contextlib.contextmanager
def empty_database(name: str) -> Iterator[str]:
    admin = create_engine(ADMIN_DATABASE_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield ADMIN_DATABASE_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with contextlib.suppress(Exception), admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.timeout(240)
def test_pg_dump_and_restore_keep_subsets_verdicts_and_open_sessions(
    fault_database: str, tmp_path: Path
) -> None:
    pg_dump, pg_restore = tool("pg_dump"), tool("pg_restore")
    data = populate(fault_database)
    key = create_key(fault_database, ["write"])
    env = service_env(
        DATABASE_URL=fault_database, BROKER_URL="redis://127.0.0.1:1/0", AUTH_ENABLED="true"
    )
    dump = tmp_path / "benchslice.dump"
    with api(env) as original, client(original, key) as c:
        sessions = open_sessions(c, data)
        before = snapshot(c, data, sessions)
        # README "Backup and restore": online, consistent (one snapshot), custom format
        subprocess.run(
            [pg_dump, "--format=custom", f"--file={dump}", libpq(fault_database)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        with empty_database(f"benchslice_test_{unique('restored')}") as restored:
            subprocess.run(
                [
                    pg_restore,
                    "--no-owner",
                    "--exit-on-error",
                    "--single-transaction",
                    f"--dbname={libpq(restored)}",
                    str(dump),
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
            # every row of every table (alembic_version, api keys and jobs included)
            source_tables = table_digests(fault_database)
            assert table_digests(restored) == source_tables
            assert source_tables["subsets"][0] == len(SUBSETS)
            assert source_tables["evaluation_sessions"][0] == 2

            with api({**env, "DATABASE_URL": restored}) as copy, client(copy, key) as c2:
                # the same key authenticates; the same subsets, verdicts, analysis and sessions
                assert snapshot(c2, data, sessions) == before
                # the open session takes its next batch, and goes where the original goes
                assert next_batch(c2, sessions, data["item_ids"]) == next_batch(
                    c, sessions, data["item_ids"]
                )
                assert "unhandled error" not in copy.log, copy.log[-3000:]


# --- SQLite (the embedded default): the file, copied with SQLite's online backup API ----------


@pytest.mark.timeout(180)
def test_sqlite_file_backup_keeps_subsets_verdicts_and_open_sessions(tmp_path: Path) -> None:
    """Backup while the service runs, the service goes on (next batch), stop it, put the
    backup back over the live file as README says, start: the state of the backup again, and
    the next batch lands where it did on the original."""
    from app.db.migrate import upgrade

    live = tmp_path / "var" / "benchslice.sqlite3"
    live.parent.mkdir()
    url = f"sqlite:///{live}"
    upgrade(url)
    data = populate(url)
    key = create_key(url, ["write"])
    env = service_env(
        DATABASE_URL=url,
        BROKER_URL=f"sqla+sqlite:///{tmp_path / 'var' / 'celery-broker.sqlite3'}",
        AUTH_ENABLED="true",
    )
    backup = tmp_path / "benchslice-backup.sqlite3"
    with api(env) as original, client(original, key) as c:
        sessions = open_sessions(c, data)
        before = snapshot(c, data, sessions)
        # README: sqlite3 var/benchslice.sqlite3 ".backup '...'" is this API; consistent while
        # the service runs (WAL mode: a plain cp of the file alone is not)
        src, dst = sqlite3.connect(live), sqlite3.connect(backup)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        expected = next_batch(c, sessions, data["item_ids"])  # the live file moves on
    with sqlite3.connect(backup) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # restore, service stopped: the file back, no stale -wal/-shm beside it
    shutil.copyfile(backup, live)
    for stale in (live.with_name(live.name + "-wal"), live.with_name(live.name + "-shm")):
        stale.unlink(missing_ok=True)
    with api(env) as copy, client(copy, key) as c2:
        assert snapshot(c2, data, sessions) == before
        assert next_batch(c2, sessions, data["item_ids"]) == expected
        assert "unhandled error" not in copy.log, copy.log[-3000:]
