"""The coverage-study job on a benchmark version (issue 24, item 5): started over the API, run by a
real worker over Redis, its stored table read back and checked against the engine run in-process
with the stored seed; the request-side refusals leave no job."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.scoring.coverage import coverage_study
from app.db.models import Job
from tests.api._subset_data import committed_with_cleanup, gpqa
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]
N_MODELS = 40


@pytest.fixture
def stored(committed_sessionmaker: sessionmaker[Session], cleanup: Cleanup):
    return committed_with_cleanup(committed_sessionmaker, cleanup, n_models=N_MODELS)


def test_coverage_job_end_to_end_matches_the_engine(
    celery_worker_process: WorkerProcess, committed_client: TestClient, cleanup: Cleanup, stored
) -> None:
    path = f"/v1/benchmarks/{stored.version_id}/coverage"
    none_yet = committed_client.get(path)
    assert none_yet.status_code == 404
    assert "benchslice benchmarks coverage" in none_yet.json()["detail"]
    body = {"methods": ["random", "anchor_points"], "sizes": [25], "repeats": 2, "seed": 7}
    r = committed_client.post(path, json=body)
    assert r.status_code == 202, r.text
    cleanup(Job, uuid.UUID(r.json()["id"]))
    assert r.json()["kind"] == "coverage" and r.json()["seed"] == 7
    done = wait_for_job(lambda: committed_client.get(r.headers["location"]).json(), timeout=180)
    assert done["status"] == "succeeded", (done, celery_worker_process.log[-3000:])
    got = committed_client.get(path)
    assert got.status_code == 200, got.text
    run = got.json()
    assert run["job_id"] == done["id"] and run["seed"] == 7
    assert (run["n_models"], run["n_targets"], run["n_sources"]) == (N_MODELS, 10, 30)
    # the same study in-process: the stored rows are its rows (models in name order = seed order)
    subtasks = np.array(["gpqa_a" if i % 3 else "gpqa_b" for i in range(448)])
    table = coverage_study(
        gpqa()["correct"][:N_MODELS].astype(np.float64),
        ["random", "anchor_points"],
        [25],
        repeats=2,
        n_sources=30,
        n_targets=10,
        subtasks=subtasks,
        seed=7,
    )
    expect = {(x.method, x.estimator, x.interval): x for x in table.rows if x.cases > 0}
    assert {(c["method"], c["estimator"], c["interval"]) for c in run["rows"]} == set(expect)
    for c in run["rows"]:
        e = expect[(c["method"], c["estimator"], c["interval"])]
        assert c["cases"] == e.cases and c["n"] == 25
        for k in ("coverage", "coverage_low", "coverage_high", "mean_width", "mean_abs_error"):
            assert c[k] == pytest.approx(getattr(e, k), abs=1e-12), k
    assert {c["split"] for c in run["rows"]} == {"random"}

    # issue 38: with extrapolation, the weak-to-strong and strong-to-weak splits follow, each the
    # engine's table for that split (fit on the weakest / strongest 80 %)
    r = committed_client.post(
        path,
        json={"methods": ["random"], "sizes": [25], "repeats": 2, "seed": 8, "extrapolation": True},
    )
    assert r.status_code == 202, r.text
    cleanup(Job, uuid.UUID(r.json()["id"]))
    done = wait_for_job(lambda: committed_client.get(r.headers["location"]).json(), timeout=180)
    assert done["status"] == "succeeded", (done, celery_worker_process.log[-3000:])
    rows = committed_client.get(path).json()["rows"]
    assert {c["split"] for c in rows} == {"random", "weak_to_strong", "strong_to_weak"}
    for split in ("weak_to_strong", "strong_to_weak"):
        table = coverage_study(
            gpqa()["correct"][:N_MODELS].astype(np.float64),
            ["random"],
            [25],
            repeats=2,
            subtasks=subtasks,
            seed=8,
            split=split,
        )
        expect = {(x.estimator, x.interval): x for x in table.rows if x.cases > 0}
        got = {(c["estimator"], c["interval"]): c for c in rows if c["split"] == split}
        assert set(got) == set(expect)
        for key, c in got.items():
            assert c["cases"] == expect[key].cases
            assert c["coverage"] == pytest.approx(expect[key].coverage, abs=1e-12)


def test_coverage_requests_are_422_naming_the_field_and_leave_no_job(
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
    stored,
) -> None:
    path = f"/v1/benchmarks/{stored.version_id}/coverage"

    def jobs() -> int:
        with committed_sessionmaker() as s:
            return s.scalar(select(func.count()).select_from(Job).where(Job.kind == "coverage"))

    before = jobs()
    cases = [
        ({"sizes": [448]}, ["body", "sizes"]),
        ({"methods": ["nope"]}, ["body", "methods", 0]),
        ({"repeats": 0}, ["body", "repeats"]),
        ({"sizes": [1, 2, 3, 4, 5, 6]}, ["body", "sizes"]),
    ]
    for body, loc in cases:
        r = committed_client.post(path, json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        locs = [e["loc"] for e in r.json()["errors"]]
        assert loc in locs, (body, locs)
    assert jobs() == before
    # the generic jobs endpoint names the field under params
    r = committed_client.post(
        "/v1/jobs",
        json={"kind": "coverage", "params": {"version_id": str(stored.version_id), "repeats": 99}},
    )
    assert r.status_code == 422 and ["body", "params", "repeats"] in [
        e["loc"] for e in r.json()["errors"]
    ]
    assert jobs() == before


def test_too_few_models_is_422_naming_the_benchmark(
    committed_client: TestClient, committed_sessionmaker: sessionmaker[Session], cleanup: Cleanup
) -> None:
    few = committed_with_cleanup(committed_sessionmaker, cleanup, n_models=6)
    r = committed_client.post(f"/v1/benchmarks/{few.version_id}/coverage", json={})
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["errors"]] == [["path", "benchmark"]]
    assert "at least 10 models with full results; this benchmark has 6" in r.json()["detail"]
