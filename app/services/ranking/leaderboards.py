"""Leaderboards that say which differences are real: tiers, rank intervals and pairwise tests.

The numbers come from :mod:`app.core.ranking.leaderboard`; this module chooses the models, loads their
results and renders the answer.

Matrix: every model of the version with 0/1 results (:func:`app.services.catalog.results.load_matrix`),
with the coverage mask when some model lacks items (pairs are then compared on the items both
models have, accuracies on each model's own). When a chosen model's scores are graded (in
[0, 1], not 0/1; issue 35) the exact tests do not apply and the board is the graded one
(:func:`app.core.ranking.graded.graded_leaderboard`: paired t-tests from one Gram matrix, the same
multiplicity rule, rank intervals and tiers) over every chosen model with results on every item
(the others are listed in ``excluded``); a subset's board of graded scores is refused naming the
full-benchmark board and ``score`` instead. The decoded
matrix is cached per process under the version's results stamp
(:func:`app.db.repositories.subsets.results_stamp`: count and newest ``updated_at``), as are the
computed leaderboards and their renderings, so a repeated request costs one small query.

Model selection: ``models`` (names, comma-separated) and ``match`` (a case-insensitive glob when
it contains ``*``, ``?`` or ``[``, otherwise a case-insensitive substring) select the union of
the named and the matching models (all models when neither is given); ``top`` then keeps the
``top`` most accurate of them (by the accuracy the leaderboard reports: the subset's estimate
with ``subset``), ties broken by name.

Subset: ``subset`` (a stored subset of this version) ranks the models on the subset's items
only, testing the *full-benchmark* differences under the subset's design
(:func:`app.core.ranking.leaderboard.leaderboard_for_selection`: exact hypergeometric for ``random``
subsets, a weighted normal test otherwise). Models need results on every subset item.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pydantic_core
from prometheus_client import Counter
from sqlalchemy.orm import Session

from app.core.ranking.graded import graded_leaderboard
from app.core.ranking.leaderboard import CORRECTIONS, Leaderboard, leaderboard_for_selection
from app.core.ranking.leaderboard import leaderboard as core_leaderboard
from app.core.ranking.stored_counts import PairCounts, leaderboard_from_counts
from app.core.results import Selection
from app.db.models.benchmark import BenchmarkVersion
from app.db.repositories.subsets import results_stamp
from app.errors import InvalidInput, NotFound
from app.schemas.leaderboards import (
    ExcludedModel,
    LeaderboardFormat,
    LeaderboardInfo,
)
from app.services.catalog.results import load_matrix
from app.services.limits.children import Shared
from app.services.limits.expensive import EXPENSIVE
from app.services.platform.caching import MB, BoundedCache, SingleFlight
from app.services.platform.spreadsheet import safe_row, safe_text
from app.services.ranking import first_views
from app.services.selection.subsets import get_subset, to_selection

DEFAULT_ALPHA = 0.05
MEDIA_TYPES: dict[str, str] = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "markdown": "text/markdown; charset=utf-8",
}
GLOB_CHARS = frozenset("*?[")
MATRIX_CACHE_BYTES = 64 * MB
BOARD_CACHE_BYTES = 64 * MB
RENDER_CACHE_BYTES = 96 * MB  # the pairs of GPQA as JSON are ~27 MB


@dataclass(frozen=True)
class LeaderboardQuery:
    """What to rank and how (normalised: hashable, part of the cache keys)."""

    models: tuple[str, ...] = ()
    match: str | None = None
    top: int | None = None
    subset: str | None = None
    alpha: float = DEFAULT_ALPHA
    correction: str = "holm"
    mid_p: bool = False

    @classmethod
    def of(
        cls,
        *,
        models: str | Sequence[str] | None = None,
        match: str | None = None,
        top: int | None = None,
        subset: str | None = None,
        alpha: float = DEFAULT_ALPHA,
        correction: str = "holm",
        mid_p: bool = False,
    ) -> LeaderboardQuery:
        """Parse and check the request's parameters (422 naming the field at fault)."""
        if isinstance(models, str):
            models = models.split(",")
        names = tuple(dict.fromkeys(m.strip() for m in (models or ()) if m.strip()))
        if models is not None and not names:  # `models=` selects nothing, not everything
            raise InvalidInput(
                "models names no model", field="models", message="comma-separated model names"
            )
        match = match.strip() if match is not None and match.strip() else None
        if correction not in CORRECTIONS:
            raise InvalidInput(
                f"unknown correction {correction!r}",
                field="correction",
                message=f"choose from {list(CORRECTIONS)}",
            )
        # below 1e-6 the normal quantiles of the intervals overflow to infinite widths
        if not 1e-6 <= float(alpha) <= 0.5:
            raise InvalidInput(
                "alpha must lie in [1e-6, 0.5]", field="alpha", message="in [1e-6, 0.5]"
            )
        if top is not None and top < 2:
            raise InvalidInput("top must be at least 2", field="top", message="at least 2")
        return cls(names, match, top, subset or None, float(alpha), correction, bool(mid_p))


