"""One validated settings object; every knob has an env var and an embedded default."""

from __future__ import annotations

import ipaddress
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[1]


def _normalise_database_url(url: str) -> str:
    """Pin Postgres URLs to the psycopg (v3) driver; leave every other URL untouched."""
    for prefix in ("postgres://", "postgresql://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Settings(BaseSettings):
    """Service configuration, read from the environment (and an optional ``.env`` file)."""

    model_config = SettingsConfigDict(env_file=".env", env_ignore_empty=True, extra="ignore")

    environment: Literal["local", "test", "production"] = "local"
    database_url: str = "sqlite:///var/benchslice.sqlite3"
    database_echo: bool = False
    broker_url: str = "sqla+sqlite:///var/celery-broker.sqlite3"
    celery_queue: str = "benchslice"
    celery_key_prefix: str = Field(
        default="", description="Redis key prefix, isolates several deployments on one Redis"
    )
    broker_publish_timeout: float = Field(default=3.0, gt=0)
    broker_visibility_timeout: int | None = Field(
        default=None,
        gt=0,
        description="seconds before Redis redelivers an unacked task (default: hard limit + 600)",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    auth_enabled: bool = False
    allow_unauthenticated: bool = Field(
        default=False,
        description="serve on a non-loopback address with AUTH_ENABLED=false (refused otherwise)",
    )
    max_requests_in_flight: int = Field(
        default=32,
        ge=0,
        description="requests one API process serves at once; more get 503 + Retry-After at "
        "once instead of queueing (0 = no limit)",
    )
    max_requests_in_flight_per_key: int = Field(
        default=4,
        ge=0,
        description="requests of one API key one API process serves at once; more wait up to "
        "1 s for a place, then get 429 (instance admins exempt; 0 = no limit)",
    )
    hold_refused_keys: bool = Field(
        default=True,
        description="a credential refused with 429 for its rate or its expensive-work places is "
        "answered the same 429 at once, before authentication, until its Retry-After has passed "
        "(per API process)",
    )
    hold_refused_delay_seconds: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="a held 429 is sent when the hold ends, at most this many seconds after the "
        "request came (a client that ignores Retry-After then sends one request per hold, not "
        "hundreds); 0 = at once",
    )
    rate_limit_per_second: float = Field(
        default=200.0,
        ge=0,
        description="tokens per second refilled in each key's bucket (a cheap request costs 1); "
        "0 = no rate limits",
    )
    rate_limit_burst: float = Field(default=1000.0, gt=0, description="tokens a bucket holds")
    project_rate_limit_per_second: float = Field(
        default=400.0,
        ge=0,
        description="tokens per second refilled in each project's bucket, which every key with "
        "a role on the project draws on; 0 = no project buckets",
    )
    project_rate_limit_burst: float = Field(
        default=2000.0, gt=0, description="tokens a project's bucket holds"
    )
    rate_limit_redis_url: str | None = Field(
        default=None,
        description="Redis for the buckets shared by every API process (default: BROKER_URL "
        "when it is Redis, else in-process buckets)",
    )
    expensive_cost: float = Field(
        default=100.0, ge=0, description="extra tokens an expensive computation takes"
    )
    expensive_slots: int = Field(
        default=1, ge=1, description="expensive computations one API process runs at once"
    )
    expensive_queue: int = Field(
        default=4, ge=0, description="expensive computations waiting per process; more get 503"
    )
    expensive_nice: int = Field(
        default=10, ge=0, le=19, description="CPU priority (nice) of the expensive-work threads"
    )
    expensive_sched_idle: bool = Field(
        default=True,
        description="the expensive-work child processes run under SCHED_IDLE (Linux): only on "
        "CPU no other task wants",
    )
    expensive_per_key: int = Field(
        default=2, ge=1, description="running + waiting expensive computations per key and process"
    )
    expensive_wait_seconds: float = Field(default=30.0, gt=0)
    # process by default: under 20 cache-busting clients (bench/bench_fair_load.py, issue 26) the
    # cheap GET's p99 was 120-146 ms with SCHED_IDLE children and 182 ms with threads sharing the GIL
    expensive_workers: Literal["process", "thread"] = Field(
        default="process",
        description="where expensive computations run: child processes of each API process "
        "(the request threads keep the GIL) or threads of the API process",
    )
    expensive_timeout_seconds: float = Field(
        default=300.0,
        gt=0,
        description="an expensive computation running longer is killed (503, Retry-After)",
    )
    gil_switch_interval_ms: float = Field(
        default=1.0,
        gt=0,
        description="how often a running thread hands the GIL on (Python's default is 5 ms)",
    )
    auth_attempts_per_second: float = Field(
        default=1.0, gt=0, description="failed key attempts refilled per prefix and address"
    )
    auth_attempts_burst: float = Field(default=20.0, gt=0)
    job_quota: int = Field(default=20, ge=1, description="queued + running jobs per key")
    analysis_max_cost: int = Field(
        default=20_000, ge=1, description="runs x sizes x methods of one analysis"
    )
    project_job_quota: int = Field(
        default=40, ge=1, description="queued + running jobs of all keys of a project"
    )
    project_analysis_cost_quota: int = Field(
        default=120_000,
        ge=1,
        description="runs x sizes x methods of the active analyses of all keys of a project",
    )
    analysis_cost_quota: int = Field(
        default=60_000, ge=1, description="runs x sizes x methods of a key's active analyses"
    )
    cache_max_bytes: int = Field(
        default=512 * 1024 * 1024, gt=0, description="bytes all caches of a process hold together"
    )
    web_secret: str | None = Field(
        default=None,
        min_length=32,
        description="CSRF signing secret of the browser view (default: a random one stored in "
        "the database, shared by every process)",
    )
    web_session_hours: float = Field(default=8.0, gt=0, description="browser session lifetime")
    max_body_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    request_header_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a connection must complete a request's headers this long after connecting "
        "or after its previous response, else it is closed (uvicorn)",
    )
    request_body_seconds: float = Field(
        default=10.0,
        gt=0,
        description="time every request body gets to arrive, before it takes an admission place",
    )
    request_body_min_rate: float = Field(
        default=32 * 1024,
        gt=0,
        description="bytes per second a body must average beyond REQUEST_BODY_SECONDS (a body "
        "of n bytes is due REQUEST_BODY_SECONDS + n / rate after its headers; late: 408, closed)",
    )
    body_buffer_bytes: int = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="bytes all request bodies being received hold together in one API process; "
        "beyond it 503",
    )
    max_json_depth: int = Field(default=32, ge=2, description="nesting limit of JSON bodies")
    max_upload_lines: int = Field(default=2_000_000, gt=0, description="lines per uploaded file")
    max_line_bytes: int = Field(
        default=16 * 1024 * 1024, gt=0, description="longest line of an uploaded text file"
    )
    database_connect_timeout: int = Field(default=5, ge=1, description="seconds (Postgres)")
    database_statement_timeout: int = Field(
        default=60_000, ge=0, description="milliseconds per statement (Postgres); 0 = none"
    )
    database_pool_size: int = Field(default=5, ge=1)
    database_max_overflow: int = Field(default=10, ge=0)
    database_pool_timeout: float = Field(
        default=10.0, gt=0, description="seconds to wait for a pooled connection"
    )
    idempotency_ttl_hours: float = Field(
        default=24.0, gt=0, description="hours an Idempotency-Key's stored response is replayed"
    )
    session_idle_hours: float = Field(
        default=24.0,
        ge=0,
        description="hours without a batch after which an open evaluation session reads as "
        "abandoned (0: never)",
    )
    results_retention_days: float = Field(
        default=30.0,
        gt=0,
        description="days replaced or deleted model results are kept for `…/restore`",
    )
    precompute_min_models: int = Field(
        default=1000,
        ge=0,
        description="models a benchmark version needs before an upload, replace, delete or "
        "restore queues the worker job that precomputes its first views (default leaderboard, "
        "benchmark page panels); 0: never",
    )
    job_soft_time_limit: int = Field(default=1800, gt=0, description="seconds")
    job_hard_time_limit: int = Field(default=1860, gt=0, description="seconds")
    worker_concurrency: int = Field(default=1, ge=1)
    worker_native_threads: int = Field(
        default=1,
        ge=1,
        description="BLAS/OpenMP threads per worker process; more than the cores per process "
        "oversubscribes them (small matrix calls measured 40-60x slower on a busy 2-core machine)",
    )
    log_level: str = "INFO"
    shared_data_dir: Path = Field(
        default=REPO_ROOT.parent / "shared" / "data",
        validation_alias="BENCHSLICE_SHARED_DATA",
    )

    @field_validator("database_url")
    @classmethod
    def _driver(cls, value: str) -> str:
        return _normalise_database_url(value)

    @model_validator(mode="after")
    def _limits(self) -> Settings:
        if self.job_hard_time_limit <= self.job_soft_time_limit:
            raise ValueError("JOB_HARD_TIME_LIMIT must exceed JOB_SOFT_TIME_LIMIT")
        return self

    @property
    def results_retention(self) -> timedelta:
        return timedelta(days=self.results_retention_days)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def broker_is_redis(self) -> bool:
        return self.broker_url.startswith(("redis://", "rediss://"))

    @property
    def visibility_timeout(self) -> int:
        """Redis redelivers unacked tasks after this long: keep it above the hard limit."""
        return self.broker_visibility_timeout or self.job_hard_time_limit + 600

    def ensure_local_dirs(self) -> None:
        """Create the parent folder of file-based SQLite URLs (database and embedded broker)."""
        for url in (self.database_url, self.broker_url):
            for prefix in ("sqlite:///", "sqla+sqlite:///"):
                if url.startswith(prefix) and not url.startswith(prefix + ":memory:"):
                    Path(url[len(prefix) :]).parent.mkdir(parents=True, exist_ok=True)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to any interface


def exposure_refusal(settings: Settings, host: str | None = None) -> str | None:
    """Why the service must not start on ``host``, or ``None`` when it may.

    Keys disabled on a non-loopback address would let anyone on the network read and write
    everything, so that takes an explicit ``ALLOW_UNAUTHENTICATED=true``.
    """
    host = host or settings.host
    if is_loopback(host) or settings.auth_enabled or settings.allow_unauthenticated:
        return None
    return (
        f"refusing to serve on {host} with API keys disabled: anyone who can reach it could read "
        "and change every benchmark. Set AUTH_ENABLED=true (and create a key with `benchslice keys "
        "create`), or set ALLOW_UNAUTHENTICATED=true to serve it open on purpose."
    )


@lru_cache
def get_settings() -> Settings:
    settings = Settings()
    settings.ensure_local_dirs()
    return settings
