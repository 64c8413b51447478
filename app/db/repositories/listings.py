"""SQL for the browser view's listings: a version's subsets and evaluation sessions (no vectors)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import load_only

from app.db.models.evaluation_session import EvaluationSession
from app.db.models.subset import Subset


def subsets_for_version(session, version_id: uuid.UUID, *, limit: int) -> Sequence[Subset]:
    """A version's subsets, newest first (identity columns and source names: no indices,
    weights or fit)."""
    stmt = (
        select(Subset)
        .where(Subset.benchmark_version_id == version_id)
        .options(
            load_only(
                Subset.id,
                Subset.method,
                Subset.size,
                Subset.estimator,
                Subset.created_at,
                Subset.source_models,  # the page's re-anchor prompts
            )
        )
        .order_by(Subset.created_at.desc(), Subset.id)
        .limit(limit)
    )
    return session.scalars(stmt).all()


def sessions_for_version(
    session, version_id: uuid.UUID, *, limit: int
) -> Sequence[EvaluationSession]:
    """A version's evaluation sessions, newest first (no order, values or engine state)."""
    stmt = (
        select(EvaluationSession)
        .where(EvaluationSession.benchmark_version_id == version_id)
        .options(
            load_only(
                EvaluationSession.id,
                EvaluationSession.model_name,
                EvaluationSession.baseline_name,
                EvaluationSession.state,
                EvaluationSession.decision,
                EvaluationSession.items_used,
                EvaluationSession.created_at,
            )
        )
        .order_by(EvaluationSession.created_at.desc(), EvaluationSession.id)
        .limit(limit)
    )
    return session.scalars(stmt).all()
