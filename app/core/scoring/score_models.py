"""Scoring a model known only on a subset: every estimate with an honest interval, and the
subset size needed to order a pair at an observed gap.

:func:`score_models` orchestrates the estimators of a subset, vectorised over scored models. It
builds on :mod:`app.core.estimation.weighted` (design-based weighted estimates: Kish, Horvitz-Thompson,
inclusion probabilities) and :mod:`app.core.scoring.reference` (reference-calibrated intervals
and the model-assisted estimator); their public names are re-exported here.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

from app.core.estimation.bounded import betting_interval
from app.core.estimation.estimate_batch import BASES, EstimateBatch, make_batch, unavailable_batch
from app.core.estimation.estimators import estimate as _core_estimate
from app.core.estimation.intervals import (
    SMALL_N_METHODS,
    ReferenceCalibration,
    beta_effective,
    difference_estimate,
    proportion_interval,
    reference_calibrated_interval,
)
from app.core.estimation.irt_estimates import item_bank
from app.core.estimation.stats import fpc
from app.core.estimation.weighted import (
    LINEAR_ESTIMATORS,
    PROBABILITY_DESIGNS,
    design_inclusion,
    kish_n_eff,
    kish_wilson_bounds,
    normal_quantile,
    weighted_estimate,
    weighted_paired_comparison,
    weighted_se,
)
from app.core.reliability.exact import order_probabilities
from app.core.results import Selection
from app.core.scoring.crossfit import reference_calibrations, stored_out_of_fold
from app.core.scoring.reference import (
    CALIBRATION_INFLATION,
    MIN_MODEL_ASSISTED_N,
    MIN_REFERENCE_MODELS,
    edge_hull,
    model_assisted,
    reference_estimates,
    reference_predictions,
    with_irt_hulls,
)
from app.core.selectors import SELECTORS

#: Default small-sample interval for unweighted 0/1 probability subsets (issue 24 coverage study:
#: Wilson's covered the weakest fifth 0.921-0.929 at n = 25 on the SYNTHETIC weak family).
DEFAULT_SMALL_N = "jeffreys_fpc"
# graded scores on uniform random subsets: app.core.estimation.bounded.betting_interval
GRADED_INTERVAL = "betting_fpc"
#: Fewer subset items right (or wrong) than this (0/1 results) and the stratified HT interval is
#: widened to contain Wilson's at Kish's size (issue 24; the "n p >= 5" rule of the normal
#: approximation).
SPARSE_STRATIFIED = 5


def size_needed_for_gap(
    n10: int, n01: int, n_shared: int, n_population: int, probability: float = 0.8
) -> int | None:
    """Smallest random-subset size ordering a pair correctly with ``probability``, extrapolated
    from the discordant counts observed on ``n_shared`` items.

    Parameters
    ----------
    n10, n01 : int
        Shared items only the leader / only the other model gets right.
    n_shared : int
        Items both were observed on.
    n_population : int
        ``N``, the benchmark's size.
    probability : float

    Returns
    -------
    int or None
        ``None`` when ``n10 == n01`` (no observed gap to detect). At most ``N`` (the full
        benchmark orders the pair by definition).

    Notes
    -----
    The pair's full-benchmark discordant counts are taken as ``round(N n10 / k)`` and
    ``round(N n01 / k)`` (the observed rates scaled to the benchmark); the exact multivariate
    hypergeometric P(same order) (:func:`app.core.reliability.exact.order_probabilities`) is evaluated on a
    geometric grid of sizes, then on every size between the first grid point reaching
    ``probability`` and its predecessor (as :func:`app.core.reliability.exact.smallest_n`).
    """
    if n_shared < 1 or n_population < n_shared:
        raise ValueError("n_shared: expected 1 <= n_shared <= n_population")
    if not 0 <= n10 <= n_shared or not 0 <= n01 <= n_shared or n10 + n01 > n_shared:
        raise ValueError("n10: discordant counts must fit in n_shared")
    hi, lo = max(n10, n01), min(n10, n01)
    if hi == lo:
        return None
    scale = n_population / n_shared
    h = min(n_population, round(hi * scale))
    lw = min(n_population - h, round(lo * scale))
    if h <= lw:
        return None
    grid = np.unique(np.geomspace(1, n_population, 48).round().astype(np.int64))
    p = order_probabilities(h, lw, n_population, grid).p_greater
    ok = np.flatnonzero(p >= probability)
    if ok.size == 0:  # pragma: no cover - n = N always orders the pair
        return n_population
    first = int(ok[0])
    low = 1 if first == 0 else int(grid[first - 1]) + 1
    cand = np.arange(low, int(grid[first]) + 1)
    p_c = order_probabilities(h, lw, n_population, cand).p_greater
    return int(cand[np.flatnonzero(p_c >= probability)[0]])


# -- every estimate of a subset, vectorised over scored models (issue 13) -------------------------


def _irt_delta(selection: Selection, y: np.ndarray, name: str, n_population: int) -> np.ndarray:
    """The service's delta-method SEs of p-IRT / gp-IRT (item parameters treated as known)."""
    f = selection.fitted
    bank = item_bank(selection)
    anchors = np.asarray(f["anchor_candidate_positions"], dtype=np.int64)
    ability = bank.score(y, anchors, prior=float(f["ability_prior"]))
    rest = np.setdiff1d(np.arange(bank.n_items), anchors, assume_unique=True)
    lam = anchors.size / bank.n_items
    se_rest = bank.predict_accuracy(ability, rest)[1] if rest.size else np.zeros(y.shape[0])
    p_se = (1.0 - lam) * se_rest
    if name == "p_irt":
        return p_se
    lin = weighted_se(y, selection.weights, n_population)
    lam_gp = float(f.get("lambda_gp", np.nan))
    return np.hypot(lam_gp * lin, (1.0 - lam_gp) * p_se)


