"""Browser sessions of the /ui view: a random id in the cookie, everything else on the server.

``/ui/login`` checks an API key once and stores a session row: the sha256 of a random 256-bit
id (the cookie holds the id, never the key), the key it was opened with, when it expires and
whether it was revoked. Every page looks the row up, so logout, expiry and revoking the key
apply at once in every API process. A session only reads, whatever the key's scopes: the
browser view has no write actions, so a stolen cookie reads at most. The id is not a bearer
token: ``/v1`` does not accept it.

The CSRF signing secret is shared by every process: ``WEB_SECRET`` when set, else one random
value stored in the database on first use (the first process to insert it wins, the others
read it).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models.web import BrowserSession, ServerSecret
from app.db.repositories.access import ApiKeyRepository
from app.db.repositories.web import BrowserSessionRepository
from app.errors import Unauthorized
from app.services.access.keys import Principal, authenticate, principal_for_key, require

CSRF_SECRET = "web_csrf"


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(
    session: Session,
    key: str | None,
    ttl: timedelta,
    before_hashing: Callable[[str], None] | None = None,
    after_failure: Callable[[str], None] | None = None,
) -> str:
    """Check ``key`` (read scope suffices) and store a new session; returns its id (the cookie
    value, shown once). ``Unauthorized``/``Forbidden`` for a bad key."""
    principal = require(authenticate(session, key, before_hashing, after_failure), "read")
    sid = secrets.token_urlsafe(32)
    row = BrowserSession(
        token_hash=_digest(sid), key_id=uuid.UUID(principal.id), expires_at=utcnow() + ttl
    )
    BrowserSessionRepository(session).add(row)
    return sid


def session_principal(session: Session, session_id: str | None) -> Principal:
    """The reader behind a session cookie; ``Unauthorized`` when missing, expired, logged out or
    when its key was revoked."""
    if not session_id:
        raise Unauthorized("sign in with an API key")
    row = BrowserSessionRepository(session).get_by_hash(_digest(session_id))
    if row is None or row.revoked_at is not None or row.expires_at <= utcnow():
        raise Unauthorized("the session has ended; sign in again")
    principal = principal_for_key(session, row.key_id)
    if principal is None:
        raise Unauthorized("the session's API key was revoked; sign in again")
    if _rotated_since(session, row.key_id, row.created_at):
        # a rotation replaces the secret the session was opened with (issue 39): a browser
        # signed in with it must sign in with the new one, as a client must
        raise Unauthorized("the session's API key was rotated; sign in again with the new key")
    # the browser view only reads: the session holds the key's projects at the read role
    # (an instance admin stays one: the pages have no write action to misuse)
    return Principal(
        id=principal.id,
        name=principal.name,
        roles=dict.fromkeys(principal.roles, "read"),
        project_names=principal.project_names,
        instance_admin=principal.instance_admin,
    )


def _rotated_since(session: Session, key_id: uuid.UUID, since: datetime) -> bool:
    key = ApiKeyRepository(session).get(key_id)
    return key is not None and key.rotated_at is not None and key.rotated_at >= since


def close_session(session: Session, session_id: str | None) -> None:
    """Log out: the session stops working at once (in every process)."""
    if not session_id:
        return
    row = BrowserSessionRepository(session).get_by_hash(_digest(session_id))
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
        session.flush()


def shared_secret(session: Session, name: str = CSRF_SECRET) -> bytes:
    """A random secret stored once in the database and read by every process."""
    repo = BrowserSessionRepository(session)
    value = repo.secret(name)
    if value is None:
        value = repo.insert_secret_if_absent(ServerSecret(name=name, value=secrets.token_hex(32)))
    return bytes.fromhex(value)
