"""RFC 9457 problem+json for every error: domain errors, HTTP errors, validation, and a last resort."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.errors import DomainError, FieldIssue, Location
from app.schemas.common import FieldError, Problem  # defined in the schema layer (no FastAPI)

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://benchslice.dev/problems/"


EXEMPT_STATE = "benchslice_exempt"  # set for an instance admin's request (admission exempts it)
HELD_STATE = "benchslice_held_refusal"  # where a refusal to hold is left for the admission layer


@dataclass(frozen=True)
class HeldRefusal:
    """A 429 to repeat for ``seconds`` (from when :class:`AdmissionLimit` remembers it)."""

    seconds: float
    title: str
    detail: str | None
    type_slug: str
    limit: str | None
    headers: tuple[tuple[str, str], ...]


def hold_refusal(request: Request, exc: object, headers: dict[str, str]) -> None:
    """Called by the error handler for a 429 that holds its caller: leave it in the request's
    state for :class:`AdmissionLimit` (which knows the credential) to remember."""
    seconds = float(headers.get("Retry-After", 1))
    setattr(
        request.state,
        HELD_STATE,
        HeldRefusal(
            seconds=seconds,
            title=str(getattr(exc, "title", "Too many requests")),
            detail=getattr(exc, "detail", None),
            type_slug=str(getattr(exc, "type_slug", "too-many-requests")),
            limit=getattr(exc, "limit", None),
            headers=tuple((k, v) for k, v in headers.items() if k.lower() != "retry-after"),
        ),
    )


def problem_response(
    request: Request,
    status: int,
    *,
    title: str | None = None,
    detail: str | None = None,
    type_slug: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    errors_total: int | None = None,
    headers: dict[str, str] | None = None,
    limit: str | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_BASE + type_slug if type_slug else "about:blank",
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors is not None:
        body["errors"] = [_field_error(e) for e in errors]
        if errors_total is not None and errors_total > len(errors):
            body["errors_total"] = errors_total  # the list holds only the first problems
    if limit is not None:
        body["limit"] = limit
    headers = {**(headers or {}), "X-Content-Type-Options": "nosniff"}
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def _field_error(error: dict[str, Any]) -> dict[str, Any]:
    loc = [p if isinstance(p, int) else str(p) for p in error.get("loc", ())]
    return {
        "loc": loc,
        "field": ".".join(str(p) for p in loc),
        "message": str(error.get("message") or error.get("msg") or "invalid"),
    }


def declared_locations(request: Request) -> dict[str, Location]:
    """Where the matched route declares its parameters: name (lower-cased for headers) -> the
    location, from its dependency tree (the route's own parameters and its dependencies')."""
    dependant: Dependant | None = getattr(request.scope.get("route"), "dependant", None)
    found: dict[str, Location] = {}
    seen: set[int] = set()
    todo = [dependant] if dependant is not None else []
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for where, params in (
            ("query", current.query_params),
            ("path", current.path_params),
            ("header", current.header_params),
        ):
            for param in params:
                name = param.alias.lower() if where == "header" else param.alias
                found.setdefault(name, where)  # type: ignore[arg-type]
        todo.extend(current.dependencies)
    return found


def locate(request: Request, issue: FieldIssue) -> list[str | int]:
    """``errors[].loc`` of a domain error's field: the service's location hint when it gave one
    (content it parsed itself, whose names may shadow a parameter), else where the route
    declares the field's first name (path, query, header), else the body."""
    if issue.location is not None:
        return [issue.location, *issue.field]
    where: Location = "body"
    if issue.field and isinstance(issue.field[0], str):
        declared = declared_locations(request)
        name = issue.field[0]
        hit = declared.get(name)
        if hit is None and declared.get(name.lower()) == "header":  # header names ignore case
            hit = "header"
        where = hit or where
    return [where, *issue.field]


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    errors = None
    if exc.errors is not None:
        errors = [
            {"loc": locate(request, e), "message": e.message}
            if isinstance(e, FieldIssue)
            else dict(e)
            for e in exc.errors
        ]
    if getattr(exc, "holds_caller", False):
        hold_refusal(request, exc, exc.headers)
    return problem_response(
        request,
        exc.status_code,
        title=exc.title,
        detail=exc.detail,
        type_slug=exc.type_slug,
        errors=errors,
        errors_total=exc.errors_total,
        headers=exc.headers,
        limit=getattr(exc, "limit", None),
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return problem_response(
        request, exc.status_code, detail=str(exc.detail), headers=getattr(exc, "headers", None)
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "message": e.get("msg", "invalid")} for e in exc.errors()
    ]
    return problem_response(
        request,
        422,
        title="Invalid input",
        type_slug="invalid-input",
        detail=f"{len(errors)} invalid field(s)",
        errors=errors,
    )


async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    # Connection refused/lost, pool exhausted, statement timeout: the caller can retry later.
    log.warning(
        "database unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__
    )
    return problem_response(
        request,
        503,
        title="Service unavailable",
        type_slug="service-unavailable",
        detail="the database is unavailable or busy; retry later",
        headers={"Retry-After": "5"},
    )


async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        request,
        500,
        title="Internal Server Error",
        type_slug="internal",
        detail="an unexpected error occurred; it has been logged",
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for db_error in (OperationalError, InterfaceError, PoolTimeout):
        app.add_exception_handler(db_error, _database_unavailable)
    app.add_exception_handler(Exception, _unhandled)


def problem(description: str) -> dict[str, Any]:
    return {
        "model": Problem,
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


NOT_FOUND = {404: problem("Not found")}
CONFLICT = {409: problem("Conflict with the current state")}
INVALID = {422: problem("Invalid input (fields listed in `errors`)")}
UNAVAILABLE = {503: problem("A dependency is unavailable; see Retry-After")}


def install_problem_openapi(app: FastAPI) -> None:
    """Make the spec say what the handlers do: every 4xx/5xx body is problem+json."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = build()
        problem_ref = {"schema": {"$ref": "#/components/schemas/Problem"}}
        used_problem = False
        for route, path in spec.get("paths", {}).items():
            for operation in path.values():
                responses = operation.setdefault("responses", {})
                if "requestBody" in operation and "400" not in responses:
                    responses["400"] = {"description": "Malformed body (not decodable)"}
                if route.startswith("/v1/") and "429" not in responses:
                    responses["429"] = {
                        "description": "A limit of the key was reached (named in `limit`); "
                        "see Retry-After and the RateLimit fields"
                    }
                if route.startswith("/v1/") and "503" not in responses:
                    responses["503"] = {
                        "description": "The database or the queue is unavailable; see Retry-After"
                    }
                for code, response in operation.get("responses", {}).items():
                    if code[0] not in "45":
                        continue
                    response["content"] = {PROBLEM_JSON: problem_ref}
                    if code == "422" and response.get("description") == "Validation Error":
                        response["description"] = "Invalid input (fields listed in `errors`)"
                    used_problem = True
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        if used_problem and "Problem" not in schemas:
            schemas["Problem"] = Problem.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
            schemas.setdefault("FieldError", FieldError.model_json_schema())
            schemas["Problem"].pop("$defs", None)
        for unused in ("HTTPValidationError", "ValidationError"):
            if f'"#/components/schemas/{unused}"' not in json.dumps(spec):
                schemas.pop(unused, None)
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
