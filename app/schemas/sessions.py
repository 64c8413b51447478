"""Evaluation sessions (issue 12): request and response models."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.benchmarks import MODEL_NAME_PATTERN

MAX_SEED = 2**63 - 1
Basis = Literal["design", "model"]
Policy = Literal["random", "assisted", "neyman", "fluid"]
SessionState = Literal["open", "decided", "exhausted", "abandoned"]
Decision = Literal[
    "undecided",
    "better",
    "worse",
    "equivalent",
    "precise",
    "noninferior",
    "regressed",
    "superior",
    "not_superior",
    "on_margin",
]


class SessionCreate(BaseModel):
    """Evaluate ``model`` in batches until the goal is met (or ``max_items`` runs out)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"model": "org/new-7b", "baseline": "org/old-7b", "goal": "decide", "seed": 1}
            ]
        },
    )

    model: str = Field(min_length=1, max_length=300, pattern=MODEL_NAME_PATTERN)
    baseline: str | None = Field(
        default=None,
        min_length=1,
        max_length=300,
        pattern=MODEL_NAME_PATTERN,
        description="Model with full stored results on this benchmark (needed by goal=decide)",
    )
    goal: Literal["decide", "precision", "noninferior", "superior"] = Field(
        default="decide",
        description="decide: stop when the interval for the difference excludes 0 (better/worse) "
        "or lies inside [-margin, margin] (equivalent); precision: stop when the interval's "
        "half-width is at most `precision` (the difference's with a baseline, else the "
        "accuracy's); noninferior: one-sided, decides noninferior (difference > -margin) or "
        "regressed (< -margin); superior: one-sided, decides superior (difference > margin, "
        "default 0) or not_superior; each one-sided test spends all of alpha on its side",
    )
    policy: Policy | None = Field(
        default=None,
        description="How items are drawn; every policy decides with the same design-based "
        "confidence sequence for the model's mean (wrong decision with probability <= alpha). "
        "random: uniform draws; assisted: uniform draws, the benchmark's IRT predictions as "
        "control variates; neyman: draws where the IRT prediction is most uncertain (floor "
        "0.5); fluid: draws by Fluid Benchmarking's information criterion (floor 0.5). The IRT "
        "policies wait for the benchmark's IRT fit (a job) the first time. Default: assisted "
        "when the benchmark has an IRT fit or at least 10 models with full results, else random",
    )
    alpha: float = Field(default=0.05, gt=0.0, le=0.5, description="Error level")
    margin: float | None = Field(
        default=None,
        ge=0.0,
        lt=1.0,
        description="decide: equivalence margin; noninferior (required) / superior: the margin "
        "of the one-sided question, in accuracy units (0.02 = 2 points)",
    )
    precision: float | None = Field(
        default=None, gt=0.0, lt=1.0, description="Target half-width (goal=precision)"
    )
    batch_size: int = Field(default=10, ge=1, le=10_000)
    max_items: int | None = Field(default=None, ge=1, description="Default: every item")
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED, description="Drawn when omitted")
    store_results: bool = Field(
        default=False,
        description="When the session closes, store the model's results on the items seen as a "
        "partial-coverage result set (skipped if the model already has other results)",
    )


class SessionItem(BaseModel):
    position: int
    item_id: str
    doc_id: int = Field(description="Position within the subtask (lm-eval doc_id)")
    subtask: str


class OneSidedBounds(BaseModel):
    lower: float = Field(description="Lower bound for the difference (above threshold: decided up)")
    upper: float = Field(description="Upper bound for the difference (below threshold: down)")
    threshold: float


class Interval(BaseModel):
    value: float | None = Field(
        description="Point estimate (null before any result): the sample mean for random, the "
        "model-assisted estimate (seen results + IRT predictions + their average error) for the "
        "IRT policies; an estimate, without the interval's guarantee"
    )
    lower: float
    upper: float
    basis: Basis = Field(
        description="design: valid by the random draws alone (anytime-valid, whatever the IRT "
        "fit); model: only as good as the IRT fit (fluid sessions created before the design-based "
        "policies)"
    )


class HistoryRow(BaseModel):
    step: int
    items_used: int
    estimate: Interval
    difference: Interval | None
    decision: Decision
    state: SessionState


class SessionPublic(BaseModel):
    id: uuid.UUID
    version_id: uuid.UUID = Field(description="the benchmark version the session evaluates on")
    benchmark: str
    benchmark_version: int
    model: str
    baseline: str | None
    goal: Literal["decide", "precision", "noninferior", "superior"]
    policy: Policy
    alpha: float
    margin: float | None
    precision: float | None
    batch_size: int
    max_items: int
    seed: int
    n_items: int
    state: SessionState = Field(
        description="open: takes the batch in next_items; decided / exhausted: closed; "
        "abandoned: open but idle for longer than SESSION_IDLE_HOURS (takes no more batches)"
    )
    decision: Decision
    step: int = Field(description="Batches answered; the open batch is step + 1")
    items_used: int
    estimate: Interval = Field(description="The model's full-benchmark accuracy")
    difference: Interval | None = Field(description="Accuracy minus the baseline's (full)")
    baseline_accuracy: float | None
    one_sided: OneSidedBounds | None = Field(
        default=None,
        description="goal noninferior / superior: the one-sided confidence bounds for the "
        "difference (each at level alpha, from the goal's own tests) and the threshold they "
        "are compared with (-margin, or +margin)",
    )
    next_items: list[SessionItem] = Field(description="The open batch (empty once closed)")
    samples: dict[str, list[int]] = Field(
        description="The open batch for `lm_eval --samples`: {subtask: [doc_id, ...]}"
    )
    history: list[HistoryRow]
    stored_result: str | None = Field(
        description="created/unchanged when the closed session's results were stored; "
        "skipped: the model already has other results"
    )
    created_at: datetime
    updated_at: datetime


class SessionSummary(BaseModel):
    """A session in a listing (no history, no batch)."""

    id: uuid.UUID
    version_id: uuid.UUID
    model: str
    baseline: str | None
    goal: str
    policy: str
    state: SessionState = Field(
        description="abandoned: open, but no batch for longer than SESSION_IDLE_HOURS"
    )
    decision: Decision
    items_used: int
    n_items: int
    created_at: datetime
    updated_at: datetime = Field(description="Last activity: creation or the last batch applied")


class SessionPage(BaseModel):
    items: list[SessionSummary]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page"
    )
