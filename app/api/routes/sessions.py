"""Evaluation sessions (issues 12, 23): evaluate a model a batch at a time until the question is
answered; every policy decides with a design-based confidence sequence."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Request, Response, status
from fastapi.responses import JSONResponse

from app.api.deps import (
    ActorDep,
    BenchmarkVersionDep,
    JobQueueDep,
    ReadableSession,
    ReadPrincipal,
    SessionDep,
    SettingsDep,
    WritableSession,
    WritableVersionDep,
    WritePrincipal,
)
from app.api.errors import CONFLICT, INVALID, NOT_FOUND, UNAVAILABLE
from app.api.responses import AUTH, UNSUPPORTED
from app.api.uploads import UPLOAD_BODY, IdempotencyKeyHeader, UploadDep, replay_upload
from app.api.uploads import replayed as replay_response
from app.queue import enqueue_job_after_commit
from app.schemas.benchmarks import MODEL_NAME_PATTERN
from app.schemas.jobs import JobPublic
from app.schemas.results import ModelCreate
from app.schemas.sessions import SessionCreate, SessionPage, SessionPublic, SessionState
from app.services.catalog import ownership
from app.services.catalog.ownership import record_write
from app.services.catalog.uploads import ParseOptions, parse_results_upload
from app.services.evaluation import lifecycle
from app.services.evaluation import sessions as service
from app.services.platform import idempotency

router = APIRouter(tags=["sessions"])


@router.post(
    "/benchmarks/{benchmark}/sessions",
    status_code=status.HTTP_201_CREATED,
    response_model=SessionPublic,
    responses={
        202: {
            "model": JobPublic,
            "description": "an IRT policy (assisted, neyman, fluid) before this benchmark's "
            "IRT fit exists: the job "
            "computing it (queued once per benchmark version); create the session again when "
            "it has succeeded",
        },
        **NOT_FOUND,
        **INVALID,
        **AUTH,
        **UNAVAILABLE,
    },
    name="create_session",
)
def create_session(
    version: WritableVersionDep,
    body: Annotated[SessionCreate, Body()],
    session: SessionDep,
    queue: JobQueueDep,
    settings: SettingsDep,
    actor: ActorDep,
) -> Response:
    """Start evaluating `model` on this benchmark (`{benchmark}`: version id, name, or
    name@vN): 201 with the session, `state: "open"` and the first batch (`next_items`, and
    `samples` for `lm_eval --samples`). Items are drawn at random from `seed`: uniformly
    (`random`, `assisted`) or favouring items the benchmark's IRT fit is unsure about (`neyman`,
    `fluid`, with a floor); every policy decides with the same design-based confidence sequence
    for the model's mean (wrong decision with probability at most `alpha`). A `baseline` must
    have full results on this benchmark."""
    row, job, created = service.create_session(session, version, body)
    summary = {"session": str(row.id)} if row is not None else {"irt_fit_job": str(job.id)}
    record_write(session, actor, "session.create", version, summary, model=body.model)
    if row is None:
        assert job is not None
        if created:
            enqueue_job_after_commit(session, queue, job.id)
        return JSONResponse(
            JobPublic.from_job(job).model_dump(mode="json"),
            status_code=status.HTTP_202_ACCEPTED,
            headers={"Location": f"/v1/jobs/{job.id}"},
        )
    public = service.to_public(session, row, version, idle_hours=settings.session_idle_hours)
    return JSONResponse(
        public.model_dump(mode="json"),
        status_code=status.HTTP_201_CREATED,
        headers={"Location": f"/v1/sessions/{row.id}"},
    )


@router.post(
    "/sessions/{session_id}/results",
    response_model=SessionPublic,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH, **UNSUPPORTED},
    name="post_session_results",
    openapi_extra=UPLOAD_BODY,
)
def post_session_results(
    session_id: uuid.UUID,
    request: Request,
    principal: WritePrincipal,  # before the body is read: no key, no upload
    project: WritableSession,
    upload: UploadDep,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=MODEL_NAME_PATTERN,
            description="Model (non-JSON uploads)",
        ),
    ] = None,
    metric: Annotated[str | None, Query(description="lm-eval metric, if several")] = None,
    filter: Annotated[str | None, Query(description="lm-eval filter, if several")] = None,
    task: Annotated[str | None, Query()] = None,
    item_key: Annotated[Literal["doc_hash", "doc_id"], Query()] = "doc_hash",
    batch: Annotated[
        int | None,
        Query(
            ge=1,
            description="The batch these results answer (1, 2, …; the open one is the "
            "session's step + 1). Required when the values come without item ids",
        ),
    ] = None,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response:
    """The model's results on one batch, in any format a results upload accepts (every item of
    the batch, no others; values without item ids follow the order served). The post names
    the batch it answers: `?batch=N`, or its item ids (each item is served in one batch only).

    The open batch is applied: answers the updated session (`state`, `decision`, `items_used`,
    `estimate` and `difference` with their intervals and `basis`, and the next batch). A
    resend of an answered batch (same items, same values) is answered with the reply that
    batch got, marked `Idempotency-Replayed: true`, and changes nothing; different items or
    values for it are a 409 naming `item_ids` or `correct`; a batch not served yet is a 409
    naming `batch`, and so is a closed or abandoned session (`session_id`). Racing posts are
    serialised on the session row: each sees the state the server holds. A repeated
    `Idempotency-Key` returns the first response."""
    req_hash, replay = replay_upload(
        request, upload, session, principal.id, idempotency_key, settings.idempotency_ttl_hours
    )
    if replay is not None:
        return replay
    default_model = service.model_name(session, session_id)
    parsed, ref = parse_results_upload(
        upload,
        ParseOptions(metric=metric, filter=filter, task=task, item_key=item_key),
        model=ModelCreate(name=model or default_model),
    )
    public, replayed = service.post_results(
        session,
        session_id,
        ref.name,
        parsed,
        batch_number=batch,
        idle_hours=settings.session_idle_hours,
    )
    if not replayed:  # a resent batch changes nothing: no row (README, audit trail)
        version, _ = ownership.session_owner(session, session_id)
        summary = {"applied": True, "state": public.state, "n_items": parsed.n_items}
        record_write(
            session,
            actor,
            "session.post_results",
            version,
            summary,
            session=session_id,
            model=ref.name,
        )
    body = public.model_dump(mode="json")
    if idempotency_key is not None and req_hash is not None:
        stored = idempotency.store_or_stored(
            session,
            principal.id,
            idempotency_key,
            req_hash,
            200,
            body,
            ttl_hours=settings.idempotency_ttl_hours,
        )
        if stored is not None:  # the same request with this key raced in and won: its answer
            return replay_response(stored)
    headers = {"Idempotency-Replayed": "true"} if replayed else {}
    return JSONResponse(body, status_code=status.HTTP_200_OK, headers=headers)


@router.get(
    "/sessions/{session_id}",
    response_model=SessionPublic,
    responses={**NOT_FOUND, **AUTH},
    name="get_session",
)
def get_session(
    session_id: uuid.UUID, session: SessionDep, settings: SettingsDep, _: ReadableSession
) -> SessionPublic:
    """A session with its whole history (estimate and intervals after every batch) and its
    open batch (`next_items`: the batch to run when resuming)."""
    return service.get_session_public(session, session_id, idle_hours=settings.session_idle_hours)


@router.get(
    "/benchmarks/{benchmark}/sessions",
    response_model=SessionPage,
    responses={**NOT_FOUND, **INVALID, **AUTH},
    name="list_sessions",
)
def list_sessions(
    _: ReadPrincipal,
    version: BenchmarkVersionDep,
    session: SessionDep,
    settings: SettingsDep,
    model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=MODEL_NAME_PATTERN,
            description="Only this model's",
        ),
    ] = None,
    state: Annotated[
        SessionState | None,
        Query(description="abandoned: open sessions idle for longer than SESSION_IDLE_HOURS"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=lifecycle.MAX_PAGE)] = 20,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> SessionPage:
    """A benchmark version's evaluation sessions, newest first (cursor pagination), without
    their history: find the session a CI job left open and resume it."""
    return lifecycle.list_sessions(
        session,
        version.id,
        idle_hours=settings.session_idle_hours,
        limit=limit,
        cursor=cursor,
        model=model,
        state=state,
    )
