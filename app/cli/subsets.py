"""``benchslice subset create|get`` and ``benchslice score``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from app.cli.common import (
    BENCHMARK_HELP,
    ApiKeyOpt,
    JobProgress,
    JsonOpt,
    UrlOpt,
    api,
    err,
    fail,
    find_source,
    fmt,
    parse_params,
    pct,
    print_json,
    print_table,
    split_list,
    with_choices,
)

if TYPE_CHECKING:
    from app.client import Client
    from app.schemas.subsets import SubsetPublic, SubsetScorePublic

subset_app = typer.Typer(
    help="Build fixed subsets (micro-benchmarks) and export them for lm-eval.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

FORMATS = ("table", "json", "ids", "csv", "lm-eval", "inspect", "lighteval")


@subset_app.command("create")
def create(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help=BENCHMARK_HELP),
    method: str = typer.Option(
        "random",
        "--method",
        help="random, subtask_stratified, confidence_stratified, anchor_points, "
        "tiny_benchmarks or dpp",
    ),
    size: int = typer.Option(..., "--size", "-n", min=1, help="Items in the subset"),
    seed: int | None = typer.Option(
        None, "--seed", min=0, help="Fixes the selection (same seed, same subset id)"
    ),
    param: list[str] | None = typer.Option(
        None, "--param", help="Method parameter key=value (repeatable)"
    ),
    source_models: str | None = typer.Option(
        None, "--source-models", help="Comma-separated models to fit on (default: all complete)"
    ),
    exclude: list[str] | None = typer.Option(
        None,
        "--exclude",
        help="Drop items with this item-health flag (repeatable; 'flagged' = any flag; see "
        "`benchslice benchmarks items`)",
    ),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds to wait for the job"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Build a subset and print its id (progress on stderr).

    The id is content-addressed: the same benchmark, method, parameters and seed give the same
    subset without recomputing.

    Example:

        SUBSET=$(benchslice subset create --benchmark gpqa --method tiny_benchmarks --size 25 --seed 0)
    """
    params = parse_params(param)
    with api(url, api_key) as client:
        with JobProgress(f"{method} subset of {size}") as progress:
            subset = client.build_subset(
                benchmark,
                method,
                size,
                seed=seed,
                params=params,
                source_models=split_list(source_models),
                progress=progress,
                timeout=timeout,
                exclude="flagged" if exclude and "flagged" in exclude else exclude,
            )
    if as_json:
        print_json(subset)
        return
    prov = subset.provenance
    err(
        f"subset of {len(subset.items)} items from {subset.benchmark} v{subset.benchmark_version}"
        f" by {subset.method} (seed {prov.seed}, {len(prov.source_models)} source models, "
        f"signal {prov.signal}); estimator {subset.estimator}"
        + (f"; excluded items flagged {', '.join(prov.exclude)}" if prov.exclude else "")
    )
    for w in subset.warnings:
        err(f"warning ({w.code}): {w.message}")
    typer.echo(subset.id)


