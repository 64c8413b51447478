"""Cost-aware admission: expensive synchronous work runs in a small bounded pool of its own.

A cache miss that costs CPU seconds or tens of megabytes (a benchmark-wide exact MDAD at a new
size, exact agreement curves, a leaderboard or its pairs at a new alpha, a first page view)
computes inside :meth:`ExpensivePool.slot`; a cached answer and every cheap request never touch
it, so they never queue behind expensive work. Per process at most ``slots`` computations run
and ``queue`` more wait (each at most ``wait_seconds``); one caller holds at most
``per_caller`` of the running and waiting places, and each computation takes
``EXPENSIVE_COST`` tokens from the caller's rate-limit buckets. Past a caller's share: 429
(their own excess); past the pool's capacity: 503; both at once with ``Retry-After``, never a
timeout. Admins are exempt from the per-caller limits, not from the pool.

:meth:`ExpensivePool.call` computes a module-level function of plain arguments in a child
process of this API process (:mod:`app.services.limits.children`; ``EXPENSIVE_WORKERS=process``,
the default), so the computation holds neither a core at normal priority nor this process's GIL:
cheap requests keep being served while it runs. A child that dies or runs past
``EXPENSIVE_TIMEOUT_SECONDS`` is killed and replaced; the request gets 503 with ``Retry-After``.
``EXPENSIVE_WORKERS=thread`` computes in the pool's own threads instead. :meth:`ExpensivePool.run`
(a closure, e.g. one that needs the request's database session) always uses those threads. The
threads and the children run at a lower CPU priority (``nice`` ``EXPENSIVE_NICE``, Linux), the
children also under ``SCHED_IDLE`` (``EXPENSIVE_SCHED_IDLE``, Linux): they use only CPU no
request wants. A server starts the children at startup (:meth:`ExpensivePool.prestart`).

Work outside a request (worker tasks, scripts) has no caller and is not limited. A slot taken
inside another (nested computations on one thread) passes straight through.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge

from app.errors import ServiceUnavailable, TooManyRequests
from app.services.limits.children import Child, ChildFailed, unwrap
from app.services.limits.ratelimit import RATES
from app.services.platform.caller import CALLER

REFUSED = Counter(
    "benchslice_expensive_refused", "Expensive computations refused at once", ["reason"]
)
RUNNING = Gauge("benchslice_expensive_running", "Expensive computations running now")
COMPUTED = Counter("benchslice_expensive_computed", "Expensive computations run", ["what"])


T = TypeVar("T")


def _lower_priority(nice: int) -> None:
    """Executor thread initializer: this thread at ``nice`` (Linux: per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (AttributeError, OSError):  # not Linux, or not allowed: run at normal priority
        pass


class ExpensivePool:
    """At most ``slots`` running and ``queue`` waiting; ``per_caller`` places per caller."""

    def __init__(
        self, slots: int = 1, queue: int = 4, per_caller: int = 2, wait_seconds: float = 30.0
    ) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._idle: list[Child] = []  # children not computing now (at most ``slots`` exist)
        self._busy: list[Child] = []
        self.nice = 10
        self.idle = True
        self.workers = "process"
        self.timeout = 300.0
        self.configure(slots, queue, per_caller, wait_seconds)
        self._free = threading.Condition(self._lock)
        self._running = 0
        self._waiting = 0
        self._places: Tally[str] = Tally()
        self._inside = threading.local()

    def configure(
        self,
        slots: int,
        queue: int,
        per_caller: int,
        wait_seconds: float,
        nice: int = 10,
        workers: str = "process",
        timeout: float = 300.0,
        idle: bool = True,
    ) -> None:
        if self._executor is not None and (slots != self.slots or nice != self.nice):
            self._executor.shutdown(wait=False)
            self._executor = None
        if int(nice) != self.nice or bool(idle) != self.idle:
            self.shutdown_children()
        self.nice = int(nice)
        self.idle = bool(idle)
        self.workers = workers
        self.timeout = float(timeout)
        self.slots = max(1, int(slots))
        self.queue = max(0, int(queue))
        self.per_caller = max(1, int(per_caller))
        self.wait_seconds = float(wait_seconds)

    @property
    def running(self) -> int:
        return self._running

    def _admit(self, caller_id: str | None) -> None:
        """Take a place (under the lock) or raise the refusal."""
        if caller_id is not None and self._places[caller_id] >= self.per_caller:
            REFUSED.labels("per_caller").inc()
            raise TooManyRequests(
                f"{self._places[caller_id]} expensive computation(s) of this key are already "
                f"running or waiting in this process (the limit is {self.per_caller}: "
                "EXPENSIVE_PER_KEY); retry when one has finished",
                limit="expensive-per-key",
                retry_after=1,
                holds_caller=True,
            )
        if self._running >= self.slots and self._waiting >= self.queue:
            REFUSED.labels("busy").inc()
            raise ServiceUnavailable(
                f"the server is computing {self._running} expensive request(s) with "
                f"{self._waiting} waiting (EXPENSIVE_SLOTS={self.slots}, "
                f"EXPENSIVE_QUEUE={self.queue}); cached answers are unaffected",
                retry_after=1,
            )
        if caller_id is not None:
            self._places[caller_id] += 1

    def _release_place(self, caller_id: str | None) -> None:
        if caller_id is not None:
            self._places[caller_id] -= 1
            if self._places[caller_id] <= 0:
                del self._places[caller_id]

    @contextmanager
    def slot(self, what: str) -> Iterator[None]:
        """Hold a slot while computing ``what`` (named in refusals and on /metrics)."""
        caller = CALLER.get()
        if caller is None or getattr(self._inside, "held", False):
            yield
            return
        caller_id = None if caller.exempt else caller.id
        RATES.charge(caller, RATES.expensive_cost, f"computing {what}")
        with self._lock:
            self._admit(caller_id)
            deadline = time.monotonic() + self.wait_seconds
            self._waiting += 1
            try:
                while self._running >= self.slots:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._release_place(caller_id)
                        REFUSED.labels("timeout").inc()
                        raise ServiceUnavailable(
                            f"waited {self.wait_seconds:g} s for an expensive-work slot "
                            "(EXPENSIVE_WAIT_SECONDS)",
                            retry_after=1,
                        )
                    self._free.wait(left)
            finally:
                self._waiting -= 1
            self._running += 1
            RUNNING.set(self._running)
        self._inside.held = True
        try:
            COMPUTED.labels(what).inc()
            yield
        finally:
            self._inside.held = False
            with self._lock:
                self._running -= 1
                self._release_place(caller_id)
                RUNNING.set(self._running)
                self._free.notify()

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.slots,
                thread_name_prefix="expensive",
                initializer=_lower_priority,
                initargs=(self.nice,),
            )
        return self._executor

    def run(self, what: str, compute: Callable[[], T]) -> T:
        """``compute()`` under a slot, in the pool's lower-priority threads (in the calling
        thread when there is no caller, or inside another slot)."""
        caller = CALLER.get()
        if caller is None or getattr(self._inside, "held", False):
            return compute()
        with self.slot(what):
            return self._pool().submit(compute).result()

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` under a slot, in a child process (``fn`` module-level,
        arguments picklable; wrap a large repeated argument in
        :class:`~app.services.limits.children.Shared`). In this thread when there is no caller
        or inside another slot; in the pool's threads with ``EXPENSIVE_WORKERS=thread``.
        A child that dies or times out: 503 with ``Retry-After`` (the child is replaced)."""
        caller = CALLER.get()
        if caller is None or getattr(self._inside, "held", False):
            plain, named = unwrap(args, kwargs)
            return fn(*plain, **named)
        with self.slot(what):
            if self.workers == "thread":
                plain, named = unwrap(args, kwargs)
                return self._pool().submit(fn, *plain, **named).result()
            child = self._take_child()
            failed = False
            try:
                return child.call(fn, args, kwargs, self.timeout)
            except ChildFailed as exc:
                REFUSED.labels(f"child-{exc.reason}").inc()
                failed = True
                raise ServiceUnavailable(
                    f"computing {what} failed: {exc} (EXPENSIVE_TIMEOUT_SECONDS="
                    f"{self.timeout:g}); the computing process was replaced, retry",
                    retry_after=2,
                ) from exc
            finally:
                with self._lock:
                    self._busy.remove(child)
                    if not failed:
                        self._idle.append(child)

    def _take_child(self) -> Child:
        """An idle live child, or a new one (a slot is held: at most ``slots`` are busy)."""
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.alive():
                    self._busy.append(child)
                    return child
                child.kill()
        child = Child(self.nice, self.idle)
        with self._lock:
            self._busy.append(child)
        return child

    def prestart(self) -> threading.Thread | None:
        """With ``EXPENSIVE_WORKERS=process``: start the ``slots`` children now, in the
        background (a server calls it at startup), so the first expensive requests do not pay
        for starting the forkserver and a child that imports numpy and scipy (~1 s of CPU,
        which delayed every request around them). Returns the starting thread (None: threads)."""
        if self.workers != "process":
            return None

        def start() -> None:
            with self._lock:
                missing = self.slots - len(self._idle) - len(self._busy)
            for _ in range(max(0, missing)):
                child = Child(self.nice, self.idle)
                with self._lock:
                    self._idle.append(child)

        thread = threading.Thread(target=start, name="expensive-prestart", daemon=True)
        thread.start()
        return thread

    def child_pids(self, busy: bool | None = None) -> list[int]:
        """Process ids of the children (``busy``: only those computing now, or only the idle
        ones): tests and the RSS figures of the bench."""
        with self._lock:
            chosen = {None: self._busy + self._idle, True: self._busy, False: self._idle}[busy]
            return [c.pid for c in chosen if c.pid is not None]

    def shutdown_children(self) -> None:
        """End the idle children (a busy one ends when its computation returns)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()


EXPENSIVE = ExpensivePool()
