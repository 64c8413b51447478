"""Cost-aware allocation of a release gate's rounds (issue 37 item 4): progress vs cost.

SYNTHETIC suite of K = 3 benchmarks (2PL baselines with GPQA-fitted item quantiles, one baseline
row per gate, as ``bench_gates.py``) whose per-item costs differ: mean cost 1x, 3x and 10x (sizes
1,200 / 800 / 500), lognormal within each benchmark (sigma 0.6). The *predicted* cost per item is
the median over 8 SYNTHETIC stored models (each the item's cost x a model factor x item noise);
the allocation uses each benchmark's mean predicted cost (fixed before the gate starts). The
candidate's own costs (another factor, other noise) are what a gate *spends*.

Candidates are the baseline with items flipped (SYNTHETIC siblings, 88 % agreement, exact gaps):
every Delta_k = 0; every Delta_k = -1 point (both: a FAIL is wrong); one benchmark regressed by 5
points (the 10x one, or the 1x one) or exactly at the 3-point margin (a PASS is wrong). The same
pairs, orders and seeds for every allocation:

* ``progress``: shares ``1 + progress_k`` (today's default);
* ``cost``: ``(1 + progress_k) / c_k`` (``allocation="cost"``);
* ``sqrt``: ``(1 + progress_k) / sqrt(c_k)`` (the engine's ``cost`` fed ``sqrt(c_k)``: a milder
  variant, measured for comparison only).

Columns: decisions (right / wrong PASS / wrong FAIL / inconclusive, with one-sided 95 %
Clopper-Pearson upper bounds on the wrong rates), the median cost spent to the decision (in units
of the 1x benchmark's mean item), items and rounds, and the median per-gate saving against
``progress`` on the same gate.

    python bench/bench_gate_cost_allocation.py --gates 400
    python bench/bench_gate_cost_allocation.py --gates 2000 --only "at margin"
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.sequential.gating.gates import (  # noqa: E402
    G_FAIL,
    G_INCONCLUSIVE,
    G_PASS,
    gate_orders,
    run_gates,
)
from bench.bench_gates import cp_upper, flip, synthetic_benchmark  # noqa: E402

SIZES = (1200, 800, 500)
MEAN_COST = (1.0, 3.0, 10.0)
THETAS = (0.5, 0.0, -0.5)
NAMES = ("cheap 1x", "mid 3x", "dear 10x")


def item_costs(rng, n: int, mean: float, stored: int = 8):
    """SYNTHETIC per-item costs: (predicted = median over ``stored`` models, candidate's own)."""
    base = rng.lognormal(0.0, 0.6, n)
    base *= mean / base.mean()
    models = base[None, :] * rng.lognormal(0, 0.2, (stored, 1)) * rng.lognormal(0, 0.3, (stored, n))
    own = base * 1.15 * rng.lognormal(0, 0.3, n)
    return np.median(models, axis=0), own


def cases(margin: float):
    reg = -(margin + 0.02)
    return [
        ("siblings, every Delta = 0", (0.0, 0.0, 0.0), True),
        ("non-inferior, every Delta = -1 pt", (-0.01, -0.01, -0.01), True),
        ("regressed 10x (Delta = -5 pt)", (0.0, 0.0, reg), False),
        ("regressed 1x (Delta = -5 pt)", (reg, 0.0, 0.0), False),
        ("at margin on 10x", (0.0, 0.0, -margin), False),
        ("at margin on 1x", (-margin, 0.0, 0.0), False),
    ]


def spent(items, orders, own):
    """Cost of the first ``items[s, k]`` items of every benchmark's serving order (S,)."""
    total = np.zeros(items.shape[0])
    for k, (o, c) in enumerate(zip(orders, own, strict=True)):
        cum = np.concatenate([np.zeros((o.shape[0], 1)), np.cumsum(c[o], axis=1)], axis=1)
        total += cum[np.arange(o.shape[0]), items[:, k]]
    return total


def run(gates: int, margin: float, batch: int, seed: int, only: str | None = None):
    rng = np.random.default_rng(seed)
    bases = [synthetic_benchmark(n, th, gates, rng) for n, th in zip(SIZES, THETAS, strict=True)]
    pairs = [item_costs(rng, n, c) for n, c in zip(SIZES, MEAN_COST, strict=True)]
    pred, own = [p for p, _ in pairs], [o for _, o in pairs]
    c_k = np.array([p.mean() for p in pred])
    variants = {"progress": {}, "cost": {"allocation": "cost", "costs": c_k},
                "sqrt": {"allocation": "cost", "costs": np.sqrt(c_k)}}  # fmt: skip
    rows = []
    for ci, (name, deltas, fine) in enumerate(cases(margin)):
        if only and only not in name:
            continue
        cand = [flip(b, d, 0.88, rng) for b, d in zip(bases, deltas, strict=True)]
        orders = gate_orders(seed + ci, SIZES, gates)
        ref = None
        for label, kw in variants.items():
            t0 = time.perf_counter()
            r = run_gates(cand, bases, [margin] * 3, batch_size=batch, orders=orders, **kw)
            cost = spent(r.items, orders, own)
            ref = cost if ref is None else ref
            wrong = (r.outcome == G_FAIL) if fine else (r.outcome == G_PASS)
            right = (r.outcome == G_PASS) if fine else (r.outcome == G_FAIL)
            rows.append({
                "case": name, "allocation": label, "right": right.mean(),
                "wrong_pass": 0 if fine else int(wrong.sum()),
                "wrong_fail": int(wrong.sum()) if fine else 0,
                "inconclusive": (r.outcome == G_INCONCLUSIVE).mean(),
                "cost": float(np.median(cost)), "items": float(np.median(r.items.sum(1))),
                "rounds": float(np.median(r.rounds)),
                "per_bench": np.median(r.items, axis=0).tolist(),
                "saving": float(np.median(1 - cost / ref)), "seconds": time.perf_counter() - t0,
            })  # fmt: skip
    return rows, c_k


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gates", type=int, default=400)
    ap.add_argument("--margin", type=float, default=0.03)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--only", default=None, help="only the cases whose name contains this")
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    rows, c_k = run(args.gates, args.margin, args.batch, args.seed, args.only)
    print(f"SYNTHETIC; {args.gates} gates per case, margin {args.margin}, batch {args.batch}, "
          f"alpha 0.05, seed {args.seed}; commit {commit}; {os.cpu_count()} cores (shared)")  # fmt: skip
    print("predicted mean cost per item: "
          + ", ".join(f"{n} {c:.3g}" for n, c in zip(NAMES, c_k, strict=True)))  # fmt: skip
    print("\n| case | allocation | right | wrong PASS (95% up) | wrong FAIL (95% up) | "
          "inconclusive | median cost | saving vs progress (median per gate) | median items "
          "(1x / 3x / 10x) | median rounds |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    n = args.gates
    for r in rows:
        wp = f"{r['wrong_pass'] / n:.3f} ({cp_upper(r['wrong_pass'], n):.3f})"
        wf = f"{r['wrong_fail'] / n:.3f} ({cp_upper(r['wrong_fail'], n):.3f})"
        per = " / ".join(f"{x:.0f}" for x in r["per_bench"])
        print(f"| {r['case']} | {r['allocation']} | {r['right']:.3f} | {wp} | {wf} | "
              f"{r['inconclusive']:.3f} | {r['cost']:,.0f} | {100 * r['saving']:+.1f} % | "
              f"{r['items']:.0f} ({per}) | {r['rounds']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