@subset_app.command("get")
def get(
    subset_id: str = typer.Argument(..., help="Subset id (from `subset create`)"),
    format_: str = typer.Option(
        "table", "--format", "-f", help="table | json | ids | csv | lm-eval | inspect | lighteval"
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write to this file instead of stdout"
    ),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
) -> None:
    """Show a subset or export it: `ids` (one per line), `csv`, `lm-eval` (the JSON that
    `lm_eval --samples` takes, so CI evaluates only these items), or `inspect` (per task, the
    sample ids for `inspect eval --sample-id`; with -o the JSON {task: [sample id, ...]}), or
    `lighteval` (the JSON {task: [doc key, ...]} of a benchmark pushed from lighteval details: a
    doc's key is `app.ingest.logs.lighteval.doc_key(query, choices, gold_index)`; lighteval
    cannot run chosen docs (only `--max-samples`), so filter your task's docs with these keys).

    Examples:

        benchslice subset get $SUBSET

        benchslice subset get $SUBSET --format lm-eval -o subset.json

        benchslice subset get $SUBSET --format inspect
    """
    if format_ not in FORMATS:
        raise typer.BadParameter(f"choose one of {', '.join(FORMATS)}", param_hint="--format")
    with api(url, api_key) as client:
        if format_ in ("ids", "csv", "lm-eval", "inspect", "lighteval"):
            # lighteval items are `{task}/{doc key}`, as Inspect's are `{task}/{sample id}`
            export = "inspect" if format_ == "lighteval" else format_
            text = client.export_subset(subset_id, export)  # type: ignore[arg-type]
            n = None
            if format_ == "inspect" and output is None:  # a line per task: `TASK --sample-id …`
                tasks = json.loads(text)
                text = "".join(f"{t} --sample-id {','.join(ids)}\n" for t, ids in tasks.items())
        else:
            subset = client.get_subset(subset_id)
            n = len(subset.items)
            text = (
                json.dumps(subset.model_dump(mode="json"), indent=2) if format_ == "json" else None
            )
    if text is None:
        if output is not None:
            raise typer.BadParameter("use --format json|ids|csv|lm-eval|inspect|lighteval with -o")
        _print_subset(subset)
        return
    if output is None:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise fail(f"cannot write {output}: {exc}") from None
    what = f"{n} items, " if n is not None else ""
    err(f"wrote {output} ({what}{format_} format)")


def _print_subset(subset: SubsetPublic) -> None:
    prov = subset.provenance
    typer.echo(
        f"subset {subset.id}\n{subset.benchmark} v{subset.benchmark_version}, {subset.method}, "
        f"{len(subset.items)} items, seed {prov.seed}, estimator {subset.estimator} "
        f"(supports {', '.join(subset.estimators)})"
    )
    print_table(
        ["position", "item_id", "subtask", "doc_id", "weight"],
        [[i.position, i.item_id, i.subtask, i.doc_id, round(i.weight, 4)] for i in subset.items],
    )


