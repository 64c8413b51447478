"""First views after an upload come from what the worker precomputed (issue 27): the upload
queues ``precompute_views`` after it commits, a real worker stores the default leaderboard and
the benchmark page's item-health panel under the new results stamp, and the next leaderboard and
page views in a process with empty caches compute nothing (the engine's computation counter
does not move) and take warm-cache time."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import BenchmarkVersion, Job, LanguageModel
from app.enums import JobStatus
from app.services.catalog.benchmarks import get_version
from app.services.ranking import first_views, leaderboards, precompute
from app.settings import Settings
from app.web import page_views, pages
from app.web import routes as web_routes
from tests.api._subset_data import committed_with_cleanup, gpqa
from tests.conftest import WorkerProcess

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]
FIRST_VIEW_BOUND_S = 2.0  # generous for CI; a computed GPQA page is ~1 s cold under load


def _count(counter: Any, **labels: str) -> float:
    metric = counter.labels(**labels) if labels else counter
    return metric._value.get()


def _clear_process_caches() -> None:
    """What a freshly started API process (or another one) holds: nothing."""
    leaderboards.clear_caches()
    pages.clear_caches()
    page_views.clear_caches()
    web_routes.clear_caches()


@pytest.fixture
def stored(committed_sessionmaker: sessionmaker[Session], cleanup: Cleanup):
    seeded = committed_with_cleanup(committed_sessionmaker, cleanup, n_models=30)
    with committed_sessionmaker() as s:
        name = s.get(BenchmarkVersion, seeded.version_id).benchmark.name
    return seeded, name


@pytest.fixture
def precomputing_client(settings: Settings, engine: Any) -> Iterator[TestClient]:
    from app.main import create_app

    application = create_app(settings.model_copy(update={"precompute_min_models": 3}))
    try:
        with TestClient(application, raise_server_exceptions=False) as client:
            yield client
    finally:
        application.state.celery.close()
        application.state.engine.dispose()


def _upload_gpqa_row(
    client: TestClient, seeded: Any, model: str, row: int, *, replace: bool = False
) -> None:
    """Upload GPQA model ``row`` (not among the seeded ones) as ``model`` over HTTP."""
    new = np.asarray(gpqa()["correct"][row], dtype=int)
    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/results" + ("?replace=true" if replace else ""),
        json={
            "model": {"name": model},
            "results": dict(zip(seeded.item_ids, new.tolist(), strict=True)),
        },
    )
    assert r.status_code == (200 if replace else 201), r.text


def _wait_precompute(factory: sessionmaker[Session], version_id: uuid.UUID) -> list[Job]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with factory() as s:
            jobs = [
                j
                for j in s.scalars(select(Job).where(Job.kind == precompute.JOB_KIND))
                if j.params.get("version_id") == str(version_id)
            ]
        if jobs and all(j.status.terminal for j in jobs):
            return jobs
        time.sleep(0.1)
    raise AssertionError(f"precompute job did not finish: {[(j.id, j.status) for j in jobs]}")


def test_views_after_an_upload_are_served_from_the_worker_precompute(
    celery_worker_process: WorkerProcess,
    precomputing_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
    stored,
) -> None:
    seeded, name = stored
    client = precomputing_client
    _upload_gpqa_row(client, seeded, "new/model-31", 200)
    with committed_sessionmaker() as s:
        cleanup(
            LanguageModel,
            s.scalar(select(LanguageModel.id).where(LanguageModel.name == "new/model-31")),
        )
    jobs = _wait_precompute(committed_sessionmaker, seeded.version_id)
    for j in jobs:
        cleanup(Job, j.id)
    assert [j.status.value for j in jobs] == ["succeeded"], celery_worker_process.log[-3000:]
    last = jobs[0].result["rounds"][-1]
    assert last[first_views.LEADERBOARD_VIEW] > 0 and last["stamp"].startswith("31:")

    _clear_process_caches()
    computed_before = _count(leaderboards.COMPUTATIONS)
    health_before = _count(
        first_views.FIRST_VIEWS, view=first_views.HEALTH_VIEW, source="precomputed"
    )
    wide = precompute.HISTOGRAM_VIEW.format(look="wide")
    hist_before = _count(first_views.FIRST_VIEWS, view=wide, source="precomputed")
    t0 = time.perf_counter()
    board = client.get(f"/v1/benchmarks/{seeded.version_id}/leaderboard")
    board_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = client.get(f"/ui/benchmarks/{name}")
    page_s = time.perf_counter() - t0
    assert board.status_code == 200 and page.status_code == 200, (board.text, page.text[:500])
    assert _count(leaderboards.COMPUTATIONS) == computed_before  # neither view computed a board
    assert (
        _count(first_views.FIRST_VIEWS, view=first_views.HEALTH_VIEW, source="precomputed")
        == health_before + 1
    )
    assert _count(first_views.FIRST_VIEWS, view=wide, source="precomputed") == hist_before + 1
    assert board_s < FIRST_VIEW_BOUND_S and page_s < FIRST_VIEW_BOUND_S, (board_s, page_s)
    rows = board.json()["rows"]
    assert len(rows) == 31 and "new/model-31" in {row["model"] for row in rows}
    assert "new/model-31" in page.text or "31" in page.text

    # the precomputed bytes are exactly what this process computes itself
    with committed_sessionmaker() as s:
        version = get_version(s, seeded.version_id)
        _clear_process_caches()
        fresh = leaderboards.rendered(
            s, version, leaderboards.DEFAULT_QUERY, fmt="json", precomputed=False
        )
    assert fresh == board.content


def _precomputed_rounds(
    factory: sessionmaker[Session], cleanup: Cleanup, version_id: uuid.UUID, seen: set
) -> list[dict]:
    """The rounds of the version's precompute jobs not seen before (all must have succeeded)."""
    jobs = [j for j in _wait_precompute(factory, version_id) if j.id not in seen]
    for j in jobs:
        seen.add(j.id)
        cleanup(Job, j.id)
    assert all(j.status is JobStatus.succeeded for j in jobs), [j.error for j in jobs]
    return [r for j in sorted(jobs, key=lambda j: j.created_at) for r in j.result["rounds"]]


