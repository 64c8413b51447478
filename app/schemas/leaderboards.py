"""Leaderboards with significance tiers and rank intervals, and their pairwise tables."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from app.schemas.common import BENCHMARK_ESTIMAND, GENERALIZED_ESTIMAND, Estimand

LeaderboardFormat = Literal["json", "csv", "markdown"]
CorrectionName = Literal["holm", "bh", "none"]


class ExcludedModel(BaseModel):
    """A model with results that the leaderboard left out, and why."""

    model: str
    reason: str


class LeaderboardRowPublic(BaseModel):
    """One model, in leaderboard order (accuracy descending)."""

    model: str
    accuracy: float = Field(description="Accuracy (the subset's estimate with `subset=`)")
    ci_low: float = Field(description="Lower end of the accuracy's 1 - alpha interval")
    ci_high: float
    rank: int = Field(description="Point rank by accuracy; tied models share the best rank")
    rank_low: int = Field(description="1 + number of models significantly better")
    rank_high: int = Field(description="m - number of models significantly worse")
    tier: int = Field(description="Significance tier, 1 = top")
    n_items: int = Field(description="Items the model was scored on")


class LeaderboardPairPublic(BaseModel):
    """One pair (model_a above model_b in leaderboard order)."""

    model_a: str
    model_b: str
    difference: float = Field(description="accuracy(a) - accuracy(b) on the items both have")
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float = Field(description="After the multiplicity correction")
    p_better: float = Field(description="P(model_a better than model_b)")
    significant: bool = Field(description="p_adjusted <= alpha")
    n10: int = Field(description="Items only model_a got right")
    n01: int = Field(description="Items only model_b got right")
    n_shared: int = Field(description="Items both models have")


class LeaderboardInfo(BaseModel):
    """What a leaderboard was computed on and how."""

    benchmark_version_id: uuid.UUID
    benchmark: str
    version: int
    subset_id: str | None = None
    method: str = Field(description="The tests, intervals and correction used, in words")
    design: Literal["full", "uniform", "weighted"]
    population: Literal["items", "benchmark"] = Field(
        description="items: the benchmark's items are a sample of an item population (McNemar); "
        "benchmark: a subset's items test the full-benchmark differences"
    )
    alpha: float
    correction: CorrectionName
    mid_p: bool
    n_items: int = Field(description="Items the leaderboard is computed on")
    n_population: int | None = Field(description="N of the benchmark (population=benchmark)")
    n_models: int
    n_tiers: int

    @computed_field(  # type: ignore[prop-decorator]
        description="Which accuracy the intervals and tests are about (from population): "
        f"{GENERALIZED_ESTIMAND} (population=items); {BENCHMARK_ESTIMAND} (population=benchmark)"
    )
    @property
    def estimand(self) -> Estimand:
        return "generalized" if self.population == "items" else "benchmark"

    excluded: list[ExcludedModel] = Field(
        default_factory=list,
        description="Models matching the selection that could not be ranked (non-binary scores; "
        "with a subset, no results on some subset items)",
    )


class LeaderboardPublic(LeaderboardInfo):
    rows: list[LeaderboardRowPublic]


class LeaderboardPairsPublic(LeaderboardInfo):
    n_pairs: int = Field(description="Pairs of the leaderboard (all pages, before the filters)")
    n_significant: int = Field(description="Significant pairs of the leaderboard (all pages)")
    pairs: list[LeaderboardPairPublic] = Field(description="This page's pairs")
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page"
    )
