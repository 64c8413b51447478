"""What the browser view shows, assembled from the other services (read-only).

Every function here reads; nothing flushes. Heavy parts (leaderboard, item health, the
accuracy histogram) are cached per benchmark version and results stamp, so a page costs a few
small queries plus template rendering.
"""

from __future__ import annotations

import fnmatch
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app import formatting
from app.db.models import BenchmarkVersion
from app.db.repositories.analyses import AnalysisRepository
from app.db.repositories.benchmarks import BenchmarkVersionRepository
from app.db.repositories.listings import subsets_for_version
from app.db.repositories.subsets import results_stamp
from app.errors import DomainError, InvalidInput
from app.schemas.analyses import AnalysisPublic, Recommendation
from app.schemas.sessions import SessionSummary
from app.services.access.access import Visibility
from app.services.catalog import benchmarks as benchmarks_service
from app.services.catalog import matrices
from app.services.evaluation import lifecycle as session_lifecycle
from app.services.platform.caching import MB, BoundedCache
from app.services.ranking import leaderboards, precompute
from app.services.reliability import analyses as analyses_service
from app.services.reliability import plots, verdicts
from app.services.selection import extrapolation
from app.web import page_plots

MAX_BENCHMARK_VERSIONS = 1000
LISTING_LIMIT = 20
MODELS_SHOWN = 50
SORT_KEYS = ("rank", "name", "accuracy", "coverage")
CACHE_BYTES = 16 * MB
HISTOGRAM_LOOKS = ("wide", "narrow")


NONE = formatting.MISSING


def pts(x: float | None) -> str:
    """Accuracy units as points without the unit (table cells under a "pts" header),
    ``0.022 -> "2.2"``."""
    return formatting.pts(x, unit=False)


# --- /ui/ ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LastAnalysis:
    id: uuid.UUID
    status: str
    created_at: datetime


@dataclass(frozen=True)
class BenchmarkRow:
    name: str
    version: int
    n_versions: int
    n_items: int
    n_subtasks: int
    n_models: int
    last_analysis: LastAnalysis | None


def benchmarks_overview(session: Session, visible: Visibility | None = None) -> list[BenchmarkRow]:
    """One row per benchmark the caller may read (its latest version), by name."""
    versions = BenchmarkVersionRepository(session).page(
        limit=MAX_BENCHMARK_VERSIONS,
        project_ids=None if visible is None or visible.everything else visible.project_ids,
    )
    latest: dict[str, BenchmarkVersion] = {}
    count: dict[str, int] = {}
    for v in versions:
        name = v.benchmark.name
        count[name] = count.get(name, 0) + 1
        if name not in latest or v.version > latest[name].version:
            latest[name] = v
    models = BenchmarkVersionRepository(session).model_counts([v.id for v in latest.values()])
    analyses = AnalysisRepository(session)
    rows = []
    for name in sorted(latest):
        v = latest[name]
        last = analyses.page(v.id, limit=1)
        rows.append(
            BenchmarkRow(
                name=name,
                version=v.version,
                n_versions=count[name],
                n_items=v.n_items,
                n_subtasks=len(v.subtask_names),
                n_models=models.get(v.id, 0),
                last_analysis=LastAnalysis(last[0].id, last[0].job.status.value, last[0].created_at)
                if last
                else None,
            )
        )
    return rows


# --- /ui/benchmarks/{benchmark} -------------------------------------------------------------------


@dataclass(frozen=True)
class ModelRow:
    name: str
    accuracy: float
    coverage: float
    rank: int | None = None
    rank_low: int | None = None
    rank_high: int | None = None
    tier: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class ModelsTable:
    rows: list[ModelRow]
    n_total: int
    n_matching: int
    q: str
    sort: str
    desc: bool
    show_all: bool


@dataclass(frozen=True)
class Board:
    """The leaderboard's summary: tiers and what it covered (``error`` when it cannot be built)."""

    n_models: int = 0
    n_tiers: int = 0
    alpha: float = 0.0
    correction: str = ""
    tiers: list[tuple[int, int, list[str]]] = field(default_factory=list)  # tier, size, top names
    excluded: int = 0
    error: str | None = None


