"""How long a request thread of an API process can be kept from running while the expensive
pool computes (issue 26): the GIL held by a computation in the pool's threads
(``EXPENSIVE_WORKERS=thread``) against one computed in a child process (``process``).

A ticker thread sleeps 1 ms in a loop and records how late each wake-up is while the pool
(one slot, a caller set as in a request) computes 6 exact MDADs (sizes 20..120) and 3
leaderboards (alphas 0.01..0.03) of the REAL GPQA matrix (``$BENCHSLICE_SHARED_DATA/gpqa.npz``).
Printed per mode: the computations' wall time and the ticker's lateness p50 / p99 / max (ms).
The p99 mostly measures the machine's scheduling; the max is the longest stall.

Usage: OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_expensive_gil.py [thread|process ...]
(default: thread process).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.ranking.leaderboard import leaderboard  # noqa: E402
from app.core.reliability.exact import exact_agreement  # noqa: E402
from app.services.limits.children import Shared  # noqa: E402
from app.services.limits.expensive import ExpensivePool  # noqa: E402
from app.services.platform.caller import CALLER, Caller  # noqa: E402
from bench.bench_session_load import gpqa  # noqa: E402


def measure(mode: str, correct: np.ndarray) -> str:
    pool = ExpensivePool(slots=1, queue=4, per_caller=4)
    pool.workers = mode
    matrix = Shared("gpqa", correct)
    pool.call("warm-up", exact_agreement, matrix, 7, threshold=0.8)  # a child started
    lates: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            time.sleep(0.001)
            lates.append(time.perf_counter() - t - 0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    t0 = time.perf_counter()
    for n in (20, 40, 60, 80, 100, 120):
        pool.call("an exact MDAD", exact_agreement, matrix, n, threshold=0.8)
    for alpha in (0.01, 0.02, 0.03):
        pool.call("a leaderboard", leaderboard, matrix, alpha=alpha)
    wall = time.perf_counter() - t0
    stop.set()
    ticker.join()
    pool.shutdown_children()
    late = np.asarray(lates) * 1000
    p50, p99 = np.percentile(late, [50, 99])
    return (
        f"{mode}: 9 computations {wall:.1f} s wall; ticker late ms p50 {p50:.2f} p99 {p99:.1f} "
        f"max {late.max():.1f} (n={late.size}); load {os.getloadavg()[0]:.1f}"
    )


def main() -> int:
    modes = sys.argv[1:] or ["thread", "process"]
    correct = np.asarray(gpqa()["correct"], dtype=np.uint8)
    sys.setswitchinterval(0.001)  # GIL_SWITCH_INTERVAL_MS=1, as the API sets it
    CALLER.set(Caller("bench", ("key:bench",)))
    for mode in modes:
        print(measure(mode, correct), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
