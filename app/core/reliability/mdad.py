"""Minimum detectable ability difference (MDAD): paper mode (spec §4.2) and robust mode.

Paper mode reproduces the reference ``mdad.calculate_mdad`` exactly, including its quirks: the first
0.5-point bin whose mean agreement reaches the threshold, no monotonicity, the 0.5 sentinel, the
symmetric CI and the re-floored bin lookup. Robust mode fixes what the reference lacks (monotone
curve, merged sparse bins, explicit ties, "not reached" as ``None``, CI from a bootstrap over runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from app.core.reliability.agreement import (
    BINS_PER_UNIT,
    kendall_tau_b,
    pair_differences,
    paper_agree,
    paper_bin_ids,
    refloor_bin_ids,
    robust_run_counts,
)
from app.core.reliability.protocol import method_code
from app.core.results import AgreementCurve, MDADResult, ProtocolResult

PAPER_SENTINEL = 0.5
DEFAULT_THRESHOLD = 0.8
_BOOT_KEY = 0x4D444144  # "MDAD": spawn-key prefix of the bootstrap generators
_SPLITS = ("seen", "unseen", "full")
_MODES = ("paper", "robust")


# -- paper mode ------------------------------------------------------------------------------------
def mdad_paper(
    n_pairs: np.ndarray,
    n_agree: np.ndarray,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    n_boot: int = 1000,
    rng: np.random.Generator,
) -> tuple[float, float, float, bool]:
    """The reference MDAD of one cell from its pooled (bin, agree) counts (§4.2).

    Parameters
    ----------
    n_pairs, n_agree : ndarray of int, shape (n_bins,)
        Pooled pairs and agreeing pairs per bin id ``k`` (key ``k / 200``), from
        :func:`app.core.reliability.agreement.paper_cell_counts`.
    threshold : float
        Agreement level (reference: 0.8).
    n_boot : int
        Bootstrap resamples per bin (reference: 1000).
    rng : numpy.random.Generator

    Returns
    -------
    mdad, ci_low, ci_high : float
        Accuracy units. ``mdad`` is 0.5 (the sentinel) when no bin reaches the threshold.
    reached : bool

    Notes
    -----
    For each distinct bin key ``b = k / 200`` in ascending order, the reference looks the bin up
    under the re-floored key ``floor(b * 200) / 200`` (which is the preceding bin for
    k in {29, 57, 58, 113, 114, 115, 116}: that bin is then visited twice, with a fresh bootstrap,
    and its own data is never used). For the looked-up bin of size ``m`` with ``a`` agreeing
    pairs: mean ``a / m``; percentile bootstrap with ``B`` resamples of size ``m``; ``l``/``u`` the
    2.5 %/97.5 % quantiles (linear interpolation) of the resampled means.

    Because agree is 0/1, the mean of ``m`` draws with replacement is distributed exactly as
    ``Binomial(m, a / m) / m``, so the ``B x n_bins`` resampled means are drawn in one call as
    ``rng.binomial(m, a / m, size=(B, n_bins)) / m`` instead of ``B`` index resamples per bin.

    * MDAD = the looked-up key of the first visited bin with mean ``>= threshold``, else 0.5;
    * ``b_u`` = first key with ``u >= threshold`` (lower end), ``b_l`` = first key with
      ``l >= threshold`` (upper end), each 0.5 by default;
    * ``half = max(MDAD - b_u, b_l - MDAD)``, CI = ``[MDAD - half, MDAD + half]``.

    A looked-up bin with no pairs has an undefined mean and never qualifies.
    """
    n_pairs = np.asarray(n_pairs, dtype=np.int64)
    n_agree = np.asarray(n_agree, dtype=np.int64)
    entries = np.flatnonzero(n_pairs > 0)
    if entries.size == 0:
        return PAPER_SENTINEL, PAPER_SENTINEL, PAPER_SENTINEL, False
    looked_up = refloor_bin_ids(entries)
    keys = np.floor((entries / BINS_PER_UNIT) * BINS_PER_UNIT) / BINS_PER_UNIT
    m = n_pairs[looked_up]
    a = n_agree[looked_up]
    has = m > 0
    m_safe = np.where(has, m, 1)
    mean = np.where(has, a / m_safe, np.nan)
    p = np.where(has, a / m_safe, 0.0)
    boot = rng.binomial(np.where(has, m, 0), p, size=(n_boot, entries.size)) / m_safe
    boot[:, ~has] = np.nan
    lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)

    def first(mask: np.ndarray) -> float:
        idx = np.flatnonzero(mask)
        return float(keys[idx[0]]) if idx.size else PAPER_SENTINEL

    with np.errstate(invalid="ignore"):
        reached_mask = mean >= threshold
        mdad = first(reached_mask)
        b_u = first(hi >= threshold)
        b_l = first(lo >= threshold)
    half = max(mdad - b_u, b_l - mdad)
    return mdad, mdad - half, mdad + half, bool(reached_mask.any())


# -- robust mode -----------------------------------------------------------------------------------
def isotonic_increasing(
    sums: np.ndarray, weights: np.ndarray, *, chunk: int = 4_000_000
) -> np.ndarray:
    """Weighted increasing isotonic regression, vectorised over leading axes (max-min formula).

    Parameters
    ----------
    sums : ndarray, shape (..., G)
        Weighted sums ``w_g * y_g`` (here: agreeing pairs per bin).
    weights : ndarray, shape (..., G)
        Non-negative weights (pairs per bin).
    chunk : int
        Soft cap on ``batch * G * G`` elements processed at once.

    Returns
    -------
    ndarray of float64, shape (..., G)
        ``fit_g = max_{i <= g} min_{j >= g} Av(i, j)`` with ``Av(i, j)`` the weighted mean of
        ``y`` over ``i..j``; ranges of zero total weight are ignored, so a zero-weight point takes
        the value the formula gives it (NaN if every range through it is empty).

    Notes
    -----
    The max-min representation of the isotonic (least-squares, weighted) regression is exact
    (Robertson, Wright & Dykstra, *Order Restricted Statistical Inference*, 1988, Thm 1.4.4); it
    costs O(G^2) per curve but has no data-dependent control flow, so a whole bootstrap batch is
    one array computation. Equal to :func:`scipy.optimize.isotonic_regression` on positive weights.
    """
    sums = np.asarray(sums, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    lead = sums.shape[:-1]
    g = sums.shape[-1]
    s2 = sums.reshape(-1, g)
    w2 = weights.reshape(-1, g)
    out = np.empty_like(s2)
    cs = np.concatenate([np.zeros((s2.shape[0], 1)), np.cumsum(s2, axis=1)], axis=1)
    cw = np.concatenate([np.zeros((w2.shape[0], 1)), np.cumsum(w2, axis=1)], axis=1)
    upper = np.triu(np.ones((g, g), dtype=bool))  # [i, j]: j >= i
    step = max(1, chunk // max(1, g * g))
    for start in range(0, s2.shape[0], step):  # memory chunks, not a loop over resamples' logic
        sl = slice(start, start + step)
        num = cs[sl, None, 1:] - cs[sl, :-1, None]  # [b, i, j] = sum over i..j
        den = cw[sl, None, 1:] - cw[sl, :-1, None]
        valid = upper & (den > 1e-12)
        av = np.full(num.shape, np.nan)
        np.divide(num, den, out=av, where=valid)
        # S[b, i, g] = min_{j >= g} Av(i, j)   (NaN ranges ignored)
        suffix_min = np.fmin.accumulate(av[..., ::-1], axis=-1)[..., ::-1]
        suffix_min = np.where(upper, suffix_min, np.nan)  # keep i <= g
        out[sl] = np.fmax.reduce(suffix_min, axis=1)
    return out.reshape((*lead, g))


def merge_sparse_bins(n_pairs: np.ndarray, min_pairs: int) -> np.ndarray:
    """Start indices of groups of consecutive bins holding at least ``min_pairs`` pairs each.

    Bins are accumulated from the smallest gap upwards until the group holds ``min_pairs`` pairs;
    a final group short of ``min_pairs`` is merged into the previous one. Empty bins join their
    group. Returns the first bin index of each group (for ``np.add.reduceat``).
    """
    starts = [0]
    acc = 0
    for k, c in enumerate(np.asarray(n_pairs)):  # loop over <= 201 bins
        acc += int(c)
        if acc >= min_pairs and k + 1 < len(n_pairs):
            starts.append(k + 1)
            acc = 0
    if len(starts) > 1 and int(np.asarray(n_pairs)[starts[-1] :].sum()) < min_pairs:
        starts.pop()
    return np.asarray(starts, dtype=np.int64)


def _first_gap(fitted: np.ndarray, gaps: np.ndarray, threshold: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        ok = fitted >= threshold
    any_ok = ok.any(axis=-1)
    idx = np.argmax(ok, axis=-1)
    return np.where(any_ok, gaps[idx], np.inf)


def isotonic_reaches(sums: np.ndarray, weights: np.ndarray, threshold: float) -> np.ndarray:
    """Whether the increasing isotonic fit is ``>= threshold`` at each point, in O(G).

    Parameters
    ----------
    sums, weights : ndarray, shape (..., G)
        Count data (a zero weight implies a zero sum).
    threshold : float

    Returns
    -------
    ndarray of bool, shape (..., G)

    Notes
    -----
    With ``S(j) = sum_{h <= j} (sums_h - threshold * weights_h)`` and ``S(-1) = 0``, the max-min
    formula gives ``fit_g >= t  <=>  max_{i <= g} min_{j >= g} (S(j) - S(i - 1)) >= 0
    <=>  min_{j >= g} S(j) >= min_{i <= g} S(i - 1)``: a suffix minimum against a prefix
    minimum, two ``accumulate`` calls for a whole batch of curves. A 1e-9 relative tolerance
    absorbs float rounding when a group's mean equals the threshold exactly.
    """
    sums = np.asarray(sums, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    s = np.cumsum(sums - threshold * weights, axis=-1)
    s_prev = np.concatenate([np.zeros((*s.shape[:-1], 1)), s[..., :-1]], axis=-1)
    suffix_min = np.minimum.accumulate(s[..., ::-1], axis=-1)[..., ::-1]
    prefix_min = np.minimum.accumulate(s_prev, axis=-1)
    tol = 1e-9 * (1.0 + weights.sum(axis=-1, keepdims=True))
    return suffix_min - prefix_min >= -tol


def mdad_robust(
    run_pairs: np.ndarray,
    run_same: np.ndarray,
    run_tie: np.ndarray,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_pairs: int = 100,
    n_boot: int = 1000,
    rng: np.random.Generator,
    bins_per_unit: int = BINS_PER_UNIT,
    max_gap: float | None = None,
    n_band: int = 200,
) -> tuple[float | None, float | None, float | None, AgreementCurve]:
    """Robust MDAD from per-run, per-bin counts.

    Parameters
    ----------
    run_pairs, run_same, run_tie : ndarray of int, shape (runs, n_bins)
        From :func:`app.core.reliability.agreement.robust_run_counts` (pairs with a zero true gap excluded).
    threshold : float
        Required probability of the same order.
    min_pairs : int
        Consecutive bins are merged until each group holds at least this many pooled pairs.
    n_boot : int
        Bootstrap resamples of runs.
    rng : numpy.random.Generator
    bins_per_unit : int
    max_gap : float, optional
        Largest absolute gap observed (reported in the curve).
    n_band : int
        Resamples (the first ``n_band`` of the ``n_boot``) used for the curve's pointwise band,
        which needs the full O(G^2) isotonic fit; the MDAD CI uses all ``n_boot`` through the
        O(G) criterion of :func:`isotonic_reaches`.

    Returns
    -------
    mdad : float or None
        Lower gap edge of the first group whose isotonic P(same order) is ``>= threshold``;
        ``None`` when never reached (then see ``curve.max_gap``).
    ci_low, ci_high : float or None
        2.5 % / 97.5 % quantiles (``inverted_cdf``, i.e. actual group edges) of the MDAD over
        bootstrap resamples of runs; ``None`` where the quantile falls on "not reached".
    curve : AgreementCurve
        ``p_same``/``p_tie``/``p_reversed`` raw proportions per group, ``fitted`` the isotonic
        P(same order), ``band_low``/``band_high`` its pointwise 95 % runs-bootstrap band.

    Notes
    -----
    Definitions. For a pair with true gap ``Δ ≠ 0`` and estimated gap ``Δ̂``: *same order* if
    ``sign(Δ̂) = sign(Δ)``, *tie* if ``Δ̂ = 0``, *reversed* otherwise. P(same order | gap) is
    estimated per group of bins as the pooled proportion, then made non-decreasing in the gap by
    weighted isotonic regression (weights = pairs per group). Runs, not pairs, are the independent
    unit (pairs within a run share targets and a split), so the CI resamples runs with
    replacement: multinomial run weights ``W`` (``B x runs``) give every resample's pooled counts as
    ``W @ counts`` in one product, and :func:`isotonic_reaches` locates every resample's MDAD at
    once (no loop over resamples).
    """
    run_pairs = np.asarray(run_pairs, dtype=np.float64)
    run_same = np.asarray(run_same, dtype=np.float64)
    run_tie = np.asarray(run_tie, dtype=np.float64)
    runs, n_bins = run_pairs.shape
    pooled = run_pairs.sum(axis=0)
    starts = merge_sparse_bins(pooled, min_pairs)
    ends = np.append(starts[1:], n_bins)
    gaps = starts / bins_per_unit
    gap_upper = ends / bins_per_unit
    gp = np.add.reduceat(run_pairs, starts, axis=1)
    gs = np.add.reduceat(run_same, starts, axis=1)
    gt = np.add.reduceat(run_tie, starts, axis=1)
    tp, ts, tt = gp.sum(axis=0), gs.sum(axis=0), gt.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_same = ts / tp
        p_tie = tt / tp
    fitted = isotonic_increasing(ts, tp)
    mdad = float(_first_gap(fitted, gaps, threshold))

    # run weights of B resamples with replacement: counts of `runs` uniform draws (multinomial)
    draws = rng.integers(0, runs, size=(n_boot, runs)) + runs * np.arange(n_boot)[:, None]
    weights = (
        np.bincount(draws.ravel(), minlength=n_boot * runs).reshape(n_boot, runs).astype(float)
    )
    boot_same, boot_pairs = weights @ gs, weights @ gp
    ok = isotonic_reaches(boot_same, boot_pairs, threshold)
    boot_mdad = np.where(ok.any(axis=-1), gaps[np.argmax(ok, axis=-1)], np.inf)
    q_lo, q_hi = np.quantile(boot_mdad, [0.025, 0.975], method="inverted_cdf")
    n_band = min(n_boot, n_band)
    with np.errstate(invalid="ignore"):
        band_fit = isotonic_increasing(boot_same[:n_band], boot_pairs[:n_band])
        quantile = np.nanquantile if np.isnan(band_fit).any() else np.quantile
        band_low, band_high = quantile(band_fit, [0.025, 0.975], axis=0)
    curve = AgreementCurve(
        gaps=gaps,
        gap_upper=gap_upper,
        n_pairs=tp,
        p_same=p_same,
        p_tie=p_tie,
        p_reversed=1.0 - p_same - p_tie,
        fitted=fitted,
        band_low=band_low,
        band_high=band_high,
        kind="robust",
        max_gap=float(max_gap if max_gap is not None else gap_upper[-1]),
    )

    def finite(v: float) -> float | None:
        return float(v) if np.isfinite(v) else None

    return finite(mdad), finite(q_lo), finite(q_hi), curve


# -- protocol analysis -----------------------------------------------------------------------------
def bootstrap_seed_sequence(
    seed: int, method: str, n: int, split: str, mode: str
) -> np.random.SeedSequence:
    """Generator seed of one cell's bootstrap, derived from the protocol seed."""
    return np.random.SeedSequence(
        seed,
        spawn_key=(
            _BOOT_KEY,
            method_code(method),
            int(n),
            _SPLITS.index(split),
            _MODES.index(mode),
        ),
    )


