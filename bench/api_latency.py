"""API latency (issue 6): subset fetch and random pair verdict at a fixed request rate.

Loads the real GPQA matrix (420 models x 448 items, ``$BENCHSLICE_SHARED_DATA/gpqa.npz``) into a
private Postgres database (created, migrated to head, dropped at the end), stores one random
subset of 25 items through the service, then starts a real uvicorn server (one process) on
loopback and drives it open-loop at ``--rate`` requests/s for ``--seconds`` per case with an
asyncio httpx client (keep-alive pool). Latency is measured from each request's *scheduled*
send time to the end of its response (so client-side queueing counts: no coordinated omission).
The load generator is a minimal keep-alive HTTP/1.1 client on uvloop (httpx costs ~1 ms of CPU per
request on this machine, which would compete with the server for the same two cores).

Targets: subset fetch p99 < 20 ms and random verdict p99 < 50 ms at 200 requests/s.

Cases (each first sequentially, one request at a time, then open-loop at ``--rate``):
  healthz             baseline: the cheapest route (no database), same server and client
  plan_random_*       GET /v1/benchmarks/{id}/plan?gap=0.05 (cold: exact curves at the bracketing
                      sizes over all 87,990 model pairs; warm: cached)
  warmup_verdict      first verdict at size 25: decodes the matrix and computes the exact
                      benchmark-wide MDAD of random 25-subsets (cached afterwards)
  subset_json         GET /v1/subsets/{id}
  subset_lm_eval      GET /v1/subsets/{id}?format=lm-eval
  verdict_random      GET /v1/benchmarks/{id}/verdict?model_a=&model_b=&size=25 (pairs rotate)

Usage: .venv/bin/python bench/api_latency.py [--quick] [--rate 200] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import scratch_database, start_uvicorn  # noqa: E402

DATA = Path(os.environ.get("BENCHSLICE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def load_gpqa(url: str) -> tuple[str, str, list[tuple[str, str]]]:
    """Store GPQA (all models) and a random 25-item subset; return (version id, subset id,
    model pairs to ask verdicts for)."""
    from app.db.session import make_engine, make_sessionmaker
    from app.ingest import parse_columnar
    from app.schemas.results import ModelCreate
    from app.services.catalog.benchmarks import create_version
    from app.services.catalog.results import store_results
    from app.services.selection import subsets
    from app.settings import Settings

    with np.load(DATA / "gpqa.npz", allow_pickle=False) as npz:
        correct, ids, models = npz["correct"], npz["item_ids"], npz["models"]
    engine = make_engine(Settings(database_url=url))
    with make_sessionmaker(engine)() as session:
        version, _ = create_version(
            session, "gpqa", [str(i) for i in ids], ["gpqa_main"] * len(ids)
        )
        names = [str(m) for m in models]
        for name, row in zip(names, correct, strict=True):  # setup, not timed
            store_results(session, version.id, ModelCreate(name=name), parse_columnar(row.tolist()))
        req = subsets.resolve_request(session, version.id, "random", 25, {}, 0, None)
        subset, _ = subsets.build_subset(session, req, None)
        session.commit()
        vid, sid = str(version.id), subset.id
    engine.dispose()
    rng = np.random.default_rng(0)
    pairs = [tuple(names[j] for j in rng.choice(len(names), 2, replace=False)) for _ in range(50)]
    return vid, sid, pairs


@contextlib.contextmanager
def server(url: str, workers: int = 1) -> Iterator[str]:
    env = {**os.environ, "DATABASE_URL": url, "AUTH_ENABLED": "false", "ENVIRONMENT": "test"}
    proc, base = start_uvicorn(env, workers)
    try:
        import httpx

        for _ in range(300):
            try:
                if httpx.get(base + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


class _Pool:
    """Keep-alive HTTP/1.1 connections with a minimal response reader (Content-Length bodies).

    A Python load generator shares the machine with the server; httpx costs ~1 ms of CPU per
    request, this raw client a few tens of microseconds, so the figures measure the server.
    """

    def __init__(self, host: str, port: int, limit: int = 64) -> None:
        self.host, self.port, self.limit = host, port, limit
        self.headers = ""  # extra request header lines, each ending in CRLF
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.opened = 0
        self.freed = asyncio.Condition()

    async def get(self, path: str) -> int:
        conn = await self._acquire()
        try:
            status = await self._exchange(conn, path)
        except (asyncio.IncompleteReadError, ConnectionError):
            # the server closed an idle keep-alive connection: retry once on a fresh one
            conn[1].close()
            conn = await asyncio.open_connection(self.host, self.port)
            status = await self._exchange(conn, path)
        async with self.freed:
            self.idle.append(conn)
            self.freed.notify()
        return status

    async def _exchange(self, conn, path: str) -> int:
        reader, writer = conn
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n{self.headers}\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        if length:
            await reader.readexactly(length)
        return status

    async def _acquire(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with self.freed:
            while not self.idle and self.opened >= self.limit:
                await self.freed.wait()
            if self.idle:
                return self.idle.pop()
            self.opened += 1
        return await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


async def drive(base: str, paths: list[str], rate: float, seconds: float) -> tuple[np.ndarray, int]:
    """Open loop: request i is sent at t0 + i / rate; latency from that scheduled time."""
    host, port = base.removeprefix("http://").split(":")
    pool = _Pool(host, int(port))
    n = int(rate * seconds)
    lat = np.full(n, np.nan)
    errors = 0
    t0 = time.perf_counter() + 0.05

    async def one(i: int) -> None:
        nonlocal errors
        scheduled = t0 + i / rate
        status = await pool.get(paths[i % len(paths)])
        lat[i] = time.perf_counter() - scheduled
        if status != 200:
            errors += 1

    tasks = []
    for i in range(n):  # the schedule itself: one task per request
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    pool.close()
    return lat * 1000.0, errors


def _run(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvicorn[standard] brings uvloop
        return asyncio.run(coro)


def row(case: str, rate: float, lat: np.ndarray, errors: int) -> str:
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    return (
        f"| {case} | {rate:g} req/s x {lat.size} | {p50:.1f} | {p95:.1f} | {p99:.1f} | "
        f"{lat.max():.1f} | {errors} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 s per case")
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument("--repeats", type=int, default=3, help="open-loop runs per case")
    args = ap.parse_args()
    seconds = 2.0 if args.quick else args.seconds
    if args.quick:
        args.repeats = 1
    import httpx

    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}, numpy {np.__version__}",
        file=sys.stderr,
    )
    with scratch_database("benchslice_latency") as url:
        t = time.perf_counter()
        vid, sid, pairs = load_gpqa(url)
        print(
            f"# setup (420 models stored, subset built): {time.perf_counter() - t:.1f} s",
            file=sys.stderr,
        )
        with server(url, args.workers) as base:
            verdicts = [
                f"/v1/benchmarks/{vid}/verdict?model_a={a}&model_b={b}&size=25" for a, b in pairs
            ]
            t = time.perf_counter()
            first = httpx.get(base + verdicts[0], timeout=300)
            assert first.status_code == 200, first.text
            warm = (time.perf_counter() - t) * 1000
            for path in (f"/v1/subsets/{sid}", f"/v1/subsets/{sid}?format=lm-eval", *verdicts):
                assert httpx.get(base + path, timeout=60).status_code == 200, path
            plan = f"/v1/benchmarks/{vid}/plan?gap=0.05&method=random"
            t = time.perf_counter()
            assert httpx.get(base + plan, timeout=600).status_code == 200
            plan_cold = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            assert httpx.get(base + plan, timeout=600).status_code == 200
            plan_warm = (time.perf_counter() - t) * 1000
            print("| case | load | p50 ms | p95 ms | p99 ms | max ms | errors |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            print(f"| warmup_verdict | 1 request | {warm:.0f} | | | | 0 |")
            print(f"| plan_random_cold (gap 0.05) | 1 request | {plan_cold:.0f} | | | | 0 |")
            print(f"| plan_random_warm (gap 0.05) | 1 request | {plan_warm:.0f} | | | | 0 |")
            cases = [
                ("healthz (baseline: no DB)", ["/healthz"]),
                ("subset_json", [f"/v1/subsets/{sid}"]),
                ("subset_lm_eval", [f"/v1/subsets/{sid}?format=lm-eval"]),
                ("verdict_random", verdicts),
            ]
            with httpx.Client(base_url=base) as seq:
                for case, paths in cases:  # one request at a time: the service time
                    lat = np.empty(200)
                    for i in range(lat.size):
                        t = time.perf_counter()
                        seq.get(paths[i % len(paths)])
                        lat[i] = (time.perf_counter() - t) * 1000.0
                    print(
                        f"| {case} | sequential x {lat.size} | "
                        + " | ".join(f"{x:.1f}" for x in np.percentile(lat, [50, 95, 99]))
                        + f" | {lat.max():.1f} | 0 |",
                        flush=True,
                    )
            for rep in range(args.repeats):  # interleaved, so a stall of the machine hits one
                for case, paths in cases:
                    lat, errors = _run(drive(base, paths, args.rate, seconds))
                    print(row(f"{case} (run {rep + 1})", args.rate, lat, errors), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