# Cells of the coverage study (bench/RESULTS.md, "Interval coverage") that missed the 0.93 goal: the
# interval is still served, saying so.
MEASURED_CAVEATS: dict[tuple[str, str], str] = {
    ("anchor_points", "weighted_mean"): (
        "measured coverage of this 95 % interval on GPQA held-out models (20 splits): 0.947 at "
        "n = 50, but 0.927 among the lowest-accuracy 20 % of models (goal 0.93); for models "
        "stronger than every source model (sources: the weakest 80 %) 0.98-1.00 at n = 25-100 "
        "with the edge folds (0.91-0.97 without; bench/RESULTS.md, 'Edge folds'). Beyond the "
        "sources on SYNTHETIC benchmarks of other shapes (3 family seeds, near the sources' "
        "edge the interval also holds its copy centred on the raw value) the answer covers "
        "0.88-1.00: below 0.93 in 3 of 72 cells (0.88-0.93), all with accuracies spread from "
        "0 to 100 % for models stronger than every source (bench/RESULTS.md, 'Closing runs II')"
    ),
    **{
        ("dpp", est): (
            "measured coverage of this 95 % interval for GPQA models weaker than every source "
            "model (sources: the strongest 80 %): 0.99-1.00 at n = 25-100 now that near the "
            "sources' edge it also holds its copy centred on the raw value (0.88-0.98 before; "
            "in range >= 0.98, 4-7 % wider; bench/RESULTS.md, 'Closing runs II')"
        )
        for est in ("mean", "weighted_mean")
    },
    ("tiny_benchmarks", "p_irt"): (
        "measured coverage of this 95 % interval for GPQA models stronger than every source "
        "model (sources: the weakest 80 %): 0.69-0.81 at n = 25-100 over two seeds (edge "
        "folds lift it only to 0.77-0.89; bench/RESULTS.md, 'Edge folds'); in range >= 0.96. "
        "Beyond the sources read the subset's irt answer (>= 0.97 there)"
    ),
}


