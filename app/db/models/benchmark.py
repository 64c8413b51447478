"""Benchmarks and their immutable, content-hashed item lists (versions)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, Timestamps, UTCDateTime, UUIDPrimaryKey, utcnow
from app.db.models.access import Project


class Benchmark(UUIDPrimaryKey, Timestamps, Base):
    __tablename__ = "benchmarks"

    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    # names stay unique instance-wide; the project decides who may read and write
    project_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("projects.id", ondelete="RESTRICT"), index=True
    )

    project: Mapped[Project] = relationship(lazy="joined", innerjoin=True)

    versions: Mapped[list[BenchmarkVersion]] = relationship(
        back_populates="benchmark", cascade="all, delete-orphan", passive_deletes=True
    )


class BenchmarkVersion(UUIDPrimaryKey, Base):
    """One ordered item list. Never updated: a changed list is a new version.

    Items are stored packed: ``item_ids`` and ``subtask_names`` as JSON lists, the per-item
    subtask as little-endian int32 codes into ``subtask_names``; optional text/metadata per
    item in ``items_extra``.
    """

    __tablename__ = "benchmark_versions"
    __table_args__ = (
        UniqueConstraint("benchmark_id", "content_hash", name="uq_benchmark_versions_hash"),
        UniqueConstraint("benchmark_id", "version", name="uq_benchmark_versions_version"),
    )

    benchmark_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    n_items: Mapped[int] = mapped_column(Integer)
    # large: loaded on first access only (item_index() caches the decoded arrays per version)
    item_ids: Mapped[list[str]] = mapped_column(JSON, deferred=True)
    subtask_names: Mapped[list[str]] = mapped_column(JSON)
    subtask_codes: Mapped[bytes] = mapped_column(LargeBinary)
    items_extra: Mapped[list[dict[str, Any] | None] | None] = mapped_column(
        JSON, nullable=True, deferred=True
    )
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, server_default=func.now()
    )
    # retired: hidden from name resolution (``name``, ``name@vN``), still reachable by id
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    benchmark: Mapped[Benchmark] = relationship(back_populates="versions", lazy="joined")


class PrecomputedView(Base):
    """What a first view needs, computed in the worker after an upload (issue 27): one row per
    version and view name, valid only under the results ``stamp`` it was computed for (the
    results stamp every cache key uses: count and newest ``updated_at``). A reader serves it
    only when its stamp equals the version's current one, so a stale row is never served."""

    __tablename__ = "precomputed_views"

    benchmark_version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("benchmark_versions.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    stamp: Mapped[str] = mapped_column(String(80))
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, server_default=func.now()
    )
