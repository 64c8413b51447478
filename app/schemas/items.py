"""Item health: one row per benchmark item, its statistics and flags (issue 13 §3)."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, Field

ItemFlag = Literal["constant", "saturated", "negative_discrimination", "misfit"]
MAX_ITEMS_PAGE = 1000


class ItemHealthRow(BaseModel):
    position: int = Field(description="Position in the benchmark's item order")
    item_id: str
    doc_id: int = Field(description="Position within its subtask (the lm-eval doc_id)")
    subtask: str
    accuracy: float = Field(description="Share of the models with full results that get it right")
    point_biserial: float | None = Field(
        description="Correlation with the models' rest score (total minus this item); null for "
        "a constant item"
    )
    discrimination: float | None = Field(
        description="2PL discrimination along the mean direction (null without a stored IRT fit)"
    )
    difficulty: float | None = Field(
        description="2PL difficulty, the logit offset over MDISC (null without a stored IRT fit)"
    )
    fit: float | None = Field(
        description="Infit mean-square under the stored IRT fit (1 = as expected; misfit outside "
        "0.7-1.3); null without a fit"
    )
    flags: list[ItemFlag] = Field(
        description="constant (every model right or wrong), saturated (> 98 % or < 2 %), "
        "negative_discrimination (r <= -0.2 and significantly negative: suspected wrong key), "
        "misfit"
    )


class ItemHealthSummary(BaseModel):
    n_items: int
    n_models: int = Field(description="Models with full 0/1 results the statistics use")
    counts: dict[str, int] = Field(description="Items per flag")
    n_flagged: int
    n_informative: int = Field(description="Unflagged items")
    effective_informative: float = Field(
        description="Kish's effective number of unflagged items weighted by their positive "
        "point-biserial: (sum r+)^2 / sum r+^2"
    )
    irt: bool = Field(
        description="Whether discrimination, difficulty and fit come from a stored fit"
    )
    irt_dims: int | None = None


class ItemHealthPage(BaseModel):
    version_id: uuid.UUID
    items: list[ItemHealthRow] = Field(description="Sorted by position")
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page"
    )
    summary: ItemHealthSummary
