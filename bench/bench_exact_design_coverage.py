"""Exact coverage of the design-based small-sample intervals for GPQA's weakest and strongest
fifth (issue 38): no simulation, the hypergeometric law of a random subset's score enumerated.

A random subset's interval does not depend on the source models, so its coverage for targets
beyond every source is its coverage at their accuracies: ``sum_k P(k | N, K, n) 1[K/N in CI(k)]``
for each target's ``K`` items right of ``N``, averaged over the fifth. Cost: O(n) per target.

    .venv/bin/python bench/bench_exact_design_coverage.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.stats import hypergeom

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.estimation.intervals import proportion_interval
from bench.bench_coverage import load_benchmark


def exact_coverage(totals: np.ndarray, n: int, n_population: int, method: str) -> np.ndarray:
    """Coverage of ``method``'s 95 % interval for each population total in ``totals``."""
    ks = np.arange(n + 1)
    lo, hi = proportion_interval(ks, n, method=method, n_population=n_population)
    p = np.asarray(totals)[:, None] / n_population
    inside = (lo[None, :] <= p + 1e-12) & (p <= hi[None, :] + 1e-12)
    pmf = hypergeom.pmf(ks[None, :], n_population, np.asarray(totals)[:, None], n)
    return (pmf * inside).sum(axis=1)


def main() -> None:
    correct, _, label = load_benchmark("gpqa", 5)
    n_pop = correct.shape[1]
    totals = np.sort(np.round(correct.mean(axis=1) * n_pop).astype(int))
    fifth = totals.size // 5
    print(f"{label}: exact coverage, mean over the fifth (min over the fifth's models)\n")
    print("| interval | n | weakest fifth | strongest fifth | every total K = 0..N: min |")
    print("|---|---|---|---|---|")
    for method in ("jeffreys_fpc", "wilson_fpc", "hypergeometric"):
        for n in (25, 50, 100):
            weak = exact_coverage(totals[:fifth], n, n_pop, method)
            strong = exact_coverage(totals[-fifth:], n, n_pop, method)
            every = exact_coverage(np.arange(n_pop + 1), n, n_pop, method)
            print(
                f"| {method} | {n} | {weak.mean():.4f} ({weak.min():.3f}) | "
                f"{strong.mean():.4f} ({strong.min():.3f}) | {every.min():.3f} |"
            )


if __name__ == "__main__":
    main()
