"""Status-coded domain errors. Services raise these; app/api/errors.py renders them as problem+json.

A client mistake names the field at fault as a path inside the request, never as an HTTP
location: ``InvalidInput("size 500 exceeds the 448 items", field="size", message="at most 448")``
or, for several fields, ``errors=[FieldIssue(("items", 3, "id"), "duplicate item id"), ...]``.
The HTTP layer decides where the field lives (a path, query or header parameter the route
declares; otherwise the body) and renders ``errors[].loc`` from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

FieldPath = tuple[str | int, ...]
Location = Literal["body", "query", "path", "header"]


@dataclass(frozen=True)
class FieldIssue:
    """One field at fault: its path inside the request (``()`` = the whole input) and why.

    ``location`` is normally left out: the HTTP layer resolves it from the parameters the
    route declares (path, query, header); anything else is in the body. A service gives it only
    when the route cannot tell: a parse option no route declares (an upload's ``format``), or a
    field of content it parsed itself whose name may shadow a parameter (an uploaded JSON
    body's ``model`` next to ``?model=``). The hint wins.
    """

    field: FieldPath
    message: str
    location: Location | None = None


def field_issue(
    field: str | int | Sequence[str | int], message: str, *, location: Location | None = None
) -> FieldIssue:
    """A :class:`FieldIssue` from a field name (``"size"``) or a path (``("items", 3, "id")``)."""
    path = (field,) if isinstance(field, str | int) else tuple(field)
    return FieldIssue(path, message, location)


class DomainError(Exception):
    """A client-visible failure with a status code.

    ``field`` (+ ``message``, default the detail) names one field at fault; ``errors`` lists
    several (``errors_total``: how many there were, when ``errors`` holds only the first). Mappings in ``errors`` are taken as already located (``{"loc": [...], "message":
    ...}``): only the HTTP layer writes those.
    """

    status_code: int = 400
    title: str = "Bad request"
    type_slug: str = "bad-request"

    def __init__(
        self,
        detail: str | None = None,
        *,
        field: str | int | Sequence[str | int] | None = None,
        message: str | None = None,
        location: Location | None = None,
        errors: Sequence[FieldIssue | Mapping[str, Any]] | None = None,
        errors_total: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.detail = detail or self.title
        issues: list[FieldIssue | Mapping[str, Any]] | None = (
            list(errors) if errors is not None else None
        )
        if field is not None:
            issue = field_issue(field, message or self.detail, location=location)
            issues = [issue, *(issues or [])]
        self.errors = issues
        # how many problems there were when ``errors`` lists only the first of them
        self.errors_total = errors_total
        self.headers = headers or {}
        super().__init__(self.detail)


class InvalidInput(DomainError):
    status_code = 422
    title = "Invalid input"
    type_slug = "invalid-input"


class NotFound(DomainError):
    status_code = 404
    title = "Not found"
    type_slug = "not-found"


class Conflict(DomainError):
    status_code = 409
    title = "Conflict"
    type_slug = "conflict"


class PayloadTooLarge(DomainError):
    status_code = 413
    title = "Payload too large"
    type_slug = "payload-too-large"


class ServiceUnavailable(DomainError):
    status_code = 503
    title = "Service unavailable"
    type_slug = "service-unavailable"

    def __init__(self, detail: str | None = None, *, retry_after: int = 5, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.headers.setdefault("Retry-After", str(retry_after))


class TooManyRequests(DomainError):
    """A limit of the caller's was reached (rate, expensive work, job quota): 429 with
    ``Retry-After``; ``limit`` names which (also in the problem body). ``holds_caller``: every
    request of this caller would be refused until ``Retry-After`` has passed (its rate bucket,
    its expensive-work places, its failed key attempts), so the API process answers them at
    once, before authentication (:mod:`app.api.admission`); a job quota does not hold reads."""

    status_code = 429
    title = "Too many requests"
    type_slug = "too-many-requests"

    def __init__(
        self,
        detail: str | None = None,
        *,
        limit: str,
        retry_after: int = 1,
        holds_caller: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(detail, **kwargs)
        self.limit = limit
        self.holds_caller = holds_caller
        self.headers.setdefault("Retry-After", str(max(1, int(retry_after))))


class Unauthorized(DomainError):
    status_code = 401
    title = "Unauthorized"
    type_slug = "unauthorized"


class Forbidden(DomainError):
    status_code = 403
    title = "Forbidden"
    type_slug = "forbidden"
