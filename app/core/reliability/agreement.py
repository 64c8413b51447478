"""Pairwise agreement between micro-benchmark estimates and full-benchmark accuracies (spec §4.1).

All functions are vectorised over a leading "runs" axis and over the ``C(T, 2)`` unordered target
pairs, enumerated in ``np.triu_indices(T, 1)`` order (the reference's fixed index order).
"""

from __future__ import annotations

import numpy as np

BINS_PER_UNIT = 200  # 0.5 accuracy-point bins
_ROBUST_EPS = 1e-9


def pair_differences(values: np.ndarray) -> np.ndarray:
    """Differences ``v[..., i] - v[..., j]`` over all pairs ``i < j`` of the last axis.

    Parameters
    ----------
    values : ndarray, shape (..., T)

    Returns
    -------
    ndarray, shape (..., T * (T - 1) / 2)
        In ``np.triu_indices(T, 1)`` order.
    """
    values = np.asarray(values, dtype=np.float64)
    i, j = np.triu_indices(values.shape[-1], 1)
    return values[..., i] - values[..., j]


def paper_agree(d_est: np.ndarray, d_true: np.ndarray) -> np.ndarray:
    """The reference's agreement indicator (§4.1).

    ``agree = copysign(1, d_est) == copysign(1, d_true)`` and ``d_est != 0``: a tied estimate is
    a disagreement, and a true difference of exactly 0.0 counts as positive (so agreement then
    means ``d_est > 0``).

    Parameters
    ----------
    d_est, d_true : ndarray of float64, same shape

    Returns
    -------
    ndarray of bool
    """
    return (np.copysign(1.0, d_est) == np.copysign(1.0, d_true)) & (d_est != 0)


def paper_bin_ids(d_true: np.ndarray) -> np.ndarray:
    """Integer bin id ``k`` of the reference's key ``floor(|d| * 200) / 200`` (exactly its floats).

    Parameters
    ----------
    d_true : ndarray of float64

    Returns
    -------
    ndarray of int64
        ``np.floor(np.abs(d) * 200)``; the float key is ``k / 200``.
    """
    return np.floor(np.abs(d_true) * BINS_PER_UNIT).astype(np.int64)


def refloor_bin_ids(k: np.ndarray) -> np.ndarray:
    """The reference MDAD's re-floored lookup key ``floor((k / 200) * 200)`` as an int (§4.2.5).

    ``k / 200 * 200`` rounds below ``k`` for k in {29, 57, 58, 113, 114, 115, 116}, so those bins
    are looked up as their predecessor.
    """
    k = np.asarray(k, dtype=np.int64)
    return np.floor((k / BINS_PER_UNIT) * BINS_PER_UNIT).astype(np.int64)


def robust_bin_ids(d_true: np.ndarray, bins_per_unit: int = BINS_PER_UNIT) -> np.ndarray:
    """``floor(|d| * bins_per_unit)`` with a 1e-9 guard against float round-down at bin edges."""
    return np.floor(np.abs(d_true) * bins_per_unit + _ROBUST_EPS).astype(np.int64)


def paper_cell_counts(
    estimates: np.ndarray, truth: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Pool the paper's (bin, agree) pairs of one cell over runs with ``np.bincount``.

    Parameters
    ----------
    estimates, truth : ndarray of float64, shape (runs, T)

    Returns
    -------
    n_pairs : ndarray of int64, shape (n_bins,)
        Pairs per bin id ``k`` (bin key ``k / 200``).
    n_agree : ndarray of int64, shape (n_bins,)
    mean_agreement : float
        Mean of ``agree`` over all pooled pairs (§4.3).
    """
    d_est = pair_differences(estimates)
    d_true = pair_differences(truth)
    agree = paper_agree(d_est, d_true).ravel()
    k = paper_bin_ids(d_true).ravel()
    n_pairs = np.bincount(k)
    n_agree = np.bincount(k, weights=agree, minlength=n_pairs.shape[0]).astype(np.int64)
    return n_pairs, n_agree, float(agree.mean())


def robust_run_counts(
    estimates: np.ndarray, truth: np.ndarray, *, bins_per_unit: int = BINS_PER_UNIT
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per-run, per-bin counts of same / tied / reversed estimated orders.

    Parameters
    ----------
    estimates, truth : ndarray of float64, shape (runs, T)
    bins_per_unit : int
        Bins per accuracy unit (200: 0.5-point bins).

    Returns
    -------
    n_pairs, n_same, n_tie : ndarray of int64, shape (runs, n_bins)
        Pairs whose true gap is nonzero, by bin ``floor(|Δ_true| * bins_per_unit)``; pairs whose
        estimated difference has the same sign as the true one; pairs with ``Δ_est == 0``.
        Reversed = ``n_pairs - n_same - n_tie``.
    n_zero_gap : int
        Pairs with ``Δ_true == 0`` (no true order), excluded from the counts.
    """
    d_est = pair_differences(estimates)
    d_true = pair_differences(truth)
    runs = d_true.shape[0]
    valid = d_true != 0
    k = robust_bin_ids(d_true, bins_per_unit)
    n_bins = int(k[valid].max()) + 1 if valid.any() else 1
    flat = (np.arange(runs)[:, None] * n_bins + k)[valid]
    same = (np.sign(d_est) == np.sign(d_true))[valid]
    tie = (d_est == 0)[valid]
    size = runs * n_bins
    n_pairs = np.bincount(flat, minlength=size).reshape(runs, n_bins)
    n_same = np.bincount(flat, weights=same, minlength=size).reshape(runs, n_bins).astype(np.int64)
    n_tie = np.bincount(flat, weights=tie, minlength=size).reshape(runs, n_bins).astype(np.int64)
    return n_pairs, n_same, n_tie, int((~valid).sum())


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b along the last axis, vectorised over leading axes.

    Parameters
    ----------
    x, y : ndarray, shape (..., T)

    Returns
    -------
    ndarray of float64, shape (...)
        ``tau_b = sum_{i<j} sgn(x_i - x_j) sgn(y_i - y_j) / sqrt((P - T_x)(P - T_y))`` with ``P``
        pairs and ``T_x``/``T_y`` pairs tied in ``x``/``y``; NaN when either variable is constant
        (as :func:`scipy.stats.kendalltau`).
    """
    dx = np.sign(pair_differences(x))
    dy = np.sign(pair_differences(y))
    num = (dx * dy).sum(axis=-1)
    den = np.sqrt(np.count_nonzero(dx, axis=-1).astype(np.float64) * np.count_nonzero(dy, axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


__all__ = [
    "BINS_PER_UNIT",
    "kendall_tau_b",
    "pair_differences",
    "paper_agree",
    "paper_bin_ids",
    "paper_cell_counts",
    "refloor_bin_ids",
    "robust_bin_ids",
    "robust_run_counts",
]
