"""Session step latency (issue 12): one step = post a 20-item batch, update the engine, serve the
next batch. Targets: p99 < 50 ms (``random``) and < 150 ms (``fluid``), server-side, Postgres.

Setup: the real GPQA matrix (``$BENCHSLICE_SHARED_DATA/gpqa.npz``; ``--models`` of its rows stored,
default all 420) in a private Postgres database (created, migrated, dropped at the end); the IRT
fit ``fluid`` needs is computed by the worker's runner (:func:`worker.runner.execute_job`, job
kind ``irt_fit``). Sessions evaluate held-out GPQA rows (not stored) against stored baselines
with close accuracies (so they run many steps), batch 20, goal ``decide``.

Two timings per step:

* ``service``: what the route does after reading the body: parse the columnar JSON upload
  (:func:`app.services.catalog.uploads.parse_results_upload`), :func:`app.services.evaluation.sessions.post_results`
  (row lock, engine update, next batch, history), build the response, commit. This is the
  server-side figure the targets refer to.
* ``http``: the same through the ASGI app in-process (``TestClient``: routing, dependencies,
  validation, JSON) as seen by the caller; no network.

Usage: .venv/bin/python bench/bench_session_steps.py [--sessions 20] [--models 420]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import scratch_database


def _gpqa() -> dict[str, np.ndarray]:
    root = Path(os.environ.get("BENCHSLICE_SHARED_DATA", Path(__file__).parents[2] / "shared/data"))
    with np.load(root / "gpqa.npz", allow_pickle=False) as d:
        return {k: d[k] for k in ("correct", "item_ids", "models")}


def _pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1000.0
    return {
        "n": int(a.size),
        "p50_ms": round(float(np.percentile(a, 50)), 2),
        "p90_ms": round(float(np.percentile(a, 90)), 2),
        "p99_ms": round(float(np.percentile(a, 99)), 2),
        "max_ms": round(float(a.max()), 2),
    }


class _NoProgress:
    """The job context's progress reporter when the bench runs a handler in-process."""

    def __call__(self, done: int, total: int | None = None) -> None:
        pass

    def check_cancelled(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20, help="sessions per policy and timing")
    ap.add_argument("--models", type=int, default=420, help="GPQA rows stored (rest held out)")
    args = ap.parse_args()
    data = _gpqa()
    n_models = min(args.models, data["correct"].shape[0] - args.sessions)
    with scratch_database("benchslice_bench_sessions") as url:
        os.environ["DATABASE_URL"] = url
        from fastapi.testclient import TestClient

        from app.db.session import make_engine, make_sessionmaker
        from app.ingest import parse_columnar
        from app.main import create_app
        from app.schemas.results import ModelCreate
        from app.schemas.sessions import SessionCreate
        from app.services.catalog.benchmarks import create_version, get_version
        from app.services.catalog.irt_fits import run_irt_fit
        from app.services.catalog.results import store_results
        from app.services.catalog.uploads import ParseOptions, UploadPart, parse_results_upload
        from app.services.evaluation import sessions as service
        from app.services.platform import jobs as job_service
        from app.settings import Settings

        settings = Settings(database_url=url)
        engine = make_engine(settings)
        factory = make_sessionmaker(engine)
        ids = [str(x) for x in data["item_ids"]]
        names = [str(m) for m in data["models"]]
        correct = data["correct"].astype(np.uint8)
        t0 = time.perf_counter()
        with factory() as s:
            version, _ = create_version(s, "gpqa", ids, ["gpqa_main"] * len(ids))
            for i in range(n_models):
                store_results(
                    s, version.id, ModelCreate(name=names[i]), parse_columnar(correct[i].tolist())
                )
            job = job_service.create_job(s, "irt_fit", {"benchmark_id": str(version.id)}, seed=0)
            s.commit()
            vid, job_id = version.id, job.id
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        # the irt_fit job's handler, run in this process (the bench times the fit, not the queue)
        with factory() as s, s.begin():
            job = job_service.get_job(s, job_id)
            run_irt_fit(s, job, job_service.JobContext(progress=_NoProgress()))
        fit_s = time.perf_counter() - t0

        acc = correct.mean(axis=1)
        held = list(range(n_models, n_models + args.sessions))
        results: dict[str, dict] = {}
        for policy in ("random", "fluid"):
            for timing in ("service", "http"):
                steps: list[float] = []
                items_used: list[int] = []
                app = create_app(settings)  # one app (engine, pool, caches) per case
                client = TestClient(app)
                for k, row in enumerate(held):
                    b = int(np.argsort(np.abs(acc[:n_models] - acc[row]))[k % 5])
                    body = SessionCreate(
                        model=f"held/{names[row]}",
                        baseline=names[b],
                        policy=policy,
                        batch_size=20,
                        seed=k,
                    )
                    with factory() as s:
                        created, _, _ = service.create_session(s, get_version(s, vid), body)
                        assert created is not None
                        sid = created.id
                        pub = service.to_public(s, created)
                        s.commit()
                    truth = correct[row]
                    while pub.state == "open":
                        payload = json.dumps(
                            {
                                "model": pub.model,
                                "item_ids": [it.item_id for it in pub.next_items],
                                "correct": [int(truth[it.position]) for it in pub.next_items],
                            }
                        ).encode()
                        t = time.perf_counter()
                        if timing == "service":
                            with factory() as s:
                                parsed, ref = parse_results_upload(
                                    [UploadPart("application/json", payload)],
                                    ParseOptions(),
                                    model=None,
                                )
                                pub, _ = service.post_results(s, sid, ref.name, parsed)
                                pub.model_dump(mode="json")
                                s.commit()
                        else:
                            r = client.post(
                                f"/v1/sessions/{sid}/results",
                                content=payload,
                                headers={"Content-Type": "application/json"},
                            )
                            assert r.status_code == 200, r.text
                            from app.schemas.sessions import SessionPublic

                            pub = SessionPublic.model_validate(r.json())
                        steps.append(time.perf_counter() - t)
                    items_used.append(pub.items_used)
                client.close()
                app.state.engine.dispose()
                results[f"{policy}/{timing}"] = {
                    **_pct(steps),
                    "sessions": len(held),
                    "median_items_used": float(np.median(items_used)),
                }
        engine.dispose()
    out = {
        "machine": f"{platform.node()} ({os.cpu_count()} cores, shared with other work)",
        "models_stored": n_models,
        "load_s": round(load_s, 1),
        "irt_fit_job_s": round(fit_s, 2),
        "steps": results,
        "targets_ms": {"random": 50, "fluid": 150},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
