"""Expensive computations in child processes (EXPENSIVE_WORKERS=process): the same results as
in-process, a large argument sent once per child, errors raised as they were, a killed or
timed-out child answered 503 with Retry-After and replaced, and cheap requests answered while a
child computes. Real child processes throughout."""

from __future__ import annotations

import contextvars
import dataclasses
import operator
import os
import signal
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.ranking.leaderboard import leaderboard as core_leaderboard
from app.core.reliability.exact import exact_agreement
from app.errors import ServiceUnavailable
from app.services.limits.children import HELD, Shared
from app.services.limits.expensive import ExpensivePool
from app.services.platform.caller import CALLER, Caller

WAIT = 60.0  # generous bounds for a loaded CI machine; nothing below is a timing assertion


def spin(seconds: float) -> int:
    """A deliberately slow pure function: Python bytecode (it would hold a GIL) for ``seconds``."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


@pytest.fixture
def pool() -> Iterator[ExpensivePool]:
    p = ExpensivePool(slots=2, queue=2, per_caller=4, wait_seconds=WAIT)
    token = CALLER.set(Caller(id="child-tests", units=("key:child-tests",)))
    try:
        yield p
    finally:
        CALLER.reset(token)
        p.shutdown_children()


def assert_same(a: object, b: object) -> None:
    """Equal field by field, arrays element by element (bit-identical floats)."""
    assert type(a) is type(b)
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)  # type: ignore[arg-type]
        for x, y in zip(a, b, strict=True):  # type: ignore[call-overload]
            assert_same(x, y)
    else:
        assert a == b


def _busy_pid(pool: ExpensivePool) -> int:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        pids = pool.child_pids(busy=True)
        if pids:
            return pids[0]
        time.sleep(0.02)
    raise AssertionError("no child started computing")


def test_results_equal_the_in_process_computation(pool: ExpensivePool) -> None:
    rng = np.random.default_rng(7)
    correct = (rng.random((40, 120)) < rng.uniform(0.3, 0.9, (40, 1))).astype(np.uint8)
    shared = Shared(("m", 1), correct)
    got = pool.call("an exact MDAD", exact_agreement, shared, 30, threshold=0.8)
    want = exact_agreement(correct, 30, threshold=0.8)
    assert_same(got, want)
    board = pool.call("a leaderboard", core_leaderboard, shared, alpha=0.05, correction="holm")
    expected = core_leaderboard(correct, alpha=0.05, correction="holm")
    assert_same(board.rows, expected.rows)
    assert_same(board.pairs, expected.pairs)  # computed from the pickled table, here
    assert board.method == expected.method
    assert pool.child_pids() and os.getpid() not in pool.child_pids()


def test_a_shared_argument_is_sent_once_per_child_until_dropped(pool: ExpensivePool) -> None:
    assert pool.call("x", np.sum, Shared("k", np.ones(3))) == 3
    # the same key: the child uses what it holds (equal keys mean equal values)
    assert pool.call("x", np.sum, Shared("k", np.zeros(3))) == 3
    for i in range(HELD):  # HELD newer keys push "k" out: it is sent again
        assert pool.call("x", np.sum, Shared(("other", i), np.ones(2))) == 2
    assert pool.call("x", np.sum, Shared("k", np.zeros(3))) == 0


def test_errors_are_raised_as_they_were(pool: ExpensivePool) -> None:
    with pytest.raises(ValueError, match="invalid literal"):
        pool.call("x", int, "not a number")
    assert pool.call("x", operator.add, 2, 3) == 5  # the same child goes on


def test_a_killed_child_gives_503_and_is_replaced(pool: ExpensivePool) -> None:
    outcome: list[BaseException | int] = []

    def slow() -> None:
        try:
            outcome.append(pool.call("a slow computation", time.sleep, 120))
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=contextvars.copy_context().run, args=(slow,))  # the caller
    t.start()
    pid = _busy_pid(pool)
    os.kill(pid, signal.SIGKILL)
    t.join(WAIT)
    assert not t.is_alive()
    (exc,) = outcome
    assert isinstance(exc, ServiceUnavailable)
    assert int(exc.headers["Retry-After"]) >= 1 and "replaced" in str(exc)
    assert pool.running == 0
    assert pool.call("x", operator.add, 1, 1) == 2  # a fresh child
    assert pid not in pool.child_pids()


def test_a_child_past_its_time_limit_is_killed(pool: ExpensivePool) -> None:
    pool.timeout = 1.0
    with pytest.raises(ServiceUnavailable, match="EXPENSIVE_TIMEOUT_SECONDS"):
        pool.call("a slow computation", time.sleep, 120)
    assert pool.child_pids() == []
    pool.timeout = WAIT
    assert pool.call("x", operator.add, 1, 2) == 3


def test_thread_workers_compute_the_same(pool: ExpensivePool) -> None:
    pool.workers = "thread"
    assert pool.call("x", np.sum, Shared("k", np.ones(4))) == 4
    assert pool.child_pids() == []


def test_no_caller_computes_in_this_process() -> None:
    pool = ExpensivePool()
    assert CALLER.get() is None
    assert pool.call("x", np.sum, Shared("k", np.ones(5))) == 5
    assert pool.child_pids() == []


def test_cheap_requests_are_answered_while_a_child_computes(
    pool: ExpensivePool, client: TestClient
) -> None:
    done = threading.Event()

    def compute() -> None:
        try:
            pool.call("a slow computation", spin, 30.0)
        except ServiceUnavailable:
            pass  # killed at the end of the test
        finally:
            done.set()

    t = threading.Thread(target=contextvars.copy_context().run, args=(compute,))
    t.start()
    pid = _busy_pid(pool)
    try:
        for _ in range(5):
            assert client.get("/v1/benchmarks").status_code == 200
            assert client.get("/healthz").status_code == 200
        assert not done.is_set()  # answered while the child was still computing
        assert pool.child_pids(busy=True) == [pid]
    finally:
        os.kill(pid, signal.SIGKILL)
        t.join(WAIT)


def test_a_kept_argument_cannot_be_changed_by_a_call(pool: ExpensivePool) -> None:
    with pytest.raises(ValueError, match="read-only"):
        pool.call("x", np.negative, Shared("k", np.ones(3)), out=Shared("k", np.ones(3)))
    assert pool.call("x", np.sum, Shared("k", np.ones(3))) == 3


def test_prestart_starts_the_slots_children_under_sched_idle_and_they_compute(
    pool: ExpensivePool,
) -> None:
    """A server starts its children at startup: ``slots`` idle children, at SCHED_IDLE and
    the pool's nice, that the next computation uses (no new process)."""
    starting = pool.prestart()
    assert starting is not None
    starting.join(WAIT)
    idle = pool.child_pids(busy=False)
    assert len(idle) == pool.slots and pool.child_pids(busy=True) == []
    for pid in idle:  # each child sets its own priority once it runs: wait for it
        deadline = time.monotonic() + WAIT
        while os.sched_getscheduler(pid) != os.SCHED_IDLE and time.monotonic() < deadline:
            time.sleep(0.02)
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        assert os.getpriority(os.PRIO_PROCESS, pid) == pool.nice
    assert pool.call("a sum", operator.add, 2, 3) == 5
    assert sorted(pool.child_pids()) == sorted(idle)  # computed in a prestarted child
    pool.prestart().join(WAIT)  # already full: starts none
    assert sorted(pool.child_pids()) == sorted(idle)
    threads = ExpensivePool(slots=1)
    threads.configure(1, 0, 1, WAIT, workers="thread")
    assert threads.prestart() is None and threads.child_pids() == []
