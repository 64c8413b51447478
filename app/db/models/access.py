"""API keys (stored hashed) and stored responses for Idempotency-Key replays."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String, UniqueConstraint, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDPrimaryKey, utcnow


class ApiKey(UUIDPrimaryKey, Base):
    """``key_hash`` is an argon2id hash of the whole key; ``prefix`` (public) finds the row."""

    __tablename__ = "api_keys"

    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[str] = mapped_column(String(255))
    scopes: Mapped[list[str]] = mapped_column(JSON)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, server_default=func.now()
    )
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class IdempotencyKey(UUIDPrimaryKey, Base):
    """The first response to (principal, key); a replay returns it, another body gets 422."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        UniqueConstraint("principal", "key", name="uq_idempotency_keys_principal_key"),
    )

    key: Mapped[str] = mapped_column(String(255))
    principal: Mapped[str] = mapped_column(String(64))
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column(Integer)
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    # what the response describes (e.g. ``results/<version>/<model>``): deleting or replacing it
    # drops the record, so a retry runs again instead of replaying a stale reply
    resource: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(),
        nullable=False,
        default=utcnow,
        server_default=func.now(),
        index=True,
    )
