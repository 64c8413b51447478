"""The pair, session and subset pages of the browser view (read-only; see app/web/pages.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app import formatting as fmt
from app.core.reliability.mdad import DEFAULT_THRESHOLD
from app.core.selectors import SELECTORS
from app.db.models import BenchmarkVersion
from app.db.repositories.subsets import SubsetScoreRepository
from app.errors import DomainError, InvalidInput
from app.schemas.gates import GatePublic
from app.schemas.sessions import SessionPublic
from app.schemas.subsets import SubsetPublic, VerdictPublic
from app.services.catalog import matrices
from app.services.catalog.benchmarks import get_version
from app.services.evaluation import gates as gates_service
from app.services.evaluation import sessions as sessions_service
from app.services.platform.caching import MB, BoundedCache
from app.services.reliability import graded_verdicts, verdict_story, verdicts
from app.services.reliability.analyses import analysed_methods, latest_analysis
from app.services.selection import extrapolation
from app.services.selection import subsets as subsets_service
from app.web import page_plots

DEFAULT_SIZE = 25
EXPORT_FORMATS = tuple(subsets_service.MEDIA_TYPES)


# --- /ui/benchmarks/{benchmark}/pair ---------------------------------------------------------------


@dataclass
class PairView:
    models: list[str]
    n_items: int
    model_a: str = ""
    model_b: str = ""
    size: str = str(DEFAULT_SIZE)
    method: str = "random"
    methods: list[str] = field(default_factory=list)
    missing_methods: list[str] = field(default_factory=list)
    analyze_command: str = ""
    verdict: VerdictPublic | None = None
    sentence: str = ""
    placement: str = ""
    curve_svg: str | None = None
    curve_svg_narrow: str | None = None
    error: str | None = None
    status: int = 200


def _size(raw: str, n_items: int) -> int:
    try:
        size = int(raw.strip())
    except ValueError:
        raise InvalidInput(
            f"size {raw!r} is not a whole number", field="size", message="a whole number"
        ) from None
    if not 1 <= size <= n_items:
        raise InvalidInput(
            f"size {size} is out of range: choose between 1 and {n_items} items",
            field="size",
            message=f"between 1 and {n_items}",
        )
    return size


def _placement(v: VerdictPublic) -> str:
    """Where the pair sits on the agreement curve drawn below (the curve's MDAD, same basis)."""
    if v.mdad_at_size is None:
        return (
            f"At {v.size} items no gap on this benchmark reaches P(same order) ≥ "
            f"{fmt.prob(v.threshold)}; this pair is {fmt.pts(abs(v.gap))} apart."
        )
    side = "at or beyond" if abs(v.gap) >= v.mdad_at_size else "below"
    return (
        f"The pair is {fmt.pts(abs(v.gap))} apart; the MDAD at {v.size} items is "
        f"{fmt.pts(v.mdad_at_size)}, so the pair sits {side} the point where the curve "
        "crosses the threshold. The size needed is this pair's own: a pair with more items on "
        "which only one model is right needs more items than the typical pair of the same gap "
        "that the MDAD and benchslice plan describe."
    )


_CURVES: BoundedCache[tuple, tuple[str, str]] = BoundedCache("page_curves", 32 * MB)


def _curve_svg(
    session: Session, version: BenchmarkVersion, v: VerdictPublic
) -> tuple[str, str] | None:
    """The pair on its agreement curve: the page's figure and its phone variant."""
    threshold = DEFAULT_THRESHOLD
    fm = matrices.full_matrix(session, version.id)
    key = (version.id, fm.stamp, v.method, v.size, round(v.gap, 12), round(v.p_same_order, 12))
    hit = _CURVES.get(key)
    if hit is not None:
        return hit
    if v.basis == "simulated":  # graded scores (issue 35): the simulated curve
        curve = graded_verdicts.graded_mdad(fm, v.size, threshold).curve
    elif v.method in verdicts.EXACT_METHODS:
        curve = verdicts.exact_random_mdad(fm, v.size, threshold).curve
    else:
        stored = latest_analysis(session, version.id, [v.method])
        curve = (
            stored.cell(v.method, v.size).curve
            if stored is not None and v.size in stored.sizes
            else None
        )
    if curve is None:
        return None
    out = tuple(
        page_plots.pair_on_curve(curve, v.gap, v.p_same_order, v.size, threshold, look).decode()
        for look in (page_plots.WIDE, page_plots.NARROW)
    )
    _CURVES.put(key, out)
    return out


def pair_view(
    session: Session,
    version: BenchmarkVersion,
    *,
    model_a: str | None,
    model_b: str | None,
    size: str | None,
    method: str | None,
) -> PairView:
    """The form (prefilled) and, when both models are given, the verdict; a client mistake is
    reported on the page with its 4xx status."""
    fm = matrices.full_matrix(session, version.id)
    view = PairView(
        models=fm.score_names if fm.graded else fm.names.astype(str).tolist(),
        n_items=fm.n_items,
        model_a=(model_a or "").strip(),
        model_b=(model_b or "").strip(),
        size=(size or str(min(DEFAULT_SIZE, fm.n_items))).strip(),
        method=(method or "random").strip(),
    )
    analysed = analysed_methods(session, version.id)
    view.methods = ["random", *sorted((analysed & set(SELECTORS)) - {"random"})]
    view.missing_methods = sorted(set(SELECTORS) - set(view.methods))
    view.analyze_command = verdicts.analyze_command(
        verdicts.version_ref(session, version.id), ",".join(view.missing_methods)
    )
    if not view.model_a and not view.model_b:
        return view
    try:
        if not view.model_a or not view.model_b:
            missing = "model_a" if not view.model_a else "model_b"
            raise InvalidInput("choose both models", field=missing, message="required")
        n = _size(view.size, fm.n_items)
        v = verdicts.pair_verdict(
            session, version.id, view.model_a, view.model_b, size=n, method=view.method
        )
    except DomainError as exc:
        view.error, view.status = exc.detail, exc.status_code
        return view
    view.verdict = v
    view.sentence = verdict_story.headline(v)
    view.placement = _placement(v)
    figures = _curve_svg(session, version, v)
    if figures is not None:
        view.curve_svg, view.curve_svg_narrow = figures
    return view


# --- /ui/sessions/{id} ----------------------------------------------------------------------------

DECISIONS = {
    "undecided": "undecided so far",
    "better": "better than the baseline (the interval for the difference lies above 0)",
    "worse": "worse than the baseline (the interval for the difference lies below 0)",
    "equivalent": "equivalent to the baseline (the interval lies within the margin)",
    "precise": "precise enough (the interval is as narrow as requested)",
    "noninferior": "no worse than the baseline by more than the margin (the one-sided lower "
    "bound for the difference lies above minus the margin)",
    "regressed": "worse than the baseline by more than the margin (the one-sided upper bound "
    "lies below minus the margin)",
    "superior": "better than the baseline by more than the margin (the one-sided lower bound "
    "lies above it)",
    "not_superior": "not better than the baseline by more than the margin (the one-sided upper "
    "bound lies below it)",
    "on_margin": "exactly on the margin with every item seen (not non-inferior)",
}


@dataclass(frozen=True)
class SessionView:
    session: SessionPublic
    decision_words: str
    plot_svg: str | None
    plot_svg_narrow: str | None = None


_SESSION_SVGS: BoundedCache[tuple, tuple[str, str]] = BoundedCache("page_session_svgs", 16 * MB)


def session_view(
    session: Session, session_id: uuid.UUID, *, idle_hours: float | None = None
) -> SessionView:
    public = sessions_service.get_session_public(session, session_id, idle_hours=idle_hours)
    figures = None
    if public.history:
        key = (public.id, public.step)
        figures = _SESSION_SVGS.get(key)
        if figures is None:
            figures = tuple(
                page_plots.session_narrowing(
                    public.history, difference=public.difference is not None, look=look
                ).decode()
                for look in (page_plots.WIDE, page_plots.NARROW)
            )
            _SESSION_SVGS.put(key, figures)
    words = DECISIONS.get(public.decision, public.decision)
    if figures is None:
        return SessionView(public, words, None)
    return SessionView(public, words, figures[0], figures[1])


# --- /ui/gates/{id} -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateView:
    gate: GatePublic
    headline: str
    sentence: str
    tone: str  # good | bad | ""
    baselines: tuple[str, ...] = ()


def gate_view(session: Session, gate_id: uuid.UUID, *, idle_hours: float | None = None) -> GateView:
    """The gate page: its outcome first, in words, then each benchmark."""
    g = gates_service.get_gate_public(session, gate_id, idle_hours=idle_hours)
    k = len(g.benchmarks)
    bases = tuple(dict.fromkeys(b.baseline for b in g.benchmarks))
    every = f"on {g.benchmarks[0].benchmark}" if k == 1 else f"on all {k} benchmarks"
    used = f"after {fmt.count(g.items_used)} of {fmt.count(g.items_total)} items"
    if g.outcome == "pass":
        better = [b.benchmark for b in g.benchmarks if b.state == "better"]
        sentence = (f"{g.model} is no worse than the baseline by more than the margin {every}, "
                    f"{used}"
                    + (f"; better on {', '.join(better)}" if better else "") + ".")  # fmt: skip
        return GateView(g, "PASS", sentence, "good", bases)
    if g.outcome == "fail":
        sentence = (f"{g.model} regressed by more than the margin on {', '.join(g.regressed)}, "
                    f"{used}.")  # fmt: skip
        return GateView(g, "FAIL", sentence, "bad", bases)
    if g.outcome == "inconclusive":
        why = "it was abandoned" if g.state == "abandoned" else "its budget or items ran out"
        if g.state != "abandoned" and any(b.exhausted for b in g.budgets):
            why = "a cost budget ran out"
        sentence = f"Undecided {used}: {why} before every benchmark was settled (never a pass)."
        return GateView(g, "INCONCLUSIVE", sentence, "", bases)
    settled = sum(b.state != "open" for b in g.benchmarks)
    sentence = f"Open {used}: {settled} of {k} benchmarks settled so far."
    return GateView(g, "OPEN", sentence, "", bases)


# --- /ui/subsets/{id} -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreRow:
    model: str
    n_items: int
    subset_accuracy: float
    estimate: dict[str, Any] | None  # the answer the API returned (issue 38), None: withheld
    created_at: Any
    answer_reason: str = ""  # why, when the model lies outside what the sources support


@dataclass(frozen=True)
class SubsetView:
    subset: SubsetPublic
    ref: str
    formats: tuple[str, ...]
    scores: list[ScoreRow]
    reanchor: str | None = None  # issue 38: many models now beyond the subset's sources


def subset_view(session: Session, subset_id: str) -> SubsetView:
    row = subsets_service.get_subset(session, subset_id)
    version = get_version(session, row.benchmark_version_id)
    public = subsets_service.to_public(row, version)
    ref = f"{version.benchmark.name}@v{version.version}"
    scores = []
    for s in SubsetScoreRepository(session).for_subset(row.id):
        items = (s.estimates or {}).get("items") or []
        shift = s.population_shift or {}
        answer, reason = extrapolation.stored_answer(items, shift, benchmark=ref, size=row.size)
        scores.append(
            ScoreRow(
                s.model_name,
                s.n_items,
                s.subset_accuracy,
                answer,
                s.created_at,
                answer_reason=reason if shift.get("flagged") else "",
            )
        )
    reanchor = extrapolation.reanchor_prompt(session, row, version)
    return SubsetView(public, ref, EXPORT_FORMATS, scores, reanchor)


def subset_export(session: Session, subset_id: str, fmt: str) -> tuple[bytes, str]:
    """One export of a subset and its media type (the API's renderings)."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(
            f"unknown export format {fmt!r}",
            field="format",
            message=f"choose from {', '.join(EXPORT_FORMATS)}",
        )
    data = subsets_service.rendered_subset(session, subset_id, fmt)  # type: ignore[arg-type]
    return data, subsets_service.MEDIA_TYPES[fmt]


def clear_caches() -> None:
    for cache in (_CURVES, _SESSION_SVGS):
        cache.clear()
