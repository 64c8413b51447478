"""Coverage of the 95 % intervals on held-out models: REAL GPQA and SYNTHETIC families (issues 13, 24).

Protocol (statistics-next §5): per repeat, ``--sources`` source and 120 held-out target models
(duplicate result vectors dropped among the targets); every selector is fitted on the sources and
draws a subset of each size; every target is scored from its subset results only, and we record
whether its full accuracy is inside each interval. Non-probability subsets carry out-of-fold values
(cross-fitted calibration, as the service's subset job stores them).

Benchmarks (``--benchmarks``): ``gpqa`` (REAL, 420 x 448) and the SYNTHETIC families of
:mod:`bench.synth_families` (``weak``, ``wide``, ``strong``; 420 x 448, drawn with
``--family-seed``); graded scores: ``alpaca`` (REAL AlpacaEval judge preferences, 54 x 805: use
``--sources 34 --targets 20``) and ``graded_mass01`` / ``graded_judge`` / ``graded_ksample``
(SYNTHETIC, the families of :mod:`bench.bench_graded`, 420 x 448). Seeds: the constants
(``SPARSE_OUTCOMES``, the conformal bins) were chosen on split seeds 0 and 101 and family seed 0;
the published table uses ``--seed 202 --family-seed 1``.

* ``--scorer references`` (default): :func:`app.core.scoring.score_models` with the source models as
  references (plus the alternative small-sample intervals for unweighted probability subsets);
* ``--scorer no-references``: the service's per-model scoring without references.

    .venv/bin/python bench/bench_coverage.py --benchmarks gpqa weak wide strong --repeats 10

A cell is flagged ``LOW`` when its overall or tail coverage is below 0.93 and ``WIDE`` above 0.985.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.estimation.intervals import SMALL_N_METHODS
from app.core.scoring.coverage import CoverageTable, coverage_study
from app.core.scoring.score_models import DEFAULT_SMALL_N, EstimateBatch, score_models
from bench.synth_families import FAMILIES, make_family

METHODS = (
    "random",
    "subtask_stratified",
    "confidence_stratified",
    "dpp",
    "anchor_points",
    "tiny_benchmarks",
)
GOAL, TOO_WIDE = 0.93, 0.985


def _data_path() -> Path:
    root = Path(__file__).resolve().parents[1]
    return (
        Path(os.environ.get("BENCHSLICE_SHARED_DATA") or root.parent / "shared" / "data")
        / "gpqa.npz"
    )


def load_benchmark(name: str, family_seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """``(correct, subtasks, label)``: REAL GPQA or a SYNTHETIC family."""
    if name == "gpqa":
        with np.load(_data_path(), allow_pickle=False) as d:
            return d["correct"], d["subtasks"], "REAL GPQA 420 x 448"
    if name == "alpaca":
        from bench.bench_graded import alpaca

        y, subsets = alpaca()
        return y, subsets.astype(str), "REAL graded AlpacaEval 54 x 805"
    if name.startswith("graded_"):
        from bench.bench_graded import FAMILIES as GRADED
        from bench.bench_graded import family

        kind = name.removeprefix("graded_")
        if kind not in GRADED:
            raise SystemExit(f"--benchmarks: expected graded_ + one of {GRADED}, got {name!r}")
        rng = np.random.default_rng([family_seed, 35])
        theta, b = rng.normal(0.0, 1.2, 420), rng.normal(0.0, 1.0, 448)
        subtasks = np.repeat(np.array(["s0", "s1", "s2", "s3"]), [180, 130, 90, 48])
        scores = family(kind, theta, b, rng)
        return scores, subtasks, f"SYNTHETIC graded {kind} 420 x 448"
    if name not in FAMILIES:
        raise SystemExit(
            f"--benchmarks: expected gpqa, alpaca, graded_<family> or one of {FAMILIES}, "
            f"got {name!r}"
        )
    fam = make_family(name, seed=family_seed)
    return fam.correct, fam.subtasks, fam.source


def no_references_scorer(selection, y, n_population, reference_correct):
    """The service's scoring function without reference models (one call per target)."""
    from app.services.selection.scoring import estimates_for

    per_model = [estimates_for(selection, row, None, n_population) for row in y]
    out = []
    for j, first in enumerate(per_model[0]):
        col = [pm[j] for pm in per_model]

        def arr(attr, col=col):
            return np.array([np.nan if getattr(e, attr) is None else getattr(e, attr) for e in col])

        out.append(
            EstimateBatch(
                estimator=first.estimator,
                value=arr("value"),
                ci_low=arr("ci_low"),
                ci_high=arr("ci_high"),
                se=arr("se"),
                raw_value=arr("raw_value"),
                interval=first.interval,
                basis=first.basis,
            )
        )
    return out


