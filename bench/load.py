"""Load (issue 8): reads at a constant rate, upload throughput, reads during an analysis, profile.

The stack is the production shape on one machine: uvicorn with ``--workers 2`` (auth on, an
admin key on every request) on Postgres (a scratch database on 127.0.0.1:5432, created,
migrated and dropped) and Redis (a private ``redis-server`` on a free port), one Celery worker.
GPQA is loaded (420 models x 448 items, ``$BENCHSLICE_SHARED_DATA/gpqa.npz``) with one stored
random 25-item subset.

Load generator: open loop at a constant rate (wrk2-style; no coordinated omission): request i
is scheduled at ``t0 + i / rate`` and its latency runs from that scheduled time to the end of
its response, on a minimal keep-alive HTTP/1.1 client on uvloop (``bench/api_latency.py``,
reused here with an ``Authorization`` header). Phases:

1. ``subset_json`` (GET /v1/subsets/{id}) and ``verdict_random`` (GET
   /v1/benchmarks/{id}/verdict?size=25, 50 pairs rotating) at ``--rate`` for ``--seconds`` each;
2. uploads: ``--uploads`` new result sets (448 items, columnar JSON) posted by ``--upload-
   concurrency`` concurrent clients: result sets/s and per-request latency;
3. the same reads again while an MDAD analysis of GPQA runs in the worker (random +
   anchor_points, the paper's protocol, ``--analysis-runs`` runs so that it outlasts both
   cases; cancelled afterwards); the job's progress is shown before/after each case;
4. a py-spy profile (``--profile-seconds``) of both uvicorn workers under the verdict load,
   summarised by package (self time) and by the hottest application functions (inclusive).

Usage: .venv/bin/python bench/load.py [--quick] [--rate 200] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.api_latency import _Pool, _run, load_gpqa, scratch_database  # noqa: E402
from tests.support.procs import ApiServer, PrivateRedis, Worker, service_env  # noqa: E402
from tests.support.stack import create_key  # noqa: E402

REQUEST_TIMEOUT = 30.0  # seconds; a request without an answer by then counts as an error


class AuthPool(_Pool):
    """``_Pool`` sending ``Authorization: Bearer <key>`` on every request."""

    def __init__(self, host: str, port: int, key: str, limit: int = 256) -> None:
        super().__init__(host, port, limit)
        self.headers = f"Authorization: Bearer {key}\r\n"


async def drive(
    base: str, key: str, paths: list[str], rate: float, seconds: float
) -> tuple[np.ndarray, int]:
    """Open loop at ``rate``; latency (ms) from each request's scheduled send time."""
    host, port = base.removeprefix("http://").split(":")
    pool = AuthPool(host, int(port), key)
    n = int(rate * seconds)
    lat = np.full(n, np.nan)
    errors = 0
    t0 = time.perf_counter() + 0.05

    async def one(i: int) -> None:
        nonlocal errors
        scheduled = t0 + i / rate
        try:
            status = await asyncio.wait_for(pool.get(paths[i % len(paths)]), REQUEST_TIMEOUT)
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            status = -1  # refused, reset or no answer within REQUEST_TIMEOUT: an error
        lat[i] = time.perf_counter() - scheduled
        if status != 200:
            errors += 1

    tasks = []
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    pool.close()
    return lat * 1000.0, errors


def row(case: str, rate: float, lat: np.ndarray, errors: int) -> str:
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    return (
        f"| {case} | {rate:g}/s x {lat.size} | {p50:.1f} | {p95:.1f} | {p99:.1f} | "
        f"{lat.max():.1f} | {errors} ({100.0 * errors / lat.size:.2f} %) |"
    )


async def uploads(
    base: str, key: str, vid: str, n: int, n_items: int, concurrency: int
) -> tuple[float, np.ndarray, collections.Counter]:
    """``n`` new models' results, ``concurrency`` requests in flight; (seconds, latencies, codes)."""
    import httpx

    rng = np.random.default_rng(8)
    bodies = [
        {
            "model": f"load/model-{os.getpid()}-{i:05d}",
            "correct": rng.integers(0, 2, n_items).tolist(),
        }
        for i in range(n)
    ]
    lat = np.empty(n)
    codes: collections.Counter = collections.Counter()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)
    headers = {"Authorization": f"Bearer {key}"}

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            t = time.perf_counter()
            r = await client.post(f"/v1/benchmarks/{vid}/results", json=bodies[i])
            lat[i] = (time.perf_counter() - t) * 1000.0
            codes[r.status_code] += 1

    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return time.perf_counter() - t0, lat, codes


