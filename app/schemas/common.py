from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from app.api.errors import FieldError, Problem


class ORMModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class HealthPublic(BaseModel):
    status: Literal["ok"] = "ok"


class CheckPublic(BaseModel):
    ok: bool
    detail: str | None = None


class ReadinessPublic(BaseModel):
    status: Literal["ok", "unavailable"]
    checks: dict[str, CheckPublic]


__all__ = [
    "CheckPublic",
    "FieldError",
    "HealthPublic",
    "ORMModel",
    "Page",
    "Problem",
    "ReadinessPublic",
]