def analyze_cell(
    estimates: np.ndarray,
    truth: np.ndarray,
    *,
    method: str,
    n: int,
    split: str,
    mode: str = "paper",
    threshold: float = DEFAULT_THRESHOLD,
    n_boot: int | None = None,
    min_pairs: int = 100,
    seed: int = 0,
) -> MDADResult:
    """MDAD, mean agreement, mean absolute error and Kendall tau-b of one cell.

    Parameters
    ----------
    estimates, truth : ndarray of float64, shape (runs, T)
        The cell's estimates and the split's true accuracies of the same targets.
    method, n, split : str, int, str
        Cell identity (``split`` in {"seen", "unseen", "full"}).
    mode : {"paper", "robust"}
    threshold : float
    n_boot : int, optional
        Default 1000 in both modes.
    min_pairs : int
        Robust mode's bin-merging minimum.
    seed : int
        Protocol seed; the bootstrap generator is
        ``SeedSequence(seed, spawn_key=(0x4D444144, crc32(method), n, split, mode))``.

    Returns
    -------
    MDADResult
        ``mean_agreement`` is the mean of the paper's ``agree`` over all pooled pairs (§4.3) in
        both modes; ``mean_abs_error`` the mean over runs of mean |truth - estimate|;
        ``kendall_tau`` the mean over runs (NaN runs skipped) of tau-b.
    """
    if mode not in _MODES:
        raise ValueError(f"mode: expected 'paper' or 'robust', got {mode!r}")
    estimates = np.asarray(estimates, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if estimates.shape != truth.shape or estimates.ndim != 2:
        raise ValueError("estimates: expected the shape (runs, n_targets) of truth")
    n_boot = 1000 if n_boot is None else int(n_boot)
    rng = np.random.default_rng(bootstrap_seed_sequence(seed, method, n, split, mode))
    d_est = pair_differences(estimates)
    d_true = pair_differences(truth)
    agree = paper_agree(d_est, d_true)
    mean_agreement = float(agree.mean())
    max_gap = float(np.abs(d_true).max())
    mae = float(np.abs(truth - estimates).mean(axis=1).mean())
    taus = kendall_tau_b(truth, estimates)
    tau = float(np.nanmean(taus)) if np.isfinite(taus).any() else None
    if mode == "paper":
        k = paper_bin_ids(d_true).ravel()
        n_pairs = np.bincount(k)
        n_agree = np.bincount(k, weights=agree.ravel(), minlength=n_pairs.shape[0]).astype(np.int64)
        n_tie = np.bincount(k, weights=(d_est == 0).ravel(), minlength=n_pairs.shape[0])
        value, lo, hi, reached = mdad_paper(
            n_pairs, n_agree, threshold=threshold, n_boot=n_boot, rng=rng
        )
        present = n_pairs > 0
        bins = np.flatnonzero(present)
        p_same = n_agree[present] / n_pairs[present]
        p_tie = n_tie[present] / n_pairs[present]
        curve = AgreementCurve(
            gaps=bins / BINS_PER_UNIT,
            gap_upper=(bins + 1) / BINS_PER_UNIT,
            n_pairs=n_pairs[present],
            p_same=p_same,
            p_tie=p_tie,
            p_reversed=1.0 - p_same - p_tie,
            method=method,
            n=n,
            split=split,
            kind="paper",
            max_gap=max_gap,
        )
        mdad_value: float | None = value
    else:
        run_pairs, run_same, run_tie, _ = robust_run_counts(estimates, truth)
        mdad_value, lo, hi, curve = mdad_robust(
            run_pairs,
            run_same,
            run_tie,
            threshold=threshold,
            min_pairs=min_pairs,
            n_boot=n_boot,
            rng=rng,
            max_gap=max_gap,
        )
        curve = dataclasses.replace(curve, method=method, n=n, split=split)
        reached = mdad_value is not None
    return MDADResult(
        method=method,
        n=int(n),
        split=split,
        mode=mode,
        mdad=mdad_value,
        ci_low=lo,
        ci_high=hi,
        threshold=float(threshold),
        reached=bool(reached),
        max_gap=max_gap,
        mean_agreement=mean_agreement,
        mean_abs_error=mae,
        kendall_tau=tau,
        n_runs=int(truth.shape[0]),
        n_pairs=int(d_true.size),
        n_boot=n_boot,
        seed=int(seed),
        curve=curve,
    )


def analyze_protocol(
    result: ProtocolResult,
    *,
    mode: str = "paper",
    splits: Sequence[str] = ("seen", "unseen"),
    threshold: float = DEFAULT_THRESHOLD,
    n_boot: int | None = None,
    min_pairs: int = 100,
    seed: int | None = None,
) -> list[MDADResult]:
    """MDAD table of a protocol result: one :class:`MDADResult` per (method, n, split).

    Parameters
    ----------
    result : ProtocolResult
    mode : {"paper", "robust"}
    splits : sequence of {"seen", "unseen", "full"}
        Which accuracies define the "full-benchmark" order (the paper's figures use "seen").
    threshold, n_boot, min_pairs
        See :func:`analyze_cell`.
    seed : int, optional
        Bootstrap root seed; default the protocol's own seed.

    Returns
    -------
    list of MDADResult
        Ordered by method, then size, then split.
    """
    for split in splits:
        if split not in _SPLITS:
            raise ValueError(f"splits: unknown split {split!r}; choose from {_SPLITS}")
    root = result.seed if seed is None else int(seed)
    # The per-cell linear algebra is tiny (e.g. 1000 x 50 @ 50 x 40); multi-threaded BLAS only
    # adds synchronisation cost (~20x slower on a busy 2-core machine), so run it single-threaded.
    with threadpool_limits(limits=1, user_api="blas"):
        return _analyze_all(result, mode, splits, threshold, n_boot, min_pairs, root)


def _analyze_all(result, mode, splits, threshold, n_boot, min_pairs, root) -> list[MDADResult]:
    return [
        analyze_cell(
            result.cell(method, n),
            result.truth(split),
            method=method,
            n=n,
            split=split,
            mode=mode,
            threshold=threshold,
            n_boot=n_boot,
            min_pairs=min_pairs,
            seed=root,
        )
        for method in result.methods
        for n in result.sizes
        for split in splits
    ]


__all__ = [
    "PAPER_SENTINEL",
    "analyze_cell",
    "analyze_protocol",
    "bootstrap_seed_sequence",
    "isotonic_increasing",
    "isotonic_reaches",
    "mdad_paper",
    "mdad_robust",
    "merge_sparse_bins",
]
