"""Fault injection with real processes, each bounded in time (pytest-timeout per test).

A worker SIGKILLed mid-analysis, Redis stopped, Postgres restarted under load, a job over its
time limit, a poisoned job, 20 identical uploads at once. Outages use private Redis/Postgres
instances (tests/support/procs.py); the shared services are never touched.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

from app.db.models import Job, JobStatus
from app.db.models.analysis import Analysis, AnalysisChunk
from app.db.models.model_result import LanguageModel, ModelResult
from app.db.models.subset import Subset
from tests.fault.conftest import synthetic_results, unique
from tests.support.procs import (
    PrivateRedis,
    api_server,
    celery_worker,
    migrated_database,
    private_postgres,
    service_env,
)
from tests.support.stack import create_key, running_stack, seed, wait_job

pytestmark = pytest.mark.integration


def _counts(database_url: str, *models: Any) -> dict[str, int]:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            return {
                m.__tablename__: int(session.scalar(select(func.count()).select_from(m)) or 0)
                for m in models
            }
    finally:
        engine.dispose()


def _upload_matrix(client: httpx.Client, name: str, n_models: int, n_items: int) -> str:
    items = [{"id": f"q{i:04d}", "subtask": f"s{i % 4}"} for i in range(n_items)]
    r = client.post("/v1/benchmarks", json={"name": name, "items": items})
    assert r.status_code == 201, r.text
    bid = r.json()["id"]
    for m, row in enumerate(synthetic_results(n_models, n_items, seed=11)):
        r = client.post(
            f"/v1/benchmarks/{bid}/results", json={"model": f"m{m:03d}", "correct": row.tolist()}
        )
        assert r.status_code == 201, r.text
    return bid


def _assert_problem(r: httpx.Response, status: int) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    assert r.json()["status"] == status


# --- worker SIGKILLed while an analysis job runs --------------------------------------------


@pytest.mark.timeout(420)
def test_sigkilled_worker_mid_analysis_a_new_worker_completes_it_exactly_once(
    fault_database: str, redis_broker: PrivateRedis
) -> None:
    """acks_late + a short visibility timeout: the killed worker's message is redelivered to
    the next worker, which keeps the chunks already committed and computes the rest."""
    queue = f"benchslice-test-{unique('kill')}"
    env = service_env(
        DATABASE_URL=fault_database,
        BROKER_URL=redis_broker.url,
        CELERY_QUEUE=queue,
        AUTH_ENABLED="true",
        JOB_SOFT_TIME_LIMIT="300",
        JOB_HARD_TIME_LIMIT="360",
        BROKER_VISIBILITY_TIMEOUT="4",
    )
    key = create_key(fault_database, ["admin"])
    with api_server(env) as api:
        client = httpx.Client(
            base_url=api.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        bid = _upload_matrix(client, "killbench", n_models=60, n_items=300)
        body = {
            "methods": ["anchor_points"],
            "sizes": [10, 25],
            "runs": 1000,
            "n_sources": 40,
            "n_targets": 20,
            "seed": 5,
        }
        first = celery_worker(env, f"doomed-{queue}")
        doomed = first.__enter__()
        try:
            r = client.post(f"/v1/benchmarks/{bid}/analyses", json=body)
            assert r.status_code == 202, r.text
            location, job_id = r.headers["location"], r.json()["job_id"]
            deadline = time.monotonic() + 120
            progress: dict[str, Any] = {}
            while time.monotonic() < deadline:
                state = client.get(location).json()
                progress = state.get("progress") or {}
                if progress.get("done", 0) >= 200:
                    break
                assert state["status"] in ("queued", "running"), state
                time.sleep(0.05)
            assert 0 < progress.get("done", 0) < 1000, (progress, doomed.log[-3000:])
            doomed_pids = doomed.pids()
            doomed.kill()  # SIGKILL, main process and its pool child, mid-run
        finally:
            first.__exit__(None, None, None)
        killed_at = client.get(location).json()
        assert killed_at["status"] == "running", killed_at

        with celery_worker(env, f"rescuer-{queue}") as rescuer:
            final = wait_job(client, location, timeout=240)
            assert final["status"] == "succeeded", (final, rescuer.log[-4000:])
            # With a visibility timeout shorter than the job, Redis may hand the message out
            # again while it runs: that delivery must find the job done and change nothing.
            time.sleep(5)
            assert "benchslice.run_job[" in rescuer.log, rescuer.log[-3000:]
            rescuer_pids = rescuer.pids()
            # the same request again, never interrupted: the same numbers
            r = client.post(f"/v1/benchmarks/{bid}/analyses", json=body)
            assert r.status_code == 202, r.text
            clean = wait_job(client, r.headers["location"], timeout=240)
            assert clean["status"] == "succeeded", clean
        job = client.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "succeeded" and job["error"] is None, job
        executed_by = final["result"]["executed_by"]
        # chunks were computed by both: those of the killed worker were kept, not redone
        executor_pids = {int(name.rsplit(":", 1)[1]) for name in executed_by}
        assert executor_pids & doomed_pids, (executed_by, doomed_pids)
        assert executor_pids & rescuer_pids, (executed_by, rescuer_pids)
        assert {c["n_runs"] for c in final["result"]["mdad"]} == {1000}
        assert final["result"]["mdad"] == clean["result"]["mdad"]
        assert final["result"]["curves"] == clean["result"]["curves"]

    # one analysis row per request, one job each, both succeeded; the chunk rows (claimed by
    # two processes, one of them killed) were merged and removed exactly once
    counts = _counts(fault_database, Analysis, AnalysisChunk, Job)
    assert counts == {"analyses": 2, "analysis_chunks": 0, "jobs": 2}, counts
    engine = create_engine(fault_database)
    try:
        with Session(engine) as session:
            statuses = session.scalars(select(Job.status)).all()
    finally:
        engine.dispose()
    assert statuses == [JobStatus.succeeded] * 2, statuses


# --- Redis stopped ---------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_redis_outage_reads_keep_working_submissions_503_and_nothing_half_done(
    fault_database: str, redis_broker: PrivateRedis
) -> None:
    queue = f"benchslice-test-{unique('redis')}"
    with running_stack(fault_database, redis_broker.url, queue, key_prefix="") as st:
        client = st.client(st.admin_key)
        data = seed(client, name="redisbench")
        before = _counts(fault_database, Job, Subset, Analysis, AnalysisChunk)

        redis_broker.stop()
        reads = [
            "/v1/benchmarks",
            f"/v1/benchmarks/{data.benchmark_id}",
            f"/v1/subsets/{data.subset_id}",
            f"/v1/subsets/{data.subset_id}?format=ids",
            f"/v1/analyses/{data.analysis_id}",
            f"/v1/benchmarks/{data.benchmark_id}/verdict?model_a={data.models[0]}"
            f"&model_b={data.models[-1]}&size=10&method=random",
            f"/v1/benchmarks/{data.benchmark_id}/plan?gap=0.2",
        ]
        for path in reads:
            t0 = time.monotonic()
            r = client.get(path)
            assert r.status_code == 200, (path, r.text)
            assert time.monotonic() - t0 < 5, path

        submissions = [
            (f"/v1/benchmarks/{data.benchmark_id}/subsets", {"method": "random", "size": 5}),
            (
                f"/v1/benchmarks/{data.benchmark_id}/analyses",
                {"methods": ["random"], "sizes": [5], "runs": 2, "n_sources": 6, "n_targets": 4},
            ),
            ("/v1/jobs", {"kind": "ping", "params": {"steps": 1}}),
        ]
        for path, body in submissions:
            t0 = time.monotonic()
            r = client.post(path, json=body)
            _assert_problem(r, 503)
            assert int(r.headers["retry-after"]) > 0
            assert time.monotonic() - t0 < 20, path
        ready = client.get("/readyz")
        _assert_problem(ready, 503)

        # Nothing half-done: no subset built, no chunk started; each refused job is recorded
        # failed with the reason (never left queued for a worker that will not hear of it).
        after = _counts(fault_database, Job, Subset, Analysis, AnalysisChunk)
        assert after["subsets"] == before["subsets"]
        assert after["analysis_chunks"] == before["analysis_chunks"]
        engine = create_engine(fault_database)
        try:
            with Session(engine) as session:
                new_jobs = session.scalars(
                    select(Job).where(Job.status != JobStatus.succeeded)
                ).all()
        finally:
            engine.dispose()
        assert len(new_jobs) == len(submissions), [(j.kind, j.status) for j in new_jobs]
        assert all(j.status is JobStatus.failed and "broker" in (j.error or "") for j in new_jobs)

        redis_broker.start()  # same port: the API and the worker reconnect by themselves
        deadline = time.monotonic() + 60
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "API did not see Redis again"
            time.sleep(0.5)
        r = client.post("/v1/jobs", json={"kind": "ping", "params": {"steps": 2}})
        assert r.status_code == 202, r.text
        done = wait_job(client, r.headers["location"], timeout=90)
        assert done["status"] == "succeeded", (done, st.worker.log[-3000:])
        r = client.post(
            f"/v1/benchmarks/{data.benchmark_id}/subsets",
            json={"method": "random", "size": 5, "seed": 99},
        )
        assert r.status_code == 202, r.text
        assert wait_job(client, r.headers["location"], timeout=90)["status"] == "succeeded"


# --- Postgres restarted under load ----------------------------------------------------------


@pytest.mark.timeout(420)
def test_postgres_restart_under_load_answers_503_then_recovers() -> None:
    with private_postgres() as pg, migrated_database(pg.admin_url, "benchslice") as url:
        env = service_env(
            DATABASE_URL=url,
            BROKER_URL="redis://127.0.0.1:1/0",  # reads only: no broker needed
            AUTH_ENABLED="true",
            DATABASE_CONNECT_TIMEOUT="2",
            DATABASE_POOL_TIMEOUT="3",
        )
        key = create_key(url, ["admin"])
        with api_server(env) as api:
            client = httpx.Client(
                base_url=api.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
            )
            bid = _upload_matrix(client, "pgbench", n_models=8, n_items=50)
            paths = [
                f"/v1/benchmarks/{bid}",
                f"/v1/benchmarks/{bid}/models",
                f"/v1/benchmarks/{bid}/verdict?model_a=m000&model_b=m007&size=10",
            ]
            log: list[tuple[float, int, float, str]] = []
            stop = threading.Event()
            client_timeout = 15.0

            def hammer(k: int) -> None:
                with httpx.Client(
                    base_url=api.url,
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=client_timeout,
                ) as c:
                    i = k
                    while not stop.is_set():
                        t0 = time.monotonic()
                        try:
                            r = c.get(paths[i % len(paths)])
                            code, ctype = r.status_code, r.headers.get("content-type", "")
                            if code == 503:
                                assert r.headers.get("retry-after"), r.headers
                        except httpx.TimeoutException:
                            code, ctype = -1, ""
                        log.append((t0, code, time.monotonic() - t0, ctype))
                        i += 1
                        time.sleep(0.01)

            with ThreadPoolExecutor(max_workers=4) as pool:
                futures = [pool.submit(hammer, k) for k in range(4)]
                time.sleep(2)
                t_stop = time.monotonic()
                pg.stop()
                time.sleep(4)
                pg.start()
                t_start = time.monotonic()
                deadline = t_start + 60
                while time.monotonic() < deadline:
                    recent = [e for e in log if e[0] > time.monotonic() - 1.0]
                    if recent and all(e[1] == 200 for e in recent):
                        break
                    time.sleep(0.2)
                time.sleep(1)
                stop.set()
                for f in futures:
                    f.result()

        codes = Counter(code for _, code, _, _ in log)
        assert set(codes) <= {200, 503}, codes  # never a 500, never a client-side timeout
        during = [e for e in log if t_stop + 0.5 < e[0] < t_start - 0.5]
        assert during and all(e[1] == 503 for e in during), Counter(e[1] for e in during)
        assert all(e[3].startswith("application/problem+json") for e in log if e[1] == 503)
        assert max(e[2] for e in log) < 10.0, max(e[2] for e in log)  # bounded by the timeouts
        after = [e for e in log if e[0] > t_start + 1.0]
        assert after and after[-1][1] == 200, Counter(e[1] for e in after)
        assert "unhandled error" not in api.log, api.log[-4000:]


# --- time limits and poisoned jobs -----------------------------------------------------------


@pytest.mark.timeout(300)
def test_time_limit_fails_with_a_reason_and_a_poisoned_job_fails_once_without_blocking(
    fault_database: str, redis_broker: PrivateRedis
) -> None:
    queue = f"benchslice-test-{unique('poison')}"
    with running_stack(
        fault_database,
        redis_broker.url,
        queue,
        key_prefix="",
        JOB_SOFT_TIME_LIMIT="2",
        JOB_HARD_TIME_LIMIT="4",
        BROKER_VISIBILITY_TIMEOUT="3",
    ) as st:
        client = st.client(st.admin_key)
        r = client.post("/v1/jobs", json={"kind": "ping", "params": {"steps": 20, "delay": 1}})
        assert r.status_code == 202, r.text
        slow = wait_job(client, r.headers["location"], timeout=60)
        assert slow["status"] == "failed", slow
        assert "time limit" in slow["error"], slow

        # Params that slipped past validation (written straight to the table), and a kind no
        # worker knows: each fails once with its reason and is not redelivered.
        engine = create_engine(fault_database)
        try:
            with Session(engine) as session, session.begin():
                poisoned = [
                    Job(kind="ping", status=JobStatus.queued, params={"steps": "many"}, seed=1),
                    Job(kind="no-such-kind", status=JobStatus.queued, params={}, seed=2),
                ]
                session.add_all(poisoned)
                session.flush()
                poisoned_ids = [str(j.id) for j in poisoned]
        finally:
            engine.dispose()
        from app.queue import RUN_JOB_TASK
        from worker.celery_app import make_celery

        celery = make_celery(_settings_for(st.env))
        try:
            task_ids = [
                celery.send_task(
                    RUN_JOB_TASK, kwargs={"job_id": job_id}, queue=st.env["CELERY_QUEUE"]
                ).id
                for job_id in poisoned_ids
            ]
        finally:
            celery.close()
        for job_id in poisoned_ids:
            body = wait_job(client, f"/v1/jobs/{job_id}", timeout=60)
            assert body["status"] == "failed", body
            assert body["error"], body

        r = client.post("/v1/jobs", json={"kind": "ping", "params": {"steps": 2}})
        assert r.status_code == 202, r.text
        ok = wait_job(client, r.headers["location"], timeout=60)
        assert ok["status"] == "succeeded", (ok, st.worker.log[-3000:])

        time.sleep(5)  # > visibility timeout: a message never acked would come back now
        for job_id, task_id in zip(poisoned_ids, task_ids, strict=True):
            received = st.worker.log.count(f"[{task_id}] received")
            assert received == 1, (job_id, received, st.worker.log[-4000:])
            assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "failed"


def _settings_for(env: dict[str, str]) -> Any:
    from app.settings import Settings

    keys = ("DATABASE_URL", "BROKER_URL", "CELERY_QUEUE", "CELERY_KEY_PREFIX")
    return Settings(**{k.lower(): env[k] for k in keys if k in env})


# --- concurrent identical uploads ------------------------------------------------------------


@pytest.mark.timeout(300)
def test_twenty_identical_uploads_at_once_store_one_row_and_all_succeed(
    fault_database: str,
) -> None:
    env = service_env(
        DATABASE_URL=fault_database,
        BROKER_URL="redis://127.0.0.1:1/0",
        AUTH_ENABLED="true",
        # the race of identical uploads is the subject, not the per-key places (tests/limits)
        MAX_REQUESTS_IN_FLIGHT_PER_KEY="32",
    )
    key = create_key(fault_database, ["write"])
    headers = {"Authorization": f"Bearer {key}"}
    with api_server(env, workers=2) as api:
        with httpx.Client(base_url=api.url, headers=headers, timeout=60) as client:
            items = [{"id": f"q{i}"} for i in range(200)]
            bid = client.post("/v1/benchmarks", json={"name": "race", "items": items}).json()["id"]
        row = synthetic_results(1, 200, seed=3)[0].tolist()
        barrier = threading.Barrier(20)

        def upload(_: int) -> int:
            with httpx.Client(base_url=api.url, headers=headers, timeout=60) as c:
                barrier.wait(timeout=30)
                r = c.post(
                    f"/v1/benchmarks/{bid}/results",
                    json={"model": "org/racer", "correct": row},
                )
                return r.status_code

        with ThreadPoolExecutor(max_workers=20) as pool:
            codes = list(pool.map(upload, range(20)))
        assert "unhandled error" not in api.log, api.log[-4000:]
    assert Counter(codes) == Counter({201: 1, 200: 19}), codes
    counts = _counts(fault_database, ModelResult, LanguageModel)
    assert counts == {"model_results": 1, "models": 1}, counts
