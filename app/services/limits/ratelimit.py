"""Token buckets: how much each caller may ask for, per second and in a burst.

A bucket holds up to ``burst`` tokens and refills at ``rate`` tokens per second; a request of
cost ``c`` takes ``c`` tokens or is refused with the wait until it could (``Retry-After``).
Two stores with one contract:

* :class:`MemoryBuckets` (the embedded default: one process, a lock around a dict, idle
  buckets dropped once full again), and
* :class:`RedisBuckets` (several API processes: one atomic Lua script per request, clock from
  the Redis server so every process agrees; keys expire once the bucket would be full).

A bucket is named by its unit: ``key:<id>`` (each key's own) and ``project:<id>`` (one per
project, drawn on by every key with a role on it: a project's total across its keys, with a
policy of its own). :class:`Limiter` takes from every unit the caller belongs to and refuses on
the first that is short, naming it (``"limit": "rate"`` for the key, ``"project-rate"`` for a
project).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from redis.exceptions import RedisError

from app.errors import TooManyRequests
from app.services.platform.caller import Caller

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Policy:
    """``rate`` tokens per second, at most ``burst`` stored."""

    rate: float
    burst: float

    @property
    def window(self) -> int:
        """Seconds to refill an empty bucket (the ``w`` of the RateLimit-Policy field)."""
        return max(1, math.ceil(self.burst / self.rate))


@dataclass(frozen=True)
class Decision:
    """Whether a request may go ahead, what is left, and how long until it could."""

    allowed: bool
    remaining: float
    retry_after: float  # seconds until ``cost`` tokens are there (0 when allowed)
    reset: float  # seconds until the bucket is full again
    unit: str = ""
    policy: Policy | None = None


class Buckets(Protocol):
    def take(self, unit: str, cost: float, policy: Policy) -> Decision: ...

    def take_each(self, units: Sequence[tuple[str, Policy]], cost: float) -> list[Decision]:
        """:meth:`take` from each unit in order, stopping after the first refusal (the units
        before it keep what they gave): one round trip to the store."""
        ...


def _decide(tokens: float, cost: float, policy: Policy, unit: str) -> tuple[Decision, float]:
    if tokens >= cost:
        left = tokens - cost
        return Decision(True, left, 0.0, (policy.burst - left) / policy.rate, unit, policy), left
    wait = (cost - tokens) / policy.rate
    return Decision(
        False, tokens, wait, (policy.burst - tokens) / policy.rate, unit, policy
    ), tokens


MAX_MEMORY_BUCKETS = 10_000


class MemoryBuckets:
    """In-process buckets (the embedded default; each API process counts on its own)."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._state: dict[str, tuple[float, float]] = {}  # unit -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, unit: str, cost: float, policy: Policy) -> Decision:
        now = self._clock()
        with self._lock:
            tokens, at = self._state.get(unit, (policy.burst, now))
            tokens = min(policy.burst, tokens + (now - at) * policy.rate)
            decision, left = _decide(tokens, cost, policy, unit)
            self._state[unit] = (left, now)
            if len(self._state) > MAX_MEMORY_BUCKETS:  # refilled buckets equal new ones
                for u in [
                    u
                    for u, (t, a) in self._state.items()
                    if t + (now - a) * policy.rate >= policy.burst
                ]:
                    del self._state[u]
            return decision

    def take_each(self, units: Sequence[tuple[str, Policy]], cost: float) -> list[Decision]:
        out = []
        for unit, policy in units:
            out.append(self.take(unit, cost, policy))
            if not out[-1].allowed:
                break
        return out


# KEYS: the buckets, in order. ARGV: cost, then rate and burst of each bucket. Returns
# {allowed, tokens, wait} per bucket taken from, stopping after the first refusal.
TAKE_EACH_SCRIPT = """
local cost = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {}
for i = 1, #KEYS do
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tokens = tonumber(state[1])
  local at = tonumber(state[2])
  if tokens == nil then
    tokens = burst
    at = now
  end
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
  local allowed = 0
  local wait = 0
  if tokens >= cost then
    tokens = tokens - cost
    allowed = 1
  else
    wait = (cost - tokens) / rate
  end
  redis.call('HSET', KEYS[i], 'tokens', tostring(tokens), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[i], math.ceil((burst - tokens) / rate * 1000) + 1000)
  out[#out + 1] = allowed
  out[#out + 1] = tostring(tokens)
  out[#out + 1] = tostring(wait)
  if allowed == 0 then
    return out
  end
end
return out
"""


