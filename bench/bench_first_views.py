"""First views at leaderboard size, and the views after one more upload (issue 27).

SYNTHETIC population from ``bench/synth.py`` (GPQA-calibrated 2PL, seed 0; accuracies spread like
GPQA's), default 5,000 models x 250 items, in a scratch Postgres database (migrated, dropped at
the end). Two roles, two kinds of process:

* the API: this process, the real app (``create_app``) through an in-process client. It only
  reads; its peak resident set (``VmHWM``) is the API's memory "throughout";
* the worker: a fresh spawned process per step (its own ``VmHWM``), running what a Celery worker
  runs: the results stored in one batch (``store_many``), the ``precompute_views`` job through
  ``worker.runner.execute_job``, one more model uploaded (``store_results``) and its precompute.

Measured: the first leaderboard and the first ``/ui/benchmarks/<b>`` page with nothing
precomputed (what the API computes itself), the same first views once the worker has
precomputed, the next views after one more upload and its precompute, and the size of the
stored views in Postgres. Server time of a page is its ``Server-Timing: app;dur=`` header; the
leaderboard's is the in-process client's wall time (no network).

    .venv/bin/python bench/bench_first_views.py [--models 5000] [--items 250] [--worker-only]

``--worker-only`` (e.g. 10,000 x 1,000) measures only the worker's precompute (time, peak RSS).
After one more upload both modes time the worker's precompute from the stored pair counts
(incremental: the new model's row and column; a fresh process reads them from the database) and
again with the counts forgotten (every pair), then in one process a precompute, a replaced model
and the precompute again (its base the process's own counts), and print the counts' size.
``--count-matrix`` measures instead what the alternative would store: the ``m x m`` uint16 pair
counts (``n10[a, b]``: items a got right and b wrong; ``n01 = n10.T``) as one Postgres ``bytea``,
and the time of one model's row and column (``O(m N)``) against the whole product.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import scratch_database, status_mb  # noqa: E402

NAME = "synth-board"


def _factory(url: str):
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker

    return sessionmaker(create_engine(url), expire_on_commit=False)


def store_population(url: str, models: int, items: int) -> tuple[str, float, float]:
    """Worker role: the version and ``models - 1`` models in one batch (the last is uploaded
    later); ``(version id, seconds, peak MB)``."""
    from app.ingest import parse_columnar
    from app.schemas.results import ModelCreate
    from app.services.catalog.benchmarks import create_version
    from app.services.catalog.bulk_results import store_many
    from bench.synth import make_synthetic

    correct = make_synthetic(models, items, seed=0).correct
    batch = [
        (ModelCreate(name=f"model-{i:05d}"), parse_columnar(correct[i].tolist()))
        for i in range(models - 1)
    ]
    factory = _factory(url)
    with factory() as session:
        ids = [f"item-{j}" for j in range(items)]
        version, _ = create_version(session, NAME, ids, [None] * items)
        session.commit()
        t0 = time.perf_counter()
        store_many(session, version.id, batch)
        session.commit()
        return str(version.id), time.perf_counter() - t0, status_mb("VmHWM")


def upload_last(url: str, version_id: str, models: int, items: int) -> float:
    """Worker role (as the API's upload route would): store the last model; seconds."""
    from app.ingest import parse_columnar
    from app.schemas.results import ModelCreate
    from app.services.catalog.results import store_results
    from bench.synth import make_synthetic

    row = make_synthetic(models, items, seed=0).correct[models - 1]
    factory = _factory(url)
    with factory() as session:
        t0 = time.perf_counter()
        store_results(
            session,
            uuid.UUID(version_id),
            ModelCreate(name=f"model-{models - 1:05d}"),
            parse_columnar(row.tolist()),
        )
        session.commit()
        return time.perf_counter() - t0


def replace_in_one_process(url: str, version_id: str, items: int) -> tuple[float, float, dict]:
    """Worker role, one long-lived process (as a Celery worker): a precompute (its counts then
    in the process), model 0's results replaced, the precompute again; the second's
    ``(seconds, peak MB, job result)``."""
    from app.ingest import parse_columnar
    from app.schemas.results import ModelCreate
    from app.services.catalog.results import store_results
    from bench.synth import make_synthetic

    run_precompute_job(url, version_id)
    row = 1 - make_synthetic(1, items, seed=1).correct[0]
    with _factory(url)() as session:
        store_results(
            session,
            uuid.UUID(version_id),
            ModelCreate(name="model-00000"),
            parse_columnar(row.tolist()),
            replace=True,
        )
        session.commit()
    return run_precompute_job(url, version_id)


def run_precompute_job(url: str, version_id: str) -> tuple[float, float, dict]:
    """Worker role: queue the precompute job as an upload does and run it as the worker does;
    ``(seconds, peak MB, job result)``."""
    from app.db.models import Job
    from app.services.ranking.precompute import request_precompute
    from worker.runner import execute_job

    factory = _factory(url)
    with factory() as session:
        job = request_precompute(session, uuid.UUID(version_id), 1)
        session.commit()
        job_id = job.id
    t0 = time.perf_counter()
    status = execute_job(factory, job_id)
    took = time.perf_counter() - t0
    with factory() as session:
        row = session.get(Job, job_id)
        assert status is not None and status.value == "succeeded", (status, row.error)
        return took, status_mb("VmHWM"), row.result


def count_matrix_size(url: str, models: int, items: int) -> None:
    import numpy as np
    from sqlalchemy import create_engine, text

    from bench.synth import make_synthetic

    y = make_synthetic(models, items, seed=0).correct.astype(np.float32)
    t0 = time.perf_counter()
    n10 = (y @ (1 - y).T).astype(np.uint16 if items < 65_536 else np.uint32)
    full = time.perf_counter() - t0
    t0 = time.perf_counter()
    _ = (y[17] @ (1 - y).T, (1 - y[17]) @ y.T)  # one model's row and column
    one = time.perf_counter() - t0
    raw = n10.tobytes()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE pair_counts (id int PRIMARY KEY, n10 bytea)"))
        conn.execute(text("INSERT INTO pair_counts VALUES (1, :b)"), {"b": raw})
    with engine.connect() as conn:
        size = conn.execute(text("SELECT pg_total_relation_size('pair_counts')")).scalar()
    engine.dispose()
    print(
        f"count matrix {models:,} x {models:,} {n10.dtype}: {len(raw) / 2**20:.1f} MiB raw, "
        f"{size / 2**20:.1f} MiB in Postgres; whole product {full:.2f} s, one model's row and "
        f"column {one * 1e3:.1f} ms"
    )


def drop_counts(url: str, version_id: str) -> None:
    """Forget the stored pair counts (the next precompute computes every pair)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text("DELETE FROM precomputed_views WHERE benchmark_version_id = :v AND name = :n"),
            {"v": uuid.UUID(version_id), "n": "pair_counts.npz"},
        )
    engine.dispose()


def counts_size(url: str, version_id: str) -> tuple[int, int]:
    """``(raw bytes, bytes in Postgres)`` of the stored pair counts."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        raw, stored = conn.execute(
            text(
                "SELECT octet_length(payload), pg_column_size(payload) FROM precomputed_views "
                "WHERE benchmark_version_id = :v AND name = :n"
            ),
            {"v": uuid.UUID(version_id), "n": "pair_counts.npz"},
        ).one()
    engine.dispose()
    return int(raw), int(stored)