# The in-sample law (x CALIBRATION_INFLATION) is what a non-probability subset gets when it stores no
# out-of-fold values for its references (a fold refit failed, or a caller passed a bare selection).
IN_SAMPLE_GRADED_CAVEAT = (
    "calibrated on the source models in-sample (x1.1; the subset stores no out-of-fold values "
    "for them): on SYNTHETIC judge-like graded scores this law covered 0.89-0.94 among the "
    "strongest 20 % of models (goal 0.93), the cross-fitted one >= 0.955 (bench/RESULTS.md, "
    "'Reference-calibrated intervals in the top fifth of graded targets')"
)

# The graded coverage study's figures for tinyBenchmarks (bench/RESULTS.md, "Closing runs II"
# and "Closing runs III"), said on graded scores only (0/1 scores keep MEASURED_CAVEATS alone);
# each is replaced by the hull's note when the graded IRT hull applies (irt and gp_irt present).
GRADED_CAVEATS: dict[tuple[str, str], str] = {
    ("tiny_benchmarks", "irt"): (
        "measured coverage of this 95 % interval on REAL graded AlpacaEval judge preferences "
        "(54 models, 34 sources, 2 x 30 random splits): 0.97-0.99 overall but 0.89-0.98 among "
        "the strongest 20 % of models at n = 25-100 (below the 0.93 goal in 3 of 6 cells), a "
        "sparse top of unusual models (7 of 54 above 0.29, the rest at most 0.17); on SYNTHETIC "
        "graded families >= 0.955 (bench/RESULTS.md, 'Closing runs III')"
    ),
    ("tiny_benchmarks", "gp_irt"): (
        "measured coverage of this 95 % interval on REAL graded AlpacaEval judge preferences "
        "(54 models, 34 sources, 4 x 30 random splits): 0.968-0.988 overall but 0.908-0.967 "
        "among the strongest 20 % of models at n = 25-100 (below the 0.93 goal in 2 of 12 "
        "cells), a "
        "sparse top of unusual models (7 of 54 above 0.29, the rest at most 0.17); on SYNTHETIC "
        "graded families >= 0.963. For models stronger than most sources a random subset's "
        "design-based interval holds (>= 0.983 there; bench/RESULTS.md, 'Closing runs III')"
    ),
    ("tiny_benchmarks", "p_irt"): (
        "measured coverage of this 95 % interval on REAL graded AlpacaEval judge preferences "
        "(54 models, 34 sources, 4 x 30 random splits): 0.976-0.997 overall but 0.900-0.983 "
        "among the strongest 20 % of models at n = 25-100 (below the 0.93 goal in 2 of 12 "
        "cells), 1.2-1.5x wider than irt's; on SYNTHETIC graded families >= 0.952. Read the "
        "subset's irt answer (>= 0.950 there; bench/RESULTS.md, 'Closing runs III')"
    ),
}

# What each widened IRT interval's note drops: the caveats measured without the widening.
_HULL_REPLACES = {
    "irt": (GRADED_CAVEATS[("tiny_benchmarks", "irt")],),
    "gp_irt": (GRADED_CAVEATS[("tiny_benchmarks", "gp_irt")],),
    "p_irt": (
        GRADED_CAVEATS[("tiny_benchmarks", "p_irt")],
        MEASURED_CAVEATS[("tiny_benchmarks", "p_irt")],
    ),
}