class RedisBuckets:
    """Buckets shared by every process through Redis (one atomic script per request)."""

    def __init__(self, client, prefix: str = "") -> None:
        self._client = client
        self._prefix = prefix + "benchslice:rate:"
        self._each = client.register_script(TAKE_EACH_SCRIPT)

    def take(self, unit: str, cost: float, policy: Policy) -> Decision:
        return self.take_each([(unit, policy)], cost)[0]

    def take_each(self, units: Sequence[tuple[str, Policy]], cost: float) -> list[Decision]:
        args: list[float] = [cost]
        for _, policy in units:
            args += [policy.rate, policy.burst]
        try:
            flat = self._each(keys=[self._prefix + u for u, _ in units], args=args)
        except RedisError as exc:  # fail open: a limiter outage must not take the API down
            log.warning("rate limit store unavailable, request allowed: %s", exc)
            return [Decision(True, p.burst, 0.0, 0.0, u, p) for u, p in units]
        out = []
        for (unit, policy), i in zip(units, range(0, len(flat), 3), strict=False):
            allowed, tokens, wait = flat[i : i + 3]
            tokens = float(tokens)
            reset = (policy.burst - tokens) / policy.rate
            out.append(Decision(bool(int(allowed)), tokens, float(wait), reset, unit, policy))
        return out


PROJECT = "project"


def unit_kind(unit: str) -> str:
    """``key``, ``project``, ... : what a bucket is for."""
    return unit.split(":", 1)[0]


class Limiter:
    """Take ``cost`` from each of the caller's units; the first refusal wins (tokens already
    taken from the units before it stay taken: a refused request still cost its caller).
    Project units use ``project_policy`` (None: project units are not limited)."""

    def __init__(
        self, buckets: Buckets, policy: Policy, project_policy: Policy | None = None
    ) -> None:
        self.buckets = buckets
        self.policy = policy
        self.project_policy = project_policy

    def policy_for(self, unit: str) -> Policy | None:
        return self.project_policy if unit_kind(unit) == PROJECT else self.policy

    def take(self, units: Sequence[str], cost: float) -> Decision:
        limited = [(u, p) for u in units if (p := self.policy_for(u)) is not None]
        last: Decision | None = None
        for decision in self.buckets.take_each(limited, cost):  # one round trip
            if not decision.allowed:
                return decision
            if last is None or decision.remaining < last.remaining:
                last = decision
        assert last is not None
        return last


def headers(decision: Decision) -> dict[str, str]:
    """``RateLimit-Policy`` and ``RateLimit`` (draft-ietf-httpapi-ratelimit-headers), named by
    the bucket that decided (``"key"`` or ``"project"``: the one with the fewest tokens left)."""
    policy = decision.policy
    assert policy is not None
    name = unit_kind(decision.unit) or "key"
    return {
        "RateLimit-Policy": f'"{name}";q={policy.burst:g};w={policy.window}',
        "RateLimit": f'"{name}";r={max(0, math.floor(decision.remaining))};'
        f"t={math.ceil(decision.reset)}",
    }


def refusal(decision: Decision, cost: float, what: str, label: str = "") -> TooManyRequests:
    """The 429 for a refused ``decision``: names the limit (this key's or a project's, by
    ``label``), its settings and when to retry."""
    policy = decision.policy
    assert policy is not None
    retry = max(1, math.ceil(decision.retry_after))
    if unit_kind(decision.unit) == PROJECT:
        whose = f"project {label}" if label else "this key's project"
        limit, names = "project-rate", "PROJECT_RATE_LIMIT_BURST, PROJECT_RATE_LIMIT_PER_SECOND"
        whose += " (every key of the project together)"
    else:
        whose, limit, names = "this key", "rate", "RATE_LIMIT_BURST, RATE_LIMIT_PER_SECOND"
    return TooManyRequests(
        f"rate limit of {whose} exceeded: {what} costs {cost:g} tokens and "
        f"{decision.remaining:.1f} of {policy.burst:g} are left, refilled at {policy.rate:g}/s "
        f"({names}); retry after {retry} s",
        limit=limit,
        retry_after=retry,
        headers=headers(decision),
        holds_caller=True,
    )