def _round(result: dict) -> str:
    r = result["rounds"][-1]
    keys = ("counts", "matrix_s", "counts_s", "leaderboard_s", "health_s")
    return ", ".join(f"{k} {r.get(k)}" for k in keys)


def one_more_upload(url: str, version_id: str, m: int, n: int) -> None:
    """The worker's precompute after one more upload, from the stored counts (incremental),
    then again for the same results with the counts forgotten (every pair); the counts' size."""
    up = _in_worker(upload_last, url, version_id, m, n)
    took, peak, result = _in_worker(run_precompute_job, url, version_id)
    print(
        f"one more model: upload {up * 1e3:.0f} ms; worker precompute {took:.2f} s, peak RSS "
        f"{peak:.0f} MB; {_round(result)}"
    )
    drop_counts(url, version_id)
    took, peak, result = _in_worker(run_precompute_job, url, version_id)
    print(
        f"same results, stored counts forgotten: worker precompute {took:.2f} s, peak RSS "
        f"{peak:.0f} MB; {_round(result)}"
    )
    took, peak, result = _in_worker(replace_in_one_process, url, version_id, n)
    print(
        f"one model replaced, same worker process: precompute {took:.2f} s, peak RSS {peak:.0f} "
        f"MB; {_round(result)}"
    )
    raw, stored = counts_size(url, version_id)
    print(f"stored pair counts: {raw / 2**20:.1f} MiB raw, {stored / 2**20:.1f} MiB in Postgres")