def test_after_one_more_upload_the_worker_updates_the_stored_pair_counts(
    celery_worker_process: WorkerProcess,
    precomputing_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
    stored,
) -> None:
    """The first job computes every pair; after one more upload, a replace, a delete and a
    restore the job updates the changed rows and columns only (its result says so, detected by
    fingerprints), and the leaderboard it stores is byte for byte the one computed from the
    matrix."""
    seeded, _ = stored
    client = precomputing_client
    vid = seeded.version_id
    seen: set = set()
    names = ["inc/a", "inc/b"]

    def check_board() -> None:
        with committed_sessionmaker() as s:
            version = get_version(s, vid)
            stamp = leaderboards.results_stamp(s, vid)
            stored_bytes = first_views.stored_view(s, vid, first_views.LEADERBOARD_VIEW, stamp)
            _clear_process_caches()
            fresh = leaderboards.rendered(
                s, version, leaderboards.DEFAULT_QUERY, fmt="json", precomputed=False
            )
        assert stored_bytes == fresh

    def upload(model: str, row: int, replace: bool = False) -> None:
        _upload_gpqa_row(client, seeded, model, row, replace=replace)
        with committed_sessionmaker() as s:
            cleanup(
                LanguageModel, s.scalar(select(LanguageModel.id).where(LanguageModel.name == model))
            )

    upload(names[0], 200)
    rounds = _precomputed_rounds(committed_sessionmaker, cleanup, vid, seen)
    assert rounds[0]["counts"] == {"base": "none", "path": "full", "changed": 31}
    check_board()
    steps = [
        (lambda: upload(names[1], 201), 1),  # one more model
        (lambda: upload(names[0], 202, replace=True), 1),  # replaced
        (lambda: client.delete(f"/v1/benchmarks/{vid}/models/{names[1]}"), 0),
        (lambda: client.post(f"/v1/benchmarks/{vid}/models/{names[1]}/restore"), 1),
    ]
    for step, changed in steps:
        r = step()
        assert r is None or r.status_code in (200, 204), r.text
        rounds = _precomputed_rounds(committed_sessionmaker, cleanup, vid, seen)
        assert [(x["counts"]["path"], x["counts"]["changed"]) for x in rounds] == [
            ("incremental", changed)
        ]
        assert rounds[0]["counts"]["base"] in ("process", "database")
        check_board()


def test_pair_counts_update_from_the_process_or_the_database(db_session: Session) -> None:
    """Fingerprints, not the trigger, decide: the base is the process's last counts, else the
    stored blob; a changed row is recomputed, the rest copied; the result equals every pair."""
    from app.core.ranking.stored_counts import pair_counts as all_pairs
    from app.services.ranking import pair_counts
    from tests.api._subset_data import seed_gpqa
    from tests.core.test_stored_counts import assert_same_counts

    seeded = seed_gpqa(db_session, n_models=12)
    vid = seeded.version_id
    correct = np.asarray(gpqa()["correct"][:12], dtype=np.uint8)
    coverage = np.ones_like(correct, dtype=bool)
    names = np.array([f"m{i:02d}" for i in range(12)])
    pair_counts.clear_caches()
    stored, how = pair_counts.current_counts(db_session, vid, names, correct, coverage)
    assert how == {"base": "none", "path": "full", "changed": 12}
    first_views.put_view(db_session, vid, pair_counts.COUNTS_VIEW, "x", pair_counts.encode(stored))
    pair_counts.clear_caches()  # another worker process: only the database has them
    changed = correct.copy()
    changed[3] = 1 - changed[3]
    stored, how = pair_counts.current_counts(db_session, vid, names, changed, coverage)
    assert how == {"base": "database", "path": "incremental", "changed": 1}
    assert_same_counts(stored.counts, all_pairs(changed))
    gone = np.delete(changed, 5, axis=0)
    stored, how = pair_counts.current_counts(
        db_session, vid, np.delete(names, 5), gone, coverage[:11]
    )
    assert how == {"base": "process", "path": "incremental", "changed": 0}
    assert_same_counts(stored.counts, all_pairs(gone))
    many = 1 - gone  # every model changed: every pair computed
    stored, how = pair_counts.current_counts(
        db_session, vid, np.delete(names, 5), many, coverage[:11]
    )
    assert how == {"base": "process", "path": "full", "changed": 11}
    assert_same_counts(stored.counts, all_pairs(many))
    pair_counts.clear_caches()


