"""Fair under load (issue 26): cache-busting expensive clients must not starve a cheap reader.

Stack: two API processes (``uvicorn``, one process each, auth on, keys on every request) on two
loopback ports, Postgres (a scratch database, created, migrated, dropped), a private
``redis-server`` as broker and rate-limit store (buckets shared by both processes). Data: the
real GPQA matrix (``$BENCHSLICE_SHARED_DATA/gpqa.npz``, 420 models x 448 items) as benchmark
``gpqa``.

Load for ``--seconds``, all clients going round robin between the two processes:

* ``--expensive`` clients (one read key between them, as in the issue's probe), each in a
  closed loop sending cache-busting expensive reads: ``verdict`` of two models at a new
  ``size`` each time, and ``leaderboard/pairs?format=json`` at a new ``alpha`` each time
  (26.8 MB answers when computed).
* one cheap reader (its own read key, in a process of its own so that parsing the attackers'
  answers does not delay it), open loop at ``--cheap-rate`` requests/s of
  ``GET /v1/benchmarks/gpqa`` (request i scheduled at ``t0 + i / rate``, latency measured
  from that time, so a stalled server is not hidden).

Reported: the cheap GET's p50/p90/p99/max and errors; the expensive clients' statuses (200,
429, 503, timeouts); each API process's peak RSS, its largest child's (the processes that
compute expensive requests, ``EXPENSIVE_WORKERS=process``) and both together
(``/proc/<pid>/status`` VmRSS sampled every 0.5 s). Targets: cheap p99 <= 100 ms, RSS < 1.5 GB
per process (API process and each child), expensive clients answered with 429s (not timeouts).

Usage: .venv/bin/python bench/bench_fair_load.py [--seconds 60] [--expensive 20]
       [--cheap-rate 20] [--quick] [--workers process|thread]
(from a clean clone: ``make install-dev``, then that command with ``BENCHSLICE_SHARED_DATA``
pointing at the directory holding ``gpqa.npz``; Postgres at DATABASE_URL's server or the
suite's default, ``redis-server`` on PATH).
Bounded: loopback only, every loop ends at ``--seconds`` (requests time out after 30 s).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import scratch_database  # noqa: E402
from bench.bench_session_load import gpqa, load  # noqa: E402
from tests.support.procs import ApiServer, PrivateRedis, service_env  # noqa: E402
from tests.support.stack import create_key  # noqa: E402

REQUEST_TIMEOUT = 30.0
TARGET_P99_MS = 100.0
TARGET_RSS_MB = 1536.0
KINDS = {"both": ("verdict", "pairs"), "verdict": ("verdict",), "pairs": ("pairs",)}


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the forkserver and the computing children of an API
    process: EXPENSIVE_WORKERS=process)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parent[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found += kids
        todo += kids
    return found


class RssSampler(threading.Thread):
    """Peak RSS of each API process, of its largest child and of the process with its
    children together, sampled every 0.5 s."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.peak = dict.fromkeys(pids, 0.0)
        self.child_peak = dict.fromkeys(pids, 0.0)
        self.total_peak = dict.fromkeys(pids, 0.0)
        self.children_seen: dict[int, set[int]] = {p: set() for p in pids}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for pid in self.pids:
                own = rss_mb(pid)
                kids = descendants(pid)
                self.children_seen[pid].update(kids)
                sizes = [rss_mb(k) for k in kids]
                self.peak[pid] = max(self.peak[pid], own)
                self.child_peak[pid] = max(self.child_peak[pid], max(sizes, default=0.0))
                self.total_peak[pid] = max(self.total_peak[pid], own + sum(sizes))
            self.stop.wait(0.5)


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """``pid -> (command, CPU seconds so far)`` of every process (``/proc/<pid>/stat``)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, rest = stat.read_text().rsplit(")", 1)
            fields = rest.split()
            cmd = Path(stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            out[int(stat.parent.name)] = (
                cmd.strip() or head.split("(", 1)[1],
                (int(fields[11]) + int(fields[12])) / tick,
            )
        except (OSError, IndexError, ValueError):
            continue
    return out


def cpu_groups(before, after, api_pids: list[int], this_pid: int) -> dict[str, float]:
    """CPU seconds spent between two :func:`cpu_by_process` readings, by kind of process."""
    api_tree = {p: set(descendants(p)) for p in api_pids}
    groups: Counter = Counter()
    for pid, (cmd, cpu) in after.items():
        spent = cpu - before.get(pid, (cmd, 0.0))[1]
        if spent <= 0:
            continue
        if pid in api_pids:
            group = "API processes"
        elif any(pid in kids for kids in api_tree.values()):
            group = "their expensive-work children"
        elif pid == this_pid:
            group = "bench: expensive clients"
        elif "postgres" in cmd:
            group = "postgres"
        elif "redis" in cmd:
            group = "redis"
        elif "multiprocessing" in cmd or "spawn_main" in cmd:
            group = "bench: cheap reader"
        else:
            group = "other processes"
        groups[group] += spent
    return dict(groups.most_common())


def metric_sum(texts: list[str], name: str) -> dict[str, int]:
    """A counter of the Prometheus texts, summed over processes, by its first label value."""
    out: Counter = Counter()
    for text in texts:
        for line in text.splitlines():
            if line.startswith(name):
                series, value = line.rsplit(" ", 1)
                label = series.split('"')[1] if '"' in series else "all"
                out[label] += int(float(value))
    return dict(out)


def pct(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    a = np.asarray(xs)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return f"{a.size} | {p50:.1f} | {p90:.1f} | {p99:.1f} | {a.max():.1f}"


async def expensive_client(
    i: int,
    urls: list[str],
    key: str,
    models: list[str],
    until: float,
    out: Counter,
    kinds: tuple[str, ...] = ("verdict", "pairs"),
) -> None:
    rng = np.random.default_rng(1000 + i)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT) as client:
        n = 0
        while time.monotonic() < until:
            base = urls[(i + n) % len(urls)]
            if (
                kinds[n % len(kinds)] == "verdict"
            ):  # a verdict at a new size: the exact MDAD over every pair, uncached
                a, b = rng.choice(len(models), size=2, replace=False)
                path = "/v1/benchmarks/gpqa/verdict"
                params = {
                    "model_a": models[a],
                    "model_b": models[b],
                    "size": int(rng.integers(5, 220)),
                    "method": "random",
                }
            else:  # every pair at a new alpha: tens of MB, never cached before
                path = "/v1/benchmarks/gpqa/leaderboard/pairs"
                params = {"format": "json", "alpha": f"{rng.uniform(0.001, 0.2):.9f}"}
            n += 1
            try:
                r = await client.get(base + path, params=params)
                out[str(r.status_code)] += 1
                if r.status_code in (429, 503):
                    await asyncio.sleep(min(1.0, float(r.headers.get("retry-after", "1"))) * 0.1)
            except httpx.TimeoutException:
                out["timeout"] += 1
            except httpx.HTTPError as exc:
                out[type(exc).__name__] += 1


async def cheap_reader(
    urls: list[str],
    key: str,
    rate: float,
    until: float,
    lat: list[float],
    out: Counter,
    server: list[float] | None = None,
) -> None:
    """Open loop at ``rate``/s: ``lat`` gets each request's latency from its scheduled time,
    ``server`` the app's own time (its ``Server-Timing``)."""
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
    async with httpx.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT, limits=limits) as c:
        t0 = time.monotonic()
        tasks = []

        async def one(k: int, at: float) -> None:
            try:
                r = await c.get(urls[k % len(urls)] + "/v1/benchmarks/gpqa")
                lat.append(1000 * (time.monotonic() - at))
                out[str(r.status_code)] += 1
                timing = r.headers.get("server-timing", "")
                if server is not None and timing.startswith("app;dur="):
                    server.append(float(timing.split("=", 1)[1]))
            except httpx.HTTPError as exc:
                out[type(exc).__name__] += 1

        k = 0
        while True:
            at = t0 + k / rate
            if at >= until:
                break
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            tasks.append(asyncio.create_task(one(k, at)))
            k += 1
        await asyncio.gather(*tasks)


