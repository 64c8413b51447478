"""Pure-ASGI admission control: at most MAX_REQUESTS_IN_FLIGHT requests in a process at once.

A request arriving when the limit is reached is answered at once with 503 and ``Retry-After``
(problem+json) instead of waiting: under overload a process sheds load in microseconds rather
than building a backlog it then works through for clients that have given up (a first run of
bench/bench_session_load.py on a busy machine answered steps minutes late). Health probes are
always admitted. Counted per process on its event loop (no lock: the counter is touched only
there). uvicorn's ``--limit-concurrency`` is not used: it counts open keep-alive connections too,
so a client pool holding idle connections would get 503s from an idle server.

Held refusals (``HOLD_REFUSED_KEYS``, on by default): when a request is refused with a 429 that
holds its caller (its key's or project's rate bucket is short, it has its expensive-work places
taken, its key attempts are spent: ``TooManyRequests.holds_caller``), the process remembers the
presented credential (a BLAKE2b digest of the key's id after a cheap parse of ``Authorization``,
never the secret; :func:`credential_digest`) until that
refusal's ``Retry-After`` has passed, and answers the same credential's requests in that time with
the same 429 at once: no thread, no database, no Redis, no key verification. When the time has
passed, one request of the credential is checked for real and its other requests keep the
refusal until that one is answered (at most ``MAX_PROBE_SECONDS``). A client that
ignores ``Retry-After`` then costs the server microseconds per request instead of a full
authenticated request each, so it cannot starve other callers by the volume of its refusals
(bench/bench_fair_load.py). Only a credential that was itself refused is held; other keys, of
the same project too, are not affected until their own requests are refused. Per process.

Bodies first (issue 39): a request's body is read to its end under a deadline
(app/api/slow_requests.py) *before* the request takes an in-flight place or a key's place; a
client trickling its body holds a coroutine and its bytes, nothing other requests wait for, and
is answered 408 and disconnected when its deadline passes. ``/healthz`` reports how many places
are taken (``saturated`` when all are).

In-flight places per credential (``MAX_REQUESTS_IN_FLIGHT_PER_KEY``): at most that many requests
of one credential are in the app at once in a process; more wait for a place on the event loop
(no thread, no connection) up to ``KEY_WAIT_SECONDS`` and are then refused with 429
(``"limit": "key-in-flight"``). One key's burst (20 clients of a CI job sharing it) then shares
the process with every other key instead of taking all its threads and connections. Instance
admins are exempt once the process has seen their credential authenticated.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from dataclasses import dataclass
from typing import NamedTuple

from prometheus_client import Counter
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import EXEMPT_STATE, HELD_STATE, HeldRefusal, problem_response
from app.api.slow_requests import BodyBuffers, BodyDeadline, BodyRefused, read_body, send_refusal

ALWAYS_ADMITTED = frozenset({"/healthz", "/readyz"})
RETRY_AFTER_SECONDS = 1
KEY_WAIT_SECONDS = 1.0  # a request over its key's in-flight places waits this long, then 429
MAX_HELD = 10_000  # credentials remembered per process; expired ones are dropped first
# a request checked for real after a hold has passed keeps the others held this long at most
MAX_PROBE_SECONDS = 2.0
ANSWERED_HELD = Counter(
    "benchslice_held_refusals",
    "Requests answered with a held 429 (their credential was refused less than Retry-After ago)",
    ["limit"],
)
KEY_REFUSED = Counter(
    "benchslice_key_in_flight_refused",
    "Requests refused with 429: their key had MAX_REQUESTS_IN_FLIGHT_PER_KEY in progress",
)
SHED = Counter("benchslice_requests_shed", "Requests refused with 503: too many in flight")


def clock() -> float:
    """The hold's clock (a function of this module so tests can move it)."""
    return time.monotonic()


@dataclass
class _Gate:
    """The in-flight places of one credential and how many requests use them now."""

    slots: asyncio.Semaphore
    users: int = 0


class Credential(NamedTuple):
    """Digests of a request's credential: ``key`` names the API key (its id, the public prefix
    of ``bsk_<prefix>_<secret>``), ``token`` the exact secret presented."""

    key: bytes
    token: bytes


