"""What projects, roles and the audit trail cost a request (issue 25).

Runs the app in-process (FastAPI TestClient, no network) on a private Postgres database (created,
migrated, dropped at the end) with API keys on, and times requests made one at a time with a
write key:

  read_models       GET /v1/benchmarks/{name}/models (key, role on the project, name resolution)
  upload_unchanged  POST …/results with the stored results again (200 unchanged; one audit row)
  upload_replace    POST …/results?replace=true alternating two vectors (archive + audit row)
  delete_restore    DELETE …/models/{m} then POST …/models/{m}/restore (two writes; skipped
                    where the code has no restore)

Run it against another checkout's code (e.g. main, before projects) with ``--code DIR``: the
same requests, so the difference is what the checks and the audit rows cost. Prints one Markdown
row per case: median and p90 in ms over ``--repeats`` requests. Cost per request is constant in
the number of projects and keys (lookups by primary key / unique prefix); the audit trail grows
by one row per write (an index on ``at``, ``key_id``, ``action``, ``(project_id, id)``).

Usage: .venv/bin/python bench/bench_tenancy.py [--quick] [--repeats 300] [--code DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn, repeats: int) -> np.ndarray:
    out = np.empty(repeats)
    for k in range(repeats):
        start = time.perf_counter()
        fn(k)
        out[k] = time.perf_counter() - start
    return out * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose app/ is timed")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    sys.path.insert(1, str(ROOT))
    repeats = 20 if args.quick else args.repeats

    from fastapi.testclient import TestClient
    from sqlalchemy.orm import Session

    from app.db.session import make_engine
    from app.main import create_app
    from app.services.access.keys import create_key
    from app.settings import Settings
    from bench._common import scratch_database

    with scratch_database("benchslice_bench_tenancy") as url:
        settings = Settings(database_url=url, auth_enabled=True)
        engine = make_engine(settings)
        with Session(engine) as session:
            _, token = create_key(session, "bench", ["write"])
            session.commit()
        engine.dispose()
        headers = {"Authorization": f"Bearer {token}"}
        n_items = 448
        rng = np.random.default_rng(0)
        rows = rng.integers(0, 2, (2, n_items)).tolist()
        app = create_app(settings)
        with TestClient(app) as client:
            items = [{"id": f"q{i}"} for i in range(n_items)]
            r = client.post(
                "/v1/benchmarks", json={"name": "bench", "items": items}, headers=headers
            )
            assert r.status_code == 201, r.text
            path = "/v1/benchmarks/bench"

            def up(k: int, vector: list[int], replace: bool) -> None:
                r = client.post(
                    f"{path}/results",
                    json={"model": "org/m", "correct": vector},
                    params={"replace": "true"} if replace else None,
                    headers=headers,
                )
                assert r.status_code in (200, 201), r.text

            up(0, rows[0], False)
            has_restore = (
                client.post(f"{path}/models/org/m/restore", headers=headers).status_code
                in (
                    200,
                    404,
                )
                and "restore" in client.get("/openapi.json").text
            )
            up(0, rows[0], True)
            cases = {
                "read_models": lambda k: client.get(f"{path}/models", headers=headers),
                "upload_unchanged": lambda k: up(k, rows[0], False),
                "upload_replace": lambda k: up(k, rows[k % 2], True),
            }
            if has_restore:

                def delete_restore(k: int) -> None:
                    assert client.delete(f"{path}/models/org/m", headers=headers).status_code == 204
                    r = client.post(f"{path}/models/org/m/restore", headers=headers)
                    assert r.status_code == 200, r.text

                cases["delete_restore"] = delete_restore
            print(f"code: {args.code.resolve()}  python {platform.python_version()}")
            print("| case | requests | median ms | p90 ms |")
            print("| --- | ---: | ---: | ---: |")
            for name, fn in cases.items():
                for k in range(5):
                    fn(k)  # warm up
                ms = _timed(fn, repeats)
                print(f"| {name} | {repeats} | {np.median(ms):.2f} | {np.percentile(ms, 90):.2f} |")
        app.state.engine.dispose()


if __name__ == "__main__":
    os.environ.setdefault("ENVIRONMENT", "local")
    main()
