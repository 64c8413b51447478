"""Apply the settings of the process-wide limits: rate limits, the expensive-work pool, job
quotas and the cache budget (called by ``create_app``)."""

from __future__ import annotations

from app.services.limits.expensive import EXPENSIVE
from app.services.limits.ratelimit import (
    RATES,
    Buckets,
    Limiter,
    MemoryBuckets,
    Policy,
    redis_buckets,
)
from app.services.platform import caching
from app.services.platform.quotas import QUOTAS
from app.settings import Settings


def buckets_for(settings: Settings) -> Buckets:
    """Redis buckets shared by every API process when Redis is configured, else in-process."""
    url = settings.rate_limit_redis_url or (
        settings.broker_url if settings.broker_is_redis else None
    )
    if url is None:
        return MemoryBuckets()
    return redis_buckets(url, settings.celery_key_prefix)


def configure_limits(settings: Settings) -> None:
    buckets = buckets_for(settings)
    limiter = None
    if settings.rate_limit_per_second > 0:
        project = None
        if settings.project_rate_limit_per_second > 0:
            project = Policy(
                settings.project_rate_limit_per_second, settings.project_rate_limit_burst
            )
        limiter = Limiter(
            buckets, Policy(settings.rate_limit_per_second, settings.rate_limit_burst), project
        )
    attempts = Limiter(
        buckets, Policy(settings.auth_attempts_per_second, settings.auth_attempts_burst)
    )
    RATES.configure(limiter, settings.expensive_cost, attempts)
    EXPENSIVE.configure(
        settings.expensive_slots,
        settings.expensive_queue,
        settings.expensive_per_key,
        settings.expensive_wait_seconds,
        settings.expensive_nice,
        settings.expensive_workers,
        settings.expensive_timeout_seconds,
        settings.expensive_sched_idle,
    )
    QUOTAS.max_active_jobs = settings.job_quota
    QUOTAS.analysis_max_cost = settings.analysis_max_cost
    QUOTAS.analysis_cost_quota = settings.analysis_cost_quota
    QUOTAS.project_max_active_jobs = settings.project_job_quota
    QUOTAS.project_analysis_cost_quota = settings.project_analysis_cost_quota
    caching.configure(settings.cache_max_bytes)
