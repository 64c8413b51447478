"""Coverage of the 95 % intervals on the REAL GPQA matrix (issue 13), before and after.

Protocol (statistics-next §5): per repeat, 300 source / 120 held-out target models (duplicate
result vectors dropped among the targets); every selector is fitted on the sources and draws a
subset of each size; every target is scored from its subset results only, and we record whether
its full accuracy is inside each interval.

* ``--scorer before``: the service's own per-model scoring (``app.services.scoring.estimates_for``,
  as on main before issue 13), called once per target;
* ``--scorer after``: :func:`app.core.scoring.score_models` with the source models as references
  (plus the alternative small-sample intervals for unweighted probability subsets).

    .venv/bin/python bench/bench_coverage.py --repeats 20 --scorer both
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.coverage import coverage_study
from app.core.intervals import SMALL_N_METHODS
from app.core.scoring import EstimateBatch, score_models

METHODS = (
    "random",
    "subtask_stratified",
    "confidence_stratified",
    "dpp",
    "anchor_points",
    "tiny_benchmarks",
)


def _data_path() -> Path:
    root = Path(__file__).resolve().parents[1]
    return (
        Path(os.environ.get("BENCHSLICE_SHARED_DATA") or root.parent / "shared" / "data")
        / "gpqa.npz"
    )


def before_scorer(selection, y, n_population, reference_correct):
    """The service's scoring function as it stood (one call per target)."""
    from app.services.scoring import estimates_for

    per_model = [estimates_for(selection, row, None, n_population) for row in y]
    out = []
    for j, first in enumerate(per_model[0]):
        col = [pm[j] for pm in per_model]

        def arr(attr, col=col):
            return np.array([np.nan if getattr(e, attr) is None else getattr(e, attr) for e in col])

        value = arr("value")
        out.append(
            EstimateBatch(
                estimator=first.estimator,
                value=value,
                ci_low=arr("ci_low"),
                ci_high=arr("ci_high"),
                se=arr("se"),
                raw_value=value,
                interval=first.interval,
                basis="before",
            )
        )
    return out


def after_scorer(selection, y, n_population, reference_correct):
    """:func:`score_models` (defaults) plus every small-n interval for unweighted subsets."""
    out = score_models(selection, y, n_population, reference_correct=reference_correct)
    if selection.method in ("random", "subtask_stratified"):
        for method in SMALL_N_METHODS:
            extra = score_models(selection, y, n_population, small_n=method, estimators=("mean",))
            out.extend(b for b in extra if b.interval != out[0].interval)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--scorer", choices=("before", "after", "both"), default="both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the tables as JSON here")
    args = ap.parse_args(argv)
    with np.load(_data_path(), allow_pickle=False) as d:
        correct, subtasks = d["correct"], d["subtasks"]
    scorers = {"before": before_scorer, "after": after_scorer}
    names = ("before", "after") if args.scorer == "both" else (args.scorer,)
    dump = {}
    for name in names:
        t0 = time.perf_counter()
        table = coverage_study(
            correct,
            args.methods,
            args.sizes,
            repeats=args.repeats,
            subtasks=subtasks,
            seed=args.seed,
            scorer=scorers[name],
        )
        dt = time.perf_counter() - t0
        print(f"\n### {name.upper()}: GPQA, {args.repeats} repeats x 300/120, {dt:.0f} s\n")
        print(table.to_markdown())
        dump[name] = table.to_dict()
    if args.json:
        import json

        args.json.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
