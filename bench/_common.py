"""Shared by the benchmark scripts: repository root, admin database URL, scratch database."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADMIN_URL = os.environ.get(
    "BENCH_ADMIN_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def status_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, in MB. Not ``ru_maxrss``: Linux
    carries the parent's peak across fork and exec into it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def scratch_database(prefix: str = "benchslice_bench") -> Iterator[str]:
    """A migrated database ``{prefix}_{pid}`` on the admin server, dropped on exit; its URL."""
    from sqlalchemy import create_engine, text

    from app.db.migrate import upgrade

    name = f"{prefix}_{os.getpid()}"
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def start_uvicorn(env: dict[str, str], workers: int | None = None) -> tuple[subprocess.Popen, str]:
    """Start the API under uvicorn on a free loopback port (log level warning); the process and
    its base URL. The caller waits for ``/healthz`` and terminates the process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "app.main:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    if workers is not None:
        argv += ["--workers", str(workers)]
    return subprocess.Popen(argv, cwd=ROOT, env=env), f"http://127.0.0.1:{port}"


def browser_session(base: str, key: str) -> str:
    """Sign in to the browser view with ``key``; the session cookie's value (every API process
    accepts it: sessions live in the database)."""
    import re

    import httpx

    with httpx.Client(base_url=base, timeout=60) as browser:
        form = browser.get("/ui/login")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token is not None, form.text[:300]
        r = browser.post("/ui/login", data={"key": key, "csrf": token.group(1), "next": "/ui/"})
        assert r.status_code == 303, (r.status_code, r.text[:300])
        return browser.cookies["benchslice_session"]
