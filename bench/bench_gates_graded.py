"""Release gates on graded scores (issue 35 item 1: "sessions and gates ... measure them on graded
data"): wrong PASS / wrong FAIL of the service's gate engine with its default prediction.

All SYNTHETIC. Each benchmark is one of the graded families of :mod:`bench.bench_graded`
(``mass01``: mass at 0 and 1 plus a Beta continuum; ``judge``: 60-90 % zeros, the rest skewed low;
``ksample``: pass rates over 8 samples; plus ``mass01`` again at 5,000 items for K = 5 and
``judge`` at 300), item difficulties ``b ~ N(0, 1)``, a baseline of strength ``theta + N(0, 0.3)``
per gate. The candidate is the baseline with the scores of a random ``1 - agree`` share of its
items permuted among themselves (the mean is unchanged: Delta = 0 exactly, each moved item's
score changes), then, for a gap ``-g``, every score scaled by ``1 - g N / sum(scores)`` (Delta = -g
exactly, to float precision). Cases as ``bench/bench_gates.py --cases error``: (a) every gap 0 and
every gap -margin/2 (a FAIL is wrong); (b) one benchmark exactly at the margin, (c) one at margin +
1 point (a PASS is wrong). Margin 2 points, batches of 50, alpha = 0.05, the engine's default
prediction (``calibrated`` with its design prior).

    .venv/bin/python bench/bench_gates_graded.py --gates 1000 --k 3 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.sequential.gating.gates import G_FAIL, G_INCONCLUSIVE, G_PASS, run_gates
from bench.bench_graded import family

ALPHA = 0.05
MARGIN = 0.02
#: (label, family, items, baseline strength)
SHAPES = (
    ("mass01-800", "mass01", 800, 0.0),
    ("judge-2000", "judge", 2000, 0.5),
    ("ksample-400", "ksample", 400, -0.5),
    ("mass01-5000", "mass01", 5000, 1.0),
    ("judge-300", "judge", 300, 0.0),
)


def cp_upper(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound."""
    return 1.0 if k >= n else float(beta_dist.ppf(level, k + 1, n - k))


def baselines(k: int, gates: int, rng) -> list[tuple[str, np.ndarray]]:
    out = []
    for label, fam, n, theta in SHAPES[:k]:
        b = rng.standard_normal(n)
        th = theta + 0.3 * rng.standard_normal(gates)
        out.append((label, family(fam, th, b, rng)))
    return out


def sibling(base: np.ndarray, gap, agree: float, rng) -> np.ndarray:
    """Candidates (S, N): ``1 - agree`` of the items' scores permuted among themselves, then
    scaled to the exact gap ``gap`` (S,) (<= 0)."""
    s, n = base.shape
    moved = np.argsort(rng.random((s, n)), axis=1)[:, : round((1 - agree) * n)]  # (S, m)
    perm = np.take_along_axis(moved, np.argsort(rng.random(moved.shape), axis=1), axis=1)
    out = base.copy()
    rows = np.arange(s)[:, None]
    out[rows, moved] = base[rows, perm]
    total = out.sum(axis=1)
    scale = 1.0 + np.asarray(gap, dtype=np.float64) * n / np.maximum(total, 1e-12)
    if np.any(scale < 0):
        raise ValueError("gap: a baseline scores too little for this gap")
    return out * scale[:, None]


def case_rows(k: int, gates: int, seed: int, agree: float) -> list[dict]:
    rng = np.random.default_rng(seed)
    benches = baselines(k, gates, rng)
    pick = rng.integers(0, k, gates)
    setups = (
        ("a: every gap 0", np.zeros((gates, k)), "fail"),
        ("a: every gap -margin/2", np.full((gates, k), -MARGIN / 2), "fail"),
        ("b: one at the margin", np.where(np.arange(k) == pick[:, None], -MARGIN, 0.0), "pass"),
        ("c: one at margin + 1 pt", np.where(np.arange(k) == pick[:, None], -(MARGIN + 0.01), 0.0),
         "pass"),
    )  # fmt: skip
    rows = []
    for label, gaps, wrong in setups:
        t0 = time.time()
        bases = [b for _, b in benches]
        cands = [sibling(b, gaps[:, j], agree, rng) for j, b in enumerate(bases)]
        run = run_gates(cands, bases, [MARGIN] * k, alpha=ALPHA, batch_size=50, seed=seed + 1)
        true_gap = np.stack([c.mean(1) - b.mean(1) for c, b in zip(cands, bases, strict=True)], 1)
        noninf = true_gap > -MARGIN + 1e-9
        if wrong == "fail":
            bad = int(((run.outcome == G_FAIL) & noninf.all(1)).sum())
        else:
            bad = int(((run.outcome == G_PASS) & ~noninf.all(1)).sum())
        rows.append(
            {
                "suite": f"K={k} ({', '.join(n for n, _ in benches)})",
                "case": label,
                "pass": int((run.outcome == G_PASS).sum()),
                "fail": int((run.outcome == G_FAIL).sum()),
                "inconclusive": int((run.outcome == G_INCONCLUSIVE).sum()),
                "wrong": f"wrong {wrong.upper()} {bad} (CP95 {cp_upper(bad, gates):.4f})",
                "items": float(np.median(run.items.sum(1))),
                "of": int(sum(b.shape[1] for b in bases)),
                "s": round(time.time() - t0, 1),
            }
        )
        print(rows[-1], flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gates", type=int, default=1000)
    ap.add_argument("--k", type=int, nargs="+", default=[3, 5])
    ap.add_argument("--agree", type=float, default=0.88)
    ap.add_argument("--seed", type=int, default=3535)
    args = ap.parse_args(argv)
    lines = [
        "| suite | case | gates | PASS | FAIL | INCONCLUSIVE | wrong (CP95) | median items (of) | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in args.k:
        for r in case_rows(k, args.gates, args.seed + k, args.agree):
            lines.append(
                f"| {r['suite']} | {r['case']} | {args.gates} | {r['pass']} | {r['fail']} | "
                f"{r['inconclusive']} | {r['wrong']} | {r['items']:.0f} ({r['of']}) | {r['s']} |"
            )
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
