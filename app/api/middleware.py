"""Pure-ASGI middleware: the body guard and the headers every response carries.

:class:`BodySizeLimit` refuses a request whose declared Content-Length exceeds MAX_BODY_BYTES (413).

JSON bodies are read here whatever their framing (a chunked body has no Content-Length):
over MAX_BODY_BYTES is a 413, nested deeper than MAX_JSON_DEPTH a 422; the checked body is then
replayed to the app. Other bodies are bounded where they are read (app/api/uploads.py).
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.docs import DOCS_CSP, is_docs_path
from app.api.errors import problem_response

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN = np.array([ord("["), ord("{")], dtype=np.uint8)
_CLOSE = np.array([ord("]"), ord("}")], dtype=np.uint8)


def json_depth(body: bytes) -> int:
    """Deepest array/object nesting of a JSON text (brackets inside strings do not count)."""
    chars = np.frombuffer(_JSON_STRING.sub(b"", body), dtype=np.uint8)
    opens, closes = np.isin(chars, _OPEN), np.isin(chars, _CLOSE)
    steps = opens[opens | closes].astype(np.int8) * 2 - 1
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def _is_json(headers: dict[bytes, bytes]) -> bool:
    ctype = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
    return ctype == b"application/json" or ctype.endswith(b"+json")


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, max_json_depth: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_json_depth = max_json_depth

    def _too_large(self, scope: Scope) -> Any:
        return problem_response(
            Request(scope),
            413,
            title="Payload too large",
            type_slug="payload-too-large",
            detail=f"request body exceeds the limit of {self.max_bytes} bytes",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(scope)(scope, receive, send)
            return
        if self.max_json_depth is None or not _is_json(headers):
            await self.app(scope, receive, send)
            return

        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope)(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        depth = json_depth(body)
        if depth > self.max_json_depth:
            response = problem_response(
                Request(scope),
                422,
                title="Invalid input",
                type_slug="invalid-input",
                detail=f"JSON nested {depth} levels deep; the limit is {self.max_json_depth}",
                errors=[{"loc": ["body"], "message": f"nesting deeper than {self.max_json_depth}"}],
            )
            await response(scope, receive, send)
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class ResponseHeaders:
    """``X-Content-Type-Options: nosniff`` on every response; the rate-limit fields of a
    limited request (``RateLimit``, ``RateLimit-Policy``); on the API docs a CSP with
    ``frame-ancestors 'none'`` and ``X-Frame-Options: DENY`` (they can not be framed);
    ``Server-Timing: app;dur=<ms>``, the time from the request reaching the app until its
    response starts (a client compares it with what it waited: the rest was queueing before
    the app, or the network)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = is_docs_path(scope.get("path", ""))
        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["x-content-type-options"] = "nosniff"
                if "server-timing" not in headers:  # the pages set their own
                    took = 1000 * (time.perf_counter() - started)
                    headers["server-timing"] = f"app;dur={took:.1f}"
                for name, value in (scope.get("state") or {}).get("rate_limit", {}).items():
                    if name not in headers:
                        headers[name] = value
                if docs:
                    headers["content-security-policy"] = DOCS_CSP
                    headers["x-frame-options"] = "DENY"
            await send(message)

        await self.app(scope, receive, send_with_headers)
