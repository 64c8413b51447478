"""``benchslice audit`` (the trail of writes) and the undo commands ``benchmarks restore``,
``benchmarks retire`` and ``benchmarks unretire`` (all through the HTTP API)."""

from __future__ import annotations

import json
from datetime import datetime

import typer

from app.cli.common import (
    BENCHMARK_HELP,
    ApiKeyOpt,
    JsonOpt,
    UrlOpt,
    api,
    print_json,
    print_table,
)


def audit(
    project: str | None = typer.Option(None, "--project", help="Only this project's writes"),
    benchmark: str | None = typer.Option(
        None, "--benchmark", "-b", help=f"Only writes on this benchmark ({BENCHMARK_HELP})"
    ),
    key: str | None = typer.Option(None, "--key", help="Only this key's writes (its id)"),
    action: str | None = typer.Option(
        None, "--action", help="e.g. results.upload, results.delete, job.cancel"
    ),
    since: datetime | None = typer.Option(None, "--since", help="At or after (ISO 8601)"),
    until: datetime | None = typer.Option(None, "--until", help="Before (ISO 8601)"),
    limit: int = typer.Option(100, "--limit", min=1, help="At most this many rows"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Who wrote what, newest first (needs `admin` on the project).

    Example: `benchslice audit --project team-a --action results.delete`
    """
    with api(url, api_key) as client:
        benchmark_id = client.get_benchmark(benchmark).benchmark_id if benchmark else None
        rows = []
        for row in client.iter_audit_events(
            project=project,
            benchmark_id=benchmark_id,
            key_id=key,
            action=action,
            since=since,
            until=until,
        ):
            rows.append(row)
            if len(rows) >= limit:
                break
    if as_json:
        print_json({"items": rows})
        return
    print_table(
        ["at", "key", "project", "action", "target", "summary"],
        [
            [
                r.at.isoformat(timespec="seconds"),
                r.key_name,
                r.project,
                r.action,
                " ".join(f"{k}={v}" for k, v in r.target.items()),
                json.dumps(r.summary, sort_keys=True),
            ]
            for r in rows
        ],
    )


def restore(
    benchmark: str = typer.Argument(..., help=BENCHMARK_HELP),
    model: str = typer.Argument(..., help="The model whose results come back"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Bring back a model's results as they were before their last replace or delete.

    Example: `benchslice benchmarks restore gpqa org/my-7b`
    """
    with api(url, api_key) as client:
        reply = client.restore_model_results(benchmark, model)
    if as_json:
        print_json(reply)
        return
    typer.echo(
        f"restored {reply.model.name}: accuracy {reply.accuracy:.4f} ({reply.n_items} items)"
    )


def _retire(benchmark: str, retired: bool, url: str | None, api_key: str | None, as_json: bool):
    with api(url, api_key) as client:
        version = client.retire_version(benchmark, retired=retired)
    if as_json:
        print_json(version)
        return
    state = "retired" if version.retired else "active"
    typer.echo(f"{version.name}@v{version.version} ({version.id}) is {state}")


def retire(
    benchmark: str = typer.Argument(..., help="name@vN or version id"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Hide a version from name resolution (its data stays; needs `admin` on the project).

    Example: `benchslice benchmarks retire gpqa@v2`
    """
    _retire(benchmark, True, url, api_key, as_json)


def unretire(
    benchmark: str = typer.Argument(..., help="name@vN or version id"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Make a retired version resolvable by name again.

    Example: `benchslice benchmarks unretire gpqa@v2`
    """
    _retire(benchmark, False, url, api_key, as_json)
