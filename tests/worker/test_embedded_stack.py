"""`make run`'s launcher on the embedded default: SQLite + kombu's SQLAlchemy transport, a real
uvicorn and a real Celery worker as subprocesses; a ping job submitted over HTTP succeeds."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT, wait_for_job

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_launcher_serves_and_runs_a_ping_job_on_sqlite(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "BROKER_URL", "CELERY_KEY_PREFIX"}
    }
    env.update(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path}/benchslice.sqlite3",
            "BROKER_URL": f"sqla+sqlite:///{tmp_path}/broker.sqlite3",
            "CELERY_QUEUE": f"embedded-{tmp_path.name}",
            "PORT": str(port),
            "PYTHONUNBUFFERED": "1",
        }
    )
    log = (tmp_path / "launcher.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.launcher"],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.name
            time.sleep(0.3)

        created = httpx.post(f"{base}/v1/jobs", json={"kind": "ping", "params": {"steps": 2}})
        assert created.status_code == 202, created.text
        location = base + created.headers["location"]
        body = wait_for_job(lambda: httpx.get(location).json(), timeout=60)
        assert body["status"] == "succeeded", body
        assert body["finished_at"].endswith("Z")
        text = Path(log.name).read_text()
        assert f"benchslice API:  {base}/v1" in text and f"{base}/docs" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.returncode == 0
    assert "Warm shutdown" in Path(log.name).read_text()
