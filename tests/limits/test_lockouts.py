"""Failed key attempts against the real service (issue 39, "Medium — lock-outs"): bad secrets
on a known prefix do not lock the right secret out, nor do a rotated-out secret's failures;
spellings of the ``Authorization`` header are one credential."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from tests.support.stack import Stack, create_key

pytestmark = pytest.mark.integration


def _rotate(database_url: str, token: str) -> str:
    from app.services.access.keys import rotate_key

    engine = create_engine(database_url)
    try:
        with Session(engine) as session, session.begin():
            _, new = rotate_key(session, token.split("_")[1], grace=timedelta(0))
    finally:
        engine.dispose()
    return new


def _get(stack: Stack, token: str, address: str, spelling: str = "Bearer {}") -> int:
    """One request on a new connection (either API process), from ``address`` (uvicorn trusts
    X-Forwarded-For from loopback, as from a reverse proxy on the same host: deploy/nginx.conf)."""
    headers = {"Authorization": spelling.format(token), "X-Forwarded-For": address}
    with httpx.Client(base_url=stack.api.url, timeout=30) as client:
        return client.get("/v1/benchmarks", headers=headers).status_code


def test_bad_secrets_on_a_known_prefix_do_not_lock_out_the_right_one(
    two_process_stack: Stack,
) -> None:
    key = create_key(two_process_stack.database_url, ["read"], name="lockout-victim")
    prefix = key.split("_")[1]
    codes = [
        _get(two_process_stack, f"bsk_{prefix}_wrong{i}", "10.9.0.66") for i in range(60)
    ]  # AUTH_ATTEMPTS_BURST=20 per process: the attacker is refused
    assert 429 in codes and set(codes) <= {401, 429}, codes
    # the holder of the right secret, never seen by either process (argon2 needed), elsewhere
    assert [_get(two_process_stack, key, "10.9.0.7") for _ in range(6)] == [200] * 6


def test_a_rotated_out_secret_does_not_lock_out_the_new_one(two_process_stack: Stack) -> None:
    old = create_key(two_process_stack.database_url, ["read"], name="lockout-rotated")
    assert [_get(two_process_stack, old, "10.9.1.5") for _ in range(4)] == [200] * 4  # cached
    new = _rotate(two_process_stack.database_url, old)
    # a CI job still sending the old secret, 60 times, from the same address as the new one
    codes = [_get(two_process_stack, old, "10.9.1.5") for _ in range(40)]
    assert set(codes) == {401}, codes  # the same wrong secret: no argon2, no attempt spent
    assert [_get(two_process_stack, new, "10.9.1.5") for _ in range(6)] == [200] * 6


@pytest.mark.parametrize(
    "spelling", ["bearer {}", "BEARER {}", "Bearer  {}"], ids=["lower", "upper", "two-spaces"]
)
def test_header_spellings_authenticate_as_the_key(two_process_stack: Stack, spelling) -> None:
    key = create_key(two_process_stack.database_url, ["read"], name="spellings")
    assert _get(two_process_stack, key, "10.9.2.1", spelling) == 200
