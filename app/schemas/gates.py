"""Release gates (issue 34): request and response models."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.benchmarks import MODEL_NAME_PATTERN
from app.schemas.sessions import (
    ESTIMAND_DESCRIPTION,
    MAX_SEED,
    BudgetState,
    CostUnit,
    Estimand,
    SessionItem,
)

Rule = Literal["no_regression", "no_regression_and_one_better"]
Prediction = Literal["calibrated", "paired", "random", "combined"]
Allocation = Literal["progress", "cost"]
GateState = Literal["open", "decided", "exhausted", "abandoned"]
GateOutcome = Literal["open", "pass", "fail", "inconclusive"]
BenchmarkState = Literal["open", "noninferior", "regressed", "better", "on_margin"]
MAX_BENCHMARKS = 20

MARGIN_DESCRIPTION = (
    "Non-inferiority margin delta in accuracy units (0.02 = 2 points): the candidate passes this "
    "benchmark when its accuracy is above the baseline's minus delta"
)


class GateBenchmarkCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark: str = Field(
        min_length=1, max_length=220, description="A version id, a benchmark name or name@vN"
    )
    baseline: str | None = Field(
        default=None,
        min_length=1,
        max_length=300,
        pattern=MODEL_NAME_PATTERN,
        description="The baseline on this benchmark (full results stored); default: the gate's",
    )
    margin: float | None = Field(
        default=None, ge=0.0, lt=1.0, description=MARGIN_DESCRIPTION + "; default: the gate's"
    )


class GateCreate(BaseModel):
    """One candidate against a baseline on a suite of benchmarks."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": "org/new-7b",
                    "baseline": "org/old-7b",
                    "margin": 0.02,
                    "benchmarks": [{"benchmark": "mmlu"}, {"benchmark": "gsm8k", "margin": 0.03}],
                    "seed": 1,
                }
            ]
        },
    )

    model: str = Field(min_length=1, max_length=300, pattern=MODEL_NAME_PATTERN)
    baseline: str | None = Field(
        default=None,
        min_length=1,
        max_length=300,
        pattern=MODEL_NAME_PATTERN,
        description="The baseline on every benchmark that names none (full results stored)",
    )
    margin: float | None = Field(
        default=None, ge=0.0, lt=1.0, description=MARGIN_DESCRIPTION + " (every benchmark)"
    )
    benchmarks: list[GateBenchmarkCreate] = Field(min_length=1, max_length=MAX_BENCHMARKS)
    alpha: float = Field(
        default=0.05,
        gt=0.0,
        le=0.5,
        description="P(wrong PASS) <= alpha and P(wrong FAIL) <= alpha, whatever the number of "
        "benchmarks",
    )
    rule: Rule = Field(
        default="no_regression",
        description="no_regression: PASS when every benchmark is non-inferior; "
        "no_regression_and_one_better: also better than the baseline on at least one",
    )
    prediction: Prediction = Field(
        default="calibrated",
        description="The control variate of each benchmark's bets: calibrated (P(candidate "
        "right | baseline's outcome), refitted on the items seen; the baseline's own outcome for "
        "a sibling, a constant for an unrelated pair), paired (the baseline's outcome), random "
        "(none), combined (least squares of the candidate's results on the baseline's outcome "
        "and the candidate's IRT probability at its ability refitted on the items seen: needs "
        "each benchmark's IRT fit, requested on first use: 202 with the job)",
    )
    batch_size: int = Field(
        default=50, ge=1, le=10_000, description="Items per open benchmark per round"
    )
    budget: int | None = Field(
        default=None, ge=1, description="Items in all (default: every item of the suite)"
    )
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED, description="Drawn when omitted")
    max_cost: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Budget in `cost_unit`: no new round once the cost spent reaches it (the "
        "gate then ends exhausted/inconclusive with what it spent, its bounds still valid); it "
        "can overshoot by at most one round. Spent = the costs posted with each round (a "
        "results-files upload with cost columns: measured on this candidate), else the stored "
        "models' per-item median on each benchmark (predicted). Needs stored costs on every "
        "benchmark, and at least one round's worst-case predicted cost",
    )
    max_tokens: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Token budget (input + output tokens), as max_cost",
    )
    cost_unit: CostUnit = Field(
        default="usd",
        description="Unit of max_cost and of allocation=cost's predicted costs (tokens = input + "
        "output)",
    )
    allocation: Allocation = Field(
        default="progress",
        description="How a round's items (batch_size per open benchmark) are split over the open "
        "benchmarks: progress (in proportion to 1 + progress towards a decision); cost (1 + "
        "progress divided by the benchmark's predicted mean cost per item in cost_unit, at least "
        "one item each: the cheap benchmarks move first, so a regression on one is found for "
        "less). The predicted costs are the stored models' per-item medians, fixed when the gate "
        "starts, so both error bounds hold as with progress. Needs stored costs on every "
        "benchmark",
    )


