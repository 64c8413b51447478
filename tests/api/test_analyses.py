"""Analyses: service + HTTP against real Postgres (rolled-back session), values == the engine's."""

from __future__ import annotations

import io
import uuid
import xml.etree.ElementTree as ET
from typing import Any

import matplotlib.image
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.core.reliability.mdad import analyze_protocol
from app.core.reliability.protocol import run_protocol
from app.core.results import MDADResult
from app.db.models import Job, JobStatus
from app.ingest import ParsedResults
from app.schemas.analyses import AnalysisCreate
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import load_matrix, store_results
from app.services.platform import jobs as job_service
from app.services.platform.jobs import JobContext
from app.services.reliability import analyses as service
from app.services.reliability import analysis_jobs
from worker.runner import ProgressReporter

N_MODELS = 90
PARAMS: dict[str, Any] = {
    "methods": ["random", "subtask_stratified"],
    "sizes": [10, 25, 50],
    "runs": 6,
    "n_sources": 50,
    "n_targets": 20,
    "seed": 20261130,
}


@pytest.fixture(scope="module")
def gpqa_rows(shared_data_dir) -> np.ndarray:
    with np.load(shared_data_dir / "gpqa.npz", allow_pickle=False) as d:
        return d["correct"][:N_MODELS]


@pytest.fixture
def version(db_session: Session, gpqa_rows: np.ndarray):
    n_items = gpqa_rows.shape[1]
    subs = np.where(np.arange(n_items) % 4 == 0, "physics", "chemistry").tolist()
    version, _ = create_version(
        db_session, f"gpqa-an-{uuid.uuid4().hex[:6]}", [f"q{k}" for k in range(n_items)], subs
    )
    for k, row in enumerate(gpqa_rows):
        parsed = ParsedResults(item_ids=None, correct=row.astype(np.uint8), confidence=None)
        store_results(db_session, version.id, ModelCreate(name=f"an-model-{k:03d}"), parsed)
    # one model with partial coverage: never drawn by the protocol
    ids = np.array([f"q{k}" for k in range(10)])
    store_results(
        db_session,
        version.id,
        ModelCreate(name="an-partial"),
        ParsedResults(item_ids=ids, correct=np.ones(10, np.uint8), confidence=None),
    )
    db_session.flush()
    return version


def _factory(db_session: Session) -> sessionmaker[Session]:
    """Sessions on the test's connection (each transaction a SAVEPOINT), for the real reporter."""
    return sessionmaker(
        bind=db_session.connection(),
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
    )


def _run(db_session: Session, analysis_id: uuid.UUID) -> Job:
    row = service.get_analysis(db_session, analysis_id)
    job = row.job
    job.status = JobStatus.running
    db_session.flush()
    ctx = JobContext(progress=ProgressReporter(_factory(db_session), job.id))
    analysis_jobs.run_analysis(db_session, job, ctx)
    job.status = JobStatus.succeeded
    db_session.flush()
    db_session.refresh(job)  # progress was written by the reporter's own transactions
    return job


def _engine_cells(db_session: Session, version_id: uuid.UUID, mode: str) -> list[MDADResult]:
    mat = load_matrix(db_session, version_id)
    full = mat.coverage.all(axis=1)
    result = run_protocol(
        mat.correct[full],
        PARAMS["methods"],
        PARAMS["sizes"],
        subtasks=mat.subtasks,
        runs=PARAMS["runs"],
        n_sources=PARAMS["n_sources"],
        n_targets=PARAMS["n_targets"],
        seed=PARAMS["seed"],
    )
    return analyze_protocol(result, mode=mode, splits=("seen", "unseen"))