def score_models(
    selection: Selection,
    correct,
    n_population: int,
    *,
    confidence_values=None,
    reference_correct=None,
    reference_confidence=None,
    level: float = 0.95,
    small_n: str = DEFAULT_SMALL_N,
    calibrate: bool = True,
    inflation: float = CALIBRATION_INFLATION,
    estimators: tuple[str, ...] | None = None,
    reference_values: dict[str, np.ndarray] | None = None,
    calibrations: dict[str, ReferenceCalibration] | None = None,
) -> list[EstimateBatch]:
    """Every estimate a subset offers for models known only on its items, with honest intervals.

    Parameters
    ----------
    selection : Selection
        The stored subset.
    correct : array_like, shape (m, k) or (k,)
        The scored models' per-item scores in [0, 1], in ``selection.indices`` order.
    n_population : int
        ``N``, the benchmark's size.
    confidence_values : array_like, shape (m, k), optional
        Gold-option probabilities (for ``weighted_confidence``).
    reference_correct : array_like, shape (r, N), optional
        Full results of reference models (the subset's source models): needed to calibrate the
        intervals of non-probability subsets (DPP, Anchor Points, tinyBenchmarks).
    reference_confidence : array_like, shape (r, N), optional
        Their gold-option probabilities (calibrates ``weighted_confidence``).
    level : float
        Confidence level of the intervals.
    small_n : {"jeffreys_fpc", "wilson_fpc", "clopper_pearson", "jeffreys", "hypergeometric"}
        Interval for unweighted 0/1 probability subsets.
    calibrate : bool
        ``False`` keeps the uncalibrated (pre-issue-13) intervals of non-probability subsets.
    inflation : float
        Spread multiplier of the reference-calibrated interval (:data:`CALIBRATION_INFLATION`).
    estimators : tuple of str, optional
        Which estimators (default: every one the selector offers).
    reference_values : dict of str to ndarray, optional
        Precomputed estimator values on the reference models (:func:`reference_estimates` of
        the same ``reference_correct``): the calibration then skips re-running the estimators
        on them (a service caches these per subset and results).
    calibrations : dict of str to ReferenceCalibration, optional
        Precomputed error laws (:func:`reference_calibrations` of the same references): used
        for an estimator when computed at this ``level`` and ``inflation``; then neither the
        estimator nor the kernel smoothing is re-run on the references.

    Returns
    -------
    list of EstimateBatch
        One per estimator, in the selector's order.

    Notes
    -----
    * Probability subsets (:data:`PROBABILITY_DESIGNS`), basis ``design``: unweighted 0/1 results
      get the ``small_n`` interval; weighted (stratified, Horvitz-Thompson) subsets get the
      stratified HT variance ``sum_h N_h^2 (1 - n_h/N_h) s_h^2 / n_h / N^2`` and a Student
      ``t_{n-H}`` interval
      (:func:`app.core.estimation.intervals.difference_estimate` with zero predictions); on 0/1
      results the Jeffreys interval at the effective size ``p (1 - p) / se^2 (z / t)^2``
      (:func:`app.core.estimation.intervals.beta_effective`), widened to contain Wilson's at
      Kish's size with fewer than ``SPARSE_STRATIFIED`` items right or wrong and replaced by it
      when the residual variance is 0 (never a zero-width interval).
    * Probability subsets of 0/1 results with ``>= MIN_REFERENCE_MODELS`` reference models and
      ``k >= MIN_MODEL_ASSISTED_N``
      also get ``model_assisted`` (:func:`model_assisted`, basis ``model-assisted``), appended
      after the selector's estimators.
    * Non-probability subsets, basis ``model``: with ``>= MIN_REFERENCE_MODELS`` reference models,
      the estimator is applied to them and its error law is inverted
      (:func:`app.core.estimation.intervals.reference_calibrated_interval`): the value is bias-corrected and
      ``raw_value`` keeps the estimator's own number. Without references the pre-issue-13
      interval is returned with a warning ``note`` (it is not calibrated: measured coverage on
      GPQA 0.63-0.99). A model whose raw value lies in the references' lowest or highest
      :data:`app.core.scoring.reference.EDGE_SHARE` of the same estimator's values gets the hull
      of its calibrated interval and that interval re-centred on the raw value
      (:func:`app.core.scoring.reference.edge_hull`: beyond the references the bias may flip).
    """
    y = np.asarray(correct, dtype=np.float64)
    if y.ndim == 1:
        y = y[None, :]
    k = selection.size
    if y.ndim != 2 or y.shape[1] != k:
        raise ValueError(f"correct: expected shape (n_models, {k}), got {np.shape(correct)}")
    if small_n not in SMALL_N_METHODS:
        raise ValueError(f"small_n: expected one of {SMALL_N_METHODS}, got {small_n!r}")
    conf = None if confidence_values is None else np.atleast_2d(np.asarray(confidence_values))
    ref = None if reference_correct is None else np.asarray(reference_correct, dtype=np.float64)
    if ref is not None and (ref.ndim != 2 or ref.shape[1] != n_population):
        raise ValueError(f"reference_correct: expected shape (n_models, {n_population})")
    z = normal_quantile(level)
    m = y.shape[0]
    w = np.asarray(selection.weights, dtype=np.float64)
    binary = bool(np.all((y == 0) | (y == 1)))
    uniform = bool(np.allclose(w, 1.0 / k))
    design = selection.method in PROBABILITY_DESIGNS
    names = estimators
    if names is None:
        cls = SELECTORS.get(selection.method)
        names = tuple(cls.estimators) if cls is not None else (selection.estimator,)
    if (
        calibrations is None
        and calibrate
        and ref is not None
        and not design
        and stored_out_of_fold(selection, ref.shape[0])
    ):  # the subset stores out-of-fold values for these references: the cross-fitted laws
        if reference_values is None:  # computed once: the laws and the edge hull both read them
            reference_values = reference_estimates(
                selection, ref, reference_confidence=reference_confidence
            )
        calibrations = reference_calibrations(
            selection, ref, level=level, inflation=inflation, values=reference_values
        )
    out = []
    pending: list[EstimateBatch] = []
    irt_reference_values = None
    for name in names:  # a handful of estimators
        signal = y
        if name == "weighted_confidence":
            if conf is None:
                out.append(
                    unavailable_batch(
                        name,
                        m,
                        "needs confidences (probability on the gold answer) in the upload",
                        level,
                    )
                )
                continue
            signal = conf
        try:
            value = _core_estimate(
                selection, signal, None if conf is None else conf, estimator=name
            )
        except ValueError as exc:
            out.append(unavailable_batch(name, m, str(exc), level))
            continue
        if (
            design
            and name in LINEAR_ESTIMATORS
            and name == names[0]
            and ref is not None
            and ref.shape[0] >= MIN_REFERENCE_MODELS
            and binary
            and k >= MIN_MODEL_ASSISTED_N
        ):
            extra = model_assisted(selection, y, n_population, ref, level=level)
        else:
            extra = None
        if design and name in LINEAR_ESTIMATORS:
            if extra is not None:
                pending.append(extra)
            out.append(
                _design_batch(
                    name,
                    value,
                    signal,
                    selection,
                    n_population,
                    binary and uniform,
                    small_n,
                    level,
                    z,
                    uniform=uniform,
                )
            )
            continue
        ref_signal = ref
        if name == "weighted_confidence":
            ref_signal = None if reference_confidence is None else np.asarray(reference_confidence)
        cal = None if calibrations is None else calibrations.get(name)
        calibrated = None
        crossfitted = False  # the law applied was cross-fitted (else the in-sample one)
        usable_refs = ref_signal is not None and ref_signal.shape[0] >= MIN_REFERENCE_MODELS
        r_val = None
        if calibrate and usable_refs:
            if reference_values is not None and name in reference_values:
                r_val = np.asarray(reference_values[name], dtype=np.float64)
            else:
                r_val = _core_estimate(
                    selection,
                    ref_signal[:, selection.indices],
                    None
                    if reference_confidence is None
                    else np.asarray(reference_confidence)[:, selection.indices],
                    estimator=name,
                )
        if name == "irt":  # with_irt_hulls reads where irt puts a model among the sources
            irt_reference_values = r_val
        if (
            cal is not None
            and calibrate
            and cal.confidence == level
            and (cal.crossfit or cal.inflation == inflation)
        ):
            calibrated = cal.apply(value)
            crossfitted = cal.crossfit
        elif r_val is not None:
            truth = ref_signal.mean(axis=1)
            calibrated = reference_calibrated_interval(
                value, r_val, truth, confidence=level, inflation=inflation
            )
        if calibrated is not None:
            val, lo, hi, se = calibrated
            if r_val is not None and name != "weighted_confidence":  # near the references' edge
                lo, hi = edge_hull(value, val, lo, hi, r_val)
            caveats = [MEASURED_CAVEATS.get((selection.method, name))]
            if not binary:
                if not crossfitted:
                    caveats.append(IN_SAMPLE_GRADED_CAVEAT)
                caveats.append(GRADED_CAVEATS.get((selection.method, name)))
            note = "; ".join(c for c in caveats if c) or None
            out.append(
                make_batch(
                    name,
                    val,
                    lo,
                    hi,
                    se,
                    "reference_calibrated",
                    "model",
                    level,
                    raw=value,
                    note=note,
                )
            )
            continue
        note = (
            "not a probability sample: interval not calibrated (give reference models)"
            if not design
            else None
        )
        if name in ("p_irt", "gp_irt"):
            try:
                se = _irt_delta(selection, y, name, n_population)
            except ValueError as exc:
                out.append(unavailable_batch(name, m, str(exc), level, value))
                continue
            lo, hi = np.maximum(0.0, value - z * se), np.minimum(1.0, value + z * se)
            out.append(
                make_batch(
                    name, value, lo, hi, se, "irt_ability_delta_method", "model", level, note=note
                )
            )
            continue
        lo, hi = kish_wilson_bounds(value, w, n_population, z)
        se = weighted_se(signal, w, n_population)
        if uniform and binary and name != "weighted_confidence":
            lo, hi = proportion_interval(
                signal.sum(axis=1).round(),
                k,
                method="wilson_fpc",
                n_population=n_population,
                confidence=level,
            )
        out.append(
            make_batch(name, value, lo, hi, se, "wilson_kish_fpc", "model", level, note=note)
        )
    if selection.method == "tiny_benchmarks":  # the IRT intervals measured short alone
        out = with_irt_hulls(
            out,
            graded=not binary,
            replaced_notes=_HULL_REPLACES,
            irt_reference_values=irt_reference_values,
        )
    return out + pending


