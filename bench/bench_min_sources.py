"""Minimum source populations (issue 24, item 4): coverage and items-to-decision vs source models.

Two questions, REAL GPQA (420 x 448) and the SYNTHETIC families of :mod:`bench.synth_families`:

* ``coverage``: for every selector that fits on source models (``tiny_benchmarks`` — an IRT fit;
  ``anchor_points`` and ``dpp`` — correctness features of the sources, no IRT) and for ``random``
  (whose ``model_assisted`` estimate is calibrated on the sources), the coverage of every 95 %
  interval the service returns, overall and in the lowest / highest fifth of held-out targets, at
  ``n_sources`` in ``--populations``. Engine: :func:`app.core.scoring.coverage.coverage_study` (the
  service's own scorer, cross-fitted calibration as the subset job stores it), 120 held-out
  targets per split.
* ``sessions``: the IRT fit behind the ``assisted`` / ``neyman`` / ``fluid`` session policies. Their
  decisions stay valid whatever the fit (confidence sequences); what a small fit costs is items
  per decision. :func:`app.core.sequential.simulation.simulate_sessions` fits the IRT model on the
  models outside its held-out pair pool, so a fit population of ``F`` models is
  ``holdout = 1 - F / n_models``; pairs are drawn from the pool (never in the fit).

Seeds: split seed 303 and family seed 2 were used for no constant before this script.

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/bench_min_sources.py coverage \
        --benchmarks gpqa weak wide --repeats 6
    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/bench_min_sources.py sessions
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.scoring.coverage import coverage_study
from bench.bench_coverage import load_benchmark

METHODS = ("tiny_benchmarks", "anchor_points", "dpp", "random")
POPULATIONS = (10, 20, 35, 50, 75, 100, 200)
GOAL = 0.93


def coverage_rows(name, correct, subtasks, args) -> list[dict]:
    """One dict per population x method x estimator x interval x n (the table's rows)."""
    out = []
    for n_src in args.populations:  # a handful of populations, each one coverage study
        t0 = time.perf_counter()
        table = coverage_study(
            correct,
            args.methods,
            args.sizes,
            repeats=args.repeats,
            n_sources=int(n_src),
            n_targets=args.targets,
            subtasks=subtasks,
            seed=args.seed,
        )
        dt = time.perf_counter() - t0
        for r in table.rows:
            if r.cases == 0:
                continue
            out.append(
                {
                    "benchmark": name,
                    "n_sources": int(n_src),
                    "method": r.method,
                    "estimator": r.estimator,
                    "interval": r.interval,
                    "basis": r.basis,
                    "n": r.n,
                    "cases": r.cases,
                    "coverage": r.coverage,
                    "coverage_low": r.coverage_low,
                    "coverage_high": r.coverage_high,
                    "mean_width": r.mean_width,
                    "mean_abs_error": r.mean_abs_error,
                }
            )
        print(f"[min_sources] {name} n_sources={n_src}: {dt:.0f} s", file=sys.stderr, flush=True)
    return out


def coverage_markdown(rows: list[dict]) -> str:
    """Rows grouped as (benchmark, method, estimator, interval, n) x population."""
    lines = [
        "| benchmark | method | estimator | interval | n | sources | coverage | low 20 % "
        "| high 20 % | width | abs err | flag |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    key = lambda r: (r["benchmark"], r["method"], r["estimator"], str(r["interval"]), r["n"])  # noqa: E731
    for r in sorted(rows, key=lambda r: (*key(r), r["n_sources"])):
        worst = min(r["coverage"], r["coverage_low"], r["coverage_high"])
        lines.append(
            f"| {r['benchmark']} | {r['method']} | {r['estimator']} | {r['interval']} | {r['n']} "
            f"| {r['n_sources']} | {r['coverage']:.3f} | {r['coverage_low']:.3f} "
            f"| {r['coverage_high']:.3f} | {r['mean_width']:.4f} | {r['mean_abs_error']:.4f} "
            f"| {'LOW' if worst < GOAL else ''} |"
        )
    return "\n".join(lines)


def smallest_holding(rows: list[dict]) -> dict:
    """Per (benchmark, method, estimator, interval, n): the smallest population from which every
    larger measured population also holds >= GOAL overall and in both fifths (None: never)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(
            (r["benchmark"], r["method"], r["estimator"], str(r["interval"]), r["n"]), []
        ).append(r)
    out = {}
    for k, rs in groups.items():
        rs = sorted(rs, key=lambda r: r["n_sources"])
        ok = [min(r["coverage"], r["coverage_low"], r["coverage_high"]) >= GOAL for r in rs]
        first = None
        for i in range(len(rs)):  # a handful of populations
            if all(ok[i:]):
                first = rs[i]["n_sources"]
                break
        out["/".join(map(str, k))] = first
    return out


def session_rows(correct, args) -> list[dict]:
    """Items per decision of each session policy vs the IRT fit's population."""
    from app.core.sequential.simulation import simulate_sessions

    m = correct.shape[0]
    out = []
    for fit in args.fits:  # a handful of fit populations
        t0 = time.perf_counter()
        res = simulate_sessions(
            (correct > 0.5).astype(np.int8),
            policies=args.policies,
            pairs=args.pairs,
            holdout=1.0 - fit / m,
            goal="decide",
            margin=args.margin,
            rng=args.seed,
        )
        for p, s in res.policies.items():
            decided = s.decision != 0
            items = s.items_used[decided] if decided.any() else s.items_used
            out.append(
                {
                    "fit_models": int(fit),
                    "policy": p,
                    "sessions": s.sessions,
                    "decided_share": s.decided_share,
                    "wrong": s.wrong,
                    "ever_missed": s.ever_missed,
                    "median_items": float(np.median(s.items_used)),
                    "mean_items": float(np.mean(s.items_used)),
                    "median_items_decided": float(np.median(items)),
                }
            )
        dt = time.perf_counter() - t0
        print(f"[min_sources] sessions fit={fit}: {dt:.0f} s", file=sys.stderr, flush=True)
    return out


def session_markdown(rows: list[dict]) -> str:
    lines = [
        "| fit models | policy | sessions | decided | wrong | ever missed | median items "
        "| mean items |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["policy"], r["fit_models"])):
        lines.append(
            f"| {r['fit_models']} | {r['policy']} | {r['sessions']} | {r['decided_share']:.3f} "
            f"| {r['wrong']} | {r['ever_missed']} | {r['median_items']:.0f} "
            f"| {r['mean_items']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("coverage", "sessions"))
    ap.add_argument("--benchmarks", nargs="+", default=["gpqa", "weak", "wide"])
    ap.add_argument("--populations", type=int, nargs="+", default=list(POPULATIONS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--sizes", type=int, nargs="+", default=[50])
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--targets", type=int, default=120)
    ap.add_argument("--seed", type=int, default=303)
    ap.add_argument("--family-seed", type=int, default=2)
    ap.add_argument("--fits", type=int, nargs="+", default=[10, 20, 35, 50, 100, 200, 315])
    ap.add_argument("--policies", nargs="+", default=["random", "assisted", "fluid"])
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    dump: dict = {"params": {k: v for k, v in vars(args).items() if k != "json"}}
    if args.what == "coverage":
        rows = []
        for name in args.benchmarks:
            correct, subtasks, label = load_benchmark(name, args.family_seed)
            print(f"[min_sources] {name}: {label}", file=sys.stderr, flush=True)
            rows += coverage_rows(name, correct, subtasks, args)
            print(coverage_markdown([r for r in rows if r["benchmark"] == name]), flush=True)
        dump["rows"], dump["smallest_holding"] = rows, smallest_holding(rows)
        print(json.dumps(dump["smallest_holding"], indent=1))
    else:
        correct, _, label = load_benchmark("gpqa", args.family_seed)
        rows = session_rows(correct, args)
        dump["rows"] = rows
        print(session_markdown(rows), flush=True)
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1, default=str))


if __name__ == "__main__":
    main()
