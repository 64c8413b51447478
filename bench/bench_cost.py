"""Cost-aware sessions against uniform draws, side by side (issue 37).

Cases (alpha = 0.05, goal ``decide``, batch 10, every session deciding with the §7 confidence
sequence, so the error guarantee is the same for every variant):
  gpqa       REAL GPQA correctness (shared/data/gpqa.npz, 420 models x 448 items) with a
             SYNTHETIC cost proxy: GPQA's release has no per-item token counts, so item ``i``
             costs ``exp(kappa z_i)`` "output tokens" x a per-model verbosity (lognormal, sd 0.5)
             x per-(model, item) noise (lognormal, sd 0.3), ``z_i`` the standardised logit of the
             item's error rate among the IRT-training models and ``kappa`` such that the 5-95 %
             range of item costs is 10x (harder items cost more, as reasoning models write more
             on them).
  synthetic  SYNTHETIC benchmark (bench/synth.py, 200 models x 1000 items, positive
             discrimination), costs ``exp(kappa z_i)`` with ``z_i`` the standardised item
             difficulty ``b_i`` (10x 5-95 % range), same verbosity and noise.
  alpaca     REAL graded scores AND REAL per-item costs (bench/data/alpaca_eval_weighted.npz,
             54 models x 805 AlpacaEval instructions): the GPT-4-turbo judge's weighted
             preference of each model's output over the reference's (in [0, 1]), and each
             model's own output length in words as its cost (generation cost grows with the
             output tokens; words are the unit here, about 0.75 of a token).
Pairs: a seeded 25 % held-out pool (the IRT fit and the cost summary use only the other models),
pairs drawn in equal numbers per gap bucket, 2 replays each. The design's costs are the stored
models' per-item median (app.core.sequential.cost.item_cost_summary: *predicted*); what a session
spends is the candidate's own costs (*measured*). Variants, all on the same sessions and seeds:
  uniform-assisted   the default policy: IRT control variates, uniform draws (gamma = 1)
  uniform-random     plain uniform draws, no predictions
  cost-assisted      IRT control variates, pi ~ 1/sqrt(cost) with floor gamma
  cost-neyman        IRT control variates, pi ~ Neyman score / sqrt(cost) with floor gamma, the
                     assisted policy's bet (agrapa-cv, c = 0.9)
Per variant and gap bucket: sessions, wrong decisions (CP95 upper), median cost and items to the
end of the session, and the median cost relative to uniform-assisted. Markdown to stdout.

Usage: .venv/bin/python bench/bench_cost.py [--quick] [--sessions S] [--seed K] [--gamma G]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.irt.fit import fit_irt  # noqa: E402
from app.core.sequential.confidence_sequences import BETTER, EQUIVALENT, WORSE  # noqa: E402
from app.core.sequential.cost import COST_GAMMA, item_cost_summary  # noqa: E402
from app.core.sequential.cost_simulation import simulate_cost_policy  # noqa: E402
from app.core.sequential.fluid import ItemBank  # noqa: E402
from app.core.sequential.simulation import (  # noqa: E402
    GAP_LABELS,
    _bucket_of,
    _draw_pairs,
    clopper_pearson,
)
from bench.synth import make_synthetic  # noqa: E402

Z90 = 1.6448536269514722


def _gpqa() -> np.ndarray:
    base = Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")
    with np.load(base / "gpqa.npz", allow_pickle=False) as d:
        return d["correct"].astype(np.float64)


def cost_matrix(driver: np.ndarray, n_models: int, gen: np.random.Generator) -> np.ndarray:
    """SYNTHETIC per-(model, item) costs whose item factor spans 10x (5-95 %) along ``driver``."""
    z = (driver - driver.mean()) / driver.std()
    kappa = np.log(10.0) / (np.percentile(z, 95) - np.percentile(z, 5))
    item = 200.0 * np.exp(kappa * z)  # "output tokens"
    verbosity = np.exp(0.5 * gen.standard_normal(n_models))
    noise = np.exp(0.3 * gen.standard_normal((n_models, driver.size)))
    return np.maximum(1.0, np.round(item[None, :] * verbosity[:, None] * noise))


VARIANTS = {  # name: (policy, cost-aware, gamma, bet, c, cost_after)
    "uniform-assisted": ("assisted", False, None, None, None, 0),
    "uniform-random": ("random", False, None, None, None, 0),
    "cost-assisted": ("assisted", True, "g", None, None, 0),
    "cost-neyman": ("neyman", True, "g", "agrapa-cv", 0.9, 0),
}


def _alpaca() -> tuple[np.ndarray, np.ndarray]:
    with np.load(ROOT / "bench" / "data" / "alpaca_eval_weighted.npz", allow_pickle=False) as d:
        return d["scores"].astype(np.float64), np.maximum(d["words"], 1).astype(np.float64)


def run_case(name, correct, cost_driver_fn, sessions, seed, gamma, label, *, costs=None,
             unit="tokens"):  # fmt: skip
    gen = np.random.default_rng(seed)
    n_models, n_items = correct.shape
    perm = gen.permutation(n_models)
    n_pool = round(0.25 * n_models)
    pool, train = np.sort(perm[:n_pool]), np.sort(perm[n_pool:])
    acc = correct.mean(axis=1)
    if costs is None:
        costs = cost_matrix(cost_driver_fn(correct[train]), n_models, gen)
    predicted = item_cost_summary(costs[train]).filled()
    t_fit = time.perf_counter()
    bank = ItemBank.from_irt(fit_irt(correct[train], dims=2, rng=gen))
    fit_s = time.perf_counter() - t_fit
    pairs = sessions // 2
    a, b = _draw_pairs(gen, pool, acc, pairs, True)
    a, b = np.repeat(a, 2), np.repeat(b, 2)
    delta = acc[a] - acc[b]
    bucket = _bucket_of(delta)
    draw_seed = int(gen.integers(2**32))
    ratio = np.percentile(predicted, 95) / np.percentile(predicted, 5)
    lines = [
        f"\n#### {name} ({label}, {n_models} models x {n_items} items): {pairs} pairs x 2 "
        f"replays = {a.size} sessions per variant; predicted item cost 5-95 % range "
        f"{ratio:.1f}x, median {np.median(predicted):.0f} {unit}; floor gamma = {gamma}\n",
    ]
    runs, times = {}, {}
    for var, (pol, aware, g, bet, cc, after) in VARIANTS.items():  # each vectorised
        t0 = time.perf_counter()
        runs[var] = simulate_cost_policy(
            pol,
            correct[a],
            acc[b],
            costs[a],
            design_costs=predicted if aware else None,
            bank=bank if pol != "random" else None,
            alpha=0.05,
            batch_size=10,
            gamma=gamma if g else None,
            bet=bet,
            c=cc,
            cost_after=after,
            rng=draw_seed,  # the same uniforms for every variant
        )
        times[var] = time.perf_counter() - t0
    lines += [
        f"| variant | gap (pts) | sessions | wrong | wrong CP95 upper | median cost ({unit}) "
        "| cost vs uniform-assisted | median items | p90 cost |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ref = runs["uniform-assisted"]
    for var, r in runs.items():
        wrong = ((r.decision == BETTER) & (delta <= 0)) | ((r.decision == WORSE) & (delta >= 0))
        wrong |= r.decision == EQUIVALENT  # no margin: never decided
        for q, lab in enumerate((*GAP_LABELS, "all")):
            m = bucket == q if lab != "all" else np.ones(a.size, dtype=bool)
            if not m.any():
                continue
            k, n = int(wrong[m].sum()), int(m.sum())
            rel = np.median(r.spent[m]) / np.median(ref.spent[m])
            lines.append(
                f"| {var} | {lab} | {n} | {k} | {clopper_pearson(k, n, 0.05)[1]:.4f} "
                f"| {np.median(r.spent[m]):.0f} | {rel:.2f} | {np.median(r.items[m]):.0f} "
                f"| {np.percentile(r.spent[m], 90):.0f} |"
            )
    ratios = ", ".join(
        f"{v} {np.median(runs[v].spent / ref.spent):.2f}" for v in ("cost-assisted", "cost-neyman")
    )
    lines.append(
        "\nPer-session cost ratio to uniform-assisted (same pair and uniforms), median: "
        f"{ratios}; runtime (SHARED machine, other helpers running): IRT fit "
        f"{fit_s:.1f} s, " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
    )
    return lines


def _gpqa_driver(c_train: np.ndarray) -> np.ndarray:
    err = np.clip(1.0 - c_train.mean(axis=0), 0.01, 0.99)
    return np.log(err / (1.0 - err))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sessions", type=int, default=600)
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--gamma", type=float, default=COST_GAMMA)
    ap.add_argument("--cases", default="gpqa,synthetic")
    args = ap.parse_args()
    sessions = 100 if args.quick else args.sessions
    print(
        f"### bench/bench_cost.py --sessions {sessions} --seed {args.seed} --gamma {args.gamma}"
        f"\n\nMachine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()} (SHARED machine, other helpers running)"
    )
    for case in args.cases.split(","):
        if case == "gpqa":
            lines = run_case(
                "gpqa",
                _gpqa(),
                _gpqa_driver,
                sessions,
                args.seed,
                args.gamma,
                "REAL correctness, SYNTHETIC cost proxy",
            )
        elif case == "alpaca":
            scores, words = _alpaca()
            lines = run_case(
                "alpaca",
                scores,
                None,
                sessions,
                args.seed,
                args.gamma,
                "REAL graded scores, REAL per-item costs: each model's output words",
                costs=words,
                unit="words",
            )
        else:
            syn = make_synthetic(200, 1000, seed=args.seed, discrimination="positive")
            b = syn.b
            lines = run_case(
                "synthetic",
                syn.correct.astype(np.float64),
                lambda _c, b=b: b,
                sessions,
                args.seed,
                args.gamma,
                "SYNTHETIC correctness and costs",
            )
        print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
