"""Token buckets (in-process and on a real Redis), the expensive-work pool, job quotas."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis

from app.errors import ServiceUnavailable, TooManyRequests
from app.services.limits.expensive import ExpensivePool
from app.services.limits.ratelimit import (
    RATES,
    Limiter,
    MemoryBuckets,
    Policy,
    RedisBuckets,
    headers,
    quota_units,
    refusal,
    unit_labels,
)
from app.services.platform.caller import CALLER, Caller
from tests.conftest import TEST_KEY_PREFIX, TEST_REDIS_URL


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_memory_bucket_burst_refill_and_retry_after() -> None:
    clock = Clock()
    buckets = MemoryBuckets(clock=clock)
    policy = Policy(rate=10, burst=20)
    taken = [buckets.take("key:a", 1, policy).allowed for _ in range(25)]
    assert taken == [True] * 20 + [False] * 5
    refused = buckets.take("key:a", 5, policy)
    assert not refused.allowed and refused.retry_after == pytest.approx(0.5)
    assert buckets.take("key:b", 1, policy).allowed  # buckets are per unit
    clock.now += 0.5
    ok = buckets.take("key:a", 5, policy)
    assert ok.allowed and ok.remaining == pytest.approx(0.0)
    clock.now += 100
    full = buckets.take("key:a", 0, policy)
    assert full.remaining == pytest.approx(20.0)  # never above the burst


def test_redis_buckets_are_shared_and_expire() -> None:
    client = redis.Redis.from_url(TEST_REDIS_URL)
    prefix = f"{TEST_KEY_PREFIX}{uuid.uuid4().hex[:6]}:"
    one, two = RedisBuckets(client, prefix), RedisBuckets(client, prefix)  # two "processes"
    policy = Policy(rate=1, burst=10)
    allowed = [(one if i % 2 else two).take("key:x", 1, policy).allowed for i in range(14)]
    assert allowed == [True] * 10 + [False] * 4
    refused = one.take("key:x", 3, policy)
    assert not refused.allowed and 2.0 < refused.retry_after <= 3.0
    ttl = client.pttl(f"{prefix}benchslice:rate:key:x")
    assert 0 < ttl <= 11_000  # gone once it would be full again
    client.close()


def test_take_each_is_take_in_order_stopping_at_the_first_refusal_in_both_stores() -> None:
    """One round trip (Redis: one script) takes from every unit as consecutive takes would:
    the units before a refusal keep what they gave, the ones after are not touched."""
    client = redis.Redis.from_url(TEST_REDIS_URL)
    prefix = f"{TEST_KEY_PREFIX}{uuid.uuid4().hex[:6]}:"
    wide, narrow, other = Policy(rate=0.001, burst=10), Policy(rate=0.001, burst=3), Policy(1, 5)
    units = [("key:k", wide), ("project:p", narrow), ("project:q", other)]
    for buckets in (MemoryBuckets(), RedisBuckets(client, prefix)):
        seen = [buckets.take_each(units, 1) for _ in range(5)]
        assert [len(d) for d in seen] == [3, 3, 3, 2, 2]  # project:p short from the 4th
        assert [d[-1].allowed for d in seen] == [True, True, True, False, False]
        assert seen[3][0].remaining == pytest.approx(6, abs=0.01)  # key:k gave its token
        assert buckets.take("project:q", 0, other).remaining == pytest.approx(2, abs=0.01)
        assert seen[4][1].unit == "project:p" and seen[4][1].retry_after > 100
    dead = RedisBuckets(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2), "x:")
    assert all(d.allowed for d in dead.take_each(units, 1))  # fails open, as take
    client.close()


def test_redis_outage_fails_open() -> None:
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    decision = RedisBuckets(dead, "x:").take("key:y", 1, Policy(1, 1))
    assert decision.allowed


def test_limiter_refuses_on_the_first_short_unit_and_headers() -> None:
    limiter = Limiter(MemoryBuckets(), Policy(rate=1, burst=10), Policy(rate=1, burst=3))
    assert limiter.take(["key:a", "project:p"], 2).allowed
    assert limiter.take(["key:b", "project:p"], 1).allowed
    refused = limiter.take(["key:c", "project:p"], 1)  # the project is empty, key c is not
    assert not refused.allowed and refused.unit == "project:p"
    fields = headers(refused)  # named by the bucket that refused, with its own policy
    assert fields["RateLimit-Policy"] == '"project";q=3;w=3'
    assert fields["RateLimit"].startswith('"project";r=0;t=')
    error = refusal(refused, 1, "a request", "'team-a'")
    assert error.limit == "project-rate"
    assert "project 'team-a'" in error.detail and "PROJECT_RATE_LIMIT_BURST" in error.detail
    key_only = limiter.take(["key:a"], 9)  # key a: 10 - 2 left 8
    assert not key_only.allowed and refusal(key_only, 9, "x").limit == "rate"
    # no project policy: project units are not limited
    open_projects = Limiter(MemoryBuckets(), Policy(rate=1, burst=3))
    assert all(open_projects.take([f"key:{i}", "project:p"], 3).allowed for i in range(5))


def test_quota_units_are_the_key_then_each_of_its_projects() -> None:
    from app.services.access.keys import Principal

    p1, p2 = uuid.UUID(int=2), uuid.UUID(int=1)
    principal = Principal(
        id="k1", name="k", roles={p1: "read", p2: "write"}, project_names={p1: "b", p2: "a"}
    )
    assert quota_units(principal) == ["key:k1", f"project:{p2}", f"project:{p1}"]
    assert dict(unit_labels(principal))[f"project:{p1}"] == "'b'"
    caller = Caller("k1", tuple(quota_units(principal)))
    assert caller.projects == (str(p2), str(p1))


@pytest.fixture
def limited() -> None:
    RATES.configure(Limiter(MemoryBuckets(), Policy(rate=0.001, burst=150)), expensive_cost=60)
    try:
        yield
    finally:
        RATES.configure(None, 0)


def test_expensive_pool_per_caller_share_busy_and_cost(limited: None) -> None:
    pool = ExpensivePool(slots=1, queue=1, per_caller=1, wait_seconds=5)
    inside, release = threading.Event(), threading.Event()
    errors: list[Exception] = []

    def hold(caller: Caller) -> None:
        CALLER.set(caller)
        try:
            with pool.slot("a test"):
                inside.set()
                release.wait(10)
        except Exception as exc:
            errors.append(exc)

    alice = Caller("alice", ("key:alice",))
    first = threading.Thread(target=hold, args=(alice,))
    first.start()
    assert inside.wait(5)
    token = CALLER.set(alice)
    with pytest.raises(TooManyRequests) as share:  # alice already holds her one place
        with pool.slot("a test"):
            pass
    assert share.value.limit == "expensive-per-key" and "EXPENSIVE_PER_KEY" in share.value.detail
    CALLER.reset(token)
    waiter = threading.Thread(target=hold, args=(Caller("bob", ("key:bob",)),))
    waiter.start()  # bob waits in the queue's one place
    deadline = time.monotonic() + 5
    while pool._waiting < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    token = CALLER.set(Caller("carol", ("key:carol",)))
    with pytest.raises(ServiceUnavailable):  # one running, one waiting: full
        with pool.slot("a test"):
            pass
    CALLER.reset(token)
    release.set()
    first.join(10)
    waiter.join(10)
    assert not errors
    # alice paid 60 + 60 of 150 tokens (a refused attempt costs too): the next is refused by
    # her bucket
    token = CALLER.set(alice)
    with pytest.raises(TooManyRequests) as rate:
        with pool.slot("a test"):
            pass
    assert rate.value.limit == "rate" and "RATE_LIMIT_BURST" in rate.value.detail
    CALLER.reset(token)


def test_expensive_pool_admin_exempt_and_no_caller(limited: None) -> None:
    pool = ExpensivePool(slots=1, queue=0, per_caller=1)
    admin = Caller("root", ("key:root",), exempt=True)
    token = CALLER.set(admin)
    for _ in range(5):  # no bucket charge, no per-caller share
        with pool.slot("a test"):
            pass
    CALLER.reset(token)
    with pool.slot("outside a request"):  # no caller: not limited at all
        with pool.slot("nested"):
            pass


def test_expensive_work_runs_in_its_own_lower_priority_threads() -> None:
    import os

    pool = ExpensivePool(slots=1, queue=0, per_caller=1)

    def where() -> tuple[int, int]:
        tid = threading.get_native_id()
        return tid, os.getpriority(os.PRIO_PROCESS, tid)

    here = threading.get_native_id()
    assert pool.run("inline", where)[0] == here  # no caller: computed in this thread
    token = CALLER.set(Caller("dave", ("key:dave",)))
    try:
        tid, nice = pool.run("pooled", where)
    finally:
        CALLER.reset(token)
    assert tid != here and nice == 10
