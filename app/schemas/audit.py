"""The audit trail and projects: response models."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AuditEventPublic(BaseModel):
    """One write: who (key id and name), where (project, benchmark), what and when."""

    model_config = ConfigDict(from_attributes=True)

    id: int = Field(description="Increases in the order rows were written")
    at: datetime
    key_id: str = Field(description="The API key's id (`anonymous` with keys disabled)")
    key_name: str
    project: str | None = Field(default=None, validation_alias="project_name")
    action: str = Field(examples=["results.upload", "results.delete", "job.cancel"])
    benchmark_id: uuid.UUID | None = None
    target: dict[str, Any] = Field(description="benchmark/version/model/session/job acted on")
    request_id: str | None = Field(default=None, description="X-Request-ID of the request")
    summary: dict[str, Any] = Field(
        description="What changed, e.g. status, accuracy and previous_accuracy of a replace"
    )


class AuditPage(BaseModel):
    items: list[AuditEventPublic]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page"
    )


class ProjectPublic(BaseModel):
    name: str
    public_read: bool = Field(description="Every valid key may read its benchmarks")
    role: str | None = Field(
        default=None, description="The calling key's role here (admin for an instance admin)"
    )
    created_at: datetime


class ProjectList(BaseModel):
    items: list[ProjectPublic]