@dataclass(frozen=True)
class FlaggedItem:
    item_id: str
    subtask: str
    accuracy: float
    point_biserial: float | None
    flags: list[str]


@dataclass(frozen=True)
class HealthSummary:
    n_items: int
    n_models: int
    counts: dict[str, int]
    n_flagged: int
    effective_informative: float
    flagged: list[FlaggedItem]
    error: str | None = None


@dataclass(frozen=True)
class BenchmarkQuery:
    """The models table's query, normalised (what a cached page fragment is keyed by)."""

    q: str = ""
    sort: str = "rank"
    desc: bool = False
    show_all: bool = False

    @classmethod
    def of(
        cls, q: str | None = None, sort: str | None = None, show_all: bool = False
    ) -> BenchmarkQuery:
        key, desc = _parse_sort(sort)
        return cls((q or "").strip()[:200], key, desc, bool(show_all))


@dataclass(frozen=True)
class BenchmarkMain:
    """What the benchmark page shows that depends only on the version's results and the query:
    header, histogram, leaderboard summary, models table, item health."""

    version: BenchmarkVersion
    ref: str
    n_models: int
    accuracy_svg: str | None
    accuracy_svg_narrow: str | None
    models: ModelsTable
    board: Board
    health: HealthSummary


@dataclass(frozen=True)
class BenchmarkListings:
    """The recent analyses, subsets and sessions of a version (change without new results)."""

    analyses: list[AnalysisPublic]
    subsets: list[Any]
    sessions: list[SessionSummary]
    abandoned: list[SessionSummary]  # open but idle past SESSION_IDLE_HOURS: shown apart
    costs: list[Any] = field(default_factory=list)  # CostUnitSummary per unit with data
    #: subset id -> its re-anchor prompt, for listed subsets with many models beyond their sources
    reanchor: dict[Any, str] = field(default_factory=dict)


_HEALTH: BoundedCache[tuple, HealthSummary] = BoundedCache("page_health", CACHE_BYTES)
_HIST: BoundedCache[tuple, tuple[str, str]] = BoundedCache("page_histograms", CACHE_BYTES)


def _parse_sort(sort: str | None) -> tuple[str, bool]:
    raw = (sort or "rank").strip()
    desc = raw.startswith("-")
    key = raw.lstrip("-")
    if key not in SORT_KEYS:
        raise InvalidInput(
            f"unknown sort key {raw!r}",
            field="sort",
            message=f"choose from {', '.join(SORT_KEYS)} (prefix - for descending)",
        )
    return key, desc


def _matching(names: np.ndarray, q: str) -> np.ndarray:
    if not q:
        return np.ones(names.shape[0], dtype=bool)
    lowered = np.char.lower(names.astype(str))
    if any(c in q for c in "*?["):
        pattern = q.lower()
        return np.array([fnmatch.fnmatchcase(n, pattern) for n in lowered], dtype=bool)
    return np.char.find(lowered, q.lower()) >= 0


def models_table(
    summaries: list[tuple[str, float, float]],
    ranks: dict[str, dict],
    *,
    q: str | None,
    sort: str | None,
    show_all: bool,
) -> ModelsTable:
    """Models (name, accuracy, coverage) with their leaderboard rank, filtered and sorted."""
    key, desc = _parse_sort(sort)
    q = (q or "").strip()[:200]
    names = np.array([s[0] for s in summaries], dtype=object)
    acc = np.array([s[1] for s in summaries], dtype=np.float64)
    cov = np.array([s[2] for s in summaries], dtype=np.float64)
    rank = np.array(
        [ranks[n]["rank"] if n in ranks else np.inf for n in names.tolist()], dtype=np.float64
    )
    keep = np.flatnonzero(_matching(names, q)) if names.size else np.zeros(0, dtype=np.int64)
    if key == "name":
        primary = np.argsort(names[keep].astype(str), kind="stable")
        order = keep[primary[::-1] if desc else primary]
    else:
        column = {"rank": rank, "accuracy": -acc, "coverage": -cov}[key][keep]
        order = keep[np.lexsort((names[keep].astype(str), -column if desc else column))]
    shown = order if show_all else order[:MODELS_SHOWN]
    rows = []
    for i in shown.tolist():
        lb = ranks.get(names[i], {})
        rows.append(
            ModelRow(
                name=str(names[i]),
                accuracy=float(acc[i]),
                coverage=float(cov[i]),
                rank=lb.get("rank"),
                rank_low=lb.get("rank_low"),
                rank_high=lb.get("rank_high"),
                tier=lb.get("tier"),
                ci_low=lb.get("ci_low"),
                ci_high=lb.get("ci_high"),
            )
        )
    return ModelsTable(rows, len(summaries), int(keep.size), q, key, desc, show_all)