def references_scorer(selection, y, n_population, reference_correct):
    """:func:`score_models` (defaults) plus every small-n interval for unweighted subsets."""
    out = score_models(selection, y, n_population, reference_correct=reference_correct)
    if selection.method in ("random", "subtask_stratified"):
        for method in SMALL_N_METHODS:
            extra = score_models(selection, y, n_population, small_n=method, estimators=("mean",))
            out.extend(b for b in extra if b.interval != out[0].interval)
    return out


def flagged_markdown(table: CoverageTable, default_only: bool) -> str:
    """The table with the tails' clustered SEs left out and a flag column (LOW / WIDE)."""
    lines = [
        "| method | estimator | interval | n | coverage (SE) | low 20 % | high 20 % | width "
        "| abs err | raw abs err | flag |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.rows:
        if r.cases == 0:
            continue
        if default_only and r.interval in SMALL_N_METHODS and r.interval != DEFAULT_SMALL_N:
            continue
        worst, best = (
            min(r.coverage, r.coverage_low, r.coverage_high),
            max(r.coverage, r.coverage_low, r.coverage_high),
        )
        flag = "LOW" if worst < GOAL else ("WIDE" if best > TOO_WIDE else "")
        lines.append(
            f"| {r.method} | {r.estimator} | {r.interval} | {r.n} | {r.coverage:.3f} "
            f"({r.coverage_se:.3f}) | {r.coverage_low:.3f} | {r.coverage_high:.3f} | "
            f"{r.mean_width:.4f} | {r.mean_abs_error:.4f} | {r.mean_abs_error_raw:.4f} | {flag} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", nargs="+", default=["gpqa", *FAMILIES])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--sources", type=int, default=300, help="source models per split")
    ap.add_argument("--targets", type=int, default=120)
    ap.add_argument("--scorer", choices=("no-references", "references"), default="references")
    ap.add_argument("--seed", type=int, default=202)
    ap.add_argument("--family-seed", type=int, default=1)
    ap.add_argument("--no-crossfit", action="store_true", help="in-sample calibration (x1.1)")
    ap.add_argument("--all-intervals", action="store_true", help="list every small-n interval")
    ap.add_argument("--json", type=Path, help="also write the tables as JSON here")
    ap.add_argument(
        "--split",
        choices=("random", "weak_to_strong", "strong_to_weak"),
        default="random",
        help="extrapolation splits (issue 38): fit on the weakest 80 %% of models, score the "
        "strongest 20 %% (weak_to_strong) or the mirror; --sources/--targets unused",
    )
    args = ap.parse_args(argv)
    scorer = {"no-references": no_references_scorer, "references": references_scorer}[args.scorer]
    dump = {}
    for name in args.benchmarks:
        correct, subtasks, label = load_benchmark(name, args.family_seed)
        t0 = time.perf_counter()
        table = coverage_study(
            correct,
            args.methods,
            args.sizes,
            repeats=args.repeats,
            n_sources=args.sources,
            n_targets=args.targets,
            subtasks=subtasks,
            seed=args.seed,
            scorer=scorer,
            crossfit=not args.no_crossfit,
            split=args.split,
        )
        dt = time.perf_counter() - t0
        print(
            f"\n### {name}: {label}; {args.repeats} repeats x {args.sources}/{args.targets}, "
            f"split {args.split}, seed {args.seed}, {dt:.0f} s\n",
            flush=True,
        )
        print(flagged_markdown(table, default_only=not args.all_intervals), flush=True)
        dump[name] = table.to_dict()
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
