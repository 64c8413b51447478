"""THE table of job kinds: name -> handler (worker side) and params validator (request side).

The worker's runner (``worker.runner.execute_job``) looks a job's handler up here; the generic
``POST /v1/jobs`` validates through :func:`submit_job`. Nothing registers itself at import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import Job
from app.errors import InvalidInput
from app.services.catalog import irt_fits
from app.services.platform import jobs as job_service
from app.services.platform import ping
from app.services.platform.jobs import JobHandler, ParamsValidator
from app.services.ranking import precompute
from app.services.reliability import analyses, analysis_jobs, plots
from app.services.selection import coverage_runs, subsets

# the precompute of first views draws the page's histogram with the figures' own room
PRECOMPUTE = partial(precompute.run_precompute, figures=plots.accuracy_histograms)


@dataclass(frozen=True)
class JobKind:
    handler: JobHandler
    validate: ParamsValidator | None = None
    # checks that need the database (e.g. sizes against the version's items), after validate
    check: Callable[[Session, dict[str, Any]], None] | None = None


JOB_KINDS: Mapping[str, JobKind] = MappingProxyType(
    {
        "ping": JobKind(handler=ping.run_ping, validate=ping.validate_ping),
        analyses.JOB_KIND: JobKind(
            handler=analysis_jobs.run_analysis, validate=analyses.validate_params
        ),
        subsets.JOB_KIND: JobKind(
            handler=subsets.run_subset_job, validate=subsets.validate_job_params
        ),
        irt_fits.JOB_KIND: JobKind(handler=irt_fits.run_irt_fit, validate=irt_fits.validate_params),
        coverage_runs.JOB_KIND: JobKind(
            handler=coverage_runs.run_coverage,
            validate=coverage_runs.validate_params,
            check=coverage_runs.check_params,
        ),
        precompute.JOB_KIND: JobKind(handler=PRECOMPUTE, validate=precompute.validate_params),
    }
)


def submit_job(
    session: Session,
    kind: str,
    params: dict[str, Any] | None = None,
    seed: int | None = None,
    *,
    kinds: Mapping[str, JobKind] = JOB_KINDS,
) -> Job:
    """Validate ``kind`` and its ``params`` (422 naming the field), then insert the queued job
    (flush only; the caller commits, then enqueues)."""
    entry = kinds.get(kind)
    if entry is None:
        raise InvalidInput(
            f"unknown job kind {kind!r}", field="kind", message=f"choose from {sorted(kinds)}"
        )
    params = dict(params or {})
    if entry.validate is not None:
        params = entry.validate(params)
    if entry.check is not None:
        entry.check(session, params)
    return job_service.create_job(session, kind, params, seed)


def job_kind(kind: str, kinds: Mapping[str, JobKind] = JOB_KINDS) -> JobKind:
    """The table entry of ``kind``; ``LookupError`` naming it when there is none."""
    entry = kinds.get(kind)
    if entry is None:
        raise LookupError(f"no handler registered for job kind {kind!r}")
    return entry


__all__ = ["JOB_KINDS", "JobKind", "job_kind", "submit_job"]
