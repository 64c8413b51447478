"""MDAD analyses: request and response models."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.enums import JobStatus
from app.schemas.benchmarks import version_id_field
from app.schemas.common import Estimand, estimand_field
from app.schemas.jobs import JobProgress


class AnalysisCreate(BaseModel):
    """Run the paper's protocol (runs x source/target split x seen/unseen halves) and MDAD."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"methods": ["random", "anchor_points"], "sizes": [10, 25, 50, 100, 200]}]
        },
    )

    methods: list[str] = Field(
        min_length=1, max_length=16, description="Registered selector names (distinct)"
    )
    sizes: list[int] = Field(
        min_length=1, max_length=32, description="Subset sizes, each at most the seen half"
    )
    runs: int = Field(default=50, ge=2, le=1000, description="Protocol runs (paper: 50)")
    n_sources: int = Field(default=300, ge=1, description="Source models per run (paper: 300)")
    n_targets: int = Field(default=50, ge=2, description="Target models per run (paper: 50)")
    mode: Literal["robust", "paper"] = Field(
        default="robust",
        description="`paper`: the reference MDAD exactly; `robust`: monotone curve, merged "
        "sparse bins, explicit ties, runs-bootstrap CI",
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**63 - 1, description="fixed seed; drawn and stored when omitted"
    )
    gap: float = Field(
        default=0.02,
        gt=0,
        le=1,
        description="Accuracy gap (fraction, 0.02 = 2 points) the recommendation must detect",
    )
    threshold: float = Field(
        default=0.8, gt=0.5, lt=1, description="Agreement probability that defines the MDAD"
    )


class MDADCell(BaseModel):
    """One (method, n, split) row of the MDAD table (gaps in accuracy fractions)."""

    method: str
    n: int
    split: Literal["seen", "unseen", "full"]
    mdad: float | None = Field(description="null: the threshold is never reached (robust mode)")
    ci_low: float | None
    ci_high: float | None = Field(description="null: not reached in the bootstrap's upper tail")
    estimand: Estimand = estimand_field(
        "benchmark", " (agreement with the order of these N items; the CI is a bootstrap's)"
    )
    reached: bool
    max_gap: float
    mean_agreement: float
    mean_abs_error: float | None = Field(description="mean |true - estimated accuracy|")
    kendall_tau: float | None = Field(description="mean over runs of Kendall's tau-b")
    mean_subset_size: float
    n_runs: int
    n_pairs: int
    n_boot: int


class AgreementCurvePublic(BaseModel):
    """P(the subset orders a pair like the full benchmark) by gap bin, one (method, n, split)."""

    method: str
    n: int
    split: Literal["seen", "unseen", "full"]
    kind: Literal["paper", "robust"]
    max_gap: float
    gap_low: list[float] = Field(description="lower edge of each gap bin")
    gap_high: list[float] = Field(description="exclusive upper edge of each gap bin")
    n_pairs: list[float]
    p_same: list[float | None]
    p_tie: list[float | None]
    p_reversed: list[float | None]
    fitted: list[float | None] | None = Field(description="isotonic P(same order) (robust mode)")
    band_low: list[float | None] | None
    band_high: list[float | None] | None


class RandomVsBest(BaseModel):
    n: int
    best_method: str | None = Field(description="lowest MDAD at this n (null: none reached)")
    best_mdad: float | None
    best_ci_high: float | None
    random_mdad: float | None
    random_within_ci: bool | None = Field(
        description="random's MDAD is within the best method's CI (null: undecidable)"
    )


class Recommendation(BaseModel):
    gap: float
    threshold: float
    split: Literal["seen"] = "seen"
    smallest_n: dict[str, int | None] = Field(
        description="per method, the smallest evaluated n whose MDAD <= gap (null: none)"
    )
    random_vs_best: list[RandomVsBest] | None = Field(
        description="null unless `random` was among the methods"
    )


class AnalysisResult(BaseModel):
    models_used: int = Field(description="models with full coverage the protocol drew from")
    n_items: int
    confidence_used: bool
    seconds: dict[str, float] = Field(description="engine time per method, summed over chunks")
    executed_by: list[str] = Field(description="worker processes (host:pid) that ran chunks")
    mdad: list[MDADCell]
    curves: list[AgreementCurvePublic]
    recommendation: Recommendation


class AnalysisLinks(BaseModel):
    self: str
    job: str
    mdad_plot: str
    agreement_plot: str


class AnalysisPublic(BaseModel):
    id: uuid.UUID
    version_id: uuid.UUID = version_id_field("The benchmark version analysed")
    benchmark_name: str
    job_id: uuid.UUID
    status: JobStatus
    progress: JobProgress
    error: str | None
    methods: list[str]
    sizes: list[int]
    runs: int
    n_sources: int
    n_targets: int
    mode: Literal["robust", "paper"]
    seed: int
    gap: float
    threshold: float
    created_at: datetime
    finished_at: datetime | None
    links: AnalysisLinks
    result: AnalysisResult | None = Field(
        default=None, description="set once the job succeeded (omitted in lists)"
    )


class AnalysisPage(BaseModel):
    items: list[AnalysisPublic]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page"
    )
