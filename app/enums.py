"""Enums shared by the API schemas, the database models and the client (no SQLAlchemy here)."""

from __future__ import annotations

import enum


class JobStatus(enum.StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset({JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled})

__all__ = ["TERMINAL_STATUSES", "JobStatus"]
