"""Status-coded domain errors. Services raise these; app/api/errors.py renders them as problem+json."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    status_code: int = 400
    title: str = "Bad request"
    type_slug: str = "bad-request"

    def __init__(
        self,
        detail: str | None = None,
        *,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.detail = detail or self.title
        self.errors = errors
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


class Unauthorized(DomainError):
    status_code = 401
    title = "Unauthorized"
    type_slug = "unauthorized"


class Forbidden(DomainError):
    status_code = 403
    title = "Forbidden"
    type_slug = "forbidden"