def _digest(tag: bytes, value: bytes) -> bytes:
    return hashlib.blake2b(tag + value, digest_size=16).digest()


def credential_digest(scope: Scope) -> Credential | None:
    """The request's credential after a cheap parse of ``Authorization`` (None without one).

    The scheme is case-insensitive and spaces around the token do not count, so ``bearer  K``,
    ``BEARER K `` and ``Bearer K`` are one credential; a well-formed key is named by its id (the
    prefix), so every secret of a key (the new and the old one during a rotation's grace) shares
    the key's places and refusals."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, rest = value.strip().partition(b" ")
            token = rest.strip() if scheme.lower() == b"bearer" else value.strip()
            parts = token.split(b"_", 2)
            if len(parts) == 3 and parts[0] == b"bsk" and parts[1]:
                key = _digest(b"key:", parts[1])
            else:
                key = _digest(b"raw:", token)
            return Credential(key, _digest(b"token:", token))
    return None


def _hold_slot(credential: Credential, refusal: HeldRefusal) -> bytes:
    """Where a refusal is held: a refusal of the key's own limits (its rate, its places) holds
    the key, whatever secret; a failed-attempt refusal holds only the secret that was presented
    (a wrong secret sent on a known prefix must not hold the key's right secret)."""
    return credential.token if refusal.limit == "auth-attempts" else credential.key


class AdmissionLimit:
    def __init__(
        self,
        app: ASGIApp,
        max_in_flight: int,
        hold_refused: bool = True,
        hold_delay: float = 0.0,
        per_key: int = 0,
        body_deadline: BodyDeadline | None = None,
    ) -> None:
        self.app = app
        self.body_deadline = body_deadline  # None: the body is read by the app, in its place
        self.bodies = BodyBuffers()
        self.max_in_flight = max_in_flight  # 0: no limit
        self.hold_refused = hold_refused
        self.hold_delay = hold_delay  # seconds a held refusal waits (at most) before it is sent
        self.per_key = per_key  # requests of one credential in the app at once (0: no limit)
        self.gates: dict[bytes, _Gate] = {}
        self.exempt: set[bytes] = set()  # credentials of instance admins (seen authenticated)
        self.in_flight = 0
        self.shed = 0  # requests refused so far (read by tests and benchmarks)
        # digest -> (held until, since when one request is being checked for real, refusal)
        self.held: dict[bytes, tuple[float, float | None, HeldRefusal]] = {}
        self.answered_held = 0  # requests answered from a held refusal (tests, benchmarks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in ALWAYS_ADMITTED:
            if "app" in scope:  # /healthz reports the places taken
                scope["app"].state.admission = self
            await self.app(scope, receive, send)
            return
        digest = credential_digest(scope) if self.hold_refused or self.per_key else None
        if self.body_deadline is None or self._holds(digest):  # answered without the body
            await self._dispatch(digest, scope, receive, send)
            return
        try:
            replay = await read_body(scope, receive, self.body_deadline, self.bodies)
        except BodyRefused as refused:
            await send_refusal(refused, scope, receive, send)
            return
        try:
            await self._dispatch(digest, scope, replay, send)
        finally:
            replay.release()  # type: ignore[attr-defined]  # refused before the app read it

    def _held(self, credential: Credential) -> tuple[bytes, tuple] | None:
        for slot in credential:
            found = self.held.get(slot)
            if found is not None:
                return slot, found
        return None

    def _holds(self, digest: Credential | None) -> bool:
        """Will this credential's request be answered from a held refusal?"""
        entry = self._held(digest) if digest is not None and self.hold_refused else None
        found = None if entry is None else entry[1]
        if found is None:
            return False
        until, probe_since, _ = found
        now = clock()
        return now < until or (probe_since is not None and now - probe_since < MAX_PROBE_SECONDS)

    async def _dispatch(
        self, digest: Credential | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if digest is None:
            await self._admit(scope, receive, send)
            return
        if not self.hold_refused:
            await self._admit_per_key(digest, scope, receive, send)
            return
        entry = self._held(digest)
        if entry is not None:
            slot, (until, probe_since, refusal) = entry
            now = clock()
            if now < until or (probe_since is not None and now - probe_since < MAX_PROBE_SECONDS):
                await self._repeat(refusal, until - now, scope, receive, send)
                return
            # Retry-After has passed: this request is checked for real, the credential's others
            # keep the refusal until it is answered (the clients of one key that all waited the
            # same Retry-After do not all arrive at once)
            self.held[slot] = (until, now, refusal)
        try:
            await self._admit_per_key(digest, scope, receive, send)
        finally:
            refusal = scope.get("state", {}).get(HELD_STATE)
            if isinstance(refusal, HeldRefusal):
                self._remember(_hold_slot(digest, refusal), refusal)
            elif entry is not None:
                self.held.pop(entry[0], None)

    async def _admit_per_key(
        self, credential: Credential, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """At most ``per_key`` requests of one credential in the app at once; more wait (on
        the event loop: no thread, no connection) up to ``KEY_WAIT_SECONDS``, then 429."""
        if not self.per_key or credential.token in self.exempt:
            await self._admit(scope, receive, send)
            return
        gate = self.gates.get(credential.key)
        if gate is None:
            gate = self.gates[credential.key] = _Gate(asyncio.Semaphore(self.per_key))
        gate.users += 1
        try:
            try:
                await asyncio.wait_for(gate.slots.acquire(), KEY_WAIT_SECONDS)
            except TimeoutError:
                KEY_REFUSED.inc()
                response = problem_response(
                    Request(scope),
                    429,
                    title="Too many requests",
                    type_slug="too-many-requests",
                    detail=f"{self.per_key} requests of this key are already in progress in "
                    f"this process (MAX_REQUESTS_IN_FLIGHT_PER_KEY) and none ended within "
                    f"{KEY_WAIT_SECONDS:g} s; retry after {RETRY_AFTER_SECONDS} s",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                    limit="key-in-flight",
                )
                await response(scope, receive, send)
                return
            try:
                await self._admit(scope, receive, send)
            finally:
                gate.slots.release()
                if scope.get("state", {}).get(EXEMPT_STATE):
                    self._note_exempt(credential.token)  # this secret only
        finally:
            gate.users -= 1
            if gate.users == 0:
                self.gates.pop(credential.key, None)

    def _note_exempt(self, digest: bytes) -> None:
        if len(self.exempt) >= MAX_HELD:
            self.exempt.clear()
        self.exempt.add(digest)

    def _remember(self, digest: bytes, refusal: HeldRefusal) -> None:
        now = clock()
        if len(self.held) >= MAX_HELD:
            self.held = {d: h for d, h in self.held.items() if h[0] > now}
            if len(self.held) >= MAX_HELD:  # all still held: forget the oldest half
                self.held = dict(list(self.held.items())[MAX_HELD // 2 :])
        self.held[digest] = (now + refusal.seconds, None, refusal)

    async def _repeat(
        self, held: HeldRefusal, left: float, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self.answered_held += 1
        if self.hold_delay > 0:
            # a client that ignores Retry-After waits for its refusal (its connection idles, no
            # thread or CPU is used): it cannot send more than a request per hold and client
            waited = min(self.hold_delay, left) if left > 0 else self.hold_delay  # <= 0: a probe
            await asyncio.sleep(waited)
            left -= waited
        ANSWERED_HELD.labels(held.limit or "").inc()
        retry = max(1, math.ceil(left))  # while a request is checked: 1 s
        detail = (held.detail + " " if held.detail else "") + (
            f"(repeated without recomputing: this credential was refused less than its "
            f"Retry-After ago; retry after {retry} s)"
        )
        response = problem_response(
            Request(scope),
            429,
            title=held.title,
            detail=detail,
            type_slug=held.type_slug,
            headers={**dict(held.headers), "Retry-After": str(retry)},
            limit=held.limit,
        )
        await response(scope, receive, send)

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.max_in_flight:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            self.shed += 1
            SHED.inc()
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

    def saturation(self) -> dict[str, int | bool]:
        """What ``/healthz`` reports: places taken, bodies being read, refusals so far."""
        return {
            "saturated": bool(self.max_in_flight) and self.in_flight >= self.max_in_flight,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "bodies_reading": self.bodies.reading,
            "bodies_timed_out": self.bodies.timed_out,
            "shed": self.shed,
        }
