"""Stored pair counts on the embedded default (SQLite): the precompute job stores the counts
blob beside the views, and a later job (another process: no counts in memory) updates from the
blob read back, to the same leaderboard bytes the matrix engine gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.db import migrate
from app.db.models import Job
from app.db.repositories.benchmarks import PrecomputedViewRepository
from app.enums import JobStatus
from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import get_version
from app.services.catalog.results import store_results
from app.services.ranking import first_views, leaderboards, pair_counts, precompute
from app.settings import Settings
from tests.api._subset_data import gpqa, seed_gpqa
from worker.runner import execute_job


def _run_job(factory, version_id) -> dict:
    with factory() as s:
        job = precompute.request_precompute(s, version_id, 1)
        s.commit()
        job_id = job.id
    status = execute_job(factory, job_id)  # what the worker runs
    with factory() as s:
        job = s.get(Job, job_id)
        assert status is JobStatus.succeeded, job.error
        return job.result["rounds"][-1]


def test_precompute_updates_stored_counts_on_sqlite(tmp_path: Path) -> None:
    from app.db.session import make_engine, make_sessionmaker

    url = f"sqlite:///{tmp_path / 'p.sqlite3'}"
    migrate.upgrade(url)
    engine = make_engine(Settings(database_url=url))  # type: ignore[call-arg]
    factory = make_sessionmaker(engine)
    try:
        with factory() as s:
            seeded = seed_gpqa(s, n_models=20)
            s.commit()
        pair_counts.clear_caches()
        first = _run_job(factory, seeded.version_id)
        assert first["counts"] == {"base": "none", "path": "full", "changed": 20}
        with factory() as s:
            store_results(
                s,
                seeded.version_id,
                ModelCreate(name="one/more"),
                parse_columnar(np.asarray(gpqa()["correct"][300], dtype=int).tolist()),
            )
            s.commit()
        pair_counts.clear_caches()  # another worker process
        after = _run_job(factory, seeded.version_id)
        assert after["counts"] == {"base": "database", "path": "incremental", "changed": 1}
        with factory() as s:
            stamp = leaderboards.results_stamp(s, seeded.version_id)
            stored = first_views.stored_view(
                s, seeded.version_id, first_views.LEADERBOARD_VIEW, stamp
            )
            blob = PrecomputedViewRepository(s).latest(seeded.version_id, pair_counts.COUNTS_VIEW)
            assert blob is not None and blob[0] == first_views.stamp_text(stamp)
            assert pair_counts.decode(blob[1]).names.size == 21
            leaderboards.clear_caches()
            fresh = leaderboards.rendered(
                s,
                get_version(s, seeded.version_id),
                leaderboards.DEFAULT_QUERY,
                fmt="json",
                precomputed=False,
            )
            assert stored == fresh
    finally:
        pair_counts.clear_caches()
        leaderboards.clear_caches()
        engine.dispose()
