"""Worker processes cap their BLAS/OpenMP pools (oversubscribed OpenBLAS is many times slower)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys
import numpy  # creates the BLAS pool
from threadpoolctl import threadpool_info
from celery import signals
import worker.celery_app  # connects the handlers
before = max(p["num_threads"] for p in threadpool_info())
getattr(signals, sys.argv[1]).send(sender=None)
after = max(p["num_threads"] for p in threadpool_info())
print(json.dumps({"before": before, "after": after}))
"""


@pytest.mark.parametrize("signal", ["worker_init", "worker_process_init"])
@pytest.mark.parametrize("threads", [1, 2])
def test_worker_signals_apply_worker_native_threads(signal: str, threads: int) -> None:
    env = {**os.environ, "WORKER_NATIVE_THREADS": str(threads)}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(var, None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, signal],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["after"] == min(threads, probe["before"]), probe
