"""Item health of a benchmark version (``GET /v1/benchmarks/{benchmark}/items``) and the items
a subset request excludes by flag.

Statistics from :func:`app.core.items.health.item_health` over the models with full 0/1 results
(:func:`app.services.catalog.matrices.full_matrix`); with a stored IRT fit
(:mod:`app.services.catalog.irt_fits`) the models' abilities are scored under it (MAP) and each item gets
its 2PL discrimination, difficulty and infit. Cached per (version, results stamp, fit).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from app.core.irt.model import IRTModel
from app.core.items.health import FLAGS, ItemHealth, item_health
from app.db.models import BenchmarkVersion
from app.errors import Conflict, InvalidInput
from app.schemas.items import MAX_ITEMS_PAGE, ItemHealthPage, ItemHealthRow, ItemHealthSummary
from app.services.catalog import irt_fits
from app.services.catalog.benchmarks import item_index
from app.services.catalog.matrices import doc_ids, full_matrix
from app.services.platform.caching import MB, BoundedCache

MIN_MODELS = 3
HEALTH_CACHE_BYTES = 32 * MB


@dataclass(frozen=True)
class HealthTable:
    health: ItemHealth
    irt_dims: int | None


_TABLES: BoundedCache[tuple, HealthTable] = BoundedCache("item_health", HEALTH_CACHE_BYTES)


def _fit_model(fit, n_items: int) -> IRTModel | None:
    """The stored fit as an :class:`IRTModel` (offsets ``c = dims * b`` of the scalar form)."""
    a = np.frombuffer(fit.a, dtype="<f8").reshape(-1, fit.dims)
    if a.shape[0] != n_items:
        return None
    c = np.frombuffer(fit.offset, dtype="<f8")
    return IRTModel(
        a=a,
        b=c / fit.dims,
        theta=np.zeros((1, fit.dims)),
        form="scalar_difficulty",
        prior="fixed",
        dims=int(fit.dims),
    )


def health_table(session: Session, version: BenchmarkVersion) -> HealthTable:
    """The version's item health, cached per (version, results stamp, IRT fit present)."""
    fm = full_matrix(session, version.id)
    fit = irt_fits.get_fit(session, version.id)
    key = (version.id, fm.stamp, fit is not None)
    hit = _TABLES.get(key)
    if hit is not None:
        return hit
    # graded scores (issue 35): the same statistics on every full-coverage model's scores in
    # [0, 1] (constant: every model the same score; point-biserial: Pearson's r with the rest
    # score); the 0/1 IRT fit's misfit statistics are not applied to them
    y = (fm.scores if fm.scores is not None else fm.correct).astype(np.float64)
    if y.shape[0] < MIN_MODELS:
        raise Conflict(
            f"item health needs at least {MIN_MODELS} models with results on every item; this "
            f"benchmark has {y.shape[0]}: push more (`benchslice push --benchmark NAME "
            "PATH`; API: POST /v1/benchmarks/{benchmark}/results)"
        )
    model = None if fit is None or fm.graded else _fit_model(fit, version.n_items)
    if model is None:
        health = item_health(y)
    else:
        theta = model.score(y).theta
        health = item_health(y, irt=model, theta=theta)
    table = HealthTable(health, None if model is None else model.dims)
    _TABLES.discard_where(lambda k: k[0] == version.id and k[1:] != key[1:])
    _TABLES.put(key, table)
    return table


def check_flags(flags, field: str = "flag") -> list[str]:
    """Known flags in :data:`FLAGS` order (422 naming ``field`` on an unknown one)."""
    unknown = [f for f in flags if f not in FLAGS]
    if unknown:
        raise InvalidInput(
            f"unknown flag(s) {unknown}",
            field=field,
            message=f"choose from {list(FLAGS)}",
        )
    return [f for f in FLAGS if f in set(flags)]


def _encode(position: int) -> str:
    return base64.urlsafe_b64encode(f"item|{position}".encode()).decode().rstrip("=")


def _decode(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        tag, pos = raw.split("|", 1)
        if tag != "item" or int(pos) < 0:
            raise ValueError(raw)
        return int(pos)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput(
            "invalid cursor", field="cursor", message="not a cursor returned by this API"
        ) from None


def _opt(x: np.ndarray | None, i: int) -> float | None:
    if x is None or not np.isfinite(x[i]):
        return None
    return float(x[i])


def list_items(
    session: Session,
    version: BenchmarkVersion,
    *,
    limit: int = 100,
    cursor: str | None = None,
    flags: list[str] | None = None,
) -> ItemHealthPage:
    """One page of item rows by position; ``flags``: only items carrying any of them."""
    wanted = check_flags([f.strip() for v in flags or [] for f in v.split(",") if f.strip()])
    limit = max(1, min(int(limit), MAX_ITEMS_PAGE))
    start = 0 if cursor is None else _decode(cursor)
    table = health_table(session, version)
    h = table.health
    mask = h.flagged(wanted) if wanted else np.ones(h.accuracy.shape[0], dtype=bool)
    positions = np.flatnonzero(mask[start:]) + start
    page = positions[:limit]
    more = positions.size > limit
    index = item_index(version)
    docs = doc_ids(version)
    rows = [
        ItemHealthRow(
            position=i,
            item_id=str(index.item_ids[i]),
            doc_id=int(docs[i]),
            subtask=str(index.subtasks[i]),
            accuracy=float(h.accuracy[i]),
            point_biserial=_opt(h.point_biserial, i),
            discrimination=_opt(h.discrimination, i),
            difficulty=_opt(h.difficulty, i),
            fit=_opt(h.infit, i),
            flags=h.item_flags(i),  # type: ignore[arg-type]
        )
        for i in page.tolist()
    ]
    s = h.summary()
    return ItemHealthPage(
        version_id=version.id,
        items=rows,
        next_cursor=_encode(int(page[-1]) + 1) if more else None,
        summary=ItemHealthSummary(**s, irt=table.irt_dims is not None, irt_dims=table.irt_dims),
    )


def excluded_positions(session: Session, version: BenchmarkVersion, flags: list[str]) -> np.ndarray:
    """Positions of the items carrying any of ``flags`` (sorted)."""
    return np.flatnonzero(health_table(session, version).health.flagged(flags))


def clear_caches() -> None:
    _TABLES.clear()


__all__ = ["check_flags", "excluded_positions", "health_table", "list_items"]
