"""``benchslice leaderboard``: ranks with rank intervals and significance tiers."""

from __future__ import annotations

from pathlib import Path

import typer

from app.cli.common import ApiKeyOpt, UrlOpt, api, fmt, pct, print_json, print_table
from app.cli.summary import SummaryOpt, leaderboard_summary, write_summary

FORMATS = ("table", "json", "csv", "markdown")
CORRECTIONS = ("holm", "bh", "none")


def _interval(low: float, high: float) -> str:
    return f"[{pct(low)}, {pct(high)}]"


def leaderboard(
    benchmark: str = typer.Option(
        ..., "--benchmark", "-b", help="Benchmark: name (latest version), name@vN or version id"
    ),
    subset: str | None = typer.Option(
        None,
        "--subset",
        help="Rank on this stored subset's items (tests of the full-benchmark differences)",
    ),
    match: str | None = typer.Option(
        None,
        "--match",
        help="Models whose name matches (glob with * ? [ ], else substring; case-insensitive)",
    ),
    models: str | None = typer.Option(
        None, "--models", help="Model names, comma-separated (with --match: both)"
    ),
    top: int | None = typer.Option(
        None, "--top", min=2, help="Keep the TOP most accurate selected models"
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="Level of the tests and intervals"),
    correction: str = typer.Option(
        "holm", "--correction", help="holm (family-wise; simultaneous rank intervals) | bh | none"
    ),
    mid_p: bool = typer.Option(False, "--mid-p", help="Mid-p exact tests"),
    pairs: bool = typer.Option(False, "--pairs", help="Print the pairwise table instead"),
    format: str = typer.Option("table", "--format", "-f", help="table | json | csv | markdown"),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json"),
    summary: Path | None = SummaryOpt,
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
) -> None:
    """Which rank differences are real: rank, rank interval, tier and accuracy with its interval.

    Every pair of models is tested (exact McNemar; Holm by default). The rank interval is
    [1 + #significantly better, m - #significantly worse]; a tier is the best model not yet
    placed plus every model not significantly worse than it. With `--subset`, the accuracies are
    the subset's estimates and the tests ask about the full benchmark, so tiers get wider.

    Example:

        benchslice leaderboard --benchmark gpqa --top 30
        benchslice leaderboard --benchmark gpqa --match 'qwen*' --pairs --format csv > pairs.csv
        benchslice leaderboard --benchmark gpqa --subset $SUBSET --format markdown
    """
    if as_json:
        format = "json"
    if format not in FORMATS:
        raise typer.BadParameter(f"choose from {', '.join(FORMATS)}", param_hint="--format")
    if correction not in CORRECTIONS:
        raise typer.BadParameter(f"choose from {', '.join(CORRECTIONS)}", param_hint="--correction")
    if not 0 < alpha < 1:
        raise typer.BadParameter("expected a level in (0, 1)", param_hint="--alpha")
    if summary is not None and pairs:
        raise typer.BadParameter(
            "the summary reports the ranking; drop --pairs", param_hint="--summary"
        )
    query = {
        "models": models,
        "match": match,
        "top": top,
        "subset": subset,
        "alpha": alpha,
        "correction": correction,
        "mid_p": mid_p or None,
    }
    with api(url, api_key) as client:
        base = client.url
        if summary is not None:
            ranked = client.leaderboard(benchmark, **query)  # type: ignore[arg-type]
            write_summary(summary, leaderboard_summary(ranked, base))
        if format in ("csv", "markdown"):
            typer.echo(
                client.export_leaderboard(benchmark, format, pairs=pairs, **query),  # type: ignore[arg-type]
                nl=False,
            )
            return
        board = (
            client.leaderboard_pairs(benchmark, **query)  # type: ignore[arg-type]
            if pairs
            else client.leaderboard(benchmark, **query)  # type: ignore[arg-type]
        )
    if format == "json":
        print_json(board)
        return
    where = f"{board.benchmark}@v{board.version}" + (
        f" subset {board.subset_id[:12]}" if board.subset_id else ""
    )
    title = (
        f"{where}: {board.n_models} models on {board.n_items} items, {board.n_tiers} "
        f"tier{'' if board.n_tiers == 1 else 's'} "
        f"({board.correction}, alpha = {board.alpha:g})"
    )
    if pairs:
        print_table(
            ["model A", "model B", "diff", "interval", "p", "p adjusted", "P(A better)", "sig"],
            [
                [
                    p.model_a,
                    p.model_b,
                    pct(p.difference),
                    _interval(p.ci_low, p.ci_high),
                    fmt(p.p_value, 4),
                    fmt(p.p_adjusted, 4),
                    fmt(p.p_better),
                    p.significant,
                ]
                for p in board.pairs  # type: ignore[union-attr]
            ],
            title=f"{title}; {board.n_significant} of {board.n_pairs} pairs significant"  # type: ignore[union-attr]
            + (
                f"; the first {len(board.pairs)} shown (narrow with --match/--models/--top)"  # type: ignore[union-attr]
                if board.next_cursor  # type: ignore[union-attr]
                else ""
            ),
        )
    else:
        print_table(
            ["rank", "rank interval", "tier", "model", "accuracy", "interval", "items"],
            [
                [
                    r.rank,
                    f"{r.rank_low}-{r.rank_high}",
                    r.tier,
                    r.model,
                    pct(r.accuracy),
                    _interval(r.ci_low, r.ci_high),
                    r.n_items,
                ]
                for r in board.rows  # type: ignore[union-attr]
            ],
            title=title,
        )
    for e in board.excluded:
        typer.echo(f"left out: {e.model} ({e.reason})", err=True)
    typer.echo(f"method: {board.method}", err=True)
