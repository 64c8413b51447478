"""Score a model that was evaluated only on a subset's items; optionally against a baseline.

Estimates, one per estimator the subset's method supports, from
:func:`app.core.scoring.score_models.score_models`; each says its ``basis``:

* ``design`` (probability subsets: ``random``, ``subtask_stratified``,
  ``confidence_stratified``): unweighted 0/1 results get the small-sample interval the request
  names (``interval``: ``jeffreys_fpc`` by default, ``wilson_fpc``, ``clopper_pearson``,
  ``jeffreys``, ``hypergeometric``); weighted subsets the stratified Horvitz-Thompson interval. From 50 items
  with reference models, also ``model_assisted`` (basis ``model-assisted``);
* ``model`` (DPP, Anchor Points, tinyBenchmarks): the estimator is re-run on the reference
  models (the subset's source models, or every model with full results when the method uses
  none) and its error law inverted (``reference_calibrated``): ``value`` is bias-corrected and
  ``raw_value`` keeps the estimator's own number. Those reference values and the error laws
  (:func:`app.core.scoring.score_models.reference_calibrations`) are cached per (subset, results stamp): a
  warm call only scores the new model.

Population shift: with IRT state (tinyBenchmarks), the scored model's MAP ability outside the
source models' range on any dimension, or person fit ``l_z < -2``; otherwise its accuracy on the subset outside
the range of the reference models' accuracies on the same items (the source models, or every
model with full results when the method uses none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _st
from sqlalchemy.orm import Session

from app.core.estimation.bounded import betting_interval, sign_flip_test
from app.core.estimation.intervals import SMALL_N_METHODS, ReferenceCalibration
from app.core.estimation.irt_estimates import item_bank
from app.core.estimation.stats import compare_to_baseline, fpc
from app.core.estimation.weighted import PROBABILITY_DESIGNS
from app.core.reliability.mdad import DEFAULT_THRESHOLD
from app.core.results import Selection
from app.core.scoring.score_models import (
    DEFAULT_SMALL_N,
    reference_calibrations,
    reference_estimates,
    score_models,
    size_needed_for_gap,
    weighted_paired_comparison,
)
from app.core.scoring.support import (
    GUTTMAN_QUANTILE,
    PERSON_FIT_LIMIT,
    guttman_limit,
    guttman_misfit,
    score_outside,
)
from app.db.models.subset import Subset, SubsetScore
from app.errors import FieldIssue, InvalidInput
from app.ingest import ParsedResults
from app.schemas.subsets import (
    BaselineComparison,
    EstimatePublic,
    PopulationShift,
    SubsetScorePublic,
)
from app.services.catalog.benchmarks import get_version, item_index
from app.services.catalog.matrices import FullMatrix, full_matrix, model_row, score_row
from app.services.platform.caching import MB, BoundedCache
from app.services.selection import drift, extrapolation, repeats
from app.services.selection.subsets import get_subset, to_selection

SIGN_FLIP_SEED = 35  # seed of a Monte Carlo sign-flip test (stored in the answer's test name)
REFERENCE_CACHE_BYTES = 64 * MB


def _placed(
    parsed: ParsedResults, slots: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """The upload's results (and confidences, if any) moved to the subset positions ``slots``."""
    y = np.empty(k)
    y[slots] = np.asarray(parsed.correct, dtype=np.float64)
    conf = None
    if parsed.confidence is not None:
        conf = np.empty(k)
        conf[slots] = np.asarray(parsed.confidence, dtype=np.float64)
    return y, conf


