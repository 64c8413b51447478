"""Scoring with reference models (models known on every item, e.g. a subset's source models).

* :func:`reference_estimates` / :func:`reference_calibrations`: each model-based estimator's
  values on the references and the error law :func:`app.core.scoring.score_models.score_models` inverts for
  a reference-calibrated interval (:func:`app.core.estimation.intervals.calibrate_references`).
* :func:`reference_predictions` / :func:`model_assisted`: per-item predictions from the
  references' item accuracies and the model-assisted difference estimator built on them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats as _st

from app.core.estimation.estimate_batch import EstimateBatch, make_batch
from app.core.estimation.estimators import estimate as _core_estimate
from app.core.estimation.intervals import (
    difference_estimate,
    proportion_interval,
)
from app.core.estimation.stats import fpc
from app.core.estimation.weighted import (
    LINEAR_ESTIMATORS,
    PROBABILITY_DESIGNS,
    design_inclusion,
    kish_wilson_bounds,
    normal_quantile,
)
from app.core.results import Selection
from app.core.selectors import SELECTORS

#: Multiplier of the reference-calibrated spread, measured by ``bench/bench_coverage.py``.
CALIBRATION_INFLATION = 1.1
#: Smallest subset offered the model-assisted estimator (its tails undercover at n = 25 on GPQA:
#: 0.921-0.925 in the top 20 %, 20 repeats; >= 0.939 from n = 50).
MIN_MODEL_ASSISTED_N = 50
#: Fewer subset items right (or wrong) than this and the model-assisted interval is widened to the
#: design's Wilson interval (the residuals carry no information; issue 24).
SPARSE_OUTCOMES = 2
#: Fewest reference models a calibrated or model-assisted interval is computed from.
MIN_REFERENCE_MODELS = 20
#: The references' lowest / highest share of an estimator's values where a calibrated interval also
#: holds its re-centred copy (:func:`edge_hull`; issue 38, bench/RESULTS.md "Closing runs II").
EDGE_SHARE = 0.1
#: tinyBenchmarks on 0/1 scores: the sources' lowest / highest share of ``irt``'s values where
#: ``gp_irt``'s interval also holds ``irt``'s (:func:`with_irt_hulls`). Chosen from REAL GPQA,
#: models stronger than every source: 0.1 left n = 25 at 0.935-0.946 over two seeds, 0.2 gave
#: 0.955-0.957 (bench/RESULTS.md "Closing runs V").
IRT_EDGE_SHARE = 0.2


def reference_estimates(
    selection: Selection,
    reference_correct,
    *,
    reference_confidence=None,
    estimators: tuple[str, ...] | None = None,
) -> dict[str, np.ndarray]:
    """Each model-based estimator's values on the reference models, as :func:`app.core.scoring.score_models.score_models`
    calibrates them (pass the result as its ``reference_values``).

    Only estimators :func:`app.core.scoring.score_models.score_models` calibrates are computed (those of non-probability
    subsets, and ``irt``-type ones of any subset outside :data:`PROBABILITY_DESIGNS`);
    ``weighted_confidence`` only with ``reference_confidence``. Estimators that fail on the
    references are left out (:func:`app.core.scoring.score_models.score_models` then reports them as it would anyway).

    Returns
    -------
    dict of str to ndarray, shape (r,)
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    conf = None if reference_confidence is None else np.asarray(reference_confidence)
    names = estimators
    if names is None:
        cls = SELECTORS.get(selection.method)
        names = tuple(cls.estimators) if cls is not None else (selection.estimator,)
    design = selection.method in PROBABILITY_DESIGNS
    out: dict[str, np.ndarray] = {}
    c_sub = None if conf is None else conf[:, selection.indices]
    for name in names:  # a handful of estimators
        if design and name in LINEAR_ESTIMATORS:
            continue
        signal = ref
        if name == "weighted_confidence":
            if conf is None:
                continue
            signal = conf
        try:
            out[name] = _core_estimate(
                selection, signal[:, selection.indices], c_sub, estimator=name
            )
        except ValueError:
            continue
    return out


