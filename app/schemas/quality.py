"""Warnings attached to subsets, scores and verdicts, and the repeated-samples block of a score."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.schemas.common import Estimand, estimand_field


class Warning(BaseModel):
    """Something that makes a number less trustworthy than its interval says."""

    code: Literal["config_mismatch", "few_source_models"]
    message: str
    field: str | None = Field(
        default=None, description="config_mismatch: the evaluation-configuration field"
    )
    model: str | None = Field(default=None, description="The model whose configuration differs")
    value: Any = Field(default=None, description="config_mismatch: that model's value")
    sources: dict[str, int] | None = Field(
        default=None,
        description="config_mismatch: how many reference (source) models have each value",
    )
    details: dict[str, Any] | None = None


class PassAtKPublic(BaseModel):
    """pass@k from each item's ``n_i >= k`` 0/1 samples (Chen et al. 2021), clustered by item."""

    k: int
    value: float = Field(description="Mean over items of 1 - C(n_i - c_i, k) / C(n_i, k)")
    se: float = Field(description="Clustered by item: sd of the per-item pass@k / sqrt(items)")
    ci_low: float = Field(
        description="Betting interval of the per-item pass@k values (items "
        "resampled from an infinite population: conservative)"
    )
    ci_high: float
    var_items: float = Field(description="Between-item variance of the per-item pass@k")


class RepeatedSamplesPublic(BaseModel):
    """Scoring from per-item means of ``K`` samples (Miller 2024): estimate and variance split."""

    k: int = Field(description="Samples per item")
    n: int = Field(description="Items scored")
    value: float | None = Field(description="Mean of the per-item means (uniform subsets)")
    se: float | None = Field(
        description="sqrt((1 - n/N) Var(x) / n + E[s2] / (K n)); None for weighted subsets"
    )
    ci_low: float | None
    ci_high: float | None
    estimand: Estimand = estimand_field("benchmark", " (finite-population corrected)")
    var_items: float = Field(description="Var(x): between-item variance of the true item means")
    mean_within: float = Field(description="E[s2]: mean within-item sample variance")
    within_term: float = Field(description="E[s2] / K")
    variance_per_item: float = Field(
        description="Var(x) + E[s2] / K: the per-item variance a plan divides by n"
    )
    within_variance_source: Literal["uploaded", "bernoulli"] = Field(
        description="uploaded variances, or K/(K-1) x(1-x) for 0/1 samples"
    )
    note: str | None = None
    pass_at_k: list[PassAtKPublic] = Field(
        default_factory=list,
        exclude_if=lambda v: not v,
        description="pass@k for k = 1, 2, 4, ... up to K, when the samples are 0/1 (each item's "
        "mean times its sample count is a whole number); empty otherwise",
    )


class SamplesPlanRow(BaseModel):
    """One ``K'`` of a plan's items x samples table."""

    k: int = Field(description="Samples per item K'")
    n_items: int = Field(
        description="Shared items the paired test needs with K' samples each (items: the K' "
        "samples of an item count once)"
    )
    samples: int = Field(description="n_items x K': samples each model answers")
    omega2: float = Field(description="var_between + within / K'")


class SamplesPlanPublic(BaseModel):
    """How many items x samples reach the gap: Var(d_i) split into data and prediction noise
    (statistics-next §9; Miller 2024, Wang 2025)."""

    k: int = Field(description="Samples per item the pair was scored with (the fewer of the two)")
    observed: float = Field(description="Var(d_i) of the pair's per-item differences of means")
    var_between: float = Field(
        description="Data noise (which items): variance of the true per-item differences, "
        "Var(d_i) minus the sampling part, floored at 0"
    )
    within: float = Field(
        description="Prediction noise (which samples): E[s2_a + s2_b], the within-item "
        "variance of one sample's difference; it enters as within / K'"
    )
    within_term: float = Field(description="within / K at the stored K")
    floored: bool = Field(description="The sampling part exceeded Var(d_i): var_between = 0")
    limit_k: int | None = Field(
        description="Smallest K' with within / K' <= var_between: beyond it the items, not "
        "the samples, limit the gap a test detects (null when var_between is 0)"
    )
    within_variance_source: Literal["uploaded", "bernoulli"] = Field(
        description="uploaded: both models' per-item variances; bernoulli: K/(K-1) x(1-x) per "
        "item (exact for 0/1 samples, an upper bound for samples in [0, 1])"
    )
    rows: list[SamplesPlanRow]
    explanation: str
