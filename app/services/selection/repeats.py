"""Scoring from repeated samples: each uploaded value is the mean of ``K`` samples of an item.

:func:`app.core.estimation.stats.repeated_samples_estimate` (Miller 2024): ``SE = sd(x̄)/sqrt(n)`` with the
finite-population correction on the between-item part,
``SE² = (1 - n/N) Var(x)/n + E[s²]/(K n)``, and the per-item variance a plan divides by ``n``,
``Var(x) + E[s²]/K``. The estimate is given for subsets with uniform weights (a design-based
mean); for weighted subsets only the variance split is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from app.core.estimation.bounded import betting_interval, pass_at_k
from app.core.estimation.stats import repeated_samples_estimate
from app.core.results import Selection
from app.ingest import ParsedResults
from app.schemas.quality import PassAtKPublic, RepeatedSamplesPublic
from app.schemas.subsets import EstimatePublic

ESTIMATOR = "repeated_samples"
INTERVAL = "repeated_samples_normal_fpc"


def repeated_block(
    parsed: ParsedResults,
    y: np.ndarray,
    selection: Selection,
    n_items: int,
    align: Callable[[ParsedResults], np.ndarray],
) -> RepeatedSamplesPublic | None:
    """The repeated-samples summary of a score (``None`` when the upload has one sample).

    ``y``: the per-item means in the subset's order; ``align`` puts another per-item vector
    of the upload in that order.
    """
    k = parsed.k
    if k < 2:
        return None
    within = None
    if parsed.within_variance is not None:
        carrier = replace(
            parsed, correct=np.asarray(parsed.within_variance, np.float64), confidence=None
        )
        within = align(carrier)
    est = repeated_samples_estimate(y, k, within_variance=within, n_population=n_items)
    counts = np.full(y.shape, k, dtype=np.float64)
    if parsed.sample_counts is not None:
        carrier = replace(
            parsed, correct=np.asarray(parsed.sample_counts, np.float64), confidence=None
        )
        counts = np.asarray(align(carrier), dtype=np.float64)
    uniform = bool(np.allclose(selection.weights, 1.0 / selection.size))
    return RepeatedSamplesPublic(
        k=k,
        n=est.n,
        value=est.value if uniform else None,
        se=est.se if uniform else None,
        ci_low=est.ci_low if uniform else None,
        ci_high=est.ci_high if uniform else None,
        var_items=est.var_items,
        mean_within=est.mean_within,
        within_term=est.mean_within / k,
        variance_per_item=est.var_items + est.mean_within / k,
        within_variance_source="bernoulli" if within is None else "uploaded",
        note=None
        if uniform
        else "weighted subset: the estimators' intervals apply; only the variance split is given",
        pass_at_k=pass_at_k_block(y, counts) if uniform else [],
    )


def pass_at_k_block(means: np.ndarray, counts: np.ndarray) -> list[PassAtKPublic]:
    """pass@k for k = 1, 2, 4, ... up to the fewest samples of an item, when the samples are
    0/1 (``mean x n_i`` whole numbers): each item one cluster, its unbiased pass@k the value."""
    correct = means * counts
    if counts.min() < 1 or np.abs(correct - np.round(correct)).max() > 1e-3:
        return []
    c = np.round(correct)
    n_items = means.shape[0]
    out = []
    k = 1
    while k <= counts.min():  # log2(K) values of k
        per_item = pass_at_k(counts, c, k)
        sd = float(per_item.std(ddof=1)) if n_items > 1 else 0.0
        lo, hi = betting_interval(per_item)
        out.append(
            PassAtKPublic(
                k=k,
                value=float(per_item.mean()),
                se=sd / np.sqrt(n_items),
                ci_low=float(lo[0]),
                ci_high=float(hi[0]),
                var_items=sd**2,
            )
        )
        k *= 2
    return out


def repeated_estimate(block: RepeatedSamplesPublic | None) -> list[EstimatePublic]:
    """The block as one more estimate in the score's list (uniform subsets only)."""
    if block is None or block.value is None:
        return []
    return [
        EstimatePublic(
            estimator=ESTIMATOR,
            value=block.value,
            ci_low=block.ci_low,
            ci_high=block.ci_high,
            se=block.se,
            interval=INTERVAL,
            basis="design",
            note=f"mean of {block.k} samples per item; SE includes E[s2]/K",
        )
    ]
