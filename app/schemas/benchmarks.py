"""Benchmarks (versioned, immutable item lists): request and response models."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, computed_field

# Postgres text cannot hold NUL characters: refuse them up front (422, not a 500).
NO_NUL = r"^[^\x00]*$"
# Characters that hide or disguise a name: C0/C1 controls, bidirectional marks, embeddings,
# overrides and isolates (U+202E shows "abc\u202efdp.exe" as "abcexe.pdf").
UNSAFE = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# A benchmark name (a path segment): no "/", no unsafe character, no leading space, and not
# "." or ".." (a path would read them as directories).
NAME_PATTERN = (
    f"^(?:[^.\\s/{UNSAFE}][^/{UNSAFE}]*|\\.+[^./{UNSAFE}][^/{UNSAFE}]*|\\.{{3,}}[^/{UNSAFE}]*)$"
)
# A model name ("org/model" allowed): no unsafe character, and no "/"-separated part that is
# "." or ".." ("..", "../x", "org/./m": a path would read them as directories; issue 39). A
# part is empty, has a character other than ".", or is three or more dots.
_MODEL_PART = f"(?:\\.*[^./{UNSAFE}][^/{UNSAFE}]*|\\.{{3,}})?"
MODEL_NAME_PATTERN = f"^{_MODEL_PART}(?:/{_MODEL_PART})*$"
SAFE_TEXT = f"^[^{UNSAFE}]*$"
PROJECT_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,99}$"

# NUL refused (issue 39): numpy's strings drop trailing NULs, so "a\x00" would export as "a"
ItemId = Field(
    min_length=1,
    max_length=512,
    pattern=NO_NUL,
    description="External item id, e.g. lm-eval doc_hash",
)


def version_id_field(description: str = "The benchmark version id") -> Any:
    """A ``version_id`` response field: a benchmark *version* id. Responses once called it
    ``benchmark_id``; that key is still read (clients of older servers, stored replies)."""
    return Field(
        validation_alias=AliasChoices("version_id", "benchmark_id"), description=description
    )


class ItemCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = ItemId
    subtask: str | None = Field(default=None, max_length=256, pattern=NO_NUL)
    text: str | None = Field(default=None, description="Question text (optional)")
    metadata: dict[str, Any] | None = None


class BenchmarkCreate(BaseModel):
    """A named benchmark and its ordered item list; the same list again returns its version."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "gpqa_main",
                    "items": [
                        {"id": "a3f1…", "subtask": "physics"},
                        {"id": "9bc0…", "subtask": "chemistry"},
                    ],
                }
            ]
        },
    )

    name: str = Field(min_length=1, max_length=200, pattern=NAME_PATTERN)
    description: str | None = Field(default=None, max_length=2000, pattern=NO_NUL)
    items: list[ItemCreate] = Field(min_length=1)
    project: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=PROJECT_PATTERN,
        description="The project that owns a new benchmark (default: the key's only writable "
        "project). A new version of an existing name stays in that name's project.",
    )


class SubtaskCount(BaseModel):
    name: str
    n_items: int


class AccuracySummary(BaseModel):
    """Accuracy over covered items, across the models with results."""

    mean: float
    min: float
    median: float
    max: float


class BenchmarkPublic(BaseModel):
    """One benchmark version: ``id`` (also ``version_id``) is the version's id, ``benchmark_id``
    the parent benchmark's. Paths ``/v1/benchmarks/{benchmark}`` take the version id, the name
    (its latest version) or ``name@vN``."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID = Field(description="The version id")
    benchmark_id: uuid.UUID = Field(
        description="The parent benchmark's id (shared by its versions)"
    )
    name: str
    version: int = Field(description="1 for the first item list of this name, then 2, 3, …")
    content_hash: str = Field(description="sha256 of the ordered item list")
    n_items: int
    n_models: int
    subtasks: list[SubtaskCount]
    description: str | None = None
    created_at: datetime
    project: str = Field(default="default", description="The project that owns the benchmark")
    retired: bool = Field(
        default=False,
        description="Retired versions are hidden from name resolution (reachable by id)",
    )

    @computed_field(description="The version id (the same as `id`)")
    @property
    def version_id(self) -> uuid.UUID:
        return self.id


class ModelSummary(BaseModel):
    name: str
    accuracy: float
    coverage: float


class CostUnitSummary(BaseModel):
    """What one item costs in one unit, predicted from the stored models' measured costs."""

    unit: Literal["input_tokens", "output_tokens", "seconds", "usd"]
    source: str = Field(
        description="Where the figures come from: measured on the stored models (their upload "
        "sources), summarised per item as the median over the models that report it"
    )
    models: int = Field(description="Models with this cost on at least one item")
    items: int = Field(description="Items with this cost from at least one model")
    median_per_item: float = Field(description="Median over items of the per-item median")
    p5_per_item: float = Field(description="5th percentile over items of the per-item median")
    p95_per_item: float = Field(description="95th percentile over items of the per-item median")
    full_benchmark: float = Field(
        description="Predicted cost of all items: the sum of per-item medians (an item no model "
        "reports counts as the median item)"
    )


class BenchmarkDetail(BenchmarkPublic):
    models: list[ModelSummary]
    accuracy: AccuracySummary | None = None
    costs: list[CostUnitSummary] = Field(
        default_factory=list, description="Per-item cost summary, one row per unit with data"
    )


class BenchmarkPage(BaseModel):
    items: list[BenchmarkPublic]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page"
    )
