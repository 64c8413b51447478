"""Projects, API keys (stored hashed) with per-project roles, the audit trail, and stored
responses for Idempotency-Key replays."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    Uuid,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, UTCDateTime, UUIDPrimaryKey, utcnow


class Project(UUIDPrimaryKey, Base):
    """Owns benchmarks; keys get a role on it. ``public_read``: every valid key may read it."""

    __tablename__ = "projects"

    name: Mapped[str] = mapped_column(String(100), unique=True)
    public_read: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, server_default=func.now()
    )


class ApiKey(UUIDPrimaryKey, Base):
    """``key_hash`` is an argon2id hash of the whole key; ``prefix`` (public) finds the row.

    Rotation keeps the row (id, prefix, roles) and swaps the secret: the old hash moves to
    ``previous_key_hash`` and stays valid until ``previous_valid_until``.
    """

    __tablename__ = "api_keys"

    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[str] = mapped_column(String(255))
    instance_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, server_default=func.now()
    )
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    previous_key_hash: Mapped[str | None] = mapped_column(String(255), nullable=True)
    previous_valid_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    rotated_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    roles: Mapped[list[KeyRole]] = relationship(
        back_populates="key", cascade="all, delete-orphan", lazy="selectin"
    )


class KeyRole(Base):
    """A key's role (``read`` < ``write`` < ``admin``) on one project."""

    __tablename__ = "api_key_roles"

    key_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("api_keys.id", ondelete="CASCADE"), primary_key=True
    )
    project_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    role: Mapped[str] = mapped_column(String(16))

    key: Mapped[ApiKey] = relationship(back_populates="roles")
    project: Mapped[Project] = relationship(lazy="joined")


class AuditEvent(Base):
    """One write, appended in the write's own transaction (a failed request leaves none).

    ``key_id``/``key_name`` are copied (not a foreign key): the trail outlives a deleted key.
    ``summary`` says what changed (rows replaced, previous accuracy, ...).
    """

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_project_id_id", "project_id", "id"),
        Index("ix_audit_events_benchmark_id", "benchmark_id"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, server_default=func.now(), index=True
    )
    key_id: Mapped[str] = mapped_column(String(64), index=True)
    key_name: Mapped[str] = mapped_column(String(200))
    project_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    project_name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    action: Mapped[str] = mapped_column(String(64), index=True)
    benchmark_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    target: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


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
