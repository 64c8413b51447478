"""API keys: create (shown once), authenticate a bearer token, rotate, revoke; per-project roles.

A key is ``bsk_<prefix>_<secret>``: the prefix (public) finds the row, the whole key is checked
against its argon2id hash. Verified keys are remembered in-process by their sha256 (never the
key itself) so bulk uploads do not pay for argon2 on every request; revocation, expiry and the
end of a rotation's grace period still apply at once because the row is read on every request.

A key holds one role per project (``read`` < ``write`` < ``admin``, each including the ones
before it) and may be an instance-wide admin (every role on every project). Rotation keeps the
key's id, prefix and roles and gives it a new secret; the old secret stays valid for a grace
period.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models.access import ApiKey, KeyRole
from app.db.repositories.access import ApiKeyRepository
from app.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from app.services.access import projects
from app.services.platform.caching import MB, BoundedCache

ROLES = ("read", "write", "admin")
SCOPES = ROLES  # the pre-project name of the same ladder
# each role includes the ones before it: admin ⊃ write ⊃ read
_RANK = {s: i for i, s in enumerate(ROLES)}
KEY_PREFIX = "bsk"
_HASHER = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
# sha256(key) -> the key_hash it was verified against (argon2 runs once per key and hash)
_VERIFIED: BoundedCache[str, str] = BoundedCache("verified_keys", 4 * MB)
# sha256(token) -> the key_hash it was found wrong against: the same wrong secret again (a
# client still sending a rotated-out secret, a retry loop) is a 401 without argon2 and without
# spending a failed attempt, so it cannot lock out the key's right secret
_FAILED: BoundedCache[str, str] = BoundedCache("failed_keys", 4 * MB)
# One argon2 verification of a token at a time: the many concurrent first requests of a new
# client (a CI job's worker pool, a burst) wait for the first one's answer and then read the
# cache instead of each running argon2 (~36 ms of CPU). Striped: tokens whose digests share a
# stripe verify one after the other, which only matters when many new keys arrive at once.
_VERIFYING = tuple(threading.Lock() for _ in range(64))
# Verified against when the prefix is unknown, so an unknown prefix costs what a wrong secret
# does (no timing oracle telling which prefixes exist).
_DUMMY_HASH = _HASHER.hash(secrets.token_urlsafe(32))
_LAST_USED_GRANULARITY = timedelta(minutes=1)
DEFAULT_ROTATION_GRACE = timedelta(hours=24)
BEARER = {"WWW-Authenticate": "Bearer"}

_NO_ROLES: Mapping[uuid.UUID, str] = MappingProxyType({})


def rank(role: str) -> int:
    return _RANK.get(role, -1)


@dataclass(frozen=True)
class Principal:
    """Who is calling: an API key (``id`` = key id) or ``anonymous`` when keys are disabled.

    ``roles`` maps project id to the key's role there; ``project_names`` names those projects.
    An ``instance_admin`` holds every role everywhere (the anonymous principal is one).
    """

    id: str
    name: str
    roles: Mapping[uuid.UUID, str] = field(default_factory=lambda: _NO_ROLES)
    project_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: _NO_ROLES)
    instance_admin: bool = False

    def role_on(self, project_id: uuid.UUID) -> str | None:
        return "admin" if self.instance_admin else self.roles.get(project_id)

    def has(self, project_id: uuid.UUID, role: str) -> bool:
        """Does the key hold ``role`` (or a higher one) on this project?"""
        held = self.role_on(project_id)
        return held is not None and rank(held) >= rank(role)

    def allows(self, role: str) -> bool:
        """Does the key hold ``role`` on at least one project (the check before a body is read)?
        Every valid key may read (public-read projects; the target's project decides)."""
        need = rank(role)
        if need <= rank("read"):
            return True
        return self.instance_admin or any(rank(r) >= need for r in self.roles.values())

    def projects_with(self, role: str) -> list[uuid.UUID]:
        need = rank(role)
        return [p for p, r in self.roles.items() if rank(r) >= need]


ANONYMOUS = Principal(id="anonymous", name="anonymous", instance_admin=True)


def check_role(role: str, *, field_name: str = "role") -> str:
    if role not in _RANK:
        raise InvalidInput(
            f"unknown role {role!r}", field=field_name, message=f"choose from {', '.join(ROLES)}"
        )
    return role


def _roles_by_project(
    session: Session, roles: Mapping[str, str] | Sequence[str]
) -> dict[uuid.UUID, str]:
    """``{project name: role}``, or a bare list of roles (the pre-project form: the highest of
    them on the ``default`` project), as ``{project id: role}``."""
    if not isinstance(roles, Mapping):
        bad = [s for s in roles if s not in _RANK]
        if bad or not roles:
            raise InvalidInput(
                f"unknown role(s) {bad}" if bad else "at least one role is required",
                field="role",
                message=f"choose from {', '.join(ROLES)}",
            )
        roles = {projects.DEFAULT_PROJECT: max(roles, key=rank)}
    out: dict[uuid.UUID, str] = {}
    for project_name, role in roles.items():
        project = (
            projects.default_project(session)
            if project_name == projects.DEFAULT_PROJECT
            else projects.get_by_name(session, project_name)
        )
        out[project.id] = check_role(role)
    return out


def create_key(
    session: Session,
    name: str,
    roles: Mapping[str, str] | Sequence[str],
    *,
    instance_admin: bool = False,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Store a new key hashed and return ``(row, plaintext)``; the plaintext is never stored.

    ``roles``: ``{project name: role}``; a plain list of roles means the ``default`` project.
    An instance admin needs no roles.
    """
    by_project = _roles_by_project(session, roles) if roles or not instance_admin else {}
    if expires_at is not None and expires_at <= utcnow():
        raise InvalidInput("expires_at is in the past", field="expires_at")
    prefix = secrets.token_hex(6)
    token = _token(prefix)
    row = ApiKey(
        name=name,
        prefix=prefix,
        key_hash=_HASHER.hash(token),
        instance_admin=instance_admin,
        revoked=False,
        expires_at=expires_at,
    )
    row.roles = [KeyRole(project_id=p, role=r) for p, r in by_project.items()]
    return ApiKeyRepository(session).add(row), token


def _token(prefix: str) -> str:
    return f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"


def list_keys(session: Session) -> Sequence[ApiKey]:
    return ApiKeyRepository(session).all()


def find_key(session: Session, prefix_or_id: str) -> ApiKey:
    repo = ApiKeyRepository(session)
    row = repo.get_by_prefix(prefix_or_id)
    if row is None:
        try:
            row = repo.get(uuid.UUID(prefix_or_id))
        except ValueError:
            row = None
    if row is None:
        raise NotFound(f"no API key {prefix_or_id!r}")
    return row


def revoke_key(session: Session, prefix_or_id: str) -> ApiKey:
    row = find_key(session, prefix_or_id)
    ApiKeyRepository(session).lock_for_change(row.id)  # after the key's in-flight writes
    row.revoked = True
    session.flush()
    return row


def rotate_key(
    session: Session, prefix_or_id: str, *, grace: timedelta = DEFAULT_ROTATION_GRACE
) -> tuple[ApiKey, str]:
    """Give a key a new secret (same id, prefix and roles); the old secret keeps working for
    ``grace`` (``timedelta(0)``: not at all). Returns ``(row, new plaintext)``."""
    if grace < timedelta(0):
        raise InvalidInput("the grace period cannot be negative", field="grace")
    row = find_key(session, prefix_or_id)
    ApiKeyRepository(session).lock_for_change(row.id)  # after the key's in-flight writes
    session.refresh(row)  # a rotation that committed while we waited: build on its secret
    if row.revoked:
        raise InvalidInput(f"key {row.prefix!r} is revoked", field="key")
    token = _token(row.prefix)
    now = utcnow()
    row.previous_key_hash = row.key_hash if grace > timedelta(0) else None
    row.previous_valid_until = now + grace if grace > timedelta(0) else None
    row.key_hash = _HASHER.hash(token)
    row.rotated_at = now
    session.flush()
    return row, token


def set_roles(session: Session, row: ApiKey, roles: Mapping[str, str]) -> ApiKey:
    """Grant (or change) the key's role on each named project."""
    by_project = _roles_by_project(session, roles)
    current = {r.project_id: r for r in row.roles}
    for project_id, role in by_project.items():
        if project_id in current:
            current[project_id].role = role
        else:
            row.roles.append(KeyRole(project_id=project_id, role=role))
    session.flush()
    return row


def _valid_hashes(row: ApiKey, now: datetime) -> list[str]:
    """The key's secret's hash, and its previous one inside the rotation grace."""
    hashes = [row.key_hash]
    if row.previous_key_hash and row.previous_valid_until and now < row.previous_valid_until:
        hashes.append(row.previous_key_hash)
    return hashes


def _verify(row: ApiKey, token: str, now: datetime) -> bool:
    """Is ``token`` the key's secret (or its previous one, inside the rotation grace)?"""
    hashes = _valid_hashes(row, now)
    digest = hashlib.sha256(token.encode()).hexdigest()
    if _VERIFIED.get(digest) in hashes:
        return True
    with _VERIFYING[int(digest[:8], 16) % len(_VERIFYING)]:
        if _VERIFIED.get(digest) in hashes:  # verified while this request waited
            return True
        for stored in hashes:
            try:
                _HASHER.verify(stored, token)
            except (VerificationError, InvalidHashError):
                continue
            _VERIFIED.put(digest, stored)
            return True
        _FAILED.put(digest, row.key_hash)
    return False


def principal_for(row: ApiKey) -> Principal:
    return Principal(
        id=str(row.id),
        name=row.name,
        roles=MappingProxyType({r.project_id: r.role for r in row.roles}),
        project_names=MappingProxyType({r.project_id: r.project.name for r in row.roles}),
        instance_admin=bool(row.instance_admin),
    )


def _dummy_verify(token: str) -> None:
    try:
        _HASHER.verify(_DUMMY_HASH, token)
    except (VerificationError, InvalidHashError):
        pass


def _cached(row: ApiKey, token: str, now: datetime) -> bool:
    """Was ``token`` verified before against a hash of the key that is still valid (no argon2
    needed)? A rotated-out secret past its grace is not: it goes through the failure limiter."""
    known = _VERIFIED.get(hashlib.sha256(token.encode()).hexdigest())
    return known is not None and known in _valid_hashes(row, now)


def _known_wrong(row: ApiKey, token: str) -> bool:
    """Is ``token`` known, without argon2, not to be the key's secret now: found wrong against
    its current hash before, or verified against a previous hash whose grace has ended?"""
    digest = hashlib.sha256(token.encode()).hexdigest()
    if _FAILED.get(digest) == row.key_hash:
        return True
    known = _VERIFIED.get(digest)
    return known is not None and known != row.key_hash and known == row.previous_key_hash


def authenticate(
    session: Session,
    token: str | None,
    before_hashing: Callable[[str], None] | None = None,
    after_failure: Callable[[str], None] | None = None,
    *,
    for_write: bool = False,
) -> Principal:
    """The principal for a bearer token; ``Unauthorized`` when missing, unknown, revoked,
    expired, or a rotated-out secret past its grace period.

    A token not verified before costs one argon2 verification whatever its prefix (unknown and
    revoked prefixes are verified against a dummy hash). ``before_hashing(prefix)`` runs first
    and may refuse, ``after_failure(prefix)`` after a wrong or unknown key (the API's failure
    limiter: per prefix and client address).

    ``for_write``: the key's row stays share-locked until the request's transaction ends, so a
    revocation (or rotation) waits for the key's in-flight writes and none lands after it
    returned (issue 39: a revoked key's in-flight write used to complete after the revoke)."""
    if not token:
        raise Unauthorized("missing API key (Authorization: Bearer <key>)", headers=BEARER)
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        raise Unauthorized("invalid API key", headers=BEARER)
    prefix = parts[1]
    row = ApiKeyRepository(session).get_by_prefix(prefix, share_lock=for_write)
    now = utcnow()
    if row is not None and not row.revoked and not _cached(row, token, now):
        if _known_wrong(row, token):  # the same wrong secret again: no argon2, no attempt
            raise Unauthorized("invalid API key", headers=BEARER)
    if (row is None or row.revoked or not _cached(row, token, now)) and before_hashing is not None:
        before_hashing(prefix)
    if row is None or row.revoked:
        _dummy_verify(token)
        if after_failure is not None:
            after_failure(prefix)
        raise Unauthorized("invalid or revoked API key", headers=BEARER)
    if row.expires_at is not None and now >= row.expires_at:
        raise Unauthorized("this API key has expired", headers=BEARER)
    if not _verify(row, token, now):
        if after_failure is not None:
            after_failure(prefix)
        raise Unauthorized("invalid API key", headers=BEARER)
    if row.last_used_at is None or now - row.last_used_at > _LAST_USED_GRANULARITY:
        _touch(session, row, now)
    return principal_for(row)


_TOUCHED: dict[uuid.UUID, datetime] = {}  # key id -> when this process last wrote last_used_at


def _touch(session: Session, row: ApiKey, now: datetime) -> None:
    """Record the key's use (at most once per granularity and process, and never waiting): a
    burst of a key's requests must not queue on its row's lock, each holding a connection."""
    claimed = _TOUCHED.get(row.id)
    if claimed is not None and now - claimed <= _LAST_USED_GRANULARITY:
        return  # another request of this process is recording it
    if len(_TOUCHED) > 10_000:
        _TOUCHED.clear()
    _TOUCHED[row.id] = now
    if ApiKeyRepository(session).lock_if_free(row.id):  # another process writing it: skip
        row.last_used_at = now
        session.flush()


def principal_for_key(session: Session, key_id: uuid.UUID) -> Principal | None:
    """The principal of a stored, unrevoked, unexpired key (a browser session's), else None."""
    row = ApiKeyRepository(session).get(key_id)
    if row is None or row.revoked or (row.expires_at is not None and utcnow() >= row.expires_at):
        return None
    return principal_for(row)


def require(principal: Principal, role: str) -> Principal:
    """403 unless the key holds ``role`` on at least one project."""
    if not principal.allows(role):
        raise Forbidden(f"this API key has no {role!r} role on any project")
    return principal


def describe_roles(row: ApiKey) -> list[str]:
    """``project:role`` per project (``*:admin`` for an instance admin), sorted."""
    out = sorted(f"{r.project.name}:{r.role}" for r in row.roles)
    return (["*:admin"] if row.instance_admin else []) + out


def roles_from_pairs(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``[(project, role), ...]`` as a mapping; 422 naming ``project`` when one repeats."""
    out: dict[str, str] = {}
    for project, role in pairs:
        if project in out:
            raise InvalidInput(f"project {project!r} given twice", field="project")
        out[project] = check_role(role)
    return out