def score(
    subset_id: str = typer.Argument(..., help="Subset id"),
    path: Path = typer.Argument(
        ...,
        exists=True,
        help="The model's results on the subset items: lm-eval output dir or samples file, "
        "CSV, JSON, or an .npz matrix holding a row for --model",
        show_default=False,
    ),
    model: str = typer.Option(..., "--model", "-m", help="Name of the model being scored"),
    baseline: str | None = typer.Option(
        None, "--baseline", help="A model with full results to compare against (paired)"
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="Probability defining 'large enough' (default 0.8)"
    ),
    metric: str | None = typer.Option(None, "--metric", help="lm-eval metric (if several)"),
    filter_: str | None = typer.Option(None, "--filter", help="lm-eval filter (if several)"),
    interval: str | None = typer.Option(
        None,
        "--interval",
        help="Small-sample interval of plain-mean subsets: jeffreys_fpc (default), "
        "wilson_fpc, clopper_pearson, jeffreys, hypergeometric",
    ),
    no_input: bool = typer.Option(False, "--no-input", help="Never prompt"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Estimate a model's full-benchmark accuracy from its results on a subset.

    Prints an estimate with a CI for every estimator the subset's method supports; with
    `--baseline`, the paired probability that the model beats the baseline on the full
    benchmark, McNemar's test on the shared items, and whether the subset is large enough.

    Example:

        lm_eval --model hf --model_args pretrained=org/new-7b --tasks gpqa_main --samples subset.json --log_samples -o out/
        benchslice score $SUBSET --model org/new-7b --baseline org/old-7b out/
    """
    source = find_source(path)
    opts: dict[str, Any] = {"metric": metric, "filter": filter_}
    with api(url, api_key) as client:
        if source.kind == "npz":
            results = _npz_subset_row(client, subset_id, source.files[0], model)
            scored = client.score_subset(
                subset_id,
                model=model,
                results=results,
                baseline=baseline,
                threshold=threshold,
                interval=interval,
            )
        else:
            interactive = not no_input and sys.stdin.isatty()
            scored = with_choices(
                lambda o: client.score_subset(
                    subset_id,
                    model=model,
                    files=source.upload_files,  # with the run's results JSON (drift guard)
                    baseline=baseline,
                    threshold=threshold,
                    interval=interval,
                    **o,
                ),
                opts,
                interactive,
            )
    if as_json:
        print_json(scored)
        return
    _print_score(scored)


def _npz_subset_row(client: Client, subset_id: str, path: Path, model: str) -> dict[str, float]:
    """The subset items' results of ``model`` from an .npz (rows ``models``, ``item_ids``)."""
    import numpy as np

    subset = client.get_subset(subset_id)
    with np.load(path, allow_pickle=False) as data:
        names = [str(m) for m in data["models"]] if "models" in data else []
        if model not in names:
            raise fail(f"{path.name} has no row for model {model!r}")
        row = np.asarray(data["correct"][names.index(model)])
        ids = [str(i) for i in data["item_ids"]] if "item_ids" in data else None
    index = {item_id: k for k, item_id in enumerate(ids or map(str, range(row.size)))}
    missing = [i.item_id for i in subset.items if i.item_id not in index]
    if missing:
        raise fail(f"{path.name} lacks {len(missing)} subset item(s), e.g. {missing[0]!r}")
    return {i.item_id: float(row[index[i.item_id]]) for i in subset.items}


def _print_score(s: SubsetScorePublic) -> None:
    typer.echo(
        f"{s.model} on subset {s.subset_id[:12]}: {s.n_items} items, "
        f"subset accuracy {pct(s.subset_accuracy)}"
    )
    print_table(
        ["estimator", "estimate", "95% CI", "se", "interval", "basis"],
        [
            [
                e.estimator,
                pct(e.value),
                f"[{pct(e.ci_low)}, {pct(e.ci_high)}]" if e.ci_low is not None else "-",
                fmt(e.se, 4),
                e.interval or (e.note or "-"),
                e.basis,
            ]
            for e in s.estimates
        ],
    )
    for e in s.estimates:
        if e.available and e.raw_value is not None and e.raw_value != e.value:
            typer.echo(
                f"{e.estimator}: {pct(e.value)} is bias-corrected on the source models "
                f"(the estimator itself says {pct(e.raw_value)})"
            )
        if e.note and e.interval:
            typer.echo(f"note ({e.estimator}): {e.note}")
    b = s.baseline
    if b is not None:
        size = (
            f"; at the gap seen on the subset a random subset needs ~{b.size_needed} items "
            f"for P >= {b.threshold:g}: this one is "
            + ("large enough" if b.large_enough else "NOT large enough")
            if b.size_needed
            else ""
        )
        typer.echo(
            f"vs {b.baseline} (full {pct(b.baseline_full_accuracy)}): P(better) = "
            f"{b.p_better:.2f}, difference {100 * b.mean_diff:+.1f} ± {100 * b.se:.1f} pts, "
            f"McNemar p = {b.mcnemar_p:.3g} on {b.n_shared} shared items{size}"
        )
    if s.population_shift.flagged:
        typer.echo(
            "warning: population shift, the estimate may not transfer: "
            + "; ".join(s.population_shift.reasons)
        )
        a = s.answer
        if a is None:
            typer.echo(f"answer: none — {s.answer_reason}")
        else:
            typer.echo(
                f"answer: {a.estimator} {pct(a.value)} [{pct(a.ci_low)}, {pct(a.ci_high)}] "
                f"({a.basis}) — {s.answer_reason}"
            )
    r = s.repeated_samples
    if r is not None:
        typer.echo(
            f"repeated samples: K = {r.k}; per-item variance Var(x) + E[s2]/K = "
            f"{r.var_items:.4g} + {r.within_term:.4g} (plan sizes divide this by n)"
        )
    for w in s.warnings:
        typer.echo(f"warning ({w.code}): {w.message}")
