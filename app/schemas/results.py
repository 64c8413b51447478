"""Model results: one model's per-item correctness (and confidence) on one benchmark version."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.schemas.benchmarks import MODEL_NAME_PATTERN, NO_NUL, SAFE_TEXT, version_id_field

# a million billion parameters: far above any model, far below what overflows a float
MAX_PARAMS_B = 1e6
# tags say what a model is (base, instruct, a run name): a few, never thousands (issue 39)
MAX_TAGS = 64


class ModelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=300, pattern=MODEL_NAME_PATTERN)
    params_b: float | None = Field(
        default=None, ge=0, le=MAX_PARAMS_B, allow_inf_nan=False, description="Parameters, billions"
    )
    family: str | None = Field(default=None, max_length=200, pattern=SAFE_TEXT)
    tags: list[Annotated[str, Field(max_length=200, pattern=NO_NUL)]] | None = Field(
        default=None,
        max_length=MAX_TAGS,
        description=f"At most {MAX_TAGS} tags of up to 200 characters each",
    )


class ModelPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    params_b: float | None
    family: str | None
    tags: list[str]


class ItemResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    correct: float
    confidence: float | None = None
    input_tokens: float | None = Field(default=None, description="Prompt tokens of this item")
    output_tokens: float | None = Field(default=None, description="Completion tokens")
    seconds: float | None = Field(default=None, description="Time spent on the item, seconds")
    usd: float | None = Field(default=None, description="Money spent on the item, US dollars")


class ItemCostArrays(BaseModel):
    """Per-item costs aligned with ``correct`` (``null`` = not reported for that item)."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: list[float | None] | None = Field(default=None, description="Prompt tokens")
    output_tokens: list[float | None] | None = Field(default=None, description="Completion tokens")
    seconds: list[float | None] | None = Field(default=None, description="Seconds per item")
    usd: list[float | None] | None = Field(default=None, description="US dollars per item")


class ResultsCreate(BaseModel):
    """One model's results, keyed by item id (``results``) or as arrays (``correct`` …).

    Arrays without ``item_ids`` follow the benchmark's item order. Leaving items out is
    allowed and recorded as partial coverage.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"model": "org/model-7b", "results": {"a3f1…": 1, "9bc0…": 0}},
                {
                    "model": {"name": "org/model-7b", "params_b": 7.2, "family": "llama"},
                    "correct": [1, 0, 1],
                    "confidence": [0.91, 0.12, 0.66],
                },
            ]
        },
    )

    model: (
        Annotated[str, Field(min_length=1, max_length=300, pattern=MODEL_NAME_PATTERN)]
        | ModelCreate
    )
    results: dict[str, float | ItemResult] | None = Field(
        default=None, description="{item_id: correct} or {item_id: {correct, confidence}}"
    )
    correct: list[float] | None = Field(default=None, description="0/1 or a score in [0, 1]")
    confidence: list[float] | None = Field(default=None, description="Probability on gold")
    item_ids: list[str] | None = None
    samples: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="K: each value is the mean of K samples (repeats) per item, in [0, 1]",
    )
    within_variance: list[float] | None = Field(
        default=None, description="Per-item sample variance (ddof 1) of the K samples"
    )
    costs: ItemCostArrays | None = Field(
        default=None,
        description="Per-item cost arrays aligned with 'correct' (keyed uploads put the same "
        "fields in each item's object); validated: negative, NaN or implausible values (wrong "
        "unit) are rejected naming the field",
    )

    @model_validator(mode="after")
    def _one_layout(self) -> ResultsCreate:
        if (self.results is None) == (self.correct is None):
            raise ValueError("give either 'results' (keyed) or 'correct' (columnar)")
        if self.results is not None and (
            self.confidence is not None
            or self.item_ids is not None
            or self.within_variance is not None
            or self.costs is not None
        ):
            raise ValueError(
                "'confidence'/'item_ids'/'within_variance'/'costs' arrays go with 'correct', "
                "not 'results'"
            )
        return self

    @property
    def model_ref(self) -> ModelCreate:
        return self.model if isinstance(self.model, ModelCreate) else ModelCreate(name=self.model)


WriteStatus = Literal["created", "unchanged", "replaced", "restored"]


class ModelResultPublic(BaseModel):
    """A model's stored results on one benchmark version (summary, not the vectors)."""

    version_id: uuid.UUID = version_id_field("The benchmark version the results belong to")
    model: ModelPublic
    n_items: int = Field(description="Items with a result")
    coverage: float = Field(description="n_items / benchmark items")
    accuracy: float = Field(description="Mean correctness over covered items")
    binary: bool = Field(description="Correctness is 0/1 (else scores in [0, 1])")
    has_confidence: bool
    source_format: str | None = None
    metric: str | None = None
    samples_per_item: int | None = Field(
        default=None, description="K when each item's value is the mean of K samples (else null)"
    )
    config_fingerprint: str | None = Field(
        default=None, description="sha256 of the evaluation configuration's canonical JSON"
    )
    eval_config: dict[str, Any] | None = Field(
        default=None, description="The evaluation configuration the upload carried (readable)"
    )
    content_hash: str
    created_at: datetime
    updated_at: datetime


class ResultsWritten(ModelResultPublic):
    status: WriteStatus


class MatrixWritten(BaseModel):
    """What a matrix upload did: counts per outcome (a compact reply for any number of models)."""

    benchmark_version_id: uuid.UUID
    models: int = Field(description="Rows of the uploaded matrix")
    created: int
    unchanged: int = Field(description="Identical results already stored (no-op)")
    replaced: int


class ModelResultList(BaseModel):
    items: list[ModelResultPublic]
