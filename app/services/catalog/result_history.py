"""Undo for model results: replaced or deleted results are archived, and can be restored.

Replacing or deleting a model's results first copies the current row, byte for byte, into
``model_result_archive``. ``restore`` puts the newest archived copy back (the current results,
if any, are archived in turn, so a restore can itself be undone) with a fresh ``updated_at``:
the version's results stamp changes, so cached matrices, verdicts and leaderboards recompute.
Archived copies older than the retention period (``RESULTS_RETENTION_DAYS``) are purged
whenever another one is written.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models.model_result import ARCHIVED_COLUMNS, ModelResult, ModelResultArchive
from app.db.repositories.model_results import ModelResultArchiveRepository, ModelResultRepository
from app.errors import NotFound

DEFAULT_RETENTION = timedelta(days=30)


def archive(
    session: Session, row: ModelResult, reason: str, *, keep_for: timedelta = DEFAULT_RETENTION
) -> ModelResultArchive:
    """Copy ``row`` into the archive (flush only) and purge copies past ``keep_for``."""
    now = utcnow()
    repo = ModelResultArchiveRepository(session)
    repo.purge_before(now - keep_for)
    copy = ModelResultArchive(
        benchmark_version_id=row.benchmark_version_id,
        model_id=row.model_id,
        reason=reason,
        archived_at=now,
        result_id=row.id,
        result_created_at=row.created_at,
        **{c: getattr(row, c) for c in ARCHIVED_COLUMNS},
    )
    return repo.add(copy)


def latest(session: Session, version_id: uuid.UUID, model_id: uuid.UUID) -> ModelResultArchive:
    found = ModelResultArchiveRepository(session).latest(version_id, model_id)
    if found is None:
        raise NotFound("no earlier results of this model on this benchmark to restore")
    return found


def restore(
    session: Session,
    version_id: uuid.UUID,
    model_id: uuid.UUID,
    *,
    keep_for: timedelta = DEFAULT_RETENTION,
) -> tuple[ModelResult, ModelResultArchive, ModelResultArchive | None]:
    """Bring back the newest archived results of a model on a version (flush only).

    Returns ``(restored row, the archived copy it came from, the archive of the results it
    replaced or None)``; the copy used is removed from the archive.
    """
    ModelResultArchiveRepository(session).purge_before(utcnow() - keep_for)
    copy = latest(session, version_id, model_id)
    results = ModelResultRepository(session)
    current = results.get_for(version_id, model_id, with_vectors=True)
    displaced = archive(session, current, "replaced", keep_for=keep_for) if current else None
    row = current or ModelResult(
        id=copy.result_id,
        benchmark_version_id=version_id,
        model_id=model_id,
        created_at=copy.result_created_at,
    )
    for column in ARCHIVED_COLUMNS:
        setattr(row, column, getattr(copy, column))
    row.updated_at = utcnow()
    session.add(row)
    session.delete(copy)
    session.flush()
    return row, copy, displaced