def _board(session: Session, version: BenchmarkVersion) -> tuple[Board, dict[str, dict]]:
    try:  # the worker's precomputed default leaderboard when it is current
        info, records = leaderboards.default_board(session, version)
    except DomainError as exc:
        return Board(error=exc.detail), {}
    by_tier: dict[int, list[str]] = {}
    for r in records:
        by_tier.setdefault(int(r["tier"]), []).append(r["model"])
    tiers = [(t, len(m), m[:5]) for t, m in sorted(by_tier.items())]
    board = Board(
        n_models=info["n_models"],
        n_tiers=info["n_tiers"],
        alpha=info["alpha"],
        correction=info["correction"],
        tiers=tiers,
        excluded=len(info["excluded"]),
    )
    return board, {r["model"]: r for r in records}


def item_health_summary(session: Session, version: BenchmarkVersion) -> HealthSummary:
    """Item flags over the models with full 0/1 results
    (:func:`app.services.ranking.precompute.compute_health_panel`), cached per results stamp;
    the worker's precomputed panel when it is current."""
    stamp = results_stamp(session, version.id)
    key = (version.id, stamp)
    hit = _HEALTH.get(key)
    if hit is not None:
        return hit
    panel = precompute.health_panel(session, version, stamp)
    flagged = [FlaggedItem(**item) for item in panel.pop("flagged")]
    summary = HealthSummary(flagged=flagged, **panel)
    _HEALTH.put(key, summary)
    return summary


def benchmark_stamp(session: Session, version: BenchmarkVersion) -> tuple:
    """The version's results stamp (count, newest ``updated_at``; one aggregate query): what
    :func:`benchmark_main` depends on besides the version and the query."""
    return results_stamp(session, version.id)


def benchmark_main(
    session: Session, version: BenchmarkVersion, ref: str, query: BenchmarkQuery
) -> BenchmarkMain:
    summaries = precompute.page_accuracies(session, version)
    board, ranks = _board(session, version)
    sort = ("-" if query.desc else "") + query.sort
    table = models_table(summaries, ranks, q=query.q, sort=sort, show_all=query.show_all)
    stamp = results_stamp(session, version.id)  # what the histogram's summaries depend on
    hist = _HIST.get((version.id, stamp))
    if hist is None and summaries:
        stored = precompute.stored_histograms(session, version, stamp, HISTOGRAM_LOOKS)
        if stored is None:  # not precomputed for these results: draw it now
            acc = np.array([s[1] for s in summaries], dtype=np.float64)
            stored = {
                k: v.decode()
                for k, v in plots.accuracy_histograms(acc, version.benchmark.name).items()
            }
        hist = (stored["wide"], stored["narrow"])
        _HIST.put((version.id, stamp), hist)
    return BenchmarkMain(
        version=version,
        ref=ref,
        n_models=len(summaries),
        accuracy_svg=hist[0] if hist else None,
        accuracy_svg_narrow=hist[1] if hist else None,
        models=table,
        board=board,
        health=item_health_summary(session, version),
    )


def _reanchor(session: Session, subset: Any, version: BenchmarkVersion) -> str | None:
    try:
        return extrapolation.reanchor_prompt(session, subset, version)
    except DomainError:  # no full-coverage matrix any more (results deleted): nothing to say
        return None


