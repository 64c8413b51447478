"""``benchslice verdict`` (exit 0 distinguishable, 1 not, 2 error) and ``benchslice plan``."""

from __future__ import annotations

import typer

from app.cli.common import (
    BENCHMARK_HELP,
    ApiKeyOpt,
    JsonOpt,
    UrlOpt,
    api,
    fmt,
    pct,
    print_json,
    print_table,
)

EXIT_DISTINGUISHABLE = 0
EXIT_NOT_DISTINGUISHABLE = 1


def _pts(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} pts"


def verdict(
    model_a: str = typer.Argument(..., help="First model (full results on the benchmark)"),
    model_b: str = typer.Argument(..., help="Second model"),
    benchmark: str | None = typer.Option(None, "--benchmark", "-b", help=BENCHMARK_HELP),
    size: int | None = typer.Option(None, "--size", "-n", min=1, help="Subset size to judge"),
    method: str = typer.Option("random", "--method", help="Selector (random is exact)"),
    subset: str | None = typer.Option(
        None,
        "--subset",
        help="Judge this fixed subset instead (exit 0 when it orders the pair like the full "
        "benchmark, 1 when not); replaces --benchmark/--size/--method",
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="P(same order) needed to call them distinguishable [0.8]"
    ),
    min_discordant: int | None = typer.Option(
        None,
        "--min-discordant",
        min=0,
        help="Fewest items only one model gets right for the paired outcome to decide [10]",
    ),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Can a SIZE-item subset tell model A from model B the way the full benchmark does?

    Prints one line with the answer, then the details. Exit code **0** when distinguishable,
    **1** when not, **2** on any error, so a CI step can gate on it. Methods other than random
    answer from the benchmark's latest analysis (run `benchslice analyze` first).

    With `--subset ID`: does that fixed subset order the pair as the full benchmark does (exit 0
    yes, 1 no), plus the probability for a fresh subset of its method and size.

    Example:

        benchslice verdict --benchmark gpqa org/model-a org/model-b --size 25 || echo "too close"
        benchslice verdict --subset $SUBSET org/model-a org/model-b
    """
    if threshold is not None and not 0.5 <= threshold < 1:
        raise typer.BadParameter("expected a probability in [0.5, 1)", param_hint="--threshold")
    if subset is not None:
        if benchmark is not None or size is not None:
            raise typer.BadParameter("give either --subset or --benchmark/--size")
        _subset_verdict(subset, model_a, model_b, threshold, url, api_key, as_json)
    if benchmark is None or size is None:
        raise typer.BadParameter("--benchmark and --size are required (or --subset)")
    with api(url, api_key) as client:
        v = client.verdict(
            benchmark,
            model_a,
            model_b,
            size=size,
            method=method,
            threshold=threshold,
            min_discordant=min_discordant,
        )
    if as_json:
        print_json(v)
    else:
        answer = "DISTINGUISHABLE" if v.distinguishable else "NOT distinguishable"
        need = (
            f"; needs about {v.size_needed} items"
            if v.size_needed and not v.distinguishable
            else ""
        )
        typer.echo(
            f"{answer}: {v.model_a} ({pct(v.full_accuracy_a)}) vs {v.model_b} "
            f"({pct(v.full_accuracy_b)}), gap {_pts(abs(v.gap))} — a {v.method} subset of "
            f"{v.size} orders them as the full benchmark with P = {v.p_same_order:.2f}{need}"
        )
        print_table(
            [
                "P(same order)",
                "CI",
                "P(tie)",
                "P(reversed)",
                f"MDAD at {v.size}",
                "size needed",
            ],
            [
                [
                    fmt(v.p_same_order),
                    f"[{fmt(v.ci[0])}, {fmt(v.ci[1])}]" if len(v.ci) == 2 else "-",
                    fmt(v.p_tie),
                    fmt(v.p_reversed),
                    _pts(v.mdad_at_size),
                    v.size_needed,
                ]
            ],
        )
        if v.paired is not None:
            _print_paired(v.paired)
        for w in v.warnings:
            typer.echo(f"warning ({w.code}): {w.message}")
    raise typer.Exit(EXIT_DISTINGUISHABLE if v.distinguishable else EXIT_NOT_DISTINGUISHABLE)


def _print_paired(p) -> None:
    typer.echo(
        f"paired on all items: both right {p.n11}, only A {p.n10}, only B {p.n01}, both wrong "
        f"{p.n00}; P(A better) = {p.p_a_better:.3f} (Dirichlet posterior), exact McNemar "
        f"p = {p.mcnemar_p:.3g}; {p.status.upper()} "
        f"({p.n10 + p.n01} discordant items, {p.min_discordant} needed)"
    )


def _subset_verdict(
    subset_id: str,
    model_a: str,
    model_b: str,
    threshold: float | None,
    url: str | None,
    api_key: str | None,
    as_json: bool,
) -> None:
    with api(url, api_key) as client:
        v = client.subset_verdict(subset_id, model_a, model_b, threshold=threshold)
    if as_json:
        print_json(v)
    else:
        answer = "SAME ORDER" if v.same_order else "TIE" if v.tie else "REVERSED"
        typer.echo(
            f"{answer}: subset {v.subset_id[:12]} estimates {v.model_a} at "
            f"{pct(v.subset_estimate_a)} and {v.model_b} at {pct(v.subset_estimate_b)}; the full "
            f"benchmark says {pct(v.full_accuracy_a)} vs {pct(v.full_accuracy_b)} "
            f"(gap {_pts(abs(v.gap))})"
        )
        fresh = v.fresh_draw
        if fresh is not None:
            typer.echo(
                f"a fresh {fresh.method} subset of {fresh.size} would order them right with "
                f"P = {fresh.p_same_order:.2f} "
                f"({'distinguishable' if fresh.distinguishable else 'not distinguishable'})"
            )
        elif v.fresh_draw_unavailable:
            typer.echo(f"fresh draw: {v.fresh_draw_unavailable}")
        for w in v.warnings:
            typer.echo(f"warning ({w.code}): {w.message}")
    raise typer.Exit(EXIT_DISTINGUISHABLE if v.same_order else EXIT_NOT_DISTINGUISHABLE)


def plan(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help=BENCHMARK_HELP),
    gap: float = typer.Option(
        ..., "--gap", help="Accuracy gap to detect, as a fraction (0.02 = 2 points)"
    ),
    method: str = typer.Option("random", "--method", help="Selector"),
    probability: float | None = typer.Option(
        None, "--probability", help="P(same order) to reach at that gap [0.8]"
    ),
    pair: tuple[str, str] | None = typer.Option(
        None,
        "--pair",
        help="MODEL_A MODEL_B: the significance answer from this pair's discordance",
    ),
    alpha: float | None = typer.Option(None, "--alpha", help="Paired test's level [0.05]"),
    power: float | None = typer.Option(None, "--power", help="Paired test's power [0.8]"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The smallest subset size that tells apart models GAP apart (its MDAD is at most GAP),
    and, labelled apart, the shared items a paired significance test needs to detect GAP.

    Example:

        benchslice plan --benchmark gpqa --gap 0.05
        benchslice plan --benchmark gpqa --gap 0.03 --pair org/model-a org/model-b --power 0.9
    """
    if not 0 < gap < 1:
        raise typer.BadParameter("expected a fraction in (0, 1), e.g. 0.02", param_hint="--gap")
    with api(url, api_key) as client:
        p = client.plan(
            benchmark,
            gap=gap,
            method=method,
            probability=probability,
            model_a=pair[0] if pair else None,
            model_b=pair[1] if pair else None,
            alpha=alpha,
            power=power,
        )
    if as_json:
        print_json(p)
        return
    if p.size is None:
        typer.echo(
            f"no evaluated {p.method} subset size detects a {_pts(p.gap)} gap at "
            f"P >= {p.probability:g} on {benchmark} (basis: {p.basis})"
        )
    else:
        typer.echo(
            f"{p.size} items: the smallest {p.method} subset whose MDAD on {benchmark} is at "
            f"most {_pts(p.gap)} (P >= {p.probability:g}; basis: {p.basis})"
        )
    rows = _evidence_rows(p.evidence)
    if rows:
        print_table(["size", "MDAD"], rows)
    sig = p.significance
    if sig is not None:
        source = "this pair's" if sig.source == "pair" else "the benchmark's typical (median)"
        typer.echo(
            f"significance (paired test, a different question): {sig.n} shared items detect a "
            f"{_pts(sig.delta)} gap at alpha = {sig.alpha:g} with power {sig.power:g}, from "
            f"{source} discordance (omega^2 = {sig.omega2:.4f})"
        )


def _evidence_rows(evidence: dict) -> list[list[object]]:
    """The (size, MDAD) pairs of a plan's evidence, whatever its exact layout."""
    sizes = evidence.get("sizes")
    mdads = evidence.get("mdads", evidence.get("mdad"))
    if isinstance(sizes, list) and isinstance(mdads, list) and len(sizes) == len(mdads):
        return [[n, _pts(m)] for n, m in zip(sizes, mdads, strict=True)]
    if isinstance(mdads, dict):
        return [[int(n), _pts(m)] for n, m in sorted(mdads.items(), key=lambda kv: int(kv[0]))]
    return []
