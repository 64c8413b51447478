"""Slow and partial requests: deadlines for a request's headers and body, read holding no place.

A client that trickles its request must not hold what other clients need. Two deadlines:

* **Body** (:func:`read_body`, called by the admission layer *before* it gives the request a
  place): every body gets ``REQUEST_BODY_SECONDS`` and then must keep arriving at
  ``REQUEST_BODY_MIN_RATE`` bytes per second on average (a body of ``n`` bytes must be complete
  ``REQUEST_BODY_SECONDS + n / REQUEST_BODY_MIN_RATE`` seconds after the request's headers). A
  body that misses its deadline is answered 408 with ``Connection: close`` and the connection is
  closed. The body is read on the event loop (no thread, no database connection, no admission
  place, no authentication yet) and bounded by ``MAX_BODY_BYTES`` (413); the bytes all bodies of
  a process hold while they are read are bounded by ``BODY_BUFFER_BYTES`` (503 beyond, counted
  as they arrive, so a client must really send the bytes it holds). The complete body is then
  replayed to the app, which reads it as usual.
* **Headers** (:func:`install_header_deadline`): uvicorn times out no request line or header
  block (its keep-alive timeout is cancelled by the first byte of the next request), so a
  connection trickling its headers would hold a socket for ever. At startup the app wraps the
  server's HTTP protocol class so a connection that has not completed a request's headers
  within ``REQUEST_HEADER_SECONDS`` of connecting (or of its previous response) is closed.
  Found the way the exposure guard finds the server (app/api/exposure.py); under another ASGI
  server that server's own timeouts apply (and the reverse proxy's: deploy/nginx.conf).

In production a reverse proxy that buffers bodies stands in front anyway (deploy/nginx.conf,
docker-compose.yml): it receives a trickling body itself and hands the app complete requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from app.api.errors import problem_response

log = logging.getLogger(__name__)

TIMED_OUT = Counter(
    "benchslice_slow_requests_closed",
    "Connections closed because a request's headers or body missed its deadline",
    ["part"],
)


@dataclass(frozen=True)
class BodyDeadline:
    """How long a body may take: ``seconds`` plus one second per ``min_rate`` bytes."""

    seconds: float = 10.0
    min_rate: float = 32 * 1024
    max_bytes: int = 64 * 1024 * 1024
    buffer_bytes: int = 256 * 1024 * 1024  # held by all bodies being read in this process

    def due(self, started: float, received: int) -> float:
        return started + self.seconds + received / self.min_rate


class BodyBuffers:
    """The bytes held by the bodies this process is reading now (touched on its loop only)."""

    def __init__(self) -> None:
        self.held = 0
        self.reading = 0  # bodies being read now (reported by /healthz)
        self.timed_out = 0  # bodies closed by their deadline so far (tests, /healthz)


class BodyRefused(Exception):
    """The body was not read to its end: ``response`` answers the request (None: the client
    went away)."""

    def __init__(self, response: Any | None) -> None:
        self.response = response


def _timeout_response(scope: Scope, deadline: BodyDeadline, received: int) -> Any:
    return problem_response(
        Request(scope),
        408,
        title="Request timeout",
        type_slug="request-timeout",
        detail=f"the request body did not arrive in time ({received} bytes received; a body "
        f"gets {deadline.seconds:g} s plus one second per {deadline.min_rate:g} bytes)",
        headers={"Connection": "close"},
    )


def _refusal(scope: Scope, status: int, detail: str, **headers: str) -> Any:
    titles = {413: ("Payload too large", "payload-too-large")}
    title, slug = titles.get(status, ("Service unavailable", "service-unavailable"))
    return problem_response(
        Request(scope), status, title=title, type_slug=slug, detail=detail, headers=headers or None
    )


async def read_body(
    scope: Scope, receive: Receive, deadline: BodyDeadline, buffers: BodyBuffers
) -> Receive:
    """Read the whole request body under its deadline; a ``receive`` that replays it.

    Raises :class:`BodyRefused` (with the 408 / 413 / 503 to send) when the body misses its
    deadline, exceeds ``max_bytes`` or the process's buffer budget, or the client went away.
    """
    started = time.monotonic()
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit() and int(value) > deadline.max_bytes:
            raise BodyRefused(
                _refusal(
                    scope,
                    413,
                    f"request body of {int(value)} bytes exceeds the limit of "
                    f"{deadline.max_bytes} bytes",
                    Connection="close",
                )
            )
    chunks: list[bytes] = []
    received = 0
    buffers.reading += 1
    try:
        while True:
            left = deadline.due(started, received) - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), left)
            except TimeoutError:
                buffers.timed_out += 1
                TIMED_OUT.labels("body").inc()
                raise BodyRefused(_timeout_response(scope, deadline, received)) from None
            if message["type"] != "http.request":  # the client went away
                raise BodyRefused(None)
            chunk = message.get("body", b"")
            if chunk:
                if received + len(chunk) > deadline.max_bytes:
                    raise BodyRefused(
                        _refusal(
                            scope,
                            413,
                            f"request body exceeds the limit of {deadline.max_bytes} bytes",
                            Connection="close",
                        )
                    )
                if buffers.held + len(chunk) > deadline.buffer_bytes:
                    raise BodyRefused(
                        _refusal(
                            scope,
                            503,
                            "this process holds too many request bodies being received "
                            "(BODY_BUFFER_BYTES); retry after 1 s",
                            **{"Retry-After": "1", "Connection": "close"},
                        )
                    )
                buffers.held += len(chunk)
                received += len(chunk)
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
    except BaseException:
        buffers.held -= received
        raise
    finally:
        buffers.reading -= 1
    body = b"".join(chunks)
    chunks.clear()
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            buffers.held -= received

    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            release()  # the app holds the body now; its own memory limits apply
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    replay.release = release  # type: ignore[attr-defined]
    return replay


async def send_refusal(refused: BodyRefused, scope: Scope, receive: Receive, send: Send) -> None:
    if refused.response is not None:
        await refused.response(scope, receive, send)


# --- the header deadline (uvicorn) ---------------------------------------------------------------


class _HeaderDeadline:
    """Mixed into uvicorn's HTTP protocol class: close a connection that has not completed a
    request's headers ``header_seconds`` after connecting or after its previous response."""

    header_seconds = 10.0
    _deadline_timer: asyncio.TimerHandle | None = None
    _deadline_cycle: Any = None

    def _arm(self) -> None:
        self._disarm()
        loop = asyncio.get_event_loop()
        self._deadline_timer = loop.call_later(self.header_seconds, self._headers_late)

    def _disarm(self) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None

    def _headers_late(self) -> None:
        self._deadline_timer = None
        transport = getattr(self, "transport", None)
        if transport is not None and not transport.is_closing():
            TIMED_OUT.labels("headers").inc()
            transport.close()

    def _check_cycle(self) -> None:
        cycle = getattr(self, "cycle", None)
        if cycle is not None and cycle is not self._deadline_cycle:
            self._deadline_cycle = cycle  # a request's headers arrived
            self._disarm()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        self._check_cycle()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        transport = getattr(self, "transport", None)
        if transport is not None and not transport.is_closing():
            self._arm()
            self._check_cycle()  # a pipelined request may have started already

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]


def with_header_deadline(protocol_class: type, seconds: float) -> type:
    """``protocol_class`` (uvicorn's h11 or httptools protocol) with the header deadline."""
    if issubclass(protocol_class, _HeaderDeadline):
        return protocol_class
    return type(
        f"HeaderDeadline{protocol_class.__name__}",
        (_HeaderDeadline, protocol_class),
        {"header_seconds": seconds},
    )


def install_header_deadline(seconds: float) -> bool:
    """Give the uvicorn server starting this app the header deadline (True when it could).

    Runs during lifespan startup: uvicorn builds its protocol factory from
    ``config.http_protocol_class`` right after the app's startup, before it accepts a
    connection."""
    from app.api.exposure import uvicorn_server_config

    config = uvicorn_server_config()
    if config is None or not hasattr(config, "http_protocol_class"):
        log.info("not served by uvicorn: the request-header deadline is the server's own")
        return False
    config.http_protocol_class = with_header_deadline(config.http_protocol_class, seconds)
    return True
