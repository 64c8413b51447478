"""MDAD analyses of a benchmark version and the chunks of runs they are computed in."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, deferred, mapped_column, relationship

from app.db.base import Base, UTCDateTime, UUIDPrimaryKey, utcnow
from app.db.models.job import Job


class Analysis(UUIDPrimaryKey, Base):
    """One protocol run + MDAD analysis. Its status is its job's status (``job`` relationship).

    ``result`` (JSON, set only together with the job's ``succeeded`` status) holds the MDAD
    table with the agreement curve of every (method, n, split) cell, and the recommendation;
    ``protocol`` the packed per-run records (``.npz`` bytes of the engine's ProtocolResult).
    """

    __tablename__ = "analyses"

    benchmark_version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("benchmark_versions.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), unique=True
    )
    methods: Mapped[list[str]] = mapped_column(JSON)
    sizes: Mapped[list[int]] = mapped_column(JSON)
    runs: Mapped[int] = mapped_column(Integer)
    n_sources: Mapped[int] = mapped_column(Integer)
    n_targets: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(String(16))
    seed: Mapped[int] = mapped_column(BigInteger)
    threshold: Mapped[float] = mapped_column(Float)
    gap: Mapped[float] = mapped_column(Float)
    result: Mapped[dict[str, Any] | None] = deferred(mapped_column(JSON, nullable=True))
    protocol: Mapped[bytes | None] = deferred(mapped_column(LargeBinary, nullable=True))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    job: Mapped[Job] = relationship(lazy="joined")


class AnalysisChunk(UUIDPrimaryKey, Base):
    """Runs ``[run_start, run_stop)`` of an analysis job, claimed by whichever worker locks it.

    A worker claims a pending chunk with ``SELECT … FOR UPDATE SKIP LOCKED`` and keeps the row
    locked while it computes, then stores ``payload`` (``.npz`` of the chunk's arrays) and
    ``done`` in the same transaction: a worker that dies releases its lock and the chunk is
    pending again.
    """

    __tablename__ = "analysis_chunks"
    __table_args__ = (UniqueConstraint("job_id", "run_start", name="uq_analysis_chunks_job_run"),)

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    run_start: Mapped[int] = mapped_column(Integer)
    run_stop: Mapped[int] = mapped_column(Integer)
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    payload: Mapped[bytes | None] = deferred(mapped_column(LargeBinary, nullable=True))
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)
