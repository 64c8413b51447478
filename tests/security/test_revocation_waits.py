"""Issue 39 ("a revoked key's in-flight write completes"): a write request share-locks its key's
row for its transaction, so a revocation waits for the key's in-flight writes and none lands
after the revocation returned; reads take no lock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import ApiKey
from app.services.access.keys import authenticate, create_key, revoke_key

pytestmark = pytest.mark.integration


def _revoke_within(make: sessionmaker[Session], prefix: str, ms: int) -> bool:
    """Revoke the key unless that waits longer than ``ms`` (True: revoked)."""
    with make() as session:
        session.execute(text(f"SET LOCAL lock_timeout = '{ms}ms'"))
        try:
            revoke_key(session, prefix)
            session.commit()
            return True
        except OperationalError:
            session.rollback()
            return False


def test_a_revocation_waits_for_the_keys_in_flight_write(
    committed_sessionmaker: sessionmaker[Session], cleanup: Callable[[type, Any], None]
) -> None:
    make = committed_sessionmaker
    with make() as session:
        row, token = create_key(session, "revoked-mid-write", ["write"])
        session.commit()
        cleanup(ApiKey, row.id)
        prefix = row.prefix

    reading = make()
    authenticate(reading, token)  # a read: no lock
    writing = make()
    authenticate(writing, token, for_write=True)  # the write's transaction is open
    try:
        assert _revoke_within(make, prefix, 300) is False  # waits for the in-flight write
    finally:
        writing.commit()  # the write lands, before the revocation
        writing.close()
    reading.commit()
    reading.close()
    assert _revoke_within(make, prefix, 2000) is True
