"""MDAD analyses of a benchmark: queue (job), read (table, curves, recommendation), plots."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status

from app.api.deps import (
    ActorDep,
    BenchmarkVersionDep,
    JobQueueDep,
    ReadableAnalysis,
    ReadPrincipal,
    SessionDep,
    WritableVersionDep,
)
from app.api.errors import INVALID, NOT_FOUND, UNAVAILABLE, problem
from app.api.responses import AUTH
from app.enums import JobStatus
from app.queue import enqueue_job_after_commit
from app.schemas.analyses import AnalysisCreate, AnalysisPage, AnalysisPublic
from app.services.catalog.benchmarks import get_version
from app.services.catalog.ownership import record_write
from app.services.platform import jobs as job_service
from app.services.reliability import analyses as service
from app.services.reliability import plots

router = APIRouter(tags=["analyses"])

NOT_READY = {409: problem("The analysis has not succeeded (yet)")}
Format = Literal["svg", "png"]


def _image(description: str) -> dict:
    return {
        200: {
            "content": {
                "image/svg+xml": {"schema": {"type": "string"}},
                "image/png": {"schema": {"type": "string", "format": "binary"}},
            },
            "description": description,
        }
    }


@router.post(
    "/benchmarks/{benchmark}/analyses",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=AnalysisPublic,
    responses={**NOT_FOUND, **INVALID, **UNAVAILABLE, **AUTH},
    name="create_analysis",
)
def create_analysis(
    version: WritableVersionDep,
    actor: ActorDep,
    body: AnalysisCreate,
    session: SessionDep,
    queue: JobQueueDep,
    response: Response,
) -> AnalysisPublic:
    """Queue an MDAD analysis (the paper's protocol) on the models with full results.

    Poll `Location` (the analysis: status, progress in runs, then the results); cancel with
    `POST /v1/jobs/{job_id}/cancel`. Unknown methods, sizes above the seen half and
    `n_sources + n_targets` above the model count are 422s naming the field.
    """
    analysis = service.create_analysis(session, version.id, body)
    summary = {"analysis": str(analysis.id), "job": str(analysis.job_id)}
    record_write(session, actor, "analysis.create", version, summary)
    if job_service.take_created(session, analysis.job_id):  # else an identical one's is queued
        enqueue_job_after_commit(session, queue, analysis.job_id)
    response.headers["Location"] = f"/v1/analyses/{analysis.id}"
    return service.to_public(analysis, version)


@router.get(
    "/benchmarks/{benchmark}/analyses",
    response_model=AnalysisPage,
    responses={**NOT_FOUND, **INVALID, **AUTH},
    name="list_analyses",
)
def list_analyses(
    _: ReadPrincipal,
    version: BenchmarkVersionDep,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 20,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
    status_: Annotated[JobStatus | None, Query(alias="status")] = None,
) -> AnalysisPage:
    """A benchmark version's analyses, newest first (without their results)."""
    return service.list_analyses(session, version.id, limit=limit, cursor=cursor, status=status_)


@router.get(
    "/analyses/{analysis_id}",
    response_model=AnalysisPublic,
    responses={**NOT_FOUND, **AUTH},
    name="get_analysis",
)
def get_analysis(
    analysis_id: uuid.UUID, session: SessionDep, _: ReadableAnalysis
) -> AnalysisPublic:
    """Status and progress; once succeeded the MDAD table (method x n x split, with CIs),
    the agreement curves, estimation error, Kendall tau and the recommendation."""
    row = service.get_analysis(session, analysis_id)
    return service.to_public(row, get_version(session, row.benchmark_version_id))


@router.get(
    "/analyses/{analysis_id}/plots/mdad.{fmt}",
    response_class=Response,
    responses={**_image("MDAD vs subset size"), **NOT_FOUND, **NOT_READY, **AUTH},
    name="plot_mdad",
)
def plot_mdad(
    analysis_id: uuid.UUID,
    fmt: Format,
    session: SessionDep,
    _: ReadableAnalysis,
    split: Annotated[Literal["seen", "unseen"], Query()] = "seen",
) -> Response:
    """MDAD (accuracy points) against subset size, log x, one line per method with CI bands."""
    row, stored = service.get_stored(session, analysis_id)
    name = get_version(session, row.benchmark_version_id).benchmark.name
    return Response(plots.mdad_plot(stored, name, fmt, split), media_type=plots.MEDIA_TYPES[fmt])


@router.get(
    "/analyses/{analysis_id}/plots/agreement.{fmt}",
    response_class=Response,
    responses={
        **_image("Agreement vs gap"),
        **NOT_FOUND,
        **NOT_READY,
        **INVALID,
        **AUTH,
    },
    name="plot_agreement",
)
def plot_agreement(
    analysis_id: uuid.UUID,
    fmt: Format,
    session: SessionDep,
    _: ReadableAnalysis,
    method: Annotated[str | None, Query(description="default: the first method")] = None,
    n: Annotated[int | None, Query(description="one size (default: every size)")] = None,
    split: Annotated[Literal["seen", "unseen"], Query()] = "seen",
) -> Response:
    """P(same order as the full benchmark) against the pair's accuracy gap, threshold line."""
    row, stored = service.get_stored(session, analysis_id)
    name = get_version(session, row.benchmark_version_id).benchmark.name
    body = plots.agreement_plot(stored, name, fmt, method=method, n=n, split=split)
    return Response(body, media_type=plots.MEDIA_TYPES[fmt])
