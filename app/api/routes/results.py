"""Model results on a benchmark version: upload, list, delete, export the matrix."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import JSONResponse

from app.api.deps import (
    ActorDep,
    BenchmarkVersionDep,
    JobQueueDep,
    ReadPrincipal,
    SessionDep,
    SettingsDep,
    WritableVersionDep,
    WritePrincipal,
)
from app.api.errors import CONFLICT, INVALID, NOT_FOUND
from app.api.responses import AUTH, UNSUPPORTED
from app.api.uploads import (
    FILE_SCHEMA,
    UPLOAD_BODY,
    IdempotencyKeyHeader,
    UploadDep,
    replay_upload,
    request_body,
)
from app.queue import JobQueue, publish_after_commit_quietly
from app.schemas.benchmarks import MODEL_NAME_PATTERN, SAFE_TEXT
from app.schemas.results import (
    MAX_PARAMS_B,
    MatrixWritten,
    ModelCreate,
    ModelResultList,
    ResultsWritten,
)
from app.services.catalog import bulk_results
from app.services.catalog import results as service
from app.services.catalog.ownership import record_write
from app.services.catalog.uploads import ParseOptions, parse_results_upload
from app.services.platform import idempotency
from app.services.ranking import precompute
from app.settings import Settings

router = APIRouter(prefix="/benchmarks", tags=["results"])


def _precompute(
    session: SessionDep, queue: JobQueue, settings: Settings, version_id: uuid.UUID
) -> None:
    """Queue the worker's precompute of the version's first views (published after commit)."""
    job = precompute.request_precompute(session, version_id, settings.precompute_min_models)
    if job is not None:
        publish_after_commit_quietly(session, queue, job.id)


@router.post(
    "/{benchmark}/results",
    status_code=status.HTTP_201_CREATED,
    response_model=ResultsWritten,
    responses={
        200: {
            "model": ResultsWritten,
            "description": "Identical results already stored (no-op) or replaced",
        },
        **NOT_FOUND,
        **CONFLICT,
        **INVALID,
        **AUTH,
        **UNSUPPORTED,
    },
    name="upload_results",
    openapi_extra=UPLOAD_BODY,
)
def upload_results(
    request: Request,
    principal: WritePrincipal,  # before the body is read: no key, no upload
    version: WritableVersionDep,  # after the key, before the body: unknown benchmark, no upload
    upload: UploadDep,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    queue: JobQueueDep,
    model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=MODEL_NAME_PATTERN,
            description="Model name (non-JSON uploads)",
        ),
    ] = None,
    params_b: Annotated[
        float | None,
        Query(ge=0, le=MAX_PARAMS_B, allow_inf_nan=False, description="Parameters, billions"),
    ] = None,
    family: Annotated[str | None, Query(max_length=200, pattern=SAFE_TEXT)] = None,
    metric: Annotated[
        str | None,
        Query(
            description="lm-eval metric giving correctness (e.g. acc_norm); required when the "
            "file has several"
        ),
    ] = None,
    filter: Annotated[
        str | None,
        Query(description="lm-eval filter (e.g. strict-match); required when the file has several"),
    ] = None,
    task: Annotated[
        str | None, Query(description="lm-eval task name (picks the Open LLM Leaderboard metric)")
    ] = None,
    item_key: Annotated[Literal["doc_hash", "doc_id"], Query()] = "doc_hash",
    format: Annotated[
        Literal[
            "auto", "inspect", "every-eval-ever", "helm", "lighteval", "lm-eval", "csv", "json"
        ],
        Query(
            description="Parser of the upload: auto tells Inspect AI logs (.eval / JSON), "
            "Every Eval Ever instance JSONL, HELM runs (per_instance_stats.json + "
            "run_spec.json) and lighteval details parquet (files named "
            "details/{model}/{date}/details_{task}_{date}.parquet give the model; several "
            "dates: the latest read) by their content, the rest by media type or file extension"
        ),
    ] = "auto",
    replace: Annotated[bool, Query(description="Overwrite different existing results")] = False,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response | ResultsWritten:
    """Store one model's results (full or partial coverage) as one packed row.

    Identical results again: 200, nothing changes. Different results for the same model: 409
    unless `?replace=true`. A repeated `Idempotency-Key` returns the first response.
    `{benchmark}` is a version id, a name (its latest version) or `name@vN`.
    """
    req_hash, replay = replay_upload(
        request, upload, session, principal.id, idempotency_key, settings.idempotency_ttl_hours
    )
    if replay is not None:
        return replay
    query_model = (
        ModelCreate(name=model, params_b=params_b, family=family) if model is not None else None
    )
    parsed, ref = parse_results_upload(
        upload,
        ParseOptions(metric=metric, filter=filter, task=task, item_key=item_key, format=format),
        model=query_model,
    )
    row, outcome = service.store_results(
        session, version.id, ref, parsed, replace=replace, keep_for=settings.results_retention
    )
    summary: dict = {"status": outcome, "accuracy": row.accuracy, "n_items": row.n_items}
    if outcome == "replaced":
        previous = service.latest_archived(session, version.id, row.model_id)
        summary |= {"previous_accuracy": previous.accuracy, "previous_n_items": previous.n_items}
    if outcome != "unchanged":  # a no-op changes nothing: no audit row (README, audit trail)
        record_write(session, actor, "results.upload", version, summary, model=row.model.name)
        _precompute(session, queue, settings, version.id)
    code = status.HTTP_201_CREATED if outcome == "created" else status.HTTP_200_OK
    body = ResultsWritten(**service.to_public_for(session, row).model_dump(), status=outcome)
    if idempotency_key is not None and req_hash is not None:
        idempotency.store(
            session,
            principal.id,
            idempotency_key,
            req_hash,
            code,
            body.model_dump(mode="json"),
            resource=idempotency.results_resource(row.benchmark_version_id, row.model_id),
        )
    return JSONResponse(body.model_dump(mode="json"), status_code=code)


@router.post(
    "/{benchmark}/results/matrix",
    status_code=status.HTTP_201_CREATED,
    response_model=MatrixWritten,
    responses={
        200: {"model": MatrixWritten, "description": "No model created (all unchanged/replaced)"},
        **NOT_FOUND,
        **CONFLICT,
        **INVALID,
        **AUTH,
        **UNSUPPORTED,
    },
    name="upload_matrix",
    openapi_extra=request_body(
        "Many models' results in one request: an `.npz` with `correct` (models x items, NaN = "
        "no result), `models` (names) and optionally `item_ids`, `coverage`, `confidence`.",
        {
            "application/octet-stream": {"schema": FILE_SCHEMA},
            "application/x-npz": {"schema": FILE_SCHEMA},
        },
    ),
)
def upload_matrix(
    request: Request,
    principal: WritePrincipal,  # before the body is read: no key, no upload
    version: WritableVersionDep,
    upload: UploadDep,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    queue: JobQueueDep,
    replace: Annotated[bool, Query(description="Overwrite different existing results")] = False,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response | MatrixWritten:
    """Store a whole matrix of models in one request (all or nothing): each row as if uploaded
    alone (identical: unchanged; different: 409 for the whole request unless
    `?replace=true`), in a fixed number of database statements. The reply counts the outcomes.
    A repeated `Idempotency-Key` returns the first reply."""
    req_hash, replay = replay_upload(
        request, upload, session, principal.id, idempotency_key, settings.idempotency_ttl_hours
    )
    if replay is not None:
        return replay
    batch = bulk_results.parse_matrix_parts(upload)
    stored = bulk_results.store_many(
        session, version.id, batch, replace=replace, keep_for=settings.results_retention
    )
    body = bulk_results.matrix_outcome(version.id, stored)
    summary = {"models": body.models, "created": body.created, "unchanged": body.unchanged}
    summary["replaced"] = body.replaced
    if body.created or body.replaced:  # every row unchanged: a no-op, no audit row
        record_write(session, actor, "results.upload_matrix", version, summary)
        _precompute(session, queue, settings, version.id)
    code = status.HTTP_201_CREATED if body.created else status.HTTP_200_OK
    if idempotency_key is not None and req_hash is not None:
        idempotency.store(
            session, principal.id, idempotency_key, req_hash, code, body.model_dump(mode="json")
        )
    return JSONResponse(body.model_dump(mode="json"), status_code=code)


@router.get(
    "/{benchmark}/models",
    response_model=ModelResultList,
    responses={**NOT_FOUND, **AUTH},
    name="list_models",
)
def list_models(
    _: ReadPrincipal, version: BenchmarkVersionDep, session: SessionDep
) -> ModelResultList:
    """Models with results on this benchmark: accuracy, coverage, when uploaded."""
    return ModelResultList(items=service.list_results(session, version.id))


@router.delete(
    "/{benchmark}/models/{model:path}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={**NOT_FOUND, **CONFLICT, **AUTH},
    name="delete_model_results",
)
def delete_model_results(
    version: WritableVersionDep,
    model: str,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    queue: JobQueueDep,
) -> Response:
    """Delete one model's results on this benchmark (by model name or id). They are kept for
    `RESULTS_RETENTION_DAYS` and can be brought back with `POST …/models/{model}/restore`."""
    copy = service.delete_results(session, version.id, model, keep_for=settings.results_retention)
    summary = {"accuracy": copy.accuracy, "n_items": copy.n_items, "rows_deleted": 1}
    record_write(session, actor, "results.delete", version, summary, model=model)
    _precompute(session, queue, settings, version.id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{benchmark}/models/{model:path}/restore",
    response_model=ResultsWritten,
    responses={**NOT_FOUND, **CONFLICT, **AUTH},
    name="restore_model_results",
)
def restore_model_results(
    version: WritableVersionDep,
    model: str,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    queue: JobQueueDep,
) -> ResultsWritten:
    """Bring back a model's results as they were before their last replace or delete (byte
    for byte); the results this displaces are kept in turn, so a restore can be undone.
    Verdicts, leaderboards and cached matrices follow (the results' stamp changes)."""
    row, copy, displaced = service.restore_results(
        session, version.id, model, keep_for=settings.results_retention
    )
    summary: dict = {"accuracy": row.accuracy, "restored_from": copy.reason}
    if displaced is not None:
        summary["previous_accuracy"] = displaced.accuracy
    record_write(session, actor, "results.restore", version, summary, model=row.model.name)
    _precompute(session, queue, settings, version.id)
    return ResultsWritten(**service.to_public_for(session, row).model_dump(), status="restored")


@router.get(
    "/{benchmark}/matrix",
    response_class=Response,
    name="get_matrix",
    responses={
        200: {
            "content": {"application/octet-stream": {"schema": FILE_SCHEMA}},
            "description": "numpy .npz: correct (models x items), coverage, "
            "confidence (when every model has it), item_ids, subtasks, "
            "models, params_b",
        },
        **NOT_FOUND,
        **AUTH,
    },
)
def get_matrix(_: ReadPrincipal, version: BenchmarkVersionDep, session: SessionDep) -> Response:
    """The results matrix as `.npz` (the layout `benchslice mdad` reads).

    `correct` is uint8 0/1 when every model is binary with full coverage, else float32 with
    NaN where `coverage` is 0.
    """
    data, filename = service.export_npz(session, version.id)
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": content_disposition(filename)},
    )


def content_disposition(filename: str) -> str:
    """An attachment header safe for any benchmark name: an ASCII fallback plus the exact name
    percent-encoded (RFC 6266/5987); quotes, CR/LF and non-Latin-1 never reach the header."""
    fallback = re.sub(r"[^A-Za-z0-9._-]+", "_", filename).strip("_") or "matrix.npz"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
