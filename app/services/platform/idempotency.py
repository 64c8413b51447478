"""Idempotency-Key: the first successful response to (principal, key) is stored and replayed.

A record is replayed for ``ttl_hours`` (Settings ``IDEMPOTENCY_TTL_HOURS``); after that the key is
free again. A record tied to a resource (``results_resource``) is dropped when that resource is
deleted or replaced, so a retry runs again instead of replaying a reply that no longer holds.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models.access import IdempotencyKey
from app.db.repositories.access import IdempotencyKeyRepository
from app.errors import Conflict, InvalidInput

MAX_KEY_LENGTH = 255
DEFAULT_TTL_HOURS = 24.0


def results_resource(version_id: uuid.UUID, model_id: uuid.UUID) -> str:
    """The resource key of one model's results on one benchmark version."""
    return f"results/{version_id}/{model_id}"


def invalidate(session: Session, resource: str) -> None:
    """Forget every stored response that describes ``resource`` (it was deleted or replaced)."""
    IdempotencyKeyRepository(session).delete_for_resource(resource)


def request_hash(parts: Iterable[bytes | str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def lookup(
    session: Session,
    principal: str,
    key: str,
    req_hash: str,
    *,
    ttl_hours: float = DEFAULT_TTL_HOURS,
) -> tuple[int, dict[str, Any]] | None:
    """The stored ``(status, body)`` for a replay; 422 when the key came with another request.

    An expired record is deleted and the request runs as new.
    """
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(
            "invalid Idempotency-Key",
            field="Idempotency-Key",
            message=f"1 to {MAX_KEY_LENGTH} characters",
        )
    repo = IdempotencyKeyRepository(session)
    row = repo.get_for(principal, key)
    if row is None:
        return None
    if row.created_at <= utcnow() - timedelta(hours=ttl_hours):
        repo.delete(row)
        return None
    if row.request_hash != req_hash:
        raise InvalidInput(
            "this Idempotency-Key was already used with a different request",
            field="Idempotency-Key",
            message="reuse a key only to retry the identical request",
        )
    return row.status_code, upgraded_response(row.resource, row.response)


def upgraded_response(resource: str | None, body: dict[str, Any]) -> dict[str, Any]:
    """A stored reply in today's field names: results uploads stored before the rename call the
    benchmark version ``benchmark_id``; it is replayed as ``version_id``."""
    if (
        resource is not None
        and resource.startswith("results/")
        and isinstance(body, dict)
        and "benchmark_id" in body
        and "version_id" not in body
    ):
        return {("version_id" if k == "benchmark_id" else k): v for k, v in body.items()}
    return body


IN_PROGRESS = (
    "a request with this Idempotency-Key is already being processed; retry to get its response"
)


def store(
    session: Session,
    principal: str,
    key: str,
    req_hash: str,
    status_code: int,
    body: dict[str, Any],
    *,
    resource: str | None = None,
) -> None:
    row = IdempotencyKey(
        key=key,
        principal=principal,
        request_hash=req_hash,
        status_code=status_code,
        response=body,
        resource=resource,
    )
    try:
        IdempotencyKeyRepository(session).add(row)
    except IntegrityError:  # the same key raced in another request; this one rolls back
        raise Conflict(IN_PROGRESS) from None


def store_or_stored(
    session: Session,
    principal: str,
    key: str,
    req_hash: str,
    status_code: int,
    body: dict[str, Any],
    *,
    ttl_hours: float = DEFAULT_TTL_HOURS,
) -> tuple[int, dict[str, Any]] | None:
    """Store the response, or, when a request with the same key was stored meanwhile (it
    committed while this one waited for a lock), return that stored ``(status, body)`` for the
    caller to replay (422 when it came with another request). The insert runs in a savepoint,
    so the caller's transaction stays usable after the race."""
    row = IdempotencyKey(
        key=key,
        principal=principal,
        request_hash=req_hash,
        status_code=status_code,
        response=body,
    )
    try:
        with session.begin_nested():
            IdempotencyKeyRepository(session).add(row)
    except IntegrityError:
        stored = lookup(session, principal, key, req_hash, ttl_hours=ttl_hours)
        if stored is None:  # the other request's record is gone again (expired): retry later
            raise Conflict(IN_PROGRESS) from None
        return stored
    return None
