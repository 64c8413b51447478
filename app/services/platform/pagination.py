"""Opaque keyset cursors of the list endpoints: ``(created_at, id)`` of the last row of a page."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from app.errors import InvalidInput


def encode_cursor(created_at: datetime, row_id: uuid.UUID) -> str:
    """The cursor that continues a page after the row ``(created_at, row_id)``."""
    raw = f"{created_at.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """``(created_at, id)`` of a cursor from :func:`encode_cursor`; 422 on anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, id_ = raw.split("|", 1)
        return datetime.fromisoformat(at), uuid.UUID(id_)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput(
            "invalid cursor",
            field="cursor",
            message="not a cursor returned by this API",
        ) from None
