"""``benchslice verdict`` (exit 0 distinguishable, 1 not, 2 error) and ``benchslice plan``."""

from __future__ import annotations

from pathlib import Path

import typer

from app import formatting as F
from app.cli.common import (
    BENCHMARK_HELP,
    ApiKeyOpt,
    JsonOpt,
    UrlOpt,
    api,
    print_json,
    print_table,
)
from app.cli.summary import SummaryOpt, verdict_summary, write_summary

EXIT_DISTINGUISHABLE = 0
EXIT_NOT_DISTINGUISHABLE = 1


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
    summary: Path | None = SummaryOpt,
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
        base = client.url
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
        print_verdict(v)
    if summary is not None:
        write_summary(summary, verdict_summary(v, base))
    raise typer.Exit(EXIT_DISTINGUISHABLE if v.distinguishable else EXIT_NOT_DISTINGUISHABLE)


def print_verdict(v) -> None:
    """The verdict as people read it: the headline, the three answers in order (full
    benchmark, this subset, next step), then the numbers with how they were computed."""
    typer.echo(v.headline)
    for i, line in enumerate(v.answers, start=1):
        typer.echo(f"{i}. {line}")
    p_same = (
        F.prob(v.p_same_order)
        if len(v.ci) != 2 or v.ci[0] == v.ci[1]
        else f"{F.prob(v.p_same_order)} {F.interval(v.ci[0], v.ci[1], F.prob)}"
    )
    print_table(
        ["P(same order)", "P(tie)", "P(reversed)", f"MDAD at {v.size}", "size needed (pair)"],
        [
            [
                p_same,
                F.prob(v.p_tie),
                F.prob(v.p_reversed),
                F.pts(v.mdad_at_size),
                F.count(v.size_needed),
            ]
        ],
    )
    typer.echo(f"computed: {v.basis_note}")
    if v.estimand_text:
        typer.echo(f"estimand: {v.estimand_text}")
    p = v.paired
    if p is not None:
        typer.echo(
            f"paired on all items: both right {p.n11}, only A {p.n10}, only B {p.n01}, both "
            f"wrong {p.n00}; P(A better) = {p.p_a_better:.3f} (Dirichlet posterior), exact "
            f"McNemar {F.p_equals(p.mcnemar_p)}"
        )
    for w in v.warnings:
        typer.echo(f"warning ({w.code}): {w.message}")


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
            f"{F.pct(v.subset_estimate_a)} and {v.model_b} at {F.pct(v.subset_estimate_b)}; the "
            f"full benchmark says {F.pct(v.full_accuracy_a)} vs {F.pct(v.full_accuracy_b)} "
            f"(gap {F.pts(abs(v.gap))})"
        )
        fresh = v.fresh_draw
        if fresh is not None:
            typer.echo(f"a fresh subset of its method and size: {fresh.headline}")
            for i, line in enumerate(fresh.answers, start=1):
                typer.echo(f"{i}. {line}")
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
    pairs = F.count(p.evidence.get("n_models", 0) * (p.evidence.get("n_models", 0) - 1) // 2)
    how = (
        f"exact over all {pairs} model pairs"
        if p.basis == "exact"
        else f"graded scores: simulated over {F.count(p.evidence.get('draws', 0))} random "
        f"subsets per size (seed {p.evidence.get('seed')}), all {pairs} model pairs"
        if p.basis == "simulated"
        else f"from analysis {str(p.evidence.get('analysis_id', ''))[:8]}, "
        f"{p.evidence.get('analysis_runs')} runs"
    )
    if p.size is None:
        typer.echo(
            f"no evaluated {p.method} subset size has an MDAD of at most {F.pts(p.gap)} on "
            f"{benchmark} (P(same order) >= {F.prob(p.probability)}; {how})"
        )
    else:
        typer.echo(
            f"{p.size} items: the smallest {p.method} subset whose MDAD on {benchmark} is at "
            f"most {F.pts(p.gap)} (P(same order) >= {F.prob(p.probability)} for a typical pair "
            f"that far apart; {how})"
        )
    for c in p.cost:  # predicted from the stored models' measured costs
        typer.echo(
            f"expected cost of {p.size} items ({c.unit}): {c.expected:,.6g} +/- {c.sd:,.4g} "
            f"(sd); {c.source}"
        )
    rows = _evidence_rows(p.evidence, p.gap)
    if rows:
        print_table(["size", "MDAD", f"at most {F.pts(p.gap)}"], rows)
    typer.echo(
        "MDAD is the smallest gap (in 0.5-point bins) that a subset of that size orders like the "
        "full benchmark with that probability, averaged over all pairs that far apart; one pair's "
        "own size needed (`benchslice verdict … --size N`) is larger when more items separate it."
    )
    sig = p.significance
    if sig is not None:
        source = "this pair's" if sig.source == "pair" else "the benchmark's typical (median)"
        typer.echo(
            f"significance (paired test, a different question): {F.count(sig.n)} shared items "
            f"detect a {F.pts(sig.delta)} gap at alpha = {sig.alpha:g} with power "
            f"{sig.power:g}, from {source} discordance (omega^2 = {sig.omega2:.4f})"
        )
    sp = p.samples
    if sp is not None:
        source = "uploaded" if sp.within_variance_source == "uploaded" else "K/(K-1) x(1-x)"
        typer.echo(
            f"items x samples for that test (the pair has K = {sp.k} samples per item): "
            f"Var(d_i) = {sp.observed:.4g} = between-item {sp.var_between:.4g} (data noise) + "
            f"within-item {sp.within:.4g} / K (prediction noise; within-item variances: {source})"
        )
        print_table(
            ["samples/item", "items", "samples/model", "omega^2"],
            [[r.k, F.count(r.n_items), F.count(r.samples), f"{r.omega2:.4g}"] for r in sp.rows],
        )
        typer.echo(sp.explanation)


def _evidence_rows(evidence: dict, gap: float) -> list[list[object]]:
    """The (size, MDAD, MDAD <= gap) rows of a plan's evidence."""
    sizes = evidence.get("sizes")
    mdads = evidence.get("mdads")
    if not (isinstance(sizes, list) and isinstance(mdads, list) and len(sizes) == len(mdads)):
        return []
    return [
        [
            n,
            "not reached" if m is None else F.pts(m),
            "yes" if m is not None and m <= gap + 1e-12 else "no",
        ]
        for n, m in zip(sizes, mdads, strict=True)
    ]
