"""Time ``app.core.ranking.leaderboard.leaderboard`` (issue 14) and count the tiers GPQA forms.

Cases (targets from issue 14):

* REAL GPQA-main (``shared/data/gpqa.npz``): 420 models x 448 items, 87,990 pairs, items mode
  (McNemar + Holm) — target < 1 s;
* SYNTHETIC 447 models x 12,032 items (``bench/synth.py``, GPQA-calibrated 2PL, seed 0), items
  mode — target < 5 s;
* REAL GPQA on a 100-item uniform random subset (seed 0), benchmark mode (exact conditional
  finite-population test) — timing only.

Wall time: median and min of the repeats after one warm-up. Peak memory: ``tracemalloc`` peak of
one call (numpy allocations are traced), next to what an ``m² N`` intermediate would need.
Finally the number of tiers (and tier-1 size) GPQA forms on all 448 items and on the 100-item
subset, under both readings (``population="items"`` and ``"benchmark"``).

    .venv/bin/python bench/bench_leaderboard.py            # full
    .venv/bin/python bench/bench_leaderboard.py --quick    # GPQA only, one repeat
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.ranking.leaderboard import leaderboard  # noqa: E402

SUBSET_SEED = 0
SUBSET_N = 100


def shared_data() -> Path:
    return Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")


def _time(fn, repeats: int) -> tuple[float, float]:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(np.min(times))


def _peak_mb(fn) -> float:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def _row(label, c, fn, repeats, target) -> str:
    med, mn = _time(fn, repeats)
    peak = _peak_mb(fn)
    m, n = c.shape
    naive = m * m * n / 2**20  # one byte per (pair, item): an m² N intermediate
    ok = "" if target is None else (" ✓" if med < target else " ✗")
    tgt = "-" if target is None else f"< {target:g} s"
    return (
        f"| {label} | {m} x {n} | {m * (m - 1) // 2:,} | {med:.3f} | {mn:.3f} | {tgt}{ok} "
        f"| {peak:.1f} | {naive:,.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="GPQA only, one repeat")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats

    with np.load(shared_data() / "gpqa.npz", allow_pickle=False) as d:
        gpqa = d["correct"]
    n_pop = gpqa.shape[1]
    idx = np.random.default_rng(SUBSET_SEED).choice(n_pop, SUBSET_N, replace=False)
    sub = gpqa[:, idx]

    print(
        "| case | models x items | pairs | median s | min s | target | peak MB (tracemalloc) "
        "| m²N bytes, MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(_row("GPQA (real), items mode, Holm", gpqa, lambda: leaderboard(gpqa), repeats, 1.0))
    print(
        _row(
            f"GPQA (real), {SUBSET_N}-item uniform subset (seed {SUBSET_SEED}), benchmark mode",
            sub,
            lambda: leaderboard(sub, population="benchmark", n_population=n_pop),
            repeats,
            None,
        )
    )
    if not args.quick:
        from bench.synth import make_synthetic

        synth = make_synthetic(447, 12032, seed=0).correct
        print(
            _row(
                "SYNTHETIC (bench/synth.py, seed 0), items mode, Holm",
                synth,
                lambda: leaderboard(synth),
                max(1, repeats // 2),
                5.0,
            )
        )

    print()
    print(
        "| GPQA (real) leaderboard | population | tiers | tier-1 size | mean rank-interval width |"
    )
    print("|---|---|---|---|---|")
    cases = [
        ("all 448 items", "items", leaderboard(gpqa)),
        ("all 448 items", "benchmark", leaderboard(gpqa, population="benchmark")),
        (
            f"{SUBSET_N}-item uniform subset, seed {SUBSET_SEED}",
            "items",
            leaderboard(sub),
        ),
        (
            f"{SUBSET_N}-item uniform subset, seed {SUBSET_SEED}",
            "benchmark",
            leaderboard(sub, population="benchmark", n_population=n_pop),
        ),
    ]
    for label, pop, lb in cases:
        width = float(np.mean(lb.rows.rank_high - lb.rows.rank_low + 1))
        print(
            f"| {label} | {pop} | {lb.n_tiers} | {int(np.sum(lb.rows.tier == 1))} | {width:.1f} |"
        )
    print()
    print(f"- alpha 0.05, Holm; subset = np.random.default_rng({SUBSET_SEED}).choice(448, 100)")


if __name__ == "__main__":
    main()
