"""Enums shared by the database models, the API schemas and the client: one neutral module that
imports neither SQLAlchemy nor pydantic, so every layer can use it."""

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
