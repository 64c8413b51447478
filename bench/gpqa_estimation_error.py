"""Estimation error on the REAL GPQA matrix: tiny_benchmarks and anchor_points vs random.

Protocol (paper §1.3, simplified to one n-grid per run): per run, 50 target models drawn uniformly,
300 source models from the rest; candidate pool = all 448 items, or the "seen" half (a random
224, GPQA having one subtask). Every selector is fitted on the sources restricted to the pool and
selects n in {10, 25, 50, 100, 200} with the run's seed. Error = mean over the 50 targets of
|estimate - target accuracy on the pool|; the table reports its mean over runs (+- standard error
over runs).

Methods: ``random`` (plain mean), ``tiny_benchmarks`` with its three estimators (``irt`` =
anchor-weighted mean, ``p_irt``, ``gp_irt``), ``anchor_points`` with ``estimate_on="correct"``
(GPQA has no confidences, so the correlations use correctness as well).

    .venv/bin/python bench/gpqa_estimation_error.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.selectors import make_selector

SIZES = (10, 25, 50, 100, 200)
N_TARGETS, N_SOURCES = 50, 300
COLUMNS = ("random", "tb_irt", "tb_p_irt", "tb_gp_irt", "anchor_points")


def _data_path() -> Path:
    root = Path(__file__).resolve().parents[1]
    return (
        Path(os.environ.get("BENCHSLICE_SHARED_DATA") or root.parent / "shared" / "data")
        / "gpqa.npz"
    )


def run(correct: np.ndarray, runs: int, pools: tuple[str, ...]) -> dict:
    """Return ``errors[pool][method][n] -> list of per-run MAEs``."""
    n_models, n_items = correct.shape
    errors = {p: {c: {n: [] for n in SIZES} for c in COLUMNS} for p in pools}
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        models = rng.permutation(n_models)
        targets, sources = models[:N_TARGETS], models[N_TARGETS : N_TARGETS + N_SOURCES]
        seen = np.sort(rng.permutation(n_items)[: n_items // 2])
        for pool in pools:
            cand = np.arange(n_items) if pool == "all" else seen
            truth = correct[np.ix_(targets, cand)].mean(axis=1)
            fitted = {
                "random": make_selector("random").fit(correct[sources], candidates=cand),
                "tiny_benchmarks": make_selector("tiny_benchmarks").fit(
                    correct[sources], candidates=cand
                ),
                "anchor_points": make_selector("anchor_points", estimate_on="correct").fit(
                    correct[sources], candidates=cand
                ),
            }
            for n in SIZES:
                for name, sel in fitted.items():
                    s = sel.select(n, rng=seed)
                    y = correct[np.ix_(targets, s.indices)]
                    if name == "tiny_benchmarks":
                        for est in ("irt", "p_irt", "gp_irt"):
                            e = sel.estimate(s, y, estimator=est)
                            errors[pool][f"tb_{est}"][n].append(float(np.mean(np.abs(e - truth))))
                    else:
                        e = sel.estimate(s, y)
                        errors[pool][name][n].append(float(np.mean(np.abs(e - truth))))
        print(f"run {seed} done", file=sys.stderr, flush=True)
    return errors


def table(errors: dict, pool: str, runs: int) -> str:
    lines = [
        f"pool = {pool}; MAE in accuracy points (x100), mean +- s.e. over {runs} runs",
        "",
        "| n | " + " | ".join(COLUMNS) + " |",
        "| --- |" + " --- |" * len(COLUMNS),
    ]
    for n in SIZES:
        cells = []
        for c in COLUMNS:
            v = 100 * np.asarray(errors[pool][c][n])
            se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
            cells.append(f"{v.mean():.2f} +- {se:.2f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pools", default="all,seen")
    args = parser.parse_args(argv)
    with np.load(_data_path(), allow_pickle=False) as d:
        correct = d["correct"].astype(np.float64)
    pools = tuple(args.pools.split(","))
    t = time.perf_counter()
    errors = run(correct, args.runs, pools)
    for pool in pools:
        print(table(errors, pool, args.runs))
        print()
    print(f"({time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
