"""Shared fixtures. Nothing here is autouse: tests/core/ runs without Postgres or Redis.

Isolation between concurrent test runs on one machine: each session gets its own Postgres
database (created, migrated, dropped), its own Celery queue and its own Redis key prefix.
Isolation between tests: ``db_session`` is one transaction rolled back at the end of the test
(the code under test may commit: it only releases a SAVEPOINT).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
_RUN_ID = f"{os.getpid()}_{secrets.token_hex(3)}"

ADMIN_DATABASE_URL = os.environ.get(
    "TEST_ADMIN_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
TEST_DATABASE_NAME = f"benchslice_test_{_RUN_ID}"
TEST_DATABASE_URL = ADMIN_DATABASE_URL.rsplit("/", 1)[0] + "/" + TEST_DATABASE_NAME
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TEST_QUEUE = f"benchslice-test-{_RUN_ID}"
TEST_KEY_PREFIX = f"benchslice-test-{_RUN_ID}:"

# Before anything imports app.settings: every Settings() in this process (and in the worker
# subprocesses, which inherit the environment) points at this session's private resources.
TEST_ENV = {
    "ENVIRONMENT": "test",
    "DATABASE_URL": TEST_DATABASE_URL,
    "BROKER_URL": TEST_REDIS_URL,
    "CELERY_QUEUE": TEST_QUEUE,
    "CELERY_KEY_PREFIX": TEST_KEY_PREFIX,
    "JOB_SOFT_TIME_LIMIT": "60",
    "JOB_HARD_TIME_LIMIT": "90",
    "AUTH_ENABLED": "false",
    # no per-key rate limit by default: functional tests send hundreds of requests with one key
    # (tests/limits turn the limits on with their own settings)
    "RATE_LIMIT_PER_SECOND": "0",
}
os.environ.update(TEST_ENV)
os.environ.setdefault("BENCHSLICE_SHARED_DATA", str(REPO_ROOT.parent / "shared" / "data"))

from sqlalchemy import Engine, create_engine, text  # noqa: E402
from sqlalchemy.orm import Session, sessionmaker  # noqa: E402

from app.settings import Settings, get_settings  # noqa: E402
from tests.support.procs import celery_worker_argv  # noqa: E402

get_settings.cache_clear()


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """``$BENCHSLICE_SHARED_DATA`` (default ``<repo>/../shared/data``), holding gpqa.npz."""
    return Path(os.environ["BENCHSLICE_SHARED_DATA"])


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings()


# --- database ---------------------------------------------------------------------------------


def _admin_engine() -> Engine:
    return create_engine(ADMIN_DATABASE_URL, isolation_level="AUTOCOMMIT")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop_abandoned_test_databases(conn: Any) -> None:
    """Drop test databases left by killed runs on this machine (their pid no longer exists)."""
    names = conn.scalars(
        text("SELECT datname FROM pg_database WHERE datname LIKE 'benchslice\\_test\\_%'")
    ).all()
    for name in names:
        pid = name.removeprefix("benchslice_test_").split("_", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A fresh Postgres database for this test session, migrated to head, dropped at the end."""
    from app.db.migrate import upgrade

    admin = _admin_engine()
    with admin.connect() as conn:
        _drop_abandoned_test_databases(conn)
        conn.execute(text(f'CREATE DATABASE "{TEST_DATABASE_NAME}"'))
    try:
        upgrade(TEST_DATABASE_URL)
        yield TEST_DATABASE_URL
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{TEST_DATABASE_NAME}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def engine(database_url: str, settings: Settings) -> Iterator[Engine]:
    from app.db.session import make_engine

    eng = make_engine(settings)
    yield eng
    eng.dispose()


@pytest.fixture
def db_session(engine: Engine) -> Iterator[Session]:
    """A session inside one outer transaction that is rolled back after the test.

    ``session.commit()`` inside the test (or the code under test) releases a SAVEPOINT only.
    """
    connection = engine.connect()
    outer = connection.begin()
    session = Session(
        bind=connection,
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
        autoflush=False,
    )
    try:
        yield session
    finally:
        session.close()
        outer.rollback()
        connection.close()


