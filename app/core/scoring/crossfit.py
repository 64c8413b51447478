"""Cross-fitted reference calibration: a subset estimator's error law measured on models the
selection did not use (issue 24).

The references of a non-probability subset are its source models, the ones its items were chosen
to represent, so their errors understate a new model's (on GPQA the held-out models' standardised
errors have SD 1.12 against 0.98 in sample for Anchor Points at n = 25). A single global inflation
(1.1, chosen in sample) left the tails short (0.919-0.927 in the lowest fifth).

Cross-fitting: split the references into ``K`` folds; for each fold refit the subset's selector
(same method and parameters) on the other folds, draw a subset of the same size and apply each
estimator to the held-out fold. Every reference then has an *out-of-fold* value from a subset that
never saw it. The served subset keeps its own kernel-smoothed bias ``b(a)`` and spread ``s(a)``
(:func:`app.core.estimation.intervals.calibrate_references`: heteroscedastic), and the multiplier of ``s(a)``
is the split-conformal quantile of the out-of-fold scores ``|oof_j - truth_j - b(truth_j)| /
s(truth_j)``, computed separately for the lowest fifth, the middle and the highest fifth of the
references' accuracies (Mondrian conformal: tail-aware; a bin with too few references uses the
pooled quantile). No global factor.

Each bin's own quantile is the finite-sample split-conformal rank ``ceil((r_B + 1) confidence)``
of its ``r_B`` references, valid (coverage >= ``confidence`` for a model exchangeable with the
bin's references) for every ``r_B >= confidence / (1 - confidence)``; a tail bin of 30 takes its
largest score (expected coverage 30/31). The pooled quantile is valid only on average over the
bins: where the out-of-fold errors grow towards one end, it under-covers that end.

The out-of-fold values are computed once, where the subset is built (a job), and stored in its
fitted state under ``oof_<estimator>`` (aligned with the source models' order).

**Beyond the sources (issue 38).** A target stronger (weaker) than every source is not
exchangeable with any reference, and a model-based estimator's error grows there (Anchor Points on
GPQA, fitted on the weakest 80 %: bias -0.03 on the strongest 20 %, coverage 0.88 at n = 100).
The edge folds measure that error on the sources themselves: refit the selector without the
references in the highest (lowest) fifth of accuracies and score them with it, so each edge
reference is beyond every model its subset was fitted on, as the target is. Their conformal
quantile (:func:`edge_estimates`, stored under ``edge_<estimator>``) is the multiplier for every
accuracy above the highest (below the lowest) reference's: the interval reaches beyond the
sources as far as the sources' own edge errors say it must.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from app.core.estimation.intervals import ReferenceCalibration, calibrate_references
from app.core.estimation.weighted import PROBABILITY_DESIGNS
from app.core.results import Selection
from app.core.scoring.reference import (
    CALIBRATION_INFLATION,
    MIN_REFERENCE_MODELS,
    reference_estimates,
)
from app.core.selectors import make_selector

#: Folds of the cross-fit (each refit sees (K - 1) / K of the references).
CROSSFIT_FOLDS = 5
#: Fitted-state key prefix of the stored out-of-fold values.
OOF_PREFIX = "oof_"
#: Fitted-state key prefix of the stored edge-fold values (NaN outside the two edge folds).
EDGE_PREFIX = "edge_"
#: Selectors whose subsets get edge folds. tinyBenchmarks is left out: its answer (``irt``)
#: covered >= 0.97 beyond the sources without them, its two refits cost 5 CPU-s more per
#: subset job on GPQA (1.4x), and its short secondary (``p_irt``: 0.71-0.79 -> 0.77-0.89)
#: stays short with them (bench/RESULTS.md, "Edge folds").
EDGE_METHODS = ("anchor_points", "dpp")
#: Share of the references in each tail bin of the conformal quantile (lowest / highest fifth).
TAIL_SHARE = 0.2
#: Fewest references a bin needs for its own conformal quantile (else the pooled one): 19 is the
#: smallest bin whose 95 % split-conformal quantile is finite (rank ceil((19 + 1) 0.95) = 19 of
#: 19), and the bin's quantile is valid for the models of its bin at any such size. It was 40,
#: which sent the 30-reference tail bins of 150 references to the pooled quantile and left a
#: heteroscedastic top tail short (SYNTHETIC graded ``judge``, tinyBenchmarks ``irt``: highest
#: fifth 0.91; bench/RESULTS.md, issue 35).
MIN_BIN_REFERENCES = 19


def out_of_fold_estimates(
    selection: Selection,
    reference_correct,
    *,
    folds: int = CROSSFIT_FOLDS,
    seed: int = 0,
    confidence=None,
    subtasks=None,
    candidates=None,
    estimators: tuple[str, ...] | None = None,
    fold_selectors: dict | None = None,
) -> dict[str, np.ndarray]:
    """Each calibrated estimator's value on every reference model from a subset that did not use it.

    Parameters
    ----------
    selection : Selection
        The served subset (its method, parameters and requested size are reused).
    reference_correct : array_like, shape (r, N)
        The references' full results (the selection's source models).
    folds : int
        ``K``; fold ``f`` holds the references at positions ``perm[f::K]`` of a permutation
        drawn from ``default_rng([seed, 24])``.
    seed : int
        Fold ``f``'s subset is drawn with ``default_rng([seed, f])``.
    confidence : array_like, shape (r, N), optional
        The references' gold-option probabilities, when the selector was fitted on them.
    subtasks, candidates : optional
        As the selector's ``fit`` received them.
    estimators : tuple of str, optional
        Default: those :func:`app.core.scoring.reference.reference_estimates` calibrates.
    fold_selectors : dict, optional
        Cache of the fold-fitted selectors (fold -> selector) and of their partition (key
        ``"perm"``), filled on first use: several subset sizes drawn from the same sources share
        the ``K`` fits, and then the partition of the first call (its ``seed``), so that each
        fit is applied to the references it did not see. (Before 2026-12-06 the partition was
        redrawn from each call's ``seed`` while the fits were reused: a later call's fold held
        references its fit had been trained on, about 4 in 5, and their values were in-sample.)

    Returns
    -------
    dict of str to ndarray, shape (r,)
        Estimators that failed on some fold are left out.

    Notes
    -----
    Cost: ``K`` selector fits on ``(K - 1) r / K`` models (shared through ``fold_selectors``)
    plus one subset draw and estimator evaluation per fold.
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    conf = None if confidence is None else np.asarray(confidence, dtype=np.float64)
    r = ref.shape[0]
    if r < folds:
        raise ValueError(f"reference_correct: {r} models cannot be split into {folds} folds")
    cache = {} if fold_selectors is None else fold_selectors
    perm = cache.setdefault("perm", np.random.default_rng([seed, 24]).permutation(r))
    if perm.size != r:
        raise ValueError(f"fold_selectors: its partition is of {perm.size} models, not {r}")
    out: dict[str, np.ndarray] = {}
    seen: list[set[str]] = []
    for f in range(folds):  # K refits of the selector
        held = perm[f::folds]
        if f not in cache:
            train = np.setdiff1d(perm, held)
            cache[f] = make_selector(selection.method, **dict(selection.params)).fit(
                ref[train],
                confidence=None if conf is None else conf[train],
                subtasks=subtasks,
                candidates=candidates,
            )
        sub = cache[f].select(int(selection.n_requested), rng=np.random.default_rng([seed, f]))
        vals = reference_estimates(sub, ref[held], estimators=estimators)
        seen.append(set(vals))
        for name, v in vals.items():  # a handful of estimators
            out.setdefault(name, np.full(r, np.nan))[held] = v
    common = set.intersection(*seen)
    return {n: v for n, v in out.items() if n in common and np.all(np.isfinite(v))}