def align(parsed: ParsedResults, row: Subset, version) -> tuple[np.ndarray, np.ndarray | None]:
    """The upload's values in the subset's stored item order (422 on missing/foreign items).

    Uploads without item ids must list the subset's items sorted by position."""
    index = item_index(version)
    idx = np.frombuffer(row.indices, dtype="<i8")
    k = idx.shape[0]
    if parsed.item_ids is None:
        if parsed.n_items != k:
            raise InvalidInput(
                f"{parsed.n_items} values given for a subset of {k} items",
                field="correct",
                message=f"expected {k} values in position order (or give item ids)",
            )
        order = np.argsort(idx, kind="stable")
        return _placed(parsed, order, k)
    pos = index.positions(np.asarray(parsed.item_ids, dtype=str))
    slot = {p: i for i, p in enumerate(idx.tolist())}
    foreign = [str(parsed.item_ids[j]) for j, p in enumerate(pos.tolist()) if p not in slot]
    if foreign:
        raise InvalidInput(
            f"{len(foreign)} item(s) are not in this subset: {', '.join(map(repr, foreign[:5]))}",
            errors=[
                FieldIssue(("item_ids",), f"item {f!r} is not in the subset") for f in foreign[:20]
            ],
        )
    where = np.array([slot[p] for p in pos.tolist()], dtype=np.int64)
    have = np.zeros(k, dtype=bool)
    have[where] = True
    if not have.all():
        missing = index.item_ids[idx[~have]]
        raise InvalidInput(
            f"results missing for {int((~have).sum())} of the subset's {k} items: "
            + ", ".join(repr(str(m)) for m in missing[:5]),
            errors=[FieldIssue(("item_ids",), f"missing item {str(m)!r}") for m in missing[:20]],
        )
    return _placed(parsed, where, k)


@dataclass(frozen=True)
class IRTScore:
    """A scored model's ability on a tiny_benchmarks subset and the pieces of its SEs."""

    theta: np.ndarray
    lz: float
    se_rest: float  # delta-method SE of mean_{non-anchor} P(theta_hat, i)
    lam: float  # k / N
    lam_gp: float


def irt_score(selection: Selection, y: np.ndarray) -> IRTScore | None:
    """Score the model's ability from its anchor results when the subset stores an item bank."""
    if selection.method != "tiny_benchmarks" or "irt_a" not in selection.fitted:
        return None
    f = selection.fitted
    bank = item_bank(selection)
    anchors = np.asarray(f["anchor_candidate_positions"], dtype=np.int64)
    ability = bank.score(y[None, :], anchors, prior=float(f["ability_prior"]))
    rest = np.setdiff1d(np.arange(bank.n_items), anchors, assume_unique=True)
    se_rest = float(bank.predict_accuracy(ability, rest)[1][0]) if rest.size else 0.0
    lz = float(bank.person_fit(y[None, :], ability.theta, anchors)[0])
    return IRTScore(
        theta=ability.theta[0],
        lz=lz,
        se_rest=se_rest,
        lam=anchors.size / bank.n_items,
        lam_gp=float(f.get("lambda_gp", np.nan)),  # absent when gp-IRT was not calibrated
    )


@dataclass(frozen=True)
class References:
    """A subset's reference models (full 0/1 results), the estimators' values on them and the
    error laws the calibrated intervals invert (at the default level)."""

    correct: np.ndarray  # (r, N) uint8, read-only (small in the cache; converted per call)
    values: dict[str, np.ndarray]
    calibrations: dict[str, ReferenceCalibration]
    guttman_limit: float  # the person-fit limit off IRT subsets (NaN: < 2 references, or IRT)


# (subset id, results stamp) -> its references
_REFERENCES: BoundedCache[tuple[str, tuple], References] = BoundedCache(
    "scoring_references", REFERENCE_CACHE_BYTES
)


def reference_rows(fm: FullMatrix, row: Subset) -> list[int]:
    """Rows of the subset's source models with full results (every such model when the method
    records none)."""
    names = list(row.source_models or [])
    rows = fm.score_rows if fm.score_rows is not None else fm.rows  # graded: every full model
    if names:
        return [rows[n] for n in names if n in rows]
    return list(range(len(rows)))


def reference_matrix(fm: FullMatrix) -> np.ndarray:
    """The matrix :func:`reference_rows` index: every full-coverage model's scores on a graded
    benchmark (issue 35), else the 0/1 matrix."""
    return fm.scores if fm.scores is not None else fm.correct


