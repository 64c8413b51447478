"""The browser view's security: headers on every /ui response, the read-key cookie, CSRF tokens.

* Headers: a strict Content-Security-Policy (no inline script or style anywhere: the figures
  are inline SVG with presentation attributes, see :mod:`app.web.svg`), ``nosniff``,
  ``Referrer-Policy: same-origin``; pages are ``Cache-Control: no-store``;
  ``Server-Timing: app;dur=<ms>`` is the time until the response starts (bench/bench_pages.py).
* With ``auth_enabled`` a page needs a browser session. ``/ui/login`` checks a key (read scope
  suffices) once and opens a server-side session (:mod:`app.services.access.web_sessions`):
  the HttpOnly, SameSite=Strict cookie scoped to ``/ui`` (Secure over HTTPS) holds a random
  session id, never the key; every page looks the session up (logout, expiry and revoking the
  key apply at once, in every process), and the session only reads. The key is never written
  into HTML, cookies or logs.
* CSRF: signed double-submit. The form carries ``nonce.signature`` and so does an HttpOnly
  cookie; a POST is accepted only when both are equal and the signature (HMAC-SHA256) is valid.
  The secret is shared by every API process (``WEB_SECRET``, else one stored in the database),
  so a form served by one process is accepted by another.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from app.services.access import web_sessions
from app.services.access.keys import ANONYMOUS, Principal, require
from app.services.limits.ratelimit import RATES, quota_units
from app.services.platform.caller import CALLER, Caller

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

UI_PREFIX = "/ui"
SESSION_COOKIE = "benchslice_session"
CSRF_COOKIE = "benchslice_csrf"
CSP = (
    "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; "
    "object-src 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


class SecurityHeaders:
    """Pure ASGI middleware: the headers above on every response under ``/ui``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == UI_PREFIX or path.startswith(UI_PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        static = path.startswith(UI_PREFIX + "/static/")
        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = 1000 * (time.perf_counter() - started)
                # the API layer's Server-Timing is replaced by the page's (its whole time)
                ours = {h for h, _ in HEADERS} | {b"server-timing"}
                ours |= set() if static else {b"cache-control"}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in ours]
                headers.extend(HEADERS)
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                headers.append((b"server-timing", f"app;dur={took:.1f}".encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def page_principal(request: Request, session: Session) -> Principal:
    """The caller of a page: anonymous when auth is off, else the session's reader;
    ``Unauthorized`` (401) without a live session."""
    if not request.app.state.settings.auth_enabled:
        return ANONYMOUS
    principal = require(
        web_sessions.session_principal(session, request.cookies.get(SESSION_COOKIE)), "read"
    )
    # the page's caller for the rate limits and the expensive-work pool (a page runs in one
    # thread and context: what is set here holds for the rest of the page)
    caller = Caller(principal.id, tuple(quota_units(principal)), exempt=False)
    CALLER.set(caller)
    RATES.charge(caller, 1.0, "a page")
    return principal


def set_session_cookie(request: Request, response: Response, session_id: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=int(request.app.state.settings.web_session_hours * 3600),
        path=UI_PREFIX,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def clear_session_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path=UI_PREFIX, httponly=True, samesite="strict", secure=_secure(request)
    )


def _secret(request: Request) -> bytes:
    """The CSRF signing secret every process shares: ``WEB_SECRET``, else the database's."""
    state = request.app.state
    if getattr(state, "web_secret", None) is None:
        configured = state.settings.web_secret
        if configured:
            state.web_secret = configured.encode()
        else:
            with state.sessionmaker() as session:
                state.web_secret = web_sessions.shared_secret(session)
                session.commit()
    return state.web_secret


def _sign(secret: bytes, nonce: str) -> str:
    return hmac.new(secret, nonce.encode(), hashlib.sha256).hexdigest()


def _valid(secret: bytes, token: str | None) -> bool:
    if not token or token.count(".") != 1:
        return False
    nonce, sig = token.split(".")
    return hmac.compare_digest(sig, _sign(secret, nonce))


def csrf_token(request: Request) -> str:
    """The request's CSRF token: the cookie's when it is validly signed, else a new one (the
    caller sets it with :func:`set_csrf_cookie`)."""
    current = request.cookies.get(CSRF_COOKIE)
    if _valid(_secret(request), current):
        return current  # type: ignore[return-value]
    nonce = secrets.token_urlsafe(18)
    return f"{nonce}.{_sign(_secret(request), nonce)}"


def set_csrf_cookie(request: Request, response: Response, token: str) -> None:
    if request.cookies.get(CSRF_COOKIE) != token:
        response.set_cookie(
            CSRF_COOKIE,
            token,
            path=UI_PREFIX,
            httponly=True,
            samesite="strict",
            secure=_secure(request),
        )


def csrf_ok(request: Request, submitted: str | None) -> bool:
    """A POST's form token equals its cookie and is signed by this server."""
    cookie = request.cookies.get(CSRF_COOKIE)
    if not submitted or not cookie or not hmac.compare_digest(submitted, cookie):
        return False
    return _valid(_secret(request), submitted)


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a path inside the view, never another origin."""
    if (
        target
        and target.startswith(UI_PREFIX + "/")
        and not target.startswith("//")
        and "\\" not in target
        and all(ord(c) > 31 for c in target)
    ):
        return target
    return UI_PREFIX + "/"
