"""Evaluation sessions (issue 12): validity, items used and simulator speed on REAL GPQA data.

Cases (all on shared/data/gpqa.npz, 420 models x 448 items, alpha = 0.05, goal ``decide``):
  validity-b10 / validity-b1  ``random`` policy only, ``--sessions`` sessions (default 2,000 = 1,000
                              pairs x 2 random orders) from a 95 % held-out pool (every model but a
                              seeded 5 % may appear in a pair), batch 10 and batch 1.
  gap>=15                     ``random`` only, ``--sessions / 4`` sessions on pairs drawn uniformly among
                              all GPQA pairs >= 15 points apart (one random order each), batch 1 and
                              10, the default ``agrapa`` bet next to the plain hedged ``plugin`` bet of
                              statistics-next §1 (the issue's efficiency bar: median <= 150).
  simulate-400                both policies, 400 pairs, batch 10, the simulator's defaults (25 %
                              held-out pool; the IRT fit for ``fluid`` on the other 75 %, D = 2):
                              the ``benchslice simulate --pairs 400`` workload, timed end to end.
Per case: sessions, decided share, wrong decisions with a Clopper-Pearson 95 % interval, and per
gap bucket the median / p90 / mean items used next to the median exact fixed random-subset size
(P(correct order) >= 0.95, hypergeometric). Markdown to stdout; nothing is written to the tree.

Usage: .venv/bin/python bench/bench_sessions.py [--quick] [--sessions S] [--seed K] [--bet B]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.sequential.simulation import simulate_random, simulate_sessions  # noqa: E402


def _data() -> np.ndarray:
    base = Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")
    with np.load(base / "gpqa.npz", allow_pickle=False) as d:
        return d["correct"]


def _table(case: str, res, seconds: float) -> list[str]:
    lines = []
    for name, s in res.policies.items():
        lo, hi = s.wrong_ci
        lines.append(
            f"\n**{case} / {name}**: {s.sessions} sessions, decided {s.decided_share:.3f}, "
            f"wrong {s.wrong} = {s.wrong_share:.4f} (95 % CI {lo:.4f}-{hi:.4f}), "
            f"final interval misses Delta in {s.missed}; policy time {s.runtime_s:.2f} s "
            f"(case total {seconds:.2f} s)\n"
        )
        lines.append(
            "| gap (pts) | sessions | decided | wrong | median items | p90 items | mean items "
            "| exact fixed n (median) |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in s.buckets:
            lines.append(
                f"| {r.bucket} | {r.sessions} | {r.decided} | {r.wrong} | {r.median_items:.0f} "
                f"| {r.p90_items:.0f} | {r.mean_items:.1f} | {r.median_fixed_n:.0f} |"
            )
    return lines


def _large_gaps(c: np.ndarray, sessions: int, seed: int) -> list[str]:
    acc = c.mean(axis=1)
    i, j = np.triu_indices(c.shape[0], 1)
    big = np.flatnonzero(np.abs(acc[i] - acc[j]) >= 0.15)
    rng = np.random.default_rng(seed)
    pick = big[rng.integers(0, big.size, sessions)]
    a, b = i[pick], j[pick]
    x = (c[a].astype(float) - c[b] + 1.0) / 2.0
    delta = acc[a] - acc[b]
    lines = [
        f"\n**gap>=15 / random**: {sessions} sessions on {big.size} GPQA pairs >= 15 points apart\n",
        "| bet | batch | median items | p90 items | mean items | wrong | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for bet in ("agrapa", "plugin"):
        for batch in (1, 10):
            t0 = time.perf_counter()
            items, lo, hi = simulate_random(x, alpha=0.05, batch_size=batch, bet=bet, rng=seed)
            sec = time.perf_counter() - t0
            wrong = int((((lo > 0) & (delta <= 0)) | ((hi < 0) & (delta >= 0))).sum())
            lines.append(
                f"| {bet} | {batch} | {np.median(items):.0f} | {np.percentile(items, 90):.0f} "
                f"| {items.mean():.1f} | {wrong} | {sec:.2f} |"
            )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 sessions, 100 pairs")
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bet", default="agrapa")
    args = ap.parse_args()
    c = _data()
    sessions = 200 if args.quick else args.sessions
    pairs400 = 100 if args.quick else 400
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    out = [
        f"### Sessions (issue 12), GPQA real data {c.shape[0]} x {c.shape[1]}, alpha 0.05, "
        f"bet {args.bet}, seed {args.seed}",
        f"commit {commit}, python {platform.python_version()}, numpy {np.__version__}, "
        f"{os.cpu_count()} cores",
    ]
    for batch in (10, 1):
        t0 = time.perf_counter()
        res = simulate_sessions(
            c,
            policies=("random",),
            pairs=sessions // 2,
            orders=2,
            batch_size=batch,
            holdout=0.95,
            bet=args.bet,
            rng=args.seed,
        )
        out += _table(f"validity-b{batch}", res, time.perf_counter() - t0)
    out += _large_gaps(c, max(sessions // 4, 50), args.seed)
    t0 = time.perf_counter()
    res = simulate_sessions(c, pairs=pairs400, batch_size=10, bet=args.bet, rng=args.seed)
    total = time.perf_counter() - t0
    out += _table(f"simulate-{pairs400}", res, total)
    out.append(
        f"\nsimulate-{pairs400} wall time (both policies, exact fixed sizes, IRT fit "
        f"{res.params['irt_fit_s']:.2f} s): **{total:.2f} s**"
    )
    print("\n".join(out))


if __name__ == "__main__":
    main()