@pytest.fixture(scope="session")
def committed_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Real, committing sessions: for tests where another process (a worker) must see rows.
    Pair it with ``cleanup`` to delete what the test created."""
    from app.db.session import make_sessionmaker

    return make_sessionmaker(engine)


@pytest.fixture
def cleanup(committed_sessionmaker: sessionmaker[Session]) -> Iterator[Callable[[type, Any], None]]:
    """``cleanup(Model, id)``: delete that row after the test (in reverse order of registration)."""
    rows: list[tuple[type, Any]] = []
    yield lambda model, id_: rows.append((model, id_))
    with committed_sessionmaker() as session:
        for model, id_ in reversed(rows):
            obj = session.get(model, id_)
            if obj is not None:
                session.delete(obj)
                session.flush()
        session.commit()


# --- API ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def app(engine: Engine, settings: Settings) -> Iterator[Any]:
    from app.main import create_app

    application = create_app(settings)
    yield application
    application.state.celery.close()
    application.state.engine.dispose()


@pytest.fixture
def client(app: Any, db_session: Session) -> Iterator[Any]:
    """TestClient whose SessionDep uses ``db_session`` (the request still commits: a savepoint)."""
    from fastapi.testclient import TestClient

    from app.api.deps import open_session

    app.dependency_overrides[open_session] = lambda: db_session
    try:
        with TestClient(app, raise_server_exceptions=False) as test_client:
            yield test_client
    finally:
        app.dependency_overrides.pop(open_session, None)


@pytest.fixture
def committed_client(app: Any) -> Iterator[Any]:
    """TestClient with real commits (for worker integration tests); use ``cleanup`` for rows."""
    from fastapi.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


# --- Redis / Celery -----------------------------------------------------------------------------


def _purge_redis_prefixes() -> None:
    """Delete this run's keys, and those of test runs whose process is gone (best effort)."""
    import redis

    r = redis.Redis.from_url(TEST_REDIS_URL, socket_connect_timeout=1, socket_timeout=5)
    try:
        doomed: list[bytes] = []
        for key in r.scan_iter(match="benchslice-test-*", count=1000):
            run_id = key.decode(errors="replace").removeprefix("benchslice-test-").split(":", 1)[0]
            pid = run_id.split("_", 1)[0]
            if run_id == _RUN_ID or (pid.isdigit() and not _pid_alive(int(pid))):
                doomed.append(key)
        for start in range(0, len(doomed), 500):
            r.delete(*doomed[start : start + 500])
    except redis.RedisError:
        pass
    finally:
        r.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Not a fixture: the API tests publish to Redis without asking for one.
    if "redis" in sys.modules:
        _purge_redis_prefixes()


@pytest.fixture(scope="session")
def redis_isolation() -> Iterator[str]:
    """This session's Redis key prefix; every key under it is deleted at the end."""
    yield TEST_KEY_PREFIX
    _purge_redis_prefixes()


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if " ready." in line:
                self.ready.set()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)


@contextlib.contextmanager
def running_worker(hostname: str) -> Iterator[WorkerProcess]:
    """A real ``celery worker`` subprocess (prefork, concurrency 1) on this session's DB and
    queue, stopped on exit."""
    env = {**os.environ, **TEST_ENV, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        celery_worker_argv(TEST_QUEUE, hostname),
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    worker = WorkerProcess(proc)
    try:
        if not worker.ready.wait(timeout=60):
            raise RuntimeError(f"celery worker {hostname} did not become ready:\n{worker.log}")
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="session")
def celery_worker_process(database_url: str, redis_isolation: str) -> Iterator[WorkerProcess]:
    """A real ``celery worker`` subprocess (prefork, concurrency 1) on this session's DB and queue."""
    with running_worker(f"test-{_RUN_ID}@%h") as worker:
        yield worker


def wait_for_job(
    get_status: Callable[[], dict[str, Any]],
    timeout: float = 60.0,
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """Poll ``get_status()`` until the job is terminal (or ``until`` holds); return the last body."""
    terminal = {"succeeded", "failed", "cancelled"}
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = get_status()
        if until(body) if until else body.get("status") in terminal:
            return body
        time.sleep(0.1)
    raise AssertionError(f"job did not reach the expected state in {timeout}s: {body}")