@dataclass(frozen=True)
class ResultsMatrix:
    """A version's models as a 0/1 matrix (rows in code-point order of their names: the engine
    breaks accuracy ties by row, so tiers do not depend on the database's collation)."""

    stamp: tuple
    names: np.ndarray
    rows: dict[str, int]
    correct: np.ndarray  # uint8, 0 where not covered or not binary
    coverage: np.ndarray  # bool
    binary: np.ndarray  # bool per model: every covered result is 0 or 1
    n_own: np.ndarray  # items each model covers
    # float32 scores (0 where not covered) when some model's scores are graded (issue 35)
    scores: np.ndarray | None = None

    def graded_rows(self, rows: np.ndarray) -> bool:
        """Some of ``rows`` has graded scores: the board is the graded one."""
        return self.scores is not None and not bool(self.binary[rows].all())


@dataclass(frozen=True)
class ComputedLeaderboard:
    """An engine result with the names of its input rows and what the request covered."""

    info: LeaderboardInfo
    board: Leaderboard
    names: np.ndarray  # input row -> model name
    stamp: tuple  # the results stamp it was computed under


DEFAULT_QUERY = LeaderboardQuery.of()
COMPUTATIONS = Counter(
    "benchslice_leaderboard_computations", "Leaderboards computed by the engine in this process"
)

_MATRICES: BoundedCache[uuid.UUID, ResultsMatrix] = BoundedCache(
    "leaderboard_matrices", MATRIX_CACHE_BYTES
)
_BOARDS: BoundedCache[tuple, ComputedLeaderboard] = BoundedCache("leaderboards", BOARD_CACHE_BYTES)
BOARD_FLIGHTS = SingleFlight()
_RENDERED: BoundedCache[tuple, bytes] = BoundedCache("leaderboard_renderings", RENDER_CACHE_BYTES)


def results_matrix(session: Session, version_id: uuid.UUID) -> ResultsMatrix:
    """The version's decoded results, cached per results stamp."""
    stamp = results_stamp(session, version_id)
    hit = _MATRICES.get(version_id)
    if hit is not None and hit.stamp == stamp:
        return hit
    mat = load_matrix(session, version_id)
    order = np.argsort(mat.model_names, kind="stable")  # code-point order, whatever the collation
    names = mat.model_names[order]
    values = np.where(mat.coverage[order], mat.correct[order], 0.0)
    binary = np.all((values == 0.0) | (values == 1.0), axis=1)
    correct = (values == 1.0).astype(np.uint8)
    correct[~binary] = 0
    coverage = np.array(mat.coverage[order], dtype=bool)
    scores = None if binary.all() else np.ascontiguousarray(values, dtype=np.float32)
    for a in (correct, coverage, scores):
        if a is not None:
            a.setflags(write=False)
    entry = ResultsMatrix(
        stamp=stamp,
        names=names,
        rows={str(n): i for i, n in enumerate(names.tolist())},
        correct=correct,
        coverage=coverage,
        binary=binary,
        n_own=coverage.sum(axis=1),
        scores=scores,
    )
    _MATRICES.put(version_id, entry)
    _BOARDS.discard_where(lambda k: k[0] == version_id and k[1] != stamp)
    _RENDERED.discard_where(lambda k: k[0] == version_id and k[1] != stamp)
    return entry


def _matches(names: np.ndarray, pattern: str) -> np.ndarray:
    pat = pattern.lower()
    lowered = np.char.lower(names.astype(str))
    if GLOB_CHARS & set(pat):
        return np.array([fnmatch.fnmatchcase(n, pat) for n in lowered.tolist()], dtype=bool)
    return np.char.find(lowered, pat) >= 0


