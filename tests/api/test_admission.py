"""Admission control (app/api/admission.py): past MAX_REQUESTS_IN_FLIGHT a request is answered
at once with 503 + Retry-After; health probes always pass; the count goes back down."""

from __future__ import annotations

import asyncio
import time

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.api.admission import AdmissionLimit, credential_digest
from app.api.slow_requests import BodyDeadline
from app.main import create_app
from app.settings import Settings


def _blocking_app(release: asyncio.Event, entered: list[int]) -> Starlette:
    async def slow(_: Request) -> PlainTextResponse:
        entered.append(1)
        await release.wait()
        return PlainTextResponse("done")

    async def healthz(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/slow", slow), Route("/healthz", healthz)])


def test_requests_past_the_limit_get_503_at_once() -> None:
    async def scenario() -> None:
        release, entered = asyncio.Event(), []
        guard = AdmissionLimit(_blocking_app(release, entered), max_in_flight=3)
        transport = httpx.ASGITransport(app=guard)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            held = [asyncio.create_task(client.get("/slow")) for _ in range(3)]
            while len(entered) < 3:
                await asyncio.sleep(0.001)
            assert guard.in_flight == 3
            refused = await asyncio.wait_for(client.get("/slow"), timeout=5)
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["status"] == 503 and "limit is 3" in refused.json()["detail"]
            probe = await asyncio.wait_for(client.get("/healthz"), timeout=5)
            assert probe.status_code == 200  # probes are admitted whatever the load
            assert len(entered) == 3 and guard.shed == 1
            release.set()
            assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200, 200]
            assert guard.in_flight == 0
            again = await client.get("/slow")
            assert again.status_code == 200 and guard.in_flight == 0

    asyncio.run(scenario())


def test_zero_means_no_limit() -> None:
    async def scenario() -> None:
        release, entered = asyncio.Event(), []
        guard = AdmissionLimit(_blocking_app(release, entered), max_in_flight=0)
        transport = httpx.ASGITransport(app=guard)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            held = [asyncio.create_task(client.get("/slow")) for _ in range(50)]
            while len(entered) < 50:
                await asyncio.sleep(0.001)
            release.set()
            assert {r.status_code for r in await asyncio.gather(*held)} == {200}

    asyncio.run(scenario())


def test_the_app_installs_the_setting() -> None:
    app = create_app(Settings(database_url="sqlite://", max_requests_in_flight=7))
    stack = [m for m in app.user_middleware if m.cls is AdmissionLimit]
    assert len(stack) == 1
    assert stack[0].kwargs == {
        "max_in_flight": 7,
        "hold_refused": True,
        "hold_delay": 1.0,
        "per_key": 4,
        "body_deadline": BodyDeadline(),
    }
    app = create_app(Settings(database_url="sqlite://", hold_refused_keys=False))
    stack = [m for m in app.user_middleware if m.cls is AdmissionLimit]
    assert stack[0].kwargs["hold_refused"] is False


def test_one_credential_has_at_most_its_places_in_flight_and_waits_for_them() -> None:
    """6 concurrent requests of one key with 2 places: 2 enter, the others wait on the event
    loop; one still waiting after KEY_WAIT_SECONDS gets 429 key-in-flight; another key and a
    request without credentials are not held back."""
    import app.api.admission as admission

    async def scenario() -> None:
        release, entered = asyncio.Event(), []
        guard = AdmissionLimit(_blocking_app(release, entered), max_in_flight=0, per_key=2)
        transport = httpx.ASGITransport(app=guard)
        one = {"Authorization": "Bearer bsk_a_1"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            mine = [asyncio.create_task(client.get("/slow", headers=one)) for _ in range(6)]
            others = [
                asyncio.create_task(client.get("/slow", headers={"Authorization": "Bearer b"})),
                asyncio.create_task(client.get("/slow")),
            ]
            while len(entered) < 4:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.05)
            assert len(entered) == 4  # 2 of the key, the other key, the anonymous one
            release.set()
            statuses = [r.status_code for r in await asyncio.gather(*mine, *others)]
            assert statuses == [200] * 8  # the waiting ones entered as places freed
            assert guard.gates == {}  # no state left for idle credentials

            release.clear()
            entered.clear()
            stuck = [asyncio.create_task(client.get("/slow", headers=one)) for _ in range(2)]
            while len(entered) < 2:
                await asyncio.sleep(0.001)
            started = time.perf_counter()
            r = await client.get("/slow", headers=one)
            assert r.status_code == 429 and r.json()["limit"] == "key-in-flight"
            assert time.perf_counter() - started >= admission.KEY_WAIT_SECONDS * 0.9
            assert r.headers["retry-after"] == "1"
            release.set()
            await asyncio.gather(*stuck)

    asyncio.run(scenario())


def test_the_per_key_places_hold_without_held_refusals_too() -> None:
    async def scenario() -> None:
        release, entered = asyncio.Event(), []
        guard = AdmissionLimit(
            _blocking_app(release, entered), max_in_flight=0, hold_refused=False, per_key=1
        )
        transport = httpx.ASGITransport(app=guard)
        one = {"Authorization": "Bearer bsk_a_1"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            mine = [asyncio.create_task(client.get("/slow", headers=one)) for _ in range(3)]
            while not entered:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.05)
            assert len(entered) == 1 and guard.held == {}
            release.set()
            assert [r.status_code for r in await asyncio.gather(*mine)] == [200] * 3

    asyncio.run(scenario())


SPELLINGS = [
    "Bearer bsk_abc_secret",
    "bearer bsk_abc_secret",
    "BEARER bsk_abc_secret",
    "Bearer  bsk_abc_secret",
    "Bearer bsk_abc_secret  ",
    "  Bearer\tbsk_abc_secret".replace("\t", " "),
]


def test_spellings_of_one_credential_are_one_key() -> None:
    """Issue 39 ("limits keyed on the literal header"): scheme case and spaces do not make a
    new credential; the key's id names it, so a rotation's two secrets are one key too, while
    the secret presented is kept apart (a failed-attempt refusal holds only that secret)."""
    digests = {credential_digest({"headers": [(b"authorization", v.encode())]}) for v in SPELLINGS}
    assert len(digests) == 1
    (one,) = digests
    other_secret = credential_digest({"headers": [(b"authorization", b"Bearer bsk_abc_other")]})
    assert other_secret is not None and one is not None
    assert other_secret.key == one.key and other_secret.token != one.token
    another_key = credential_digest({"headers": [(b"authorization", b"Bearer bsk_xyz_secret")]})
    assert another_key is not None and another_key.key != one.key


def test_spellings_share_the_keys_places() -> None:
    """12 concurrent requests of one key in 6 spellings with 4 places: 4 enter, not 12."""

    async def scenario() -> None:
        release, entered = asyncio.Event(), []
        guard = AdmissionLimit(_blocking_app(release, entered), max_in_flight=0, per_key=4)
        transport = httpx.ASGITransport(app=guard)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            tasks = [
                asyncio.create_task(
                    client.get("/slow", headers={"Authorization": SPELLINGS[i % len(SPELLINGS)]})
                )
                for i in range(12)
            ]
            while len(entered) < 4:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.1)
            assert len(entered) == 4
            release.set()
            assert {r.status_code for r in await asyncio.gather(*tasks)} == {200}

    asyncio.run(scenario())
