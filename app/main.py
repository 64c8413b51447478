"""create_app(): settings, engine, routers under /v1, problem+json errors, stable operationIds."""

from __future__ import annotations

import gc
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute

from app.api.admission import AdmissionLimit
from app.api.deps import single_valued_query
from app.api.docs import install_docs
from app.api.errors import install_error_handlers, install_problem_openapi
from app.api.exposure import check_exposure
from app.api.middleware import BodySizeLimit, ResponseHeaders
from app.api.openapi_links import install_openapi_links
from app.api.routes import (
    analyses,
    audit,
    benchmarks,
    gates,
    health,
    items,
    jobs,
    leaderboards,
    results,
    sessions,
    subsets,
)
from app.api.slow_requests import BodyDeadline, install_header_deadline
from app.db.session import make_engine, make_sessionmaker
from app.queue import CeleryQueue
from app.services.limits.expensive import EXPENSIVE
from app.services.limits.limits_setup import configure_limits
from app.settings import Settings, get_settings
from app.web import install_web
from app.web import warm_up as warm_up_web

API_PREFIX = "/v1"


def operation_id(route: APIRoute) -> str:
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.ensure_local_dirs()
    engine = make_engine(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # first: a public address with keys disabled fails the startup, whatever the server
        check_exposure(settings)
        install_header_deadline(settings.request_header_seconds)  # before the first connection
        # a thread computing something expensive hands the GIL to waiting request threads
        # every millisecond instead of every 5 (cheap reads wait less behind it)
        sys.setswitchinterval(settings.gil_switch_interval_ms / 1000)
        # Build every route's parameter and response models now, before the first request:
        # recent FastAPI builds them lazily per router on the first request it answers (~250 ms
        # for the sessions router, paid inside a client's request). The OpenAPI schema walks
        # every route (the /ui ones too), so generating it does it.
        app.openapi()
        warm_up_web()
        # Move what startup made (~270k objects: numpy, scipy, matplotlib, SQLAlchemy, the
        # schema) out of the collector's reach: a full collection over them took ~130 ms,
        # an unpredictable pause inside some request (the p99 of session steps under load).
        gc.collect()
        gc.freeze()
        EXPENSIVE.prestart()  # EXPENSIVE_WORKERS=process: the children start now, not in a request
        yield
        app.state.job_queue.close()
        engine.dispose()

    app = FastAPI(
        title="benchslice",
        version="0.1.0",
        summary="Micro-benchmark selection and reliability (MDAD) for LLM evaluation",
        generate_unique_id_function=operation_id,
        lifespan=lifespan,
        dependencies=[Depends(single_valued_query)],
        docs_url=None,  # served with local assets: app/api/docs.py
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    app.state.job_queue = CeleryQueue.from_settings(settings)  # publishes by task name
    app.state.celery = app.state.job_queue.celery  # the broker the readiness check pings
    install_error_handlers(app)
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.max_body_bytes, max_json_depth=settings.max_json_depth
    )
    app.add_middleware(
        AdmissionLimit,
        max_in_flight=settings.max_requests_in_flight,
        hold_refused=settings.hold_refused_keys,
        hold_delay=settings.hold_refused_delay_seconds,
        per_key=settings.max_requests_in_flight_per_key,
        body_deadline=BodyDeadline(
            seconds=settings.request_body_seconds,
            min_rate=settings.request_body_min_rate,
            max_bytes=settings.max_body_bytes,
            buffer_bytes=settings.body_buffer_bytes,
        ),
    )
    app.add_middleware(ResponseHeaders)  # outermost: nosniff on every answer, 503s included
    configure_limits(settings)

    app.include_router(health.router)
    app.include_router(jobs.router, prefix=API_PREFIX)
    app.include_router(benchmarks.router, prefix=API_PREFIX)
    app.include_router(results.router, prefix=API_PREFIX)
    app.include_router(analyses.router, prefix=API_PREFIX)
    app.include_router(subsets.router, prefix=API_PREFIX)
    app.include_router(leaderboards.router, prefix=API_PREFIX)
    app.include_router(sessions.router, prefix=API_PREFIX)
    app.include_router(gates.router, prefix=API_PREFIX)
    app.include_router(items.router, prefix=API_PREFIX)
    app.include_router(audit.router, prefix=API_PREFIX)
    install_docs(app)
    install_web(app)  # read-only browser view under /ui (not in the OpenAPI schema)
    install_problem_openapi(app)
    install_openapi_links(app)  # stateful workflows (create session -> post batch -> get)
    return app
