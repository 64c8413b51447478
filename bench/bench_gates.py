"""Release gates (issue 34): error control and items, with the engine of ``app.core.sequential.gating.gates``.

Cases (``--cases``):

* ``error``: suites of K = 3 and K = 5 benchmarks, one REAL (GPQA, 448 items: the baseline is a
  real GPQA model's row, a different one per gate) and SYNTHETIC ones of other shapes (2PL with
  GPQA-fitted item quantiles; 200 to 15,000 items; weak and strong baselines; ``disc`` = every
  discrimination x3). The candidate is the baseline with items flipped at random (SYNTHETIC
  perturbation), at item agreement 88 % and an exact gap per benchmark. (a) ``inside``: every
  Delta_k = 0, and again every Delta_k half a margin below 0 — a FAIL is wrong; (b) ``at margin``:
  one benchmark (chosen per gate) at Delta = -ceil(delta N)/N (on or just beyond the margin), the
  others 0 — a PASS is wrong; (c) ``regressed``: one benchmark at -(delta + 1 point) — a PASS is
  wrong, and a FAIL naming another benchmark is wrong. Rates with one-sided 95 % Clopper-Pearson
  upper bounds.
* ``predictions``: items of one-benchmark gates per prediction (random / paired / calibrated
  without and with the default design prior) on REAL GPQA pairs (unrelated models, gap buckets)
  and SYNTHETIC siblings; ``--pools P`` repeats it on P fresh pools and gives each row's median
  with the lowest and highest pool's.
* ``items``: the SYNTHETIC 27,842-item suite with the sizes of MMLU (14,042), HellaSwag (10,042),
  ARC-Challenge (1,172), Winogrande (1,267), GSM8K (1,319); siblings at 85 % / 90 % agreement with
  Delta = 0 and Delta = -1 point on every benchmark, margin 2 points: the gate against (i) the
  whole suite, (ii) K separate two-sided paired sessions (the existing CS of
  ``app.core.sequential.confidence_sequences``, paired values) at alpha / K with the equivalence
  margin, run to their decisions, (iii) a fixed-n non-inferiority design with Holm at 80 % power for
  the true gap.

* ``onesided``: REAL GPQA pairs, items until non-inferior by the one-sided test vs the lower end
  of the two-sided session CS at the same alpha.

    python bench/bench_gates.py --cases error predictions items onesided --gates 1000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.irt.fit import fit_irt  # noqa: E402
from app.core.sequential.confidence_sequences import (  # noqa: E402
    cs_init,
    cs_interval,
    cs_update,
    decide,
    difference_interval,
    paired_values,
)
from app.core.sequential.fluid import ItemBank  # noqa: E402
from app.core.sequential.gating.gates import (  # noqa: E402
    G_FAIL,
    G_INCONCLUSIVE,
    G_PASS,
    REGRESSED,
    run_gates,
)
from app.services.catalog.irt_fits import IRT_DIMS  # noqa: E402
from bench.synth import A_Q, B_Q, QUANTILE_LEVELS  # noqa: E402

ALPHA = 0.05


def cp_upper(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound."""
    return 1.0 if k >= n else float(beta_dist.ppf(level, k + 1, n - k))


def gpqa() -> np.ndarray:
    base = Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")
    with np.load(base / "gpqa.npz", allow_pickle=False) as d:
        return d["correct"].astype(np.float64)


