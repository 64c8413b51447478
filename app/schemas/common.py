from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="path to the offending field, e.g. ['body', 'kind']")
    field: str = Field(description="the path joined with dots")
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem details object."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] | None = None
    limit: str | None = Field(
        default=None,
        description="With 429: the limit reached (rate, expensive-per-key, jobs, "
        "analysis-cost, auth-attempts)",
    )


class ORMModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class HealthPublic(BaseModel):
    """The process is alive (always 200); ``saturated`` when every admission place is taken
    (new requests get 503 at once), with the counts behind it."""

    status: Literal["ok", "saturated"] = "ok"
    saturated: bool = False
    in_flight: int = Field(0, description="requests holding an admission place now")
    max_in_flight: int = Field(0, description="MAX_REQUESTS_IN_FLIGHT (0: no limit)")
    bodies_reading: int = Field(0, description="requests whose body is still arriving")
    bodies_timed_out: int = Field(0, description="bodies closed by their deadline so far")
    shed: int = Field(0, description="requests answered 503 for want of a place so far")


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


Estimand = Literal["benchmark", "generalized"]
BENCHMARK_ESTIMAND = (
    "benchmark: the interval is about the mean over these N items (a finite population; exact "
    "once every item is seen)"
)
GENERALIZED_ESTIMAND = (
    "generalized: the interval is about the mean over items like these (the N items treated as "
    "a sample; never exact)"
)


def estimand_field(default: str, why: str = "") -> Any:
    """The ``estimand`` field of an answer that carries an interval (issue 38)."""
    text = BENCHMARK_ESTIMAND if default == "benchmark" else GENERALIZED_ESTIMAND
    return Field(default=default, description=f"Which accuracy: {text}{why}")
