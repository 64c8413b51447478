"""Process helpers for fuzz, fault and security tests.

Everything here starts *private* processes on free ports and tears them down, also on failure:
the machine's shared Postgres (127.0.0.1:5432) and Redis (127.0.0.1:6379) are never stopped,
restarted or killed; a fault test that needs an outage gets its own instance. Signals go only
to processes started here, by pid (each in its own session).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

REPO_ROOT = Path(__file__).resolve().parents[2]

# Settings a child process must not inherit from the parent test session.
SERVICE_VARS = (
    "DATABASE_URL",
    "BROKER_URL",
    "CELERY_QUEUE",
    "CELERY_KEY_PREFIX",
    "AUTH_ENABLED",
    "JOB_SOFT_TIME_LIMIT",
    "JOB_HARD_TIME_LIMIT",
    "HOST",
    "PORT",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def _terminate(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL, this process only (never a name match)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=10)


class _Output:
    """Collect a child's merged stdout/stderr on a thread (so its pipe never fills up)."""

    def __init__(self, proc: subprocess.Popen[str], ready_marker: str | None = None) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._marker = ready_marker
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if self._marker and self._marker in line:
                self.ready.set()

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def join(self) -> None:
        self._thread.join(timeout=5)


# --- private Redis ------------------------------------------------------------------------------


@dataclass
class PrivateRedis:
    """``redis-server`` on a free port, no persistence; stop() and start() on the same port."""

    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if not _wait_port(self.port, 15):
            self.stop()
            raise RuntimeError("private redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc, timeout=10)
            self.proc = None


@contextlib.contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        from tests.support.tools import missing

        missing("redis-server is not installed")
    redis = PrivateRedis()
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


# --- private Postgres ---------------------------------------------------------------------------


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        from tests.support.tools import missing

        missing(f"PostgreSQL server binaries ({name}) are not installed")
    return found[-1]


def _as_postgres(argv: list[str]) -> list[str]:
    """Run as the ``postgres`` OS user when we are root (initdb and postgres refuse root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


@dataclass
class PrivatePostgres:
    """A throw-away cluster (initdb, trust auth on loopback) in a temp dir on a free port."""

    datadir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, dbname: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def init(self) -> None:
        subprocess.run(
            _as_postgres(
                [
                    _pg_bin("initdb"),
                    "-D",
                    str(self.datadir),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        self.proc = subprocess.Popen(
            _as_postgres(
                [
                    _pg_bin("postgres"),
                    "-D",
                    str(self.datadir),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={self.datadir}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "max_connections=60",
                ]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"private postgres exited with {self.proc.returncode}")
            try:
                eng = create_engine(self.admin_url, connect_args={"connect_timeout": 2})
                with eng.connect() as conn:
                    conn.execute(text("SELECT 1"))
                eng.dispose()
                return
            except Exception:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("private postgres did not accept connections")

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster we started; runuser forwards it)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    tmp = tempfile.mkdtemp(prefix="benchslice-pg-")
    try:
        datadir = Path(tmp) / "data"
        datadir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(tmp, "postgres", "postgres")
            shutil.chown(datadir, "postgres", "postgres")
        pg = PrivatePostgres(datadir)
        pg.init()
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- databases on a server ---------------------------------------------------------------------


@contextlib.contextmanager
def migrated_database(admin_url: str, name: str) -> Iterator[str]:
    """Create database ``name`` on the server of ``admin_url``, migrate it, drop it at the end."""
    from app.db.migrate import upgrade

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        upgrade(url)
        yield url
    finally:
        with contextlib.suppress(Exception), admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# --- the service: uvicorn + Celery workers -----------------------------------------------------


def service_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    env.update(PYTHONUNBUFFERED="1", ENVIRONMENT="test", LOG_LEVEL="INFO")
    env.update(settings)
    return env


@dataclass
class ApiServer:
    """``uvicorn app.main:create_app --factory`` on a free port with the given settings."""

    env: dict[str, str]
    workers: int = 1
    log_level: str = "info"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[str] | None = None
    output: _Output | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return self.output.text if self.output else ""

    def start(self, timeout: float = 60.0) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "app.main:create_app",
                "--factory",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--log-level",
                self.log_level,
            ],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.output = _Output(self.proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited early:\n{self.log}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"uvicorn did not answer /healthz in {timeout}s:\n{self.log}")

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc)
            assert self.output is not None
            self.output.join()


@contextlib.contextmanager
def api_server(env: dict[str, str], workers: int = 1) -> Iterator[ApiServer]:
    server = ApiServer(env, workers=workers)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def celery_worker_argv(queue: str, hostname: str) -> list[str]:
    """The tests' ``celery worker`` command line: prefork, concurrency 1, one queue, INFO log."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker.celery_app",
        "worker",
        "--pool",
        "prefork",
        "--concurrency",
        "1",
        "--queues",
        queue,
        "--loglevel",
        "INFO",
        "--without-mingle",
        "--without-gossip",
        "--hostname",
        hostname,
    ]


@dataclass
class Worker:
    """One ``celery worker`` (prefork, concurrency 1) in its own session; kill() is SIGKILL to
    its whole process group (the main process and its pool child) and nothing else."""

    env: dict[str, str]
    name: str
    proc: subprocess.Popen[str] | None = None
    output: _Output | None = None

    @property
    def log(self) -> str:
        return self.output.text if self.output else ""

    def start(self, timeout: float = 60.0) -> None:
        self.proc = subprocess.Popen(
            celery_worker_argv(self.env["CELERY_QUEUE"], f"{self.name}@%h"),
            cwd=REPO_ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.output = _Output(self.proc, ready_marker=" ready.")
        if not self.output.ready.wait(timeout=timeout):
            self.stop()
            raise RuntimeError(f"celery worker {self.name} did not become ready:\n{self.log}")

    def pids(self) -> set[int]:
        """The worker's processes (its process group: main process and pool children)."""
        assert self.proc is not None
        found = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid:  # field 5 of stat: the process group id
                found.add(int(stat.parent.name))
        return found

    def kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        assert self.output is not None
        self.output.join()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _terminate(self.proc, timeout=20)
        # the pool child of a killed main process: reap the group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.output is not None:
            self.output.join()


@contextlib.contextmanager
def celery_worker(env: dict[str, str], name: str) -> Iterator[Worker]:
    worker = Worker(env, name)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
