"""The data every domain reads from a benchmark version: its full-coverage 0/1 matrix and doc ids.

The decoded full-coverage matrix of a version is cached per process (LRU), keyed by the version
and a stamp of its results (count, newest ``updated_at``): reading it costs one small query while
the results are unchanged. Item health, subsets, scoring, verdicts and the pages all read it here,
below them all, so none of those modules imports another for it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models.benchmark import BenchmarkVersion
from app.db.repositories.subsets import results_stamp
from app.errors import Conflict, NotFound
from app.services.catalog.names import did_you_mean
from app.services.catalog.results import load_matrix
from app.services.platform.caching import MB, BoundedCache, SingleFlight


@dataclass(frozen=True)
class FullMatrix:
    """A version's models with full 0/1 results, as one uint8 matrix (rows sorted by name)."""

    version_id: uuid.UUID
    stamp: tuple[int, datetime | None]
    names: np.ndarray
    rows: dict[str, int]
    correct: np.ndarray
    accuracy: np.ndarray
    subtasks: np.ndarray
    unusable: dict[str, str]  # model name -> why it is not in the matrix
    # every full-coverage model (0/1 and graded) as float32 scores in [0, 1], rows sorted by
    # name; None when every full-coverage model is 0/1 (then ``correct`` is the whole story)
    scores: np.ndarray | None = None
    score_rows: dict[str, int] | None = None

    @property
    def n_items(self) -> int:
        return int(self.correct.shape[1])

    @property
    def graded(self) -> bool:
        """Some model with results on every item has scores other than 0/1 (issue 35)."""
        return self.scores is not None

    @property
    def score_names(self) -> list[str]:
        return list(self.score_rows or {})


MATRIX_CACHE_BYTES = 128 * MB
STAMP_TTL_SECONDS = 1.0
# version -> (its matrix, when the version's results stamp last matched the matrix's)
_MATRICES: BoundedCache[uuid.UUID, tuple[FullMatrix, float]] = BoundedCache(
    "full_matrices", MATRIX_CACHE_BYTES
)
_LOCK = threading.Lock()  # matrix entry read-modify-write
MATRIX_FLIGHTS = SingleFlight()  # one load per (version, stamp) at a time
# called with (version id, new stamp) after a version's matrix is reloaded
_RELOAD_LISTENERS: list[Callable[[uuid.UUID, tuple], None]] = []


def _version_exists(session: Session, version_id: uuid.UUID) -> None:
    stmt = select(BenchmarkVersion.id).where(BenchmarkVersion.id == version_id)
    if session.scalar(stmt) is None:
        raise NotFound(f"benchmark {version_id} does not exist")


def _cached_matrix(version_id: uuid.UUID, stamp: tuple, checked: float) -> FullMatrix | None:
    with _LOCK:
        entry = _MATRICES.get(version_id)
        if entry is not None and entry[0].stamp == stamp:
            _MATRICES.put(version_id, (entry[0], checked))
            return entry[0]
    return None


def full_matrix(session: Session, version_id: uuid.UUID) -> FullMatrix:
    """The cached full-coverage 0/1 matrix of a version (reloaded when its results change)."""
    stamp = results_stamp(session, version_id)
    if stamp[0] == 0:
        _version_exists(session, version_id)
    checked = time.monotonic()
    hit = _cached_matrix(version_id, stamp, checked)
    if hit is not None:
        return hit
    with MATRIX_FLIGHTS((version_id, stamp)):
        hit = _cached_matrix(version_id, stamp, checked)
        return hit if hit is not None else _load_full_matrix(session, version_id, stamp, checked)


