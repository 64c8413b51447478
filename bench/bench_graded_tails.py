"""Where the reference-calibrated interval misses the tails of graded targets (issue 35).

SYNTHETIC: the populations and runs of :mod:`bench.bench_graded_irt` (same ``--seed`` gives the
same models, targets and sources), tinyBenchmarks fitted on the graded sources. Per estimator and
subset size, pooled over runs, for the lowest / middle / highest fifth (targets: of each run's
targets by graded mean; references: the calibration's own bins, of the sources' accuracies):

* ``z`` of the targets, ``(estimate - truth - b(truth)) / s(truth)`` with the served subset's
  kernel-smoothed bias and spread (:func:`app.core.estimation.intervals.calibrate_references`):
  its mean (bias left at that accuracy) and SD (1 = the spread is right);
* the 95th percentile of the targets' scores ``|z|`` and of the references' out-of-fold scores
  (:func:`app.core.scoring.crossfit.out_of_fold_estimates`, partition shared by the sizes);
* the share of top-fifth targets above every source;
* coverage with three multipliers: the in-sample Student quantile x 1.1 (no out-of-fold
  values), the cross-fitted one with the pooled quantile in bins of fewer than 40 references
  (the rule before 2026-12-06), and with each bin's own split-conformal quantile (today's rule,
  :func:`app.core.scoring.crossfit.crossfit_calibration`).

Run: ``nice -n 10 .venv/bin/python -m bench.bench_graded_tails --families judge --runs 40``.
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from app.core.estimation.intervals import calibrate_references
from app.core.reliability.protocol import selection_seed
from app.core.scoring.crossfit import stored_out_of_fold, with_out_of_fold
from app.core.scoring.reference import CALIBRATION_INFLATION, reference_estimates
from app.core.selectors import make_selector
from bench.bench_graded import FAMILIES, SIZES, family
from bench.bench_graded_irt import ESTIMATORS, machine_line

OLD_MIN_BIN = 40


def _cq(scores: np.ndarray, level: float = 0.95) -> float:
    rank = int(np.ceil((scores.size + 1) * level))
    return float(np.sort(scores)[rank - 1]) if rank <= scores.size else float("inf")


def _bins(truth: np.ndarray) -> tuple[float, float, list[np.ndarray]]:
    lo, hi = np.quantile(truth, [0.2, 0.8])
    return lo, hi, [truth <= lo, (truth > lo) & (truth < hi), truth >= hi]


def run_family(name: str, args) -> dict:
    i = FAMILIES.index(name)  # bench_graded_irt's stream for this family
    rng = np.random.default_rng(np.random.SeedSequence(args.seed, spawn_key=(i,)))
    theta = rng.normal(0.0, 1.0, args.models)
    b = rng.normal(0.0, 1.2, args.items)
    y = family(name, theta, b, rng)
    acc = y.mean(axis=1)
    n_t, n_s = args.targets, args.sources
    rec: dict = {}
    for r in range(args.runs):
        perm = rng.permutation(args.models)
        t, s = perm[:n_t], perm[n_t : n_t + n_s]
        truth, src = acc[t], y[s]
        truth_r = src.mean(axis=1)
        order = np.argsort(truth)
        fifth = np.ones(n_t, np.int64)  # 0 lowest, 1 middle, 2 highest fifth of the targets
        fifth[order[: n_t // 5]], fifth[order[-(n_t // 5) :]] = 0, 2
        sel_obj = make_selector("tiny_benchmarks", calibrate_gp_irt=True).fit(src)
        folds: dict = {}
        for n in SIZES:
            seed = selection_seed(args.seed, r, "tiny_benchmarks", n)
            sel = with_out_of_fold(
                sel_obj.select(n, rng=seed), src, seed=seed, fold_selectors=folds
            )
            oof = stored_out_of_fold(sel, n_s)
            v_in = reference_estimates(sel, src, estimators=ESTIMATORS)
            v_t = reference_estimates(sel, y[t], estimators=ESTIMATORS)
            lo_cut, hi_cut, ref_bins = _bins(truth_r)
            for e in ESTIMATORS:
                cal = calibrate_references(v_in[e], truth_r)
                step = cal.grid_step
                pt = np.clip(np.round(truth / step).astype(int), 0, cal.grid.size - 1)
                pr = np.clip(np.round(truth_r / step).astype(int), 0, cal.grid.size - 1)
                z = (v_t[e] - truth - cal.bias[pt]) / cal.spread[pt]
                s_ref = np.abs(oof[e] - truth_r - cal.bias[pr]) / cal.spread[pr]
                pooled = _cq(s_ref)
                q_old = [_cq(s_ref[m]) if m.sum() >= OLD_MIN_BIN else pooled for m in ref_bins]
                q_new = [_cq(s_ref[m]) if m.sum() >= 19 else pooled for m in ref_bins]
                where = np.where(truth <= lo_cut, 0, np.where(truth >= hi_cut, 2, 1))
                student = cal.quantile[pt]
                slot = rec.setdefault((e, n), {k: [] for k in ("z", "f", "cov", "ref", "out")})
                slot["z"].append(z)
                slot["f"].append(fifth)
                slot["cov"].append(
                    np.stack(
                        [
                            np.abs(z) <= student * CALIBRATION_INFLATION,
                            np.abs(z) <= np.maximum(np.take(q_old, where), student),
                            np.abs(z) <= np.maximum(np.take(q_new, where), student),
                        ]
                    )
                )
                slot["ref"].append([s_ref[m] for m in ref_bins])
                slot["out"].append(truth > truth_r.max())
        print(f"  {name} run {r + 1}/{args.runs}", flush=True)
    return rec


def report(name: str, rec: dict) -> None:
    print(f"\n### {name} (SYNTHETIC)\n")
    print(
        "| estimator | n | z mean low / mid / high | z SD low / mid / high "
        "| target |z| q95 low / mid / high | reference out-of-fold q95 low / mid / high "
        "| top fifth above every source | coverage overall, low, high: in-sample x 1.1 "
        "| cross-fit, pooled tails (< 40) | cross-fit, own tails |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (e, n), d in rec.items():
        z, f = np.concatenate(d["z"]), np.concatenate(d["f"])
        cov = np.concatenate(d["cov"], axis=1)
        out = np.concatenate(d["out"])
        ref = [np.concatenate([row[k] for row in d["ref"]]) for k in range(3)]
        zm = " / ".join(f"{z[f == k].mean():+.2f}" for k in range(3))
        zs = " / ".join(f"{z[f == k].std():.2f}" for k in range(3))
        tq = " / ".join(f"{np.quantile(np.abs(z[f == k]), 0.95):.2f}" for k in range(3))
        rq = " / ".join(f"{np.quantile(x, 0.95):.2f}" for x in ref)
        cells = [f"{c.mean():.3f}, {c[f == 0].mean():.3f}, {c[f == 2].mean():.3f}" for c in cov]
        print(
            f"| {e} | {n} | {zm} | {zs} | {tq} | {rq} | {out[f == 2].mean():.2f} | "
            + " | ".join(cells)
            + " |"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=3502)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--sources", type=int, default=150)
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--families", nargs="+", default=["judge"], choices=FAMILIES)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    with threadpool_limits(limits=1):
        for name in args.families:
            report(name, run_family(name, args))


if __name__ == "__main__":
    main()