def _subset_selection(session: Session, version: BenchmarkVersion, sid: str) -> Selection:
    """The subset ``sid`` of this version. A subset of any other version is answered exactly
    like a missing one (issue 39): the answer must not tell a caller that an id of another
    project exists, nor which version it belongs to."""
    unknown = NotFound(
        f"benchmark version {version.benchmark.name}@v{version.version} has no subset {sid}",
        field="subset",
        message="unknown subset of this benchmark version",
    )
    try:
        row = get_subset(session, sid)
    except NotFound:
        raise unknown from None
    if row.benchmark_version_id != version.id:
        raise unknown
    return to_selection(row)


def _select(
    rm: ResultsMatrix, query: LeaderboardQuery, selection: Selection | None
) -> tuple[np.ndarray, list[ExcludedModel]]:
    """Rows to rank (in name order) and the selected models left out, with the reason."""
    m = rm.names.shape[0]
    unknown = [n for n in query.models if n not in rm.rows]
    if unknown:
        raise NotFound(
            f"no results on this benchmark for model(s): {', '.join(map(repr, unknown[:10]))}",
            field="models",
            message=f"unknown model {unknown[0]!r}",
        )
    explicit = np.zeros(m, dtype=bool)
    explicit[[rm.rows[n] for n in query.models]] = True
    if not query.models and query.match is None:
        chosen = np.ones(m, dtype=bool)
    else:
        chosen = explicit.copy()
        if query.match is not None:
            chosen |= _matches(rm.names, query.match)
    usable = rm.binary & (rm.n_own > 0)
    reason = np.where(rm.binary, "no results", "non-binary scores").astype(object)
    if rm.scores is not None and not rm.binary[chosen & (rm.n_own > 0)].all():
        # graded scores among the chosen (issue 35): the graded board ranks every chosen model
        # with results on every item (0/1 ones included); paired tests need shared items
        if selection is not None:
            raise InvalidInput(
                "a subset's leaderboard of graded scores (not 0/1) is not available: its "
                "exact tests need 0/1 results. Rank on the full benchmark (leave out --subset), "
                "or score each model on the subset (`benchslice score SUBSET PATH`: betting "
                "intervals for graded scores)",
                field="subset",
                message="graded scores: use the full-benchmark leaderboard",
            )
        full_cov = rm.n_own == rm.coverage.shape[1]
        usable = full_cov
        reason = np.where(
            rm.n_own > 0,
            "partial coverage (a graded leaderboard needs every item: push the missing ones)",
            "no results",
        ).astype(object)
    if selection is not None:
        on_subset = rm.coverage[:, selection.indices].all(axis=1)
        reason = np.where(usable & ~on_subset, "no results on some subset items", reason)
        usable &= on_subset
    bad_explicit = np.flatnonzero(explicit & ~usable)
    if bad_explicit.size:
        i = int(bad_explicit[0])
        raise InvalidInput(
            f"model {rm.names[i]!r} cannot be ranked: {reason[i]}",
            field="models",
            message=str(reason[i]),
        )
    left_out = np.flatnonzero(chosen & ~usable)
    excluded = [ExcludedModel(model=str(rm.names[i]), reason=str(reason[i])) for i in left_out]
    return np.flatnonzero(chosen & usable), excluded


def _top(rm: ResultsMatrix, rows: np.ndarray, top: int, selection: Selection | None):
    if selection is None:
        values = rm.scores if rm.scores is not None else rm.correct  # graded: their scores
        acc = values[rows].sum(axis=1) / rm.n_own[rows]
    elif selection.method == "random":
        acc = rm.correct[np.ix_(rows, selection.indices)].mean(axis=1)
    else:
        acc = rm.correct[np.ix_(rows, selection.indices)] @ np.asarray(selection.weights)
    keep = np.lexsort((rows, -acc))[:top]  # accuracy descending, then name
    return np.sort(rows[keep])


def compute(
    session: Session, version: BenchmarkVersion, query: LeaderboardQuery
) -> ComputedLeaderboard:
    """The leaderboard for ``query`` on ``version`` (cached per results stamp)."""
    rm = results_matrix(session, version.id)
    selection = _subset_selection(session, version, query.subset) if query.subset else None
    key = (version.id, rm.stamp, query)
    hit = _BOARDS.get(key)
    if hit is not None:
        return hit
    with BOARD_FLIGHTS(key):  # identical concurrent requests compute it once
        hit = _BOARDS.get(key)
        if hit is not None:
            return hit
        return _compute(rm, version, query, selection, key)


