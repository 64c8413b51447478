"""Pure-ASGI guard: refuse a request whose declared Content-Length exceeds MAX_BODY_BYTES (413).

Bodies without a Content-Length (chunked) are bounded where they are read (app/api/uploads.py).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import problem_response


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = dict(scope.get("headers") or []).get(b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
                response = problem_response(
                    Request(scope),
                    413,
                    title="Payload too large",
                    type_slug="payload-too-large",
                    detail=f"request body exceeds the limit of {self.max_bytes} bytes",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