def benchmark_listings(
    session: Session, version: BenchmarkVersion, *, idle_hours: float | None = None
) -> BenchmarkListings:
    def recent(**kw: Any) -> list[SessionSummary]:
        return session_lifecycle.list_sessions(
            session, version.id, idle_hours=idle_hours, limit=LISTING_LIMIT, **kw
        ).items

    subsets = list(subsets_for_version(session, version.id, limit=LISTING_LIMIT))
    prompts = {s.id: _reanchor(session, s, version) for s in subsets}
    return BenchmarkListings(
        analyses=analyses_service.list_analyses(session, version.id, limit=LISTING_LIMIT).items,
        subsets=subsets,
        sessions=recent(hide_abandoned=True),
        abandoned=recent(state="abandoned"),
        costs=benchmarks_service.cost_summaries(session, version),
        reanchor={k: v for k, v in prompts.items() if v is not None},
    )


# --- /ui/analyses/{id} ----------------------------------------------------------------------------


def recommendation_sentences(rec: Recommendation) -> list[str]:
    """The analysis' recommendation in words (as the CLI prints it)."""
    out = []
    for method, n in rec.smallest_n.items():
        if n is None:
            out.append(
                f"{method}: none of the evaluated sizes detects a {pts(rec.gap)}-point gap "
                f"with P(same order) ≥ {rec.threshold:g}."
            )
        else:
            out.append(
                f"{method}: {n} items are the smallest evaluated size that detects a "
                f"{pts(rec.gap)}-point gap with P(same order) ≥ {rec.threshold:g}."
            )
    for row in rec.random_vs_best or ():
        if row.best_method in (None, "random"):
            continue
        if row.random_within_ci is True:
            verdict = "random is within the best method's CI"
        elif row.random_within_ci is False:
            verdict = "random is outside the best method's CI"
        else:
            verdict = "the CI comparison is undecidable"
        random = "not reached" if row.random_mdad is None else f"{pts(row.random_mdad)} pts"
        out.append(
            f"At {row.n} items {verdict} (best: {row.best_method}, MDAD {pts(row.best_mdad)} pts,"
            f" CI upper {pts(row.best_ci_high)}; random: {random})."
        )
    return out


_ANALYSIS_SVGS: BoundedCache[tuple, tuple[str, str, str, str]] = BoundedCache(
    "page_analysis_svgs", 32 * MB
)


def analysis_plots(
    session: Session, analysis_id: uuid.UUID, n: int | None
) -> tuple[str, str, int, str, str]:
    """``(MDAD-vs-size SVG, agreement-curves SVG, the size shown, and the two figures' phone
    variants)`` of a succeeded analysis; immutable, so cached by id and size."""
    from app.services.reliability.plots import mdad_plot

    row, stored = analyses_service.get_stored(session, analysis_id)
    if n is None:
        n = stored.sizes[len(stored.sizes) // 2]
    if n not in stored.sizes:
        raise InvalidInput(
            f"size {n} is not in this analysis",
            field="n",
            message=f"choose from {', '.join(map(str, stored.sizes))}",
        )
    key = (analysis_id, n)
    hit = _ANALYSIS_SVGS.get(key)
    if hit is None:
        name = analyses_service.to_public(row, with_result=False).benchmark_name
        hit = (
            mdad_plot(stored, name, "svg").decode(),
            page_plots.agreement_by_method(stored, name, n).decode(),
            mdad_plot(stored, name, "svg", look=page_plots.NARROW).decode(),
            page_plots.agreement_by_method(stored, name, n, look=page_plots.NARROW).decode(),
        )
        _ANALYSIS_SVGS.put(key, hit)
    return hit[0], hit[1], n, hit[2], hit[3]


def exact_random_mdads(session: Session, analysis: AnalysisPublic) -> dict[int, float | None]:
    """Random sampling's exact MDAD (all items, all model pairs; what verdicts and plans
    report) at each size of an analysis that covers random; ``{}`` otherwise."""
    if "random" not in analysis.methods or analysis.result is None:
        return {}
    fm = matrices.full_matrix(session, analysis.version_id)
    if fm.correct.shape[0] < 2:
        return {}
    return {
        int(n): verdicts.exact_random_mdad(fm, int(n), analysis.threshold).mdad
        for n in analysis.sizes
        if int(n) <= fm.n_items
    }


def clear_caches() -> None:
    for cache in (_HEALTH, _HIST, _ANALYSIS_SVGS):
        cache.clear()
