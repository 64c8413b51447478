"""Read a request body for upload endpoints: size limit (413) and multipart files, HTTP only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from app.errors import InvalidInput, PayloadTooLarge
from app.services.uploads import MULTIPART, UploadPart, media_type

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
    if mt != MULTIPART:
        body = b"".join([chunk async for chunk in _limited(request, limit)])
        return [UploadPart(mt, body, None)]
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
                parts.append(
                    UploadPart(media_type(value.content_type), await value.read(), value.filename)
                )
    finally:
        await form.close()
    return parts


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
