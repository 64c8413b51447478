"""Scoring statistics: Wilson intervals with finite-population correction, exact McNemar, paired
bootstrap, cluster-robust standard errors, and the probability that a new model beats a baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from app.core._validation import SeedLike, normalize_rng
from app.core.results import Estimate, PairedComparison


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: expected a level in (0, 1), got {confidence}")
    return float(_st.norm.ppf(0.5 + confidence / 2.0))


def fpc(n: int, n_population: int | None) -> float:
    """Finite-population correction ``(N - n) / (N - 1)`` of a variance (1 when ``N`` is None)."""
    if n_population is None:
        return 1.0
    if n_population < n:
        raise ValueError(f"n_population: {n_population} is smaller than the sample size {n}")
    if n_population <= 1:
        return 0.0
    return (n_population - n) / (n_population - 1)


def wilson_center_half(p, n_eff, z):
    """Centre and half-width of the Wilson score interval, unclipped (scalars or arrays).

    Parameters
    ----------
    p : float or ndarray
        Observed proportions, in ``[0, 1]``.
    n_eff : float or ndarray
        Sample size, already divided by the finite-population correction (``> 0``).
    z : float
        The standard normal quantile of the two-sided level.

    Returns
    -------
    center, half : float or ndarray
        As in the notes of :func:`wilson_bounds` (Wilson 1927); callers clip to ``[0, 1]``.
    """
    denom = 1.0 + z * z / n_eff
    center = (p + z * z / (2.0 * n_eff)) / denom
    half = z / denom * np.sqrt(p * (1.0 - p) / n_eff + z * z / (4.0 * n_eff * n_eff))
    return center, half


def wilson_bounds(p: float, n: float, f: float, z: float) -> tuple[float, float]:
    """Wilson score bounds of a proportion with a finite-population correction.

    Parameters
    ----------
    p : float
        The observed proportion, in ``[0, 1]``.
    n : float
        The (possibly effective) sample size, ``> 0``.
    f : float
        The finite-population correction ``(N - n) / (N - 1)`` (1 without ``N``).
    z : float
        The standard normal quantile of the two-sided level.

    Returns
    -------
    (lo, hi) : tuple of float
        Clipped to ``[0, 1]``; both equal ``p`` when ``f = 0`` (the whole population was seen).

    Notes
    -----
    With ``n_eff = n / f``: ``center = (p + z^2 / (2 n_eff)) / (1 + z^2 / n_eff)``,
    ``half = z / (1 + z^2 / n_eff) * sqrt(p (1 - p) / n_eff + z^2 / (4 n_eff^2))``.
    """
    if f == 0.0:
        return p, p
    center, half = wilson_center_half(p, n / f, z)
    # min/max with p: at p = 0 or 1 rounding would otherwise leave the bound a hair past p
    return max(0.0, min(p, center - half)), min(1.0, max(p, center + half))


def wilson_interval(
    successes: int, n: int, *, n_population: int | None = None, confidence: float = 0.95
) -> Estimate:
    """Wilson score interval for a proportion, with an optional finite-population correction.

    Parameters
    ----------
    successes, n : int
        Correct items and items scored (``0 <= successes <= n``, ``n >= 1``).
    n_population : int, optional
        ``N``, the benchmark's size when the ``n`` items are a simple random sample of it.
    confidence : float

    Returns
    -------
    Estimate
        ``value = successes / n``; ``method = "wilson_fpc"`` (``"wilson"`` without ``N``).

    Notes
    -----
    With ``p = k / n`` and the effective sample size ``n_eff = n / f``, ``f = (N - n) / (N - 1)``
    (the variance of a without-replacement mean is ``f p (1 - p) / n``):

    ``center = (p + z^2 / (2 n_eff)) / (1 + z^2 / n_eff)``,
    ``half = z / (1 + z^2 / n_eff) * sqrt(p (1 - p) / n_eff + z^2 / (4 n_eff^2))``.

    Without ``N`` this is Wilson (1927); with ``n = N`` the interval collapses to ``p``.
    ``se`` is ``sqrt(f p (1 - p) / n)``.
    """
    if isinstance(n, bool) or n < 1:
        raise ValueError(f"n: expected a positive count, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes: expected 0 <= successes <= n, got {successes}")
    z = _z(confidence)
    f = fpc(n, n_population)
    p = successes / n
    se = float(np.sqrt(f * p * (1.0 - p) / n))
    lo, hi = wilson_bounds(p, n, f, z)
    return Estimate(
        value=p,
        ci_low=float(lo),
        ci_high=float(hi),
        se=se,
        n=int(n),
        n_population=n_population,
        method="wilson" if n_population is None else "wilson_fpc",
        confidence=confidence,
    )


def mcnemar_exact(correct_a, correct_b) -> tuple[float, int, int]:
    """Two-sided exact McNemar test on paired 0/1 results.

    Parameters
    ----------
    correct_a, correct_b : array_like of {0, 1}, shape (n_items,)

    Returns
    -------
    p_value : float
        ``scipy.stats.binomtest(n10, n10 + n01, 0.5).pvalue`` (1.0 when there are no discordant
        items).
    n10, n01 : int
        Items only A / only B gets right.
    """
    a = np.asarray(correct_a)
    b = np.asarray(correct_b)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("correct_b: expected a 1-d array aligned with correct_a")
    n10 = int(np.sum((a == 1) & (b == 0)))
    n01 = int(np.sum((a == 0) & (b == 1)))
    if n10 + n01 == 0:
        return 1.0, n10, n01
    return float(_st.binomtest(n10, n10 + n01, 0.5).pvalue), n10, n01


def paired_bootstrap(
    values_a,
    values_b,
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    rng: SeedLike = None,
) -> Estimate:
    """Percentile bootstrap CI of the mean paired difference ``mean(a - b)`` over items.

    Parameters
    ----------
    values_a, values_b : array_like, shape (n_items,)
        Per-item scores of two models on the same items.
    n_boot : int
    confidence : float
    rng : int, Generator or None

    Returns
    -------
    Estimate
        ``method = "paired_bootstrap"``; ``se`` is the bootstrap standard deviation.

    Notes
    -----
    Item resampling with replacement is drawn as multinomial counts ``W`` (``B x n``), so all
    resampled means are ``W @ d / n`` in one product (in row chunks to bound memory).
    """
    a = np.asarray(values_a, dtype=np.float64)
    b = np.asarray(values_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("values_b: expected a non-empty 1-d array aligned with values_a")
    generator, _ = normalize_rng(rng)
    d = a - b
    n = d.shape[0]
    step = max(1, 2_000_000 // n)
    means = np.concatenate(
        [
            generator.multinomial(n, np.full(n, 1.0 / n), size=min(step, n_boot - s)) @ d / n
            for s in range(0, n_boot, step)  # memory chunks of resamples
        ]
    )
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return Estimate(
        value=float(d.mean()),
        ci_low=float(lo),
        ci_high=float(hi),
        se=float(means.std(ddof=1)),
        n=n,
        n_population=None,
        method="paired_bootstrap",
        confidence=confidence,
    )


def clustered_se(values, clusters) -> float:
    """Cluster-robust standard error of a mean (clusters = subtasks), Miller (2024).

    Parameters
    ----------
    values : array_like, shape (n,)
        Per-item scores.
    clusters : array_like, shape (n,)
        Cluster label per item.

    Returns
    -------
    float
        ``SE_C = sqrt(sum_c (sum_{i in c} (x_i - x̄))^2) / n``.

    Notes
    -----
    Miller, "Adding Error Bars to Evals" (2024), eq. for clustered SE:
    ``SE_C^2 = SE_CLT^2 + (1/n^2) sum_c sum_{i in c} sum_{j in c, j != i} (x_i - x̄)(x_j - x̄)``
    with ``SE_CLT^2 = (1/n^2) sum_i (x_i - x̄)^2``; the two sums combine into the sandwich form
    above. With one item per cluster it reduces to ``SE_CLT``.
    """
    x = np.asarray(values, dtype=np.float64)
    c = np.asarray(clusters)
    if x.ndim != 1 or c.shape != x.shape or x.size == 0:
        raise ValueError("clusters: expected a label per value")
    _, codes = np.unique(c, return_inverse=True)
    resid = np.bincount(codes.ravel(), weights=x - x.mean())
    return float(np.sqrt(np.sum(resid**2)) / x.shape[0])


def score_subset(correct_subset, n_population: int, *, confidence: float = 0.95) -> Estimate:
    """Estimated full-benchmark accuracy of a model scored on a uniform random subset.

    Parameters
    ----------
    correct_subset : array_like of {0, 1}, shape (n,)
    n_population : int
        Benchmark size ``N``.
    confidence : float

    Returns
    -------
    Estimate
        Wilson interval with finite-population correction (:func:`wilson_interval`).
    """
    y = np.asarray(correct_subset, dtype=np.float64)
    if y.ndim != 1 or y.size == 0 or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("correct_subset: expected a non-empty 1-d array of 0/1")
    return wilson_interval(
        int(y.sum()), int(y.size), n_population=n_population, confidence=confidence
    )


def normal_paired_comparison(
    new_shared, baseline_shared, mean_diff: float, se: float, n_population: int
) -> PairedComparison:
    """A :class:`PairedComparison` from an estimated mean difference and its standard error.

    Parameters
    ----------
    new_shared, baseline_shared : ndarray of {0, 1}, shape (n_shared,)
        Both models' results on the shared items (for the exact McNemar test).
    mean_diff, se : float
        Estimate of the full-benchmark difference ``new - baseline`` and its standard error.
    n_population : int

    Returns
    -------
    PairedComparison
        ``p_better = Phi(mean_diff / se)`` (1, 0 or 0.5 by the sign of ``mean_diff`` when
        ``se = 0``) and the McNemar p-value and discordant counts.
    """
    if se > 0:
        p = float(_st.norm.cdf(mean_diff / se))
    else:
        p = 1.0 if mean_diff > 0 else (0.0 if mean_diff < 0 else 0.5)
    p_val, n10, n01 = mcnemar_exact(new_shared, baseline_shared)
    return PairedComparison(
        p_better=p,
        mean_diff=mean_diff,
        se=float(se),
        n_shared=int(np.shape(new_shared)[0]),
        n_population=n_population,
        n_new_only=n10,
        n_baseline_only=n01,
        mcnemar_p=p_val,
    )


def compare_to_baseline(new_correct, baseline_correct_full, indices) -> PairedComparison:
    """P(a new model known on a subset beats a baseline known on every item, on the full benchmark).

    Parameters
    ----------
    new_correct : array_like of {0, 1}, shape (n,)
        The new model's results on ``indices``.
    baseline_correct_full : array_like of {0, 1}, shape (N,)
        The baseline's results on every item.
    indices : array_like of int, shape (n,)
        Item positions the new model was scored on (a uniform random subset).

    Returns
    -------
    PairedComparison

    Notes
    -----
    Model: with paired differences ``d_i = y_new,i - y_base,i`` on the ``n`` shared items, the
    full-benchmark difference ``Δ = mean_{all N} d`` is estimated by ``d̄`` with standard error
    ``s_d / sqrt(n) * sqrt((N - n) / (N - 1))`` (simple random sampling without replacement,
    ``s_d`` the sample standard deviation). ``P(Δ > 0) = Φ(d̄ / SE)`` under the normal
    approximation (1, 0 or 0.5 when ``SE = 0``: the sign of ``d̄``). The exact McNemar test on
    the discordant shared items is reported alongside.
    """
    y = np.asarray(new_correct, dtype=np.float64)
    base = np.asarray(baseline_correct_full, dtype=np.float64)
    idx = np.asarray(indices, dtype=np.int64)
    if y.ndim != 1 or idx.shape != y.shape or y.size == 0:
        raise ValueError("indices: expected one item position per result of the new model")
    if base.ndim != 1 or idx.min() < 0 or idx.max() >= base.shape[0]:
        raise ValueError("indices: positions must lie within the baseline's items")
    if np.unique(idx).shape[0] != idx.shape[0]:
        raise ValueError("indices: positions must be distinct")
    n, n_pop = y.shape[0], base.shape[0]
    d = y - base[idx]
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    se = sd / np.sqrt(n) * np.sqrt(fpc(n, n_pop))
    return normal_paired_comparison(y, base[idx], mean, se, n_pop)


# -- pairs on shared items: Dirichlet posterior + exact McNemar (issue 13) -------------------------

#: Fewest discordant items a paired verdict is given on (below: ``undecidable``).
MIN_DISCORDANT = 10


def dirichlet_p_better(n10, n01) -> np.ndarray:
    """Posterior P(A beats B) from paired 0/1 outcomes, vectorised.

    Parameters
    ----------
    n10, n01 : array_like of int
        Shared items only A / only B gets right.

    Returns
    -------
    ndarray of float
        ``P(p10 > p01)`` under the ``Dirichlet(1 + n11, 1 + n10, 1 + n01, 1 + n00)`` posterior of
        the four cell probabilities, which equals ``P(Beta(1 + n10, 1 + n01) > 1/2)``
        (``p10 / (p10 + p01)`` is Beta-distributed whatever the concordant cells).

    Notes
    -----
    The uniform Dirichlet prior makes 0.5 the answer at ``n10 = n01``; with no discordant item
    the posterior is the prior (0.5).
    """
    a = np.asarray(n10, dtype=np.float64)
    b = np.asarray(n01, dtype=np.float64)
    if np.any(a < 0) or np.any(b < 0):
        raise ValueError("n10: discordant counts must be non-negative")
    return _st.beta.sf(0.5, 1.0 + a, 1.0 + b)


def mcnemar_exact_counts(n10, n01) -> np.ndarray:
    """Two-sided exact McNemar p-values from discordant counts, vectorised.

    ``min(1, 2 P(X <= min(n10, n01)))`` with ``X ~ Binomial(n10 + n01, 1/2)`` (equal to
    ``scipy.stats.binomtest(n10, n10 + n01, 0.5).pvalue``: the null distribution is symmetric);
    1 when there is no discordant item.
    """
    a = np.asarray(n10, dtype=np.float64)
    b = np.asarray(n01, dtype=np.float64)
    n = a + b
    p = np.minimum(1.0, 2.0 * _st.binom.cdf(np.minimum(a, b), n, 0.5))
    return np.where(n == 0, 1.0, p)


@dataclass(frozen=True)
class PairedOutcomes:
    """Two models on shared items: cell counts, P(A > B), exact McNemar, decidability.

    Attributes
    ----------
    n11, n10, n01, n00 : int
    p_a_better : float
        :func:`dirichlet_p_better`.
    mcnemar_p : float
        :func:`mcnemar_exact_counts`.
    min_discordant : int
        ``k``: fewest discordant items a verdict needs.
    status : str
        ``"undecidable"`` when ``n10 + n01 < k``, else ``"decidable"``.
    """

    n11: int
    n10: int
    n01: int
    n00: int
    p_a_better: float
    mcnemar_p: float
    min_discordant: int
    status: str

    @property
    def undecidable(self) -> bool:
        return self.status == "undecidable"


def paired_outcomes(
    correct_a, correct_b, *, min_discordant: int = MIN_DISCORDANT
) -> PairedOutcomes:
    """Paired comparison of two models' 0/1 results on the same items.

    Parameters
    ----------
    correct_a, correct_b : array_like of {0, 1}, shape (n_items,)
    min_discordant : int
        ``k``; below it the pair is ``undecidable`` (the numbers are still reported).

    Returns
    -------
    PairedOutcomes
    """
    a = np.asarray(correct_a)
    b = np.asarray(correct_b)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("correct_b: expected a non-empty 1-d array aligned with correct_a")
    for name, values in (("correct_a", a), ("correct_b", b)):
        if not np.isin(values, (0, 1)).all():
            raise ValueError(f"{name}: expected 0/1 results")
    if isinstance(min_discordant, bool) or min_discordant < 0:
        raise ValueError("min_discordant: expected a non-negative count")
    a, b = a.astype(bool), b.astype(bool)
    n10, n01 = int(np.sum(a & ~b)), int(np.sum(~a & b))
    n11, n00 = int(np.sum(a & b)), int(np.sum(~a & ~b))
    return PairedOutcomes(
        n11=n11,
        n10=n10,
        n01=n01,
        n00=n00,
        p_a_better=float(dirichlet_p_better(n10, n01)),
        mcnemar_p=float(mcnemar_exact_counts(n10, n01)),
        min_discordant=int(min_discordant),
        status="undecidable" if n10 + n01 < min_discordant else "decidable",
    )


# -- repeated samples per item (Miller 2024) -----------------------------------------------------


@dataclass(frozen=True)
class RepeatedSamplesEstimate:
    """Mean of per-item scores from ``K`` samples each, with the variance split for planning.

    Attributes
    ----------
    value, ci_low, ci_high, se : float
        ``mean(x̄)`` and its normal interval; ``se = sd(x̄) / sqrt(n)`` (times the FPC when ``N`` is
        given, applied to the between-item part only).
    n, k : int
        Items and samples per item.
    var_items : float
        ``Var(x)``, the variance of the items' true means: ``s²(x̄) - mean(s2_i) / K``, floored at 0.
    mean_within : float
        ``E[σ²]``, the mean within-item variance.
    confidence : float
    """

    value: float
    ci_low: float
    ci_high: float
    se: float
    n: int
    k: int
    var_items: float
    mean_within: float
    confidence: float = 0.95

    def se_for(self, n_items, k_samples) -> np.ndarray:
        """Planning SE ``sqrt((Var(x) + E[σ²] / K) / n)`` for other ``n`` and ``K`` (vectorised)."""
        n = np.asarray(n_items, dtype=np.float64)
        k = np.asarray(k_samples, dtype=np.float64)
        return np.sqrt((self.var_items + self.mean_within / k) / n)


def repeated_samples_estimate(
    scores,
    k: int,
    *,
    within_variance=None,
    n_population: int | None = None,
    confidence: float = 0.95,
) -> RepeatedSamplesEstimate:
    """Full-benchmark mean from per-item mean scores over ``K`` samples each.

    Parameters
    ----------
    scores : array_like, shape (n,)
        Per-item mean score ``x̄_i`` in [0, 1] over the item's ``K`` samples.
    k : int
        Samples per item, ``K >= 1``.
    within_variance : array_like, shape (n,), optional
        Per-item sample variance ``s2_i`` of the ``K`` samples. Default for 0/1 samples:
        ``K / (K - 1) x̄ (1 - x̄)`` (0 when ``K = 1``).
    n_population : int, optional
        ``N`` when the ``n`` items are a random subset of the benchmark.
    confidence : float

    Returns
    -------
    RepeatedSamplesEstimate

    Notes
    -----
    Miller, "Adding Error Bars to Evals" (2024), eq. for resampling:
    ``Var(mean) = (Var(x) + E[σ²] / K) / n``. The observed ``x̄_i`` already carry the ``K`` term,
    so the plug-in SE is ``sd(x̄) / sqrt(n)``; with ``N`` the between-item part gets the FPC:
    ``SE² = (1 - n/N) Var(x) / n + E[σ²] / (K n)``.
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 1:
        raise ValueError("scores: expected a non-empty 1-d array of per-item scores in [0, 1]")
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k: expected a positive number of samples per item, got {k}")
    k = int(k)
    n = x.shape[0]
    if within_variance is None:
        s2 = x * (1.0 - x) * (k / (k - 1)) if k > 1 else np.zeros(n)
    else:
        s2 = np.asarray(within_variance, dtype=np.float64)
        if s2.shape != x.shape or np.any(s2 < 0):
            raise ValueError("within_variance: expected one non-negative variance per item")
    mean_within = float(s2.mean())
    var_xbar = float(x.var(ddof=1)) if n > 1 else 0.0
    var_items = max(0.0, var_xbar - mean_within / k)
    if n_population is None:
        var = var_xbar / n
    else:
        var = (1.0 - n / n_population) * var_items / n + mean_within / (k * n)
        if n_population < n:
            raise ValueError("n_population: smaller than the number of items")
    se = float(np.sqrt(max(var, 0.0)))
    z = _z(confidence)
    value = float(x.mean())
    return RepeatedSamplesEstimate(
        value=value,
        ci_low=max(0.0, value - z * se),
        ci_high=min(1.0, value + z * se),
        se=se,
        n=n,
        k=k,
        var_items=var_items,
        mean_within=mean_within,
        confidence=confidence,
    )


__all__ = [
    "MIN_DISCORDANT",
    "PairedOutcomes",
    "RepeatedSamplesEstimate",
    "clustered_se",
    "compare_to_baseline",
    "dirichlet_p_better",
    "fpc",
    "mcnemar_exact",
    "mcnemar_exact_counts",
    "normal_paired_comparison",
    "paired_bootstrap",
    "paired_outcomes",
    "repeated_samples_estimate",
    "score_subset",
    "wilson_bounds",
    "wilson_center_half",
    "wilson_interval",
]
