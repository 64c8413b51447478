"""Release gates (issue 34): one guaranteed decision for a suite of benchmarks, with a margin."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Response, status
from fastapi.responses import JSONResponse

from app.api.deps import (
    ActorDep,
    GateCreator,
    JobQueueDep,
    ReadableGate,
    ReadPrincipal,
    SessionDep,
    SettingsDep,
    WritableGate,
    WritePrincipal,
)
from app.api.errors import CONFLICT, INVALID, NOT_FOUND
from app.api.responses import AUTH, UNSUPPORTED
from app.api.uploads import UPLOAD_BODY, UploadDep
from app.queue import enqueue_job_after_commit
from app.schemas.benchmarks import MODEL_NAME_PATTERN
from app.schemas.gates import GateCreate, GateOutcome, GatePage, GatePublic, GateResults
from app.schemas.jobs import JobPublic
from app.schemas.results import ModelCreate
from app.services.catalog import ownership
from app.services.catalog.benchmarks import get_version
from app.services.catalog.ownership import record_write
from app.services.catalog.uploads import ParseOptions, parse_results_upload
from app.services.evaluation import gate_listing, lifecycle
from app.services.evaluation import gates as service

router = APIRouter(tags=["gates"])


@router.post(
    "/gates",
    status_code=status.HTTP_201_CREATED,
    response_model=GatePublic,
    responses={
        **NOT_FOUND,
        **INVALID,
        **AUTH,
        202: {
            "model": JobPublic,
            "description": "prediction combined: a benchmark's IRT fit is being computed first "
            "(poll the job at Location, then send the same request again)",
        },
    },
    name="create_gate",
)
def create_gate(
    principal: GateCreator,
    body: Annotated[GateCreate, Body()],
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    queue: JobQueueDep,
) -> Response:
    """Start a gate: is `model` no worse than the baseline by more than the margin on every
    benchmark (and, with `rule: no_regression_and_one_better`, better on at least one)?

    201 with the gate and its first round (`next_round`: per benchmark, the items to run and the
    `lm_eval --samples` map). Post each round's results to `/v1/gates/{id}/results`; the gate
    answers `pass`, `fail` (naming the regressed benchmarks) or `inconclusive` (budget or items
    spent first), with P(wrong PASS) <= alpha and P(wrong FAIL) <= alpha whatever the number of
    benchmarks (one-sided confidence sequences, statistics-next §8). Each baseline needs full
    results on its benchmark; the gate belongs to its first benchmark's project (`write` role
    needed there, `read` on the others). With `prediction: combined` before every benchmark
    has its IRT fit: 202 with the fit job (nothing else is created); send the same request
    again once it has succeeded."""
    row, job, created = service.create_gate(session, principal, body)
    if row is None:
        assert job is not None
        for new in created:  # fit jobs written now: audited on their benchmark, then enqueued
            fit_version = get_version(session, uuid.UUID(new.params["version_id"]))
            record_write(session, actor, "gate.create", fit_version, {"irt_fit_job": str(new.id)},
                         irt_fit_job=str(new.id), model=body.model)  # fmt: skip
            enqueue_job_after_commit(session, queue, new.id)
        return JSONResponse(
            JobPublic.from_job(job).model_dump(mode="json"),
            status_code=status.HTTP_202_ACCEPTED,
            headers={"Location": f"/v1/jobs/{job.id}"},
        )
    version, _ = ownership.gate_owner(session, row.id)
    summary = {"gate": str(row.id), "benchmarks": [b["key"] for b in row.benchmarks]}
    record_write(
        session, actor, "gate.create", version, summary, gate=str(row.id), model=body.model
    )
    public = service.to_public(session, row, idle_hours=settings.session_idle_hours)
    return JSONResponse(
        public.model_dump(mode="json"),
        status_code=status.HTTP_201_CREATED,
        headers={"Location": f"/v1/gates/{row.id}"},
    )


@router.post(
    "/gates/{gate_id}/results",
    response_model=GatePublic,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH},
    name="post_gate_results",
)
def post_gate_results(
    gate_id: uuid.UUID,
    _: WritableGate,
    body: Annotated[GateResults, Body()],
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
) -> Response:
    """The candidate's results on one round: per benchmark the round served, its item ids and
    values (0/1, or graded in [0, 1]). `round` names the round they answer (the open one is the
    gate's `round + 1`).

    The open round is applied and the gate answered with its next round. A resend of an answered
    round (same items and values) changes nothing and is answered marked
    `Idempotency-Replayed: true`; other values for it are a 409 naming `results`; a round not
    served yet is a 409 naming `round`; a closed or abandoned gate's open round, naming
    `gate_id`. Racing posts are serialised on the gate: each round is counted once."""
    public, replayed = service.post_round(
        session, gate_id, body, idle_hours=settings.session_idle_hours
    )
    if not replayed:
        version, _ = ownership.gate_owner(session, gate_id)
        summary = {"round": body.round, "outcome": public.outcome, "items_used": public.items_used}
        record_write(
            session,
            actor,
            "gate.post_results",
            version,
            summary,
            gate=str(gate_id),
            model=public.model,
        )
    headers = {"Idempotency-Replayed": "true"} if replayed else {}
    return JSONResponse(public.model_dump(mode="json"), headers=headers)


@router.post(
    "/gates/{gate_id}/results/files",
    response_model=GatePublic,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH, **UNSUPPORTED},
    name="post_gate_result_files",
    openapi_extra=UPLOAD_BODY,
)
def post_gate_result_files(
    gate_id: uuid.UUID,
    principal: WritePrincipal,  # before the body is read: no key, no upload
    _: WritableGate,
    upload: UploadDep,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    round: Annotated[int, Query(ge=1, description="The round these results answer")],
    model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=MODEL_NAME_PATTERN,
            description="Model (non-JSON uploads; default the gate's)",
        ),
    ] = None,
    metric: Annotated[str | None, Query(description="lm-eval metric, if several")] = None,
    filter: Annotated[str | None, Query(description="lm-eval filter, if several")] = None,
    item_key: Annotated[Literal["doc_hash", "doc_id"], Query()] = "doc_hash",
) -> Response:
    """One round's results as files in any format a results upload accepts: the sample logs
    of every task the round served (what `benchslice gate --run` pushes after
    `lm_eval --samples`), each result going to the benchmark whose round holds its item. The
    same round rules as `/v1/gates/{id}/results`: a resend is a replay, other values a 409."""
    default_model = service.model_name(session, gate_id)
    parsed, ref = parse_results_upload(
        upload,
        ParseOptions(metric=metric, filter=filter, item_key=item_key),
        model=ModelCreate(name=model or default_model),
    )
    public, replayed = service.post_round_parsed(
        session, gate_id, round, ref.name, parsed, idle_hours=settings.session_idle_hours
    )
    if not replayed:
        version, _ = ownership.gate_owner(session, gate_id)
        summary = {"round": round, "outcome": public.outcome, "items_used": public.items_used}
        record_write(
            session,
            actor,
            "gate.post_results",
            version,
            summary,
            gate=str(gate_id),
            model=public.model,
        )
    headers = {"Idempotency-Replayed": "true"} if replayed else {}
    return JSONResponse(public.model_dump(mode="json"), headers=headers)


@router.post(
    "/gates/{gate_id}/abandon",
    response_model=GatePublic,
    responses={**NOT_FOUND, **CONFLICT, **AUTH},
    name="abandon_gate",
)
def abandon_gate(
    gate_id: uuid.UUID,
    _: WritableGate,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
) -> GatePublic:
    """Close an open gate now (a cancelled CI job): `state: abandoned`, `outcome: inconclusive`.
    A closed gate is a 409 naming `gate_id`."""
    public = service.abandon(session, gate_id, idle_hours=settings.session_idle_hours)
    version, _ = ownership.gate_owner(session, gate_id)
    record_write(
        session,
        actor,
        "gate.abandon",
        version,
        {"round": public.round},
        gate=str(gate_id),
        model=public.model,
    )
    return public


@router.get(
    "/gates/{gate_id}",
    response_model=GatePublic,
    responses={**NOT_FOUND, **AUTH},
    name="get_gate",
)
def get_gate(
    gate_id: uuid.UUID, session: SessionDep, settings: SettingsDep, _: ReadableGate
) -> GatePublic:
    """A gate: its outcome, each benchmark's difference, one-sided bounds, margin, state and
    items, its history and the open round (`next_round`: what to run when resuming)."""
    return service.get_gate_public(session, gate_id, idle_hours=settings.session_idle_hours)


@router.get(
    "/gates",
    response_model=GatePage,
    responses={**INVALID, **AUTH},
    name="list_gates",
)
def list_gates(
    principal: ReadPrincipal,
    session: SessionDep,
    model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=MODEL_NAME_PATTERN,
            description="Only this candidate's",
        ),
    ] = None,
    outcome: Annotated[GateOutcome | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=lifecycle.MAX_PAGE)] = 20,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> GatePage:
    """The gates of every project the key may read, newest first (cursor pagination): find the
    gate a CI job left open and resume it."""
    return gate_listing.list_gates(
        session, principal, limit=limit, cursor=cursor, model=model, outcome=outcome
    )