def profile(parent_pid: int, seconds: float, out: Path) -> str:
    """py-spy (raw collapsed stacks) of uvicorn's worker processes; a short text summary."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        return "py-spy not installed (`pip install py-spy`): no profile"
    subprocess.run(
        [
            exe,
            "record",
            "--pid",
            str(parent_pid),
            "--subprocesses",
            "--duration",
            str(int(seconds)),
            "--rate",
            "100",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        check=True,
        capture_output=True,
        timeout=4 * seconds + 120,
    )
    by_package: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    states: collections.Counter = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        state = _state(frames)
        states[state] += n
        if state != "cpu":
            continue
        by_package[_package(frames[-1])] += n
        for frame in {_short(f) for f in frames if "/app/" in f or "(app/" in f}:
            inclusive[frame] += n
    sampled = sum(states.values())
    busy = states["cpu"] or 1
    lines = [
        f"samples: {sampled} over both processes' threads; "
        + ", ".join(f"{k} {100.0 * v / sampled:.1f} %" for k, v in states.most_common()),
        "on-CPU samples, self time by package:",
    ]
    lines += [f"  {k:<24} {100.0 * v / busy:5.1f} %" for k, v in by_package.most_common(12)]
    lines.append("on-CPU samples under each application function (inclusive):")
    lines += [f"  {k:<64} {100.0 * v / busy:5.1f} %" for k, v in inclusive.most_common(15)]
    return "\n".join(lines)


_IDLE_LEAVES = ("threading.py", "queue.py", "selectors.py", "runners.py", "connection.py")


def _state(frames: list[str]) -> str:
    """``idle`` (a thread or the loop waiting for work), ``postgres`` (waiting on a query's
    answer) or ``cpu``."""
    leaf = frames[-1]
    if "psycopg" in leaf and ("wait" in leaf or "_connection_base" in leaf):
        return "postgres"
    if any(f"/{name}:" in leaf or f"({name}:" in leaf for name in _IDLE_LEAVES):
        return "postgres" if any("psycopg" in f for f in frames) else "idle"
    return "cpu"


def _package(frame: str) -> str:
    """Top-level package of a py-spy frame ``func (pkg/module.py:line)``; ``app.<module>`` for
    ours, ``stdlib`` for a bare file name."""
    if "(" not in frame:
        return frame[:24]
    where = frame.rsplit("(", 1)[1].split(":", 1)[0]
    if "site-packages/" in where:
        where = where.split("site-packages/", 1)[1]
    if "/app/" in where or where.startswith("app/"):
        return "app." + where.split("app/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/" not in where:
        return "stdlib"
    top = where.split("/", 1)[0]
    return "stdlib" if top.startswith(("python3", "asyncio", "concurrent", "json")) else top


def _short(frame: str) -> str:
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split('/app/', 1)[-1].split(':')[0]})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 s per read case, 40 uploads")
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--uploads", type=int, default=200)
    ap.add_argument("--upload-concurrency", type=int, default=8)
    ap.add_argument("--profile-seconds", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    ap.add_argument(
        "--analysis-runs", type=int, default=1000, help="protocol runs of the background analysis"
    )
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.uploads, args.profile_seconds = 10.0, 40, 8.0

    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start",
        file=sys.stderr,
    )
    with gpqa_stack("load") as (env, key, vid, sid, pairs):
        api = ApiServer(env, workers=args.workers, log_level="warning")
        worker = Worker(env, f"load-{os.getpid()}")
        worker.start()
        api.start()
        try:
            _phases(api.url, key, vid, sid, pairs, args, api)
        finally:
            api.stop()
            worker.stop()
    return 0


@contextlib.contextmanager
def gpqa_stack(name: str):
    """A private Redis and a scratch Postgres database holding REAL GPQA (stored once, timed on
    stderr); yields the service settings (auth on, a private queue, 30-minute job limits), an
    admin key, the version id, a subset id and 50 model pairs."""
    redis = PrivateRedis()
    redis.start()
    try:
        with scratch_database() as url:
            t = time.perf_counter()
            vid, sid, pairs = load_gpqa(url)
            key = create_key(url, ["admin"], name=name)
            print(f"# GPQA stored: {time.perf_counter() - t:.1f} s", file=sys.stderr)
            env = service_env(
                DATABASE_URL=url,
                BROKER_URL=redis.url,
                CELERY_QUEUE=f"benchslice-{name}-{os.getpid()}",
                AUTH_ENABLED="true",
                LOG_LEVEL="WARNING",
                JOB_SOFT_TIME_LIMIT="1800",
                JOB_HARD_TIME_LIMIT="1860",
            )
            yield env, key, vid, sid, pairs
    finally:
        redis.stop()


class AnalysesRunning:
    """Keeps an MDAD analysis of GPQA running in the worker for the duration of a ``with``
    block: one after the other (random + anchor_points, the paper's protocol), the last one
    cancelled at exit. ``summary()`` says how busy the worker was."""

    def __init__(self, base: str, headers: dict[str, str], vid: str, runs: int) -> None:
        import threading

        import httpx

        self.client = httpx.Client(base_url=base, headers=headers, timeout=60)
        self.vid, self.runs = vid, runs
        self.stop = threading.Event()
        self.polls = self.running = self.finished = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> AnalysesRunning:
        self._submit()
        deadline = time.monotonic() + 120
        while self.client.get(self.location).json()["status"] != "running":
            assert time.monotonic() < deadline, "analysis did not start"
            time.sleep(0.2)
        self.thread.start()
        return self

    def _submit(self) -> None:
        body = {
            "methods": ["random", "anchor_points"],
            "sizes": [10, 25, 50, 100],
            "runs": self.runs,
            "n_sources": 300,
            "n_targets": 50,
            "seed": self.finished + 1,
        }
        r = self.client.post(f"/v1/benchmarks/{self.vid}/analyses", json=body)
        assert r.status_code == 202, r.text
        self.location, self.job_id = r.headers["location"], r.json()["job_id"]

    def _loop(self) -> None:
        while not self.stop.wait(0.5):
            status = self.client.get(self.location).json()["status"]
            self.polls += 1
            self.running += status == "running"
            if status in ("succeeded", "failed", "cancelled"):
                self.finished += status == "succeeded"
                self._submit()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.client.post(f"/v1/jobs/{self.job_id}/cancel")
        self.client.close()

    def summary(self) -> str:
        share = 100.0 * self.running / max(self.polls, 1)
        return f"worker running an analysis {share:.0f} % of the time, {self.finished} finished"


def warm(base: str, headers: dict[str, str], paths: list[str], workers: int) -> None:
    """Every path on fresh connections, so that each uvicorn process fills its caches."""
    import httpx

    for _ in range(4 * workers):
        for path in paths:
            r = httpx.get(base + path, headers={**headers, "Connection": "close"}, timeout=300)
            assert r.status_code == 200, (path, r.text)


def _phases(base, key, vid, sid, pairs, args, api) -> None:

    headers = {"Authorization": f"Bearer {key}"}
    subset = [f"/v1/subsets/{sid}"]
    verdicts = [f"/v1/benchmarks/{vid}/verdict?model_a={a}&model_b={b}&size=25" for a, b in pairs]
    t = time.perf_counter()
    warm(base, headers, [*subset, *verdicts], args.workers)
    print(f"# first verdicts, caches cold: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    cases = [("subset_json", subset), ("verdict_random", verdicts)]
    print("| case | load | p50 ms | p95 ms | p99 ms | max ms | errors |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for case, paths in cases:
        lat, errors = _run(drive(base, key, paths, args.rate, args.seconds))
        print(row(case, args.rate, lat, errors), flush=True)

    secs, lat, codes = asyncio.run(
        uploads(base, key, vid, args.uploads, 448, args.upload_concurrency)
    )
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    print(
        f"| upload (448-item result sets, {args.upload_concurrency} in flight) | "
        f"{args.uploads} sets in {secs:.1f} s = **{args.uploads / secs:.1f} sets/s** | "
        f"{p50:.0f} | {p95:.0f} | {p99:.0f} | {lat.max():.0f} | "
        f"{sum(v for k, v in codes.items() if k != 201)} (codes {dict(codes)}) |",
        flush=True,
    )

    # New results change the stamp: each process rebuilds its matrix and exact curves once.
    t = time.perf_counter()
    warm(base, headers, [*subset, *verdicts], args.workers)
    print(f"# re-warm after the uploads: {time.perf_counter() - t:.1f} s", file=sys.stderr)

    for case, paths in cases:
        with AnalysesRunning(base, headers, vid, args.analysis_runs) as busy:
            lat, errors = _run(drive(base, key, paths, args.rate, args.seconds))
        print(
            row(f"{case}, analysis running", args.rate, lat, errors)
            + f" <!-- {busy.summary()} -->",
            flush=True,
        )

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.txt"
        loop_done: list[str] = []

        async def load_while_profiling() -> None:
            lat, errors = await drive(base, key, verdicts, args.rate, args.profile_seconds + 4)
            loop_done.append(row("verdict_random (profiled)", args.rate, lat, errors))

        import threading

        th = threading.Thread(target=lambda: _run(load_while_profiling()))
        th.start()
        time.sleep(2)
        summary = profile(api.proc.pid, args.profile_seconds, out)
        th.join()
        print(*loop_done, sep="\n")
        print("\n```text\n" + summary + "\n```")


if __name__ == "__main__":
    raise SystemExit(main())
