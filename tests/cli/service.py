"""A real benchslice service for CLI tests: ``python -m app.launcher`` (migrations, uvicorn, one
Celery worker) on the embedded defaults — SQLite and the SQLite broker in a temp dir — on a free
port. This is exactly what ``make run`` starts, so the CLI and README tests drive the real thing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
# Settings read by the service; the parent test session points these at its own Postgres/Redis.
_SERVICE_VARS = (
    "DATABASE_URL",
    "BROKER_URL",
    "CELERY_QUEUE",
    "CELERY_KEY_PREFIX",
    "HOST",
    "PORT",
    "AUTH_ENABLED",
    "ENVIRONMENT",
    "JOB_SOFT_TIME_LIMIT",
    "JOB_HARD_TIME_LIMIT",
    "BENCHSLICE_URL",
    "BENCHSLICE_API_KEY",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveService:
    url: str
    workdir: Path
    env: dict[str, str]
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "".join(self.lines[-200:])

    def client_env(self, **extra: str) -> dict[str, str]:
        """Environment for a CLI subprocess talking to this service."""
        env = {k: v for k, v in os.environ.items() if k not in _SERVICE_VARS}
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
        env.update(BENCHSLICE_URL=self.url, NO_COLOR="1", COLUMNS="120", **extra)
        return env


def base_env(workdir: Path, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SERVICE_VARS}
    env.update(
        DATABASE_URL=f"sqlite:///{workdir}/benchslice.sqlite3",
        BROKER_URL=f"sqla+sqlite:///{workdir}/celery-broker.sqlite3",
        HOST="127.0.0.1",
        PORT=str(port),
        ENVIRONMENT="local",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


@contextmanager
def live_service(timeout: float = 90.0, **extra_env: str) -> Iterator[LiveService]:
    """Start the launcher; yield once ``/readyz`` answers 200; stop it (SIGINT) at the end."""
    with tempfile.TemporaryDirectory(prefix="benchslice-cli-") as tmp:
        workdir = Path(tmp)
        port = free_port()
        env = base_env(workdir, port, **extra_env)
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.launcher"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        service = LiveService(f"http://127.0.0.1:{port}", workdir, env, proc)

        def _read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                service.lines.append(line)

        reader = threading.Thread(target=_read, daemon=True)
        reader.start()
        try:
            _wait_ready(service, timeout)
            yield service
        finally:
            _stop(proc)
            reader.join(timeout=5)


def _wait_ready(service: LiveService, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.proc.poll() is not None:
            raise RuntimeError(f"the service exited early:\n{service.log}")
        try:
            if httpx.get(service.url + "/readyz", timeout=2).status_code == 200 and any(
                " ready." in line for line in service.lines
            ):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the service did not become ready in {timeout}s:\n{service.log}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def thread_server(**settings_overrides: object) -> Iterator[tuple[str, str]]:
    """``create_app`` with these settings, served by uvicorn in a thread on a migrated SQLite
    file in a temp dir; yields ``(base URL, database URL)``. For cases the launcher cannot set up (a broker that
    is down, auth on) without a worker."""
    import uvicorn

    from app.db.migrate import upgrade
    from app.main import create_app
    from app.settings import Settings

    with tempfile.TemporaryDirectory(prefix="benchslice-app-") as tmp:
        db_url = f"sqlite:///{tmp}/benchslice.sqlite3"
        upgrade(db_url)
        fields: dict[str, object] = {
            "database_url": db_url,
            "broker_url": f"sqla+sqlite:///{tmp}/broker.sqlite3",
            "environment": "local",
            "celery_queue": "benchslice",
            "celery_key_prefix": "",
            "auth_enabled": False,
            **settings_overrides,
        }
        app = create_app(Settings(**fields))  # type: ignore[arg-type]
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}", db_url
        finally:
            server.should_exit = True
            thread.join(timeout=10)
