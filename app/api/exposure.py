"""The exposure guard inside the app: no server that builds it serves everything openly.

``create_app`` checks at lifespan startup where the server listens, so the guard holds however
the app is started (``make run``, ``benchslice serve``, ``uvicorn app.main:create_app --factory
--host 0.0.0.0 [--workers N]``): with keys disabled a non-loopback address fails the startup
(uvicorn exits with status 3) unless ``ALLOW_UNAUTHENTICATED=true``.

Where the server listens: uvicorn's own server object, found on the event loop (its ``serve``
coroutine is awaiting this startup): the sockets it was handed (``--workers``, ``--fd``) or its
``--host`` (a ``--uds`` socket is local); and ``BENCHSLICE_BIND_HOST`` when set (``benchslice
serve`` sets it, for servers that cannot be inspected) — checked *besides* the server's own
address, never instead of it (issue 39: the variable used to override what the server said).
When neither tells (another ASGI server), a warning is logged and the server's own guard applies.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

from app.settings import Settings, exposure_refusal

log = logging.getLogger(__name__)

BIND_HOST_ENV = "BENCHSLICE_BIND_HOST"


class ExposureRefused(RuntimeError):
    """Raised at startup: the server listens on a public address with keys disabled."""


def _uvicorn_serve_frame() -> Any | None:
    """The frame of uvicorn's ``Server.serve``/``_serve`` coroutine on this loop, or None."""
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        return None
    for task in tasks:
        coro: Any = task.get_coro()
        while coro is not None:
            frame = getattr(coro, "cr_frame", None)
            owner = frame.f_locals.get("self") if frame is not None else None
            if type(owner).__module__ == "uvicorn.server" and hasattr(owner, "config"):
                return frame
            coro = getattr(coro, "cr_await", None)
    return None


def _socket_hosts(sockets: list[socket.socket]) -> list[str]:
    hosts = []
    for sock in sockets:
        if sock.family == getattr(socket, "AF_UNIX", None):
            hosts.append("localhost")
        else:
            hosts.append(str(sock.getsockname()[0]))
    return hosts


def uvicorn_server_config() -> Any | None:
    """The ``Config`` of the uvicorn server starting this app on this loop, or None."""
    frame = _uvicorn_serve_frame()
    return None if frame is None else frame.f_locals["self"].config


def _server_hosts() -> list[str] | None:
    frame = _uvicorn_serve_frame()
    if frame is None:
        return None
    sockets = frame.f_locals.get("sockets")
    if sockets:
        return _socket_hosts(sockets)
    config = frame.f_locals["self"].config
    if getattr(config, "uds", None):
        return ["localhost"]
    if getattr(config, "fd", None) is not None:
        with socket.socket(fileno=os.dup(config.fd)) as sock:
            return _socket_hosts([sock])
    return [str(config.host)]


def bind_hosts() -> list[str] | None:
    """The addresses this process serves on, or None when it cannot tell.

    The server's own sockets or ``--host`` when it can be inspected, and ``BENCHSLICE_BIND_HOST``
    besides: the variable adds an address to check, it never hides the real one (a stale or
    hand-set ``BENCHSLICE_BIND_HOST=127.0.0.1`` does not let ``--host 0.0.0.0`` through)."""
    hosts = _server_hosts()
    env = os.environ.get(BIND_HOST_ENV)
    if env:
        hosts = [*(hosts or []), env]
    return hosts


def check_exposure(settings: Settings) -> None:
    """Raise :class:`ExposureRefused` when this process serves a public address without keys."""
    hosts = bind_hosts()
    if hosts is None:
        if not settings.auth_enabled and not settings.allow_unauthenticated:
            log.warning(
                "cannot tell where this server listens; with API keys disabled it must listen "
                "on loopback only (or set %s)",
                BIND_HOST_ENV,
            )
        return
    for host in hosts:
        refusal = exposure_refusal(settings, host)
        if refusal is not None:
            log.error("benchslice: %s", refusal)
            raise ExposureRefused(refusal)
