"""Celery configured from Settings: json only, late acks + prefetch 1, time limits, one queue."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init
from kombu import Queue
from threadpoolctl import threadpool_limits

from app.settings import Settings, get_settings


def make_celery(settings: Settings) -> Celery:
    app = Celery(
        "benchslice", broker=settings.broker_url, include=["worker.tasks", "worker.analysis"]
    )
    transport_options: dict[str, Any] = {}
    if settings.broker_is_redis:
        transport_options["visibility_timeout"] = settings.visibility_timeout
        if settings.celery_key_prefix:
            transport_options["global_keyprefix"] = settings.celery_key_prefix
    embedded = not settings.broker_is_redis and not settings.broker_url.startswith("amqp")
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,
        result_backend=None,
        task_default_queue=settings.celery_queue,
        task_queues=[Queue(settings.celery_queue, routing_key=settings.celery_queue)],
        task_default_routing_key=settings.celery_queue,
        task_acks_late=True,  # run_job is idempotent: a redelivered job that finished returns
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.job_soft_time_limit,
        task_time_limit=settings.job_hard_time_limit,
        broker_transport_options=transport_options,
        broker_connection_timeout=settings.broker_publish_timeout,
        broker_connection_retry_on_startup=True,
        worker_concurrency=settings.worker_concurrency,
        worker_hijack_root_logger=False,
        # The embedded transports have no fanout exchange for remote control / events.
        worker_enable_remote_control=not embedded,
        worker_send_task_events=False,
        timezone="UTC",
        enable_utc=True,
    )
    return app


def limit_native_threads(**_: Any) -> None:
    """Cap BLAS/OpenMP pools in each worker process (prefork children and the solo pool)."""
    threadpool_limits(limits=get_settings().worker_native_threads)


worker_init.connect(limit_native_threads, weak=False)
worker_process_init.connect(limit_native_threads, weak=False)

celery_app = make_celery(get_settings())
app = celery_app
