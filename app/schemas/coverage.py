"""Coverage study of a benchmark version's own population (``/v1/benchmarks/{b}/coverage``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from app.schemas.common import Estimand, estimand_field


class CoverageRunCreate(BaseModel):
    methods: list[str] | None = Field(
        default=None,
        min_length=1,
        description="selectors to study (default random, anchor_points, tiny_benchmarks)",
        examples=[["random", "anchor_points"]],
    )
    sizes: list[int] | None = Field(
        default=None, min_length=1, max_length=5, description="subset sizes (default 25, 50, 100)"
    )
    repeats: int | None = Field(
        default=None, ge=1, le=20, description="source/target splits (default 5)"
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**63 - 1, description="fixed seed; drawn and stored when omitted"
    )
    extrapolation: bool = Field(
        default=False,
        description="also the extrapolation splits (issue 38): fit on the weakest 80 % of the "
        "models, score the strongest 20 % (weak_to_strong), and the mirror (strong_to_weak)",
    )


class CoverageCell(BaseModel):
    split: str = Field(
        default="random",
        description="random: held-out targets like the sources; weak_to_strong / strong_to_weak: "
        "every target stronger / weaker than every source (the extrapolation splits)",
    )
    method: str
    estimator: str
    interval: str | None
    basis: str
    estimand: Estimand = estimand_field(
        "benchmark", " (the truth each interval is checked against is the full-benchmark mean)"
    )
    n: int
    cases: int = Field(description="(target, repeat) cases")
    coverage: float | None = Field(description="share of 95 % intervals containing the truth")
    coverage_low: float | None = Field(description="the same in the lowest fifth of targets")
    coverage_high: float | None = Field(description="the same in the highest fifth of targets")
    mean_width: float | None
    mean_abs_error: float | None = Field(description="mean |estimate - full accuracy|")


class CoverageRunPublic(BaseModel):
    job_id: uuid.UUID
    version_id: uuid.UUID
    finished_at: datetime | None
    seed: int = Field(description="the seed that reproduces the table")
    n_models: int = Field(description="models with full results on the version")
    n_sources: int
    n_targets: int
    methods: list[str]
    sizes: list[int]
    repeats: int
    rows: list[CoverageCell]
