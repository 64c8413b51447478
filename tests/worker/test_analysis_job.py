"""Analysis jobs through real Celery worker processes over Redis, on the real GPQA matrix:
progress, cancel, soft time limit, redelivery, in-process chunk sharing, and two workers
sharing one analysis with a result identical to the engine's single-shot run."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.core.reliability.mdad import analyze_protocol
from app.core.reliability.protocol import run_protocol
from app.db.models import Analysis, Benchmark, Job, JobStatus, LanguageModel
from app.db.repositories.analyses import AnalysisChunkRepository
from app.ingest import ParsedResults
from app.queue import publish_job
from app.schemas.analyses import AnalysisCreate
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import load_matrix, store_results
from app.services.job_kinds import submit_job
from app.services.reliability import analyses as service
from app.services.reliability import analysis_jobs
from app.services.reliability.analysis_codecs import chunk_to_bytes
from tests.conftest import WorkerProcess, running_worker, wait_for_job
from worker.runner import execute_job

pytestmark = pytest.mark.integration

# dpp on 300 sources takes ~0.15 s per run on this (shared) machine: chunks last long enough to
# watch progress, to cancel between them and for a second worker to take some.
SLOW = {"methods": ["dpp", "random"], "sizes": [10, 25, 50, 100, 200]}


@pytest.fixture(scope="module")
def gpqa_version(
    shared_data_dir, committed_sessionmaker: sessionmaker[Session]
) -> Iterator[uuid.UUID]:
    """All 420 GPQA models committed on a fresh benchmark (removed after the module)."""
    with np.load(shared_data_dir / "gpqa.npz", allow_pickle=False) as d:
        correct, item_ids = d["correct"], d["item_ids"]
    tag = uuid.uuid4().hex[:8]
    names = [f"an-{tag}-{k:03d}" for k in range(correct.shape[0])]
    with committed_sessionmaker() as session:
        version, _ = create_version(
            session, f"gpqa-analysis-{tag}", item_ids.tolist(), ["gpqa_main"] * len(item_ids)
        )
        for name, row in zip(names, correct, strict=True):
            parsed = ParsedResults(item_ids=None, correct=row.astype(np.uint8), confidence=None)
            store_results(session, version.id, ModelCreate(name=name), parsed)
        session.commit()
        version_id, benchmark_id = version.id, version.benchmark_id
    yield version_id
    with committed_sessionmaker() as session:
        session.delete(session.get(Benchmark, benchmark_id))  # cascades to versions, analyses
        for m in session.query(LanguageModel).filter(LanguageModel.name.in_(names)):
            session.delete(m)
        session.commit()


def _post(client: TestClient, version_id: uuid.UUID, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/benchmarks/{version_id}/analyses", json=body)
    assert response.status_code == 202, response.text
    return response.json()


def _poll(client: TestClient, analysis_id: str) -> dict[str, Any]:
    return client.get(f"/v1/analyses/{analysis_id}").json()


def _engine(session: Session, version_id: uuid.UUID, body: dict[str, Any]):
    mat = load_matrix(session, version_id)
    result = run_protocol(
        mat.correct,
        body["methods"],
        body["sizes"],
        subtasks=mat.subtasks,
        runs=body["runs"],
        n_sources=body["n_sources"],
        n_targets=body["n_targets"],
        seed=body["seed"],
    )
    return result, analyze_protocol(result, mode=body["mode"], splits=("seen", "unseen"))


def _assert_equal_to_engine(
    committed_sessionmaker: sessionmaker[Session],
    version_id: uuid.UUID,
    analysis_id: str,
    body: dict[str, Any],
) -> None:
    with committed_sessionmaker() as session:
        records = service.stored_protocol(session, uuid.UUID(analysis_id))
        stored = service.stored_analysis(service.get_analysis(session, uuid.UUID(analysis_id)))
        expected, cells = _engine(session, version_id, body)
    np.testing.assert_array_equal(records.estimates, expected.estimates)
    np.testing.assert_array_equal(records.targets, expected.targets)
    np.testing.assert_array_equal(records.seen, expected.seen)
    for got, want in zip(stored.cells, cells, strict=True):
        assert (got.mdad, got.ci_low, got.ci_high) == (want.mdad, want.ci_low, want.ci_high)
        assert (got.mean_abs_error, got.kendall_tau) == (want.mean_abs_error, want.kendall_tau)
        np.testing.assert_array_equal(got.curve.fitted, want.curve.fitted)


def test_analysis_job_reports_progress_and_stores_the_engines_numbers(
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    gpqa_version: uuid.UUID,
) -> None:
    body = {**SLOW, "runs": 30, "n_sources": 300, "n_targets": 50, "seed": 11, "mode": "robust"}
    created = _post(committed_client, gpqa_version, **body)
    seen: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = _poll(committed_client, created["id"])
        if state["status"] == "running":
            seen.append(state["progress"]["done"])
            assert state["progress"]["total"] == 30
        if state["status"] in {"succeeded", "failed", "cancelled"}:
            break
        time.sleep(0.05)
    assert state["status"] == "succeeded", (state, celery_worker_process.log[-3000:])
    assert seen == sorted(seen), seen  # never goes back
    assert len(set(seen) - {0, 30}) >= 2, seen  # observed strictly between start and end
    assert state["progress"] == {"done": 30, "total": 30}
    assert state["result"]["models_used"] == 420
    job = committed_client.get(f"/v1/jobs/{created['job_id']}").json()
    assert job["result"] == {"analysis_id": created["id"]}
    with committed_sessionmaker() as session:
        assert AnalysisChunkRepository(session).for_job(uuid.UUID(created["job_id"])) == []
    _assert_equal_to_engine(committed_sessionmaker, gpqa_version, created["id"], body)

    # redelivery of a succeeded job changes nothing
    publish_job(committed_client.app.state.job_queue, uuid.UUID(created["job_id"]))
    marker = f"job {created['job_id']} -> succeeded"
    wait_for_job(
        lambda: {"n": celery_worker_process.log.count(marker)}, until=lambda b: b["n"] >= 2
    )
    again = _poll(committed_client, created["id"])
    assert again["finished_at"] == state["finished_at"] and again["result"] == state["result"]


def test_cancel_between_chunks_ends_cancelled_without_a_result(
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    gpqa_version: uuid.UUID,
) -> None:
    created = _post(committed_client, gpqa_version, **SLOW, runs=400, seed=5)
    running = wait_for_job(
        lambda: _poll(committed_client, created["id"]),
        timeout=120,
        until=lambda b: b["status"] == "running" and b["progress"]["done"] >= 1,
    )
    assert running["progress"]["total"] == 400
    cancel = committed_client.post(f"/v1/jobs/{created['job_id']}/cancel")
    assert cancel.status_code == 200, cancel.text
    final = wait_for_job(lambda: _poll(committed_client, created["id"]), timeout=60)
    assert final["status"] == "cancelled", final
    assert final["result"] is None and final["progress"]["done"] < 400
    with committed_sessionmaker() as session:
        row = session.get(Analysis, uuid.UUID(created["id"]))
        assert row is not None and row.result is None and row.protocol is None
        assert AnalysisChunkRepository(session).for_job(uuid.UUID(created["job_id"])) == []


def test_soft_time_limit_fails_the_job_with_a_reason(
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    gpqa_version: uuid.UUID,
) -> None:
    with committed_sessionmaker() as session:
        analysis = service.create_analysis(
            session, gpqa_version, AnalysisCreate(**SLOW, runs=400, seed=3)
        )
        session.commit()
        analysis_id, job_id = analysis.id, analysis.job_id
    publish_job(committed_client.app.state.job_queue, job_id, soft_time_limit=2, time_limit=30)
    final = wait_for_job(lambda: _poll(committed_client, str(analysis_id)), timeout=90)
    assert final["status"] == "failed", final
    assert final["error"] == "time limit exceeded (SoftTimeLimitExceeded)"
    assert final["result"] is None
    with committed_sessionmaker() as session:
        assert AnalysisChunkRepository(session).for_job(job_id) == []


def test_invalid_at_run_time_fails_with_the_reason(
    committed_sessionmaker: sessionmaker[Session], gpqa_version: uuid.UUID
) -> None:
    """Validated again by the job (models may have been deleted since the request)."""
    with committed_sessionmaker() as session:
        analysis = service.create_analysis(
            session, gpqa_version, AnalysisCreate(methods=["random"], sizes=[10], runs=2)
        )
        analysis.n_sources = 400  # as if models had been removed after the request
        session.commit()
        job_id = analysis.job_id
    try:
        assert execute_job(committed_sessionmaker, job_id) is JobStatus.failed
        with committed_sessionmaker() as session:
            job = session.get(Job, job_id)
            assert job is not None and job.error is not None
            assert "n_sources + n_targets = 450 exceeds the 420 models" in job.error
    finally:
        with committed_sessionmaker() as session:
            session.delete(session.get(Job, job_id))
            session.commit()


def test_chunks_shared_in_process_equal_single_shot(
    committed_sessionmaker: sessionmaker[Session], gpqa_version: uuid.UUID
) -> None:
    """The Postgres chunk-table path run in this process (no worker): same numbers."""
    body = {
        "methods": ["random", "subtask_stratified"],
        "sizes": [10, 50],
        "runs": 12,
        "n_sources": 200,
        "n_targets": 40,
        "seed": 99,
        "mode": "paper",
    }
    with committed_sessionmaker() as session:
        analysis = service.create_analysis(session, gpqa_version, AnalysisCreate(**body))
        session.commit()
        analysis_id, job_id = analysis.id, analysis.job_id
    try:
        assert execute_job(committed_sessionmaker, job_id) is JobStatus.succeeded
        _assert_equal_to_engine(committed_sessionmaker, gpqa_version, str(analysis_id), body)
    finally:
        with committed_sessionmaker() as session:
            session.delete(session.get(Job, job_id))
            session.commit()


@pytest.fixture
def second_worker(celery_worker_process: WorkerProcess) -> Iterator[WorkerProcess]:
    with running_worker(f"second-{uuid.uuid4().hex[:6]}@%h") as worker:
        yield worker


def test_two_workers_share_one_analysis_with_the_single_shot_result(
    celery_worker_process: WorkerProcess,
    second_worker: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    gpqa_version: uuid.UUID,
) -> None:
    body = {**SLOW, "runs": 40, "n_sources": 300, "n_targets": 50, "seed": 2026, "mode": "robust"}
    created = _post(committed_client, gpqa_version, **body)
    final = wait_for_job(lambda: _poll(committed_client, created["id"]), timeout=180)
    logs = celery_worker_process.log[-2000:] + second_worker.log[-2000:]
    assert final["status"] == "succeeded", (final, logs)
    executed_by = final["result"]["executed_by"]
    assert len(executed_by) == 2, (executed_by, logs)  # both worker processes ran chunks
    _assert_equal_to_engine(committed_sessionmaker, gpqa_version, created["id"], body)


def test_generic_job_endpoint_creates_the_analysis_row(
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    gpqa_version: uuid.UUID,
) -> None:
    """POST /v1/jobs {"kind": "analysis"} is validated like the analyses route and, run, yields
    an analysis row linked from the job's result."""
    for params, field in [
        ({"sizes": [10]}, "body.methods"),
        ({"methods": ["random"], "sizes": [10]}, "body.benchmark_version_id"),
    ]:
        bad = committed_client.post("/v1/jobs", json={"kind": "analysis", "params": params})
        assert bad.status_code == 422
        assert field in {e["field"] for e in bad.json()["errors"]}
    with committed_sessionmaker() as session:
        job = submit_job(
            session,
            "analysis",
            {
                "benchmark_version_id": str(gpqa_version),
                "methods": ["random"],
                "sizes": [25, 10],
                "runs": 3,
                "n_sources": 100,
                "n_targets": 30,
            },
            seed=4,
        )
        session.commit()
        job_id = job.id
    try:
        assert execute_job(committed_sessionmaker, job_id) is JobStatus.succeeded
        with committed_sessionmaker() as session:
            found = session.get(Job, job_id)
            assert found is not None and found.result is not None
            row = service.get_analysis(session, uuid.UUID(found.result["analysis_id"]))
            assert row.sizes == [10, 25] and row.seed == 4 and row.result is not None
    finally:
        with committed_sessionmaker() as session:
            session.delete(session.get(Job, job_id))
            session.commit()