class GateBenchmarkResults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark: str = Field(min_length=1, max_length=220, description="As the gate names it")
    item_ids: list[str] = Field(max_length=100_000)
    correct: list[float] = Field(
        max_length=100_000, description="Results in [0, 1] (graded scores allowed), per item id"
    )


class GateResults(BaseModel):
    """The candidate's results on one round: every benchmark the round served, its items."""

    model_config = ConfigDict(extra="forbid")

    round: int = Field(ge=1, description="The round these results answer (the open one: round + 1)")
    results: list[GateBenchmarkResults] = Field(max_length=MAX_BENCHMARKS)


class GateBenchmark(BaseModel):
    benchmark: str
    version_id: uuid.UUID
    benchmark_version: int
    baseline: str
    baseline_accuracy: float
    margin: float
    state: BenchmarkState = Field(
        description="open; noninferior (difference > -margin, decided); regressed (< -margin); "
        "better (> 0, rule no_regression_and_one_better); on_margin (every item seen, the exact "
        "difference is -margin: not non-inferior)"
    )
    delta: float | None = Field(
        description="Candidate minus baseline on the items served (exact once all are); null "
        "before any item"
    )
    bound: float = Field(
        description="The non-inferiority test's lower confidence bound for the difference "
        "(level alpha, anytime-valid): above -margin decides noninferior"
    )
    upper: float = Field(
        description="The regression test's upper confidence bound (level alpha/K): below -margin "
        "decides regressed"
    )
    estimand: Estimand = Field(default="benchmark", description=ESTIMAND_DESCRIPTION)
    items: int = Field(description="Items served and answered")
    n_items: int
    predicted_cost_per_item: float | None = Field(
        default=None,
        description="allocation=cost: the mean predicted cost of one item in the gate's "
        "allocation_unit (the stored models' per-item medians), fixed at creation; else null",
    )


class GateRound(BaseModel):
    round: int = Field(description="Post its results with this number")
    items: dict[str, list[SessionItem]] = Field(
        description="Per benchmark (as the gate names it) the items to run; benchmarks that "
        "need none this round are absent"
    )
    samples: dict[str, dict[str, list[int]]] = Field(
        description="Per benchmark, the round for `lm_eval --samples`: {subtask: [doc_id, ...]}"
    )


class GateHistoryRow(BaseModel):
    round: int
    items_used: int
    counts: dict[str, int]
    outcome: GateOutcome
    states: dict[str, BenchmarkState]
    applied_at: datetime


class GatePublic(BaseModel):
    id: uuid.UUID
    project: str
    model: str
    rule: Rule
    prediction: Prediction
    alpha: float
    batch_size: int
    budget: int
    seed: int
    state: GateState = Field(
        description="open: takes the round in next_round; decided (pass or fail) / exhausted "
        "(budget or items ran out: inconclusive) / abandoned (POST .../abandon, or idle longer "
        "than SESSION_IDLE_HOURS): closed"
    )
    outcome: GateOutcome = Field(
        description="pass (exit 0), fail (exit 3: see regressed), inconclusive (exit 1), open"
    )
    regressed: list[str] = Field(description="Benchmarks that failed the gate")
    round: int = Field(description="Rounds answered")
    items_used: int
    items_total: int
    estimand_text: str = Field(description="Which accuracy the bounds are about")
    benchmarks: list[GateBenchmark]
    next_round: GateRound | None = Field(description="The open round (null once closed)")
    history: list[GateHistoryRow]
    created_at: datetime
    updated_at: datetime
    budgets: list[BudgetState] = Field(
        default_factory=list,
        description="Cost budgets and spending (max_cost, max_tokens); empty without a budget",
    )
    allocation: Allocation = Field(
        default="progress", description="How rounds are split over the open benchmarks"
    )
    allocation_unit: CostUnit | None = Field(
        default=None,
        description="allocation=cost: the unit of each benchmark's predicted_cost_per_item",
    )


class GateSummary(BaseModel):
    id: uuid.UUID
    project: str
    model: str
    rule: Rule
    state: GateState
    outcome: GateOutcome
    benchmarks: list[str]
    items_used: int
    items_total: int
    created_at: datetime
    updated_at: datetime


class GatePage(BaseModel):
    items: list[GateSummary]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page"
    )
