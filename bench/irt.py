"""Time ``app.core.irt.fit.fit_irt`` (D = 10, paper form, hierarchical prior) on SYNTHETIC matrices.

Cases: 300 models x 6,000 items (the issue's target: < 10 s on 2 cores), then growth with the
number of items (1k, 3k, 6k, 12k at 300 models) and of models (100, 300, 450 at 6k items).
Matrices come from ``bench/synth.py`` (GPQA-calibrated 2PL, seed 0) and are labelled synthetic.

    .venv/bin/python bench/irt.py            # full
    .venv/bin/python bench/irt.py --quick    # smoke (small sizes, 1 repeat)

Prints one Markdown row per case: median and min wall time of the repeats, L-BFGS iterations,
objective evaluations, the median and minimum time per evaluation (evaluations x minimum is a
load-robust estimate of the quiet-machine fit time, the L-BFGS bookkeeping being negligible), plus the process CPU time (all threads),
which is less distorted than wall time when the machine is shared.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import app.core.irt.fit as irt
from bench.synth import make_synthetic

TARGET = (300, 6000)
ITEMS = (1000, 3000, 6000, 12000)
MODELS = (100, 300, 450)


def _time_fit(
    y: np.ndarray, *, dims: int, prior: str, repeats: int, precision: str = "mixed"
) -> dict:
    evals = []
    original = irt._lbfgs

    def counting(fun, x0, **kw):
        def wrapped(x):
            t = time.perf_counter()
            out = fun(x)
            evals.append(time.perf_counter() - t)
            return out

        return original(wrapped, x0, **kw)

    irt._lbfgs = counting
    try:
        times, cpu, model = [], [], None
        for _ in range(repeats):
            evals.clear()
            t, c = time.perf_counter(), time.process_time()
            model = irt.fit_irt(y, dims=dims, prior=prior, rng=42, precision=precision)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    finally:
        irt._lbfgs = original
    return {
        "median": float(np.median(times)),
        "min": float(np.min(times)),
        "cpu": float(np.median(cpu)),
        "n_iter": model.n_iter,
        "n_eval": len(evals),
        "per_eval_ms": 1000 * float(np.median(evals)),
        "min_eval_ms": 1000 * float(np.min(evals)),
        "converged": model.converged,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prior", default="hierarchical", choices=["hierarchical", "fixed"])
    parser.add_argument("--target-only", action="store_true", help="only 300 x 6000")
    parser.add_argument(
        "--precision", default="mixed", choices=["mixed", "float64"], help="fit_irt precision"
    )
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    cases = (
        [TARGET] + [(300, n) for n in ITEMS if n != 6000] + [(m, 6000) for m in MODELS if m != 300]
    )
    if args.quick:
        cases = [(100, 500), (100, 1000)]
    elif args.target_only:
        cases = [TARGET]
    full = make_synthetic(max(m for m, _ in cases), max(n for _, n in cases), seed=0)
    print(
        "| case | input (SYNTHETIC) | median s | min s | CPU s | iters | evals | ms/eval "
        "| min ms/eval | evals x min ms/eval (s) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m, n in sorted(set(cases), key=lambda c: (c != TARGET, c)):
        y = full.correct[:m, :n].astype(np.float64)
        r = _time_fit(y, dims=10, prior=args.prior, repeats=repeats, precision=args.precision)
        print(
            f"| fit_irt D=10 {args.prior} {args.precision} | {m} x {n} | {r['median']:.2f} | {r['min']:.2f} | "
            f"{r['cpu']:.2f} | "
            f"{r['n_iter']} | {r['n_eval']} | {r['per_eval_ms']:.1f} | {r['min_eval_ms']:.1f} | "
            f"{r['n_eval'] * r['min_eval_ms'] / 1000:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
