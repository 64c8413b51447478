"""``benchslice push --create`` of a leaderboard-size .npz matrix, end to end (issue 27).

SYNTHETIC matrix from ``bench/synth.py`` (GPQA-calibrated 2PL, seed 0), default 5,000 models x
250 items, written as an .npz (``correct``, ``models``, ``item_ids``). The CLI runs as a
subprocess against the API under uvicorn (one process, loopback), on

* Postgres: a scratch database (migrated, dropped at the end);
* SQLite (the embedded setup of ``make run``): a file database in a temporary directory.

Each backend: the first push (creates the benchmark and every model; the CLI sends
``POST …/results/matrix`` requests of at most 4 M values) and the same push again (every model
unchanged). Wall time of the CLI process, including its start-up.

    .venv/bin/python bench/bench_push_matrix.py [--models 5000] [--items 250]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import scratch_database, start_uvicorn  # noqa: E402


def _serve(url: str):
    import httpx

    env = {**os.environ, "DATABASE_URL": url, "AUTH_ENABLED": "false", "ENVIRONMENT": "test"}
    proc, base = start_uvicorn(env)
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return proc, base
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _push(base: str, path: Path, name: str) -> float:
    cli = [sys.executable, "-m", "app.cli", "push", "--create", "--benchmark", name, str(path)]
    t0 = time.perf_counter()
    subprocess.run([*cli, "--url", base], check=True, cwd=ROOT, capture_output=True)
    return time.perf_counter() - t0


def _run(label: str, url: str, path: Path) -> None:
    proc, base = _serve(url)
    try:
        first = _push(base, path, "synth-push")
        again = _push(base, path, "synth-push")
        print(f"| {label} | {first:.1f} | {again:.1f} |", flush=True)
    finally:
        proc.terminate()
        proc.wait(30)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=5_000)
    parser.add_argument("--items", type=int, default=250)
    parser.add_argument("--backends", nargs="*", default=["postgres", "sqlite"])
    args = parser.parse_args(argv)
    from app.db.migrate import upgrade
    from bench.synth import make_synthetic

    correct = make_synthetic(args.models, args.items, seed=0).correct
    print(f"load before: {os.getloadavg()}")
    print(f"{args.models:,} models x {args.items:,} items")
    print("| backend | first push s | same push again s |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synth.npz"
        np.savez_compressed(
            path,
            correct=correct,
            models=np.array([f"model-{i:05d}" for i in range(args.models)]),
            item_ids=np.array([f"item-{j}" for j in range(args.items)]),
        )
        if "postgres" in args.backends:
            with scratch_database("benchslice_push") as url:
                _run("Postgres", url, path)
        if "sqlite" in args.backends:
            url = f"sqlite:///{tmp}/embedded.db"
            upgrade(url)
            _run("SQLite (embedded)", url, path)
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
