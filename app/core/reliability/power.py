"""Paired sample size for a significance test of a gap (the planner's significance answer).

Statistics-next §4: ``n = (z_{1-alpha/2} + z_{1-beta})^2 omega^2 / delta^2`` with
``omega^2 = Var(d_i)`` of the paired differences; for 0/1 results
``omega^2 = p10 + p01 - (p10 - p01)^2``. This answers "how many shared items does a paired test
need to detect a gap ``delta`` at level ``alpha`` with power ``1 - beta``" — a different question
from the MDAD planner's "how many items order the pair correctly with probability p", and labelled
so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

KIND = "paired_significance"


def discordance_variance(p10, p01) -> np.ndarray:
    """``omega^2 = p10 + p01 - (p10 - p01)^2``: variance of ``d = y_A - y_B`` for 0/1 results."""
    a = np.asarray(p10, dtype=np.float64)
    b = np.asarray(p01, dtype=np.float64)
    if np.any(a < 0) or np.any(b < 0) or np.any(a + b > 1 + 1e-12):
        raise ValueError("p10: discordance rates must be >= 0 with p10 + p01 <= 1")
    return a + b - (a - b) ** 2


def paired_sample_size(
    delta, omega2, *, alpha: float = 0.05, power: float = 0.8, n_population: int | None = None
) -> np.ndarray:
    """Shared items a two-sided paired z-test needs to detect a gap ``delta`` (vectorised).

    Parameters
    ----------
    delta : array_like
        The gap to detect, ``|delta| > 0`` (accuracy points as a fraction).
    omega2 : array_like
        ``Var(d_i)`` of the paired per-item differences.
    alpha : float
        Two-sided level.
    power : float
        ``1 - beta``.
    n_population : int, optional
        ``N``: items are drawn without replacement from the benchmark, so
        ``n_N = n / (1 + (n - 1) / N)`` (capped at ``N``).

    Returns
    -------
    ndarray of int
        ``ceil((z_{1-alpha/2} + z_{1-beta})^2 omega^2 / delta^2)``, at least 1.

    References
    ----------
    Connor, "Sample size for testing differences in proportions for the paired-sample design",
    Biometrics 43 (1987); Miller, "Adding Error Bars to Evals" (2024), §power.
    """
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError("alpha: alpha and power must lie in (0, 1)")
    d = np.abs(np.asarray(delta, dtype=np.float64))
    w2 = np.asarray(omega2, dtype=np.float64)
    if np.any(d <= 0) or np.any(w2 < 0):
        raise ValueError("delta: expected a positive gap and a non-negative variance")
    z = _st.norm.ppf(1.0 - alpha / 2.0) + _st.norm.ppf(power)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        n = np.where(w2 == 0, 0.0, z * z * w2 / (d * d))  # a gap below 1e-154 overflows to inf
    if n_population is not None:
        with np.errstate(invalid="ignore"):
            n = np.where(np.isfinite(n), n / (1.0 + (n - 1.0) / n_population), n_population)
        n = np.minimum(n, n_population)
    n = np.minimum(n, 2.0**62)  # no population: an unreachable gap stays a huge finite count
    return np.maximum(1, np.ceil(n - 1e-9)).astype(np.int64)


@dataclass(frozen=True)
class PowerAnswer:
    """The significance answer of the planner (label :data:`KIND`).

    Attributes
    ----------
    kind : str
        ``"paired_significance"``.
    n : int
        Shared items needed.
    delta, omega2, alpha, power : float
    source : str
        ``"pair"`` (the pair's observed discordance) or ``"benchmark_typical"``.
    """

    kind: str
    n: int
    delta: float
    omega2: float
    alpha: float
    power: float
    source: str


def pair_power(
    correct_a,
    correct_b,
    *,
    delta: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    n_population: int | None = None,
) -> PowerAnswer:
    """Paired sample size from a pair's observed discordance on shared items.

    ``delta`` defaults to the observed gap ``p10 - p01`` (``ValueError`` when it is 0).
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("correct_b: expected a non-empty 1-d array aligned with correct_a")
    p10, p01 = float(np.mean(a & ~b)), float(np.mean(~a & b))
    gap = p10 - p01 if delta is None else float(delta)
    if gap == 0:
        raise ValueError("delta: the pair shows no gap; give the gap to detect")
    w2 = float(discordance_variance(p10, p01))
    n = int(paired_sample_size(gap, w2, alpha=alpha, power=power, n_population=n_population))
    return PowerAnswer(KIND, n, abs(gap), w2, alpha, power, "pair")


def typical_discordance(correct, *, quantile: float = 0.5) -> float:
    """A benchmark's typical ``omega^2`` over all model pairs (vectorised, two matrix products).

    Parameters
    ----------
    correct : array_like of {0, 1}, shape (n_models, N)
    quantile : float
        Which quantile of the pairs' ``omega^2`` (median by default).

    Notes
    -----
    ``n10 = Y (1 - Y)^T``, ``n01 = n10^T``; ``omega^2 = p10 + p01 - (p10 - p01)^2`` per pair.
    """
    y = np.asarray(correct, dtype=np.float32)
    if y.ndim != 2 or y.shape[0] < 2:
        raise ValueError("correct: expected at least two models' results")
    n10 = y @ (1.0 - y).T / y.shape[1]
    iu = np.triu_indices(y.shape[0], k=1)
    p10, p01 = n10[iu].astype(np.float64), n10.T[iu].astype(np.float64)
    return float(np.quantile(discordance_variance(p10, p01), quantile))


def benchmark_power(
    correct,
    delta: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    quantile: float = 0.5,
) -> PowerAnswer:
    """Paired sample size for gap ``delta`` at the benchmark's typical discordance."""
    w2 = typical_discordance(correct, quantile=quantile)
    big_n = int(np.shape(correct)[1])
    n = int(paired_sample_size(delta, w2, alpha=alpha, power=power, n_population=big_n))
    return PowerAnswer(KIND, n, abs(float(delta)), w2, alpha, power, "benchmark_typical")


SAMPLE_COUNTS = (1, 2, 4, 8, 16)  # samples per item K' a plan tabulates (plus the stored K)


@dataclass(frozen=True)
class SamplesPlan:
    """Items x samples a paired test needs, from the split of ``Var(d_i)`` (statistics-next §9).

    Attributes
    ----------
    k : int
        Samples per item the pair was scored with.
    var_between : float
        Between-item ("data noise": which items) variance of the true per-item differences,
        ``max(0, Var(d) - mean(sampling variance of d_i))``.
    within : float
        ``E[s2_a + s2_b]``: the within-item ("prediction noise": which samples) variance of one
        sample's difference, divided by ``K'`` in ``omega2(K')``.
    observed : float
        ``Var(d)`` of the observed per-item differences of means (``ddof = 0``, as the
        significance answer).
    floored : bool
        The sampling variance exceeded ``Var(d)``: ``var_between`` was floored at 0.
    limit_k : int or None
        Smallest ``K'`` with ``within / K' <= var_between``: beyond it the items, not the
        samples, limit the detectable gap (None when ``var_between`` is 0).
    ks, n, total, omega2 : ndarray
        Per ``K'``: items ``n(K')`` (items, not samples), samples per model ``n(K') K'``, and
        ``omega2(K') = var_between + within / K'``.
    """

    k: int
    var_between: float
    within: float
    observed: float
    floored: bool
    limit_k: int | None
    ks: np.ndarray
    n: np.ndarray
    total: np.ndarray
    omega2: np.ndarray


def bernoulli_within(means, k) -> np.ndarray:
    """``K/(K-1) x(1-x)``: the unbiased sample variance of ``K`` 0/1 samples with mean ``x``.

    ``k`` is one count or one per item; items with fewer than two samples get 0. For samples
    in [0, 1] that are not 0/1 it is an upper bound (``Var <= mu(1 - mu)``).
    """
    x = np.asarray(means, dtype=np.float64)
    c = np.broadcast_to(np.asarray(k, dtype=np.float64), x.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c >= 2, x * (1.0 - x) * c / (c - 1.0), 0.0)


def samples_plan(
    d,
    within,
    k: int,
    delta: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    n_population: int | None = None,
    sampling_variance=None,
    ks=SAMPLE_COUNTS,
) -> SamplesPlan:
    """Split a pair's ``Var(d_i)`` into data and prediction noise; items needed per ``K'``.

    Parameters
    ----------
    d : array_like, shape (n,)
        Per-item differences of the two models' item means, each over ``K`` samples.
    within : array_like, shape (n,)
        Per item ``s2_a + s2_b``: the sum of the two models' within-item sample variances (of
        one sample, not of the mean).
    k : int
        Samples per item behind ``d`` (``K >= 1``).
    delta : float
        The gap to detect.
    alpha, power : float
        As :func:`paired_sample_size`.
    n_population : int, optional
        ``N`` for the finite-population correction of the item count.
    sampling_variance : array_like, shape (n,), optional
        Per item the variance of ``d_i`` due to sampling; default ``within / K`` (pass
        ``s2_a / K_a + s2_b / K_b`` when the models' sample counts differ).
    ks : sequence of int
        The ``K'`` to tabulate; the stored ``K`` is added.

    Returns
    -------
    SamplesPlan

    Notes
    -----
    ``Var(d_i) = Var(delta_i) + E[s2_a + s2_b] / K`` (Miller 2024, resampling; Wang 2025, data
    vs prediction noise): more samples per item shrink only the second term, so
    ``n(K') = paired_sample_size(delta, var_between + within / K')`` falls towards the
    ``K' -> inf`` floor set by ``var_between``. ``n`` counts items: ``K'`` samples of an item
    are one item.
    """
    dd = np.asarray(d, dtype=np.float64)
    w = np.asarray(within, dtype=np.float64)
    if dd.ndim != 1 or dd.size == 0 or w.shape != dd.shape or not np.all(np.isfinite(dd)):
        raise ValueError("within: expected non-empty 1-d arrays d and within of one length")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("within: expected non-negative within-item variances")
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k: expected a positive number of samples per item, got {k}")
    k = int(k)
    sv = w / k if sampling_variance is None else np.asarray(sampling_variance, np.float64)
    if sv.shape != dd.shape or np.any(sv < 0):
        raise ValueError("sampling_variance: expected one non-negative variance per item")
    observed = float(np.var(dd))
    raw = observed - float(sv.mean())
    var_between = max(0.0, raw)
    mean_within = float(w.mean())
    grid = np.array(sorted({int(x) for x in ks} | {k}), dtype=np.int64)
    omega2 = var_between + mean_within / grid
    n = paired_sample_size(delta, omega2, alpha=alpha, power=power, n_population=n_population)
    limit = int(np.ceil(mean_within / var_between - 1e-12)) if var_between > 0 else None
    return SamplesPlan(
        k=k,
        var_between=var_between,
        within=mean_within,
        observed=observed,
        floored=raw < 0,
        limit_k=None if limit is None else max(1, limit),
        ks=grid,
        n=n,
        total=n * grid,
        omega2=omega2,
    )


__all__ = [
    "KIND",
    "SAMPLE_COUNTS",
    "PowerAnswer",
    "SamplesPlan",
    "benchmark_power",
    "bernoulli_within",
    "discordance_variance",
    "pair_power",
    "paired_sample_size",
    "samples_plan",
    "typical_discordance",
]