def references(fm: FullMatrix, row: Subset, selection: Selection) -> References:
    """The subset's references, cached per (subset, results stamp)."""
    key = (row.id, fm.stamp)
    hit = _REFERENCES.get(key)
    if hit is not None:
        return hit
    rows = reference_rows(fm, row)
    ref = reference_matrix(fm)[rows]  # a copy (fancy indexing) of the matrix
    ref.setflags(write=False)
    values = reference_estimates(selection, ref) if len(rows) else {}
    for v in values.values():
        v.setflags(write=False)
    cals = reference_calibrations(selection, ref, values=values) if len(rows) else {}
    limit = float("nan")
    if selection.method != "tiny_benchmarks":  # IRT subsets check l_z instead
        limit = guttman_limit(ref[:, selection.indices])
    out = References(correct=ref, values=values, calibrations=cals, guttman_limit=limit)
    _REFERENCES.discard_where(lambda k: k[0] == row.id and k[1] != fm.stamp)
    _REFERENCES.put(key, out)
    return out


def check_interval(interval: str) -> str:
    if interval not in SMALL_N_METHODS:
        raise InvalidInput(
            f"unknown interval {interval!r}",
            field="interval",
            message=f"choose from {list(SMALL_N_METHODS)}",
        )
    return interval


def estimates_for(
    selection: Selection,
    y: np.ndarray,
    conf: np.ndarray | None,
    n_items: int,
    refs: References | None = None,
    *,
    interval: str = DEFAULT_SMALL_N,
) -> list[EstimatePublic]:
    """Every estimate of one model on the subset (:func:`app.core.scoring.score_models.score_models`)."""
    ref = None if refs is None or refs.correct.shape[0] == 0 else refs.correct
    batches = score_models(
        selection,
        y[None, :],
        n_items,
        confidence_values=None if conf is None else conf[None, :],
        reference_correct=ref,
        small_n=check_interval(interval),
        reference_values=None if refs is None else refs.values,
        calibrations=None if refs is None else refs.calibrations,
    )
    return [EstimatePublic(**b.row(0)) for b in batches]


def population_shift(refs: References, selection: Selection, y: np.ndarray) -> PopulationShift:
    ref = refs.correct[:, selection.indices].astype(np.float64)  # (r, k) on the subset's items
    score = irt_score(selection, y)
    if score is not None:
        theta, lz = score.theta, score.lz
        lo = np.asarray(selection.fitted["theta_min"])
        hi = np.asarray(selection.fitted["theta_max"])
        outside = np.flatnonzero((theta < lo) | (theta > hi))
        reasons = []
        if outside.size:
            reasons.append(
                f"ability outside the source models' range on dimension(s) {outside.tolist()}"
            )
        if lz < PERSON_FIT_LIMIT:
            reasons.append(f"poor person fit (l_z = {lz:.2f} < {PERSON_FIT_LIMIT})")
        reasons += _score_range(selection, y, ref)[0]
        return PopulationShift(
            checked="irt_ability_and_person_fit",
            flagged=bool(reasons),
            reasons=reasons,
            details={
                "theta": theta.tolist(),
                "source_theta_min": lo.tolist(),
                "source_theta_max": hi.tolist(),
                "person_fit_lz": lz,
            },
        )
    reasons, details = _score_range(selection, y, ref)
    if not details["reference_models"]:
        return PopulationShift(
            checked="none",
            flagged=False,
            reasons=["no reference models with full results"],
            details=details,
        )
    misfit, g_star, limit = guttman_misfit(y, ref, limit=refs.guttman_limit)
    details.update(
        {
            "guttman_errors": float(g_star[0]),
            "reference_guttman_limit": limit if np.isfinite(limit) else None,  # < 2 references
        }
    )
    if misfit[0]:
        reasons.append(
            f"poor person fit (normed Guttman errors {g_star[0]:.3f} above "
            f"{GUTTMAN_QUANTILE:.0%} of the reference models', {limit:.3f}: it gets items they "
            "find easy wrong and hard ones right)"
        )
    return PopulationShift(
        checked="accuracy_range_and_person_fit",
        flagged=bool(reasons),
        reasons=reasons,
        details=details,
    )