async def baseline(args, urls, cheap_key) -> tuple[Counter, list[float]]:
    """The cheap reader alone for ``--baseline-seconds`` (what the machine gives it unloaded)."""
    status: Counter = Counter()
    lat: list[float] = []
    until = time.monotonic() + args.baseline_seconds
    await cheap_reader(urls, cheap_key, args.cheap_rate, until, lat, status)
    return status, lat


def _cheap_process(urls, key, rate, seconds, start_at, queue) -> None:
    """The cheap reader in a process of its own: its latencies are the server's, not the delays of
    an event loop that also parses the attackers' 26 MB answers."""
    lat: list[float] = []
    server: list[float] = []
    status: Counter = Counter()

    async def go() -> None:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        await cheap_reader(urls, key, rate, time.monotonic() + seconds, lat, status, server)

    asyncio.run(go())
    queue.put((lat, server, dict(status)))


async def _expensive_load(args, urls, read_key, models) -> Counter:
    until = time.monotonic() + args.seconds
    statuses: Counter = Counter()
    await asyncio.gather(
        *(
            expensive_client(i, urls, read_key, models, until, statuses, KINDS[args.kind])
            for i in range(args.expensive)
        )
    )
    return statuses


def run_load(args, urls, read_key, cheap_key, models):
    """The expensive clients in this process, the cheap reader in another, both for
    ``--seconds`` from the same moment."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + 2.0  # the child's interpreter is up by then
    reader = ctx.Process(
        target=_cheap_process,
        args=(urls, cheap_key, args.cheap_rate, args.seconds, start_at, queue),
    )
    reader.start()
    time.sleep(max(0.0, start_at - time.time()))
    statuses = asyncio.run(_expensive_load(args, urls, read_key, models))
    lat, server, cheap_status = queue.get(timeout=REQUEST_TIMEOUT + 60)
    reader.join()
    return statuses, Counter(cheap_status), lat, server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--expensive", type=int, default=20)
    parser.add_argument("--cheap-rate", type=float, default=20.0)
    parser.add_argument("--baseline-seconds", type=float, default=15.0)
    parser.add_argument("--quick", action="store_true", help="15 s, 6 expensive clients")
    parser.add_argument(
        "--workers",
        choices=["process", "thread"],
        default="process",
        help="EXPENSIVE_WORKERS of the API processes (default process: the shipped default)",
    )
    parser.add_argument(
        "--kind",
        choices=sorted(KINDS),
        default="both",
        help="the expensive clients' requests: verdicts at new sizes, pairs at new alphas, or both",
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for both API processes (repeatable), e.g. EXPENSIVE_NICE=19",
    )
    parser.add_argument(
        "--server-logs", action="store_true", help="print the API processes' logs at the end"
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.expensive = 15.0, 6
    data = gpqa()
    models = [str(m) for m in data["models"]]
    redis = PrivateRedis()
    redis.start()
    servers: list[ApiServer] = []
    try:
        with scratch_database("benchslice_bench_fair_load") as url:
            load(url, data, len(models))
            env = service_env(
                DATABASE_URL=url,
                BROKER_URL=redis.url,
                AUTH_ENABLED="true",
                EXPENSIVE_WORKERS=args.workers,
                **dict(kv.split("=", 1) for kv in args.server_env),
            )
            read_key = create_key(url, ["read"], name="expensive-clients")
            cheap_key = create_key(url, ["read"], name="cheap-reader")
            metrics_key = create_key(url, [], name="metrics", instance_admin=True)
            for _ in range(2):
                servers.append(ApiServer(env, log_level="warning"))
                servers[-1].start()
            urls = [s.url for s in servers]
            for u in urls:  # warm: the matrix and the page of the cheap GET
                httpx.get(
                    u + "/v1/benchmarks/gpqa",
                    headers={"Authorization": f"Bearer {cheap_key}"},
                    timeout=60,
                )
            pids = [s.proc.pid for s in servers if s.proc is not None]
            sampler = RssSampler(pids)
            sampler.start()
            base_status, base_lat = asyncio.run(baseline(args, urls, cheap_key))
            load_before = os.getloadavg()
            cpu_before = cpu_by_process()
            statuses, cheap_status, lat, server = run_load(args, urls, read_key, cheap_key, models)
            cpu_spent = cpu_groups(cpu_before, cpu_by_process(), pids, os.getpid())
            metrics = [
                httpx.get(
                    u + "/metrics", headers={"Authorization": f"Bearer {metrics_key}"}, timeout=60
                ).text
                for u in urls
            ]
            sampler.stop.set()
            sampler.join()
            load_after = os.getloadavg()
    finally:
        for s in servers:
            s.stop()
        redis.stop()
    if args.server_logs:
        for s in servers:
            print(f"--- log of the API process on {s.url}\n{s.log[-20000:]}")

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    p99 = float(np.percentile(lat, 99)) if lat else float("inf")
    peak = max(sampler.peak.values())
    print(f"# bench_fair_load  commit {commit}  {platform.node()}  {time.strftime('%F %T')}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (shared machine)")
    print(
        f"{args.expensive} expensive clients, {args.seconds:g} s, cheap {args.cheap_rate:g}/s, "
        f"EXPENSIVE_WORKERS={args.workers}, expensive kind {args.kind}, "
        f"server settings {args.server_env or 'default'}"
    )
    print("cheap GET /v1/benchmarks/gpqa: n | p50 | p90 | p99 | max (ms)")
    print("  alone (baseline):", pct(base_lat), "  statuses", dict(base_status))
    print("  under load:      ", pct(lat), "  statuses", dict(cheap_status))
    print("  of which in the app (its Server-Timing):", pct(server))
    print("expensive statuses", dict(statuses))
    print(
        "answered by the API processes (/metrics): held 429s",
        metric_sum(metrics, "benchslice_held_refusals_total"),
        "| expensive computations run",
        metric_sum(metrics, "benchslice_expensive_computed_total"),
        "| refused at once by the expensive pool",
        metric_sum(metrics, "benchslice_expensive_refused_total"),
        "| shed (503, too many in flight)",
        metric_sum(metrics, "benchslice_requests_shed_total"),
    )
    print(
        f"CPU seconds during the {args.seconds:g} s of load, by process:",
        {k: round(v, 1) for k, v in cpu_spent.items()},
    )
    print("peak RSS MB per API process", {p: round(v) for p, v in sampler.peak.items()})
    print(
        "peak RSS MB of its largest child process",
        {p: round(v) for p, v in sampler.child_peak.items()},
        " child processes seen",
        {p: len(v) for p, v in sampler.children_seen.items()},
    )
    print(
        "peak RSS MB of each API process with its children",
        {p: round(v) for p, v in sampler.total_peak.items()},
    )
    peak = max(peak, max(sampler.child_peak.values()))
    ok = p99 <= TARGET_P99_MS and peak < TARGET_RSS_MB and statuses.get("timeout", 0) == 0
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
