"""The embedded default (SQLite): an analysis job runs its chunks in turn and stores the result."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.core.reliability.mdad import analyze_protocol
from app.core.reliability.protocol import run_protocol
from app.db import migrate
from app.db.models import Job, JobStatus
from app.ingest import ParsedResults
from app.schemas.analyses import AnalysisCreate
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import store_results
from app.services.reliability import analyses as service
from worker.runner import execute_job


def test_analysis_job_on_sqlite(tmp_path: Path, shared_data_dir: Path) -> None:
    from sqlalchemy import create_engine

    from app.db.session import make_sessionmaker

    url = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    migrate.upgrade(url)
    engine = create_engine(url)
    factory = make_sessionmaker(engine)
    with np.load(shared_data_dir / "gpqa.npz", allow_pickle=False) as d:
        correct = d["correct"][:60]
    body = AnalysisCreate(
        methods=["random"], sizes=[10, 25], runs=4, n_sources=40, n_targets=15, seed=8
    )
    with factory() as session:
        version, _ = create_version(
            session, "gpqa-sqlite", [f"q{k}" for k in range(correct.shape[1])], ["main"] * 448
        )
        for k, row in enumerate(correct):
            parsed = ParsedResults(item_ids=None, correct=row.astype(np.uint8), confidence=None)
            store_results(session, version.id, ModelCreate(name=f"m{k:02d}"), parsed)
        analysis = service.create_analysis(session, version.id, body)
        session.commit()
        version_id, analysis_id, job_id = version.id, analysis.id, analysis.job_id
    try:
        assert execute_job(factory, job_id) is JobStatus.succeeded
        with factory() as session:
            job = session.get(Job, job_id)
            assert job is not None and job.progress_done == job.progress_total == 4
            stored = service.latest_analysis(session, version_id)
            assert stored is not None and stored.id == analysis_id
            records = service.stored_protocol(session, analysis_id)
        expected = run_protocol(
            correct.astype(np.float64),
            ["random"],
            [10, 25],
            runs=4,
            n_sources=40,
            n_targets=15,
            seed=8,
        )
        np.testing.assert_array_equal(records.estimates, expected.estimates)
        cells = analyze_protocol(expected, mode="robust", splits=("seen", "unseen"))
        assert [c.mdad for c in stored.cells] == [c.mdad for c in cells]
        assert [c.kendall_tau for c in stored.cells] == [c.kendall_tau for c in cells]
    finally:
        engine.dispose()
