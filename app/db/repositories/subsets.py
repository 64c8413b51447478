"""SQL for subsets and subset scores."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import undefer

from app.db.models.model_result import LanguageModel, ModelResult
from app.db.models.subset import Subset, SubsetScore
from app.db.repositories.base import Repository


class SubsetRepository(Repository[Subset]):
    model = Subset

    def get_with_fitted(self, subset_id: str) -> Subset | None:
        stmt = select(Subset).where(Subset.id == subset_id).options(undefer(Subset.fitted))
        return self.session.scalars(stmt).first()

    def exists(self, subset_id: str) -> bool:
        stmt = select(Subset.id).where(Subset.id == subset_id)
        return self.session.scalar(stmt) is not None

    def ids_starting(self, prefix: str, limit: int) -> Sequence[str]:
        """Up to ``limit`` subset ids that start with ``prefix`` (primary-key range scan)."""
        stmt = (
            select(Subset.id)
            .where(Subset.id.startswith(prefix, autoescape=True))
            .order_by(Subset.id)
            .limit(limit)
        )
        return self.session.scalars(stmt).all()


class SubsetScoreRepository(Repository[SubsetScore]):
    model = SubsetScore

    def for_subset(self, subset_id: str) -> Sequence[SubsetScore]:
        stmt = (
            select(SubsetScore)
            .where(SubsetScore.subset_id == subset_id)
            .order_by(SubsetScore.created_at.desc())
        )
        return self.session.scalars(stmt).all()


def result_fingerprints(
    session, version_id: uuid.UUID
) -> Sequence[tuple[str, uuid.UUID, str, int, bool]]:
    """``(model name, model id, content hash, n_items covered, binary)`` for every model with
    results on the version, by name (no vectors)."""
    stmt = (
        select(
            LanguageModel.name,
            LanguageModel.id,
            ModelResult.content_hash,
            ModelResult.n_items,
            ModelResult.binary,
        )
        .join(LanguageModel, LanguageModel.id == ModelResult.model_id)
        .where(ModelResult.benchmark_version_id == version_id)
        .order_by(LanguageModel.name)
    )
    return [tuple(r) for r in session.execute(stmt).all()]


def results_stamp(session, version_id: uuid.UUID) -> tuple[int, datetime | None]:
    """``(count, max updated_at)`` of a version's results: changes whenever results change."""
    stmt = select(func.count(), func.max(ModelResult.updated_at)).where(
        ModelResult.benchmark_version_id == version_id
    )
    n, last = session.execute(stmt).one()
    return int(n or 0), last
