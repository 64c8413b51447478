"""The worker's Celery app, configured from Settings: json only, late acks + prefetch 1, time limits,
one queue. Built at import (``celery -A worker.celery_app worker``); the API never imports it."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init
from threadpoolctl import threadpool_limits

from app.queue import make_celery_client
from app.settings import Settings, get_settings


def make_celery(settings: Settings) -> Celery:
    """The worker's Celery app: the API's client configuration (:func:`app.queue.make_celery_client`:
    broker, queue, json, transport options) plus the tasks and the consumer settings."""
    app = make_celery_client(settings)
    embedded = not settings.broker_is_redis and not settings.broker_url.startswith("amqp")
    app.conf.update(
        include=["worker.tasks"],
        task_acks_late=True,  # run_job is idempotent: a redelivered job that finished returns
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.job_soft_time_limit,
        task_time_limit=settings.job_hard_time_limit,
        worker_concurrency=settings.worker_concurrency,
        worker_hijack_root_logger=False,
        # The embedded transports have no fanout exchange for remote control / events.
        worker_enable_remote_control=not embedded,
        worker_send_task_events=False,
    )
    return app


def limit_native_threads(**_: Any) -> None:
    """Cap BLAS/OpenMP pools in each worker process (prefork children and the solo pool)."""
    threadpool_limits(limits=get_settings().worker_native_threads)


worker_init.connect(limit_native_threads, weak=False)
worker_process_init.connect(limit_native_threads, weak=False)

celery_app = make_celery(get_settings())
app = celery_app