def synthetic_benchmark(n_items, theta, gates, rng, *, disc=1.0, sources=0):
    """SYNTHETIC baseline rows (gates, N): a 2PL with GPQA-fitted |a| and b quantiles.

    With ``sources > 0`` also ``sources`` rows of the same items with abilities ``theta + N(0, 1)``
    (the stored models an IRT fit would use): returns ``(rows, source_rows)``.
    """
    a = np.abs(np.interp(rng.random(n_items), QUANTILE_LEVELS, A_Q)) * disc
    b = np.interp(rng.random(n_items), QUANTILE_LEVELS, B_Q)
    th = theta + 0.3 * rng.standard_normal((gates, 1))
    p = 1.0 / (1.0 + np.exp(-(a[None, :] * th - b[None, :])))
    rows = (rng.random((gates, n_items)) < p).astype(np.float64)
    if not sources:
        return rows
    th_s = theta + rng.standard_normal((sources, 1))
    p_s = 1.0 / (1.0 + np.exp(-(a[None, :] * th_s - b[None, :])))
    return rows, (rng.random((sources, n_items)) < p_s).astype(np.float64)


def item_bank(sources, seed):
    """The service's IRT fit (``fit_irt``, ``IRT_DIMS`` dimensions) of the source rows."""
    return ItemBank.from_irt(fit_irt(sources, dims=IRT_DIMS, rng=int(seed)))


def flip(base, delta, agree, rng):
    """SYNTHETIC candidates: flip items of each baseline row to an exact gap and agreement.

    ``round(delta N)`` net items (ceil towards -inf for a gap at or beyond a margin), and
    ``round((1 - agree) N)`` disagreements (or the fewest that reach the gap).
    """
    delta = np.broadcast_to(np.asarray(delta, dtype=np.float64), (base.shape[0],))
    s, n = base.shape
    out = base.copy()
    net = np.floor(delta * n + 1e-9).astype(np.int64)
    dis = np.maximum(round((1 - agree) * n), np.abs(net))
    dis += (dis + net) % 2  # up - down = net, up + down = dis
    up, down = (dis + net) // 2, (dis - net) // 2
    key = rng.random((s, n))
    ones_key = np.where(base == 1, key, 2.0)
    zeros_key = np.where(base == 0, key, 2.0)
    rank1 = np.argsort(np.argsort(ones_key, axis=1), axis=1)
    rank0 = np.argsort(np.argsort(zeros_key, axis=1), axis=1)
    out[(base == 1) & (rank1 < down[:, None])] = 0.0
    out[(base == 0) & (rank0 < up[:, None])] = 1.0
    return out


def suite(kind: int, gates: int, rng, *, banks: bool = False):
    """K = 3 or K = 5 baselines: [(name, rows (gates, N))]; with ``banks`` also each benchmark's
    IRT item bank, fitted on :data:`FIT_SOURCES` other models (GPQA: real models that are never
    a baseline; SYNTHETIC: the same items at abilities ``theta + N(0, 1)``)."""
    real = gpqa()
    fits = []
    if banks:
        held = rng.permutation(real.shape[0])
        fits.append(item_bank(real[held[:FIT_SOURCES]], 0))
        real = real[held[FIT_SOURCES:]]
    rows = real[rng.integers(0, real.shape[0], gates)]
    out = [("gpqa (REAL)", rows)]
    shapes = [
        ("synth-200 weak", 200, -1.5, 1.0),
        ("synth-2000 strong disc", 2000, 1.5, 3.0),
        ("synth-800 mid disc", 800, 0.3, 3.0),
        ("synth-15000 mid", 15000, 0.5, 1.0),
    ]
    for name, n, theta, disc in shapes[: kind - 1]:
        if banks:
            rows, src = synthetic_benchmark(n, theta, gates, rng, disc=disc, sources=FIT_SOURCES)
            out.append((name, rows))
            fits.append(item_bank(src, 0))
        else:
            out.append((name, synthetic_benchmark(n, theta, gates, rng, disc=disc)))
    return (out, fits) if banks else out


