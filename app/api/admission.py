"""Pure-ASGI admission control: at most MAX_REQUESTS_IN_FLIGHT requests in a process at once.

A request arriving when the limit is reached is answered at once with 503 and ``Retry-After``
(problem+json) instead of waiting: under overload a process sheds load in microseconds rather
than building a backlog it then works through for clients that have given up (a first run of
bench/bench_session_load.py on a busy machine answered steps minutes late). Health probes are
always admitted. Counted per process on its event loop (no lock: the counter is touched only
there). uvicorn's ``--limit-concurrency`` is not used: it counts open keep-alive connections too,
so a client pool holding idle connections would get 503s from an idle server.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import problem_response

ALWAYS_ADMITTED = frozenset({"/healthz", "/readyz"})
RETRY_AFTER_SECONDS = 1


class AdmissionLimit:
    def __init__(self, app: ASGIApp, max_in_flight: int) -> None:
        self.app = app
        self.max_in_flight = max_in_flight  # 0: no limit
        self.in_flight = 0
        self.shed = 0  # requests refused so far (read by tests and benchmarks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not self.max_in_flight
            or scope.get("path") in ALWAYS_ADMITTED
        ):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            self.shed += 1
            response = problem_response(
                Request(scope),
                503,
                title="Service unavailable",
                type_slug="service-unavailable",
                detail=f"{self.in_flight} requests in progress (the limit is "
                f"{self.max_in_flight}); retry after {RETRY_AFTER_SECONDS} s",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
            await response(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
