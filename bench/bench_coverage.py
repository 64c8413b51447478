"""Coverage of the 95 % intervals on the REAL GPQA matrix (issue 13), without and with references.

Protocol (statistics-next §5): per repeat, 300 source / 120 held-out target models (duplicate
result vectors dropped among the targets); every selector is fitted on the sources and draws a
subset of each size; every target is scored from its subset results only, and we record whether
its full accuracy is inside each interval.

* ``--scorer no-references``: the service's own per-model scoring
  (``app.services.selection.scoring.estimates_for``) called once per target *without* reference models:
  design-based intervals for probability subsets, the uncalibrated intervals (with their warning
  note) for DPP / Anchor Points / tinyBenchmarks, no ``model_assisted``;
* ``--scorer references``: :func:`app.core.scoring.score_models.score_models` with the source models as
  references (plus the alternative small-sample intervals for unweighted probability subsets).

This option was called ``before`` until it started importing the current ``estimates_for``: it no
longer measures the pre-issue-13 scorer. The BEFORE table in bench/RESULTS.md was measured at
commit dee1425's parent (d43cdf5) with the old scorer (``estimates_for`` as it stood then); to
reproduce it, run this script from a checkout of that commit.

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

from app.core.estimation.intervals import SMALL_N_METHODS
from app.core.scoring.coverage import coverage_study
from app.core.scoring.score_models import EstimateBatch, score_models

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


def no_references_scorer(selection, y, n_population, reference_correct):
    """The service's scoring function without reference models (one call per target)."""
    from app.services.selection.scoring import estimates_for

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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--scorer", choices=("no-references", "references", "both"), default="both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the tables as JSON here")
    args = ap.parse_args(argv)
    with np.load(_data_path(), allow_pickle=False) as d:
        correct, subtasks = d["correct"], d["subtasks"]
    scorers = {"no-references": no_references_scorer, "references": references_scorer}
    names = ("no-references", "references") if args.scorer == "both" else (args.scorer,)
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