def _compute(
    rm: ResultsMatrix,
    version: BenchmarkVersion,
    query: LeaderboardQuery,
    selection: Selection | None,
    key: tuple,
    counts: PairCounts | None = None,
) -> ComputedLeaderboard:
    """``counts``: the stored pair counts of every row of ``rm`` (no subset): the board is
    computed from them (:func:`leaderboard_from_counts`, ``O(m²)``), equal to the products'."""
    COMPUTATIONS.inc()
    rows, excluded = _select(rm, query, selection)
    if query.top is not None and rows.size > query.top:
        rows = _top(rm, rows, query.top, selection)
    if rows.size < 2:
        raise InvalidInput(
            f"a leaderboard needs at least 2 models with 0/1 results; {rows.size} selected"
            + (f" ({len(excluded)} left out: {excluded[0].reason})" if excluded else ""),
            field="models",
            message="fewer than 2 models",
        )
    names = rm.names[rows]
    if rm.graded_rows(rows):
        assert rm.scores is not None
        board = EXPENSIVE.call(
            "a leaderboard",
            graded_leaderboard,
            rm.scores[rows],
            alpha=query.alpha,
            correction=query.correction,
        )
        return _finish(rm, version, query, rows, excluded, names, board, key)
    # cost-aware admission: the tests run in a bounded pool of child processes at a lower CPU
    # priority (all models' matrix is sent to a child once per results stamp)
    tests = {"alpha": query.alpha, "correction": query.correction, "mid_p": query.mid_p}
    if selection is not None:
        board = EXPENSIVE.call(
            "a leaderboard",
            leaderboard_for_selection,
            rm.correct[np.ix_(rows, selection.indices)],
            selection,
            **tests,
        )
    elif counts is not None:
        board = leaderboard_from_counts(
            counts if rows.size == counts.n10.shape[0] else counts.take(rows),
            alpha=query.alpha,
            correction=query.correction,
            mid_p=query.mid_p,
        )
    else:
        cov = rm.coverage[rows]
        every = rows.size == rm.names.shape[0]  # rows are sorted and distinct
        correct = (
            Shared(("leaderboard-matrix", version.id, rm.stamp), rm.correct)
            if every
            else rm.correct[rows]
        )
        board = EXPENSIVE.call(
            "a leaderboard",
            core_leaderboard,
            correct,
            coverage=None if cov.all() else cov,
            **tests,
        )
    return _finish(rm, version, query, rows, excluded, names, board, key)


def _finish(rm, version, query, rows, excluded, names, board, key) -> ComputedLeaderboard:
    """The computed board with its info, cached under ``key``."""
    if board.unshared_pairs.size:
        a, b = board.unshared_pairs[0]
        raise InvalidInput(
            f"{board.unshared_pairs.shape[0]} model pair(s) share no item, e.g. "
            f"{names[a]!r} and {names[b]!r}; choose models evaluated on common items",
            field="models",
            message="models without shared items",
        )
    info = LeaderboardInfo(
        benchmark_version_id=version.id,
        benchmark=version.benchmark.name,
        version=version.version,
        subset_id=query.subset,
        method=board.method,
        design=board.design,  # type: ignore[arg-type]
        population=board.population,  # type: ignore[arg-type]
        alpha=board.alpha,
        correction=board.correction,  # type: ignore[arg-type]
        mid_p=board.mid_p,
        n_items=board.n_items,
        n_population=board.n_population,
        n_models=int(rows.size),
        n_tiers=board.n_tiers,
        excluded=excluded,
    )
    computed = ComputedLeaderboard(info=info, board=board, names=names, stamp=rm.stamp)
    _BOARDS.put(key, computed)
    return computed


# --- public answers -----------------------------------------------------------------------------


def row_columns(c: ComputedLeaderboard) -> dict[str, list]:
    """The leaderboard's rows as columns (``LeaderboardRowPublic`` fields), in board order."""
    r = c.board.rows
    return {
        "model": c.names[r.model].tolist(),
        "accuracy": r.accuracy.tolist(),
        "ci_low": r.ci_low.tolist(),
        "ci_high": r.ci_high.tolist(),
        "rank": r.rank.tolist(),
        "rank_low": r.rank_low.tolist(),
        "rank_high": r.rank_high.tolist(),
        "tier": r.tier.tolist(),
        "n_items": r.n_items.tolist(),
    }


