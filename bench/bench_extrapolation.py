"""Extrapolation splits (issue 38): coverage, bias and width of every selector x estimator when
the targets lie beyond every source model, and of the interval the service returns as the answer.

``weak_to_strong``: every selector is fitted on the weakest 80 % of the models (by full-benchmark
accuracy) and scores the strongest 20 % (each stronger than every source); ``strong_to_weak``: the
mirror; ``random``: the usual held-out split (interior targets, for comparison). Repeats differ
in the subsets drawn (the extrapolation splits are fixed by the data). Scoring is
:func:`app.core.scoring.score_models` with the sources as references (what the service does);
the row ``answer`` is what :func:`app.services.selection.extrapolation.choose_answer` returns as
the answer per target: the first estimate when the target is supported, else the first
design-based one (design / model-assisted), else nothing (counted in ``withheld``), with
"supported" decided by :func:`app.core.scoring.support.unsupported` (the service's three signs).

Benchmarks: ``gpqa`` (REAL, 420 x 448), ``alpaca`` (REAL graded AlpacaEval, 54 x 805: use
``--splits random --sources 34 --targets 20``), the SYNTHETIC families of
:mod:`bench.synth_families` (``weak``, ``wide``, ``strong``, ``discriminative``) and the SYNTHETIC
graded ones (``graded_mass01`` / ``graded_judge`` / ``graded_ksample``).

    .venv/bin/python bench/bench_extrapolation.py --benchmarks gpqa --repeats 3 --seed 3838
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.estimation.estimate_batch import EstimateBatch
from app.core.scoring.coverage import coverage_study
from app.core.scoring.score_models import score_models
from app.core.scoring.support import unsupported
from bench.bench_coverage import METHODS, load_benchmark

DESIGN_BASED = ("design", "model-assisted")
FLAGS: dict[tuple, list[int]] = {}  # (benchmark, split, method, n) -> [flagged, targets]


def _answer(batches: list[EstimateBatch], flagged: np.ndarray) -> EstimateBatch:
    m = flagged.size
    val, lo, hi = (np.full(m, np.nan) for _ in range(3))
    todo = np.ones(m, dtype=bool)
    for design_only in (False, True):
        for b in batches:
            if design_only and b.basis not in DESIGN_BASED:
                continue
            ok = todo & np.isfinite(b.ci_low) & np.isfinite(b.ci_high) & np.isfinite(b.value)
            ok &= flagged if design_only else ~flagged
            val[ok], lo[ok], hi[ok] = b.value[ok], b.ci_low[ok], b.ci_high[ok]
            todo &= ~ok
    return EstimateBatch(
        estimator="answer",
        value=val,
        ci_low=lo,
        ci_high=hi,
        se=np.full(m, np.nan),
        raw_value=val.copy(),
        interval="service answer",
        basis="answer",
    )


def make_scorer(benchmark: str, split: str):
    def scorer(selection, y, n_population, reference_correct):
        out = score_models(selection, y, n_population, reference_correct=reference_correct)
        flagged = unsupported(selection, y, reference_correct[:, selection.indices])
        slot = FLAGS.setdefault((benchmark, split, selection.method, selection.n_requested), [0, 0])
        slot[0] += int(flagged.sum())
        slot[1] += int(flagged.size)
        return [*out, _answer(out, flagged)]

    return scorer


def markdown(table, benchmark: str, split: str) -> str:
    lines = [
        "| method | estimator | interval | basis | n | coverage (SE) | weakest / strongest fifth "
        "| bias | width | unavailable |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.rows:
        if r.cases == 0 and r.unavailable == 0:
            continue
        flag = " LOW" if r.cases and r.coverage < 0.93 else ""
        extra = ""
        if r.estimator == "answer":
            f, t = FLAGS.get((benchmark, split, r.method, r.n), [0, 0])
            extra = f" (flagged {f}/{t})"
        lines.append(
            f"| {r.method} | {r.estimator} | {r.interval} | {r.basis} | {r.n} | "
            f"{r.coverage:.3f} ({r.coverage_se:.3f}){flag} | {r.coverage_low:.3f} / "
            f"{r.coverage_high:.3f} | {r.bias:+.4f} | {r.mean_width:.4f} | "
            f"{r.unavailable}{extra} |"
        )
    return "\n".join(lines)


def summary(paths: list[Path]) -> str:
    """One line per benchmark / split x method x n of the ``--json`` files: the answer's
    coverage, width and withheld share, and the lowest-covering secondary estimate."""

    def num(x) -> str:
        return "n/a" if x is None or x != x else f"{x:.3f}"

    lines = [
        "| benchmark / split | method | n | answer coverage (SE) | answer width | withheld "
        "| lowest secondary (estimator: coverage) |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        cells: dict[tuple, list[dict]] = {}
        for key, tab in json.loads(path.read_text()).items():
            for r in tab["rows"]:
                cells.setdefault((key, r["method"], r["n"]), []).append(r)
        for (key, method, n), rs in cells.items():
            ans = next(r for r in rs if r["estimator"] == "answer")
            sec = [r for r in rs if r["estimator"] != "answer" and r["cases"] > 0]
            low = min(sec, key=lambda r: r["coverage"]) if sec else None
            lows = f"{low['estimator']}: {num(low['coverage'])}" if low else "-"
            total = ans["cases"] + ans["unavailable"]
            lines.append(
                f"| {key} | {method} | {n} | {num(ans['coverage'])} ({num(ans['coverage_se'])}) "
                f"| {num(ans['mean_width'])} | {ans['unavailable']} of {total} | {lows} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", nargs="+", default=["gpqa"])
    ap.add_argument("--splits", nargs="+", default=["weak_to_strong", "strong_to_weak"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--seed", type=int, default=3838)
    ap.add_argument("--family-seed", type=int, default=5)
    ap.add_argument("--sources", type=int, default=300, help="source models (random split)")
    ap.add_argument("--targets", type=int, default=120, help="targets (random split)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--summary-of", type=Path, nargs="+", help="print the summary of --json files")
    args = ap.parse_args(argv)
    if args.summary_of:
        print(summary(args.summary_of))
        return
    dump = {}
    for name in args.benchmarks:
        correct, subtasks, label = load_benchmark(name, args.family_seed)
        for split in args.splits:
            t0 = time.perf_counter()
            table = coverage_study(
                correct,
                args.methods,
                args.sizes,
                repeats=args.repeats,
                subtasks=subtasks,
                seed=args.seed,
                scorer=make_scorer(name, split),
                split=split,
                n_sources=args.sources,
                n_targets=args.targets,
            )
            dt = time.perf_counter() - t0
            print(
                f"\n### {name}: {label}; split {split}, {args.repeats} repeats, seed "
                f"{args.seed}, {dt:.0f} s (SHARED machine)\n",
                flush=True,
            )
            print(markdown(table, name, split), flush=True)
            dump[f"{name}/{split}"] = table.to_dict()
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
