"""Read a request body for upload endpoints: size limit (413) and multipart files, HTTP only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import numpy as np
from fastapi import Depends, Header, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from app.api.deps import SessionDep
from app.errors import InvalidInput, PayloadTooLarge
from app.schemas.results import ResultsCreate
from app.services.catalog.uploads import (
    MULTIPART,
    PARQUET_TYPES,
    UploadPart,
    expand_archives,
    media_type,
)
from app.services.platform import idempotency

MAX_FILES = 200


async def _limited(request: Request, limit: int) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        yield chunk


async def read_upload(request: Request) -> list[UploadPart]:
    """The body as one part, or each file of a multipart form as a part (in order)."""
    limit = request.app.state.settings.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(
            f"request body of {declared} bytes exceeds the limit of {limit} bytes"
        )
    mt = media_type(request.headers.get("content-type"))
    settings = request.app.state.settings
    if mt != MULTIPART:
        body = b"".join([chunk async for chunk in _limited(request, limit)])
        part = UploadPart(mt, body, None)
        check_lines(part, settings.max_upload_lines, settings.max_line_bytes)
        return _unzipped([part], settings)
    parser = MultiPartParser(
        request.headers, _limited(request, limit), max_files=MAX_FILES, max_fields=100
    )
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise InvalidInput(
            f"malformed multipart body: {exc.message}",
            errors=[{"loc": ["body"], "message": exc.message}],
        ) from None
    parts: list[UploadPart] = []
    try:
        for _, value in form.multi_items():
            if isinstance(value, UploadFile):
                part = UploadPart(
                    media_type(value.content_type), await value.read(), value.filename
                )
                check_lines(part, settings.max_upload_lines, settings.max_line_bytes)
                parts.append(part)
    finally:
        await form.close()
    return _unzipped(parts, settings)


def _unzipped(parts: list[UploadPart], settings: Any) -> list[UploadPart]:
    """Zipped result files (not an Inspect log) as their files, each under the line limits."""
    out = expand_archives(parts)
    if len(out) > MAX_FILES:
        raise PayloadTooLarge(f"the upload holds {len(out)} files; the limit is {MAX_FILES}")
    given = {id(p) for p in parts}
    for part in out:
        if id(part) not in given:  # a file that came out of a zip
            check_lines(part, settings.max_upload_lines, settings.max_line_bytes)
    return out


def check_lines(part: UploadPart, max_lines: int, max_line_bytes: int) -> None:
    """413 for a text upload (JSONL, CSV, JSON) with too many lines or an over-long line."""
    if part.media_type in PARQUET_TYPES or part.data[:4] in (b"PAR1", b"PK\x03\x04"):
        return  # parquet, or a zip (.npz): binary, not lines
    data = part.data
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    n_lines = newlines.size + (1 if data and not data.endswith(b"\n") else 0)
    name = f"file {part.filename!r}" if part.filename else "the body"
    if n_lines > max_lines:
        raise PayloadTooLarge(f"{name} has {n_lines} lines; the limit is {max_lines}")
    bounds = np.concatenate(([-1], newlines, [len(data)]))
    longest = int(np.diff(bounds).max(initial=0)) - 1
    if longest > max_line_bytes:
        raise PayloadTooLarge(
            f"{name} has a line of {longest} bytes; the limit is {max_line_bytes}"
        )


UploadDep = Annotated[list[UploadPart], Depends(read_upload)]


def inline_schema(model: Any) -> dict[str, Any]:
    """A pydantic model's JSON schema with its ``$defs`` inlined (for ``openapi_extra``)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.rsplit("/", 1)[1]])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)


def request_body(description: str, content: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "description": description, "content": content}}


FILE_SCHEMA = {"type": "string", "format": "binary"}
MULTIPART_SCHEMA = {
    "schema": {
        "type": "object",
        "properties": {
            "file": {
                "type": "array",
                "items": FILE_SCHEMA,
                "description": "one or more files (JSONL, CSV, parquet, JSON)",
            }
        },
        "required": ["file"],
    }
}


# --- Idempotency-Key replay of uploads (the results and session/score routes share it) ---------

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=idempotency.MAX_KEY_LENGTH,
        description="Retry-safe key: the same key with the same request replays the stored "
        "response; with another request it is a 422",
    ),
]


def upload_request_hash(request: Request, upload: list[UploadPart]) -> str:
    """What an Idempotency-Key is bound to: method, path, query and every uploaded part."""
    return idempotency.request_hash(
        [request.method, request.url.path, str(request.url.query)]
        + [x for p in upload for x in (p.media_type, p.filename or "", p.data)]
    )


def replayed(stored: tuple[int, dict]) -> JSONResponse:
    return JSONResponse(stored[1], status_code=stored[0], headers={"Idempotency-Replayed": "true"})


def replay_upload(
    request: Request,
    upload: list[UploadPart],
    session: SessionDep,
    principal_id: str,
    idempotency_key: str | None,
    ttl_hours: float,
) -> tuple[str | None, JSONResponse | None]:
    """``(request hash, stored response to replay)`` of an upload; both None without a key."""
    if idempotency_key is None:
        return None, None
    req_hash = upload_request_hash(request, upload)
    stored = idempotency.lookup(
        session, principal_id, idempotency_key, req_hash, ttl_hours=ttl_hours
    )
    return req_hash, (replayed(stored) if stored is not None else None)


UPLOAD_BODY = request_body(
    "One model's per-item results. JSON keyed by item id or columnar (see schema); an "
    "lm-evaluation-harness `--log_samples` JSONL or Open LLM Leaderboard details file "
    "(JSONL/parquet) with `?model=`; CSV `item_id,correct[,confidence]` with `?model=`; an "
    "Inspect AI log (`.eval` or `--log-format json`; the model is the log's `eval.model`, items "
    "`{task}/{sample id}`, `?metric=` names the scorer); or any of these as multipart `file` "
    "parts (several sample logs are concatenated).",
    {
        "application/json": {"schema": inline_schema(ResultsCreate)},
        "application/x-ndjson": {"schema": {"type": "string"}},
        "text/csv": {"schema": {"type": "string"}},
        "application/vnd.apache.parquet": {"schema": FILE_SCHEMA},
        "multipart/form-data": MULTIPART_SCHEMA,
    },
)
