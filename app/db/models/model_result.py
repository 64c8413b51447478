"""Evaluated models and their results: ONE row per (benchmark version, model), packed vectors."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.orm import Mapped, column_property, mapped_column, relationship

from app.db.base import Base, Timestamps, UTCDateTime, UUIDPrimaryKey


class LanguageModel(UUIDPrimaryKey, Timestamps, Base):
    """An evaluated model (``models`` table): a unique name, shared by every project. What a
    project says about it (size, family, tags) is that project's own: :class:`ModelMetadata`."""

    __tablename__ = "models"

    name: Mapped[str] = mapped_column(String(300), unique=True)


class ModelMetadata(Timestamps, Base):
    """One project's metadata of a model (issue 39): an upload to a project's benchmark sets
    the size, family and tags that project sees, and nothing any other project sees."""

    __tablename__ = "model_metadata"

    project_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    model_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    params_b: Mapped[float | None] = mapped_column(Float, nullable=True)
    family: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)


class ModelResult(UUIDPrimaryKey, Timestamps, Base):
    """One model's per-item results on one benchmark version, aligned to the item order.

    ``correct``: ``np.packbits`` of the 0/1 vector when ``binary`` else float32 little-endian
    bytes. ``confidence``: float32 bytes or NULL. ``coverage``: packbits mask of the items with a
    result, NULL when every item has one (uncovered items hold 0 in the vectors).
    ``samples_per_item``: ``K`` when each value is the mean of ``K > 1`` samples (NULL: one);
    ``within_variance``: float32 bytes of the per-item sample variance of those samples, or NULL;
    ``sample_counts``: int32 bytes of each item's number of samples when they vary (NULL: ``K``
    for every item; issue 35).
    ``eval_config``: the evaluation configuration the upload carried (readable fields),
    ``config_fingerprint`` the sha256 of its canonical JSON; both NULL when it carried none.
    ``item_costs``: float32 bytes of a (4, n_items) matrix of what each item cost the model
    (input tokens, output tokens, seconds, US dollars; NaN = not reported), ``cost_source`` where
    the figures came from; both NULL when the upload carried no cost.
    """

    __tablename__ = "model_results"
    __table_args__ = (
        UniqueConstraint("benchmark_version_id", "model_id", name="uq_model_results_version_model"),
    )

    benchmark_version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("benchmark_versions.id", ondelete="CASCADE")
    )
    model_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), index=True
    )
    binary: Mapped[bool] = mapped_column(Boolean)
    correct: Mapped[bytes] = mapped_column(LargeBinary)
    confidence: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    # loaded with the row (a boolean), so summaries that defer the vectors need no query per row
    has_confidence: Mapped[bool] = column_property(confidence.is_not(None))
    coverage: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    n_items: Mapped[int] = mapped_column(Integer)
    accuracy: Mapped[float] = mapped_column(Float)
    content_hash: Mapped[str] = mapped_column(String(64))
    source_format: Mapped[str | None] = mapped_column(String(32), nullable=True)
    metric: Mapped[str | None] = mapped_column(String(64), nullable=True)
    samples_per_item: Mapped[int | None] = mapped_column(Integer, nullable=True)
    within_variance: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    sample_counts: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    config_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    eval_config: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    item_costs: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    cost_source: Mapped[str | None] = mapped_column(String(64), nullable=True)

    model: Mapped[LanguageModel] = relationship(lazy="joined")


class ModelResultArchive(UUIDPrimaryKey, Base):
    """A model's previous results, kept when they were replaced or deleted (undo).

    A copy of every column of :class:`ModelResult` (``result_id``, ``result_created_at``: the
    row's own id and creation time) plus why and when it was archived. Restoring puts the
    bytes back unchanged; rows older than the retention period are purged.
    """

    __tablename__ = "model_result_archive"
    __table_args__ = (
        Index("ix_model_result_archive_version_model", "benchmark_version_id", "model_id"),
    )

    benchmark_version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("benchmark_versions.id", ondelete="CASCADE")
    )
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(String(16))
    archived_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False, index=True)
    result_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    result_created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    binary: Mapped[bool] = mapped_column(Boolean)
    correct: Mapped[bytes] = mapped_column(LargeBinary)
    confidence: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    coverage: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    n_items: Mapped[int] = mapped_column(Integer)
    accuracy: Mapped[float] = mapped_column(Float)
    content_hash: Mapped[str] = mapped_column(String(64))
    source_format: Mapped[str | None] = mapped_column(String(32), nullable=True)
    metric: Mapped[str | None] = mapped_column(String(64), nullable=True)
    samples_per_item: Mapped[int | None] = mapped_column(Integer, nullable=True)
    within_variance: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    sample_counts: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    config_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    eval_config: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    item_costs: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    cost_source: Mapped[str | None] = mapped_column(String(64), nullable=True)


# the columns an archive copies from (and restores to) a result row
ARCHIVED_COLUMNS = (
    "binary",
    "correct",
    "confidence",
    "coverage",
    "n_items",
    "accuracy",
    "content_hash",
    "source_format",
    "metric",
    "samples_per_item",
    "within_variance",
    "sample_counts",
    "config_fingerprint",
    "eval_config",
    "item_costs",
    "cost_source",
)
