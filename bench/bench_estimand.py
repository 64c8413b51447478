"""Issue 38: is a session with ``estimand=generalized`` wrong at most alpha of the time?

The benchmark is a random part of a larger item set whose mean is the truth: on REAL GPQA, 150
of the 448 items (a fresh random part per session), the truth the pair's 448-item difference; on
SYNTHETIC families (an item population of 4,000 two-parameter-logistic items, the benchmark a
random 150 or 500 of them, the truth the population mean): ``weak`` (abilities below most items),
``strong`` (above), ``wide`` (spread abilities), ``discriminative`` (slopes around 3).

Each session serves its benchmark in a uniformly random order and bets on the paired
differences with the baseline exactly as the service does
(:func:`app.core.sequential.population.population_cs_update`); a decision is read after every
item (stricter than the service's batches). It is wrong when it says ``better`` while the true
difference is <= 0, ``worse`` while it is >= 0 (on an exactly tied pair every decision is wrong).
The same sessions with ``estimand=benchmark`` (the finite-population CS of the model's mean on
the 150 items, minus the baseline's known 150-item mean) are shown for contrast: they answer a
different question (these 150 items), so their "wrong" share against the larger truth is not
bounded by alpha.

    .venv/bin/python -m bench.bench_estimand --sessions 400 --seed 38
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist

from app.core.sequential.confidence_sequences import confidence_sequence
from app.core.sequential.population import population_confidence_sequence

GPQA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gpqa.npz"
BUCKETS = [(0.0, 0.0, "tied (exactly)"), (0.0, 0.02, "0-2 pts"), (0.02, 0.05, "2-5 pts")]
BUCKETS += [(0.05, 0.10, "5-10 pts"), (0.10, 0.15, "10-15 pts"), (0.15, 1.0, ">= 15 pts")]


def _bucket(gap: np.ndarray) -> np.ndarray:
    """Index into BUCKETS of |true gap| (0 for exact ties)."""
    g = np.abs(gap)
    out = np.full(g.shape, -1)
    out[g < 1e-12] = 0
    for k, (lo, hi, _) in enumerate(BUCKETS[1:], start=1):
        out[(g >= 1e-12) & (g > lo - 1e-12) & (g <= hi + 1e-12) & (out < 0)] = k
    return out


def run_sessions(a: np.ndarray, b: np.ndarray, truth: np.ndarray, alpha: float) -> dict:
    """``a``, ``b``: (S, n) served values of model and baseline; ``truth``: (S,) the larger
    set's difference. Returns per-session first decision and items, for both estimands."""
    x = (a - b + 1.0) / 2.0
    lo, hi = population_confidence_sequence(x, alpha=alpha)
    dlo, dhi = 2 * lo - 1, 2 * hi - 1
    n = a.shape[1]
    # benchmark estimand: CS for the model's mean on these n items, minus the baseline's mean
    bench = confidence_sequence(a, n_items=n, alpha=alpha)
    bmean = b.mean(axis=1, keepdims=True)
    blo, bhi = bench.lower - bmean, bench.upper - bmean
    out = {}
    for name, (low, high) in {"generalized": (dlo, dhi), "benchmark": (blo, bhi)}.items():
        decided = (low > 0) | (high < 0)
        any_d = decided.any(axis=1)
        first = np.where(any_d, decided.argmax(axis=1), n - 1)
        rows = np.arange(a.shape[0])
        better = any_d & (low[rows, first] > 0)
        worse = any_d & (high[rows, first] < 0)
        wrong = (better & (truth <= 0)) | (worse & (truth >= 0))
        out[name] = {"decided": any_d, "wrong": wrong, "items": first + 1}
    return out


def gpqa_sessions(rng: np.random.Generator, sessions: int, n: int, alpha: float) -> dict:
    with np.load(GPQA, allow_pickle=False) as d:
        c = d["correct"].astype(np.float64)
    m, items = c.shape
    counts = c.sum(axis=1)
    # ``sessions`` pairs per gap bucket: exactly tied pairs (equal 448-item counts) and pairs
    # drawn uniformly among those whose 448-item gap falls in each other bucket
    gap = (counts[:, None] - counts[None, :]) / items
    iu, ju = np.triu_indices(m, 1)
    which = _bucket(gap[iu, ju])
    pa, pb = [], []
    for k in range(len(BUCKETS)):
        cand = np.flatnonzero(which == k)
        if cand.size:
            pick = cand[rng.integers(0, cand.size, sessions)]
            pa.append(iu[pick])
            pb.append(ju[pick])
    pa, pb = np.concatenate(pa), np.concatenate(pb)
    swap = rng.random(pa.size) < 0.5
    pa, pb = np.where(swap, pb, pa), np.where(swap, pa, pb)
    order = np.argsort(rng.random((pa.size, items)), axis=1)[:, :n]  # a random n, random order
    a = np.take_along_axis(c[pa], order, axis=1)
    b = np.take_along_axis(c[pb], order, axis=1)
    truth = (counts[pa] - counts[pb]) / items
    return {"a": a, "b": b, "truth": truth}


