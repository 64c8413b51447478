"""The store of precomputed first views, read side (issue 27): what the worker's
``precompute_views`` job (:mod:`app.services.ranking.precompute`) wrote, served only under the
results stamp it was computed for."""

from __future__ import annotations

import uuid

from prometheus_client import Counter
from sqlalchemy.orm import Session

from app.db.repositories.benchmarks import PrecomputedViewRepository

LEADERBOARD_VIEW = "leaderboard.json"
HEALTH_VIEW = "page.health.json"

FIRST_VIEWS = Counter(
    "benchslice_first_views",
    "Reads of a precomputable view that missed the process cache, by where the answer came from",
    ["view", "source"],
)


def stamp_text(stamp: tuple) -> str:
    """A results stamp ``(count, newest updated_at)`` as stored with a view."""
    n, last = stamp
    return f"{int(n)}:{last.isoformat() if last is not None else '-'}"


def stored_view(session: Session, version_id: uuid.UUID, name: str, stamp: tuple) -> bytes | None:
    """The view the worker stored for exactly this results stamp, else ``None`` (counted on
    ``/metrics`` as ``benchslice_first_views{view, source}``)."""
    data = PrecomputedViewRepository(session).payload(version_id, name, stamp_text(stamp))
    FIRST_VIEWS.labels(name, "computed" if data is None else "precomputed").inc()
    return data


def put_view(session: Session, version_id: uuid.UUID, name: str, stamp: str, data: bytes) -> None:
    """Store (replace) a view under ``stamp`` (flush only)."""
    PrecomputedViewRepository(session).put(version_id, name, stamp, data)
