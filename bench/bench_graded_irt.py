"""IRT-based selectors on graded scores (issue 35, item 2): fractional responses vs binarisation.

SYNTHETIC graded families of :mod:`bench.bench_graded` (``mass01``: mass at 0 and 1 plus a
continuum; ``judge``: skewed, most scores near 0; ``ksample``: pass rates over K = 8 samples).
Per family one population of ``M`` models x ``N`` items (strength ``θ ~ N(0, 1)``, difficulty
``b ~ N(0, 1.2)``); per run ``n_targets`` targets and ``n_sources`` sources drawn without
replacement (the sources' full rows are what the service has: the fit's data and the interval's
reference models). The truth is always the target's **graded** full-benchmark mean.

The IRT-based selector is tinyBenchmarks (``tiny_benchmarks``; Anchor Points clusters correctness
without an IRT model, and the sessions' IRT policies are measured in ``bench/bench_graded.py`` /
``bench/bench_sessions.py``, not here). Variants, fitted on the same sources with the same
selection seeds:

* ``graded`` (today's behaviour): ``fit_irt`` on the graded scores as they are, i.e. the Bernoulli
  log-likelihood with fractional responses (quasi-binomial); target abilities from their graded
  anchor scores in the same quasi-likelihood;
* ``bin_fit``: the sources' scores binarised at ``y >= 0.5`` before the fit (item parameters,
  k-means anchors, gp-IRT's held-out ``beta`` and ``v``); the target's anchor scores enter the
  ability estimate graded;
* ``bin_all``: as ``bin_fit`` and the target's anchor scores binarised at 0.5 for the ability
  estimate too (the consistent use of a binarised model: it predicts P(score >= 0.5)).

In every variant the estimate stays on the graded scale where the estimator observes scores: ``irt``
= the anchor-weighted graded mean, p-IRT's data part the graded anchor mean (its IRT part is the
model's predicted accuracy on the other items, which for ``bin_*`` is P(score >= 0.5)), gp-IRT the
stored mix of the two. Intervals: the service's ``reference_calibrated`` interval of each estimator,
95 %. ``--calibration crossfit`` (default, what the service serves: its subset job stores
out-of-fold values, :func:`app.core.scoring.crossfit.with_out_of_fold`): ``graded`` is
:func:`app.core.scoring.score_models.score_models` on the selection with its out-of-fold values
and the sources as reference models; ``bin_*`` the same :func:`crossfit_calibration` on the
variant's own estimator, its folds refitted on the binarised sources. ``--calibration in_sample``:
the in-sample law x 1.1 (``score_models`` without out-of-fold values; what runs before
2026-12-06 21:30 UTC measured). Measured per (family, variant, estimator, n): robust MDAD
(:func:`app.core.reliability.mdad.analyze_protocol`, ``"seen"`` = the whole benchmark here), mean
absolute error, coverage overall and in the lowest / highest fifth of each run's targets by graded
accuracy; a uniform random subset's mean gives the MDAD baseline.

Run: ``nice -n 10 .venv/bin/python -m bench.bench_graded_irt [--runs 20] [--seed 3502]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time

import numpy as np
from threadpoolctl import threadpool_limits

from app.core.estimation.intervals import reference_calibrated_interval
from app.core.estimation.irt_estimates import p_irt_parts
from app.core.reliability.mdad import analyze_protocol
from app.core.reliability.protocol import selection_seed
from app.core.results import ProtocolResult
from app.core.scoring.crossfit import CROSSFIT_FOLDS, crossfit_calibration, with_out_of_fold
from app.core.scoring.reference import CALIBRATION_INFLATION
from app.core.scoring.score_models import score_models
from app.core.selectors import make_selector
from bench._common import ROOT
from bench.bench_graded import FAMILIES, SIZES, family

THRESHOLD = 0.5
VARIANTS = ("graded", "bin_fit", "bin_all")
ESTIMATORS = ("irt", "p_irt", "gp_irt")
LEVEL = 0.95


def machine_line() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:  # pragma: no cover
        commit = "?"
    load = os.getloadavg()[0]
    return (
        f"# commit {commit}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load {load:.2f}, python {platform.python_version()}, numpy {np.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def estimates(variant: str, sel, y: np.ndarray) -> dict[str, np.ndarray]:
    """The three estimators of ``variant`` for models with graded subset scores ``y`` (m, k)."""
    irt = y @ sel.weights
    y_ability = (y >= THRESHOLD).astype(np.float64) if variant == "bin_all" else y
    _, irt_part, lam = p_irt_parts(sel, y_ability)
    p = lam * y.mean(axis=1) + (1.0 - lam) * irt_part
    lam_gp = float(sel.fitted["lambda_gp"])
    return {"irt": irt, "p_irt": p, "gp_irt": lam_gp * irt + (1.0 - lam_gp) * p}


def out_of_fold(variant, sel, src_full, seed: int, folds: dict) -> dict[str, np.ndarray]:
    """``bin_*``'s own estimators on every source from a subset fitted without it: the folds of
    :func:`app.core.scoring.crossfit.out_of_fold_estimates` (same permutation and draws), each
    refitted on the binarised training sources; ``folds`` caches the fits of a run and their
    partition (the first size's), as ``fold_selectors`` does there."""
    r = src_full.shape[0]
    perm = folds.setdefault("perm", np.random.default_rng([seed, 24]).permutation(r))
    out = {name: np.full(r, np.nan) for name in ESTIMATORS}
    for f in range(CROSSFIT_FOLDS):
        held = perm[f::CROSSFIT_FOLDS]
        if f not in folds:
            train = np.setdiff1d(perm, held)
            folds[f] = make_selector("tiny_benchmarks", calibrate_gp_irt=True).fit(
                (src_full[train] >= THRESHOLD).astype(np.float64)
            )
        sub = folds[f].select(int(sel.n_requested), rng=np.random.default_rng([seed, f]))
        for name, v in estimates(variant, sub, src_full[np.ix_(held, sub.indices)]).items():
            out[name][held] = v
    return out


def intervals(
    variant, sel, y_t, src_full, *, crossfit: bool, seed: int, folds: dict
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(value, low, high) of the service's interval per estimator."""
    if variant == "graded":  # the service itself
        if crossfit:  # as the subset job stores it
            sel = with_out_of_fold(sel, src_full, seed=seed, fold_selectors=folds)
        batches = score_models(
            sel, y_t, src_full.shape[1], reference_correct=src_full, estimators=ESTIMATORS
        )
        return {b.estimator: (b.value, b.ci_low, b.ci_high) for b in batches}
    est_t = estimates(variant, sel, y_t)
    est_r = estimates(variant, sel, src_full[:, sel.indices])
    truth_r = src_full.mean(axis=1)
    oof = out_of_fold(variant, sel, src_full, seed, folds) if crossfit else None
    out = {}
    for name in ESTIMATORS:
        if oof is not None:
            cal = crossfit_calibration(est_r[name], oof[name], truth_r, confidence=LEVEL)
            val, lo, hi, _ = cal.apply(est_t[name])
        else:
            val, lo, hi, _ = reference_calibrated_interval(
                est_t[name], est_r[name], truth_r, confidence=LEVEL, inflation=CALIBRATION_INFLATION
            )
        out[name] = (val, lo, hi)
    return out


def run_family(name: str, args, rng: np.random.Generator) -> list[dict]:
    n_t, n_s, runs = args.targets, args.sources, args.runs
    theta = rng.normal(0.0, 1.0, args.models)
    b = rng.normal(0.0, 1.2, args.items)
    y = family(name, theta, b, rng)
    acc = y.mean(axis=1)
    variants = tuple(args.variants)
    methods = ["random/mean"] + [f"{v}/{e}" for v in variants for e in ESTIMATORS]
    shape = (len(methods), len(SIZES), runs, n_t)
    est = np.empty(shape)
    raw = np.empty(shape)  # the estimators' own values (before the interval's bias correction)
    hit = np.zeros(shape, dtype=bool)
    width = np.zeros(shape)
    targets = np.empty((runs, n_t), np.int64)
    sources = np.empty((runs, n_s), np.int64)
    fifths = np.zeros((2, runs, n_t), dtype=bool)
    k5 = max(1, n_t // 5)
    for r in range(runs):
        perm = rng.permutation(args.models)
        t, s = perm[:n_t], perm[n_t : n_t + n_s]
        targets[r], sources[r] = t, s
        order = np.argsort(acc[t])
        fifths[0, r, order[:k5]] = True
        fifths[1, r, order[-k5:]] = True
        truth = acc[t]
        src = y[s]
        fitted, fold_fits = {}, {"graded": {}, "bin": {}}
        for v in sorted({"graded" if v == "graded" else "bin" for v in variants}):
            sel_obj = make_selector("tiny_benchmarks", calibrate_gp_irt=True)
            sel_obj.fit(src if v == "graded" else (src >= THRESHOLD).astype(np.float64))
            fitted[v] = sel_obj
        for si, n in enumerate(SIZES):
            seed = selection_seed(args.seed, r, "tiny_benchmarks", n)
            idx = np.sort(np.random.default_rng(seed).choice(args.items, n, replace=False))
            est[0, si, r] = raw[0, si, r] = y[np.ix_(t, idx)].mean(axis=1)
            hit[0, si, r] = True  # not measured here (bench/bench_graded.py: betting_fpc)
            sels = {v: fitted[v].select(n, rng=seed) for v in fitted}
            for vi, variant in enumerate(variants):
                kind = "graded" if variant == "graded" else "bin"
                sel = sels[kind]
                y_t = y[np.ix_(t, sel.indices)]
                own = estimates(variant, sel, y_t)
                ints = intervals(
                    variant,
                    sel,
                    y_t,
                    src,
                    crossfit=args.calibration == "crossfit",
                    seed=seed,
                    folds=fold_fits[kind],
                )
                for ei, e in enumerate(ESTIMATORS):
                    mi = 1 + vi * len(ESTIMATORS) + ei
                    est[mi, si, r] = np.round(own[e], 12)
                    _, lo, hi = ints[e]
                    raw[mi, si, r] = ints[e][0]
                    hit[mi, si, r] = (lo <= truth) & (truth <= hi)
                    width[mi, si, r] = hi - lo
        print(f"  {name} run {r + 1}/{runs}", flush=True)
    acc_t = acc[targets]
    res = ProtocolResult(
        methods=tuple(methods),
        sizes=SIZES,
        runs=runs,
        n_sources=n_s,
        n_targets=n_t,
        seed=args.seed,
        targets=targets,
        sources=sources,
        seen=np.ones((runs, args.items), dtype=bool),
        acc_seen=acc_t,
        acc_unseen=acc_t,
        acc_full=acc_t,
        estimates=est,
        subset_sizes=np.zeros((len(methods), len(SIZES), runs), np.int64),
    )
    mdad = {
        (m.method, m.n): m
        for m in analyze_protocol(res, mode="robust", splits=("seen",), n_boot=args.n_boot)
    }
    rows = []
    for mi, method in enumerate(methods):
        for si, n in enumerate(SIZES):
            m = mdad[(method, n)]
            h = hit[mi, si]
            rows.append(
                {
                    "family": name,
                    "method": method,
                    "n": n,
                    "mdad": m.mdad,
                    "mdad_ci": (m.ci_low, m.ci_high),
                    "mae": float(np.mean(np.abs(est[mi, si] - acc_t))),
                    "mae_service": float(np.mean(np.abs(raw[mi, si] - acc_t))),
                    "coverage": None if mi == 0 else float(h.mean()),
                    "width": None if mi == 0 else float(width[mi, si].mean()),
                    "cov_low": None if mi == 0 else float(h[fifths[0]].mean()),
                    "cov_high": None if mi == 0 else float(h[fifths[1]].mean()),
                }
            )
    return rows


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def print_table(rows: list[dict]) -> None:
    print(
        "| family | method / estimator | n | MDAD (pts) [CI] | MAE raw (pts) | MAE served (pts) "
        "| coverage | low fifth | high fifth | width (pts) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        lo, hi = r["mdad_ci"]
        ci = f"[{_pct(lo)}, {_pct(hi)}]"
        cov = [
            ("—" if r[k] is None else f"{r[k]:.3f}") for k in ("coverage", "cov_low", "cov_high")
        ]
        print(
            f"| {r['family']} | {r['method']} | {r['n']} | {_pct(r['mdad'])} {ci} "
            f"| {100 * r['mae']:.2f} | {100 * r['mae_service']:.2f} | {' | '.join(cov)} "
            f"| {_pct(r['width'])} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=3502)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--sources", type=int, default=150)
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--calibration",
        choices=("crossfit", "in_sample"),
        default="crossfit",
        help="crossfit: out-of-fold values stored as the subset job does (what the service "
        "serves); in_sample: the in-sample law x 1.1",
    )
    args = parser.parse_args()
    print(machine_line(), flush=True)
    print(
        f"# SYNTHETIC, {args.models} models x {args.items} items, {args.sources} sources, "
        f"{args.targets} targets, {args.runs} runs, seed {args.seed}, threshold {THRESHOLD}, "
        f"calibration {args.calibration}",
        flush=True,
    )
    t0 = time.perf_counter()
    rows = []
    with threadpool_limits(limits=1):
        for i, name in enumerate(args.families):
            rng = np.random.default_rng(np.random.SeedSequence(args.seed, spawn_key=(i,)))
            rows += run_family(name, args, rng)
    print_table(rows)
    print(f"# {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
