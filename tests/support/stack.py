"""A running benchslice stack for black-box tests: database, broker, uvicorn, a worker, a key,
and a little real data (a benchmark, models with results, a subset, an analysis)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from tests.support.procs import ApiServer, Worker, api_server, celery_worker, service_env

N_ITEMS = 40
N_MODELS = 12


def create_key(
    database_url: str, scopes: Sequence[str], name: str = "test", *, instance_admin: bool = False
) -> str:
    """A new API key stored (hashed) in ``database_url``; returns the plaintext once."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from app.services.access.keys import create_key as _create

    engine = create_engine(database_url)
    try:
        with Session(engine) as session, session.begin():
            _, token = _create(session, name, list(scopes), instance_admin=instance_admin)
    finally:
        engine.dispose()
    return token


def project_keys(
    database_url: str, projects: Sequence[str], roles: dict[str, dict[str, str]]
) -> dict[str, str]:
    """``projects`` created and one key per entry of ``roles`` (key name -> {project: role});
    returns the plaintexts by key name."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from app.services.access.keys import create_key as _create
    from app.services.access.projects import create_project

    engine = create_engine(database_url)
    try:
        with Session(engine) as session, session.begin():
            for project in projects:
                create_project(session, project)
            return {name: _create(session, name, r)[1] for name, r in roles.items()}
    finally:
        engine.dispose()


def wait_job(client: httpx.Client, url: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = client.get(url).json()
        if body.get("status") in {"succeeded", "failed", "cancelled"}:
            return body
        time.sleep(0.2)
    raise AssertionError(f"{url} did not finish in {timeout}s: {body}")


@dataclass
class Seeded:
    benchmark_id: str
    models: list[str]
    item_ids: list[str]
    subset_id: str
    analysis_id: str
    job_id: str
    extra: dict[str, Any] = field(default_factory=dict)


def seed(client: httpx.Client, name: str = "fuzzbench") -> Seeded:
    """A 40-item, 12-model benchmark with full 0/1 results, one random subset, one analysis."""
    rng = np.random.default_rng(20261130)
    items = [{"id": f"item-{i:03d}", "subtask": f"s{i % 3}"} for i in range(N_ITEMS)]
    r = client.post("/v1/benchmarks", json={"name": name, "items": items})
    assert r.status_code in (200, 201), r.text
    bid = r.json()["id"]
    ability = np.linspace(0.2, 0.85, N_MODELS)
    correct = (rng.random((N_MODELS, N_ITEMS)) < ability[:, None]).astype(int)
    models = [f"org/model-{m:02d}" for m in range(N_MODELS)]
    for name_, row in zip(models, correct, strict=True):
        r = client.post(
            f"/v1/benchmarks/{bid}/results", json={"model": name_, "correct": row.tolist()}
        )
        assert r.status_code in (200, 201), r.text
    r = client.post(
        f"/v1/benchmarks/{bid}/subsets", json={"method": "random", "size": 10, "seed": 7}
    )
    assert r.status_code in (200, 202), r.text
    if r.status_code == 202:
        job = wait_job(client, r.headers["location"])
        assert job["status"] == "succeeded", job
        subset_id = job["result"]["subset_id"]
    else:
        subset_id = r.json()["id"]
    r = client.post(
        f"/v1/benchmarks/{bid}/analyses",
        json={
            "methods": ["random"],
            "sizes": [5, 10],
            "runs": 4,
            "n_sources": 6,
            "n_targets": 4,
            "seed": 3,
        },
    )
    assert r.status_code == 202, r.text
    analysis = wait_job(client, r.headers["location"])
    assert analysis["status"] == "succeeded", analysis
    return Seeded(
        benchmark_id=bid,
        models=models,
        item_ids=[it["id"] for it in items],
        subset_id=subset_id,
        analysis_id=analysis["id"],
        job_id=analysis["job_id"],
    )


@dataclass
class Stack:
    api: ApiServer
    worker: Worker
    database_url: str
    admin_key: str
    env: dict[str, str]

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.api.url, headers=headers, timeout=30, **kwargs)


@contextlib.contextmanager
def running_stack(
    database_url: str,
    broker_url: str,
    queue: str,
    key_prefix: str,
    workers: int = 1,
    **settings: str,
) -> Iterator[Stack]:
    """uvicorn (auth on, ``workers`` API processes) + one Celery worker on ``database_url`` /
    ``broker_url``."""
    env = service_env(
        DATABASE_URL=database_url,
        BROKER_URL=broker_url,
        CELERY_QUEUE=queue,
        CELERY_KEY_PREFIX=key_prefix,
        AUTH_ENABLED="true",
        JOB_SOFT_TIME_LIMIT=settings.pop("JOB_SOFT_TIME_LIMIT", "60"),
        JOB_HARD_TIME_LIMIT=settings.pop("JOB_HARD_TIME_LIMIT", "90"),
        **settings,
    )
    admin_key = create_key(database_url, ["admin"], name="admin")
    with (
        celery_worker(env, f"hardening-{queue}") as worker,
        api_server(env, workers=workers) as api,
    ):
        yield Stack(api, worker, database_url, admin_key, env)
