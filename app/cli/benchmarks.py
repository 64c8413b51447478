"""``benchslice benchmarks list|show|items|coverage`` and ``benchslice jobs get|wait|cancel``."""

from __future__ import annotations

import fnmatch

import typer

from app.cli.common import (
    ApiKeyOpt,
    JsonOpt,
    UrlOpt,
    api,
    int_list,
    pct,
    print_json,
    print_table,
    split_list,
    wait_job,
)

benchmarks_app = typer.Typer(
    help="List benchmarks and show one (items, subtasks, models and their accuracy).",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
jobs_app = typer.Typer(
    help="Inspect, wait for and cancel jobs.", no_args_is_help=True, rich_markup_mode="markdown"
)


@benchmarks_app.command("list")
def list_(
    name: str | None = typer.Option(None, "--name", help="Only versions of this benchmark"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Benchmark versions, newest first.

    Example: `benchslice benchmarks list`
    """
    with api(url, api_key) as client:
        versions = list(client.iter_benchmarks(name=name))
    if as_json:
        print_json({"items": versions})
        return
    print_table(
        ["name", "version", "items", "models", "subtasks", "id"],
        [[v.name, v.version, v.n_items, v.n_models, len(v.subtasks), str(v.id)] for v in versions],
    )


@benchmarks_app.command("show")
def show(
    benchmark: str = typer.Argument(
        ..., help="Benchmark name (latest version), name@vN or version id"
    ),
    models: bool = typer.Option(False, "--models", help="List every model with its accuracy"),
    match: list[str] | None = typer.Option(
        None,
        "--match",
        help="Only models whose name matches this glob (repeatable; implies --models)",
    ),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """One benchmark: items, subtasks, models with results, accuracy summary.

    Example: `benchslice benchmarks show gpqa --match 'meta-llama/*'`
    """
    with api(url, api_key) as client:
        detail = client.get_benchmark(benchmark)
    rows = sorted(detail.models, key=lambda m: (-m.accuracy, m.name))
    if match:
        rows = [m for m in rows if any(fnmatch.fnmatchcase(m.name, p) for p in match)]
    if as_json:
        print_json(detail.model_copy(update={"models": rows}))
        return
    acc = detail.accuracy
    summary = (
        f"accuracy mean {pct(acc.mean)}, min {pct(acc.min)}, median {pct(acc.median)}, "
        f"max {pct(acc.max)}"
        if acc
        else "no results yet"
    )
    typer.echo(
        f"{detail.name} v{detail.version}  id {detail.id}\n"
        f"{detail.n_items} items, {len(detail.subtasks)} subtask(s), "
        f"{detail.n_models} models; {summary}"
    )
    for c in detail.costs:  # measured on the stored models, summarised per item
        typer.echo(
            f"cost per item ({c.unit}): median {c.median_per_item:,.4g} "
            f"(5-95 %: {c.p5_per_item:,.4g} - {c.p95_per_item:,.4g}), all items "
            f"{c.full_benchmark:,.6g}; {c.items} items, {c.models} models; {c.source}"
        )
    if models or match:
        print_table(
            ["model", "accuracy", "coverage"],
            [[m.name, pct(m.accuracy), pct(m.coverage)] for m in rows],
        )


ITEM_FLAGS = ("constant", "saturated", "negative_discrimination", "misfit")


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


@benchmarks_app.command("items")
def items(
    benchmark: str = typer.Argument(
        ..., help="Benchmark name (latest version), name@vN or version id"
    ),
    flagged: bool = typer.Option(False, "--flagged", help="Only items with any flag"),
    flag: list[str] | None = typer.Option(
        None, "--flag", help=f"Only items with this flag (repeatable): {', '.join(ITEM_FLAGS)}"
    ),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Item health: accuracy, point-biserial, 2PL discrimination/difficulty/fit and flags per
    item, and the flag counts.

    Example: `benchslice benchmarks items gpqa --flagged`
    """
    flags = list(ITEM_FLAGS) if flagged else list(flag or [])
    with api(url, api_key) as client:
        page = client.all_items(benchmark, flags=flags or None)
    if as_json:
        print_json(page)
        return
    s = page.summary
    counts = ", ".join(f"{k} {v}" for k, v in s.counts.items())
    typer.echo(
        f"{s.n_items} items, {s.n_models} models; flagged {s.n_flagged} ({counts}); "
        f"effective informative items {s.effective_informative:.1f}"
        + ("" if s.irt else "; no IRT fit stored (discrimination, difficulty, fit empty)")
    )
    print_table(
        ["item", "subtask", "doc", "accuracy", "r_pb", "a", "b", "fit", "flags"],
        [
            [
                r.item_id,
                r.subtask,
                r.doc_id,
                pct(r.accuracy),
                _num(r.point_biserial),
                _num(r.discrimination, "{:.2f}"),
                _num(r.difficulty, "{:.2f}"),
                _num(r.fit, "{:.2f}"),
                ",".join(r.flags) or "-",
            ]
            for r in page.items
        ],
    )


@jobs_app.command("get")
def job_get(
    job_id: str = typer.Argument(...),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
) -> None:
    """A job's status, progress, result or error (JSON).

    Example: `benchslice jobs get 5f0c…`
    """
    with api(url, api_key) as client:
        print_json(client.get_job(job_id))


@jobs_app.command("wait")
def job_wait(
    job_id: str = typer.Argument(...),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds before giving up"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
) -> None:
    """Wait for a job with a progress bar; print the finished job (exit 2 if it failed).

    Example: `benchslice jobs wait 5f0c… --timeout 600`
    """
    with api(url, api_key) as client:
        print_json(wait_job(client, job_id, f"job {job_id[:8]}", timeout))


@jobs_app.command("cancel")
def job_cancel(
    job_id: str = typer.Argument(...),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
) -> None:
    """Cancel a queued job, or ask a running one to stop.

    Example: `benchslice jobs cancel 5f0c…`
    """
    with api(url, api_key) as client:
        print_json(client.cancel_job(job_id))


@benchmarks_app.command("coverage")
def coverage(
    benchmark: str = typer.Argument(
        ..., help="Benchmark name (latest version), name@vN or version id"
    ),
    start: bool = typer.Option(False, "--start", help="Run a new study (a job) and wait for it"),
    methods: str | None = typer.Option(None, "--methods", help="comma-separated selectors"),
    sizes: str | None = typer.Option(None, "--sizes", help="comma-separated subset sizes"),
    repeats: int | None = typer.Option(None, "--repeats", min=1, max=20, help="splits"),
    seed: int | None = typer.Option(None, "--seed", min=0),
    extrapolation: bool = typer.Option(
        False,
        "--extrapolation",
        help="With --start: also fit on the weakest 80 % of models and score the strongest 20 % "
        "(and the mirror): coverage for models beyond every source",
    ),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds to wait for the job"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Interval coverage on the benchmark's own models: overall, lowest / highest fifth of
    targets, mean width and |error| per method x estimator x interval x size.

    Example: `benchslice benchmarks coverage gpqa --start --sizes 25,50 --repeats 5`
    """
    with api(url, api_key) as client:
        if start:
            job = client.start_coverage(
                benchmark,
                methods=split_list(methods),
                sizes=int_list(sizes, "--sizes"),
                repeats=repeats,
                seed=seed,
                extrapolation=extrapolation,
            )
            wait_job(client, job.id, f"coverage {str(job.id)[:8]}", timeout)
        run = client.get_coverage(benchmark)
    if as_json:
        print_json(run)
        return
    print_table(
        [
            "split",
            "method",
            "estimator",
            "interval",
            "n",
            "coverage",
            "low 20 %",
            "high 20 %",
            "width",
            "|err|",
        ],
        [
            [
                r.split,
                r.method,
                r.estimator,
                r.interval or "",
                r.n,
                _num(r.coverage),
                _num(r.coverage_low),
                _num(r.coverage_high),
                _num(r.mean_width, "{:.4f}"),
                _num(r.mean_abs_error, "{:.4f}"),
            ]
            for r in run.rows
        ],
        title=(
            f"Coverage of the 95 % intervals on {run.n_models} models ({run.n_sources} sources / "
            f"{run.n_targets} targets, {run.repeats} splits, seed {run.seed})"
        ),
    )
