"""Coverage study on a benchmark version's own population, run as a job (issue 24, item 5).

Job kind ``coverage`` (params ``{"version_id", "methods", "sizes", "repeats"}``, seed stored on the
job): :func:`app.core.scoring.coverage.coverage_study` on the models with full results on the
version — per repeat a quarter of them (at most 120) are held-out targets and the rest the source
models, as the service's own subsets would use them — and the table (coverage overall and in the
lowest / highest fifth of targets, mean width, mean absolute error, per method x estimator x
interval x size) is stored as the job's result with the parameters and seed that reproduce it.
:func:`latest` is the newest succeeded run of a version (the benchmark page's panel).
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from sqlalchemy.orm import Session

from app.core.scoring.coverage import coverage_study
from app.core.selectors import SELECTORS
from app.core.selectors.dpp import guaranteed_size
from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.errors import InvalidInput
from app.services.catalog.benchmarks import get_version
from app.services.catalog.results import load_matrix
from app.services.platform import jobs as job_service

JOB_KIND = "coverage"
DEFAULT_METHODS = ("random", "anchor_points", "tiny_benchmarks")
DEFAULT_SIZES = (25, 50, 100)
DEFAULT_REPEATS = 5
MAX_REPEATS = 20
MAX_SIZES = 5
#: Fewest models with full results: 8 sources and 2 distinct held-out targets.
MIN_MODELS = 10
MAX_TARGETS = 120

ROW_FIELDS = (
    "method",
    "estimator",
    "interval",
    "basis",
    "n",
    "cases",
    "coverage",
    "coverage_low",
    "coverage_high",
    "mean_width",
    "mean_abs_error",
)


def _int_list(value: Any, field: str, pre: tuple, *, lo: int, hi: int, most: int) -> list[int]:
    if not isinstance(value, list) or not value or len(value) > most:
        raise InvalidInput(f"{field}: expected a list of 1 to {most} integers", field=(*pre, field))
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise InvalidInput(
                f"{field}[{i}]: expected an integer in [{lo}, {hi}]", field=(*pre, field, i)
            )
        out.append(int(v))
    return sorted(set(out))


def validate_params(params: dict[str, Any], *, pre: tuple = ("params",)) -> dict[str, Any]:
    """``version_id`` (required), ``methods``, ``sizes``, ``repeats`` (422 naming the field,
    under ``pre``: ``params`` for ``POST /v1/jobs``, nothing for the benchmark's own route)."""
    params = dict(params)
    unknown = sorted(set(params) - {"version_id", "methods", "sizes", "repeats", "extrapolation"})
    if unknown:
        raise InvalidInput("unknown parameter", field=(*pre, unknown[0]))
    try:
        vid = uuid.UUID(str(params.get("version_id")))
    except ValueError:
        raise InvalidInput(
            "version_id: expected a benchmark version id", field=(*pre, "version_id")
        ) from None
    methods = params.get("methods", list(DEFAULT_METHODS))
    if not isinstance(methods, list) or not methods:
        raise InvalidInput(
            "methods: expected a list of selector names", field=("params", "methods")
        )
    for i, m in enumerate(methods):
        if m not in SELECTORS:
            raise InvalidInput(
                f"methods[{i}]: unknown method {m!r}; choose from {sorted(SELECTORS)}",
                field=(*pre, "methods", i),
            )
    sizes = _int_list(
        params.get("sizes", list(DEFAULT_SIZES)), "sizes", pre, lo=1, hi=10_000, most=MAX_SIZES
    )
    repeats = params.get("repeats", DEFAULT_REPEATS)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput(
            f"repeats: expected an integer in [1, {MAX_REPEATS}]", field=(*pre, "repeats")
        )
    extrapolation = params.get("extrapolation", False)
    if not isinstance(extrapolation, bool):
        raise InvalidInput("extrapolation: expected true or false", field=(*pre, "extrapolation"))
    out = {
        "version_id": str(vid),
        "methods": sorted(set(methods), key=methods.index),
        "sizes": sizes,
        "repeats": int(repeats),
    }
    if extrapolation:  # issue 38 (absent when false: earlier requests keep their parameters)
        out["extrapolation"] = True
    return out


def _population(session: Session, version_id: uuid.UUID):
    mat = load_matrix(session, version_id)
    full = mat.coverage.all(axis=1)
    return mat.correct[full], mat.subtasks


def request_run(
    session: Session, version_id: uuid.UUID, params: dict[str, Any], seed: int | None
) -> Job:
    """A queued coverage job of the version (flush only; the caller enqueues after commit).
    422 naming the field: ``sizes`` above the version's items, ``version_id`` when fewer than
    :data:`MIN_MODELS` models have full results."""
    version = get_version(session, version_id)
    clean = validate_params({**params, "version_id": str(version.id)}, pre=())
    check_params(session, clean, pre=())
    return job_service.create_job(session, JOB_KIND, clean, seed)


def check_params(session: Session, clean: dict[str, Any], *, pre: tuple = ("params",)) -> None:
    """What needs the version (422 naming the field, under ``pre``): ``sizes`` below its items
    (and within what the DPP always draws), at least :data:`MIN_MODELS` full-result models.
    Run for the benchmark's own route and for ``POST /v1/jobs`` alike."""
    version = get_version(session, uuid.UUID(clean["version_id"]))
    too_big = [s for s in clean["sizes"] if s >= version.n_items]
    if too_big:
        raise InvalidInput(
            f"sizes: {too_big[0]} is not below the benchmark's {version.n_items} items",
            field=(*pre, "sizes"),
        )
    if "dpp" in clean["methods"]:  # its trimming drops items: refuse what would fail
        cap = guaranteed_size(version.n_items)
        over = [s for s in clean["sizes"] if s > cap]
        if over:
            raise InvalidInput(
                f"sizes: {over[0]} is above the {cap} items the DPP always draws from "
                f"{version.n_items} (its 1%/99% trimming drops the rest)",
                field=(*pre, "sizes"),
            )
    correct, _ = _population(session, version.id)
    if correct.shape[0] < MIN_MODELS:
        raise InvalidInput(
            f"a coverage study needs at least {MIN_MODELS} models with full results; "
            f"this benchmark has {correct.shape[0]}",
            field=(*pre, "version_id") if pre else "benchmark",
        )


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def run_coverage(session: Session, job: Job, ctx: job_service.JobContext) -> None:
    """Worker side: the study on the version's full-results models, stored as the job's result."""
    params = validate_params(job.params)
    version = get_version(session, uuid.UUID(params["version_id"]))
    correct, subtasks = _population(session, version.id)
    m = correct.shape[0]
    if m < MIN_MODELS:
        raise ValueError(f"only {m} models with full results (need {MIN_MODELS})")
    n_targets = min(MAX_TARGETS, max(2, m // 4))
    splits = [
        "random",
        *(["weak_to_strong", "strong_to_weak"] if params.get("extrapolation") else []),
    ]
    rows = []
    for i, split in enumerate(splits):  # issue 38: the extrapolation splits after the usual one
        ctx.progress(i, len(splits))
        table = coverage_study(
            correct,
            params["methods"],
            [s for s in params["sizes"] if s < version.n_items],
            repeats=params["repeats"],
            n_sources=m - n_targets,
            n_targets=n_targets,
            subtasks=subtasks,
            seed=int(job.seed),
            split=split,
        )
        rows += [
            {**{k: _finite(getattr(r, k)) for k in ROW_FIELDS}, "split": split}
            for r in table.rows
            if r.cases > 0
        ]
    ctx.progress(len(splits), len(splits))
    job.result = {
        "version_id": str(version.id),
        "seed": int(job.seed),
        "n_models": int(m),
        "n_sources": int(m - n_targets),
        "n_targets": int(n_targets),
        "methods": params["methods"],
        "sizes": params["sizes"],
        "repeats": params["repeats"],
        "rows": rows,
    }


def latest(session: Session, version_id: uuid.UUID) -> Job | None:
    """The newest succeeded coverage job of the version, if any."""
    for job in JobRepository(session).finished_of_kind(JOB_KIND):  # bounded page of jobs
        if job.params.get("version_id") == str(version_id) and job.result:
            return job
    return None


__all__ = [
    "DEFAULT_METHODS",
    "DEFAULT_REPEATS",
    "DEFAULT_SIZES",
    "JOB_KIND",
    "MIN_MODELS",
    "latest",
    "request_run",
    "run_coverage",
    "validate_params",
]
