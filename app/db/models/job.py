from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Enum, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, Timestamps, UTCDateTime, UUIDPrimaryKey
from app.enums import TERMINAL_STATUSES, JobStatus

__all__ = ["ACTIVE_DEDUPE_INDEX", "TERMINAL_STATUSES", "Job", "JobStatus"]

ACTIVE_DEDUPE_INDEX = "uq_jobs_dedupe_active"
# One active (queued or running) job per dedupe key: the database arbitrates identical requests
# from any number of API processes (a partial unique index; Postgres and SQLite both have them).
_ACTIVE = text("dedupe_key IS NOT NULL AND status IN ('queued', 'running')")


class Job(UUIDPrimaryKey, Timestamps, Base):
    __tablename__ = "jobs"
    __table_args__ = (
        Index(
            ACTIVE_DEDUPE_INDEX,
            "dedupe_key",
            unique=True,
            postgresql_where=_ACTIVE,
            sqlite_where=_ACTIVE,
        ),
    )

    kind: Mapped[str] = mapped_column(String(64), index=True)
    status: Mapped[JobStatus] = mapped_column(
        Enum(JobStatus, name="job_status", native_enum=False, length=16, validate_strings=True),
        default=JobStatus.queued,
        index=True,
    )
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    seed: Mapped[int] = mapped_column(BigInteger)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # sha256 of (kind, canonical params, seed) for kinds whose identical requests share one job
    # (subset, analysis); NULL for the others (every request its own job)
    dedupe_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # the API key that submitted it (job quotas); None for jobs made outside a request
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