def test_a_redelivered_job_resumes_from_the_chunks_already_done(
    committed_sessionmaker: sessionmaker[Session], gpqa_version: uuid.UUID
) -> None:
    """A worker died after finishing one chunk: the next delivery keeps that chunk (recorded
    with the previous worker's name) and computes the rest; the result is the engine's."""
    body = {
        "methods": ["random"],
        "sizes": [10, 25],
        "runs": 10,
        "n_sources": 150,
        "n_targets": 30,
        "seed": 77,
        "mode": "robust",
    }
    with committed_sessionmaker() as session:
        analysis = service.create_analysis(session, gpqa_version, AnalysisCreate(**body))
        session.commit()
        analysis_id, job_id = analysis.id, analysis.job_id
    try:
        with committed_sessionmaker() as session:
            row = service.get_analysis(session, analysis_id)
            inputs = analysis_jobs.load_inputs(session, row)
            bounds = analysis_jobs.chunk_plan(row.runs)
            chunks = AnalysisChunkRepository(session)
            chunks.ensure(job_id, bounds)
            chunks.ensure(job_id, bounds)  # idempotent
            first = chunks.for_job(job_id)[0]
            part = analysis_jobs.compute_chunk(row, inputs, first.run_start, first.run_stop)
            first.payload = chunk_to_bytes(part)
            first.done, first.worker = True, "previous-worker"
            job = session.get(Job, job_id)
            assert job is not None
            job.status = JobStatus.running  # as left by the worker that died
            session.commit()
        assert execute_job(committed_sessionmaker, job_id) is JobStatus.succeeded
        with committed_sessionmaker() as session:
            stored = service.get_analysis(session, analysis_id)
            assert stored.result is not None
            assert "previous-worker" in stored.result["executed_by"]
            assert len(stored.result["executed_by"]) == 2
        _assert_equal_to_engine(committed_sessionmaker, gpqa_version, str(analysis_id), body)
    finally:
        with committed_sessionmaker() as session:
            session.delete(session.get(Job, job_id))
            session.commit()