def _score_range(
    selection: Selection, y: np.ndarray, reference: np.ndarray
) -> tuple[list[str], dict[str, Any]]:
    """A subset score no source model reached: ``(reasons, details)``."""
    value = float(y @ selection.weights)
    details: dict[str, Any] = {"reference_models": len(reference), "subset_estimate": value}
    if not len(reference):
        return [], details
    outside, lo, hi = score_outside([value], reference @ selection.weights)
    details.update({"reference_min": lo, "reference_max": hi})
    if not outside[0]:
        return [], details
    return [
        f"subset estimate {value:.3f} outside the reference models' range [{lo:.3f}, {hi:.3f}]"
    ], details


def baseline_comparison(
    session: Session,
    row: Subset,
    selection: Selection,
    y: np.ndarray,
    baseline: str,
    threshold: float,
) -> BaselineComparison:
    fm = full_matrix(session, row.benchmark_version_id)
    graded = not np.all((y == 0) | (y == 1)) or (fm.graded and baseline not in fm.rows)
    if graded:
        return graded_baseline(fm, selection, y, baseline, threshold)
    b = model_row(fm, baseline, "baseline")
    base_full = fm.correct[b].astype(np.float64)
    k, n_items = selection.size, fm.n_items
    if np.allclose(selection.weights, 1.0 / k):
        cmp = compare_to_baseline(y, base_full, selection.indices)
    else:
        cmp = weighted_paired_comparison(y, base_full, selection.indices, selection.weights)
    needed = size_needed_for_gap(cmp.n_new_only, cmp.n_baseline_only, k, n_items, threshold)
    return BaselineComparison(
        baseline=baseline,
        baseline_full_accuracy=float(fm.accuracy[b]),
        p_better=cmp.p_better,
        mean_diff=cmp.mean_diff,
        se=cmp.se,
        n_shared=cmp.n_shared,
        n_new_only=cmp.n_new_only,
        n_baseline_only=cmp.n_baseline_only,
        mcnemar_p=cmp.mcnemar_p,
        size_needed=needed,
        large_enough=needed is not None and k >= needed,
        threshold=threshold,
    )


def graded_baseline(
    fm: FullMatrix, selection: Selection, y: np.ndarray, baseline: str, threshold: float
) -> BaselineComparison:
    """The comparison with a baseline when either side's scores are graded (issue 35).

    ``d_i = y_i - b_i`` on the subset's items: the estimate and SE of
    :func:`app.core.estimation.stats.compare_to_baseline` (weighted:
    :func:`app.core.estimation.weighted.weighted_paired_comparison`), the paired sign-flip
    permutation test in place of McNemar, and for a uniform random subset the betting interval
    of the full-benchmark difference (of ``(d + 1) / 2``, finite-population). ``size_needed``
    is the normal-approximation size ``Φ(|d̄| / SE_n) >= threshold`` (the 0/1 exact answer
    needs discordant counts).
    """
    if fm.scores is not None and baseline in (fm.score_rows or {}):
        base_full = fm.scores[score_row(fm, baseline, "baseline")].astype(np.float64)
    else:
        base_full = fm.correct[model_row(fm, baseline, "baseline")].astype(np.float64)
    k, n_items = selection.size, fm.n_items
    idx = np.asarray(selection.indices, dtype=np.int64)
    d = y - base_full[idx]
    uniform = bool(np.allclose(selection.weights, 1.0 / k))
    if uniform:
        mean = float(d.mean())
        se = float(d.std(ddof=1) / np.sqrt(k) * np.sqrt(fpc(k, n_items))) if k > 1 else 0.0
    else:
        w = np.asarray(selection.weights, dtype=np.float64)
        mean = float(w @ d / w.sum())
        ss = float(np.sum(w**2 * (d - mean) ** 2)) / w.sum() ** 2
        se = float(np.sqrt(fpc(k, n_items) * ss * k / (k - 1))) if k > 1 else 0.0
    p_better = (
        float(_st.norm.cdf(mean / se))
        if se > 0
        else (1.0 if mean > 0 else 0.0 if mean < 0 else 0.5)
    )
    test = sign_flip_test(d, seed=SIGN_FLIP_SEED)
    ci_low = ci_high = None
    if uniform and selection.method in PROBABILITY_DESIGNS:
        lo, hi = betting_interval((d + 1.0) / 2.0, n_items)
        ci_low, ci_high = float(2 * lo[0] - 1), float(2 * hi[0] - 1)
    needed = None
    sd = float(d.std(ddof=1)) if k > 1 else 0.0
    if mean != 0 and sd > 0:
        n0 = (float(_st.norm.ppf(threshold)) * sd / abs(mean)) ** 2
        needed = int(min(n_items, np.ceil(n0 / (1.0 + (n0 - 1.0) / n_items))))
    elif mean != 0:
        needed = 1
    return BaselineComparison(
        baseline=baseline,
        baseline_full_accuracy=float(base_full.mean()),
        p_better=p_better,
        mean_diff=mean,
        se=se,
        n_shared=k,
        n_new_only=int(np.count_nonzero(d > 0)),
        n_baseline_only=int(np.count_nonzero(d < 0)),
        mcnemar_p=None,
        size_needed=needed,
        large_enough=needed is not None and k >= needed,
        threshold=threshold,
        test="sign_flip_exact" if test.method == "exact" else "sign_flip_monte_carlo",
        p_value=test.p_value,
        ci_low=ci_low,
        ci_high=ci_high,
        note="graded scores: paired sign-flip permutation test (McNemar needs 0/1); "
        "n_new_only / n_baseline_only count items where the new model scores higher / lower"
        + ("; betting interval for the full-benchmark difference" if ci_low is not None else ""),
    )


