"""Sessions under load (issue 16, part 3): 50 sessions stepping at once against one service, with
leaderboard and page reads at the same time. Targets: step p99 < 100 ms, 0 errors, every
session's history complete.

Stack: two API processes (``uvicorn``, one process each, auth on, an API key on every request)
on two loopback ports, the client going round robin between them (a session's consecutive
batches land on different processes); Postgres (a scratch database on 127.0.0.1:5432, created,
migrated, dropped) and a private ``redis-server`` as broker (no job is queued here). Data: the
real GPQA matrix (``$BENCHSLICE_SHARED_DATA/gpqa.npz``), rows ``[0, 420 - sessions)`` stored as
benchmark ``gpqa``; the other rows are the models the sessions evaluate (held out, posted batch by
batch from their real GPQA results), each against the stored model nearest in accuracy (close
pairs: sessions run many batches), policy ``random``, goal ``decide``, batch 10.

Load, one asyncio client (a minimal keep-alive HTTP/1.1 client on uvloop, :class:`RawPool`), for
``--seconds``:

* ``--sessions`` session loops. Each posts its open batch every ``--step-interval`` seconds (its
  schedule: a CI job handing in one batch per interval; a step that answers late delays only
  that session's next one, the lag is reported). Session starts are spread over the first
  interval; a session that closes (decided/exhausted) is replaced by a new one for the same
  model with the next seed, created at the client's next turn (each client sends one request
  per interval: a create or a batch). Step latency: from
  sending the batch to its answer.
* reads, open loop at ``--read-rate`` requests/s (request i scheduled at ``t0 + i / rate``,
  latency from that time, so a stalled server is not hidden): alternately
  ``GET /v1/benchmarks/gpqa/leaderboard`` and ``GET /ui/benchmarks/gpqa`` (key cookie). Both are
  requested once per process before the timed phase (cold times reported apart).

Afterwards every session created is read back: its history must hold exactly the batches the
client saw applied (steps 1..n, items_used 10, 20, ...), and its state the last one answered.
Errors: any status other than 200/201, transport error or timeout (``REQUEST_TIMEOUT``). A 503
is what an overloaded process answers at once past ``MAX_REQUESTS_IN_FLIGHT`` (default 32, see
app/api/admission.py) instead of queueing: counted as an error, listed by status.

Usage: .venv/bin/python bench/bench_session_load.py [--quick] [--sessions 50] [--seconds 60]
       [--step-interval 1.0] [--read-rate 50]
Bounded: loopback only, every loop ends at ``--seconds`` (requests time out after 30 s).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import browser_session, scratch_database  # noqa: E402
from tests.support.procs import ApiServer, PrivateRedis, service_env  # noqa: E402
from tests.support.stack import create_key  # noqa: E402

REQUEST_TIMEOUT = 30.0
CHECK_TIMEOUT = 180.0  # read-back after the load: waits out the server's backlog
BATCH = 10
TARGET_P99_MS = 100.0


def gpqa() -> dict[str, np.ndarray]:
    base = Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")
    with np.load(base / "gpqa.npz", allow_pickle=False) as d:
        return {k: d[k] for k in ("correct", "item_ids", "models")}


def load(url: str, data: dict[str, np.ndarray], n_stored: int) -> None:
    """GPQA rows ``[0, n_stored)`` as benchmark ``gpqa`` (setup, not timed)."""
    from app.db.session import make_engine, make_sessionmaker
    from app.ingest import parse_columnar
    from app.schemas.results import ModelCreate
    from app.services.catalog.benchmarks import create_version
    from app.services.catalog.results import store_results
    from app.settings import Settings

    ids = [str(x) for x in data["item_ids"]]
    engine = make_engine(Settings(database_url=url))
    try:
        with make_sessionmaker(engine)() as s:
            version, _ = create_version(s, "gpqa", ids, ["gpqa_main"] * len(ids))
            for i in range(n_stored):
                row = data["correct"][i].astype(np.uint8).tolist()
                store_results(
                    s, version.id, ModelCreate(name=str(data["models"][i])), parse_columnar(row)
                )
            s.commit()
    finally:
        engine.dispose()


def pct(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    a = np.asarray(xs)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return f"{a.size} | {p50:.1f} | {p90:.1f} | {p99:.1f} | {a.max():.1f}"


@dataclass
class Tally:
    steps: list[float] = field(default_factory=list)  # ms
    creations: list[float] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)  # ms a step was sent after its schedule
    reads: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter = field(default_factory=Counter)
    per_process: Counter = field(default_factory=Counter)
    # session id -> (steps the client saw applied, last state answered, whether the last post
    # got no answer: a batch sent but not acknowledged may or may not have been applied)
    sessions: dict[str, tuple[int, str, bool]] = field(default_factory=dict)
    gc_pauses: list[float] = field(default_factory=list)  # ms, the client's collections > 5 ms
    _gc_start: float = 0.0

    def gc_callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif (ms := 1000 * (time.perf_counter() - self._gc_start)) > 5:
            self.gc_pauses.append(ms)


class Answer(NamedTuple):
    status: int
    replayed: bool
    body: bytes


class RawPool:
    """Keep-alive HTTP/1.1 connections to one server with a minimal response reader.

    The load generator shares the machine with the servers: httpx's async pool costs about a
    millisecond of CPU per request and, with thousands of requests queued behind a slow server,
    much more (it ran this client at a full core and delayed its own schedule by minutes in a
    first attempt); this client costs tens of microseconds. A request that has no answer within
    ``REQUEST_TIMEOUT`` raises ``TimeoutError`` and its connection is dropped.
    """

    def __init__(self, base: str, headers: str, limit: int = 128) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.host, self.port, self.limit = host, int(port), limit
        self.headers = headers  # extra header lines, each ending in CRLF
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.opened = 0
        self.freed = asyncio.Condition()

    async def request(self, method: str, path: str, body: bytes = b"", extra: str = "") -> Answer:
        async with self.freed:
            while not self.idle and self.opened >= self.limit:
                await self.freed.wait()
            conn = self.idle.pop() if self.idle else None
            if conn is None:
                self.opened += 1
        keep = False
        try:
            if conn is None or conn[0].at_eof():
                conn = await asyncio.open_connection(self.host, self.port)
            try:
                answer = await asyncio.wait_for(
                    self._exchange(conn, method, path, body, extra), REQUEST_TIMEOUT
                )
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise
                # the server closed an idle keep-alive connection before reading: send again
                conn[1].close()
                conn = await asyncio.open_connection(self.host, self.port)
                answer = await asyncio.wait_for(
                    self._exchange(conn, method, path, body, extra), REQUEST_TIMEOUT
                )
            keep = True
            return answer
        finally:
            async with self.freed:
                if keep and conn is not None:
                    self.idle.append(conn)
                else:
                    if conn is not None:
                        conn[1].close()
                    self.opened -= 1
                self.freed.notify()

    async def _exchange(self, conn, method: str, path: str, body: bytes, extra: str) -> Answer:
        reader, writer = conn
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n{self.headers}{extra}"
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + body)
        raw = await reader.readuntil(b"\r\n\r\n")
        status = int(raw[9:12])
        length, chunked, replayed = 0, False, False
        for line in raw.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"idempotency-replayed":
                replayed = value.strip() == b"true"
        if chunked:
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                data = await reader.readexactly(size + 2)
                if size == 0:
                    break
                parts.append(data[:-2])
            return Answer(status, replayed, b"".join(parts))
        return Answer(status, replayed, await reader.readexactly(length) if length else b"")

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


ERRORS = (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError)


async def run_load(
    args, bases: list[str], key: str, session_id: str, data, n_stored: int, tally: Tally
) -> None:
    correct = data["correct"].astype(float)
    names = [str(m) for m in data["models"]]
    acc = correct.mean(axis=1)
    pools = [RawPool(b, f"Authorization: Bearer {key}\r\n") for b in bases]
    cookie = f"Cookie: benchslice_session={session_id}\r\n"
    turn = [0]

    def pick() -> tuple[int, RawPool]:
        turn[0] += 1
        i = turn[0] % len(pools)
        return i, pools[i]

    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.5
    t_end = t0 + args.seconds

    async def session_loop(k: int) -> None:
        row = n_stored + k
        truth = correct[row]
        baseline = names[int(np.argmin(np.abs(acc[:n_stored] - acc[row])))]
        rng = np.random.default_rng(k)
        seed = 1000 * k
        due = t0 + float(rng.uniform(0, max(args.step_interval, 0.01)))
        body: dict | None = None
        applied = 0
        retrying = False
        await asyncio.sleep(max(0.0, due - loop.time()))  # creations spread like the steps
        due += args.step_interval
        while True:
            now = loop.time()
            if now >= t_end:
                return
            if body is None or body["state"] != "open":
                if body is not None:  # a closed session's replacement takes the client's next turn
                    if due > now:
                        await asyncio.sleep(due - now)
                        if loop.time() >= t_end:
                            return
                    due += args.step_interval
                spec = {
                    "model": f"held-out/{names[row]}",
                    "baseline": baseline,
                    "batch_size": BATCH,
                    "seed": seed,
                }
                seed += 1
                _, pool = pick()
                t = time.perf_counter()
                try:
                    r = await pool.request(
                        "POST", "/v1/benchmarks/gpqa/sessions", json.dumps(spec).encode()
                    )
                except ERRORS as exc:
                    tally.errors[f"create {type(exc).__name__}"] += 1
                    await asyncio.sleep(0.1)
                    continue
                tally.creations.append((time.perf_counter() - t) * 1000)
                if r.status != 201:
                    tally.errors[f"create {r.status}"] += 1
                    await asyncio.sleep(0.1)
                    continue
                body, applied = json.loads(r.body), 0
                tally.sessions[body["id"]] = (0, body["state"], False)
                now = loop.time()
            if due > now:
                await asyncio.sleep(due - now)
                if loop.time() >= t_end:
                    return
            tally.lag.append(max(0.0, loop.time() - due) * 1000)
            payload = {
                "model": body["model"],
                "item_ids": [it["item_id"] for it in body["next_items"]],
                "correct": [truth[it["position"]] for it in body["next_items"]],
            }
            i, pool = pick()
            t = time.perf_counter()
            try:
                r = await pool.request(
                    "POST", f"/v1/sessions/{body['id']}/results", json.dumps(payload).encode()
                )
            except ERRORS as exc:
                tally.errors[f"step {type(exc).__name__}"] += 1
                due = loop.time() + args.step_interval
                retrying = True
                tally.sessions[body["id"]] = (applied, body["state"], True)
                continue  # the same batch again at the next turn (a retry)
            tally.steps.append((time.perf_counter() - t) * 1000)
            tally.per_process[i] += 1
            due += args.step_interval
            if r.status != 200:
                tally.errors[f"step {r.status}"] += 1
                continue
            new = json.loads(r.body)
            if new["step"] != applied + 1 or (r.replayed and not retrying):
                tally.errors["step not applied exactly once"] += 1
            body, applied, retrying = new, new["step"], False
            tally.sessions[body["id"]] = (applied, body["state"], False)

    async def reads() -> None:
        paths = ["/v1/benchmarks/gpqa/leaderboard", "/ui/benchmarks/gpqa"]
        tasks = []

        async def one(i: int, scheduled: float) -> None:
            path = paths[i % 2]
            pool = pools[(i // 2) % len(pools)]
            try:
                r = await pool.request("GET", path, extra=cookie if path.startswith("/ui") else "")
                code = str(r.status)
            except ERRORS as exc:
                code = type(exc).__name__
            tally.reads.setdefault(path, []).append((loop.time() - scheduled) * 1000)
            if code != "200":
                tally.errors[f"read {path} {code}"] += 1

        n = int(args.read_rate * args.seconds)
        for i in range(n):
            scheduled = t0 + i / args.read_rate
            delay = scheduled - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, scheduled)))
        await asyncio.gather(*tasks)

    try:
        await asyncio.gather(reads(), *(session_loop(k) for k in range(args.sessions)))
    finally:
        for pool in pools:
            pool.close()


def run(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvicorn[standard] brings uvloop
        return asyncio.run(coro)


def check_histories(base: str, key: str, tally: Tally) -> tuple[int, list[str], float]:
    """Every session read back: history rows == batches the client saw applied (one more when
    its last post went unanswered), steps 1..n without gaps or repeats. Also the time until the
    first read-back answers (the server's backlog when the load stopped)."""
    import httpx

    bad = []
    t0 = time.perf_counter()
    drained = float("nan")
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=CHECK_TIMEOUT
    ) as c:
        for sid, (applied, state, unanswered) in tally.sessions.items():
            try:
                s = c.get(f"/v1/sessions/{sid}").json()
            except httpx.HTTPError as exc:
                bad.append(f"{sid}: read-back failed ({type(exc).__name__})")
                continue
            if drained != drained:  # nan: first answer
                drained = time.perf_counter() - t0
            hist, n = s["history"], s["step"]
            # the last unanswered post may have been applied after the client gave up
            ok = (
                ((n == applied and s["state"] == state) or (unanswered and n == applied + 1))
                and [h["step"] for h in hist] == list(range(1, n + 1))
                and [h["items_used"] for h in hist]
                == [min(BATCH * j, s["n_items"]) for j in range(1, n + 1)]
            )
            if not ok:
                bad.append(f"{sid}: client saw {applied} ({state}), server {n} {s['state']}")
    return len(tally.sessions), bad, drained


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--step-interval", type=float, default=1.0, help="seconds between batches")
    ap.add_argument("--read-rate", type=float, default=50.0, help="reads/s (leaderboard + page)")
    ap.add_argument("--quick", action="store_true", help="10 sessions, 10 s, 10 reads/s")
    args = ap.parse_args()
    if args.quick:
        args.sessions, args.seconds, args.read_rate = 10, 10.0, 10.0
    data = gpqa()
    n_stored = data["correct"].shape[0] - args.sessions
    load_before = os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    redis = PrivateRedis()
    redis.start()
    servers: list[ApiServer] = []
    try:
        with scratch_database("benchslice_bench_session_load") as url:
            t = time.perf_counter()
            load(url, data, n_stored)
            load_s = time.perf_counter() - t
            key = create_key(url, ["write"], name="bench")
            env = service_env(DATABASE_URL=url, BROKER_URL=redis.url, AUTH_ENABLED="true")
            for _ in range(2):
                servers.append(ApiServer(env, log_level="warning"))
                servers[-1].start()
            bases = [s.url for s in servers]
            import httpx

            session_id = browser_session(bases[0], key)  # the pages' cookie (not the key)
            cold: dict[str, list[float]] = {}
            for base in bases:
                with httpx.Client(base_url=base, timeout=120) as c:
                    for path in ("/v1/benchmarks/gpqa/leaderboard", "/ui/benchmarks/gpqa"):
                        t = time.perf_counter()
                        r = c.get(
                            path,
                            headers={"Authorization": f"Bearer {key}"},
                            cookies={"benchslice_session": session_id},
                        )
                        assert r.status_code == 200, (path, r.status_code, r.text[:500])
                        cold.setdefault(path, []).append((time.perf_counter() - t) * 1000)
            tally = Tally()
            cpu0 = [cpu_seconds(s.proc.pid) for s in servers]  # type: ignore[union-attr]
            # The client is the clock: a full collection over its ~200k objects paused it
            # 60-120 ms (every latency in flight looked that much slower, and the open-loop
            # reads then left in a burst). Freeze what setup made and log any pause left.
            gc.collect()
            gc.freeze()
            gc.callbacks.append(tally.gc_callback)
            t = time.perf_counter()
            try:
                run(run_load(args, bases, key, session_id, data, n_stored, tally))
            finally:
                gc.callbacks.remove(tally.gc_callback)
            wall = time.perf_counter() - t
            cpu = [cpu_seconds(s.proc.pid) - c0 for s, c0 in zip(servers, cpu0, strict=True)]  # type: ignore[union-attr]
            load_after = os.getloadavg()
            n_sessions, bad, drained = check_histories(bases[0], key, tally)
            logs = "".join(s.log for s in servers)
    finally:
        for s in servers:
            s.stop()
        redis.stop()

    steps = np.asarray(tally.steps)
    p99 = float(np.percentile(steps, 99)) if steps.size else float("nan")
    n_errors = sum(tally.errors.values())
    print(f"## Sessions under load ({time.strftime('%Y-%m-%d %H:%M %Z')}, commit {commit})\n")
    print(
        f"`{' '.join(sys.argv)}`: {args.sessions} sessions, one batch of {BATCH} every "
        f"{args.step_interval:g} s each, reads at {args.read_rate:g}/s, {args.seconds:g} s "
        f"(wall {wall:.1f} s); 2 API processes (round robin), Postgres, auth on. GPQA "
        f"{n_stored} models stored (load {load_s:.1f} s)."
    )
    print(
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
        f"{np.__version__}; load average before {load_before[0]:.2f} / {load_before[1]:.2f} / "
        f"{load_before[2]:.2f}, after {load_after[0]:.2f} / {load_after[1]:.2f} / "
        f"{load_after[2]:.2f} (the client runs on the same machine).\n"
    )
    print("| case | n | p50 ms | p90 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| session step (post batch, answer) | {pct(tally.steps)} |")
    print(f"| session create | {pct(tally.creations)} |")
    print(f"| step lag behind schedule | {pct(tally.lag)} |")
    for path, xs in tally.reads.items():
        print(f"| GET {path} (from schedule) | {pct(xs)} |")
    for path, xs in cold.items():
        print(f"| cold GET {path}, per process | " + " / ".join(f"{x:.0f}" for x in xs) + " |")
    print()
    n_req = len(tally.steps) + len(tally.creations) + sum(len(x) for x in tally.reads.values())
    print(
        f"API CPU during the load: {' + '.join(f'{c:.1f}' for c in cpu)} s over {wall:.1f} s "
        f"({sum(cpu) / wall:.2f} cores; {1000 * sum(cpu) / max(n_req, 1):.1f} ms per request "
        f"over {n_req} requests); first read-back answered {drained:.1f} s after the load "
        "stopped (backlog).\n"
    )
    pauses = sorted(tally.gc_pauses, reverse=True)
    print(
        f"Client GC pauses during the load: {len(pauses)}, longest "
        f"{pauses[0] if pauses else 0.0:.1f} ms (a pause delays every request in flight).\n"
    )
    print(
        f"Steps per process: {dict(tally.per_process)}; sessions created {n_sessions} "
        f"(closed and replaced: {sum(1 for v in tally.sessions.values() if v[1] != 'open')}); "
        f"histories complete: {n_sessions - len(bad)}/{n_sessions}; errors: {n_errors} "
        f"{dict(tally.errors) if n_errors else ''}"
    )
    for line in bad[:10]:
        print("  incomplete:", line)
    if "Traceback" in logs or "unhandled error" in logs:
        print("server log has errors:\n" + logs[-3000:])
    ok = p99 < TARGET_P99_MS and n_errors == 0 and not bad
    print(
        f"\n**{'PASS' if ok else 'FAIL'}**: step p99 {p99:.1f} ms (target < {TARGET_P99_MS:g}), "
        f"errors {n_errors} (target 0), incomplete histories {len(bad)} (target 0)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
