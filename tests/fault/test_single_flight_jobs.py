"""Identical work runs once (issue 16.6): twelve concurrent identical subset (or analysis)
requests spread over two API processes share one job row, which one worker runs once; a 202 body
summarises the source models (count + sha256) instead of listing ~420 names."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

from app.db.models import Job
from app.db.models.analysis import Analysis
from app.db.models.subset import Subset
from tests.fault.conftest import synthetic_results
from tests.support.procs import api_server, celery_worker, service_env
from tests.support.stack import create_key, wait_job

pytestmark = pytest.mark.integration

N_MODELS = 420  # GPQA's model count: the job body used to carry all their names
N_ITEMS = 60
N_REQUESTS = 12


def _names() -> list[str]:
    return [f"open-llm-leaderboard/some-org__model-{m:03d}-instruct" for m in range(N_MODELS)]


def _rows(database_url: str, model: Any, **where: Any) -> list[Any]:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            stmt = select(model).filter_by(**where)
            return list(session.scalars(stmt).all())
    finally:
        engine.dispose()


def _count(database_url: str, model: Any) -> int:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            return int(session.scalar(select(func.count()).select_from(model)) or 0)
    finally:
        engine.dispose()


def _burst(url: str, headers: dict[str, str], path: str, body: dict) -> list[httpx.Response]:
    barrier = threading.Barrier(N_REQUESTS)

    def post(_: int) -> httpx.Response:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
            barrier.wait(timeout=30)
            return c.post(path, json=body)

    with ThreadPoolExecutor(max_workers=N_REQUESTS) as pool:
        return list(pool.map(post, range(N_REQUESTS)))


def _received(log: str) -> int:
    """run_job messages the worker took (one per publish)."""
    return len(re.findall(r"Task \S*run_job\[[^\]]+\] received", log))


@pytest.mark.timeout(420)
def test_twelve_identical_requests_over_two_api_processes_make_one_job_run_once(
    fault_database: str, shared_broker: tuple[str, str, str]
) -> None:
    broker, queue, prefix = shared_broker
    env = service_env(
        DATABASE_URL=fault_database,
        BROKER_URL=broker,
        CELERY_QUEUE=queue,
        CELERY_KEY_PREFIX=prefix,
        AUTH_ENABLED="true",
        JOB_SOFT_TIME_LIMIT="120",
        JOB_HARD_TIME_LIMIT="180",
    )
    key = create_key(fault_database, ["admin"])
    headers = {"Authorization": f"Bearer {key}"}
    names = _names()
    with api_server(env, workers=2) as api, celery_worker(env, f"flight-{queue}") as worker:
        client = httpx.Client(base_url=api.url, headers=headers, timeout=60)
        items = [{"id": f"q{i:03d}", "subtask": f"s{i % 3}"} for i in range(N_ITEMS)]
        r = client.post("/v1/benchmarks", json={"name": "flight", "items": items})
        assert r.status_code == 201, r.text
        bid = r.json()["id"]
        for name, row in zip(names, synthetic_results(N_MODELS, N_ITEMS, seed=5), strict=True):
            r = client.post(
                f"/v1/benchmarks/{bid}/results", json={"model": name, "correct": row.tolist()}
            )
            assert r.status_code == 201, r.text

        # --- subsets: 12 identical requests (same method, size, seed; all 420 sources)
        body = {"method": "anchor_points", "size": 10, "seed": 11}
        answers = _burst(api.url, headers, f"/v1/benchmarks/{bid}/subsets", body)
        assert {a.status_code for a in answers} <= {200, 202}, [a.text for a in answers]
        jobs = _rows(fault_database, Job, kind="subset")
        assert len(jobs) == 1, [
            (j.status, j.created_at, j.started_at, j.finished_at, j.result) for j in jobs
        ]
        job_id = str(jobs[0].id)
        done = wait_job(client, f"/v1/jobs/{job_id}")
        assert done["status"] == "succeeded" and done["result"]["created"] is True, done
        for a in answers:  # every answer points at the one job (or, once it ran, its subset)
            if a.status_code == 202:
                assert a.headers["location"] == f"/v1/jobs/{job_id}" and a.json()["id"] == job_id
                size = len(a.content)
                assert size < 2048, f"202 body is {size} bytes"
                assert not any(n in a.text for n in names)
                params = a.json()["params"]
                assert "source_models" not in params and params["n_source_models"] == N_MODELS
                canonical = json.dumps(sorted(names), separators=(",", ":")).encode()
                assert params["source_models_sha256"] == hashlib.sha256(canonical).hexdigest()
            else:
                assert a.json()["provenance"]["job_id"] == job_id
        assert sum(a.status_code == 202 for a in answers) >= 1
        subsets = _rows(fault_database, Subset)
        assert len(subsets) == 1 and str(subsets[0].job_id) == job_id
        sub = client.get(f"/v1/subsets/{subsets[0].id}").json()
        assert sub["provenance"]["source_models"] == sorted(names)  # the list stays on the subset

        # --- analyses: 12 identical requests -> one analysis, one job
        body = {
            "methods": ["random"],
            "sizes": [5, 10],
            "runs": 300,
            "n_sources": 40,
            "n_targets": 20,
            "seed": 3,
        }
        answers = _burst(api.url, headers, f"/v1/benchmarks/{bid}/analyses", body)
        assert {a.status_code for a in answers} == {202}, [a.text for a in answers]
        assert len({a.json()["id"] for a in answers}) == 1
        assert len({a.json()["job_id"] for a in answers}) == 1
        assert len({a.headers["location"] for a in answers}) == 1
        assert len(_rows(fault_database, Job, kind="analysis")) == 1
        assert _count(fault_database, Analysis) == 1
        analysis = wait_job(client, answers[0].headers["location"])
        assert analysis["status"] == "succeeded", analysis

        # --- a different seed is different work: a new job
        r = client.post(
            f"/v1/benchmarks/{bid}/subsets",
            json={"method": "anchor_points", "size": 10, "seed": 12},
        )
        assert r.status_code == 202 and r.json()["id"] != job_id, r.text
        assert wait_job(client, f"/v1/jobs/{r.json()['id']}")["status"] == "succeeded"
        assert len(_rows(fault_database, Job, kind="subset")) == 2

        # one publish, one run per job: the worker took exactly three run_job messages
        deadline = time.monotonic() + 10
        while _received(worker.log) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _received(worker.log) == 3, worker.log[-4000:]
        assert "unhandled error" not in api.log, api.log[-4000:]
