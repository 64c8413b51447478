"""benchslice command line: serve, worker, migrate, run (API + worker together)."""

from __future__ import annotations

import os
import sys

import typer

app = typer.Typer(
    help="benchslice: micro-benchmark selection and reliability service",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)


@app.command()
def serve(host: str | None = None, port: int | None = None, reload: bool = False) -> None:
    """Start the HTTP API (uvicorn).

    Example: `benchslice serve --port 8000`
    """
    import uvicorn

    from app.settings import get_settings

    settings = get_settings()
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=host or settings.host,
        port=port or settings.port,
        reload=reload,
    )


@app.command()
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


@app.command()
def migrate(revision: str = typer.Argument("head")) -> None:
    """Apply database migrations (alembic upgrade).

    Example: `benchslice migrate` (or `benchslice migrate <revision>`)
    """
    from app.db.migrate import upgrade

    upgrade(revision=revision)


@app.command()
def run(migrate_first: bool = typer.Option(True, "--migrate/--no-migrate")) -> None:
    """Apply migrations, then run the API and one worker together until Ctrl-C.

    Example: `benchslice run` (what `make run` starts)
    """
    from app.launcher import main

    raise typer.Exit(main(migrate=migrate_first))


# Other packages add their commands below, one line each.
app.add_typer(__import__("app.cli_keys", fromlist=["app"]).app, name="keys")
from app.cli_offline import mdad  # noqa: E402

app.command(
    "mdad",
    epilog="Example: `benchslice mdad --matrix ../shared/data/gpqa.npz --methods random,"
    "tiny_benchmarks --sizes 10,25,50 --runs 10 --json`",
)(mdad)

# Client-side commands (talk to a running service through app.client).
from app.cli_analyses import analyze  # noqa: E402
from app.cli_benchmarks import benchmarks_app, jobs_app  # noqa: E402
from app.cli_push import push  # noqa: E402
from app.cli_subsets import score, subset_app  # noqa: E402
from app.cli_verdicts import plan, verdict  # noqa: E402

app.command("push")(push)
app.add_typer(subset_app, name="subset")
app.command("score")(score)
app.command("verdict")(verdict)
app.command("plan")(plan)
app.command("analyze")(analyze)
app.add_typer(benchmarks_app, name="benchmarks")
app.add_typer(jobs_app, name="jobs")

# An example under every --help: the keys commands get theirs here (their module has none).
_EXAMPLES = {
    "create": "benchslice keys create --name ci --scope write",
    "list": "benchslice keys list",
    "revoke": "benchslice keys revoke 3f9a1c2b7d4e",
}
for _info in __import__("app.cli_keys", fromlist=["app"]).app.registered_commands:
    if _info.epilog is None and _info.name in _EXAMPLES:
        _info.epilog = f"Example: `{_EXAMPLES[_info.name]}`"


if __name__ == "__main__":
    app()
