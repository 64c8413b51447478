"""deploy/nginx.conf run by Debian's nginx in front of the real service (issue 39): 80 bodies
trickled through it never reach an API process (they hold no place, valid requests through
nginx are answered with p99 <= 250 ms), and a stalled body is closed by nginx at its client_body_timeout."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.limits.test_slow_requests import TRICKLERS, Trickled, _assert_answered, _trickle
from tests.support.procs import REPO_ROOT, free_port
from tests.support.stack import Stack, create_key
from tests.support.tools import missing

pytestmark = pytest.mark.integration

BODY_TIMEOUT = 3  # the test's client_body_timeout (the file's: 10 s)


@pytest.fixture(scope="module")
def nginx(two_process_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        missing("nginx (Debian package) not installed; .ci/run installs it")
    prefix = tmp_path_factory.mktemp("nginx")
    os.chmod(prefix, 0o777)  # nginx's workers (user nobody) write the temp files here
    api = urlsplit(two_process_stack.api.url)
    port = free_port()
    conf = (REPO_ROOT / "deploy" / "nginx.conf").read_text()
    for old, new in {
        "server api:8000;": f"server 127.0.0.1:{api.port};",
        "listen 8080;": f"listen 127.0.0.1:{port};",
        "client_body_timeout 10s;": f"client_body_timeout {BODY_TIMEOUT}s;",
    }.items():
        assert old in conf
        conf = conf.replace(old, new)
    (prefix / "nginx.conf").write_text(conf)
    proc = subprocess.Popen(
        [binary, "-p", f"{prefix}/", "-c", f"{prefix}/nginx.conf", "-g", "daemon off;"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "nginx did not answer"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


async def _through(url: str, key: str, n: int, wait: float) -> list[tuple[int, float]]:
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


def test_trickled_bodies_stay_in_nginx(two_process_stack: Stack, nginx: str) -> None:
    key = create_key(two_process_stack.database_url, ["read"], name="nginx-reader")
    for _ in range(12):
        assert (
            httpx.get(
                nginx + "/v1/benchmarks", headers={"Authorization": f"Bearer {key}"}
            ).status_code
            == 200
        )
    parts = urlsplit(nginx)
    body = b'{"name": "' + b"x" * 40 + b'", "items": []}'
    head = (
        b"POST /v1/benchmarks HTTP/1.1\r\nHost: benchslice\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
    )
    trickled = [Trickled() for _ in range(TRICKLERS)]

    async def main() -> tuple[list, list]:
        tasks = [
            asyncio.create_task(_trickle(parts.hostname, parts.port, head, body[:8], t))
            for t in trickled
        ]
        answered = asyncio.create_task(_through(nginx, key, 60, 1.0))
        await asyncio.sleep(2.0)
        async with httpx.AsyncClient(base_url=two_process_stack.api.url, timeout=10) as c:
            health = [(await c.get("/healthz")).json() for _ in range(6)]
        await asyncio.gather(*tasks)
        return await answered, health

    answered, health = asyncio.run(main())
    _assert_answered(answered)
    # the API processes saw none of the trickled bodies: nginx holds them
    assert all(h["bodies_reading"] == 0 and h["in_flight"] <= 2 for h in health), health
    assert all(t.closed_after is None for t in trickled)  # nginx kept them open meanwhile


def test_a_stalled_body_is_closed_by_nginx(nginx: str) -> None:
    parts = urlsplit(nginx)
    out = Trickled()
    head = (
        b"POST /v1/benchmarks HTTP/1.1\r\nHost: benchslice\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )

    async def stall() -> None:
        started = time.monotonic()
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write(head)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(4096), BODY_TIMEOUT + 10)
        out.closed_after = time.monotonic() - started
        out.status_line = answer.split(b"\r\n", 1)[0]
        writer.close()

    asyncio.run(stall())
    # nginx ends the request with its 408 and closes (1.22 closes without writing the 408)
    assert out.status_line in (b"", b"HTTP/1.1 408 Request Time-out"), out
    assert out.closed_after is not None and out.closed_after >= BODY_TIMEOUT - 0.5, out
    assert out.closed_after is not None and out.closed_after < BODY_TIMEOUT + 3, out