def _same_curve(a, b) -> None:
    for name in ("gaps", "gap_upper", "n_pairs", "p_same", "p_tie", "p_reversed"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in ("fitted", "band_low", "band_high"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=name)
    assert (a.method, a.n, a.split, a.kind, a.max_gap) == (
        b.method,
        b.n,
        b.split,
        b.kind,
        b.max_gap,
    )


@pytest.mark.parametrize("mode", ["robust", "paper"])
def test_stored_analysis_equals_the_engine_with_the_same_seed(
    db_session: Session, version, mode: str
) -> None:
    analysis = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS, mode=mode))
    job = _run(db_session, analysis.id)
    assert job.result == {"analysis_id": str(analysis.id)}
    assert job.progress_done == job.progress_total == PARAMS["runs"]

    stored = service.latest_analysis(db_session, version.id, mode=mode)
    assert stored is not None and stored.id == analysis.id
    expected = _engine_cells(db_session, version.id, mode)
    assert len(stored.cells) == len(expected) == 2 * 3 * 2
    for got, want in zip(stored.cells, expected, strict=True):
        for name in (
            "method", "n", "split", "mode", "mdad", "ci_low", "ci_high", "threshold", "reached",
            "max_gap", "mean_agreement", "mean_abs_error", "kendall_tau", "n_runs", "n_pairs",
            "n_boot", "seed",
        ):  # fmt: skip
            assert getattr(got, name) == getattr(want, name), (name, got.method, got.n, got.split)
        _same_curve(got.curve, want.curve)
    # the stored per-run records are the engine's too
    records = service.stored_protocol(db_session, analysis.id)
    assert records.estimates.shape == (2, 3, PARAMS["runs"], PARAMS["n_targets"])
    assert stored.mdads("random").shape == (3,)
    assert stored.curve("random", 25).n == 25


def test_api_returns_exactly_the_stored_numbers(
    client: TestClient, db_session: Session, version
) -> None:
    analysis = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    _run(db_session, analysis.id)
    body = client.get(f"/v1/analyses/{analysis.id}").json()
    assert body["status"] == "succeeded"
    assert body["benchmark_name"] == version.benchmark.name
    result = body["result"]
    assert result["models_used"] == N_MODELS  # the partial-coverage model is left out
    assert result["confidence_used"] is False
    stored = service.latest_analysis(db_session, version.id)
    assert stored is not None
    by_key = {(c["method"], c["n"], c["split"]): c for c in result["mdad"]}
    for cell in stored.cells:
        row = by_key[(cell.method, cell.n, cell.split)]
        assert row["mdad"] == cell.mdad and row["ci_low"] == cell.ci_low
        assert row["ci_high"] == cell.ci_high
        assert row["mean_abs_error"] == cell.mean_abs_error
        assert row["kendall_tau"] == cell.kendall_tau
    curves = {(c["method"], c["n"], c["split"]): c for c in result["curves"]}
    c = curves[("random", 10, "seen")]
    want = stored.curve("random", 10)
    assert c["p_same"] == want.p_same.tolist() and c["n_pairs"] == want.n_pairs.tolist()
    assert c["fitted"] == want.fitted.tolist()
    rec = result["recommendation"]
    assert set(rec["smallest_n"]) == {"random", "subtask_stratified"}
    assert [r["n"] for r in rec["random_vs_best"]] == [10, 25, 50]


def test_post_queues_a_job_and_lists(client: TestClient, db_session: Session, version) -> None:
    response = client.post(f"/v1/benchmarks/{version.id}/analyses", json=PARAMS)
    assert response.status_code == 202, response.text
    body = response.json()
    assert response.headers["location"] == f"/v1/analyses/{body['id']}"
    assert body["status"] == "queued" and body["result"] is None
    assert body["seed"] == PARAMS["seed"] and body["sizes"] == [10, 25, 50]
    job = client.get(body["links"]["job"]).json()
    assert job["kind"] == "analysis" and job["params"]["benchmark_version_id"] == str(version.id)
    second = client.post(f"/v1/benchmarks/{version.id}/analyses", json={**PARAMS, "seed": None})
    assert second.status_code == 202 and second.json()["seed"] != PARAMS["seed"]
    page = client.get(f"/v1/benchmarks/{version.id}/analyses", params={"limit": 1}).json()
    assert [a["id"] for a in page["items"]] == [second.json()["id"]]
    rest = client.get(
        f"/v1/benchmarks/{version.id}/analyses", params={"cursor": page["next_cursor"]}
    ).json()
    assert [a["id"] for a in rest["items"]] == [body["id"]] and rest["next_cursor"] is None
    queued = client.get(
        f"/v1/benchmarks/{version.id}/analyses", params={"status": "succeeded"}
    ).json()
    assert queued["items"] == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"methods": ["random", "no_such_method"]}, "body.methods.1"),
        ({"methods": ["random", "random"]}, "body.methods"),
        ({"sizes": [10, 500]}, "body.sizes.1"),
        ({"sizes": [0]}, "body.sizes.0"),
        ({"n_sources": 80, "n_targets": 20}, "body.n_sources"),
        ({"mode": "fast"}, "body.mode"),
        ({"runs": 1}, "body.runs"),
        ({"gap": 0}, "body.gap"),
    ],
)
def test_invalid_parameters_are_422_naming_the_field(
    client: TestClient, version, change: dict[str, Any], field: str
) -> None:
    response = client.post(f"/v1/benchmarks/{version.id}/analyses", json={**PARAMS, **change})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    fields = [e["field"] for e in response.json()["errors"]]
    assert field in fields, fields


