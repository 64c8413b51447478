"""An MDAD analysis spread over Celery worker processes: wall time and worker CPU at 1, 2, ... workers.

The path a user with more machines takes: every Celery worker process consuming the service's queue
helps an analysis job (``app/services/reliability/analysis_jobs.py``): the job's worker splits the
runs into chunks (``analysis_chunks`` rows), asks for helper tasks, and each process locks a pending
chunk (``FOR UPDATE SKIP LOCKED``), computes it and stores it; the job combines them. Adding a
machine = starting ``celery -A worker.celery_app worker`` there against the same Postgres and Redis.

Stack: a scratch Postgres database (REAL GPQA, 420 models x 448 items, stored once), a private
Redis, one API process, and for each ``--workers`` value that many ``celery worker`` processes
(prefork, concurrency 1 each). Per value: one analysis POSTed through the API, polled until it
succeeds; wall = submit to succeeded; CPU = user + system seconds of every worker process (from
``/proc``); the MDAD cells are checked equal across worker counts (results do not depend on who ran
which chunk).

Usage::

    .venv/bin/python bench/bench_analysis_workers.py                   # 1 and 2 workers
    .venv/bin/python bench/bench_analysis_workers.py --workers 1 2 4 --runs 50
    .venv/bin/python bench/bench_analysis_workers.py --quick             # 10 runs
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.load import gpqa_stack  # noqa: E402
from tests.support.procs import ApiServer, Worker  # noqa: E402

METHODS = ["random", "subtask_stratified", "anchor_points", "tiny_benchmarks", "dpp"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: set[int]) -> float:
    """User + system CPU seconds of the live processes ``pids`` (children not yet reaped excluded)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / CLK_TCK


def one_analysis(base: str, key: str, vid: str, body: dict) -> tuple[float, dict]:
    import httpx

    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        t0 = time.perf_counter()
        r = c.post(f"/v1/benchmarks/{vid}/analyses", json=body)
        assert r.status_code == 202, r.text
        location = r.headers["location"]
        while True:
            payload = c.get(location).json()
            if payload["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.2)
        wall = time.perf_counter() - t0
    assert payload["status"] == "succeeded", payload
    return wall, payload


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 25, 50, 100, 200])
    ap.add_argument("--quick", action="store_true", help="10 runs")
    args = ap.parse_args()
    if args.quick:
        args.runs = 10
    with gpqa_stack("workers") as (env, key, vid, _, _):
        api = ApiServer(env, workers=1, log_level="warning")
        api.start()
        cells = {}
        try:
            for k in args.workers:
                workers = [Worker(env, f"w{i}-{os.getpid()}") for i in range(k)]
                for w in workers:
                    w.start()
                try:
                    pids = set().union(*(w.pids() for w in workers))
                    load = os.getloadavg()[0]
                    cpu0 = cpu_seconds(pids)
                    body = {
                        "methods": METHODS,
                        "sizes": args.sizes,
                        "runs": args.runs,
                        "n_sources": 300,
                        "n_targets": 50,
                        "seed": 0,
                    }
                    wall, payload = one_analysis(api.url, key, vid, body)
                    cpu = cpu_seconds(pids) - cpu0
                finally:
                    for w in workers:
                        w.stop()
                result = payload["result"]
                cells[k] = result["mdad"]
                print(
                    f"| GPQA analysis, {len(METHODS)} methods x {len(args.sizes)} sizes x "
                    f"{args.runs} runs | {k} worker process(es) | {wall:.1f} s wall | "
                    f"worker CPU {cpu:.1f} s | chunks run by {len(set(result['executed_by']))} "
                    f"process(es) | load {load:.1f} |",
                    flush=True,
                )
        finally:
            api.stop()
        first = cells[args.workers[0]]
        same = all(c == first for c in cells.values())
        print(f"# MDAD cells equal across worker counts: {same}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