def records(columns: dict[str, list]) -> list[dict]:
    return [dict(zip(columns, vals, strict=True)) for vals in zip(*columns.values(), strict=True)]


# --- renderings ---------------------------------------------------------------------------------


def csv_bytes(columns: dict[str, list]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(list(columns))
    # model names come from uploads: text cells never read as formulas (numbers unchanged)
    writer.writerows(safe_row(row) for row in zip(*columns.values(), strict=True))
    return out.getvalue().encode()


def _json(c: ComputedLeaderboard) -> bytes:
    """The JSON of :class:`LeaderboardPublic`, serialised from the columns (building thousands
    of pydantic rows takes far longer)."""
    body = c.info.model_dump(mode="json")
    body["rows"] = records(row_columns(c))
    return pydantic_core.to_json(body, inf_nan_mode="null")


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e-3 and value != 0 else f"{value:.4f}"
    if isinstance(value, int):
        return str(value)
    return safe_text(str(value)).replace("|", "\\|")


def markdown_bytes(
    info: LeaderboardInfo, columns: dict[str, list], what: str, note: str = ""
) -> bytes:
    where = f"{info.benchmark}@v{info.version}" + (
        f", subset {info.subset_id}" if info.subset_id else ""
    )
    lines = [
        f"| {' | '.join(columns)} |",
        f"| {' | '.join('---' for _ in columns)} |",
        *(f"| {' | '.join(map(_cell, row))} |" for row in zip(*columns.values(), strict=True)),
        "",
        f"{what} of {info.n_models} models on {where} ({info.n_items} items): "
        f"{info.n_tiers} tier{'' if info.n_tiers == 1 else 's'} at alpha = {info.alpha:g}, "
        f"{info.correction} correction.",
        "",
        f"Method: {info.method}",
        "",
        *([note, ""] if note else []),
    ]
    return "\n".join(lines).encode()


def rendered(
    session: Session,
    version: BenchmarkVersion,
    query: LeaderboardQuery,
    *,
    fmt: LeaderboardFormat,
    precomputed: bool = True,
) -> bytes:
    """The leaderboard as JSON, CSV or Markdown bytes (cached per results stamp). Its pairwise
    table is served in pages: :func:`app.services.ranking.pair_pages.pairs_page`.

    The default leaderboard as JSON is read from what the worker precomputed for the current
    results stamp when there is one (:mod:`app.services.ranking.precompute`; ``precomputed=False``
    computes it regardless: the worker itself)."""
    if precomputed and fmt == "json" and query == DEFAULT_QUERY:
        stamp = results_stamp(session, version.id)
        key = (version.id, stamp, query, fmt)
        hit = _RENDERED.get(key)
        if hit is not None:
            return hit
        data = first_views.stored_view(session, version.id, first_views.LEADERBOARD_VIEW, stamp)
        if data is not None:
            _RENDERED.discard_where(lambda k: k[0] == version.id and k[1] != stamp)
            _RENDERED.put(key, data)
            return data
    c = compute(session, version, query)
    key = (version.id, c.stamp, query, fmt)
    hit = _RENDERED.get(key)
    if hit is not None:
        return hit
    if fmt == "json":
        data = _json(c)
    elif fmt == "csv":
        data = csv_bytes(row_columns(c))
    else:
        data = markdown_bytes(c.info, row_columns(c), "Leaderboard")
    _RENDERED.put(key, data)
    return data


def rendered_from_counts(version: BenchmarkVersion, rm: ResultsMatrix, counts: PairCounts) -> bytes:
    """The default leaderboard's JSON from stored pair counts of every row of ``rm`` (the
    worker: :mod:`app.services.ranking.precompute`); the same bytes as :func:`rendered`."""
    key = (version.id, rm.stamp, DEFAULT_QUERY)
    return _json(_compute(rm, version, DEFAULT_QUERY, None, key, counts=counts))


def default_board(session: Session, version: BenchmarkVersion) -> tuple[dict, list[dict]]:
    """The default leaderboard as ``(info, rows)`` (the JSON answer's fields; rows in board
    order): from the rendered or precomputed bytes, computed only when neither exists."""
    body = pydantic_core.from_json(rendered(session, version, DEFAULT_QUERY, fmt="json"))
    rows = body.pop("rows")
    return body, rows


def clear_caches() -> None:
    for cache in (_MATRICES, _BOARDS, _RENDERED):
        cache.clear()
