"""Fixed micro-benchmarks (subsets) and the scores of models evaluated only on them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    func,
)
from sqlalchemy.orm import Mapped, deferred, mapped_column

from app.db.base import Base, UUIDPrimaryKey, utcnow


class Subset(Base):
    """One immutable subset of a benchmark version, identified by its content hash.

    ``id`` is the sha256 (hex) of the canonical request: benchmark version, method, size,
    canonical params JSON, seed, and the sorted source models with their result hashes (see
    :func:`app.services.selection.subsets.subset_id`). ``indices`` (little-endian int64) and ``weights``
    (float64) are packed and aligned, in the selector's order; ``fitted`` is the selector's
    fitted state as ``.npz`` bytes, so scoring never refits.
    """

    __tablename__ = "subsets"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    benchmark_version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("benchmark_versions.id", ondelete="CASCADE"), index=True
    )
    method: Mapped[str] = mapped_column(String(64))
    size_requested: Mapped[int] = mapped_column(Integer)
    size: Mapped[int] = mapped_column(Integer)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seed: Mapped[int] = mapped_column(BigInteger)
    estimator: Mapped[str] = mapped_column(String(64))
    estimate_on: Mapped[str] = mapped_column(String(16))
    signal: Mapped[str] = mapped_column(String(16))
    n_candidates: Mapped[int] = mapped_column(Integer)
    source_models: Mapped[list[str]] = mapped_column(JSON, default=list)
    indices: Mapped[bytes] = mapped_column(LargeBinary)
    weights: Mapped[bytes] = mapped_column(LargeBinary)
    fitted: Mapped[bytes | None] = deferred(mapped_column(LargeBinary, nullable=True))
    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )


class SubsetScore(UUIDPrimaryKey, Base):
    """A model scored from its results on a subset's items only.

    ``estimates``: one entry per estimator (value, CI, SE, method of the interval);
    ``baseline``: the paired comparison with a model that has full results (or NULL);
    ``population_shift``: what was checked and whether it flagged.
    """

    __tablename__ = "subset_scores"

    subset_id: Mapped[str] = mapped_column(ForeignKey("subsets.id", ondelete="CASCADE"), index=True)
    model_name: Mapped[str] = mapped_column(String(300), index=True)
    n_items: Mapped[int] = mapped_column(Integer)
    subset_accuracy: Mapped[float] = mapped_column(Float)
    estimates: Mapped[dict[str, Any]] = mapped_column(JSON)
    baseline: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    population_shift: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )
