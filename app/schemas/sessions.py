"""Evaluation sessions (issue 12): request and response models."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

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
Estimand = Literal["benchmark", "generalized"]
ESTIMAND_DESCRIPTION = (
    "Which accuracy the intervals are about. benchmark: the mean over these N items (a finite "
    "population: the interval shrinks to the exact value once every item is seen); generalized: "
    "the mean over items like these (the N items treated as a sample, as McNemar's test in a "
    "verdict and a leaderboard treats them; no finite-population correction, never exact)"
)
CostUnit = Literal["usd", "seconds", "input_tokens", "output_tokens", "tokens"]


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
    estimand: Estimand | None = Field(
        default=None,
        description=ESTIMAND_DESCRIPTION + ". generalized draws items in a uniformly random "
        "order (policy random) and bets on the paired differences with the baseline. Default: "
        "generalized with a baseline and policy random or omitted (the question a verdict and a "
        "leaderboard answer, so they never contradict the session on the same pair), else "
        "benchmark",
    )
    batch_size: int = Field(default=10, ge=1, le=10_000)
    max_items: int | None = Field(default=None, ge=1, description="Default: every item")
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED, description="Drawn when omitted")
    store_results: StrictBool = Field(
        default=False,
        description="When the session closes, store the model's results on the items seen as a "
        "partial-coverage result set (skipped if the model already has other results)",
    )
    max_cost: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Budget in `cost_unit`: no new batch once the cost spent reaches it (the "
        "session then ends exhausted/undecided with what it spent, its interval still valid); "
        "it can overshoot by at most one batch. Spent = the costs posted with each batch "
        "(measured on this candidate), else the stored models' per-item median (predicted)",
    )
    max_tokens: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Token budget (input + output tokens), as max_cost",
    )
    cost_unit: CostUnit = Field(
        default="usd",
        description="Unit of max_cost and of the cost-aware draws' predicted costs (tokens = "
        "input + output)",
    )
    cost_aware: bool = Field(
        default=False,
        description="Draw items by information per unit of predicted cost (the stored models' "
        "per-item median; scores divided by sqrt(cost), floor 0.4): decisions cost less, the "
        "confidence sequence stays valid (the draws are predictable). Needs stored costs",
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
    estimand: Estimand = Field(default="benchmark", description=ESTIMAND_DESCRIPTION)


class HistoryRow(BaseModel):
    step: int
    items_used: int
    estimate: Interval
    difference: Interval | None
    decision: Decision
    state: SessionState


class BudgetState(BaseModel):
    """Cost of a session in one unit: the budget, what was spent, what a decision may cost."""

    unit: CostUnit
    limit: float | None = Field(description="The budget (null: tracked, no budget)")
    spent: float = Field(description="Cost of the items served and answered so far")
    spent_source: str = Field(
        description="measured on this candidate (costs posted with the batches), predicted from "
        "stored models (their per-item median), or both with the item counts"
    )
    exhausted: bool = Field(description="spent >= limit: the session takes no new batch")
    predicted_per_item: float | None = Field(
        description="Expected cost of the next draw under the session's design, predicted from "
        "stored models (null without stored costs)"
    )
    predicted_to_decision: float | None = Field(
        description="Rough prediction of the further cost to a decision (items still needed if "
        "the interval's half-width shrinks as 1/sqrt(items), times predicted_per_item), "
        "predicted from stored models; null when closed or unknown"
    )


class PredictionGain(BaseModel):
    """Whether an IRT policy's predictions are helping (issue 38): the bets work on the result
    minus the prediction, so what they see is that residual's variance."""

    items: int = Field(description="answered items compared")
    ratio: float = Field(
        description="variance of (result - prediction) / variance of the results, over every "
        "answered item (below 1: the predictions help)"
    )
    recent_items: int = Field(description="the last answered items the recent ratio covers")
    recent_ratio: float | None = Field(description="the same over the recent items")
    helping: bool = Field(description="both ratios below 1")
    text: str = Field(description="one sentence for a reader")


class SessionPublic(BaseModel):
    id: uuid.UUID
    version_id: uuid.UUID = Field(description="the benchmark version the session evaluates on")
    benchmark: str
    benchmark_version: int
    model: str
    baseline: str | None
    goal: Literal["decide", "precision", "noninferior", "superior"]
    policy: Policy
    estimand: Estimand = Field(description=ESTIMAND_DESCRIPTION)
    estimand_text: str = Field(description="The estimand in one sentence, with N")
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
    outcome: Literal["open", "decided", "inconclusive", "abandoned"] = Field(
        description="What the session came to: decided (see decision), inconclusive (its items "
        "or a cost budget ran out before its test decided: CI's exit code 1, never a pass), "
        "open, or abandoned"
    )
    stopped_by: Literal["decision", "max_items", "budget"] | None = Field(
        description="Why a closed session stopped: its test decided, max_items was reached, or a "
        "cost budget (max_cost / max_tokens) ran out; null while open"
    )
    conclusion: str = Field(
        description="The session's answer in one sentence naming its estimand (what the CLI "
        "prints at the end and the session page shows)"
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
    cost_aware: bool = Field(default=False, description="Draws weigh information per unit cost")
    budgets: list[BudgetState] = Field(
        default_factory=list, description="Cost budgets and spending (max_cost, max_tokens)"
    )
    predictions: PredictionGain | None = Field(
        default=None,
        description="IRT policies (assisted, neyman, fluid): whether the predictions help the "
        "bets, from 20 answered items on (null for random)",
    )


class SessionSummary(BaseModel):
    """A session in a listing (no history, no batch)."""

    id: uuid.UUID
    version_id: uuid.UUID
    model: str
    baseline: str | None
    goal: str
    policy: str
    estimand: Estimand = Field(default="benchmark", description=ESTIMAND_DESCRIPTION)
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
