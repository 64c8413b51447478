"""``benchslice analyze``: run an MDAD analysis on the service, print the table, save the plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from app import formatting as F
from app.cli.common import (
    ALL_METHODS,
    BENCHMARK_HELP,
    ApiKeyOpt,
    JobProgress,
    JsonOpt,
    UrlOpt,
    api,
    err,
    fail,
    fmt,
    int_list,
    print_json,
    print_table,
    split_list,
)

if TYPE_CHECKING:
    from app.schemas.analyses import AnalysisPublic


def _pts(value: float | None) -> str:
    """Points without the unit (the table's header says "accuracy points")."""
    return F.pts(value, unit=False)


def analyze(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help=BENCHMARK_HELP),
    methods: str = typer.Option(ALL_METHODS, "--methods", help="Comma-separated selectors"),
    sizes: str = typer.Option("10,25,50,100,200", "--sizes", help="Comma-separated sizes"),
    runs: int | None = typer.Option(None, "--runs", min=2, help="Protocol runs [50]"),
    sources: int | None = typer.Option(None, "--sources", min=1, help="Source models [300]"),
    targets: int | None = typer.Option(None, "--targets", min=2, help="Target models [50]"),
    mode: str | None = typer.Option(None, "--mode", help="robust | paper [robust]"),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Fix the analysis' draws"),
    gap: float | None = typer.Option(
        None, "--gap", help="Gap the recommendation must detect, fraction [0.02]"
    ),
    split: str = typer.Option("seen", "--split", help="Table rows: seen | unseen | all"),
    plots: Path | None = typer.Option(
        None,
        "--plots",
        help="Save mdad.svg and agreement-METHOD.svg (.png with --image-format png) into this folder",
        file_okay=False,
    ),
    image_format: str = typer.Option("svg", "--image-format", help="svg | png"),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds to wait for the job"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Measure how reliable subsets of each size are: run an MDAD analysis as a job.

    The paper's protocol and MDAD: the smallest accuracy gap that a subset of size n orders
    like the full benchmark with P >= 0.8, per method and size.

    Prints the MDAD table (accuracy points, with CIs) and the recommendation; `--plots DIR`
    saves the MDAD-vs-size plot and one agreement-vs-gap plot per method.

    Example:

        benchslice analyze --benchmark gpqa --methods random,anchor_points --sizes 10,25,50,100 --runs 20 --plots plots/
    """
    if mode not in (None, "robust", "paper"):
        raise typer.BadParameter("expected robust or paper", param_hint="--mode")
    if split not in ("seen", "unseen", "all"):
        raise typer.BadParameter("expected seen, unseen or all", param_hint="--split")
    if image_format not in ("svg", "png"):
        raise typer.BadParameter("expected svg or png", param_hint="--image-format")
    if plots is not None:
        try:  # before queueing the analysis, so an unwritable folder fails fast
            plots.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise fail(f"cannot create {plots}: {exc}") from None
    method_list = split_list(methods) or []
    size_list = int_list(sizes, "--sizes") or []
    with api(url, api_key) as client:
        analysis = client.create_analysis(
            benchmark,
            methods=method_list,
            sizes=size_list,
            runs=runs,
            n_sources=sources,
            n_targets=targets,
            mode=mode,  # type: ignore[arg-type]
            seed=seed,
            gap=gap,
        )
        err(f"analysis {analysis.id} queued (job {analysis.job_id}, seed {analysis.seed})")
        with JobProgress(f"analysis of {analysis.benchmark_name} (runs)") as progress:
            client.wait(analysis.job_id, progress=progress, timeout=timeout)
        analysis = client.get_analysis(analysis.id)
        saved: list[Path] = []
        if plots is not None:
            target = plots / f"mdad.{image_format}"
            target.write_bytes(client.plot(analysis.id, "mdad", image_format))  # type: ignore[arg-type]
            saved.append(target)
            for method in analysis.methods:
                target = plots / f"agreement-{method}.{image_format}"
                target.write_bytes(
                    client.plot(analysis.id, "agreement", image_format, method=method)  # type: ignore[arg-type]
                )
                saved.append(target)
    if as_json:
        print_json({"analysis": analysis, "plots": [str(p) for p in saved]})
        return
    _print_analysis(analysis, split)
    for path in saved:
        err(f"saved {path}")


def _print_analysis(a: AnalysisPublic, split: str) -> None:
    result = a.result
    assert result is not None
    typer.echo(
        f"MDAD on {a.benchmark_name} ({a.mode} mode, {a.runs} runs, {a.n_sources} sources, "
        f"{a.n_targets} targets, seed {a.seed}; {result.models_used} models, "
        f"{result.n_items} items; accuracy points, P(same order) >= {a.threshold:g})"
    )
    cells = [c for c in result.mdad if split == "all" or c.split == split]
    print_table(
        ["method", "n", "split", "MDAD", "95% CI", "agreement", "abs err", "tau"],
        [
            [
                c.method,
                c.n,
                c.split,
                _pts(c.mdad) if c.reached or c.mdad is not None else f">{_pts(c.max_gap)}",
                F.interval(c.ci_low, c.ci_high, _pts),
                fmt(c.mean_agreement),
                _pts(c.mean_abs_error),
                fmt(c.kendall_tau),
            ]
            for c in cells
        ],
    )
    typer.echo(
        "split: seen = the half of each subtask's items the subsets are drawn from decides the "
        "true order; unseen = the other half (how the subset generalises). 95% CI: bootstrap "
        "of the runs."
    )
    if "random" in a.methods:
        typer.echo(
            f"The random rows are estimated from {a.runs} runs on the seen half; `benchslice "
            "verdict` and `plan` report random's exact MDAD over all items and model pairs, "
            "which differs."
        )
    rec = result.recommendation
    smallest = ", ".join(
        f"{m}: {n if n is not None else 'none of the sizes'}" for m, n in rec.smallest_n.items()
    )
    typer.echo(f"smallest n detecting a {_pts(rec.gap)}-point gap: {smallest}")
    for row in rec.random_vs_best or ():
        if row.best_method in (None, "random"):
            continue
        random = "not reached" if row.random_mdad is None else _pts(row.random_mdad)
        within = {
            True: "within the best method's CI",
            False: "outside the best method's CI",
            None: "CI comparison undecidable",
        }[row.random_within_ci]
        typer.echo(
            f"  n={row.n}: best {row.best_method} {_pts(row.best_mdad)}, random {random} ({within})"
        )
