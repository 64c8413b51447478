"""Offline ``benchslice mdad`` and ``benchslice coverage`` on a local ``.npz`` matrix.

No server, database or broker. ``mdad`` runs :func:`app.core.run_protocol`, analyses every
(method, n, split) cell and prints a table (or exactly one JSON object with ``--json``).
``coverage`` runs :func:`app.core.scoring.coverage.coverage_study` (the engine of
``bench/bench_coverage.py``): the empirical coverage of every interval the service's scoring
returns, on held-out models. Progress goes to stderr so stdout stays machine-readable.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import typer

from app.cli.common import ALL_METHODS

MDAD_EPILOG = (
    "Example: `benchslice mdad --matrix ../shared/data/gpqa.npz --methods random,"
    "tiny_benchmarks --sizes 10,25,50 --runs 10 --json`"
)


def _int_list(text: str, name: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"expected comma-separated integers, got {text!r}", param_hint=name
        ) from None
    if not values:
        raise typer.BadParameter("expected at least one value", param_hint=name)
    return values


def _clean(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _load(path: Path):
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            if "correct" not in data:
                raise typer.BadParameter("the .npz has no 'correct' array", param_hint="--matrix")
            correct = np.asarray(data["correct"])
            confidence = np.asarray(data["confidence"]) if "confidence" in data else None
            subtasks = np.asarray(data["subtasks"]) if "subtasks" in data else None
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="--matrix") from None
    return correct, confidence, subtasks


def mdad(
    matrix: Path = typer.Option(
        ...,
        "--matrix",
        help=".npz with 'correct' (models x items), optional 'confidence', 'subtasks'",
        exists=True,
        dir_okay=False,
    ),
    methods: str = typer.Option(ALL_METHODS, "--methods", help="comma-separated selector names"),
    sizes: str = typer.Option("10,25,50,100,200", "--sizes", help="comma-separated subset sizes"),
    runs: int = typer.Option(50, "--runs", min=1),
    sources: int = typer.Option(300, "--sources", min=1),
    targets: int = typer.Option(50, "--targets", min=2),
    mode: str = typer.Option("paper", "--mode", help="paper | robust"),
    seed: int = typer.Option(0, "--seed", min=0),
    as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object on stdout"),
    workers: int = typer.Option(0, "--workers", min=0, help="processes (0: all available CPUs)"),
) -> None:
    """Run the paper protocol offline and report MDAD per method, size and split."""
    start = time.perf_counter()
    if mode not in ("paper", "robust"):
        raise typer.BadParameter("expected 'paper' or 'robust'", param_hint="--mode")
    method_list = [m.strip() for m in methods.split(",") if m.strip()]
    size_list = _int_list(sizes, "--sizes")
    correct, confidence, subtasks = _load(matrix)

    from app.core.reliability.mdad import analyze_protocol
    from app.core.reliability.protocol import default_workers, run_protocol

    n_workers = workers or default_workers()

    def progress(done: int, total: int) -> None:
        print(
            f"[benchslice mdad] runs {done}/{total} ({time.perf_counter() - start:.1f}s)",
            file=sys.stderr,
            flush=True,
        )

    try:
        result = run_protocol(
            correct,
            method_list,
            size_list,
            confidence=confidence,
            subtasks=subtasks,
            runs=runs,
            n_sources=sources,
            n_targets=targets,
            seed=seed,
            workers=n_workers,
            progress=progress,
        )
        cells = analyze_protocol(result, mode=mode, splits=("seen", "unseen"))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    elapsed = time.perf_counter() - start
    print(f"[benchslice mdad] done in {elapsed:.2f}s", file=sys.stderr, flush=True)
    rows = [
        {k: (_clean(v) if isinstance(v, float) else v) for k, v in c.as_dict().items()}
        for c in cells
    ]
    if as_json:
        sys.stdout.write(
            json.dumps({"cells": rows, "elapsed_s": round(elapsed, 3), "seed": seed, "mode": mode})
            + "\n"
        )
        return
    _print_table(rows, mode=mode, seed=seed, elapsed=elapsed)


COVERAGE_EPILOG = (
    "Example: `benchslice coverage --matrix ../shared/data/gpqa.npz --methods random,dpp "
    "--sizes 25,50 --repeats 5 --seed 0 --json`"
)
COVERAGE_METHODS = (
    "random,subtask_stratified,confidence_stratified,dpp,anchor_points,tiny_benchmarks"
)


def coverage(
    matrix: Path = typer.Option(
        ...,
        "--matrix",
        help=".npz with 'correct' (models x items), optional 'subtasks'",
        exists=True,
        dir_okay=False,
    ),
    methods: str = typer.Option(
        COVERAGE_METHODS, "--methods", help="comma-separated selector names"
    ),
    sizes: str = typer.Option("25,50,100", "--sizes", help="comma-separated subset sizes"),
    repeats: int = typer.Option(20, "--repeats", min=1, help="source/target splits"),
    sources: int = typer.Option(300, "--sources", min=1, help="source models per split"),
    targets: int = typer.Option(120, "--targets", min=1, help="held-out targets per split"),
    seed: int = typer.Option(0, "--seed", min=0),
    as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object on stdout"),
) -> None:
    """Empirical coverage of the scoring intervals on held-out models (coverage, width, bias,
    |error|, and the same in the 20 % lowest / highest targets), per method x estimator x
    interval x size."""
    start = time.perf_counter()
    method_list = [m.strip() for m in methods.split(",") if m.strip()]
    size_list = _int_list(sizes, "--sizes")
    correct, _, subtasks = _load(matrix)

    from app.core.scoring.coverage import coverage_study
    from app.core.selectors import SELECTORS

    unknown = [m for m in method_list if m not in SELECTORS]
    if unknown or not method_list:
        raise typer.BadParameter(
            f"unknown method(s) {unknown}; choose from {sorted(SELECTORS)}", param_hint="--methods"
        )
    try:
        table = coverage_study(
            correct,
            method_list,
            size_list,
            repeats=repeats,
            n_sources=sources,
            n_targets=targets,
            subtasks=subtasks,
            seed=seed,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    elapsed = time.perf_counter() - start
    print(f"[benchslice coverage] done in {elapsed:.2f}s", file=sys.stderr, flush=True)
    if as_json:
        body = table.to_dict()
        body["rows"] = [
            {k: (_clean(v) if isinstance(v, float) else v) for k, v in r.items()}
            for r in body["rows"]
        ]
        body["elapsed_s"] = round(elapsed, 3)
        sys.stdout.write(json.dumps(body) + "\n")
        return
    typer.echo(
        f"Coverage of the 95 % intervals: {repeats} repeats x {sources} sources / {targets} "
        f"held-out targets, seed {seed}\n{table.to_markdown()}\nelapsed {elapsed:.2f}s"
    )


def _fmt_points(v) -> str:
    return "   n/r" if v is None else f"{100 * v:6.1f}"


def _print_table(rows: list[dict], *, mode: str, seed: int, elapsed: float) -> None:
    head = f"{'method':<22} {'n':>5} {'split':<7} {'MDAD':>6} {'CI low':>6} {'CI hi':>6} {'agree':>6} {'|err|':>6} {'tau':>6}"
    lines = [
        f"MDAD ({mode} mode, seed {seed}); MDAD/CI/error in accuracy points, n/r = not reached",
        head,
        "-" * len(head),
    ]
    for r in rows:
        tau = "   nan" if r["kendall_tau"] is None else f"{r['kendall_tau']:6.3f}"
        lines.append(
            f"{r['method']:<22} {r['n']:>5} {r['split']:<7} {_fmt_points(r['mdad'])} {_fmt_points(r['ci_low'])} "
            f"{_fmt_points(r['ci_high'])} {r['mean_agreement']:6.3f} {_fmt_points(r['mean_abs_error'])} {tau}"
        )
    lines.append(f"elapsed {elapsed:.2f}s")
    typer.echo("\n".join(lines))


if __name__ == "__main__":  # pragma: no cover
    typer.run(mdad)
