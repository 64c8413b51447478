from __future__ import annotations

import hashlib
import json
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


SOURCE_MODELS_KEY = "source_models"


def source_models_sha256(names: list[str]) -> str:
    """sha256 (hex) of the sorted model names as compact JSON (``["a","b"]``, ASCII-escaped):
    a client holding the subset's ``provenance.source_models`` can check it."""
    canonical = json.dumps(sorted(names), separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def public_params(params: dict[str, Any]) -> dict[str, Any]:
    """A job's params as the API shows them: a stored ``source_models`` list (hundreds of
    names on a large benchmark, ~15 KB on GPQA) becomes ``n_source_models`` and
    ``source_models_sha256`` (both null when the method uses no source models). The list stays
    stored with the job and is served with the subset (``provenance.source_models``). Jobs stored
    before this change are read the same way."""
    if SOURCE_MODELS_KEY not in params:
        return params
    names = params[SOURCE_MODELS_KEY]
    out = {k: v for k, v in params.items() if k != SOURCE_MODELS_KEY}
    listed = isinstance(names, list)
    out["n_source_models"] = len(names) if listed else None
    out["source_models_sha256"] = source_models_sha256([str(n) for n in names]) if listed else None
    return out


class JobPublic(ORMModel):
    id: uuid.UUID
    kind: str
    status: JobStatus
    progress: JobProgress
    seed: int
    params: dict[str, Any] = Field(
        description="the job's parameters; a subset job's source models are summarised as "
        "`n_source_models` and `source_models_sha256` (sha256 of the sorted names as compact "
        "JSON); the names are listed on the subset (`provenance.source_models`)"
    )
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
                "params": public_params(dict(job.params or {})),
                "progress": {"done": job.progress_done, "total": job.progress_total},
            }
        )