def error_case(k, gates, margin, agree, seed, prediction="calibrated"):
    rng = np.random.default_rng(seed)
    banks = None
    if prediction == "combined":
        benches, banks = suite(k, gates, rng, banks=True)
    else:
        benches = suite(k, gates, rng)
    names = [n for n, _ in benches]
    bases = [b for _, b in benches]
    rows = []
    pick = rng.integers(0, k, gates)
    setups = [
        ("a: every gap 0", np.zeros((gates, k)), "fail"),
        ("a: every gap -margin/2", np.full((gates, k), -margin / 2), "fail"),
        ("b: one at the margin", np.where(np.arange(k) == pick[:, None], -margin, 0.0), "pass"),
        (
            "c: one at margin + 1 pt",
            np.where(np.arange(k) == pick[:, None], -(margin + 0.01), 0.0),
            "pass",
        ),
    ]
    for label, gaps, wrong in setups:
        t0 = time.time()
        cands = []
        for j, b in enumerate(bases):
            n = b.shape[1]
            g = gaps[:, j]
            at = g <= -margin + 1e-12
            # on-margin gaps: -ceil(delta N)/N, the nearest lattice point at or beyond -delta
            g = np.where(at, -np.ceil(-g * n - 1e-9) / n, g)
            cands.append(flip(b, g, agree, rng))
        run = run_gates(cands, bases, [margin] * k, alpha=ALPHA, batch_size=50, seed=seed + 1,
                        prediction=prediction, banks=banks)  # fmt: skip
        true_gap = np.stack([c.mean(1) - b.mean(1) for c, b in zip(cands, bases, strict=True)], 1)
        noninf = true_gap > -margin + 1e-12
        if wrong == "fail":
            bad = int(((run.outcome == G_FAIL) & noninf.all(1)).sum())
        else:
            bad = int(((run.outcome == G_PASS) & ~noninf.all(1)).sum())
        misnamed = int(((run.codes == REGRESSED) & noninf).any(1).sum())
        rows.append(
            {
                "suite": f"K={k}",
                "prediction": prediction,
                "case": label,
                "gates": gates,
                "pass": int((run.outcome == G_PASS).sum()),
                "fail": int((run.outcome == G_FAIL).sum()),
                "inconclusive": int((run.outcome == G_INCONCLUSIVE).sum()),
                "wrong": f"wrong {wrong.upper()} {bad} (CP95 {cp_upper(bad, gates):.4f})",
                "misnamed": f"{misnamed} (CP95 {cp_upper(misnamed, gates):.4f})",
                "items": float(np.median(run.items.sum(1))),
                "of": int(sum(b.shape[1] for b in bases)),
                "s": round(time.time() - t0, 1),
            }
        )
        print(rows[-1], flush=True)
    return names, rows


PREDICTION_VARIANTS = (("random, no prior", "random", 0.0), ("random", "random", None),
                       ("paired", "paired", None),
                       ("calibrated, no prior", "calibrated", 0.0),
                       ("calibrated (default)", "calibrated", None),
                       ("combined", "combined", None))  # fmt: skip
#: paired differences reported per row: (variant, minus this one)
DIFFERENCES = (("calibrated (default)", "random"), ("calibrated (default)", "random, no prior"),
               ("combined", "calibrated (default)"), ("combined", "random"))  # fmt: skip
#: stored models behind the IRT fit of ``combined`` (disjoint from every pair's models)
FIT_SOURCES = 150


def _prediction_items(c, b, seed, bank) -> dict:
    """Median items of one-benchmark gates per prediction variant (None: the default prior)."""
    out = {}
    for label, p, w in PREDICTION_VARIANTS:
        kw = {} if w is None else {"prior_weight": w}
        r = run_gates([c], [b], [0.02], prediction=p, batch_size=10, seed=seed, banks=[bank], **kw)
        out[label] = r.items[:, 0]
    return out


def _paired_differences(items: dict, sel) -> dict:
    """Per pair, each :data:`DIFFERENCES` (same pairs, same orders)."""
    return {f"{x} - {y}": items[x][sel] - items[y][sel] for x, y in DIFFERENCES}


