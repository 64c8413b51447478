"""Evaluation sessions (issue 23): every policy against error-controlled fixed designs.

Cases (alpha = 0.05, goal ``decide``, batch 10, every policy of
:mod:`app.core.sequential.policies`, each deciding with the §7 confidence sequence):
  gpqa       REAL GPQA (shared/data/gpqa.npz, 420 models x 448 items). Pairs from a seeded 25 %
             held-out pool (105 models; the IRT fit of the IRT policies uses the other 315), drawn
             in equal numbers from each gap bucket (<2 incl. exactly tied, 2-5, 5-10, 10-15,
             >=15 points), ``--sessions`` sessions per policy (pairs x 2 independent replays).
  synthetic  SYNTHETIC benchmark of another shape from bench/synth.py (200 models x 300 items in
             three subtasks, subtask effect 0.8), same protocol, ``--sessions / 2`` sessions.
  tied       REAL GPQA, exactly tied held-out pairs only (``--sessions / 5`` sessions per policy):
             any decision is wrong.
  graded     SYNTHETIC graded families of bench/bench_graded.py (mass01, judge, ksample), 200
             models x 600 items each, strengths U(-2, 2), ``--sessions / 2`` sessions per family
             and policy (issue 35: sessions and their IRT predictions on scores in [0, 1]; the
             IRT policies fit fractional responses). The 0/1 fixed designs are not computed.
Per policy and gap bucket: sessions, wrong decisions with the Clopper-Pearson 95 % upper bound,
the share of sessions whose interval ever excluded the true difference (at a batch end), median
and p90 items to the end of the session. Next to them, per bucket, the median size of two
error-controlled fixed designs (:mod:`app.core.sequential.fixed_designs`, exact power under
sampling without replacement): the one-sample exact binomial test against the known baseline mean
and the exact McNemar test, each at 80 % and 90 % power (``>N``: more than half of the bucket's
pairs never reach that power with all N items). Markdown to stdout; nothing is written to the tree.

Usage: .venv/bin/python bench/bench_sessions.py [--quick] [--sessions S] [--seed K] [--cases C]
       [--policies P] (a subset of policies draws the same pairs; the draws of a policy depend
       on which policies ran before it, so its figures differ by chance from a full run)
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

from app.core.irt.fit import fit_irt  # noqa: E402
from app.core.sequential.fixed_designs import (  # noqa: E402
    binomial_test_sizes,
    mcnemar_test_sizes,
)
from app.core.sequential.fluid import ItemBank  # noqa: E402
from app.core.sequential.policies import IRT_POLICIES, POLICIES  # noqa: E402
from app.core.sequential.simulation import (  # noqa: E402
    GAP_LABELS,
    _bucket_of,
    clopper_pearson,
    simulate_policy,
    simulate_sessions,
)
from bench.synth import make_synthetic  # noqa: E402


def _gpqa() -> np.ndarray:
    base = Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")
    with np.load(base / "gpqa.npz", allow_pickle=False) as d:
        return d["correct"]


def _median_size(sizes: np.ndarray, n_items: int) -> str:
    if sizes.size == 0:
        return "-"
    med = np.median(np.where(np.isfinite(sizes), sizes, np.inf))
    return f">{n_items}" if not np.isfinite(med) else f"{med:.0f}"


def _fixed_designs(c: np.ndarray, pairs: np.ndarray, alpha: float) -> dict[str, np.ndarray]:
    """Fixed-design sizes per pair row (computed once per distinct pair)."""
    uniq, back = np.unique(pairs, axis=0, return_inverse=True)
    a, b = uniq[:, 0], uniq[:, 1]
    ci = c.astype(np.int64)
    n_items = c.shape[1]
    succ = ci[a].sum(1)
    base = c[b].mean(1)
    n10 = (ci[a] * (1 - ci[b])).sum(1)
    n01 = ((1 - ci[a]) * ci[b]).sum(1)
    out = {}
    for pw in (0.8, 0.9):
        out[f"binomial {pw:.0%}"] = binomial_test_sizes(succ, base, n_items, alpha=alpha, power=pw)
        out[f"McNemar {pw:.0%}"] = mcnemar_test_sizes(n10, n01, n_items, alpha=alpha, power=pw)
    return {k: v[back.reshape(-1)] for k, v in out.items()}


def _case(
    name: str, c: np.ndarray, sessions: int, seed: int, label: str, policies=POLICIES
) -> list[str]:
    t0 = time.perf_counter()
    res = simulate_sessions(
        c,
        policies=policies,
        pairs=sessions // 2,
        orders=2,
        alpha=0.05,
        batch_size=10,
        stratify=True,
        holdout=0.25,
        rng=seed,
    )
    sim_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    graded = bool(res.params.get("graded"))
    fixed = {} if graded else _fixed_designs(c, res.pairs, 0.05)  # 0/1 tests only
    fixed_s = time.perf_counter() - t1
    n_items = c.shape[1]
    bucket = _bucket_of(res.delta)
    ties = int((res.delta == 0).sum())
    lines = [
        f"\n#### {name} ({label}, {c.shape[0]} models x {n_items} items): {sessions // 2} pairs "
        f"({ties} exactly tied) x 2 replays = {sessions} sessions per policy; simulation "
        f"{sim_s:.1f} s (IRT fit {res.params.get('irt_fit_s', 0):.2f} s), fixed designs "
        f"{fixed_s:.1f} s\n",
        "| policy | gap (pts) | sessions | wrong | wrong CP95 upper | ever excluded truth "
        "| median items | p90 items | share done by 40 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sess_bucket = _bucket_of(res.delta)
    for pol, s in res.policies.items():
        for q, r in enumerate(s.buckets):
            by40 = np.mean(s.items_used[sess_bucket[s.pair] == q] <= 40) if r.sessions else 0.0
            lines.append(
                f"| {pol} | {r.bucket} | {r.sessions} | {r.wrong} | {r.wrong_upper:.4f} "
                f"| {r.ever_missed / max(r.sessions, 1):.4f} | {r.median_items:.0f} "
                f"| {r.p90_items:.0f} | {by40:.3f} |"
            )
        tied = res.delta[s.pair] == 0  # part of <2: any decision on a tie is wrong
        if tied.any():
            k_t, n_t = int((s.decision[tied] != 0).sum()), int(tied.sum())
            lines.append(
                f"| {pol} | tied (in <2) | {n_t} | {k_t} "
                f"| {clopper_pearson(k_t, n_t, 0.05)[1]:.4f} "
                f"| {s.ever_missed_mask[tied].mean():.4f} "
                f"| {np.median(s.items_used[tied]):.0f} "
                f"| {np.percentile(s.items_used[tied], 90):.0f} | - |"
            )
        _lo, hi = s.wrong_ci
        lines.append(
            f"| {pol} | all | {s.sessions} | {s.wrong} | {hi:.4f} "
            f"| {s.ever_missed / s.sessions:.4f} | {np.median(s.items_used):.0f} "
            f"| {np.percentile(s.items_used, 90):.0f} | {np.mean(s.items_used <= 40):.3f} |"
        )
    if graded:
        return lines
    lines += [
        "\nError-controlled fixed designs on the same pairs (median n over the bucket's pairs):\n",
        "| gap (pts) | pairs | " + " | ".join(fixed) + " |",
        "|---|---:|" + "---:|" * len(fixed),
    ]
    for q, label_q in enumerate(GAP_LABELS):  # five buckets
        m = bucket == q
        cells = " | ".join(_median_size(v[m], n_items) for v in fixed.values())
        lines.append(f"| {label_q} | {int(m.sum())} | {cells} |")
    return lines


def _tied_case(c: np.ndarray, sessions: int, seed: int, policies=POLICIES) -> list[str]:
    """Exactly tied held-out pairs only: any decision is wrong (25 % held-out pool as above)."""
    gen = np.random.default_rng(seed)
    n_pool = round(0.25 * c.shape[0])
    perm = gen.permutation(c.shape[0])
    pool, train = np.sort(perm[:n_pool]), np.sort(perm[n_pool:])
    correct = c.astype(np.float64)
    hits = correct[pool].sum(1)
    ia, ib = np.triu_indices(pool.size, 1)
    tied = np.flatnonzero(hits[ia] == hits[ib])
    pick = tied[gen.integers(0, tied.size, sessions)]
    a, b = pool[ia[pick]], pool[ib[pick]]
    t0 = time.perf_counter()
    bank = ItemBank.from_irt(fit_irt(correct[train], dims=2, rng=gen))
    lines = [
        f"\n#### gpqa tied (REAL): {sessions} sessions per policy on {tied.size} exactly tied "
        f"held-out pairs (of {ia.size}); any decision is wrong\n",
        "| policy | sessions | wrong (any decision) | wrong CP95 upper | ever excluded truth "
        "| median items | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for pol in policies:  # at most four policies
        t1 = time.perf_counter()
        items, lo, hi, ever = simulate_policy(
            pol,
            correct[a],
            correct[b].mean(1),
            bank=bank if pol in IRT_POLICIES else None,
            alpha=0.05,
            batch_size=10,
            rng=gen,
        )
        wrong = int(((lo > 0) | (hi < 0)).sum())
        lines.append(
            f"| {pol} | {sessions} | {wrong} | {clopper_pearson(wrong, sessions, 0.05)[1]:.4f} "
            f"| {ever.mean():.4f} | {np.median(items):.0f} | {time.perf_counter() - t1:.1f} |"
        )
    lines.append(f"\n(tied case total {time.perf_counter() - t0:.1f} s)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 sessions per policy")
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", default="gpqa,synthetic,tied", help="comma-separated subset")
    ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated subset")
    args = ap.parse_args()
    cases = set(args.cases.split(","))
    pols = tuple(p for p in POLICIES if p in args.policies.split(","))
    sessions = 200 if args.quick else args.sessions
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    load = os.getloadavg()
    out = [
        f"### Sessions (issue 23): every policy vs error-controlled fixed designs, alpha 0.05, "
        f"batch 10, seed {args.seed}",
        f"commit {commit}, python {platform.python_version()}, numpy {np.__version__}, "
        f"{os.cpu_count()} cores, load average at start {load[0]:.2f} / {load[1]:.2f} / "
        f"{load[2]:.2f}",
    ]
    if "gpqa" in cases:
        out += _case("gpqa", _gpqa(), sessions, args.seed, "REAL", pols)
    if "synthetic" in cases:
        syn = make_synthetic(
            200, 300, seed=args.seed, subtask_sizes=(100, 100, 100), subtask_effect=0.8
        )
        out += _case(
            "synthetic", syn.correct, max(sessions // 2, 100), args.seed, "SYNTHETIC", pols
        )
    if "tied" in cases:
        out += _tied_case(_gpqa(), max(sessions // 5, 40), args.seed, pols)
    if "graded" in cases:
        from bench.bench_graded import family

        gen = np.random.default_rng([args.seed, 35])
        for fam in ("mass01", "judge", "ksample"):
            theta, b = gen.uniform(-2, 2, 200), gen.standard_normal(600)
            scores = family(fam, theta, b, gen)
            out += _case(
                f"graded {fam}", scores, max(sessions // 2, 100), args.seed, "SYNTHETIC", pols
            )
    load = os.getloadavg()
    out.append(f"\nload average at end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