def _in_worker(fn, *args):
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def _clear_api_caches() -> None:
    from app.services.catalog import matrices
    from app.services.ranking import leaderboards
    from app.web import page_views, pages
    from app.web import routes as web_routes

    for module in (leaderboards, pages, page_views, web_routes, matrices):
        module.clear_caches()


def _views(client, version_id: str) -> tuple[float, float, float]:
    """(leaderboard s, page server s, page wall s) with the API's caches empty."""
    _clear_api_caches()
    t0 = time.perf_counter()
    r = client.get(f"/v1/benchmarks/{version_id}/leaderboard")
    board = time.perf_counter() - t0
    assert r.status_code == 200, r.text[:300]
    _clear_api_caches()
    t0 = time.perf_counter()
    page = client.get(f"/ui/benchmarks/{NAME}")
    wall = time.perf_counter() - t0
    assert page.status_code == 200, page.text[:300]
    server = float(page.headers["server-timing"].split("dur=", 1)[1].split(";")[0]) / 1e3
    return board, server, wall


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=5_000)
    parser.add_argument("--items", type=int, default=250)
    parser.add_argument("--worker-only", action="store_true")
    parser.add_argument("--count-matrix", action="store_true")
    args = parser.parse_args(argv)
    m, n = args.models, args.items
    print(f"SYNTHETIC {m:,} x {n:,}; load before: {os.getloadavg()}")
    with scratch_database("benchslice_fv") as url:
        if args.count_matrix:
            count_matrix_size(url, m, n)
            return
        version_id, store_s, store_mb = _in_worker(store_population, url, m, n)
        print(
            f"worker: stored {m - 1:,} models in one batch: {store_s:.2f} s, peak {store_mb:.0f} MB"
        )
        if args.worker_only:
            took, peak, result = _in_worker(run_precompute_job, url, version_id)
            print(f"worker: precompute job {took:.2f} s, peak RSS {peak:.0f} MB; {result}")
            one_more_upload(url, version_id, m, n)
            print(f"load after: {os.getloadavg()}")
            return
        from fastapi.testclient import TestClient
        from sqlalchemy import create_engine, text

        from app.main import create_app
        from app.settings import Settings

        settings = Settings(database_url=url, auth_enabled=False, rate_limit_per_second=0)
        app = create_app(settings)
        with TestClient(app) as client:
            rss0 = status_mb("VmHWM")
            board, server, wall = _views(client, version_id)
            print(
                f"API, nothing precomputed: first leaderboard {board:.2f} s; first benchmark page "
                f"server {server:.2f} s (wall {wall:.2f} s); API peak RSS {status_mb('VmHWM'):.0f}"
                f" MB (after startup {rss0:.0f} MB)"
            )
            took, peak, result = _in_worker(run_precompute_job, url, version_id)
            print(f"worker: precompute job {took:.2f} s, peak RSS {peak:.0f} MB; {result}")
            board, server, wall = _views(client, version_id)
            print(
                f"API, precomputed: first leaderboard {board * 1e3:.0f} ms; first benchmark page "
                f"server {server * 1e3:.0f} ms (wall {wall * 1e3:.0f} ms)"
            )
            one_more_upload(url, version_id, m, n)
            board, server, wall = _views(client, version_id)
            print(
                f"API, after one more upload: next leaderboard {board * 1e3:.0f} ms; next "
                f"benchmark page server {server * 1e3:.0f} ms (wall {wall * 1e3:.0f} ms)"
            )
            t0 = time.perf_counter()
            client.get(f"/v1/benchmarks/{version_id}/leaderboard")
            warm = time.perf_counter() - t0
            page = client.get(f"/ui/benchmarks/{NAME}")
            warm_page = float(page.headers["server-timing"].split("dur=", 1)[1].split(";")[0])
            print(f"API, warm: leaderboard {warm * 1e3:.1f} ms, page server {warm_page:.1f} ms")
            print(f"API peak RSS throughout: {status_mb('VmHWM'):.0f} MB")
        app.state.engine.dispose()
        engine = create_engine(url)
        with engine.connect() as conn:
            size = conn.execute(text("SELECT pg_total_relation_size('precomputed_views')")).scalar()
            results = conn.execute(text("SELECT pg_total_relation_size('model_results')")).scalar()
        engine.dispose()
        print(
            f"Postgres: precomputed_views {size / 2**20:.2f} MiB (model_results {results / 2**20:.1f}"
            " MiB)"
        )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
