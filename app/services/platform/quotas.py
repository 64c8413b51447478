"""Job quotas per key and per project: how many jobs may wait or run at once, and how big an analysis may be.

Checked when a job is inserted (:func:`app.services.platform.jobs.create_job` and
:func:`~app.services.platform.jobs.create_or_join_job`) for the caller of the request
(:data:`app.services.platform.caller.CALLER`; admins exempt, worker-side jobs unlimited):

* ``JOB_QUOTA`` queued + running jobs of the key (429 naming the limit, ``Retry-After``);
* ``ANALYSIS_MAX_COST``: one analysis' cost, runs x sizes x methods (the protocol's subset
  draws; 422 on ``runs`` naming the limit), and ``ANALYSIS_COST_QUOTA`` for the key's queued
  and running analyses together (429). A coverage study counts too, at
  :data:`COVERAGE_DRAW_COST` analysis draws per draw of its own (:func:`job_cost`; 422 on
  ``repeats`` above ``ANALYSIS_MAX_COST``).
* per project, every key with a role on it together: ``PROJECT_JOB_QUOTA`` queued + running
  jobs (429, ``"limit": "project-jobs"``) and ``PROJECT_ANALYSIS_COST_QUOTA`` for their active
  analyses (429, ``"limit": "project-analysis-cost"``); a key on several projects counts towards
  each of them.

Joining an identical active job (single flight) costs nothing: no new work is queued.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.db.repositories import JobRepository
from app.errors import FieldIssue, InvalidInput, TooManyRequests
from app.services.platform.caller import CALLER

ANALYSIS_KIND = "analysis"
COVERAGE_KIND = "coverage"
#: One coverage draw in analysis draws: a default study (5 repeats x 3 sizes x 3 methods)
#: costs 9,000, so a key's ANALYSIS_COST_QUOTA (60,000) holds six at once, not JOB_QUOTA's 20.
COVERAGE_DRAW_COST = 200
RETRY_SECONDS = 30


@dataclass
class JobQuotas:
    max_active_jobs: int = 20
    analysis_max_cost: int = 20_000
    analysis_cost_quota: int = 60_000
    project_max_active_jobs: int = 40
    project_analysis_cost_quota: int = 120_000


QUOTAS = JobQuotas()


def analysis_cost(params: Mapping[str, Any]) -> int:
    """Runs x sizes x methods: the subset draws an analysis makes."""
    return (
        int(params.get("runs", 0)) * len(params.get("sizes", ())) * len(params.get("methods", ()))
    )


def job_cost(kind: str, params: Mapping[str, Any]) -> int:
    """What a job takes from the cost quotas, in an analysis' subset draws: an analysis its
    draws; a coverage study (issue 39: it was outside the quotas) ``repeats x sizes x methods``
    draws, each worth :data:`COVERAGE_DRAW_COST` (a draw of it selects, calibrates and scores
    up to 120 held-out models with every estimator and interval); other kinds nothing."""
    if kind == ANALYSIS_KIND:
        return analysis_cost(params)
    if kind == COVERAGE_KIND:
        draws = (
            int(params.get("repeats", 0))
            * len(params.get("sizes", ()))
            * len(params.get("methods", ()))
        )
        return draws * COVERAGE_DRAW_COST
    return 0


def owner() -> str | None:
    """The key the job is submitted for (None outside requests)."""
    caller = CALLER.get()
    return caller.id if caller is not None else None


def check_new_job(session: Session, kind: str, params: Mapping[str, Any]) -> None:
    """Raise when inserting this job would take the caller over a quota."""
    caller = CALLER.get()
    if caller is None or caller.exempt:
        return
    cost = job_cost(kind, params)
    if kind == COVERAGE_KIND and cost > QUOTAS.analysis_max_cost:
        raise InvalidInput(
            f"this coverage study costs repeats x sizes x methods x {COVERAGE_DRAW_COST} = "
            f"{cost:,} subset draws; the limit per job is {QUOTAS.analysis_max_cost:,} "
            "(ANALYSIS_MAX_COST): fewer repeats, sizes or methods",
            errors=[
                FieldIssue(
                    ("repeats",),
                    f"repeats x sizes x methods x {COVERAGE_DRAW_COST} = {cost:,} exceeds "
                    f"ANALYSIS_MAX_COST = {QUOTAS.analysis_max_cost:,}",
                )
            ],
        )
    if cost > QUOTAS.analysis_max_cost:
        raise InvalidInput(
            f"this analysis costs runs x sizes x methods = {params['runs']} x "
            f"{len(params['sizes'])} x {len(params['methods'])} = {cost:,} subset draws; the "
            f"limit per analysis is {QUOTAS.analysis_max_cost:,} (ANALYSIS_MAX_COST): fewer "
            "runs, sizes or methods",
            errors=[
                FieldIssue(
                    ("runs",),
                    f"runs x sizes x methods = {cost:,} exceeds ANALYSIS_MAX_COST = "
                    f"{QUOTAS.analysis_max_cost:,}",
                )
            ],
        )
    active = JobRepository(session).active_for_owner(caller.id)
    if len(active) >= QUOTAS.max_active_jobs:
        raise TooManyRequests(
            f"this key has {len(active)} queued or running jobs; the limit is "
            f"{QUOTAS.max_active_jobs} (JOB_QUOTA): wait for some to finish or cancel them",
            limit="jobs",
            retry_after=RETRY_SECONDS,
        )
    if cost:
        queued = _queued_cost(active)
        if queued + cost > QUOTAS.analysis_cost_quota:
            raise TooManyRequests(
                f"this key's queued and running analyses cost {queued:,} subset draws and this "
                f"one {cost:,}; the limit together is {QUOTAS.analysis_cost_quota:,} "
                "(ANALYSIS_COST_QUOTA): wait for some to finish",
                limit="analysis-cost",
                retry_after=RETRY_SECONDS,
            )
    for project in caller.projects:
        _check_project(session, project, dict(caller.labels).get(f"project:{project}"), cost)


def _queued_cost(jobs: Sequence[Any]) -> int:
    return sum(job_cost(j.kind, j.params) for j in jobs)


def _check_project(session: Session, project: str, label: str | None, cost: int) -> None:
    """The project's totals over every key with a role on it."""
    active = JobRepository(session).active_for_project(uuid.UUID(project))
    name = f"project {label}" if label else f"project {project}"
    if len(active) >= QUOTAS.project_max_active_jobs:
        raise TooManyRequests(
            f"the keys of {name} have {len(active)} queued or running jobs together; the "
            f"limit per project is {QUOTAS.project_max_active_jobs} (PROJECT_JOB_QUOTA): wait "
            "for some to finish or cancel them",
            limit="project-jobs",
            retry_after=RETRY_SECONDS,
        )
    if cost:
        queued = _queued_cost(active)
        if queued + cost > QUOTAS.project_analysis_cost_quota:
            raise TooManyRequests(
                f"the queued and running analyses of {name}'s keys cost {queued:,} subset "
                f"draws and this one {cost:,}; the limit per project is "
                f"{QUOTAS.project_analysis_cost_quota:,} (PROJECT_ANALYSIS_COST_QUOTA): wait "
                "for some to finish",
                limit="project-analysis-cost",
                retry_after=RETRY_SECONDS,
            )