def _load_full_matrix(
    session: Session, version_id: uuid.UUID, stamp: tuple, checked: float
) -> FullMatrix:
    mat = load_matrix(session, version_id)
    full = mat.coverage.all(axis=1)
    filled = np.nan_to_num(mat.correct, nan=0.5)
    binary = np.all((filled == 0.0) | (filled == 1.0), axis=1)
    keep = full & binary
    unusable = {
        str(n): ("partial coverage" if not f else "non-binary scores")
        for n, f, k in zip(mat.model_names.tolist(), full.tolist(), keep.tolist(), strict=True)
        if not k
    }
    names = mat.model_names[keep]
    correct = mat.correct[keep].astype(np.uint8)
    correct.setflags(write=False)
    scores = score_rows = None
    if (full & ~binary).any():
        scores = np.ascontiguousarray(mat.correct[full], dtype=np.float32)
        scores.setflags(write=False)
        score_rows = {str(n): i for i, n in enumerate(mat.model_names[full].tolist())}
    entry = FullMatrix(
        version_id=version_id,
        stamp=stamp,
        names=names,
        rows={str(n): i for i, n in enumerate(names.tolist())},
        correct=correct,
        accuracy=correct.mean(axis=1) if correct.size else np.zeros(0),
        subtasks=mat.subtasks,
        unusable=unusable,
        scores=scores,
        score_rows=score_rows,
    )
    with _LOCK:
        _MATRICES.put(version_id, (entry, checked))
    for listener in _RELOAD_LISTENERS:
        listener(version_id, stamp)
    return entry


def model_row(fm: FullMatrix, name: str, field: str) -> int:
    row = fm.rows.get(name)
    if row is not None:
        return row
    if name in fm.unusable:
        raise Conflict(
            f"model {name!r} has {fm.unusable[name]} on this benchmark; verdicts need full 0/1 "
            "results: push its results on every item (`benchslice push --benchmark NAME "
            "--model MODEL PATH --replace`)",
            field=field,
            message=fm.unusable[name],
        )
    hint = did_you_mean(name, [*fm.rows, *fm.unusable])
    raise NotFound(
        f"model {name!r} has no results on this benchmark{hint}",
        field=field,
        message=f"unknown model{hint}",
    )


def score_row(fm: FullMatrix, name: str, field: str) -> int:
    """Row of ``name`` in ``fm.scores`` (a graded benchmark), else the 409/404 of
    :func:`model_row` (partial coverage, unknown model)."""
    row = None if fm.score_rows is None else fm.score_rows.get(name)
    if row is not None:
        return row
    if name in fm.unusable and fm.unusable[name] == "partial coverage":
        raise Conflict(
            f"model {name!r} has partial coverage on this benchmark; this answer needs its "
            "scores on every item: push them (`benchslice push --benchmark NAME --model MODEL "
            "PATH --replace`), or score it from a subset of the items it has "
            "(`benchslice score SUBSET PATH`)",
            field=field,
            message="partial coverage",
        )
    return model_row(fm, name, field)


def fresh_matrix(version_id: uuid.UUID) -> FullMatrix | None:
    """The cached matrix of a version if its results stamp was confirmed within
    :data:`STAMP_TTL_SECONDS` (no I/O: callable from the event loop), else None."""
    entry = _MATRICES.get(version_id)
    if entry is None or time.monotonic() - entry[1] > STAMP_TTL_SECONDS:
        return None
    return entry[0]


def on_matrix_reload(listener: Callable[[uuid.UUID, tuple], None]) -> None:
    """Call ``listener(version_id, stamp)`` whenever a version's matrix is reloaded (caches keyed
    by an older stamp can drop their entries)."""
    _RELOAD_LISTENERS.append(listener)


_DOC_IDS: BoundedCache[uuid.UUID, np.ndarray] = BoundedCache("doc_ids", 16 * MB)


def doc_ids(version: BenchmarkVersion) -> np.ndarray:
    """Each item's position within its subtask (lm-eval's ``doc_id``), cached per version."""
    hit = _DOC_IDS.get(version.id)
    if hit is not None:
        return hit
    codes = np.frombuffer(version.subtask_codes, dtype="<i4")
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, codes.size]))
    out = np.empty(codes.size, dtype=np.int64)
    out[order] = np.arange(codes.size) - group_start
    out.setflags(write=False)
    _DOC_IDS.put(version.id, out)
    return out


def clear_caches() -> None:
    for cache in (_MATRICES, _DOC_IDS):
        cache.clear()