def _design_batch(
    name, value, y, selection, n_population, unweighted01, small_n, level, z, uniform=False
):
    k = selection.size
    if uniform and not unweighted01:
        # graded scores on a uniform random subset (issue 35): the 0/1 intervals do not apply;
        # the finite-population betting interval holds for any [0, 1] scores at every n
        lo, hi = betting_interval(y, n_population, confidence=level)
        # the design SE (1 - n/N) s² / n, as the stratified path gave graded rows before
        se = np.sqrt((1.0 - k / n_population) * y.var(axis=1, ddof=1) / k) if k > 1 else 0 * value
        rows01 = np.all((y == 0) | (y == 1), axis=1)
        if rows01.any():  # a 0/1 row among graded ones keeps its own small-n interval
            succ = np.round(y[rows01].sum(axis=1))
            lo01, hi01 = proportion_interval(
                succ, k, method=small_n, n_population=n_population, confidence=level
            )
            lo, hi = lo.copy(), hi.copy()
            lo[rows01], hi[rows01] = lo01, hi01
        return make_batch(name, value, lo, hi, se, GRADED_INTERVAL, "design", level)
    if unweighted01:
        succ = np.round(y.sum(axis=1))
        lo, hi = proportion_interval(
            succ, k, method=small_n, n_population=n_population, confidence=level
        )
        p = succ / k
        se = np.sqrt(fpc(k, n_population) * p * (1.0 - p) / k)
        return make_batch(name, value, lo, hi, se, small_n, "design", level)
    pi, strata = design_inclusion(selection, n_population)
    _, se = difference_estimate(y, np.zeros(y.shape[0]), pi, n_population, strata=strata)
    df = max(k - int(strata.max()) - 1, 1)  # n - H degrees of freedom of the stratified variance
    q = float(_st.t.ppf(0.5 + level / 2.0, df))
    lo, hi = np.maximum(0.0, value - q * se), np.minimum(1.0, value + q * se)
    succ = y.sum(axis=1)
    binary_rows = np.all((y == 0) | (y == 1), axis=1)
    # 0/1 results: the Jeffreys interval at the design's effective size (Korn & Graubard's
    # construction, df-adjusted) instead of the symmetric t-interval, whose upper end is too low
    # for skewed counts (REAL GPQA n = 50, lowest fifth 0.925 with the t-interval)
    beta_rows = binary_rows & (se > 0) & (value > 0) & (value < 1)
    if beta_rows.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            n_e = value * (1.0 - value) / np.where(se > 0, se, 1.0) ** 2 * (z / q) ** 2
        blo, bhi = beta_effective(value, np.where(beta_rows, n_e, 1.0), confidence=level)
        blo = np.maximum(blo, succ / n_population)
        bhi = np.minimum(bhi, (succ + n_population - k) / n_population)
        lo, hi = np.where(beta_rows, blo, lo), np.where(beta_rows, bhi, hi)
    # all residuals equal (never a zero-width interval), or so few items right (or wrong) that
    # the t-interval is a Wald interval at the boundary (SYNTHETIC wide family, n = 100: the
    # strongest fifth covered 0.80): widen to Wilson at Kish's size
    sparse = (se <= 0) | (binary_rows & (np.minimum(succ, k - succ) < SPARSE_STRATIFIED))
    if sparse.any():
        klo, khi = kish_wilson_bounds(value, selection.weights, n_population, z)
        lo = np.where(sparse, np.minimum(lo, klo), lo)
        hi = np.where(sparse, np.maximum(hi, khi), hi)
        zero = se <= 0
        lo, hi = np.where(zero, klo, lo), np.where(zero, khi, hi)
    graded_rows = ~binary_rows & (se > 0)
    interval = "stratified_ht"
    if graded_rows.any():
        # graded scores (issue 35): the t-interval alone under-covers skewed [0, 1] scores at
        # small n (SYNTHETIC mass-at-0-and-1 family, n = 25: lowest fifth 0.91); widen it to
        # contain the betting interval of the unweighted sample, recentred on the estimate and
        # scaled by the design effect sqrt(Var_design / Var_SRS) (its effective size)
        g = np.flatnonzero(graded_rows)
        blo, bhi = betting_interval(y[g], n_population, confidence=level)
        ybar = y[g].mean(axis=1)
        srs = np.sqrt((1.0 - k / n_population) * y[g].var(axis=1, ddof=1) / k)
        deff = np.where(srs > 0, se[g] / np.where(srs > 0, srs, 1.0), 1.0)
        wlo = np.maximum(0.0, value[g] - (ybar - blo) * deff)
        whi = np.minimum(1.0, value[g] + (bhi - ybar) * deff)
        lo, hi = lo.copy(), hi.copy()
        lo[g], hi[g] = np.minimum(lo[g], wlo), np.maximum(hi[g], whi)
        interval = "stratified_ht_betting"
    return make_batch(name, value, lo, hi, se, interval, "design", level)


__all__ = [
    "BASES",
    "CALIBRATION_INFLATION",
    "DEFAULT_SMALL_N",
    "GRADED_CAVEATS",
    "GRADED_INTERVAL",
    "IN_SAMPLE_GRADED_CAVEAT",
    "MIN_MODEL_ASSISTED_N",
    "MIN_REFERENCE_MODELS",
    "PROBABILITY_DESIGNS",
    "EstimateBatch",
    "design_inclusion",
    "kish_n_eff",
    "model_assisted",
    "reference_calibrations",
    "reference_estimates",
    "reference_predictions",
    "score_models",
    "size_needed_for_gap",
    "weighted_estimate",
    "weighted_paired_comparison",
]