def reference_predictions(selection: Selection, y: np.ndarray, reference_correct) -> np.ndarray:
    """Per-item predictions for each scored model from reference models' item accuracies.

    ``yhat_ij = sigmoid(logit(pbar_j) + theta_i)`` with ``pbar_j`` item ``j``'s accuracy among
    the references (shrunk: ``(s_j + 1/2) / (r + 1)``) and ``theta_i`` solving
    ``sum_{j in S} yhat_ij = sum_{j in S} y_ij`` (a one-parameter Rasch-type shift, batched
    safeguarded Newton over models; ``|theta| <= 8``).

    Returns
    -------
    ndarray, shape (m, N)
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    pbar = (ref.sum(axis=0) + 0.5) / (ref.shape[0] + 1.0)
    base = np.log(pbar / (1.0 - pbar))
    bs = base[selection.indices]
    target = y.sum(axis=1)
    theta = np.zeros(y.shape[0])
    # Safeguarded Newton, vectorised over models: sum_j yhat_ij is increasing in theta, so each
    # model keeps a bracket [lo, hi] of its root and a Newton step that leaves it is replaced by
    # bisection (plain Newton clipped to +-8 could cycle between the bounds, e.g. logits
    # (-3.04, -3.04, -3.04, +3.04) and 2 of 4 right: -8, +8, -8, ... instead of 2.36).
    lo, hi = np.full_like(theta, -8.0), np.full_like(theta, 8.0)
    for _ in range(60):
        p = 1.0 / (1.0 + np.exp(-(bs[None, :] + theta[:, None])))
        g = p.sum(axis=1) - target
        lo = np.where(g < 0, theta, lo)
        hi = np.where(g > 0, theta, hi)
        h = np.maximum((p * (1.0 - p)).sum(axis=1), 1e-9)
        step = theta - g / h
        theta = np.where((step > lo) & (step < hi), step, 0.5 * (lo + hi))
    return 1.0 / (1.0 + np.exp(-(base[None, :] + theta[:, None])))


def model_assisted(
    selection: Selection, y, n_population: int, reference_correct, *, level: float = 0.95
) -> EstimateBatch:
    """Model-assisted difference estimator on a probability subset (estimator ``model_assisted``).

    Predictions from :func:`reference_predictions`; value and variance from
    :func:`app.core.estimation.intervals.difference_estimate` with the design's inclusion probabilities and
    strata (:func:`design_inclusion`). The residual variance is inflated by ``n / (n - 2)`` for
    the fitted shift, floored at the SE the predictions themselves imply for 0/1 results,
    ``sqrt(f mean_S yhat (1 - yhat) / n)`` (small subsets estimate the residual variance poorly;
    the floor only widens), and the interval uses Student's ``t_{n-2}``. Design-consistent whatever
    the predictions (basis ``model-assisted``); falls back to Clopper-Pearson bounds when all
    residuals vanish (never a zero-width interval). With fewer than :data:`SPARSE_OUTCOMES`
    subset items right (or wrong), the interval is widened to contain the design's Wilson
    interval at Kish's size (:func:`app.core.estimation.weighted.kish_wilson_bounds`): the predictions then
    sit at their bound and the residual variance says nothing (measured on the SYNTHETIC weak
    family, bench/RESULTS.md).
    """
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    k = selection.size
    yhat = reference_predictions(selection, y, reference_correct)
    pi, strata = design_inclusion(selection, n_population)
    resid = y - yhat[:, selection.indices]
    value, se = difference_estimate(resid, yhat.mean(axis=1), pi, n_population, strata=strata)
    se = se * np.sqrt(k / max(k - 2, 1))
    ys = yhat[:, selection.indices]
    se_bernoulli = np.sqrt(fpc(k, n_population) * np.mean(ys * (1.0 - ys), axis=1) / k)
    se = np.maximum(se, se_bernoulli)  # small-n floor: only ever widens
    q = float(_st.t.ppf(0.5 + level / 2.0, max(k - 2, 1)))
    lo, hi = np.clip(value - q * se, 0.0, 1.0), np.clip(value + q * se, 0.0, 1.0)
    zero = se <= 0
    if zero.any():  # a census: no sampling error, never a zero-width interval
        clo, chi = proportion_interval(
            np.round(y.sum(axis=1)), k, method="clopper_pearson", confidence=level
        )
        lo, hi = np.where(zero, clo, lo), np.where(zero, chi, hi)
    # No information: with fewer than SPARSE_OUTCOMES items right (or wrong) the shift runs to its
    # bound, the predictions and residuals collapse and the interval shrinks to nothing (a target
    # with 0 of 50 right got ~[0, 0.004], covering 17 % of weak models): widen to the design's
    # Wilson interval at Kish's size (only ever widens).
    succ = np.round(y.sum(axis=1))
    sparse = np.minimum(succ, k - succ) < SPARSE_OUTCOMES
    if sparse.any():
        w = np.asarray(selection.weights, dtype=np.float64)
        wlo, whi = kish_wilson_bounds(y @ w / w.sum(), w, n_population, normal_quantile(level))
        lo = np.where(sparse, np.minimum(lo, wlo), lo)
        hi = np.where(sparse, np.maximum(hi, whi), hi)
    return make_batch(
        "model_assisted", value, lo, hi, se, "difference_fpc", "model-assisted", level
    )


def edge_hull(raw, value, lo, hi, reference_values, share: float = EDGE_SHARE):
    """Widen reference-calibrated intervals near the edge of the references.

    Parameters
    ----------
    raw : array_like, shape (m,)
        The estimator's own values for the scored models.
    value, lo, hi : array_like, shape (m,)
        The bias-corrected value and calibrated interval.
    reference_values : array_like, shape (r,)
        The estimator's values on the references (same subset).
    share : float
        Edge share: a model whose ``raw`` lies at or below the ``share`` quantile of
        ``reference_values`` (at or above the ``1 - share`` one) is at an edge.

    Returns
    -------
    lo, hi : ndarray, shape (m,)
        At an edge, the hull of the interval and its copy re-centred on ``raw``
        (``[raw - (value - lo), raw + (hi - value)]``, clipped to [0, 1]); elsewhere unchanged.

    Notes
    -----
    The bias correction carries the edge references' bias on to the model, and beyond the
    references that bias can change sign (SYNTHETIC ``discriminative``, strong_to_weak: -0.086 at
    the weakest source, raw estimates above the truth below it), which nothing in the
    references shows. A model near the edge may lie beyond it, so its interval also holds the
    uncorrected one. Measured: beyond-source answer cells below 0.93 go from 7 to 3 of 180 (lowest
    0.756 to 0.881), interior widths +1 % (Anchor Points) to +7 % (DPP) on REAL GPQA.
    """
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    raw, value = np.asarray(raw, dtype=np.float64), np.asarray(value, dtype=np.float64)
    edge = reference_edge(raw, reference_values, share)
    lo2 = np.clip(raw - (value - lo), 0.0, 1.0)
    hi2 = np.clip(raw + (hi - value), 0.0, 1.0)
    return np.where(edge, np.minimum(lo, lo2), lo), np.where(edge, np.maximum(hi, hi2), hi)


#: Said on each IRT estimate whose interval the graded hull (:func:`with_irt_hulls`) widened.
GRADED_IRT_HULL_NOTE = (
    "graded scores: the interval holds the hull of irt's and gp_irt's calibrated intervals (the "
    "two IRT predictions part on models the IRT fit describes poorly); the hull, measured on REAL graded "
    "AlpacaEval (54 models, 34 sources, 4 x 30 random splits): 0.983-1.000 overall and "
    "0.950-1.000 among the strongest 20 % at n = 25-100 (each interval alone: 0.892-0.992), "
    "widths +5-46 % over irt's own, +10-29 % over gp_irt's, p_irt's +3-23 % (its strongest "
    "fifth 0.900-0.983 -> 0.983-1.000); on SYNTHETIC graded families >= 0.963, widths +1-3 % "
    "(irt), +4-10 % (gp_irt), +11-27 % (p_irt) (bench/RESULTS.md, 'Closing runs III')"
)


def interval_hull(low, high, other_low, other_high):
    """The hull of two intervals per model: where both are finite, ``[min(lows), max(highs)]``;
    elsewhere the first interval. The IRT hulls of :func:`with_irt_hulls` are built from it (on
    graded scores the first pair is ``irt``'s calibrated interval and the other ``gp_irt``'s).

    Parameters
    ----------
    low, high, other_low, other_high : array_like, shape (m,)
        The two intervals (NaN where one is unavailable).

    Returns
    -------
    lo, hi : ndarray, shape (m,)

    Notes
    -----
    Both are calibrated on the same references, but ``irt`` predicts from the ability alone and
    ``gp_irt`` blends it with the subset's raw mean; on graded scores a model the IRT fit
    describes poorly (REAL AlpacaEval: the few judge-preferred models far above the rest) pulls
    them apart, and then either may miss. The hull covers when either does. Measured on REAL
    AlpacaEval (34 sources, 2 x 30 splits): the strongest fifth's service answers 0.894-0.970
    -> 0.947-1.000, widths +4 % (n = 100) to +44 % (n = 25); ``gp_irt`` alone fell to
    0.908-0.917 at n = 100 on two fresh seeds. On the SYNTHETIC graded families (300 sources),
    where the two agree, ``irt``'s width +0.6-2.8 %. ``p_irt``'s interval, wider than both, is
    widened to hold the hull too (alone it covered 0.900 / 0.925 in two AlpacaEval cells).
    """
    lo, hi = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    g_lo, g_hi = np.asarray(other_low, dtype=np.float64), np.asarray(other_high, dtype=np.float64)
    both = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(g_lo) & np.isfinite(g_hi)
    return np.where(both, np.fmin(lo, g_lo), lo), np.where(both, np.fmax(hi, g_hi), hi)


#: Said on ``p_irt`` (0/1 scores) when its interval holds ``gp_irt``'s (:func:`with_irt_hulls`).
P_IRT_HOLDS_GP_IRT_NOTE = (
    "the interval holds gp_irt's (p_irt's own, calibrated on the sources, covered REAL GPQA "
    "models stronger than every source 0.71-0.82 at n = 25-100: beyond the sources its IRT part "
    "for the unseen items is biased low); with it 0.945-0.984 there over three seeds, >= 0.97 on "
    "SYNTHETIC families; in range 1.2-1.3x gp_irt's own width on GPQA (0.15-0.26), +1-7 % over "
    "it on SYNTHETIC (bench/RESULTS.md, 'Closing runs IV' and 'V')"
)

#: Said on ``gp_irt`` (0/1 scores) when :func:`with_irt_hulls` widened it for some model.
GP_IRT_EDGE_NOTE = (
    "where irt puts the model in the sources' lowest or highest 20 %, the interval holds irt's "
    "(gp_irt's own, calibrated on the sources, covered REAL GPQA models stronger than every "
    "source 0.919-0.973 at n = 25-100 over five seeds, their strongest fifth 0.83-0.93: beyond "
    "the sources its p_irt part is biased low); with it 0.938-0.978 there over three seeds, "
    ">= 0.96 on SYNTHETIC families; widths +16-30 % in range on GPQA, +1-7 % on SYNTHETIC "
    "(bench/RESULTS.md, 'Closing runs V')"
)

IRT_HULLED = ("irt", "p_irt", "gp_irt")  # the calibrated intervals the graded hull widens


def with_irt_hulls(
    batches: list[EstimateBatch],
    *,
    graded: bool,
    replaced_notes: dict[str, tuple[str, ...]],
    irt_reference_values=None,
) -> list[EstimateBatch]:
    """tinyBenchmarks' IRT intervals widened where one alone is measured short.

    Parameters
    ----------
    batches : list of EstimateBatch
        One subset's estimates (``irt``, ``gp_irt``, ``p_irt`` among them).
    graded : bool
        Graded scores: ``irt``, ``gp_irt`` and ``p_irt`` each hold the hull of ``irt``'s and
        ``gp_irt``'s calibrated intervals (:func:`interval_hull`). 0/1 scores: a model whose
        raw ``irt`` value lies in the sources' lowest or highest :data:`IRT_EDGE_SHARE` of
        ``irt_reference_values`` (:func:`reference_edge`) gets ``gp_irt``'s interval widened to hold ``irt``'s, and
        ``p_irt``'s interval holds ``gp_irt``'s (widened or not); ``irt`` is unchanged.
    replaced_notes : dict of str to tuple of str
        Per estimator, the caveats (measured without the hull) its note drops when widened.
    irt_reference_values : array_like, shape (r,), optional
        ``irt``'s values on the subset's sources (as calibrated); without them (0/1 scores) no
        model counts as at the edge.

    Returns
    -------
    list of EstimateBatch
        The same batches in order; widened ones keep their value and say so in ``note``.
        Nothing changes unless ``irt`` and ``gp_irt`` are both reference-calibrated.

    Notes
    -----
    ``p_irt`` mixes the subset's observed items with IRT predictions for the unseen ones, and
    its calibration on the sources is the tightest of the three; for a model stronger than every
    source those predictions are biased low and its interval missed (REAL GPQA, weakest 80 % as
    sources: 0.71-0.82). ``gp_irt`` blends ``p_irt`` with the ability-only ``irt`` and covered
    0.927-0.973 there, so the smallest widening that covers is ``gp_irt``'s interval;
    ``irt``'s (>= 0.96 there) would double ``p_irt``'s width in range. ``gp_irt`` itself, the
    same blend, stayed at the goal line for those models (0.919-0.973 over five seeds at
    n = 25-100, their strongest fifth 0.83-0.93); ``irt``'s value, from the ability alone, is the
    least biased of the three there, so where it puts the model at the sources' edge the blend
    may be extrapolating and ``gp_irt`` holds ``irt``'s interval (measured: "Closing runs V").
    """
    by_name = {b.estimator: b for b in batches}
    irt, gp = by_name.get("irt"), by_name.get("gp_irt")
    if irt is None or gp is None or {irt.interval, gp.interval} != {"reference_calibrated"}:
        return batches
    if graded:
        lo, hi = interval_hull(irt.ci_low, irt.ci_high, gp.ci_low, gp.ci_high)
        hulls = {name: (lo, hi, GRADED_IRT_HULL_NOTE) for name in IRT_HULLED}
    else:
        edge = reference_edge(irt.raw_value, irt_reference_values, IRT_EDGE_SHARE)
        g_lo, g_hi = interval_hull(irt.ci_low, irt.ci_high, gp.ci_low, gp.ci_high)
        lo, hi = np.where(edge, g_lo, gp.ci_low), np.where(edge, g_hi, gp.ci_high)
        hulls = {"p_irt": (lo, hi, P_IRT_HOLDS_GP_IRT_NOTE)}
        if edge.any():
            hulls["gp_irt"] = (lo, hi, GP_IRT_EDGE_NOTE)
    out = []
    for b in batches:
        if b.estimator not in hulls or b.interval != "reference_calibrated":
            out.append(b)
            continue
        h_lo, h_hi, said = hulls[b.estimator]
        b_lo, b_hi = interval_hull(b.ci_low, b.ci_high, h_lo, h_hi)
        note = b.note or ""
        for caveat in replaced_notes.get(b.estimator, ()):  # caveats may hold "; " themselves
            note = note.replace(caveat, "")
        note = "; ".join([n for n in note.split("; ") if n.strip()] + [said])
        out.append(dataclasses.replace(b, ci_low=b_lo, ci_high=b_hi, note=note))
    return out


def reference_edge(raw, reference_values, share: float) -> np.ndarray:
    """Models whose ``raw`` value lies at or beyond the references' lowest or highest ``share``
    of ``reference_values`` (the same estimator on the references).

    Parameters
    ----------
    raw : array_like, shape (m,)
    reference_values : array_like, shape (r,) or None
    share : float

    Returns
    -------
    ndarray of bool, shape (m,)
        All False without finite reference values; False where ``raw`` is not finite.
    """
    raw = np.asarray(raw, dtype=np.float64)
    r = np.asarray([] if reference_values is None else reference_values, dtype=np.float64).ravel()
    r = r[np.isfinite(r)]
    if r.size == 0:
        return np.zeros(raw.shape, dtype=bool)
    cut_lo, cut_hi = np.quantile(r, [share, 1.0 - share])
    return np.isfinite(raw) & ((raw <= cut_lo) | (raw >= cut_hi))


__all__ = [
    "CALIBRATION_INFLATION",
    "EDGE_SHARE",
    "GP_IRT_EDGE_NOTE",
    "GRADED_IRT_HULL_NOTE",
    "IRT_EDGE_SHARE",
    "MIN_MODEL_ASSISTED_N",
    "MIN_REFERENCE_MODELS",
    "P_IRT_HOLDS_GP_IRT_NOTE",
    "SPARSE_OUTCOMES",
    "edge_hull",
    "interval_hull",
    "model_assisted",
    "reference_edge",
    "reference_estimates",
    "reference_predictions",
    "with_irt_hulls",
]