def test_a_stale_precompute_is_never_served(
    client: TestClient, db_session: Session, settings: Settings
) -> None:
    """A view stored under another results stamp is ignored; one under the current stamp is
    served as is (bogus bytes make the source visible)."""
    from tests.api._subset_data import seed_gpqa

    seeded = seed_gpqa(db_session, n_models=12)
    url = f"/v1/benchmarks/{seeded.version_id}/leaderboard"
    stamp = leaderboards.results_stamp(db_session, seeded.version_id)
    first_views.put_view(
        db_session, seeded.version_id, first_views.LEADERBOARD_VIEW, "0:stale", b'{"stale":1}'
    )
    _clear_process_caches()
    assert "rows" in client.get(url).json()  # stale: computed
    first_views.put_view(
        db_session,
        seeded.version_id,
        first_views.LEADERBOARD_VIEW,
        first_views.stamp_text(stamp),
        b'{"bogus":1}',
    )
    _clear_process_caches()
    assert client.get(url).json() == {"bogus": 1}  # current: served from the store
    _upload_gpqa_row(client, seeded, "one/more", 300)
    after = client.get(url).json()  # the results changed: the stored view is stale again
    assert len(after["rows"]) == 13


def test_two_identical_first_requests_compute_once(
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
    stored,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Single flight: two requests (threads, each with its own session) asking for the same
    board at once run the engine once (the engine is slowed down so that the two overlap)."""
    import threading

    seeded, _ = stored
    real = leaderboards.core_leaderboard

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(leaderboards, "core_leaderboard", slow)
    _clear_process_caches()
    with committed_sessionmaker() as s:
        leaderboards.results_matrix(s, seeded.version_id)  # the matrix decoded once, beforehand
    before = _count(leaderboards.COMPUTATIONS)
    query = leaderboards.LeaderboardQuery.of(correction="bh")
    out: list[Any] = []
    start = threading.Barrier(2)

    def ask() -> None:
        with committed_sessionmaker() as s:
            version = get_version(s, seeded.version_id)
            start.wait()
            out.append(leaderboards.compute(s, version, query))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 2 and out[0] is out[1]
    assert _count(leaderboards.COMPUTATIONS) == before + 1


def test_uploads_while_a_precompute_is_queued_queue_no_other(
    db_session: Session, settings: Settings
) -> None:
    """A push of many models one by one queues one job per version while it waits, not one per
    model; below the threshold (or with 0) none."""
    from tests.api._subset_data import seed_gpqa

    seeded = seed_gpqa(db_session, n_models=5)
    assert precompute.request_precompute(db_session, seeded.version_id, 6) is None
    assert precompute.request_precompute(db_session, seeded.version_id, 0) is None
    first = precompute.request_precompute(db_session, seeded.version_id, 5)
    assert first is not None and first.params == {"version_id": str(seeded.version_id)}
    assert first.owner is None  # the instance's job: no caller's quota
    assert precompute.request_precompute(db_session, seeded.version_id, 5) is None
    first.status = JobStatus.running
    db_session.flush()
    assert precompute.request_precompute(db_session, seeded.version_id, 5) is not None


def test_an_upload_succeeds_when_the_precompute_cannot_be_queued(
    precomputing_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
    settings: Settings,
    stored,
) -> None:
    """Broker down (a real Celery client on a port nobody listens on): the upload is stored and
    answered 201; the precompute job is recorded failed with the reason, never left queued."""
    from app.api.deps import get_job_queue
    from app.queue import BROKER_DOWN_REASON, CeleryQueue

    seeded, _ = stored
    dead = CeleryQueue.from_settings(
        settings.model_copy(
            update={"broker_url": "redis://127.0.0.1:1/0", "broker_publish_timeout": 0.5}
        )
    )
    app = precomputing_client.app
    app.dependency_overrides[get_job_queue] = lambda: dead
    try:
        _upload_gpqa_row(precomputing_client, seeded, "new/model-dead-broker", 201)
    finally:
        app.dependency_overrides.pop(get_job_queue, None)
        dead.close()
    with committed_sessionmaker() as s:
        cleanup(
            LanguageModel,
            s.scalar(select(LanguageModel.id).where(LanguageModel.name == "new/model-dead-broker")),
        )
        jobs = [
            j
            for j in s.scalars(select(Job).where(Job.kind == precompute.JOB_KIND))
            if j.params.get("version_id") == str(seeded.version_id)
        ]
        for j in jobs:
            cleanup(Job, j.id)
    assert [(j.status, j.error) for j in jobs] == [(JobStatus.failed, BROKER_DOWN_REASON)]
