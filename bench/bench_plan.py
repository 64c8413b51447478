"""The exact plan for random subsets (issue 28): its cost, and how often the size the plan used
to report (crossing of the exact curves at 10 grid sizes, interpolated in log n) was not
actually enough.

For each matrix and gap: the exact answer (:func:`app.services.reliability.verdicts.
exact_plan_size`: bisection on the grid, then on the integers, one exact pass over all model
pairs per size, cold cache), the number of passes and the wall time; the old interpolated size
and the exact agreement at that size (below the 0.8 asked = the old answer was too small).

REAL: GPQA (420 x 448). SYNTHETIC: bench/synth.py matrices of other shapes (labelled).

    .venv/bin/python bench/bench_plan.py [--gaps 0.02 0.05 0.1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.reliability.exact import exact_agreement  # noqa: E402
from app.core.reliability.planning import plan as core_plan  # noqa: E402
from app.services.catalog.matrices import FullMatrix  # noqa: E402
from app.services.reliability import verdicts  # noqa: E402
from bench.synth import make_synthetic  # noqa: E402

THRESHOLD = 0.8


def _full(correct: np.ndarray) -> FullMatrix:
    c = np.ascontiguousarray(correct, dtype=np.uint8)
    names = np.array([f"m{i}" for i in range(c.shape[0])])
    return FullMatrix(
        version_id=uuid.uuid4(),  # a fresh key: every size computed cold
        stamp=(c.shape[0], None),
        names=names,
        rows={str(n): i for i, n in enumerate(names)},
        correct=c,
        accuracy=c.mean(axis=1),
        subtasks=np.array(["all"] * c.shape[1]),
        unusable={},
    )


def run(label: str, correct: np.ndarray, gaps: list[float]) -> None:
    grid = verdicts.exact_grid(correct.shape[1])
    grid_cells = [exact_agreement(correct, n, threshold=THRESHOLD) for n in grid]
    print(f"\n{label}: {correct.shape[0]} models x {correct.shape[1]} items")
    print("gap   exact n  passes  seconds  old n  P at old n  old n enough")
    for gap in gaps:
        fm = _full(correct)
        start = time.perf_counter()
        size, cells = verdicts.exact_plan_size(fm, gap, THRESHOLD)
        seconds = time.perf_counter() - start
        old = core_plan(gap, "random", THRESHOLD, results=grid_cells).n
        if old is None:
            p_old, enough = float("nan"), "-"
        else:
            p_old = float(exact_agreement(correct, old, threshold=THRESHOLD).curve.at(gap))
            enough = "yes" if p_old >= THRESHOLD else "NO"
        print(
            f"{gap:<5} {size!s:>7}  {len(cells):>6}  {seconds:>7.1f}  {old!s:>5}  "
            f"{p_old:>10.3f}  {enough}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaps", type=float, nargs="+", default=[0.02, 0.05, 0.1])
    args = parser.parse_args()
    shared = Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")
    with np.load(shared / "gpqa.npz") as data:
        run("REAL GPQA", data["correct"], args.gaps)
    for models, items, seed in ((200, 1000, 0), (60, 300, 1)):
        synth = make_synthetic(models, items, seed=seed)
        run(f"SYNTHETIC seed {seed}", synth.correct, args.gaps)


if __name__ == "__main__":
    main()
