"""Which support check would make the service's model-based answers cover beyond the sources?
(issue 38, Done-when 1; statistics-next §10)

For non-probability subsets (DPP, Anchor Points, tinyBenchmarks) a flagged target gets no
model-based answer (the subset has no design-based interval: the answer is withheld), so the
answer's coverage is the coverage of the *unflagged* targets' first model-based interval. This
study scores every target of the extrapolation splits (``weak_to_strong``, ``strong_to_weak``:
:func:`app.core.scoring.coverage.extrapolation_split`) and of the ordinary held-out split
(``random``: 300 sources, 120 targets) once, and reports, per split x selector x n, the coverage
of the unflagged targets and the share flagged under the current check
(:func:`app.core.scoring.support.unsupported`), under the check before its Guttman misfit (``no
Guttman``: score range, and IRT ability and ``l_z`` on tinyBenchmarks) and under candidate checks
added to the current one:

* ``est``: the model-based estimate above every source's full accuracy or below every one's;
* ``sub q``: the subset score ``y . w`` at or beyond the sources' top / bottom ``q`` share of
  subset scores (``q = 0`` is the current range check);
* ``rank q``: the estimate within the sources' top / bottom ``q`` share of full accuracies.

Benchmarks: ``gpqa`` (REAL, 420 x 448) and the SYNTHETIC families of :mod:`bench.synth_families`.

    .venv/bin/python bench/bench_support_rules.py --benchmarks gpqa weak wide strong \
        discriminative --methods anchor_points dpp --repeats 20 --seed 3940
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.scoring.coverage import extrapolation_split, split_models
from app.core.scoring.crossfit import crossfit_applies, with_out_of_fold
from app.core.scoring.score_models import score_models
from app.core.scoring.support import irt_support, score_outside, unsupported
from app.core.selectors import make_selector
from bench.bench_coverage import load_benchmark

SPLITS = ("weak_to_strong", "strong_to_weak", "random")
RULES = (
    "current",
    "no Guttman",
    "est",
    "sub 0.02",
    "sub 0.05",
    "rank 0.05",
    "rank 0.1",
    "rank 0.2",
)


def _cases(c, subtasks, methods, sizes, split, repeats, seed) -> dict[tuple, dict]:
    """Per (method, n): arrays over (repeat, target) cases of what the rules need."""
    out: dict[tuple, dict[str, list]] = {}
    fixed: dict[str, tuple] = {}
    for r in range(repeats):
        rng = np.random.default_rng([seed, r])
        if split == "random":
            src, tgt = split_models(c, 300, 120, rng)
        else:
            src, tgt = extrapolation_split(c, split)
        truth, acc = c[tgt].mean(axis=1), np.sort(c[src].mean(axis=1))
        for name in methods:
            if split == "random" or name not in fixed:
                fixed[name] = (make_selector(name).fit(c[src], subtasks=subtasks), {})
            sel, folds = fixed[name]
            for n in sizes:
                s = sel.select(int(n), rng=int(rng.integers(0, 2**31 - 1)))
                if crossfit_applies(name, src.size):
                    s = with_out_of_fold(
                        s,
                        c[src],
                        seed=int(s.seed or 0),
                        subtasks=subtasks,
                        fold_selectors=folds if split != "random" else {},
                    )
                y = c[np.ix_(tgt, s.indices)]
                batches = score_models(s, y, c.shape[1], reference_correct=c[src])
                b = next(b for b in batches if np.isfinite(b.ci_low).all())
                w = np.asarray(s.weights, dtype=np.float64)
                sv, tv = np.sort(c[src][:, s.indices] @ w), y @ w
                slot = out.setdefault((name, int(n)), {})
                rows = {
                    "cover": (b.ci_low <= truth + 1e-12) & (truth - 1e-12 <= b.ci_high),
                    "current": unsupported(s, y, c[src][:, s.indices]),
                    "before": _before_guttman(s, y, sv),
                    "est": (b.value > acc[-1]) | (b.value < acc[0]),
                    # share of sources at or beyond the target (subset score / estimate)
                    "sub_hi": 1.0 - np.searchsorted(sv, tv, side="left") / sv.size,
                    "sub_lo": np.searchsorted(sv, tv, side="right") / sv.size,
                    "rank_hi": 1.0 - np.searchsorted(acc, b.value, side="left") / acc.size,
                    "rank_lo": np.searchsorted(acc, b.value, side="right") / acc.size,
                }
                for k, v in rows.items():
                    slot.setdefault(k, []).append(np.asarray(v))
    return {key: {k: np.concatenate(v) for k, v in slot.items()} for key, slot in out.items()}


def _before_guttman(selection, y, source_values) -> np.ndarray:
    """The check before the Guttman misfit: score range, and on IRT subsets ability and l_z."""
    out = score_outside(y @ np.asarray(selection.weights), source_values)[0]
    irt = irt_support(selection, y)
    return out if irt is None else out | irt.flagged


def flags(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The candidate checks (each added to the current one) as (cases,) bool arrays."""
    cur = d["current"]
    # "no Guttman": the check before the Guttman misfit was added (it applies off IRT subsets)
    out = {"current": cur, "no Guttman": d["before"], "est": cur | d["est"]}
    for q in (0.02, 0.05):
        out[f"sub {q}"] = cur | (d["sub_hi"] <= q) | (d["sub_lo"] <= q)
    for q in (0.05, 0.1, 0.2):
        out[f"rank {q}"] = cur | (d["rank_hi"] <= q) | (d["rank_lo"] <= q)
    return out


def markdown(name: str, split: str, cells: dict[tuple, dict]) -> str:
    head = " | ".join(RULES)
    lines = [
        f"| {name} / {split} | n | all targets | {head} |",
        "|---|---|---|" + "---|" * len(RULES),
    ]
    for (method, n), d in sorted(cells.items()):
        cells_txt = []
        for rule in RULES:
            fl = flags(d)[rule]
            cov = d["cover"][~fl].mean() if (~fl).any() else float("nan")
            low = " LOW" if cov == cov and cov < 0.93 else ""
            cells_txt.append(f"{cov:.3f}{low} / {fl.mean():.2f}")
        lines.append(
            f"| {method} | {n} | {d['cover'].mean():.3f} ({d['cover'].size}) | "
            + " | ".join(cells_txt)
            + " |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", nargs="+", default=["gpqa"])
    ap.add_argument("--splits", nargs="+", default=list(SPLITS))
    ap.add_argument("--methods", nargs="+", default=["anchor_points", "dpp"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=3940)
    ap.add_argument("--family-seed", type=int, default=5)
    args = ap.parse_args(argv)
    print(
        "cells: coverage of the unflagged targets' first model-based interval (the service's "
        "answer) / share flagged (answer withheld)"
    )
    for name in args.benchmarks:
        correct, subtasks, label = load_benchmark(name, args.family_seed)
        c = np.asarray(correct, dtype=np.float64)
        for split in args.splits:
            t0 = time.perf_counter()
            cells = _cases(c, subtasks, args.methods, args.sizes, split, args.repeats, args.seed)
            dt = time.perf_counter() - t0
            print(f"\n### {label}; {split}, {args.repeats} repeats, seed {args.seed}, {dt:.0f} s\n")
            print(markdown(name, split, cells), flush=True)


if __name__ == "__main__":
    main()