FAMILIES = {
    # (ability mean, ability sd, slope mean): 2PL p = sigmoid(slope (theta - difficulty))
    "weak": (-1.5, 0.5, 1.0),
    "strong": (1.5, 0.5, 1.0),
    "wide": (0.0, 1.5, 1.0),
    "discriminative": (0.0, 0.8, 3.0),
}


def synthetic_sessions(
    rng: np.random.Generator, family: str, sessions: int, n: int, population: int = 4000
) -> dict:
    mu, sd, slope = FAMILIES[family]
    diff = rng.normal(0.0, 1.0, population)
    a_i = rng.lognormal(np.log(slope), 0.3, population)
    theta = rng.normal(mu, sd, 2 * sessions)
    # half the pairs share one ability (near-tied), half independent abilities
    theta[1::2][: sessions // 2] = theta[0::2][: sessions // 2] + rng.normal(0, 0.02, sessions // 2)
    p = 1.0 / (1.0 + np.exp(-a_i[None, :] * (theta[:, None] - diff[None, :])))
    y = (rng.random(p.shape) < p).astype(np.float64)
    ya, yb = y[0::2], y[1::2]
    truth = ya.mean(axis=1) - yb.mean(axis=1)
    order = np.argsort(rng.random((sessions, population)), axis=1)[:, :n]
    return {
        "a": np.take_along_axis(ya, order, axis=1),
        "b": np.take_along_axis(yb, order, axis=1),
        "truth": truth,
    }


def _table(res: dict, truth: np.ndarray, alpha: float) -> list[dict]:
    rows = []
    bucket = _bucket(truth)
    for k, (_, _, label) in enumerate(BUCKETS):
        sel = bucket == k
        if not sel.any():
            continue
        row = {"bucket": label, "sessions": int(sel.sum())}
        for name, r in res.items():
            wrong = int(r["wrong"][sel].sum())
            row[f"{name}_decided"] = float(r["decided"][sel].mean())
            row[f"{name}_wrong"] = wrong
            row[f"{name}_wrong_share"] = wrong / int(sel.sum())
            row[f"{name}_wrong_cp95"] = float(beta_dist.ppf(0.95, wrong + 1, sel.sum() - wrong))
            dec = r["decided"][sel]
            row[f"{name}_median_items"] = (
                float(np.median(r["items"][sel][dec])) if dec.any() else None
            )
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sessions", type=int, default=400, help="GPQA: per gap bucket; synthetic: per family"
    )
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    report = {"seed": args.seed, "alpha": args.alpha, "sets": {}}
    sets = [("REAL gpqa 150 of 448", lambda: gpqa_sessions(rng, args.sessions, 150, args.alpha))]
    for fam in FAMILIES:
        for n in (150, 500):
            sets.append(
                (
                    f"SYNTHETIC {fam} {n} of 4000",
                    lambda f=fam, n=n: synthetic_sessions(rng, f, args.sessions, n),
                )
            )
    for label, make in sets:
        t0 = time.perf_counter()
        data = make()
        res = run_sessions(data["a"], data["b"], data["truth"], args.alpha)
        rows = _table(res, data["truth"], args.alpha)
        report["sets"][label] = rows
        print(f"\n## {label}  ({time.perf_counter() - t0:.0f} s, SHARED machine)")
        print(
            "| |true gap| | sessions | generalized: wrong (share, CP95) | decided | median items | benchmark: wrong (share) |"
        )
        print("|---|---:|---|---:|---:|---|")
        for r in rows:
            print(
                f"| {r['bucket']} | {r['sessions']} | {r['generalized_wrong']} "
                f"({r['generalized_wrong_share']:.3f}, <= {r['generalized_wrong_cp95']:.3f}) | "
                f"{r['generalized_decided']:.2f} | {r['generalized_median_items']} | "
                f"{r['benchmark_wrong']} ({r['benchmark_wrong_share']:.3f}) |"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
