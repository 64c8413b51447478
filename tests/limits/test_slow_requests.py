"""Slow and partial requests against the real service (issue 39, finding "High — slow bodies"):
80 connections trickling a JSON body (one byte per 0.5 s, no key) leave valid requests answered
(p99 <= 250 ms) and are closed by their deadline; connections trickling their headers are closed
too; /healthz reports the places taken."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest

from tests.limits.conftest import TRANSPORT_SETTINGS
from tests.support.stack import Stack, create_key

pytestmark = pytest.mark.integration

BODY_SECONDS = float(TRANSPORT_SETTINGS["REQUEST_BODY_SECONDS"])
HEADER_SECONDS = float(TRANSPORT_SETTINGS["REQUEST_HEADER_SECONDS"])
TRICKLERS = 80


@dataclass
class Trickled:
    closed_after: float | None = None  # seconds from connecting until the server closed
    status_line: bytes = b""


async def _trickle(host: str, port: int, head: bytes, drip: bytes, out: Trickled) -> None:
    """Send ``head`` at once, then ``drip`` one byte per 0.5 s until the server closes."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(head)
        await writer.drain()
        for byte in drip:
            try:
                answer = await asyncio.wait_for(reader.read(4096), 0.5)
            except TimeoutError:
                writer.write(bytes([byte]))
                await writer.drain()
                continue
            out.closed_after = time.monotonic() - started
            out.status_line = answer.split(b"\r\n", 1)[0]
            if answer:  # a response: the server closes right after it
                await asyncio.wait_for(reader.read(), 5)
            return
    except (ConnectionError, TimeoutError):
        out.closed_after = time.monotonic() - started
    finally:
        writer.close()


async def _valid_requests(url: str, key: str, n: int, wait: float) -> list[tuple[int, float]]:
    """``n`` cheap GETs, one after the other, ``wait`` s after the trickling began."""
    await asyncio.sleep(wait)
    out = []
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=10
    ) as client:
        for _ in range(n):
            started = time.perf_counter()
            r = await client.get("/v1/benchmarks")
            out.append((r.status_code, time.perf_counter() - started))
            await asyncio.sleep(0.02)
    return out


async def _healthz(url: str, wait: float) -> list[dict]:
    await asyncio.sleep(wait)
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        return [(await client.get("/healthz")).json() for _ in range(8)]


def _warm(stack: Stack, key: str) -> None:
    """The key verified (argon2, once per process) before anything is timed: new connections,
    so both processes see it."""
    for _ in range(12):
        with stack.client(key) as client:
            assert client.get("/v1/benchmarks").status_code == 200


def _run(stack: Stack, head: bytes, drip: bytes, key: str) -> tuple[list[Trickled], list, list]:
    _warm(stack, key)
    parts = urlsplit(stack.api.url)
    host, port = parts.hostname, parts.port
    assert host is not None and port is not None
    trickled = [Trickled() for _ in range(TRICKLERS)]

    async def main() -> tuple[list, list]:
        tasks = [asyncio.create_task(_trickle(host, port, head, drip, t)) for t in trickled]
        answered = asyncio.create_task(_valid_requests(stack.api.url, key, 60, 1.0))
        health = asyncio.create_task(_healthz(stack.api.url, 1.5))
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        return await answered, await health

    answered, health = asyncio.run(main())
    return trickled, answered, health


def _assert_answered(answered: list[tuple[int, float]]) -> None:
    codes = [code for code, _ in answered]
    assert codes == [200] * len(codes), codes
    p99 = float(np.quantile([s for _, s in answered], 0.99))
    assert p99 <= 0.250, f"p99 {1000 * p99:.0f} ms: {sorted(s for _, s in answered)[-5:]}"


def test_trickling_bodies_hold_no_place_and_are_closed_by_their_deadline(
    two_process_stack: Stack,
) -> None:
    stack = two_process_stack
    key = create_key(stack.database_url, ["read"], name="slow-bodies-reader")
    body = b'{"name": "' + b"x" * 180 + b'", "items": []}'
    head = (
        b"POST /v1/benchmarks HTTP/1.1\r\nHost: benchslice\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    trickled, answered, health = _run(stack, head, body, key)

    _assert_answered(answered)
    # every trickler was closed by the server at its deadline (REQUEST_BODY_SECONDS plus a
    # few bytes' worth), answered 408, before its body was complete (200 bytes = 100 s)
    closed = [t.closed_after for t in trickled]
    assert all(c is not None for c in closed), closed
    assert min(closed) >= BODY_SECONDS - 0.5, closed  # type: ignore[type-var]
    assert max(closed) <= BODY_SECONDS + 4, closed  # type: ignore[type-var]
    assert {t.status_line for t in trickled} == {b"HTTP/1.1 408 Request Timeout"}
    # /healthz (either process) saw bodies arriving and no place taken by them
    assert all(h["status"] == "ok" and not h["saturated"] for h in health), health
    assert any(h["bodies_reading"] > 0 for h in health), health
    assert all(h["in_flight"] <= 2 for h in health), health


def test_trickling_headers_are_closed_by_their_deadline(two_process_stack: Stack) -> None:
    stack = two_process_stack
    key = create_key(stack.database_url, ["read"], name="slow-headers-reader")
    headers = b"GET /v1/benchmarks HTTP/1.1\r\nHost: benchslice\r\nX-Slow: " + b"y" * 200
    trickled, answered, _ = _run(stack, b"", headers, key)

    _assert_answered(answered)
    closed = [t.closed_after for t in trickled]
    assert all(c is not None for c in closed), closed
    assert min(closed) >= HEADER_SECONDS - 0.5, closed  # type: ignore[type-var]
    assert max(closed) <= HEADER_SECONDS + 4, closed  # type: ignore[type-var]
    assert {t.status_line for t in trickled} == {b""}  # closed without an answer


def test_healthz_reports_saturation_fields(two_process_stack: Stack) -> None:
    body = httpx.get(two_process_stack.api.url + "/healthz", timeout=10).json()
    assert body["status"] == "ok"
    assert body["max_in_flight"] == 32
    assert {"in_flight", "bodies_reading", "bodies_timed_out", "shed", "saturated"} <= set(body)