def predictions_pool(pairs, seed):
    """One pool: fresh GPQA pairs and fresh SYNTHETIC siblings drawn from ``seed``; per row the
    median items of each prediction variant."""
    rng = np.random.default_rng(seed)
    real = gpqa()
    held = rng.permutation(real.shape[0])  # the fit's sources never appear in a pair
    gpqa_bank = item_bank(real[held[:FIT_SOURCES]], seed)
    real = real[held[FIT_SOURCES:]]
    i = rng.integers(0, real.shape[0], pairs * 4)
    j = rng.integers(0, real.shape[0], pairs * 4)
    keep = i != j
    i, j = i[keep][: pairs * 3], j[keep][: pairs * 3]
    cand, base = real[i], real[j]
    gap = cand.mean(1) - base.mean(1)
    rows = {}
    buckets = [("gap >= +5", 0.05, 1.0), ("gap 0..+5", 0.0, 0.05), ("gap -5..-2", -0.05, -0.02),
               ("gap <= -5", -1.0, -0.05)]  # fmt: skip
    items = _prediction_items(cand, base, seed, gpqa_bank)
    for label, lo, hi in buckets:
        sel = (gap >= lo) & (gap < hi)
        if sel.any():
            rows[f"GPQA REAL unrelated pairs, {label}"] = (
                int(sel.sum()),
                {v: float(np.median(x[sel])) for v, x in items.items()},
                _paired_differences(items, sel),
            )
    for n, theta in ((448, None), (2000, 0.5), (10000, -0.5)):
        if theta is None:
            b, bank = real[rng.integers(0, real.shape[0], pairs)], gpqa_bank
        else:
            b, src = synthetic_benchmark(n, theta, pairs, rng, sources=FIT_SOURCES)
            bank = item_bank(src, seed)
        for agr in (0.85, 0.95):
            for gap0 in (0.0, -0.01, 0.03):
                c = flip(b, gap0, agr, rng)
                name = (f"{'GPQA REAL baseline' if theta is None else f'synth-{n}'} "
                        f"sibling agree {agr}, gap {gap0:+.2f} (SYNTHETIC flips)")  # fmt: skip
                got = _prediction_items(c, b, seed, bank)
                every = np.ones(pairs, dtype=bool)
                rows[name] = (pairs, {v: float(np.median(x)) for v, x in got.items()},
                              _paired_differences(got, every))  # fmt: skip
    return rows


def predictions_case(pairs, seed, pools=1):
    """Medians per row over ``pools`` fresh pools (seeds ``seed .. seed + pools - 1``), with
    the lowest and highest pool's median: the spread a reader should expect, not the best pool."""
    per_pool = [predictions_pool(pairs, seed + p) for p in range(pools)]
    out = []
    for name in per_pool[0]:
        have = [pp[name] for pp in per_pool if name in pp]
        row = {"set": name, "n": int(np.median([h[0] for h in have])), "pools": len(have)}
        for label, _, _ in PREDICTION_VARIANTS:
            vals = np.array([h[1][label] for h in have])
            row[label] = (float(np.median(vals)), float(vals.min()), float(vals.max()))
        for v in ("calibrated (default)", "combined"):
            row[f"{v} above random"] = row[v][0] > min(row["random"][0], row["random, no prior"][0])
        for x, y in DIFFERENCES:  # all pools' pairs: mean and its SE
            d = np.concatenate([h[2][f"{x} - {y}"] for h in have])
            row[f"{x} - {y} (mean, se)"] = (
                round(float(d.mean()), 1),
                round(float(d.std(ddof=1) / np.sqrt(d.size)), 1) if d.size > 1 else None,
            )
        out.append(row)
        print(row, flush=True)
    return out


MMLU_SUITE = (("mmlu", 14042), ("hellaswag", 10042), ("arc_challenge", 1172),
              ("winogrande", 1267), ("gsm8k", 1319))  # fmt: skip