def score_model(
    session: Session,
    sid: str,
    model_name: str,
    parsed: ParsedResults,
    *,
    baseline: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    interval: str = DEFAULT_SMALL_N,
) -> SubsetScorePublic:
    """Estimate the model's full-benchmark accuracy from its subset results; store the score.

    ``interval`` names the small-sample interval of unweighted probability subsets."""
    if not 0.5 <= threshold < 1.0:
        raise InvalidInput(
            "threshold must lie in [0.5, 1)",
            field="threshold",
            message="a probability in [0.5, 1)",
        )
    check_interval(interval)
    row = get_subset(session, sid, with_fitted=True)
    version = get_version(session, row.benchmark_version_id)
    y, conf = align(parsed, row, version)
    selection = to_selection(row)
    refs = references(full_matrix(session, row.benchmark_version_id), row, selection)
    estimates = estimates_for(selection, y, conf, version.n_items, refs, interval=interval)
    shift = population_shift(refs, selection, y)
    warnings = drift.score_warnings(
        session, row.benchmark_version_id, row.method, row.source_models, model_name, parsed
    )
    shift = drift.extend_shift(shift, warnings)
    repeated = repeats.repeated_block(
        parsed, y, selection, version.n_items, lambda p: align(p, row, version)[0]
    )
    estimates = estimates + repeats.repeated_estimate(repeated)
    cmp = None
    if baseline is not None:
        cmp = baseline_comparison(session, row, selection, y, baseline, threshold)
    answer, reason = extrapolation.choose_answer(
        estimates,
        shift,
        benchmark=f"{version.benchmark.name}@v{version.version}",
        size=selection.size,
    )
    score = SubsetScore(
        subset_id=row.id,
        model_name=model_name,
        n_items=selection.size,
        subset_accuracy=float(y.mean()),
        estimates={"items": [e.model_dump() for e in estimates]},
        baseline=None if cmp is None else cmp.model_dump(),
        population_shift=shift.model_dump(),
    )
    session.add(score)
    session.flush()
    return SubsetScorePublic(
        id=score.id,
        subset_id=row.id,
        model=model_name,
        n_items=score.n_items,
        subset_accuracy=score.subset_accuracy,
        estimates=estimates,
        baseline=cmp,
        population_shift=shift,
        answer=answer,
        answer_reason=reason,
        created_at=score.created_at,
        repeated_samples=repeated,
        warnings=warnings,
    )
