"""Idempotency-Key: the first successful response to (principal, key) is stored and replayed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models.access import IdempotencyKey
from app.db.repositories.access import IdempotencyKeyRepository
from app.errors import Conflict, InvalidInput

MAX_KEY_LENGTH = 255


def request_hash(parts: Iterable[bytes | str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def lookup(
    session: Session, principal: str, key: str, req_hash: str
) -> tuple[int, dict[str, Any]] | None:
    """The stored ``(status, body)`` for a replay; 422 when the key came with another request."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(
            "invalid Idempotency-Key",
            errors=[
                {
                    "loc": ["header", "Idempotency-Key"],
                    "message": f"1 to {MAX_KEY_LENGTH} characters",
                }
            ],
        )
    row = IdempotencyKeyRepository(session).get_for(principal, key)
    if row is None:
        return None
    if row.request_hash != req_hash:
        raise InvalidInput(
            "this Idempotency-Key was already used with a different request",
            errors=[
                {
                    "loc": ["header", "Idempotency-Key"],
                    "message": "reuse a key only to retry the identical request",
                }
            ],
        )
    return row.status_code, row.response


def store(
    session: Session,
    principal: str,
    key: str,
    req_hash: str,
    status_code: int,
    body: dict[str, Any],
) -> None:
    row = IdempotencyKey(
        key=key,
        principal=principal,
        request_hash=req_hash,
        status_code=status_code,
        response=body,
    )
    try:
        IdempotencyKeyRepository(session).add(row)
    except IntegrityError:  # the same key raced in another request; this one rolls back
        raise Conflict(
            "a request with this Idempotency-Key is already being processed; retry to get its "
            "response"
        ) from None