def two_sided_items(cand, base, margin, alpha, batch):
    """Items a two-sided paired session (existing CS) needs to decide, batch by batch, (S,)."""
    s, n = cand.shape
    rng = np.random.default_rng(11)
    order = rng.permuted(np.tile(np.arange(n), (s, 1)), axis=1)
    x = paired_values(np.take_along_axis(cand, order, 1), np.take_along_axis(base, order, 1))
    # grid: the paired lattice near -margin, 0 and +margin (where decisions happen), coarse elsewhere
    lattice = np.arange(2 * n + 1) / (2 * n)
    near = np.zeros(lattice.size, dtype=bool)
    for d in (-margin, 0.0, margin):
        near |= np.abs(2 * lattice - 1 - d) <= 0.006
    grid = np.union1d(lattice[near], np.linspace(0, 1, 201))
    st = cs_init(n, sessions=s, alpha=alpha, grid=grid, paired=True)
    done = np.zeros(s, dtype=np.int64)
    t = 0
    while t < n and (done == 0).any():
        k = min(batch, n - t)
        cs_update(st, x[:, t : t + k], inplace=True)
        t += k
        lo, hi = difference_interval(*cs_interval(st))
        dec = decide(lo, hi, margin=margin) != 0
        done[(done == 0) & dec] = t
    done[done == 0] = n
    return done


def holm_items(cand, base, margin, alpha, k):
    """Fixed-n non-inferiority per benchmark: Holm over K at 80 % power for the true gap.

    Paired difference estimator (the best fixed design when B is stored); n per benchmark from the
    normal approximation with finite-population correction at level alpha / K (Holm's first step)
    and per-benchmark power 0.8^(1/K) (all K reject with probability >= 0.8 when independent).
    """
    d = cand - base
    n_items = d.shape[1]
    gap = d.mean(1)
    var = d.var(1)
    z = norm.ppf(1 - alpha / k) + norm.ppf(0.8 ** (1 / k))
    n0 = z**2 * var / np.maximum(gap + margin, 1e-9) ** 2
    return np.minimum(np.ceil(n0 / (1 + (n0 - 1) / n_items)), n_items)


def items_case(gates, seed, two_sided_gates, items_out=None):
    """Items on the SYNTHETIC 27,842-item suite; ``items_out``: also save each row's items per
    gate (``.npz``, keys ``agreement_gap``) so medians can be pooled over seeds."""
    rng = np.random.default_rng(seed)
    sizes = [n for _, n in MMLU_SUITE]
    total = sum(sizes)
    bases = [
        synthetic_benchmark(n, th, gates, rng)
        for n, th in zip(sizes, (0.4, 0.8, 0.0, 0.6, -0.3), strict=True)
    ]
    margin = 0.02
    out = []
    per_gate = {}
    for agree in (0.85, 0.90):
        for gap in (0.0, -0.01):
            cands = [flip(b, gap, agree, rng) for b in bases]
            t0 = time.time()
            run = run_gates(cands, bases, [margin] * 5, alpha=ALPHA, batch_size=50, seed=seed)
            gate_s = time.time() - t0
            used = run.items.sum(1)
            t0 = time.time()
            two = sum(
                two_sided_items(c[:two_sided_gates], b[:two_sided_gates], margin, ALPHA / 5, 50)
                for c, b in zip(cands, bases, strict=True)
            )
            two_s = time.time() - t0
            holm = sum(
                holm_items(c, b, margin, ALPHA, 5) for c, b in zip(cands, bases, strict=True)
            )
            row = {
                "agreement": agree,
                "gap": gap,
                "gates": gates,
                "pass": int((run.outcome == G_PASS).sum()),
                "fail": int((run.outcome == G_FAIL).sum()),
                "gate median items": float(np.median(used)),
                "gate median %": round(100 * float(np.median(used)) / total, 1),
                "gate p90 %": round(100 * float(np.quantile(used, 0.9)) / total, 1),
                "whole suite": total,
                f"two-sided a/K median ({two_sided_gates} gates)": float(np.median(two)),
                "two-sided %": round(100 * float(np.median(two)) / total, 1),
                "Holm fixed-n median": float(np.median(holm)),
                "Holm %": round(100 * float(np.median(holm)) / total, 1),
                "gate s": round(gate_s, 1),
                "two-sided s": round(two_s, 1),
            }
            out.append(row)
            per_gate[f"{agree:.2f}_{gap:+.2f}"] = used
            print(row, flush=True)
    if items_out:
        np.savez(items_out, total=total, seed=seed, **per_gate)
    return out


