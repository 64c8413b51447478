"""API keys: create (shown once), authenticate a bearer token, revoke.

A key is ``bsk_<prefix>_<secret>``: the prefix (public) finds the row, the whole key is checked
against its argon2id hash. Verified keys are remembered in-process by their sha256 (never the
key itself) so bulk uploads do not pay for argon2 on every request; revocation still applies
at once because the row is read on every request.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models.access import ApiKey
from app.db.repositories.access import ApiKeyRepository
from app.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from app.services.platform.caching import BoundedCache

SCOPES = ("read", "write", "admin")
# each scope includes the ones before it: admin ⊃ write ⊃ read
_RANK = {s: i for i, s in enumerate(SCOPES)}
KEY_PREFIX = "bsk"
_HASHER = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
# sha256(key) -> the key_hash it was verified against (argon2 runs once per key and hash)
_VERIFIED: BoundedCache[str, str] = BoundedCache(10_000)
_LAST_USED_GRANULARITY = timedelta(minutes=1)
BEARER = {"WWW-Authenticate": "Bearer"}


@dataclass(frozen=True)
class Principal:
    """Who is calling: an API key (``id`` = key id) or ``anonymous`` when auth is disabled."""

    id: str
    name: str
    scopes: frozenset[str] = field(default_factory=frozenset)

    def allows(self, scope: str) -> bool:
        need = _RANK[scope]
        return any(_RANK.get(s, -1) >= need for s in self.scopes)


ANONYMOUS = Principal(id="anonymous", name="anonymous", scopes=frozenset(SCOPES))


def _check_scopes(scopes: Sequence[str]) -> list[str]:
    bad = [s for s in scopes if s not in _RANK]
    if bad or not scopes:
        raise InvalidInput(
            f"unknown scope(s) {bad}" if bad else "at least one scope is required",
            field="scope",
            message=f"choose from {', '.join(SCOPES)}",
        )
    return sorted(set(scopes), key=_RANK.__getitem__)


def create_key(session: Session, name: str, scopes: Sequence[str]) -> tuple[ApiKey, str]:
    """Store a new key hashed and return ``(row, plaintext)``; the plaintext is never stored."""
    prefix = secrets.token_hex(6)
    token = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiKey(
        name=name,
        prefix=prefix,
        key_hash=_HASHER.hash(token),
        scopes=_check_scopes(scopes),
        revoked=False,
    )
    return ApiKeyRepository(session).add(row), token


def list_keys(session: Session) -> Sequence[ApiKey]:
    return ApiKeyRepository(session).all()


def revoke_key(session: Session, prefix_or_id: str) -> ApiKey:
    repo = ApiKeyRepository(session)
    row = repo.get_by_prefix(prefix_or_id)
    if row is None:
        try:
            row = repo.get(uuid.UUID(prefix_or_id))
        except ValueError:
            row = None
    if row is None:
        raise NotFound(f"no API key {prefix_or_id!r}")
    row.revoked = True
    session.flush()
    return row


def authenticate(session: Session, token: str | None) -> Principal:
    """The principal for a bearer token; ``Unauthorized`` when missing, unknown or revoked."""
    if not token:
        raise Unauthorized("missing API key (Authorization: Bearer <key>)", headers=BEARER)
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        raise Unauthorized("invalid API key", headers=BEARER)
    row = ApiKeyRepository(session).get_by_prefix(parts[1])
    if row is None or row.revoked:
        raise Unauthorized("invalid or revoked API key", headers=BEARER)
    digest = hashlib.sha256(token.encode()).hexdigest()
    known = _VERIFIED.get(digest) == row.key_hash
    if not known:
        try:
            _HASHER.verify(row.key_hash, token)
        except (VerificationError, InvalidHashError):
            raise Unauthorized("invalid API key", headers=BEARER) from None
        _VERIFIED.put(digest, row.key_hash)
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > _LAST_USED_GRANULARITY:
        row.last_used_at = now
        session.flush()
    return Principal(id=str(row.id), name=row.name, scopes=frozenset(row.scopes))


def require(principal: Principal, scope: str) -> Principal:
    if not principal.allows(scope):
        raise Forbidden(f"this API key lacks the {scope!r} scope")
    return principal