def edge_estimates(
    selection: Selection,
    reference_correct,
    *,
    seed: int = 0,
    confidence=None,
    subtasks=None,
    candidates=None,
    estimators: tuple[str, ...] | None = None,
    fold_selectors: dict | None = None,
) -> dict[str, np.ndarray]:
    """Each calibrated estimator's value on the edge references, from a subset fitted without them.

    The edge folds are the references in the lowest and in the highest :data:`TAIL_SHARE` of
    full accuracies. For each, the selector (method and parameters of ``selection``) is refitted
    on the other references and a subset of the same size drawn (``default_rng([seed, 38, e])``,
    ``e`` = 0 low, 1 high); its estimators are applied to the fold. Each edge reference is then
    scored by a subset whose sources are all weaker (stronger) than it: the extrapolation a
    target beyond every source undergoes.

    Parameters
    ----------
    selection, reference_correct, seed, confidence, subtasks, candidates, estimators
        As :func:`out_of_fold_estimates`.
    fold_selectors : dict, optional
        Cache shared with :func:`out_of_fold_estimates` (keys ``"edge_low"``, ``"edge_high"``).

    Returns
    -------
    dict of str to ndarray, shape (r,)
        NaN outside the two edge folds; estimators that failed on an edge are left out.

    Notes
    -----
    Cost: two selector fits on ``(1 - TAIL_SHARE) r`` models (cached) plus two draws.
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    conf = None if confidence is None else np.asarray(confidence, dtype=np.float64)
    r = ref.shape[0]
    truth = ref.mean(axis=1)
    lo_cut, hi_cut = np.quantile(truth, [TAIL_SHARE, 1.0 - TAIL_SHARE])
    cache = {} if fold_selectors is None else fold_selectors
    out: dict[str, np.ndarray] = {}
    seen: list[set[str]] = []
    for e, (key, edge) in enumerate(
        (("edge_low", truth <= lo_cut), ("edge_high", truth >= hi_cut))
    ):
        if edge.all() or not edge.any():
            raise ValueError("reference_correct: the references' accuracies have no edge")
        if key not in cache:
            cache[key] = make_selector(selection.method, **dict(selection.params)).fit(
                ref[~edge],
                confidence=None if conf is None else conf[~edge],
                subtasks=subtasks,
                candidates=candidates,
            )
        sub = cache[key].select(
            int(selection.n_requested), rng=np.random.default_rng([seed, 38, e])
        )
        vals = reference_estimates(sub, ref[edge], estimators=estimators)
        seen.append(set(vals))
        for name, v in vals.items():  # a handful of estimators
            out.setdefault(name, np.full(r, np.nan))[edge] = v
    common = set.intersection(*seen)
    return {n: v for n, v in out.items() if n in common}


def crossfit_applies(method: str, n_references: int) -> bool:
    """Whether a subset of ``method`` built on ``n_references`` source models gets out-of-fold
    values: non-probability selectors with at least ``MIN_REFERENCE_MODELS`` sources."""

    return method not in PROBABILITY_DESIGNS and n_references >= MIN_REFERENCE_MODELS


def with_out_of_fold(selection: Selection, reference_correct, **kw) -> Selection:
    """``selection`` with :func:`out_of_fold_estimates` stored in its fitted state
    (``oof_<estimator>``); keyword arguments as there. When a fold's refit or draw fails (e.g. a
    DPP fold keeps fewer candidates than ``n``), ``selection`` is returned unchanged: its scores
    then use the in-sample calibration."""
    try:
        oof = out_of_fold_estimates(selection, reference_correct, **kw)
    except ValueError:
        return selection
    fitted = dict(selection.fitted)
    fitted.update({OOF_PREFIX + name: v for name, v in oof.items()})
    kw.pop("folds", None)
    edge: dict[str, np.ndarray] = {}
    if selection.method in EDGE_METHODS:
        try:  # the edge law is an addition: without it the interval is the cross-fitted one
            edge = edge_estimates(selection, reference_correct, **kw)
        except ValueError:
            edge = {}
    fitted.update({EDGE_PREFIX + name: v for name, v in edge.items() if name in oof})
    return dataclasses.replace(selection, fitted=fitted)


def stored_out_of_fold(
    selection: Selection, n_references: int, *, prefix: str = OOF_PREFIX
) -> dict[str, np.ndarray]:
    """The out-of-fold values stored in ``selection``, when aligned with ``n_references``
    (``prefix=EDGE_PREFIX``: the edge-fold values)."""
    return {
        key[len(prefix) :]: np.asarray(v, dtype=np.float64)
        for key, v in selection.fitted.items()
        if key.startswith(prefix) and np.shape(v) == (n_references,)
    }


def _conformal_quantile(scores: np.ndarray, confidence: float) -> float:
    """The ``ceil((r + 1) confidence)``-th smallest score (split conformal); inf when r is too
    small for the level."""
    rank = int(np.ceil((scores.size + 1) * confidence))
    return float(np.sort(scores)[rank - 1]) if rank <= scores.size else float("inf")


def crossfit_calibration(
    in_sample, out_of_fold, truth, *, confidence: float = 0.95, edge=None
) -> ReferenceCalibration:
    """The served subset's in-sample error law with conformal multipliers from out-of-fold errors.

    Parameters
    ----------
    in_sample, out_of_fold, truth : array_like, shape (r,)
        The estimator on the references with the served subset, with out-of-fold subsets
        (:func:`out_of_fold_estimates`), and the references' full accuracies.
    confidence : float
    edge : array_like, shape (r,), optional
        :func:`edge_estimates` (NaN outside the edge folds). Above the highest reference's
        accuracy the multiplier is at least the split-conformal quantile of the high edge's
        scores (same formula, the edge values in place of ``oof``), below the lowest
        reference's at least the low edge's (the largest score when the fold is too small for a
        finite quantile).

    Returns
    -------
    ReferenceCalibration
        ``bias = b(a)`` and ``spread = s(a)`` of :func:`app.core.estimation.intervals.calibrate_references`
        on the in-sample values; ``quantile(a)`` the split-conformal quantile
        (rank ``ceil((r_B + 1) confidence)``) of the scores
        ``|oof_j - truth_j - b(truth_j)| / s(truth_j)`` of the references in ``a``'s bin (lowest
        fifth of the references' accuracies, middle, highest fifth; a bin with fewer than
        :data:`MIN_BIN_REFERENCES` references, or too few for a finite quantile at
        ``confidence``, takes the pooled quantile, and an infinite pooled one the largest
        score), never below the in-sample Student quantile. ``crossfit`` is True,
        ``inflation`` 1.
    """
    truth = np.asarray(truth, dtype=np.float64).ravel()
    oof = np.asarray(out_of_fold, dtype=np.float64).ravel()
    cin = calibrate_references(in_sample, truth, confidence=confidence)
    if oof.shape != truth.shape:
        raise ValueError("out_of_fold: expected one value per reference model")
    pos = np.clip(np.round(truth / cin.grid_step).astype(np.int64), 0, cin.grid.size - 1)
    scores = np.abs(oof - truth - cin.bias[pos]) / cin.spread[pos]
    pooled = _conformal_quantile(scores, confidence)
    if not np.isfinite(pooled):
        pooled = float(scores.max())
    lo_cut, hi_cut = np.quantile(truth, [TAIL_SHARE, 1.0 - TAIL_SHARE])
    bins = (truth <= lo_cut, (truth > lo_cut) & (truth < hi_cut), truth >= hi_cut)
    q_bin = [
        _conformal_quantile(scores[b], confidence) if b.sum() >= MIN_BIN_REFERENCES else pooled
        for b in bins  # three bins
    ]
    q_bin = [qb if np.isfinite(qb) else pooled for qb in q_bin]  # a high level, a small bin
    g = cin.grid
    q = np.where(g <= lo_cut, q_bin[0], np.where(g >= hi_cut, q_bin[2], q_bin[1]))
    if edge is not None:
        e = np.asarray(edge, dtype=np.float64).ravel()
        if e.shape != truth.shape:
            raise ValueError("edge: expected one value per reference model")
        e_scores = np.abs(e - truth - cin.bias[pos]) / cin.spread[pos]
        for beyond, side in (
            (g > truth.max(), truth >= hi_cut),
            (g < truth.min(), truth <= lo_cut),
        ):
            sc = e_scores[side & np.isfinite(e_scores)]
            if sc.size:
                qe = _conformal_quantile(sc, confidence)
                q = np.where(beyond, np.maximum(q, qe if np.isfinite(qe) else sc.max()), q)
    q = np.maximum(q, cin.quantile)
    q.setflags(write=False)
    return ReferenceCalibration(
        g, cin.bias, cin.spread, q, cin.grid_step, cin.confidence, 1.0, crossfit=True
    )


def reference_calibrations(
    selection: Selection,
    reference_correct,
    *,
    level: float = 0.95,
    inflation: float = CALIBRATION_INFLATION,
    values: dict[str, np.ndarray] | None = None,
) -> dict[str, ReferenceCalibration]:
    """The error law :func:`app.core.scoring.score_models.score_models` inverts for each calibrated estimator, computed once
    from the reference models (pass the result as its ``calibrations``).

    Empty with fewer than :data:`MIN_REFERENCE_MODELS` references (:func:`app.core.scoring.score_models.score_models` then does
    not calibrate either). ``values``: :func:`app.core.scoring.reference.reference_estimates` when already computed. An
    estimator whose out-of-fold values the selection stores for exactly these references
    (:func:`with_out_of_fold`) gets the cross-fitted law
    (:func:`crossfit_calibration`, no ``inflation``); the others the
    in-sample law widened by ``inflation``.
    """
    ref = np.asarray(reference_correct, dtype=np.float64)
    if ref.ndim != 2 or ref.shape[0] < MIN_REFERENCE_MODELS:
        return {}
    vals = reference_estimates(selection, ref) if values is None else values
    truth = ref.mean(axis=1)
    oof = stored_out_of_fold(selection, ref.shape[0])
    edge = stored_out_of_fold(selection, ref.shape[0], prefix=EDGE_PREFIX)
    return {
        name: crossfit_calibration(v, oof[name], truth, confidence=level, edge=edge.get(name))
        if name in oof
        else calibrate_references(v, truth, confidence=level, inflation=inflation)
        for name, v in vals.items()  # a handful of estimators
        if name != "weighted_confidence"  # calibrated on confidences, not on correctness
    }


__all__ = [
    "CROSSFIT_FOLDS",
    "EDGE_METHODS",
    "EDGE_PREFIX",
    "MIN_BIN_REFERENCES",
    "OOF_PREFIX",
    "crossfit_applies",
    "crossfit_calibration",
    "edge_estimates",
    "out_of_fold_estimates",
    "reference_calibrations",
    "stored_out_of_fold",
    "with_out_of_fold",
]
