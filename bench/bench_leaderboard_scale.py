"""Time and memory of the leaderboard engine on leaderboard-size populations (issue 27).

SYNTHETIC populations from ``bench/synth.py`` (GPQA-calibrated 2PL, seed 0): m models x N items
for m = 1,000 / 2,500 / 5,000 / 10,000 at N = 1,000, and the 5,000 x 250 case of the issue.
Items mode (exact McNemar, Holm), the service's default leaderboard; ``--correction bh`` for BH.

Each case runs in a fresh Python process that loads only the 0/1 matrix (``m N`` bytes), so its
peak resident set (``VmHWM``) is the engine's peak plus the interpreter, numpy and the
matrix; the baseline before the call is printed next to it. Wall time of one call (the first:
what a cold leaderboard request pays). The rows only: the pairwise table is computed per page
on demand (``Leaderboard.table.pairs``), so it is not part of the call.

    .venv/bin/python bench/bench_leaderboard_scale.py
    .venv/bin/python bench/bench_leaderboard_scale.py --sizes 5000x250 10000x1000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import status_mb  # noqa: E402

DEFAULT_SIZES = ("1000x1000", "2500x1000", "5000x1000", "10000x1000", "5000x250")


def _child(path: str, correction: str) -> None:
    from app.core.ranking.leaderboard import leaderboard

    correct = np.load(path)
    base = status_mb("VmRSS")
    t0 = time.perf_counter()
    board = leaderboard(correct, correction=correction)
    seconds = time.perf_counter() - t0
    peak = status_mb("VmHWM")
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_rss_mb": peak,
                "baseline_rss_mb": base,
                "n_tiers": board.n_tiers,
                "n_significant": board.table.n_significant,
                "n_pairs": board.table.n_pairs,
            }
        )
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="*", default=list(DEFAULT_SIZES))
    parser.add_argument("--correction", default="holm", choices=("holm", "bh", "none"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.correction)
        return
    from bench.synth import make_synthetic

    print(f"load before: {os.getloadavg()}")
    print("| m x N | pairs | wall s | peak RSS MB (baseline) | tiers | significant pairs |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            m, n = (int(v) for v in size.split("x"))
            path = str(Path(tmp) / f"{size}.npy")
            np.save(path, make_synthetic(m, n, seed=0).correct)
            out = subprocess.run(
                [sys.executable, __file__, "--child", path, "--correction", args.correction],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(
                f"| {m:,} x {n:,} | {r['n_pairs']:,} | {r['seconds']:.2f} | "
                f"{r['peak_rss_mb']:.0f} ({r['baseline_rss_mb']:.0f}) | {r['n_tiers']} | "
                f"{r['n_significant']:,} |",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