def test_unknown_benchmark_and_analysis_are_404(client: TestClient) -> None:
    missing = uuid.uuid4()
    assert client.post(f"/v1/benchmarks/{missing}/analyses", json=PARAMS).status_code == 404
    assert client.get(f"/v1/benchmarks/{missing}/analyses").status_code == 404
    response = client.get(f"/v1/analyses/{missing}")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert client.get(f"/v1/analyses/{missing}/plots/mdad.svg").status_code == 404


def test_plots_are_valid_svg_and_png(client: TestClient, db_session: Session, version) -> None:
    analysis = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    db_session.commit()  # a SAVEPOINT: the 409 below rolls the request's work back, not ours
    assert client.get(f"/v1/analyses/{analysis.id}/plots/mdad.svg").status_code == 409
    _run(db_session, analysis.id)
    base = f"/v1/analyses/{analysis.id}/plots"
    for path in ("mdad.svg", "agreement.svg?method=random&n=25", "agreement.svg"):
        response = client.get(f"{base}/{path}")
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "image/svg+xml"
        root = ET.fromstring(response.content)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        text = response.text
        assert version.benchmark.name in text or "gpqa" in text
    mdad_svg = client.get(f"{base}/mdad.svg").text
    assert "MDAD (accuracy points)" in mdad_svg and "subset size" in mdad_svg
    agreement_svg = client.get(f"{base}/agreement.svg?method=random&n=25").text
    assert "threshold 0.8" in agreement_svg
    for path in ("mdad.png", "agreement.png?method=subtask_stratified&n=10"):
        response = client.get(f"{base}/{path}")
        assert response.status_code == 200
        assert response.headers["content-type"] == "image/png"
        assert response.content[:8] == b"\x89PNG\r\n\x1a\n"
        image = matplotlib.image.imread(io.BytesIO(response.content), format="png")
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
    bad = client.get(f"{base}/agreement.svg?method=dpp")
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "query.method"
    bad = client.get(f"{base}/agreement.svg?n=11")
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "query.n"
    assert client.get(f"{base}/mdad.gif").status_code == 422


def test_latest_analysis_filters_by_methods_and_mode(db_session: Session, version) -> None:
    assert service.latest_analysis(db_session, version.id) is None
    first = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    _run(db_session, first.id)
    only_random = service.create_analysis(
        db_session, version.id, AnalysisCreate(**{**PARAMS, "methods": ["random"]})
    )
    _run(db_session, only_random.id)
    unfinished = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    assert unfinished.job.status is JobStatus.queued
    assert service.latest_analysis(db_session, version.id).id == only_random.id
    assert service.latest_analysis(db_session, version.id, ["random"]).id == only_random.id
    got = service.latest_analysis(db_session, version.id, ["subtask_stratified"])
    assert got is not None and got.id == first.id
    assert service.latest_analysis(db_session, version.id, ["dpp"]) is None
    assert service.latest_analysis(db_session, version.id, mode="paper") is None
    assert service.latest_analysis(db_session, version.id, mode=None).id == only_random.id
    with pytest.raises(KeyError):
        got.cell("random", 11)


def test_cancel_requested_before_the_first_chunk_stores_nothing(
    db_session: Session, version
) -> None:
    analysis = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    job = analysis.job
    job.status, job.cancel_requested = JobStatus.running, True
    db_session.flush()
    ctx = JobContext(progress=ProgressReporter(_factory(db_session), job.id))
    with pytest.raises(job_service.JobCancelled):
        analysis_jobs.run_analysis(db_session, job, ctx)
    db_session.expire_all()
    assert service.get_analysis(db_session, analysis.id).result is None


def test_identical_requests_share_the_queued_analysis(db_session: Session, version) -> None:
    first = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    again = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    assert again.id == first.id and again.job_id == first.job_id
    other = service.create_analysis(
        db_session, version.id, AnalysisCreate(**{**PARAMS, "seed": PARAMS["seed"] + 1})
    )
    assert other.job_id != first.job_id
    assert again.job.progress_total == PARAMS["runs"]
    _run(db_session, first.id)  # once it finished, the same request is new work
    later = service.create_analysis(db_session, version.id, AnalysisCreate(**PARAMS))
    assert later.job_id not in {first.job_id, other.job_id}