def quota_units(principal: Any) -> list[str]:
    """The buckets a caller draws on: its key, then each project it holds a role on."""
    units = [f"key:{principal.id}"]
    roles = getattr(principal, "roles", None) or {}
    units.extend(f"{PROJECT}:{p}" for p in sorted(map(str, roles)))
    return units


def unit_labels(principal: Any) -> tuple[tuple[str, str], ...]:
    """Readable names of the caller's project units (for the 429 that names one)."""
    names = getattr(principal, "project_names", None) or {}
    return tuple((f"{PROJECT}:{p}", repr(n)) for p, n in names.items())


class RateLimits:
    """The process's limiter (None: limits off) and the costs charged beyond a request's own."""

    def __init__(self) -> None:
        self.limiter: Limiter | None = None
        self.expensive_cost: float = 0.0
        self.auth_attempts: Limiter | None = None

    def configure(
        self,
        limiter: Limiter | None,
        expensive_cost: float,
        auth_attempts: Limiter | None = None,
    ) -> None:
        self.limiter = limiter
        self.expensive_cost = float(expensive_cost)
        self.auth_attempts = auth_attempts

    @staticmethod
    def _auth_units(prefix: str, client: str) -> list[str]:
        return [f"auth-prefix:{prefix}", f"auth-client:{client}", f"auth-pair:{prefix}:{client}"]

    def check_auth_attempt(self, prefix: str, client: str) -> None:
        """Before an argon2 verification: refuse (429) when this client address, or this
        address on this key prefix, has no failed attempt left (AUTH_ATTEMPTS_BURST, refilled
        at AUTH_ATTEMPTS_PER_SECOND). The prefix's own bucket (every address together) refuses
        only addresses that failed on it themselves: ~10 bad secrets a second on a known
        prefix from elsewhere do not lock out the holder of the right secret (issue 39).
        Only failures spend attempts: :meth:`auth_failed`."""
        if self.auth_attempts is None:
            return
        policy = self.auth_attempts.policy
        units = self._auth_units(prefix, client)
        on_prefix, on_client, pair = self.auth_attempts.buckets.take_each(
            [(u, policy) for u in units], 0
        )  # a look at each
        failed_here = pair.remaining < policy.burst - 1e-6  # this address failed on the prefix
        short = [on_client, pair] + ([on_prefix] if failed_here else [])
        decision = min(short, key=lambda d: d.remaining)
        if decision.remaining < 1:
            retry = max(1, math.ceil((1 - decision.remaining) / policy.rate))
            raise TooManyRequests(
                f"too many failed API key attempts for this key prefix or address "
                f"(AUTH_ATTEMPTS_BURST={policy.burst:g}, AUTH_ATTEMPTS_PER_SECOND="
                f"{policy.rate:g}); retry after {retry} s",
                limit="auth-attempts",
                retry_after=retry,
                holds_caller=True,
            )

    def auth_failed(self, prefix: str, client: str) -> None:
        """A wrong or unknown key was presented: spend one attempt of the prefix, the address
        and the pair."""
        if self.auth_attempts is not None:
            policy = self.auth_attempts.policy
            for unit in self._auth_units(prefix, client):
                self.auth_attempts.buckets.take(unit, 1, policy)

    def charge(self, caller: Caller | None, cost: float, what: str) -> Decision | None:
        """Take ``cost`` from ``caller``'s buckets; raises 429 when short. None when the
        caller is exempt or limits are off."""
        if self.limiter is None or caller is None or caller.exempt or cost <= 0:
            return None
        return self.charge_units(caller, caller.charged_units(), cost, what)

    def charge_units(
        self, caller: Caller, units: Sequence[str], cost: float, what: str
    ) -> Decision | None:
        """Take ``cost`` from these of ``caller``'s buckets (429 when one is short). A project
        bucket's refusal does not hold the key (its requests to other projects go on)."""
        if self.limiter is None or caller.exempt or cost <= 0 or not units:
            return None
        decision = self.limiter.take(units, cost)
        if not decision.allowed:
            error = refusal(decision, cost, what, dict(caller.labels).get(decision.unit, ""))
            if unit_kind(decision.unit) == PROJECT:
                error.holds_caller = False
            raise error
        return decision


RATES = RateLimits()


def redis_buckets(url: str, prefix: str) -> Any:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    return RedisBuckets(client, prefix)