def onesided_case(pairs, seed, margin=0.02):
    """REAL GPQA pairs with Delta > 0: items until non-inferior (Delta > -margin), item by item,
    uniform order: the one-sided lower test vs the lower end of the two-sided session CS, same
    alpha (the ``random`` policy's CS, ``confidence_sequences``)."""
    from app.core.sequential.confidence_sequences import confidence_sequence
    from app.core.sequential.gating.one_sided import (
        one_sided_init,
        one_sided_update,
        uniform_record,
    )

    real = gpqa()
    n = real.shape[1]
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, real.shape[0], 3 * pairs), rng.integers(0, real.shape[0], 3 * pairs)
    gap = real[i].mean(1) - real[j].mean(1)
    keep = (gap > 0) & (i != j)
    i, j, gap = i[keep][:pairs], j[keep][:pairs], gap[keep][:pairs]
    perm = np.argsort(rng.random((i.size, n)), axis=1)
    a = np.take_along_axis(real[i], perm, 1)
    b = real[j].mean(1)
    lower = confidence_sequence(a, n_items=n, alpha=ALPHA).lower - b[:, None] > -margin
    t_two = np.where(lower.any(1), lower.argmax(1) + 1, n)
    st = one_sided_init(n, np.stack([b - margin, b - margin], 1), [1, -1], ALPHA)
    rec, _ = uniform_record(np.zeros((i.size, n)), perm, np.zeros(i.size, int), n)
    one_sided_update(st, rec, np.take_along_axis(real[i], rec.items, 1), inplace=True)
    t_one = np.where(st.hit[:, 0] > 0, st.hit[:, 0], n)
    for lo, hi in ((0, 0.02), (0.02, 0.05), (0.05, 0.1), (0.1, 1)):
        m = (gap >= lo) & (gap < hi)
        print({"gap": f"{lo}..{hi}", "pairs": int(m.sum()),
               "two-sided lower end median": float(np.median(t_two[m])),
               "one-sided median": float(np.median(t_one[m])),
               "mean ratio": round(float(np.mean(t_one[m] / t_two[m])), 3)}, flush=True)  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=["error", "predictions", "items"])
    ap.add_argument("--gates", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--two-sided-gates", type=int, default=200)
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--items-out", default=None, help="--cases items: save items per gate (.npz)")
    ap.add_argument("--pools", type=int, default=1, help="fresh pools for --cases predictions")
    ap.add_argument("--error-prediction", default="calibrated",
                    help="the gates' prediction in --cases error (combined: with IRT fits)")  # fmt: skip
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()  # fmt: skip
    print(f"commit {commit}, load {os.getloadavg()[0]:.1f}, alpha {ALPHA}", flush=True)
    if "error" in args.cases:
        for k in (3, 5):
            names, _ = error_case(k, args.gates, args.margin, 0.88, args.seed + k,
                                  args.error_prediction)  # fmt: skip
            print(f"K={k} benchmarks: {names}", flush=True)
    if "predictions" in args.cases:
        predictions_case(args.pairs, args.seed, args.pools)
    if "onesided" in args.cases:
        onesided_case(args.pairs, args.seed)
    if "items" in args.cases:
        items_case(args.gates, args.seed, args.two_sided_gates, args.items_out)


if __name__ == "__main__":
    main()
