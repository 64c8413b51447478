"""Pair verdicts and sample-size plans for a benchmark, and verdicts for a fixed subset.

``random`` is answered exactly from the stored results (:mod:`app.core.reliability.exact` via
:func:`app.core.reliability.planning.verdict`); other methods from the robust agreement curves of the latest
analysis that covers them (409 naming the analysis to run when there is none).

Speed: the decoded full-coverage 0/1 matrix of a benchmark version is cached per process (LRU),
keyed by the version and a stamp of its results (count, newest ``updated_at``), so a verdict costs
one small query plus O(items) numpy; a verdict asked before is answered from memory while the
results stamp was confirmed within the last second (:func:`cached_verdict`). The benchmark-wide
exact MDAD of random subsets at a size is also cached under the same stamp; the first verdict at a
new size computes it over all model pairs (seconds on GPQA), later ones read it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.estimation.stats import MIN_DISCORDANT
from app.core.reliability.exact import exact_agreement
from app.core.reliability.mdad import DEFAULT_THRESHOLD
from app.core.reliability.planning import plan as core_plan
from app.core.reliability.planning import verdict as core_verdict
from app.core.results import MDADResult, Verdict
from app.core.selectors import SELECTORS
from app.core.sequential.cost import random_subset_cost
from app.db.models.benchmark import BenchmarkVersion
from app.errors import Conflict, InvalidInput, NotFound
from app.schemas.subsets import (
    PairedOutcomePublic,
    PlanPublic,
    SubsetCost,
    SubsetVerdictPublic,
    VerdictPublic,
)
from app.services.catalog.benchmarks import get_version, predicted_item_costs
from app.services.catalog.matrices import (
    FullMatrix,
    fresh_matrix,
    full_matrix,
    model_row,
    on_matrix_reload,
    score_row,
)
from app.services.limits.children import Shared
from app.services.limits.expensive import EXPENSIVE
from app.services.platform.caching import MB, BoundedCache, SingleFlight, memoized
from app.services.reliability import graded_verdicts, verdict_story
from app.services.reliability.paired import check_min_discordant, paired_public, significance
from app.services.selection import drift
from app.services.selection.subsets import get_subset

EXACT_METHODS = frozenset({"random"})
PLAN_SIZES_POINTS = 10


MDAD_CACHE_BYTES = 64 * MB
VERDICT_CACHE_BYTES = 64 * MB
_MDADS: BoundedCache[tuple[uuid.UUID, tuple, int, float], MDADResult] = BoundedCache(
    "exact_mdads", MDAD_CACHE_BYTES
)
_VERDICTS: BoundedCache[tuple, VerdictPublic] = BoundedCache("verdicts", VERDICT_CACHE_BYTES)
MDAD_FLIGHTS = SingleFlight()  # one benchmark-wide exact MDAD computation per key at a time


def _forget_stale_mdads(version_id: uuid.UUID, stamp: tuple) -> None:
    _MDADS.discard_where(lambda k: k[0] == version_id and k[1] != stamp)


on_matrix_reload(_forget_stale_mdads)


def exact_random_mdad(fm: FullMatrix, n: int, threshold: float) -> MDADResult:
    """Benchmark-wide exact agreement of random ``n``-subsets, cached per results stamp."""
    key = (fm.version_id, fm.stamp, int(n), float(threshold))
    hit = _MDADS.get(key)
    if hit is not None:
        return hit
    with MDAD_FLIGHTS(key):
        hit = _MDADS.get(key)
        if hit is not None:
            return hit
        # cost-aware admission: a bounded pool of child processes at a lower CPU priority
        # (the matrix is sent to a child once per results stamp)
        result = EXPENSIVE.call(
            "an exact MDAD",
            exact_agreement,
            Shared(("mdad-matrix", fm.version_id, fm.stamp), fm.correct),
            int(n),
            threshold=threshold,
        )
        _MDADS.put(key, result)
    return result


def _analysis_cells(
    session: Session, version_id: uuid.UUID, method: str
) -> tuple[Any, list[MDADResult]]:
    from app.services.reliability.analyses import latest_analysis

    stored = latest_analysis(session, version_id, [method])
    if stored is None:
        ref = version_ref(session, version_id)
        raise Conflict(
            f"method {method!r} is answered from an analysis, and {ref} has none of it yet: run "
            f"`{analyze_command(ref, method)}` (API: POST /v1/benchmarks/{ref}/analyses), "
            "or use --method random (exact, no analysis needed)",
            field="method",
            message="needs an analysis",
        )
    cells = [stored.cell(method, n, "seen") for n in stored.sizes]
    return stored, cells


def analyze_command(ref: str, method: str) -> str:
    """The CLI command that makes verdicts and plans of ``method`` possible."""
    return f"benchslice analyze --benchmark {ref} --methods {method}"


def _check_method(method: str) -> None:
    if method not in SELECTORS:
        raise InvalidInput(
            f"unknown method {method!r}",
            field="method",
            message=f"choose from {sorted(SELECTORS)}",
        )


def _check_threshold(threshold: float, field: str = "threshold") -> None:
    if not 0.5 <= threshold < 1.0:
        raise InvalidInput(
            f"{field} must lie in [0.5, 1)",
            field=field,
            message="a probability in [0.5, 1)",
        )


def pair_verdict(
    session: Session,
    version_id: uuid.UUID,
    model_a: str,
    model_b: str,
    *,
    size: int,
    method: str = "random",
    threshold: float = DEFAULT_THRESHOLD,
    min_discordant: int = MIN_DISCORDANT,
) -> VerdictPublic:
    """Whether a ``size``-item subset built by ``method`` orders the pair like the benchmark,
    with the pair's paired outcome on all items (``undecidable`` below ``min_discordant``
    discordant items)."""
    _check_method(method)
    _check_threshold(threshold)
    check_min_discordant(min_discordant)
    if model_a == model_b:
        raise InvalidInput(
            "model_a and model_b must differ",
            field="model_b",
            message="same as model_a",
        )
    fm = full_matrix(session, version_id)
    graded = fm.graded and (model_a not in fm.rows or model_b not in fm.rows)
    # an unknown model is a 404 before the size is checked (as for 0/1 results since issue 9)
    row_of = score_row if graded else model_row
    a = row_of(fm, model_a, "model_a")
    b = row_of(fm, model_b, "model_b")
    if size > fm.n_items:
        raise InvalidInput(
            f"size {size} exceeds the benchmark's {fm.n_items} items",
            field="size",
            message=f"at most {fm.n_items}",
        )
    if graded:
        return _graded_pair_verdict(session, fm, model_a, model_b, size, method, threshold)
    pair = fm.correct[[a, b]]
    paired = paired_public(pair[0], pair[1], min_discordant)
    ref = version_ref(session, version_id)
    if method in EXACT_METHODS:
        exact = exact_random_mdad(fm, size, threshold)
        v = _exact_verdict(fm.n_items, paired.n10, paired.n01, size, method, threshold, exact.mdad)
        public = to_public(v, model_a, model_b, fm.accuracy[a], fm.accuracy[b], paired)
        public.basis_note = verdict_story.basis_note(v.basis, n_pairs=exact.n_pairs)
        verdict_story.tell(public, ref, fm.n_items)
        public.warnings = drift.pair_warnings(session, version_id, model_a, model_b)
        key = _verdict_key(
            version_id, fm.stamp, model_a, model_b, size, method, threshold, min_discordant
        )
        _VERDICTS.put(key, public)
        return public
    stored, cells = _analysis_cells(session, version_id, method)
    v = core_verdict(pair, 0, 1, size, method=method, results=cells, threshold=threshold)
    public = to_public(v, model_a, model_b, fm.accuracy[a], fm.accuracy[b], paired)
    public.basis_note = verdict_story.basis_note(v.basis, runs=stored.runs)
    verdict_story.tell(public, ref, fm.n_items)
    public.warnings = drift.pair_warnings(session, version_id, model_a, model_b)
    return public


def _graded_pair_verdict(
    session: Session,
    fm: FullMatrix,
    model_a: str,
    model_b: str,
    size: int,
    method: str,
    threshold: float,
) -> VerdictPublic:
    """A pair with graded scores (:mod:`app.services.reliability.graded_verdicts`)."""
    a = score_row(fm, model_a, "model_a")
    b = score_row(fm, model_b, "model_b")
    ref = version_ref(session, fm.version_id)
    if method not in EXACT_METHODS:
        # the analysis runs on the same graded matrix, so its curves (agreement by gap) apply;
        # the pair enters only through its graded gap
        stored, cells = _analysis_cells(session, fm.version_id, method)
        assert fm.scores is not None
        v = core_verdict(
            fm.scores[[a, b]], 0, 1, size, method=method, results=cells, threshold=threshold
        )
        public = to_public(
            v, model_a, model_b, fm.scores[a].mean(dtype=np.float64),
            fm.scores[b].mean(dtype=np.float64),
        )  # fmt: skip
        public.basis_note = verdict_story.basis_note(v.basis, runs=stored.runs)
        public.graded = graded_verdicts.graded_pair(fm.scores[a], fm.scores[b], None)
        verdict_story.tell(public, ref, fm.n_items)
        public.warnings = drift.pair_warnings(session, fm.version_id, model_a, model_b)
        return public
    public = graded_verdicts.graded_verdict(fm, a, b, model_a, model_b, size, threshold)
    verdict_story.tell(public, ref, fm.n_items)
    public.warnings = drift.pair_warnings(session, fm.version_id, model_a, model_b)
    return public


def version_ref(session: Session, version_id: uuid.UUID) -> str:
    """``name@vN`` of a version: how the commands a verdict suggests address its benchmark."""
    row = session.get(BenchmarkVersion, version_id)
    if row is None:
        raise NotFound(f"benchmark {version_id} does not exist")
    return f"{row.benchmark.name}@v{row.version}"


def _verdict_key(version_id, stamp, model_a, model_b, size, method, threshold, min_discordant):
    """The key of an exact verdict in ``_VERDICTS`` (one spelling for ``put`` and ``get``)."""
    return (
        version_id,
        stamp,
        model_a,
        model_b,
        int(size),
        method,
        float(threshold),
        int(min_discordant),
    )


def cached_verdict(
    version_id: uuid.UUID,
    model_a: str,
    model_b: str,
    *,
    size: int,
    method: str = "random",
    threshold: float = DEFAULT_THRESHOLD,
    min_discordant: int = MIN_DISCORDANT,
) -> VerdictPublic | None:
    """An exact verdict computed before, if the version's results stamp was confirmed within
    ``STAMP_TTL_SECONDS`` of :mod:`app.services.catalog.matrices` (no I/O: callable from the event loop). A results change is therefore
    seen by this process at most that long after it commits; anything else goes the full way."""
    fm = fresh_matrix(version_id)
    if fm is None:
        return None
    key = _verdict_key(
        version_id, fm.stamp, model_a, model_b, size, method, threshold, min_discordant
    )
    return _VERDICTS.get(key)


@memoized("verdict_pairs", 16 * MB)
def _exact_verdict(
    n_items: int, n10: int, n01: int, size: int, method: str, threshold: float, mdad: float | None
) -> Verdict:
    """The exact verdict depends on the pair only through its discordant counts: computed once
    per ``(N, n10, n01, size, threshold)`` on a canonical two-row matrix with those counts."""
    pair = np.zeros((2, n_items), dtype=np.uint8)
    pair[0, :n10] = 1
    pair[1, n10 : n10 + n01] = 1
    return core_verdict(pair, 0, 1, size, method=method, threshold=threshold, mdad=mdad)


def to_public(
    v: Verdict,
    name_a: str,
    name_b: str,
    acc_a: float,
    acc_b: float,
    paired: PairedOutcomePublic | None = None,
) -> VerdictPublic:
    return VerdictPublic(
        model_a=name_a,
        model_b=name_b,
        full_accuracy_a=float(acc_a),
        full_accuracy_b=float(acc_b),
        gap=float(v.gap),
        method=v.method,
        size=v.n,
        p_same_order=v.p_same,
        p_tie=v.p_tie,
        p_reversed=v.p_reversed,
        ci=[v.ci_low, v.ci_high],
        mdad_at_size=v.mdad,
        threshold=v.threshold,
        distinguishable=v.distinguishable,
        size_needed=v.n_needed,
        basis=v.basis,  # type: ignore[arg-type]
        basis_note=verdict_story.basis_note(v.basis),
        paired=paired,
    )


def plan_size(
    session: Session,
    version_id: uuid.UUID,
    *,
    gap: float,
    method: str = "random",
    probability: float = DEFAULT_THRESHOLD,
    model_a: str | None = None,
    model_b: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PlanPublic:
    """Smallest subset size whose MDAD at ``probability`` is at most ``gap``.

    ``random``: exact curves at a geometric grid of sizes (10..N, cached per results stamp),
    bisected to the two sizes bracketing the answer, crossing interpolated in log n
    (``evidence`` lists the sizes evaluated). Other methods: the latest analysis' robust curves.

    ``significance`` answers the other question (:func:`significance`): the paired sample size
    detecting ``gap`` at ``alpha`` with ``power``, from the pair's discordance when
    ``model_a``/``model_b`` are given, else the benchmark's typical discordance.
    """
    _check_method(method)
    _check_threshold(probability, "probability")
    if not 0.0 < gap < 1.0:
        raise InvalidInput(
            "gap must lie in (0, 1) (accuracy units: 0.02 = 2 points)",
            field="gap",
            message="in (0, 1)",
        )
    for name, value in (("alpha", alpha), ("power", power)):
        if not 0.0 < value < 1.0:
            raise InvalidInput(f"{name} must lie in (0, 1)", field=name, message="in (0, 1)")
    if (model_a is None) != (model_b is None):
        raise InvalidInput(
            "give both model_a and model_b (or neither)",
            field="model_b" if model_b is None else "model_a",
            message="the other model of the pair is missing",
        )
    if model_a is not None and model_a == model_b:
        raise InvalidInput(
            "model_a and model_b must differ", field="model_b", message="same as model_a"
        )
    fm_all = full_matrix(session, version_id)
    samples = graded_verdicts.samples_plan(session, fm_all, model_a, model_b, gap, alpha, power)
    if fm_all.graded and method in EXACT_METHODS:
        plan = _graded_plan(fm_all, gap, probability, model_a, model_b, alpha, power)
        if plan.size is not None:
            plan.cost = plan_costs(session, version_id, int(plan.size))
        return plan.model_copy(update={"samples": samples})
    rows = None
    if fm_all.graded:  # a curve-based method on graded scores: Var(d_i) of graded differences
        if model_a is not None and model_b is not None:
            rows = (score_row(fm_all, model_a, "model_a"), score_row(fm_all, model_b, "model_b"))
        sig = graded_verdicts.graded_significance(fm_all, gap, alpha=alpha, power=power, rows=rows)
    else:
        if model_a is not None and model_b is not None:
            rows = (model_row(fm_all, model_a, "model_a"), model_row(fm_all, model_b, "model_b"))
        sig = significance(
            fm_all.correct,
            (fm_all.version_id, fm_all.stamp),
            gap,
            alpha=alpha,
            power=power,
            rows=rows,
        )
    evidence: dict[str, Any] = {}
    if method in EXACT_METHODS:
        fm = full_matrix(session, version_id)
        if fm.correct.shape[0] < 2:
            raise Conflict("planning needs at least two models with full 0/1 results")
        size, cells = exact_plan_size(fm, gap, probability)
        evidence["n_models"] = int(fm.correct.shape[0])
        evidence["n_items"] = fm.n_items
        evidence["sizes"] = [c.n for c in cells]
        evidence["mdads"] = [c.mdad for c in cells]
        basis = "exact"
    else:
        stored, cells = _analysis_cells(session, version_id, method)
        evidence["analysis_id"] = str(stored.id)
        evidence["analysis_runs"] = stored.runs
        p = core_plan(gap, method, probability, results=cells)
        size, basis = p.n, p.basis
        evidence["sizes"] = p.sizes.tolist()
        evidence["mdads"] = [None if np.isnan(x) else float(x) for x in p.mdads.tolist()]
    return PlanPublic(
        gap=gap,
        method=method,
        probability=probability,
        size=size,
        basis=basis,  # type: ignore[arg-type]
        evidence=evidence,
        significance=sig,
        cost=[] if size is None else plan_costs(session, version_id, int(size)),
        samples=samples,
    )


def plan_costs(session: Session, version_id: uuid.UUID, size: int) -> list[SubsetCost]:
    """Expected cost (and spread over random subsets) of ``size`` items, per stored unit."""
    version = get_version(session, version_id)
    out = []
    for unit, per_item, sources in predicted_item_costs(session, version):
        mean, sd = random_subset_cost(per_item, min(size, per_item.size))
        out.append(
            SubsetCost(
                unit=unit,  # type: ignore[arg-type]
                expected=mean,
                sd=sd,
                source="predicted from stored models (" + ", ".join(sources) + "): per item "
                "the median over models; spread over random subsets of this size",
            )
        )
    return out


def _graded_plan(
    fm: FullMatrix,
    gap: float,
    probability: float,
    model_a: str | None,
    model_b: str | None,
    alpha: float,
    power: float,
) -> PlanPublic:
    """The plan of a benchmark with graded scores: simulated MDADs over every full-coverage
    model (:func:`app.services.reliability.graded_verdicts.graded_plan`)."""
    assert fm.score_rows is not None
    if len(fm.score_rows) < 2:
        raise Conflict(
            "planning needs at least two models with results on every item; push another "
            "(`benchslice push --benchmark NAME PATH`)"
        )
    rows = None
    if model_a is not None and model_b is not None:
        rows = (score_row(fm, model_a, "model_a"), score_row(fm, model_b, "model_b"))
    sig = graded_verdicts.graded_significance(fm, gap, alpha=alpha, power=power, rows=rows)
    size, cells = graded_verdicts.graded_plan(fm, gap, probability)
    return PlanPublic(
        gap=gap,
        method="random",
        probability=probability,
        size=size,
        basis="simulated",
        evidence=graded_verdicts.plan_evidence(fm, cells),
        significance=sig,
    )


def exact_plan_size(fm: FullMatrix, gap: float, probability: float) -> tuple[int | None, list]:
    """The smallest random-subset size whose exact MDAD is at most ``gap``, and the exact
    curves it was read from (ascending size).

    The grid sizes bracketing the answer are found by bisection on the grid, then the size
    itself by bisection on the integers between them, each step one exact pass over all model
    pairs (cached per results stamp): about log2(N) passes. The evidence therefore shows the
    answer's own row (its MDAD is at most the gap) next to the size just below it (whose MDAD
    is not), never a size read off an interpolation. Assumes the exact agreement at ``gap`` is
    non-decreasing in ``n`` between the two grid sizes (true of exact random curves in
    practice).
    """
    cell: dict[int, MDADResult] = {}

    def reaches(n: int) -> bool:
        if n not in cell:
            cell[n] = exact_random_mdad(fm, n, probability)
        return float(cell[n].curve.at(gap)) >= probability

    grid = exact_grid(fm.n_items)
    lo, hi = -1, len(grid) - 1
    if not reaches(grid[hi]):
        return None, [cell[n] for n in sorted(cell)]
    while hi - lo > 1:  # first reaching grid index in (lo, hi]
        mid = (lo + hi) // 2
        if reaches(grid[mid]):
            hi = mid
        else:
            lo = mid
    low_n = 0 if hi == 0 else int(grid[hi - 1])
    high_n = int(grid[hi])
    if hi > 0:
        reaches(low_n)
    while high_n - low_n > 1:  # first reaching size in (low_n, high_n]
        mid = (low_n + high_n) // 2
        if reaches(mid):
            high_n = mid
        else:
            low_n = mid
    if low_n >= 1:
        reaches(low_n)  # the row just below the answer, for the evidence
    return high_n, [cell[n] for n in sorted(cell)]


def exact_grid(n_items: int, points: int = PLAN_SIZES_POINTS) -> Sequence[int]:
    return np.unique(
        np.geomspace(min(10, n_items), n_items, points).round().astype(np.int64)
    ).tolist()


def subset_verdict(
    session: Session,
    sid: str,
    model_a: str,
    model_b: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> SubsetVerdictPublic:
    """Does this fixed subset order the pair like the full benchmark? Plus P for a fresh draw.

    The subset's estimate of each model is its default linear estimator (the stored weights on
    correctness); ties count as not preserving the order (paper §4.1).
    """
    _check_threshold(threshold)
    row = get_subset(session, sid)
    if model_a == model_b:
        raise InvalidInput(
            "model_a and model_b must differ",
            field="model_b",
            message="same as model_a",
        )
    fm = full_matrix(session, row.benchmark_version_id)
    if fm.graded and (model_a not in fm.rows or model_b not in fm.rows):
        assert fm.scores is not None
        a, b = score_row(fm, model_a, "model_a"), score_row(fm, model_b, "model_b")
        pair_rows = fm.scores[[a, b]].astype(np.float64)
    else:
        a, b = model_row(fm, model_a, "model_a"), model_row(fm, model_b, "model_b")
        pair_rows = fm.correct[[a, b]].astype(np.float64)
    idx = np.frombuffer(row.indices, dtype="<i8")
    w = np.frombuffer(row.weights, dtype="<f8")
    est = pair_rows[:, idx] @ w
    full_acc = pair_rows.mean(axis=1)
    gap = float(full_acc[0] - full_acc[1])
    d_est = float(est[0] - est[1])
    same = bool(np.copysign(1.0, d_est) == np.copysign(1.0, gap) and d_est != 0)
    fresh = None
    unavailable = None
    try:
        fresh = pair_verdict(
            session,
            row.benchmark_version_id,
            model_a,
            model_b,
            size=row.size,
            method=row.method,
            threshold=threshold,
        )
    except Conflict as exc:
        unavailable = exc.detail
    return SubsetVerdictPublic(
        subset_id=row.id,
        model_a=model_a,
        model_b=model_b,
        full_accuracy_a=float(full_acc[0]),
        full_accuracy_b=float(full_acc[1]),
        gap=gap,
        subset_estimate_a=float(est[0]),
        subset_estimate_b=float(est[1]),
        subset_gap=d_est,
        same_order=same,
        tie=d_est == 0,
        fresh_draw=fresh,
        fresh_draw_unavailable=unavailable,
        warnings=[
            *drift.source_warnings(row.method, row.source_models),
            *drift.pair_warnings(session, row.benchmark_version_id, model_a, model_b),
        ],
    )


def clear_caches() -> None:
    graded_verdicts.clear_caches()
    for cache in (_MDADS, _VERDICTS):
        cache.clear()
    _exact_verdict.cache_clear()  # type: ignore[attr-defined]
