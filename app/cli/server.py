"""``benchslice serve | worker | migrate | run``: start the service's processes on this machine."""

from __future__ import annotations

import logging
import os
import sys

import typer

from app.settings import Settings, exposure_refusal, is_loopback

log = logging.getLogger(__name__)


def guard_exposure(settings: Settings, host: str) -> None:
    """Exit 2 with one line saying why when ``host`` is exposed without keys; warn when allowed."""
    refusal = exposure_refusal(settings, host)
    if refusal is not None:
        print(f"benchslice: {refusal}", file=sys.stderr, flush=True)
        raise typer.Exit(code=2)
    if not is_loopback(host) and not settings.auth_enabled:
        log.warning("serving on %s with API keys disabled (ALLOW_UNAUTHENTICATED=true)", host)
        print(
            f"benchslice: WARNING serving on {host} with API keys disabled "
            "(ALLOW_UNAUTHENTICATED=true)",
            file=sys.stderr,
            flush=True,
        )


def serve(host: str | None = None, port: int | None = None, reload: bool = False) -> None:
    """Start the HTTP API (uvicorn).

    Example: `benchslice serve --port 8000`
    """
    import uvicorn

    from app.settings import get_settings

    settings = get_settings()
    guard_exposure(settings, host or settings.host)
    # the app checks again at startup (app/api/exposure.py); tell it the address outright
    os.environ["BENCHSLICE_BIND_HOST"] = host or settings.host
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=host or settings.host,
        port=port or settings.port,
        reload=reload,
    )


def worker(
    pool: str = "prefork", concurrency: int | None = None, loglevel: str | None = None
) -> None:
    """Start one Celery worker process on the configured queue.

    Example: `BROKER_URL=redis://127.0.0.1:6379/0 benchslice worker --concurrency 2`
    """
    from app.settings import get_settings

    settings = get_settings()
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker.celery_app",
        "worker",
        "--pool",
        pool,
        "--concurrency",
        str(concurrency or settings.worker_concurrency),
        "--queues",
        settings.celery_queue,
        "--loglevel",
        loglevel or settings.log_level,
        "--without-mingle",
        "--without-gossip",
    ]
    os.execv(sys.executable, argv)


def migrate(revision: str = typer.Argument("head")) -> None:
    """Apply database migrations (alembic upgrade).

    Example: `benchslice migrate` (or `benchslice migrate <revision>`)
    """
    from app.db.migrate import upgrade

    upgrade(revision=revision)


def run(migrate_first: bool = typer.Option(True, "--migrate/--no-migrate")) -> None:
    """Apply migrations, then run the API and one worker together until Ctrl-C.

    Example: `benchslice run` (what `make run` starts)
    """
    from app.launcher import main

    raise typer.Exit(main(migrate=migrate_first))
