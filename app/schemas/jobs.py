from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.enums import JobStatus
from app.schemas.common import ORMModel


class JobCreate(BaseModel):
    kind: str = Field(min_length=1, max_length=64, examples=["ping"])
    params: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = Field(
        default=None, ge=0, le=2**63 - 1, description="fixed seed; drawn and stored when omitted"
    )


class JobProgress(BaseModel):
    done: int
    total: int | None


class JobPublic(ORMModel):
    id: uuid.UUID
    kind: str
    status: JobStatus
    progress: JobProgress
    seed: int
    params: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime

    @classmethod
    def from_job(cls, job: Any) -> JobPublic:
        return cls.model_validate(
            {
                **{name: getattr(job, name) for name in cls.model_fields if name != "progress"},
                "progress": {"done": job.progress_done, "total": job.progress_total},
            }
        )
