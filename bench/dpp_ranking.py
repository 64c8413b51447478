"""Why DPP subsets ranked SYNTHETIC MMLU-Pro-scale models against their order (issue 24).

On ``bench/synth.py`` matrices (SYNTHETIC, 2PL with GPQA's fitted discriminations, a quarter of
them negative), a DPP's plain-mean estimates ranked held-out models with Kendall tau -0.10 to
-0.17. This script measures, on a smaller matrix (300 models x 3,000 items, 10 subtasks, seed 0,
200 sources / 100 targets), the DPP's tau and the share of negative-discrimination items in its
subsets, for both generators (``discrimination="gpqa"`` and ``"positive"``) and both DPP
weightings, next to a random subset of the same size.

    .venv/bin/python bench/dpp_ranking.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.selectors import make_selector
from bench.synth import make_synthetic


def main() -> None:
    for discrimination in ("gpqa", "positive"):
        d = make_synthetic(
            300, 3000, seed=0, subtask_sizes=[300] * 10, discrimination=discrimination
        )
        c = d.correct.astype(np.float64)
        perm = np.random.default_rng(0).permutation(300)
        src, tgt = perm[:200], perm[200:]
        truth = c[tgt].mean(axis=1)
        for weighting in ("mean", "sampler"):
            sel = make_selector("dpp", weighting=weighting).fit(
                c[src], confidence=d.confidence[src]
            )
            for n in (50, 200):
                taus, negative = [], []
                for s in range(5):  # five subsets per size
                    x = sel.select(n, rng=s)
                    est = c[np.ix_(tgt, x.indices)] @ x.weights
                    taus.append(kendalltau(est, truth)[0])
                    negative.append(float(np.mean(d.a[x.indices] < 0)))
                r = make_selector("random").fit(c[src]).select(n, rng=0)
                tau_r = kendalltau(c[np.ix_(tgt, r.indices)].mean(axis=1), truth)[0]
                print(
                    f"SYNTHETIC discrimination={discrimination} dpp weighting={weighting} n={n}: "
                    f"tau {np.mean(taus):+.2f} (random {tau_r:+.2f}); a < 0 in the subset "
                    f"{np.mean(negative):.2f} vs {np.mean(d.a < 0):.2f} of all items"
                )


if __name__ == "__main__":
    main()
